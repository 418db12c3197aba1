//! The one-walk `block_drop_unreferenced` (csrc/drop_unreferenced.c) keeps exactly what jq's
//! own keeps, in the same order, for every filter of jq's own test file and for programs whose
//! definitions refer to each other, unused, in cycles or from inside closures.

use std::sync::Mutex;

use wasm_jq_c::{JQ_TESTS, kept_definitions};

/// The switches these tests turn (jq's own drop, the prepared builtins) are the C library's
/// globals: one test at a time.
static C: Mutex<()> = Mutex::new(());

fn filters() -> Vec<String> {
    let text = std::fs::read_to_string(JQ_TESTS).expect("jq-src has tests/jq.test");
    // A test is a filter line, an input line and result lines, separated by blank lines; `#`
    // lines are comments. The first line of each group is the filter (`%%FAIL` groups too).
    let mut out = Vec::new();
    for group in text.split("\n\n") {
        let mut lines = group
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty());
        match lines.next() {
            Some("%%FAIL") | Some("%%FAIL IGNORE MSG") => {
                out.extend(lines.next().map(String::from))
            }
            Some(filter) => out.push(filter.to_string()),
            None => {}
        }
    }
    out.extend(
        [
            ".",
            "def f: g; def g: f; 1",
            "def f: g; def g: f; f",
            "def a: 1; def b: a; def c: b; def d: c; [d, (def e: c; e)]",
            "def f(x): x | map(select(. > 1)) | add; f(.[])",
            "reduce range(10) as $i (0; . + $i) | tostring | ascii_downcase | test(\"4\")",
            "path(..) | paths | leaf_paths | walk(.) | env | input_filename | $__loc__",
            "def fac: if . <= 1 then 1 else . * (. - 1 | fac) end; [range(5) | fac]",
            "label $out | foreach .[] as $x (0; . + $x; if . > 3 then ., break $out else empty end)",
            "import \"a\" as a; 1",
        ]
        .map(String::from),
    );
    out
}

#[test]
fn the_one_walk_version_keeps_what_jqs_own_keeps() {
    let _c = C.lock().unwrap_or_else(|e| e.into_inner());
    let mut compared = 0;
    for filter in filters() {
        let ours = kept_definitions(&filter, false);
        let jqs = kept_definitions(&filter, true);
        assert_eq!(ours, jqs, "filter {filter:?}");
        compared += usize::from(ours.is_some());
    }
    assert!(compared > 300, "only {compared} filters compiled");
}

#[test]
fn unused_builtins_are_dropped_and_used_ones_kept() {
    let _c = C.lock().unwrap_or_else(|e| e.into_inner());
    let kept = kept_definitions("map(.)", false).unwrap();
    assert!(kept.lines().any(|l| l == "map/1"), "{kept}");
    assert!(
        !kept.lines().any(|l| l.starts_with("ascii_downcase/")),
        "{kept}"
    );
    let none = kept_definitions(".", false).unwrap();
    assert!(none.lines().count() < kept.lines().count(), "{none}");
}

#[test]
fn prepared_builtins_serve_one_program_and_the_next_makes_its_own() {
    let _c = C.lock().unwrap_or_else(|e| e.into_inner());
    assert!(wasm_jq_c::prepare_builtins());
    let prepared = wasm_jq_c::compile(b"map(. + 1) | nosuch").unwrap();
    let plain = wasm_jq_c::compile(b"map(. + 1) | nosuch").unwrap();
    assert_eq!(prepared, plain);
    assert!(!plain.program);
    assert!(
        plain.messages.contains("nosuch/0 is not defined"),
        "{}",
        plain.messages
    );
    assert!(wasm_jq_c::compile(b"map(. + 1)").unwrap().program);
}
