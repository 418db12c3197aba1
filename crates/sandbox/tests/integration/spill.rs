//! Head + tail output with the rest kept (docs/runs.md) — a stream past its cap shows its
//! first and last part and the whole of it goes to a spill file in the sandbox — through real
//! guests.

use wasmsand::{Limits, RunOptions, RunResult, Sandbox, SandboxOptions, Truncation};

fn with_limits(f: impl FnOnce(&mut Limits)) -> Sandbox {
    let mut limits = Limits {
        stdout_bytes: 4096,
        stderr_bytes: 4096,
        ..Limits::default()
    };
    f(&mut limits);
    Sandbox::new(SandboxOptions {
        limits,
        ..Default::default()
    })
}

fn run_opts(sb: &Sandbox, cmd: &str, opts: RunOptions) -> RunResult {
    sb.run_with(cmd, opts).unwrap()
}

fn seq_text(n: u32) -> String {
    (1..=n).map(|i| format!("{i}\n")).collect()
}

fn left_out(text: &str) -> u64 {
    let marker = text.lines().find(|l| l.starts_with("[... ")).unwrap();
    marker[5..].split(' ').next().unwrap().parse().unwrap()
}

#[test]
fn a_long_stdout_shows_head_and_tail_and_the_whole_is_in_the_sandbox() {
    let sb = with_limits(|_| {});
    let r = sb.run("seq 1 100000").unwrap();
    let whole = seq_text(100_000);
    assert_eq!(r.exit_code, 0);
    assert!(r.stdout.len() <= 4096, "{}", r.stdout.len());
    assert!(r.stdout.starts_with("1\n2\n3\n"), "{}", &r.stdout[..40]);
    assert!(r.stdout.ends_with("99999\n100000\n"));
    let path = r.spilled.as_ref().unwrap().stdout.clone().unwrap();
    assert_eq!(path, "/tmp/wasmsand-1.stdout");
    assert_eq!(r.spilled.as_ref().unwrap().stderr, None);
    assert!(r.stdout.contains(&format!(
        "bytes left out; the whole stream is in {path} ...]\n"
    )));
    assert!(r.truncated.unwrap().stdout);
    assert_eq!(r.usage.limits_hit, ["stdoutBytes"]);
    // Shown plus left out is the whole stream, less the marker line (and the newline added
    // before it when the head ended inside a line).
    let marker_len = r
        .stdout
        .lines()
        .find(|l| l.starts_with("[... "))
        .unwrap()
        .len() as u64
        + 1;
    let shown = r.stdout.len() as u64 - marker_len;
    let total = left_out(&r.stdout) + shown;
    assert!(total == whole.len() as u64 || total == whole.len() as u64 + 1);
    // The spill file is the whole stream, a file like any other: the receipt counts it and
    // the next command can read it.
    assert_eq!(sb.read_file(&path).unwrap(), whole.as_bytes());
    assert_eq!(r.usage.files_created, 1);
    assert_eq!(r.usage.bytes_written, whole.len() as u64);
    let next = sb
        .run(&format!("grep -c 7 {path}; tail -n 1 {path}"))
        .unwrap();
    assert_eq!(next.stdout, "40951\n100000\n");
    // A second spilling run takes the next free name.
    let r2 = sb.run("seq 1 100000 >&2").unwrap();
    assert_eq!(
        r2.spilled.unwrap().stderr.as_deref(),
        Some("/tmp/wasmsand-2.stderr")
    );
    assert!(r2.stderr.ends_with("100000\n"));
}

#[test]
fn output_within_the_cap_is_untouched_and_spills_nothing() {
    let sb = with_limits(|_| {});
    let r = sb.run("seq 1 100").unwrap();
    assert_eq!(r.stdout, seq_text(100));
    assert_eq!((r.truncated, r.spilled), (None, None));
    assert!(sb.list("/tmp").unwrap().is_empty());
}

#[test]
fn plain_truncation_keeps_the_prefix_and_writes_no_file() {
    let sb = with_limits(|_| {});
    let r = run_opts(
        &sb,
        "seq 1 100000",
        RunOptions {
            truncation: Truncation::Plain,
            ..Default::default()
        },
    );
    let whole = seq_text(100_000);
    assert_eq!(r.stdout, whole[..4096]);
    assert_eq!(r.spilled, None);
    assert!(r.truncated.unwrap().stdout);
    assert!(sb.list("/tmp").unwrap().is_empty());
}

#[test]
fn the_spill_file_stops_at_its_own_cap() {
    let sb = with_limits(|l| l.spill_bytes = 10_000);
    let r = sb.run("seq 1 100000").unwrap();
    let path = r.spilled.unwrap().stdout.unwrap();
    assert_eq!(
        sb.read_file(&path).unwrap(),
        &seq_text(100_000).as_bytes()[..10_000]
    );
    assert!(r.stdout.ends_with("100000\n"));
}

#[test]
fn spill_bytes_zero_keeps_head_and_tail_without_a_file() {
    let sb = with_limits(|l| l.spill_bytes = 0);
    let r = sb.run("seq 1 100000").unwrap();
    assert_eq!(r.spilled, None);
    assert!(r.stdout.starts_with("1\n2\n") && r.stdout.ends_with("100000\n"));
    assert!(r.stdout.contains(" bytes left out ...]\n"));
    assert!(sb.list("/tmp").unwrap().is_empty());
}

#[test]
fn a_spill_that_does_not_fit_the_filesystem_is_not_written() {
    let sb = with_limits(|l| l.fs_bytes = 50_000);
    let r = sb.run("seq 1 100000").unwrap();
    assert_eq!(r.spilled, None);
    assert!(r.stdout.ends_with("100000\n"));
    assert!(r.stdout.contains(" bytes left out ...]\n"));
    assert_eq!(r.usage.limits_hit, ["stdoutBytes", "fsBytes"]);
    assert!(sb.list("/tmp").unwrap().is_empty());
    // The sandbox is still usable.
    assert_eq!(sb.run("echo ok").unwrap().stdout, "ok\n");
}

#[test]
fn a_rolled_back_run_leaves_no_spill_file() {
    let sb = with_limits(|_| {});
    let r = run_opts(
        &sb,
        "seq 1 100000; false",
        RunOptions {
            atomic: true,
            ..Default::default()
        },
    );
    assert!(r.rolled_back);
    assert_eq!(r.spilled, None);
    assert!(r.stdout.ends_with("100000\n"));
    assert!(sb.list("/tmp").unwrap().is_empty());
}

#[test]
fn both_streams_spill_under_one_number_and_forks_have_their_own() {
    let sb = with_limits(|_| {});
    let fork = sb.fork().unwrap();
    let cmd = "seq 1 50000; seq 1 50000 >&2";
    let r = sb.run(cmd).unwrap();
    let s = r.spilled.unwrap();
    assert_eq!(s.stdout.as_deref(), Some("/tmp/wasmsand-1.stdout"));
    assert_eq!(s.stderr.as_deref(), Some("/tmp/wasmsand-1.stderr"));
    assert_eq!(
        sb.read_file("/tmp/wasmsand-1.stderr").unwrap(),
        seq_text(50_000).as_bytes()
    );
    let f = fork.run(cmd).unwrap();
    assert_eq!(
        f.spilled.unwrap().stdout.as_deref(),
        Some("/tmp/wasmsand-1.stdout")
    );
}
