use std::path::PathBuf;
use std::time::Duration;

use wasmsand_vm::{AccelChoice, Machine, MachineConfig, RunOutcome, RunRequest, Stream};

/// The image under test, or `None` (the test is skipped) when none is named.
pub fn image() -> Option<PathBuf> {
    match std::env::var_os("WASMSAND_TEST_VM_IMAGE") {
        Some(p) => Some(PathBuf::from(p)),
        None => {
            eprintln!("skipped: WASMSAND_TEST_VM_IMAGE is not set (scripts/test.sh --only vm)");
            None
        }
    }
}

pub fn state_dir() -> PathBuf {
    std::env::var_os("WASMSAND_TEST_VM_STATE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("vm-state"))
}

pub fn config(image: PathBuf) -> MachineConfig {
    let mut cfg = MachineConfig::new(image);
    cfg.state_dir = state_dir();
    cfg.accel = match std::env::var("WASMSAND_TEST_VM_ACCEL").as_deref() {
        Ok("tcg") => AccelChoice::Tcg,
        Ok("kvm") => AccelChoice::Kvm,
        _ => AccelChoice::Auto,
    };
    cfg
}

/// A machine on the test image, or `None` when there is none.
pub fn machine() -> Option<Machine> {
    let image = image()?;
    Some(Machine::start(config(image)).expect("the machine starts"))
}

/// What one command did.
pub struct Ran {
    pub outcome: RunOutcome,
    pub stdout: String,
    pub stderr: String,
}

pub fn run_req(m: &Machine, req: &RunRequest<'_>) -> Ran {
    let mut out = Vec::new();
    let mut err = Vec::new();
    let outcome = m
        .run(req, &mut |s, b| match s {
            Stream::Stdout => out.extend_from_slice(b),
            Stream::Stderr => err.extend_from_slice(b),
        })
        .expect("the run is answered");
    Ran {
        outcome,
        stdout: String::from_utf8_lossy(&out).into_owned(),
        stderr: String::from_utf8_lossy(&err).into_owned(),
    }
}

/// `command` with a time limit of `secs` seconds.
pub fn sh(m: &Machine, command: &str, secs: u64) -> Ran {
    run_req(m, &RunRequest::new(command, Duration::from_secs(secs)))
}

/// Runs `command` and returns its stdout, failing on a non-zero exit.
pub fn ok(m: &Machine, command: &str) -> String {
    let r = sh(m, command, 60);
    assert_eq!(
        r.outcome.exit_code,
        Some(0),
        "{command}: {:?}\nstdout: {}\nstderr: {}",
        r.outcome,
        r.stdout,
        r.stderr
    );
    r.stdout
}
