//! Path redaction (`SANDBOX_REDACT_PATHS`, seed 003: "redact or hash file names/paths when
//! policy requires"): a path becomes `redacted:` and the first 16 hex digits of its SHA-256,
//! so an auditor can still tell that two events name the same file without learning which.
//! Applied to audit events when they are written and to the admin run views when they are
//! read, under the policy in force at that moment.

use crate::util::sha256_hex;

pub const PREFIX: &str = "redacted:";

pub fn path(p: &str) -> String {
    format!("{PREFIX}{}", &sha256_hex(p.as_bytes())[..16])
}

/// Free text (a run's `message`) with every word that holds a `/` (a path, or a URL, which
/// may name one) redacted, the rest kept.
pub fn text(t: &str) -> String {
    let mut out = String::with_capacity(t.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        if word.contains('/') {
            // Punctuation that ends a sentence or a quote is not the path's.
            let core = word.trim_end_matches([',', '.', ';', ':', ')', '\'', '"']);
            let tail = &word[core.len()..];
            let core = core.trim_start_matches(['(', '\'', '"']);
            let head = &word[..word.len() - tail.len() - core.len()];
            out.push_str(head);
            out.push_str(&path(core));
            out.push_str(tail);
        } else {
            out.push_str(word);
        }
        word.clear();
    };
    for ch in t.chars() {
        if ch.is_whitespace() {
            flush(&mut word, &mut out);
            out.push(ch);
        } else {
            word.push(ch);
        }
    }
    flush(&mut word, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_in_text_become_digests_and_the_words_around_stay() {
        let p = path("/work/secret/plan.txt");
        assert!(p.starts_with("redacted:") && p.len() == 9 + 16, "{p}");
        assert_eq!(p, path("/work/secret/plan.txt"));
        assert_ne!(p, path("/work/secret/other.txt"));
        let t = text("cannot open '/work/secret/plan.txt': no such file, see a/b.");
        assert_eq!(
            t,
            format!("cannot open '{p}': no such file, see {}.", path("a/b"))
        );
        assert!(!t.contains("secret"));
        assert_eq!(text("exit code 2"), "exit code 2");
    }
}
