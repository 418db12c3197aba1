//! readline's keymaps and variables, which `bind` lists, queries and changes. A sandboxed
//! shell never edits a line, as a non-interactive bash does not; but bash keeps readline's
//! state all the same. The defaults are readline's, as bash 5.2 prints them (`readline.txt`).

use std::collections::BTreeMap;
use std::sync::OnceLock;

/// What a key sequence runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Binding {
    Function(String),
    /// Text inserted as if typed (`bind -s`).
    Macro(Vec<u8>),
    /// A shell command (`bind -x`).
    Command(String),
}

/// readline's state: the emacs, vi (command) and vi-insert keymaps, and the variables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Readline {
    pub(crate) maps: [BTreeMap<Vec<u8>, Binding>; 3],
    pub(crate) vars: Vec<(String, String)>,
}

pub(crate) struct Defaults {
    pub(crate) functions: Vec<String>,
    pub(crate) readline: Readline,
}

pub(crate) fn defaults() -> &'static Defaults {
    static D: OnceLock<Defaults> = OnceLock::new();
    D.get_or_init(|| {
        let mut functions = Vec::new();
        let mut vars = Vec::new();
        let mut maps: [BTreeMap<Vec<u8>, Binding>; 3] = Default::default();
        let mut section = "";
        for line in include_str!("readline.txt").lines() {
            if line.starts_with('#') || line.is_empty() {
                continue;
            }
            if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                section = name;
                continue;
            }
            match section {
                "functions" => functions.push(line.to_string()),
                "variables" => {
                    let (k, v) = line.split_once(' ').unwrap_or((line, ""));
                    vars.push((k.to_string(), v.to_string()));
                }
                map => {
                    let i = match map {
                        "emacs" => 0,
                        "vi" => 1,
                        _ => 2,
                    };
                    if let Some((seq, rest)) = quoted_keyseq(line) {
                        let f = rest.trim_start_matches(':').trim();
                        maps[i].insert(seq, Binding::Function(f.to_string()));
                    }
                }
            }
        }
        Defaults {
            functions,
            readline: Readline { maps, vars },
        }
    })
}

/// readline names some functions twice: both names are bound to the keys of either.
pub(crate) fn same_function(a: &str, b: &str) -> bool {
    const ALIASES: [(&str, &str); 1] = [("insert-last-argument", "yank-last-arg")];
    a == b
        || ALIASES
            .iter()
            .any(|&(x, y)| (a == x && b == y) || (a == y && b == x))
}

/// A keymap as `-m` names it: which of the three maps, seen under which prefix.
pub(crate) fn keymap(name: &str) -> Option<(usize, &'static [u8])> {
    Some(match name {
        "emacs" | "emacs-standard" => (0, b""),
        "emacs-meta" => (0, b"\x1b"),
        "emacs-ctlx" => (0, b"\x18"),
        "vi" | "vi-command" | "vi-move" => (1, b""),
        "vi-insert" => (2, b""),
        _ => return None,
    })
}

/// Reads a `"..."` key sequence at the start of `s` (readline's escapes: `\C-`, `\M-`, `\e`,
/// `\\`, `\"`, `\'`, `\a`...`\v`, `\d`, octal `\NNN` and `\xHH`): the bytes and the text after
/// the closing quote.
pub(crate) fn quoted_keyseq(s: &str) -> Option<(Vec<u8>, &str)> {
    let body = s.strip_prefix('"')?;
    let b = body.as_bytes();
    let mut i = 0;
    while i < b.len() && b[i] != b'"' {
        if b[i] == b'\\' {
            i += 1;
        }
        i += 1;
    }
    let end = i.min(b.len());
    Some((translate(&body[..end]), body.get(end + 1..).unwrap_or("")))
}

/// readline's escapes in a key sequence or macro, to bytes.
pub(crate) fn translate(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let mut meta = false;
    let mut ctrl = false;
    while i < b.len() {
        let mut c = b[i];
        i += 1;
        if c == b'\\' && i < b.len() {
            let e = b[i];
            i += 1;
            if (e == b'C' || e == b'M') && b.get(i) == Some(&b'-') {
                i += 1;
                if e == b'C' {
                    ctrl = true;
                } else {
                    meta = true;
                }
                continue;
            }
            c = match e {
                b'e' => 0x1b,
                b'a' => 0x07,
                b'b' => 0x08,
                b'd' => 0x7f,
                b'f' => 0x0c,
                b'n' => b'\n',
                b'r' => b'\r',
                b't' => b'\t',
                b'v' => 0x0b,
                b'0'..=b'7' => {
                    let mut v = u32::from(e - b'0');
                    let mut k = 0;
                    while k < 2 && matches!(b.get(i), Some(b'0'..=b'7')) {
                        v = v * 8 + u32::from(b[i] - b'0');
                        i += 1;
                        k += 1;
                    }
                    v as u8
                }
                b'x' => {
                    let mut v = 0u32;
                    let mut k = 0;
                    while k < 2 && b.get(i).is_some_and(u8::is_ascii_hexdigit) {
                        v = v * 16 + (b[i] as char).to_digit(16).unwrap_or(0);
                        i += 1;
                        k += 1;
                    }
                    v as u8
                }
                other => other,
            };
        }
        if ctrl {
            c = if c == b'?' {
                0x7f
            } else {
                c.to_ascii_lowercase() & 0x1f
            };
            ctrl = false;
        }
        if meta {
            c |= 0x80;
            meta = false;
        }
        out.push(c);
    }
    out
}

