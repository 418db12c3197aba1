//! Mangled scripts (the conformance cases cut, spliced and sprinkled with shell punctuation)
//! must never crash the interpreter: every run ends with a result, never an internal error,
//! and the sandbox keeps working.

use serde::Deserialize;
use wasmsand::{Limits, RunOptions, Sandbox, SandboxOptions};

#[derive(Deserialize)]
struct Case {
    script: String,
}

/// A small deterministic generator (xorshift), so a failure names a reproducible case.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const BITS: &[&str] = &[
    "$(", ")", "${", "}", "((", "))", "[[", "]]", "'", "\"", "`", "\\", "|", "&", ";", "<<", "<<<",
    ">&", "{a,b}", "$((1/0))", "${x:?}", "$@", "*", "\n", "fi", "done", "esac", "!", "=~", "${#",
    "[", "]", "~", "$'\\x", "<(", "|&", ";;", "&&", "||", "eval ", "f(){ ",
];

fn mutate(rng: &mut Rng, s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out: Vec<char> = chars.clone();
    for _ in 0..1 + rng.below(3) {
        match rng.below(3) {
            0 if !out.is_empty() => {
                let at = rng.below(out.len());
                out.truncate(at);
            }
            1 => {
                let at = rng.below(out.len() + 1);
                let bit: Vec<char> = BITS[rng.below(BITS.len())].chars().collect();
                out.splice(at..at, bit);
            }
            _ if out.len() > 2 => {
                let a = rng.below(out.len());
                let b = rng.below(out.len());
                out.swap(a, b);
            }
            _ => {}
        }
    }
    out.into_iter().collect()
}

#[test]
fn mangled_scripts_never_crash_the_interpreter() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/conformance/expected.json"
    );
    let cases: Vec<Case> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let new_sandbox = || {
        Sandbox::new(SandboxOptions {
            limits: Limits {
                timeout_ms: 2_000,
                ..Limits::default()
            },
            ..Default::default()
        })
    };
    let mut sb = new_sandbox();
    // MUTATION_SEED / MUTATION_COUNT explore further without changing what CI runs.
    let seed = std::env::var("MUTATION_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_1234_abcd_0001u64);
    let count = std::env::var("MUTATION_COUNT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(600);
    let mut rng = Rng(seed | 1);
    for i in 0..count {
        let base = &cases[rng.below(cases.len())].script;
        let script = mutate(&mut rng, base);
        let r = sb
            .run_with(
                &script,
                RunOptions {
                    timeout_ms: Some(2_000),
                    ..Default::default()
                },
            )
            .unwrap();
        assert!(
            !r.stderr.contains("internal error"),
            "case {i}: {script:?}\n{}",
            r.stderr
        );
        // Reset whatever the script left behind (aliases, functions named like builtins,
        // traps, options, cwd; `HOME` may have been reassigned) and check the sandbox still
        // answers. Aliases go in a run of their own: they apply to the line they are on.
        sb.run("\\unalias -a; \\shopt -u expand_aliases").unwrap();
        let check = sb
            .run("unset -f : echo printf cd true false set exit; trap - EXIT ERR RETURN DEBUG; set +euo pipefail; set +f; cd /home/user; echo alive")
            .unwrap();
        if check.stdout.ends_with("alive\n") {
            continue;
        }
        // Under `extdebug` a DEBUG trap that fails skips the command it runs before, `trap`
        // and `shopt` included: a trap whose text no longer parses leaves a shell that runs
        // nothing, in bash as here. The only state a script may leave that no command can
        // undo; the next cases get a new sandbox.
        assert!(
            script.contains("extdebug") && script.contains("DEBUG"),
            "after case {i}: {script:?}: {check:?}"
        );
        sb = new_sandbox();
    }
}
