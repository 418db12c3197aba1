//! GNU sed's anchors inside groups. In a GNU BRE, `^` right after `\(` or `\|` and `$` right
//! before `\)` or `\|` are anchors (`s/\(^a\|b$\)/X/`); the uutils sed crate turns a BRE into
//! an ERE and escapes every `^` not at the very start and every `$` not at the very end, so
//! those patterns matched a literal `^` or `$` and never the line's ends. Before sed compiles
//! them, the scripts' regular expressions get `\A` and `\z` there (start and end of the
//! pattern space, which is what `^` and `$` mean without the `M` flag), and nothing else in
//! the script changes. Scripts given with `-E`/`-r` (EREs) and script files pass untouched.

use std::ffi::OsString;

/// sed's arguments with the anchors of BRE scripts given on the command line made explicit.
pub fn rewrite(args: Vec<OsString>) -> Vec<OsString> {
    let Some(strs) = args
        .iter()
        .map(|a| a.to_str())
        .collect::<Option<Vec<&str>>>()
    else {
        return args;
    };
    // Which arguments are scripts, and whether the expressions are EREs.
    let mut scripts: Vec<(usize, Option<&str>)> = Vec::new();
    let mut extended = false;
    let mut have_script = false;
    let mut first_operand = None;
    let mut only_operands = false;
    let mut i = 1;
    while i < strs.len() {
        let a = strs[i];
        i += 1;
        if only_operands || a == "-" || !a.starts_with('-') {
            first_operand.get_or_insert(i - 1);
            continue;
        }
        if a == "--" {
            only_operands = true;
            continue;
        }
        if let Some(long) = a.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (long, None),
            };
            match name {
                "regexp-extended" => extended = true,
                "expression" => {
                    have_script = true;
                    match value {
                        // `--expression=S`: the text after `=` is the script.
                        Some(_) => scripts.push((i - 1, Some("--expression="))),
                        None => {
                            scripts.push((i, None));
                            i += 1;
                        }
                    }
                }
                "file" => {
                    have_script = true;
                    if value.is_none() {
                        i += 1;
                    }
                }
                "line-length" if value.is_none() => i += 1,
                _ => {}
            }
            continue;
        }
        let flags: Vec<char> = a[1..].chars().collect();
        for (k, c) in flags.iter().enumerate() {
            match c {
                'E' | 'r' => extended = true,
                'e' | 'f' | 'l' => {
                    let attached = k + 1 < flags.len();
                    if *c != 'l' {
                        have_script = true;
                    }
                    if *c == 'e' {
                        scripts.push(if attached {
                            (i - 1, Some(&a[..k + 2]))
                        } else {
                            (i, None)
                        });
                    }
                    if !attached {
                        i += 1;
                    }
                    break;
                }
                _ => {}
            }
        }
    }
    if !have_script && let Some(at) = first_operand {
        scripts.push((at, None));
    }
    if extended {
        return args;
    }
    let mut out = args.clone();
    for (at, prefix) in scripts {
        let Some(whole) = strs.get(at) else {
            continue;
        };
        let (head, script) = match prefix {
            Some(p) => whole.split_at(p.len().min(whole.len())),
            None => ("", *whole),
        };
        let fixed = anchors(script);
        if fixed != script {
            out[at] = format!("{head}{fixed}").into();
        }
    }
    out
}