/// A key name of an inputrc line (`Control-u`, `M-DEL`, `TAB`, `x`), to its byte.
pub(crate) fn key_name(name: &str) -> Option<u8> {
    let (mut ctrl, mut meta) = (false, false);
    let mut rest = name;
    loop {
        let lower = rest.to_ascii_lowercase();
        if let Some(p) = ["control-", "c-"].iter().find(|p| lower.starts_with(**p)) {
            ctrl = true;
            rest = &rest[p.len()..];
        } else if let Some(p) = ["meta-", "m-"].iter().find(|p| lower.starts_with(**p)) {
            meta = true;
            rest = &rest[p.len()..];
        } else {
            break;
        }
    }
    let mut c = match rest.to_ascii_lowercase().as_str() {
        "del" | "rubout" => 0x7f,
        "esc" | "escape" => 0x1b,
        "lfd" | "newline" => b'\n',
        "ret" | "return" => b'\r',
        "spc" | "space" => b' ',
        "tab" => b'\t',
        _ if rest.len() == 1 => rest.as_bytes()[0],
        _ => return None,
    };
    if ctrl {
        c = if c == b'?' || c == 0x7f {
            0x7f
        } else {
            c.to_ascii_lowercase() & 0x1f
        };
    }
    if meta {
        c |= 0x80;
    }
    Some(c)
}

/// A key sequence as readline prints it (`\C-x`, `\e`, `\C-?`, octal above 127); a NUL after
/// the first key is octal too, as readline prints it.
pub(crate) fn untranslate(seq: &[u8]) -> String {
    let mut out = String::new();
    for (i, &c) in seq.iter().enumerate() {
        match c {
            0x1b => out.push_str("\\e"),
            0 if i > 0 => out.push_str("\\000"),
            0..=0x1f => {
                out.push_str("\\C-");
                match (c | 0x40).to_ascii_lowercase() {
                    b'\\' => out.push_str("\\\\"),
                    l => out.push(l as char),
                }
            }
            0x7f => out.push_str("\\C-?"),
            b'\\' | b'"' => {
                out.push('\\');
                out.push(c as char);
            }
            0x80.. => out.push_str(&format!("\\{c:03o}")),
            _ => out.push(c as char),
        }
    }
    out
}

/// "`f` can be invoked via ..." and its kin: at most five sequences, then `...`.
pub(crate) fn invokers(seqs: &[&Vec<u8>], end: &str) -> String {
    let shown: Vec<String> = seqs
        .iter()
        .take(5)
        .map(|s| format!("\"{}\"", untranslate(s)))
        .collect();
    if seqs.len() > 5 {
        format!("{}, ...\n", shown.join(", "))
    } else {
        format!("{}{end}\n", shown.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every default binding reads back from the text it came from: the escapes are readline's.
    #[test]
    fn default_bindings_print_as_bash_printed_them() {
        let text = include_str!("readline.txt");
        let mut n = 0;
        for line in text.lines().filter(|l| l.starts_with('"')) {
            let (seq, rest) = quoted_keyseq(line).unwrap();
            assert_eq!(format!("\"{}\"{rest}", untranslate(&seq)), line);
            n += 1;
        }
        assert!(n > 700, "{n} bindings");
        assert_eq!(defaults().functions.len(), 173);
    }

    #[test]
    fn key_names_and_escapes() {
        assert_eq!(key_name("Meta-Rubout"), Some(0xff));
        assert_eq!(key_name("Control-Space"), Some(0));
        assert_eq!(key_name("C-t"), Some(0x14));
        assert_eq!(key_name("TAB"), Some(b'\t'));
        assert_eq!(translate(r"\M-a"), vec![0xe1]);
        assert_eq!(translate(r"\C-o\C-s\C-h"), vec![0x0f, 0x13, 0x08]);
        assert_eq!(untranslate(&[0xe1]), r"\341");
    }
}
