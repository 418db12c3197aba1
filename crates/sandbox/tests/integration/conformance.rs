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

/// The cases of `tests/conformance/*.cases` as `scripts/gen-conformance.py` reads them: a case
/// starts at a `### name` line and its script runs to the next one, trailing blank lines dropped;
/// before the first case only comments and blank lines.
fn cases_in_sources() -> Vec<(String, String, String)> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/conformance");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "cases"))
        .collect();
    files.sort();
    let mut cases = Vec::new();
    for path in files {
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        let mut current: Option<(String, Vec<&str>)> = None;
        let mut finish = |current: Option<(String, Vec<&str>)>| {
            if let Some((name, mut lines)) = current {
                while lines.last().is_some_and(|l| l.trim().is_empty()) {
                    lines.pop();
                }
                cases.push((file.clone(), name, lines.join("\n")));
            }
        };
        for line in text.split('\n') {
            if let Some(name) = line.strip_prefix("###") {
                finish(current.take());
                current = Some((name.trim().to_owned(), Vec::new()));
            } else if let Some((_, lines)) = &mut current {
                lines.push(line);
            }
        }
        finish(current);
    }
    cases
}

/// `expected.json` is what the generator wrote from the `.cases` files as they are: a case
/// added, renamed or edited without `python3 scripts/gen-conformance.py` fails here, so the
/// suite never runs an old script under a new name.
#[test]
fn expected_json_is_generated_from_the_cases_as_they_are() {
    let (expected, own) = cases();
    if !own {
        return;
    }
    let sources = cases_in_sources();
    let recorded: Vec<(String, String, String)> = expected
        .into_iter()
        .map(|c| (c.file, c.name, c.script))
        .collect();
    let stale: Vec<String> = sources
        .iter()
        .filter(|c| !recorded.contains(c))
        .map(|(f, n, _)| format!("{f}: {n} (new or edited)"))
        .chain(
            recorded
                .iter()
                .filter(|c| !sources.contains(c))
                .map(|(f, n, _)| format!("{f}: {n} (removed or edited)")),
        )
        .collect();
    assert!(
        stale.is_empty(),
        "expected.json is stale; run `python3 scripts/gen-conformance.py`:\n{}",
        stale.join("\n")
    );
    assert_eq!(
        sources, recorded,
        "expected.json lists the cases in another order than the .cases files; \
         run `python3 scripts/gen-conformance.py`"
    );
}
