//! Every input kept for a fuzz target, run through its contract without a fuzzer: the seed
//! corpora (`fuzz/corpus/<target>/`) and the inputs that once broke something
//! (`fuzz/regressions/<target>/`, named after what they found).

use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

fn inputs(kind: &str, target: &str) -> Vec<PathBuf> {
    let dir = fuzz_dir().join(kind).join(target);
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

fn replay(target: &str) {
    let run = wasmsand_fuzz::target(target).expect("a known target");
    let mut n = 0;
    for kind in ["corpus", "regressions"] {
        for path in inputs(kind, target) {
            let data = std::fs::read(&path).expect("a readable input");
            eprintln!("{}", path.display());
            run(&data);
            n += 1;
        }
    }
    assert!(
        n > 0,
        "no inputs kept for {target} under {}",
        fuzz_dir().display()
    );
}

#[test]
fn every_target_has_a_fuzz_binary() {
    for (name, _) in wasmsand_fuzz::TARGETS {
        let src = fuzz_dir().join("fuzz_targets").join(format!("{name}.rs"));
        assert!(src.is_file(), "{} is missing", src.display());
    }
}

#[test]
fn shell_parse() {
    replay("shell_parse");
}

#[test]
fn shell_print() {
    replay("shell_print");
}

#[test]
fn shell_run() {
    replay("shell_run");
}

#[test]
fn stdio() {
    replay("stdio");
}

#[test]
fn upload() {
    replay("upload");
}

#[test]
fn range() {
    replay("range");
}

#[test]
fn ws_stdin() {
    replay("ws_stdin");
}

#[test]
fn state_import() {
    replay("state_import");
}

#[test]
fn jq_filter() {
    replay("jq_filter");
}

#[test]
fn guest_args() {
    replay("guest_args");
}
