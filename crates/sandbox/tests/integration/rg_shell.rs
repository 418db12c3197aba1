//! `rg` as agents call it, inside shell scripts: the same script runs in a sandbox and in the
//! host's bash with Debian's ripgrep in an empty directory (the script makes its own files),
//! and stdout and status must match. Covers what the exec-level tests cannot: a pipe as
//! stdin, no stdin at the top of a run (the directory is searched), `cd` into a repository's
//! subdirectory (the root's `.gitignore` still applies) and a reader that stops early.

use wasmsand::{Sandbox, SandboxOptions};

const SETUP: &str = "mkdir -p p/.git p/src/gen p/docs && printf 'gen/\\n*.log\\n' > p/.gitignore \
    && printf 'fn main() { todo!() }\\n// TODO: one\\n' > p/src/main.rs \
    && printf 'TODO generated\\n' > p/src/gen/out.rs && printf 'TODO log\\n' > p/src/x.log \
    && printf '# Doc\\nTODO: docs\\n' > p/docs/README.md && ";

fn check(script: &str) {
    let script = format!("{SETUP}{script}");
    let sb = Sandbox::new(SandboxOptions::default());
    let ours = sb.run(&script).unwrap();
    let dir = tempfile::tempdir().unwrap();
    crate::host_tools::require_listed(&["rg"]);
    let host = crate::host_tools::host_tool("bash")
        .args(["-c", &script])
        .current_dir(dir.path())
        .env_clear()
        .env("LC_ALL", "C")
        .env("HOME", dir.path())
        .env("PATH", "/usr/bin:/bin")
        .output()
        .expect("host bash");
    assert_eq!(
        ours.stdout,
        String::from_utf8_lossy(&host.stdout),
        "stdout of {script:?} (sandbox stderr {:?}, host stderr {:?})",
        ours.stderr,
        String::from_utf8_lossy(&host.stderr)
    );
    assert_eq!(
        ours.exit_code,
        host.status.code().unwrap_or(-1),
        "status of {script:?} (sandbox stderr {:?})",
        ours.stderr
    );
}

#[test]
fn rg_in_scripts_matches_ripgrep() {
    for script in [
        // No stdin at the top of a run: the current directory is searched.
        "cd p && rg --sort path -n TODO; echo status $?",
        // The repository root's .gitignore applies from a subdirectory.
        "cd p/src && rg --sort path TODO; echo status $?",
        "cd p/src && rg --sort path --files",
        "cd p/src && rg --sort path -c TODO ..",
        // A pipe is searched, not the directory.
        "printf 'a TODO\\nb\\n' | rg TODO; echo status $?",
        "cat p/src/main.rs | rg -n -o 'TODO|todo'",
        "printf 'x\\n' | rg TODO; echo status $?",
        // A reader that stops after one line.
        "rg --sort path TODO p | head -1; echo status ${PIPESTATUS[0]}",
        // Results feeding other tools.
        "rg --sort path -l TODO p | wc -l",
        "rg --sort path --files p | xargs -n1 basename",
        "rg -q TODO p && echo found",
        "rg nothing-here p || echo none $?",
    ] {
        check(script);
    }
}
