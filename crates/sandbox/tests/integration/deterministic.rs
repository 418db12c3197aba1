//! Deterministic mode (docs/runs.md) — the same script on the same state prints the same
//! bytes in fresh sandboxes and in a fork, and not without the mode. Real guests throughout
//! (coreutils `date`, `mktemp`, `od`, CPython).

use wasmsand::{DETERMINISTIC_PID, Determinism, Sandbox, SandboxOptions};

const SCRIPT: &str = "date; date +%s.%N; echo $RANDOM $RANDOM $$; mktemp; mktemp -d; \
    od -An -N8 -tx1 /dev/urandom; \
    python3 -c 'import uuid,random,time,os; print(uuid.uuid4(), random.random(), time.time(), os.urandom(4).hex())'";

fn deterministic(seed: u64) -> Sandbox {
    let sb = Sandbox::new(SandboxOptions::default());
    sb.set_deterministic(Some(Determinism {
        seed,
        ..Determinism::default()
    }))
    .unwrap();
    sb
}

fn out(sb: &Sandbox) -> String {
    let r = sb.run(SCRIPT).unwrap();
    assert_eq!(r.exit_code, 0, "{}", r.stderr);
    assert_eq!(r.stderr, "");
    r.stdout
}

#[test]
fn the_same_script_prints_the_same_bytes_in_fresh_sandboxes_and_a_fork() {
    let a = deterministic(7);
    let fork = a.fork().unwrap();
    let first = out(&a);
    assert_eq!(first, out(&deterministic(7)));
    assert_eq!(first, out(&fork));
    // What it printed is what the mode promises: the start date in UTC, $$ fixed.
    let lines: Vec<&str> = first.lines().collect();
    assert_eq!(lines[0], "Mon Jan  1 00:00:00 UTC 2024");
    assert!(lines[1].starts_with("1704067200.00"), "{}", lines[1]);
    assert!(lines[2].ends_with(&format!(" {DETERMINISTIC_PID}")));
    assert!(lines[3].starts_with("/tmp/tmp."));
    // A second run goes on from where the first left the clock and the stream.
    assert_ne!(out(&a), first);
    // Another seed, another stream; no mode, no repetition.
    assert_ne!(out(&deterministic(8)), first);
    let plain = Sandbox::new(SandboxOptions::default());
    let plain2 = Sandbox::new(SandboxOptions::default());
    assert_ne!(out(&plain), out(&plain2));
}

#[test]
fn the_mode_can_be_turned_off() {
    let sb = deterministic(1);
    assert!(sb.is_deterministic().unwrap());
    sb.set_deterministic(None).unwrap();
    assert!(!sb.is_deterministic().unwrap());
    let year: i32 = sb.run("date +%Y").unwrap().stdout.trim().parse().unwrap();
    assert!(year >= 2025);
}