/// The script with `^` after `\(`/`\|` and `$` before `\)`/`\|` in its regular expressions
/// spelled `\A` and `\z`.
fn anchors(script: &str) -> String {
    let s: Vec<char> = script.chars().collect();
    let mut out = String::with_capacity(script.len());
    let mut i = 0;
    // Copies up to and including the end of the line (a command's text, label or file name).
    let to_eol = |i: &mut usize, out: &mut String| {
        while *i < s.len() {
            out.push(s[*i]);
            *i += 1;
            if s[*i - 1] == '\n' {
                break;
            }
        }
    };
    while i < s.len() {
        let c = s[i];
        match c {
            '/' => {
                out.push(c);
                i = regex(&s, i + 1, '/', &mut out);
            }
            '\\' if i + 1 < s.len() => {
                // An address with its own delimiter: `\cREc`.
                let d = s[i + 1];
                out.push('\\');
                out.push(d);
                i = regex(&s, i + 2, d, &mut out);
            }
            's' if i + 1 < s.len() => {
                let d = s[i + 1];
                out.push('s');
                out.push(d);
                i = regex(&s, i + 2, d, &mut out);
                i = verbatim(&s, i, d, &mut out);
                // Flags; `w FILE` takes the rest of the line.
                while i < s.len() && !matches!(s[i], ';' | '\n' | '}') {
                    if s[i] == 'w' {
                        to_eol(&mut i, &mut out);
                        break;
                    }
                    out.push(s[i]);
                    i += 1;
                }
            }
            'y' if i + 1 < s.len() => {
                let d = s[i + 1];
                out.push('y');
                out.push(d);
                i = verbatim(&s, i + 2, d, &mut out);
                i = verbatim(&s, i, d, &mut out);
            }
            // Text, labels, file names and comments run to the end of the line; `a\`
            // continuation lines end with a backslash.
            'a' | 'i' | 'c' => loop {
                let start = out.len();
                to_eol(&mut i, &mut out);
                let line = &out[start..];
                if !line.ends_with("\\\n") || i >= s.len() {
                    break;
                }
            },
            ':' | 'b' | 't' | 'T' | 'r' | 'R' | 'w' | 'W' | 'e' | 'v' | '#' => {
                to_eol(&mut i, &mut out)
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// Copies a regular expression up to its closing delimiter `d` (included), rewriting the
/// anchors; returns where the scan goes on.
fn regex(s: &[char], mut i: usize, d: char, out: &mut String) -> usize {
    let mut group_start = false;
    while i < s.len() {
        let c = s[i];
        if c == d {
            out.push(c);
            return i + 1;
        }
        match c {
            '\\' if i + 1 < s.len() => {
                let n = s[i + 1];
                out.push('\\');
                out.push(n);
                i += 2;
                group_start = matches!(n, '(' | '|');
                continue;
            }
            '^' if group_start => out.push_str("\\A"),
            '$' if s.get(i + 1) == Some(&'\\') && matches!(s.get(i + 2), Some(')' | '|')) => {
                out.push_str("\\z")
            }
            '[' => {
                i = bracket(s, i, out);
                group_start = false;
                continue;
            }
            _ => out.push(c),
        }
        group_start = false;
        i += 1;
    }
    i
}

/// Copies a bracket expression whole (the delimiter and `^` are literal in it).
fn bracket(s: &[char], mut i: usize, out: &mut String) -> usize {
    out.push('[');
    i += 1;
    if s.get(i) == Some(&'^') {
        out.push('^');
        i += 1;
    }
    if s.get(i) == Some(&']') {
        out.push(']');
        i += 1;
    }
    while i < s.len() {
        let c = s[i];
        if c == '[' && matches!(s.get(i + 1), Some(':' | '.' | '=')) {
            // `[:alpha:]` and its kin end at their own `:]`.
            let kind = s[i + 1];
            out.push('[');
            out.push(kind);
            i += 2;
            while i < s.len() && !(s[i] == kind && s.get(i + 1) == Some(&']')) {
                out.push(s[i]);
                i += 1;
            }
            if i < s.len() {
                out.push(kind);
                out.push(']');
                i += 2;
            }
            continue;
        }
        out.push(c);
        i += 1;
        if c == ']' {
            break;
        }
    }
    i
}

/// Copies text up to the delimiter `d` (included) as it is, escapes and all.
fn verbatim(s: &[char], mut i: usize, d: char, out: &mut String) -> usize {
    while i < s.len() {
        let c = s[i];
        out.push(c);
        i += 1;
        if c == '\\' && i < s.len() {
            out.push(s[i]);
            i += 1;
        } else if c == d {
            break;
        }
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn anchors_in_groups_become_explicit() {
        assert_eq!(anchors(r"s/\(^a\|b$\)/X/g"), r"s/\(\Aa\|b\z\)/X/g");
        assert_eq!(anchors(r"/\(^x\)/p"), r"/\(\Ax\)/p");
        assert_eq!(anchors(r"\,\(^x\),d"), r"\,\(\Ax\),d");
    }

    #[test]
    fn other_text_is_left_alone() {
        for s in [
            r"s/^a/b/",
            r"s/a$/b/",
            r"s/\(a\)/\(^\)/",
            r"s/[\(^]/x/",
            r"s/[/^]/x/",
            r"y/\(^/abc/",
            "a\\\n\\(^x\\)",
            "i text \\(^ here",
            r"s/[[:alpha:]^]/x/",
            "# \\(^ comment",
            r"s/x/y/w \(^file",
        ] {
            assert_eq!(anchors(s), s, "{s}");
        }
    }

    #[test]
    fn only_bre_scripts_on_the_command_line_change() {
        let fixed = rewrite(args(&["sed", r"s/\(^a\)/X/", "f"]));
        assert_eq!(fixed[1], r"s/\(\Aa\)/X/");
        let fixed = rewrite(args(&[
            "sed",
            "-n",
            "-e",
            r"/\(^a\)/p",
            r"--expression=s/\(b$\)//",
        ]));
        assert_eq!(fixed[3], r"/\(\Aa\)/p");
        assert_eq!(fixed[4], r"--expression=s/\(b\z\)//");
        let fixed = rewrite(args(&["sed", r"-es/\(^a\)/X/"]));
        assert_eq!(fixed[1], r"-es/\(\Aa\)/X/");
        let ere = args(&["sed", "-E", r"s/(^a)/X/"]);
        assert_eq!(rewrite(ere.clone()), ere);
        let file = args(&["sed", "-f", r"\(^a\)", "x"]);
        assert_eq!(rewrite(file.clone()), file);
    }
}
