//! The limits a process table and a descriptor table enforce: `openFiles` (per program),
//! `sessionOpenFiles` (the programs of one sandbox together) and `pids` (processes alive at
//! once) — each refused as a kernel would refuse it, named in the receipt, and leaving a
//! sandbox that works.

use wasmsand::{ErrorClass, Limits, ProcessError, Sandbox, SandboxError, SandboxOptions};

fn with_limits(f: impl FnOnce(&mut Limits)) -> Sandbox {
    let mut limits = Limits::default();
    f(&mut limits);
    Sandbox::new(SandboxOptions {
        limits,
        ..Default::default()
    })
}

/// Opens files under `prefix` until an `OSError`; prints its errno's name and how many were
/// open.
fn open_until_refused(prefix: &str) -> String {
    format!(
        "python3 -c '
import errno
fs = []
try:
    while True:
        fs.append(open(\"{prefix}%d\" % len(fs), \"w\"))
except OSError as e:
    print(errno.errorcode[e.errno], len(fs))
'"
    )
}

fn errno_and_count(stdout: &str) -> (String, usize) {
    let mut it = stdout.split_whitespace();
    let errno = it.next().map(String::from);
    let count = it.next().and_then(|s| s.parse().ok());
    match (errno, count) {
        (Some(e), Some(n)) => (e, n),
        _ => panic!("unexpected output: {stdout:?}"),
    }
}

// Threat: T-EXHAUST-PROCESSES (docs/security.md)
#[test]
fn a_program_gets_emfile_at_its_cap_and_goes_on() {
    let sb = with_limits(|l| l.open_files = 64);
    let script = "python3 -c '
import errno
fs = []
try:
    while True:
        fs.append(open(\"/tmp/f%d\" % len(fs), \"w\"))
except OSError as e:
    print(errno.errorcode[e.errno], len(fs))
for f in fs:
    f.close()
again = [open(\"/tmp/f%d\" % i) for i in range(20)]
print(\"again\", len(again))
'";
    let r = sb.run(script).unwrap();
    assert_eq!(r.exit_code, 0, "{r:?}");
    let mut lines = r.stdout.lines();
    let first = lines.next().unwrap_or_default();
    // EMFILE in WASI's numbering (33, musl's "No file descriptors available"), not Linux's.
    assert!(first.starts_with("EMFILE "), "{r:?}");
    let count: usize = first.rsplit(' ').next().unwrap().parse().unwrap();
    // The cap counts its standard streams, the roots and what python itself holds.
    assert!((40..64).contains(&count), "{r:?}");
    assert_eq!(lines.next(), Some("again 20"), "{r:?}");
    assert_eq!(r.usage.limits_hit, ["openFiles"]);
    assert_eq!(r.error_class, None);

    let r = sb
        .run("python3 -c 'print(open(\"/tmp/f1\").name)'")
        .unwrap();
    assert_eq!(r.stdout, "/tmp/f1\n", "{r:?}");
    assert!(r.usage.limits_hit.is_empty(), "{r:?}");
}

#[test]
fn the_default_cap_is_the_ulimit_the_service_reports() {
    let sb = Sandbox::new(SandboxOptions::default());
    let r = sb.run(&open_until_refused("/tmp/g")).unwrap();
    let (errno, count) = errno_and_count(&r.stdout);
    assert_eq!(errno, "EMFILE", "{r:?}");
    assert!((1000..1024).contains(&count), "{r:?}");
    assert_eq!(r.usage.limits_hit, ["openFiles"]);
}

#[test]
fn programs_running_together_share_the_sandboxs_descriptors() {
    let sb = with_limits(|l| l.session_open_files = 40);
    // The first stage holds 20 files open until the second has taken what is left: it
    // writes until the pipe breaks, which happens when the second stage exits.
    let holder = "python3 -c '
import os, sys
fs = [open(\"/tmp/a%d\" % i, \"w\") for i in range(20)]
sys.stdout.write(\"ready\\n\")
sys.stdout.flush()
try:
    while True:
        sys.stdout.write(\"x\" * 65536)
        sys.stdout.flush()
except OSError:
    os._exit(0)
'";
    let taker = "python3 -c '
import errno, sys
sys.stdin.readline()
fs = []
try:
    while True:
        fs.append(open(\"/tmp/b%d\" % len(fs), \"w\"))
except OSError as e:
    print(errno.errorcode[e.errno], len(fs))
'";
    let r = sb.run(&format!("{holder} | {taker}")).unwrap();
    let (errno, count) = errno_and_count(&r.stdout);
    assert_eq!(errno, "EMFILE", "{r:?}");
    // What the first stage left of the 40 (alone it would have had them all).
    assert_eq!(count, 20, "{r:?}");
    assert_eq!(r.usage.limits_hit, ["sessionOpenFiles"], "{r:?}");

    // Both programs ended and gave their descriptors back.
    let r = sb.run(&open_until_refused("/tmp/c")).unwrap();
    let (errno, count) = errno_and_count(&r.stdout);
    assert_eq!(errno, "EMFILE", "{r:?}");
    assert!(count >= 30, "{r:?}");
}

/// The run ended as bash -c ends when `fork` fails, the receipt names `pids`, and the
/// sandbox's slots are free again.
fn assert_refused_fork(r: &wasmsand::RunResult) {
    assert_eq!(r.exit_code, 126, "{r:?}");
    assert_eq!(r.error_class, Some(ErrorClass::LimitExceeded), "{r:?}");
    assert_eq!(r.usage.limits_hit, ["pids"], "{r:?}");
    assert!(
        r.stderr.contains("fork: Resource temporarily unavailable"),
        "{r:?}"
    );
}

// Threat: T-EXHAUST-PROCESSES (docs/security.md)
#[test]
fn a_fork_flood_stops_at_the_pids_limit() {
    let sb = with_limits(|l| l.pids = 32);
    let r = sb
        .run("n=0; while :; do sleep 10 & n=$((n+1)); echo $n > /tmp/n; done")
        .unwrap();
    assert_refused_fork(&r);
    assert_eq!(&sb.read_file("/tmp/n").unwrap()[..], b"32\n");

    // Every slot came back: the same flood stops at the same place, and a pipeline runs.
    let r = sb
        .run("n=0; while :; do sleep 10 & n=$((n+1)); echo $n > /tmp/n; done")
        .unwrap();
    assert_refused_fork(&r);
    assert_eq!(&sb.read_file("/tmp/n").unwrap()[..], b"32\n");
    let r = sb.run("echo ok | cat | wc -l").unwrap();
    assert_eq!((r.exit_code, r.stdout.as_str()), (0, "1\n"), "{r:?}");
    assert!(r.usage.limits_hit.is_empty(), "{r:?}");
}

#[test]
fn a_pipeline_of_a_thousand_stages_stops_at_the_default_limit() {
    let sb = Sandbox::new(SandboxOptions::default());
    // Every stage waits for the one before, which waits for the first: all are alive at once.
    let pipeline = format!("sleep 30{}", " | read x".repeat(999));
    let r = sb.run(&pipeline).unwrap();
    assert_refused_fork(&r);
    assert!(r.stderr.contains("pids limit: 256"), "{r:?}");
    let r = sb.run(&format!("echo ok{}", " | cat".repeat(100))).unwrap();
    assert_eq!((r.exit_code, r.stdout.as_str()), (0, "ok\n"), "{r:?}");
}

#[test]
fn background_processes_hold_slots_of_the_same_limit() {
    let sb = with_limits(|l| l.pids = 3);
    let procs: Vec<_> = (0..2)
        .map(|_| sb.spawn("sleep 60", Default::default()).unwrap())
        .collect();
    // One slot left: a pipeline of two stages needs one thread of its own, three need two.
    let r = sb.run("echo ok | cat").unwrap();
    assert_eq!((r.exit_code, r.stdout.as_str()), (0, "ok\n"), "{r:?}");
    let r = sb.run("echo ok | cat | cat").unwrap();
    assert_refused_fork(&r);
    let third = sb.spawn("sleep 60", Default::default()).unwrap();
    assert!(matches!(
        sb.spawn("sleep 60", Default::default()),
        Err(SandboxError::Process(ProcessError::PidsExhausted(3)))
    ));
    // A fork is a sandbox of its own, with slots of its own.
    let f = sb.fork().unwrap();
    let r = f.run("echo ok | cat | cat").unwrap();
    assert_eq!((r.exit_code, r.stdout.as_str()), (0, "ok\n"), "{r:?}");
    for p in procs.iter().chain([&third]) {
        p.kill();
        p.wait(None).unwrap();
    }
    let r = sb.run("echo ok | cat | cat | cat").unwrap();
    assert_eq!((r.exit_code, r.stdout.as_str()), (0, "ok\n"), "{r:?}");
}

#[test]
fn ulimit_reports_the_sandboxs_limits_and_lowers_the_programs_cap() {
    let sb = with_limits(|l| {
        l.open_files = 64;
        l.pids = 40;
    });
    let r = sb.run("ulimit -n; ulimit -u").unwrap();
    assert_eq!(r.stdout, "64\n40\n", "{r:?}");
    // As RLIMIT_NOFILE, inherited by the programs; raising it again cannot pass the sandbox's.
    let r = sb
        .run(&format!("(ulimit -n 16; {})", open_until_refused("/tmp/u")))
        .unwrap();
    let (errno, count) = errno_and_count(&r.stdout);
    assert_eq!(errno, "EMFILE", "{r:?}");
    assert!(count < 16, "{r:?}");
    let r = sb
        .run(&format!(
            "ulimit -Sn 4096; {}",
            open_until_refused("/tmp/v")
        ))
        .unwrap();
    let (_, count) = errno_and_count(&r.stdout);
    assert!((16..64).contains(&count), "{r:?}");
    assert_eq!(r.stderr, "", "{r:?}");
}
