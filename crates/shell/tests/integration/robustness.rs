//! The parser must never panic, never overflow the stack and finish on any input. What the
//! pathological inputs cost is measured by the `parse` group of the `sandbox` benchmark (tests
//! assert no time bound); a blow-up would show here as a test nextest's hang guard ends.

use proptest::prelude::*;
use wasmsand_shell::{MAX_DEPTH, parse};

/// Runs `f` on a thread with a 2 MiB stack (Rust's default for spawned threads): deep input
/// must hit the depth limit before the stack runs out. Measured: one nesting level costs up to
/// about 5 KiB of stack in this build, so `MAX_DEPTH` = 200 needs about 1 MiB.
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(2 * 1024 * 1024)
        .spawn(f)
        .expect("spawn")
        .join()
        .expect("parser thread panicked or overflowed")
}

fn assert_depth_error(src: String) {
    let r = on_small_stack(move || parse(&src));
    let e = r.expect_err("deep nesting must fail");
    assert_eq!(e.message, "maximum nesting depth exceeded");
}

// Threat: T-PARSER (docs/security.md)
#[test]
fn deep_nesting_hits_the_limit_on_a_small_stack() {
    let n = 100_000;
    for unit in [
        "( ", "$(", "{ ", "$((", "((", "`", "${x:-", "\"$(", "[[ ( ", "[[ ! ", "if ", "while ",
        "$((-", "$((a=", "$((2**",
    ] {
        let src = match unit {
            // Nested backquotes need doubling escapes, so they cannot nest deeply anyway.
            "`" => continue,
            "[[ ( " | "[[ ! " => format!("[[ {}", unit[3..].repeat(n)),
            _ => unit.repeat(n),
        };
        assert_depth_error(src);
    }
    // Brace expansions nested past the limit.
    let braces = "{a,".repeat(MAX_DEPTH + 5) + &"}".repeat(MAX_DEPTH + 5);
    assert_depth_error(format!("echo {braces}"));
    // Function bodies and case items nest too.
    assert_depth_error("f() { ".repeat(n));
    assert_depth_error("case x in x) ".repeat(n));
}

#[test]
fn nesting_below_the_limit_parses_on_a_small_stack() {
    let d = MAX_DEPTH - 10;
    for (open, close) in [("( ", ")"), ("$(", ")"), ("{ ", ";}"), ("$((", "))")] {
        let src = format!("echo {}x{}", open.repeat(d), close.repeat(d));
        let src = if open == "( " || open == "{ " {
            format!("{}echo x{}", open.repeat(d), close.repeat(d))
        } else {
            src
        };
        let r = on_small_stack(move || parse(&src).map(|_| ()));
        assert!(r.is_ok(), "{open}: {r:?}");
    }
}

// Threat: T-PARSER (docs/security.md)
#[test]
fn long_flat_input_parses() {
    let cases = [
        "echo a; ".repeat(8000),
        "a && ".repeat(10_000) + "b",
        "a | ".repeat(10_000) + "b",
        "x".repeat(64 * 1024),
        "{".repeat(64 * 1024),
        "{a,".repeat(20_000),
        "((".repeat(100) + &"(".repeat(30_000),
        "$".repeat(64 * 1024),
        "\\".repeat(64 * 1024),
        "1+".repeat(30_000),
        "echo $((".to_string() + &"1+".repeat(30_000) + "1))",
        "cat <<E\n".repeat(3000),
        "a=(".to_string() + &"x ".repeat(30_000) + ")",
        "echo ".to_string() + &"${x:-".repeat(150) + &"}".repeat(150) + " ",
    ];
    for src in cases {
        let _ = on_small_stack(move || parse(&src).map(|_| ()));
    }
}

#[test]
fn repeated_failed_arith_attempts_parse() {
    // Each `((` that is really nested subshells is tried once as arithmetic, then remembered.
    let src = "((".repeat(90) + "echo a) " + &")".repeat(179);
    let _ = on_small_stack(move || parse(&src).map(|_| ()));
}

#[test]
fn repeated_failed_length_attempts_parse() {
    // Each `${#a[` whose subscript closes but no `}` follows is a bad substitution, tried once
    // as a length and then remembered: found by the shell_parse fuzzer, where 40 of them took
    // longer than the 30 s timeout, the work doubling with each.
    let src = "${#a[>}; ".repeat(64) + "]v";
    let parsed = on_small_stack(move || parse(&src).map(|_| ()));
    assert!(
        parsed.is_ok(),
        "bash parses it: each `${{#a[>}}` is a bad substitution"
    );
}

const SAMPLES: &[&str] = &[
    "A=1 b=(x [2]=y) cmd a{b,c}d 2>&1 | cat -n && echo $((1+2*3)) || f",
    "cat <<E1; cat <<'E2'\none $x\nE1\ntwo\nE2\n",
    "echo $(case x in x) echo hi;; esac) ${a:-b} ${#a[@]} ${!p*} ${x//a/b} `echo hi`",
    "if [[ -f x && $a =~ ^(a|b)$ ]]; then echo \"q $y\" 'z'; elif true; then :; else false; fi",
    "f() { local x=$1; return 2; } > /dev/null\nfunction g { f \"$@\"; }",
    "for ((i=0; i<3; i++)); do echo $i; done; for x in *.txt; do echo ${x%.txt}; done",
    "while read -r l; do echo \"$l\"; done < <(ls) &\nwait $!",
    "case $1 in (a|b) x;; c*) y ;& *) z;;& esac",
    "declare -A m=([k]=v); echo ${m[k]} ${x:1:2} $'\\n\\t' ~/a {1..10..2}",
    "(( x += 2, y = x ? 1 : 0 )); echo $[x*2] ${#} $# $? $$",
];

fn mutate(src: &str, edits: &[(usize, u8, u8)]) -> String {
    let mut b = src.as_bytes().to_vec();
    const ALPHABET: &[u8] = b"(){}[]<>|&;$`'\"\\#!*?~=+-,.:/ \n\tx0\xc3\xa9";
    for &(pos, kind, ch) in edits {
        let c = ALPHABET[ch as usize % ALPHABET.len()];
        let p = if b.is_empty() { 0 } else { pos % (b.len() + 1) };
        match kind % 3 {
            0 => b.insert(p, c),
            1 if p < b.len() => {
                b.remove(p);
            }
            _ if p < b.len() => b[p] = c,
            _ => b.push(c),
        }
    }
    String::from_utf8_lossy(&b).into_owned()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn random_strings_never_panic(s in "[ -~\\n\\t\u{e9}]{0,200}") {
        let _ = parse(&s);
    }

    #[test]
    fn shell_alphabet_never_panics(s in "[(){}\\[\\]<>|&;$`'\"\\\\#!*?~=+,: \\nxa0-]{0,300}") {
        let _ = parse(&s);
    }

    #[test]
    fn mutated_scripts_never_panic(
        which in 0..SAMPLES.len(),
        edits in proptest::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 1..8),
    ) {
        let src = mutate(SAMPLES[which], &edits);
        let _ = parse(&src);
    }
}

#[test]
fn samples_parse() {
    for s in SAMPLES {
        assert!(parse(s).is_ok(), "{s}: {:?}", parse(s));
    }
}
