//! The conformance suite: every case of `tests/conformance/*.cases`, run through
//! `Sandbox::run`, must give the stdout and exit status real bash 5.2 + GNU coreutils gave on
//! the reference machine (`scripts/gen-conformance.py` regenerates `expected.json`).

use serde::Deserialize;
use wasmsand::{Sandbox, SandboxOptions};

#[derive(Deserialize)]
struct Case {
    file: String,
    name: String,
    script: String,
    stdout: String,
    exit: i32,
}

/// `CONFORMANCE_FILE` runs another corpus of the same shape instead (a hold-out recorded the
/// same way, say), so the comparison logic is the one the checked-in suite uses.
fn cases() -> (Vec<Case>, bool) {
    let (path, own) = match std::env::var("CONFORMANCE_FILE") {
        Ok(p) => (p, false),
        Err(_) => (
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/conformance/expected.json"
            )
            .to_owned(),
            true,
        ),
    };
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let cases = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    (cases, own)
}

#[test]
fn conformance_suite_matches_bash() {
    let (cases, own) = cases();
    assert!(
        !own || cases.len() >= 300,
        "the suite has {} cases",
        cases.len()
    );
    let only = std::env::var("CONFORMANCE_ONLY").ok();
    let mut failures = Vec::new();
    let mut ran = 0;
    for c in &cases {
        if let Some(o) = &only
            && !c.name.contains(o.as_str())
        {
            continue;
        }
        ran += 1;
        let sb = Sandbox::new(SandboxOptions::default());
        let r = sb.run(&c.script).expect("sandbox alive");
        if r.stdout != c.stdout || r.exit_code != c.exit {
            failures.push(format!(
                "--- {} ({})\n{}\n--- expected (exit {}):\n{}--- got (exit {}):\n{}--- stderr:\n{}",
                c.name, c.file, c.script, c.exit, c.stdout, r.exit_code, r.stdout, r.stderr
            ));
        }
    }
    if !failures.is_empty() {
        for f in &failures {
            eprintln!("{f}");
        }
        panic!(
            "{} of {ran} conformance cases differ from bash",
            failures.len()
        );
    }
}
