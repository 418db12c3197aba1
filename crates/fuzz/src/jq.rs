//! `jq_filter`: jq's filter parser and compiler (jq 1.6's C, the `jq` guest's, built natively
//! and instrumented), held to what jq's command line promises: a filter either becomes a
//! program with nothing said, or is refused with messages that end in `jq: N compile
//! error(s)`, after which jq exits 3. Never a crash, an abort (jq's C asserts) or a hang.

use wasm_jq_c as ffi;

/// Filters that load modules are not compiled: `import` and `include` read files, and here
/// that would be the fuzzing machine's files, not a sandbox's. Both are keywords, so a filter
/// without either word loads nothing.
fn loads_modules(filter: &[u8]) -> bool {
    contains(filter, b"import") || contains(filter, b"include")
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The last message of a refusal, as jq's `jq_compile_args` reports the count.
fn is_count(line: &str) -> bool {
    let Some(rest) = line.strip_prefix("jq: ") else {
        return false;
    };
    let Some((n, what)) = rest.split_once(' ') else {
        return false;
    };
    n.parse::<u32>().is_ok_and(|n| n > 0)
        && (what == "compile error" && n == "1" || what == "compile errors" && n != "1")
}

/// The contract, for the fuzzer's bytes as a filter.
pub fn run(data: &[u8]) {
    if loads_modules(data) {
        return;
    }
    let Some(c) = ffi::compile(data) else {
        return;
    };
    if c.program {
        assert!(
            c.messages.is_empty(),
            "a compiled filter came with messages: {:?}",
            c.messages
        );
    } else {
        let last = c.messages.lines().last().unwrap_or("");
        assert!(
            is_count(last),
            "a refused filter's messages do not end in jq's count of errors: {:?}",
            c.messages
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// jq.test's cases: (filter, None) for a filter with results, (filter, Some(message)) for
    /// a `%%FAIL` one (an empty message when it says `IGNORE MSG`).
    fn cases() -> Vec<(String, Option<String>)> {
        let text = std::fs::read_to_string(wasm_jq_c::JQ_TESTS).expect("jq-src's jq.test");
        let mut cases = Vec::new();
        let mut lines = text.lines().filter(|l| !l.starts_with('#')).peekable();
        while let Some(line) = lines.next() {
            if line.trim().is_empty() {
                continue;
            }
            if let Some(rest) = line.strip_prefix("%%FAIL") {
                let filter = lines.next().expect("a %%FAIL filter").to_owned();
                let message = lines.next().unwrap_or("").to_owned();
                let message = if rest.contains("IGNORE MSG") {
                    String::new()
                } else {
                    message
                };
                cases.push((filter, Some(message)));
            } else {
                cases.push((line.to_owned(), None));
            }
            while lines.peek().is_some_and(|l| !l.trim().is_empty()) {
                lines.next();
            }
        }
        cases
    }

    #[test]
    fn jq_tests_compile_as_jq_test_says() {
        let cases = cases();
        assert!(cases.len() > 300, "jq.test read as {} cases", cases.len());
        let mut checked = 0;
        for (filter, fail) in &cases {
            if loads_modules(filter.as_bytes()) {
                continue;
            }
            let c = ffi::compile(filter.as_bytes()).expect("memory to compile");
            match fail {
                None => assert!(
                    c.program && c.messages.is_empty(),
                    "{filter:?} did not compile: {:?}",
                    c.messages
                ),
                Some(message) => {
                    assert!(!c.program, "{filter:?} compiled");
                    assert!(
                        c.messages.lines().any(|l| l.starts_with(message.as_str())),
                        "{filter:?}: {message:?} is not among {:?}",
                        c.messages
                    );
                }
            }
            run(filter.as_bytes());
            checked += 1;
        }
        assert!(checked > 300);
    }

    #[test]
    fn refusals_end_in_the_count() {
        for (filter, n) in [(".[", 1), ("$a, $b", 2)] {
            let c = ffi::compile(filter.as_bytes()).expect("memory to compile");
            assert!(!c.program);
            let want = if n == 1 {
                "jq: 1 compile error".to_owned()
            } else {
                format!("jq: {n} compile errors")
            };
            assert_eq!(c.messages.lines().last(), Some(want.as_str()), "{filter}");
        }
        assert!(!is_count("jq: 2 compile error"));
        assert!(!is_count("jq: 0 compile errors"));
        assert!(is_count("jq: 12 compile errors"));
    }
}
