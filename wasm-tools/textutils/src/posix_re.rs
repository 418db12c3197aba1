//! Translation of POSIX basic/extended regular expressions (with the GNU extensions scripts
//! rely on) into the syntax of the `regex` crate. GNU grep and sed default to BREs, where `(`,
//! `{`, `+`, `?`, `|` are literals and their backslashed forms are operators, and bracket
//! expressions treat `\` and `[` literally — both differ from Rust's syntax.

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Flavor {
    Basic,
    Extended,
}

#[derive(Debug)]
pub struct Translated {
    pub pattern: String,
    /// Backreferences (`\1`) need an engine with backtracking.
    pub has_backrefs: bool,
}

fn push_literal(out: &mut String, c: char) {
    if c.is_ascii_alphanumeric() || c == '_' || !c.is_ascii() {
        out.push(c);
    } else if c.is_ascii_graphic() || c == ' ' {
        out.push('\\');
        out.push(c);
    } else {
        out.push_str(&format!("\\x{{{:x}}}", c as u32));
    }
}

/// Parses a bracket expression starting just after `[`; returns the Rust class and the index
/// just past the closing `]`.
fn bracket(chars: &[char], mut i: usize) -> Result<(String, usize), String> {
    let mut out = String::from("[");
    if i < chars.len() && chars[i] == '^' {
        out.push('^');
        i += 1;
    }
    let mut first = true;
    loop {
        if i >= chars.len() {
            return Err("unmatched [, [^, [:, [., or [=".into());
        }
        let c = chars[i];
        if c == ']' && !first {
            i += 1;
            break;
        }
        first = false;
        if c == '[' && i + 1 < chars.len() && matches!(chars[i + 1], ':' | '=' | '.') {
            let kind = chars[i + 1];
            let start = i + 2;
            let mut j = start;
            while j + 1 < chars.len() && !(chars[j] == kind && chars[j + 1] == ']') {
                j += 1;
            }
            if j + 1 >= chars.len() {
                return Err("unmatched [, [^, [:, [., or [=".into());
            }
            let name: String = chars[start..j].iter().collect();
            if kind == ':' {
                const CLASSES: &[&str] = &[
                    "alnum", "alpha", "blank", "cntrl", "digit", "graph", "lower", "print",
                    "punct", "space", "upper", "xdigit",
                ];
                if !CLASSES.contains(&name.as_str()) {
                    return Err("invalid character class".into());
                }
                out.push_str(&format!("[:{name}:]"));
            } else {
                for ch in name.chars() {
                    push_literal(&mut out, ch);
                }
            }
            i = j + 2;
            continue;
        }
        if i + 2 < chars.len() && chars[i + 1] == '-' && chars[i + 2] != ']' {
            push_literal(&mut out, c);
            out.push('-');
            push_literal(&mut out, chars[i + 2]);
            i += 3;
            continue;
        }
        push_literal(&mut out, c);
        i += 1;
    }
    Ok((out + "]", i))
}

/// Translates a POSIX regular expression into `regex` syntax.
pub fn translate(re: &str, flavor: Flavor) -> Result<Translated, String> {
    let chars: Vec<char> = re.chars().collect();
    let mut out = String::new();
    let mut has_backrefs = false;
    let mut i = 0;
    // Where a `*` would have nothing to repeat and is therefore a literal.
    let mut at_start = true;
    let mut depth = 0usize;
    while i < chars.len() {
        let c = chars[i];
        let was_start = at_start;
        at_start = false;
        match c {
            '\\' => {
                i += 1;
                let Some(&n) = chars.get(i) else {
                    return Err("trailing backslash (\\)".into());
                };
                match (n, flavor) {
                    ('(', Flavor::Basic) => {
                        out.push('(');
                        depth += 1;
                        at_start = true;
                    }
                    (')', Flavor::Basic) => {
                        if depth == 0 {
                            return Err("unmatched ( or \\(".into());
                        }
                        depth -= 1;
                        out.push(')');
                    }
                    ('{', Flavor::Basic) => {
                        let close = (i..chars.len().saturating_sub(1))
                            .find(|&j| chars[j] == '\\' && chars[j + 1] == '}')
                            .ok_or("unmatched \\{")?;
                        let inner: String = chars[i + 1..close].iter().collect();
                        out.push('{');
                        out.push_str(&inner);
                        out.push('}');
                        i = close + 1;
                    }
                    ('|', Flavor::Basic) => {
                        out.push('|');
                        at_start = true;
                    }
                    ('+', Flavor::Basic) | ('?', Flavor::Basic) => out.push(n),
                    ('1'..='9', _) => {
                        has_backrefs = true;
                        out.push('\\');
                        out.push(n);
                    }
                    ('<', _) => out.push_str(r"\b{start}"),
                    ('>', _) => out.push_str(r"\b{end}"),
                    ('b', _) | ('B', _) | ('w', _) | ('W', _) | ('s', _) | ('S', _) => {
                        out.push('\\');
                        out.push(n);
                    }
                    ('`', _) => out.push_str(r"\A"),
                    ('\'', _) => out.push_str(r"\z"),
                    ('n', _) => out.push_str(r"\n"),
                    ('t', _) => out.push_str(r"\t"),
                    _ => push_literal(&mut out, n),
                }
            }
            '[' => {
                let (class, next) = bracket(&chars, i + 1)?;
                out.push_str(&class);
                i = next;
                continue;
            }
            '*' if was_start => out.push_str(r"\*"),
            '*' => out.push('*'),
            '^' if flavor == Flavor::Extended || was_start => {
                out.push('^');
                at_start = true;
            }
            '^' => out.push_str(r"\^"),
            '$' if flavor == Flavor::Extended => out.push('$'),
            '$' => {
                // In a BRE `$` anchors only at the end of the pattern or of a group/alternative.
                let rest = &chars[i + 1..];
                let anchors = rest.is_empty()
                    || rest.starts_with(&['\\', ')'])
                    || rest.starts_with(&['\\', '|']);
                out.push_str(if anchors { "$" } else { r"\$" });
            }
            '.' => out.push('.'),
            '(' | ')' | '{' | '}' | '|' | '+' | '?' if flavor == Flavor::Basic => {
                push_literal(&mut out, c)
            }
            '(' => {
                depth += 1;
                out.push('(');
                at_start = true;
                if chars.get(i + 1) == Some(&')') {
                    // `()` matches the empty string in ERE; Rust accepts it too.
                }
            }
            ')' => {
                if depth == 0 {
                    push_literal(&mut out, ')');
                } else {
                    depth -= 1;
                    out.push(')');
                }
            }
            '|' => {
                out.push('|');
                at_start = true;
            }
            '{' => {
                // A `{` that does not start a valid interval is literal, as in GNU ERE.
                let close = chars[i..].iter().position(|&x| x == '}').map(|p| p + i);
                let valid = close.is_some_and(|cl| {
                    let inner: String = chars[i + 1..cl].iter().collect();
                    !inner.is_empty()
                        && inner.chars().all(|x| x.is_ascii_digit() || x == ',')
                        && inner.matches(',').count() <= 1
                        && !inner.starts_with(',')
                });
                if valid && !was_start {
                    let cl = close.unwrap();
                    out.extend(&chars[i..=cl]);
                    i = cl + 1;
                    continue;
                }
                out.push_str(r"\{");
            }
            '+' | '?' if was_start => push_literal(&mut out, c),
            '+' | '?' => out.push(c),
            _ => push_literal(&mut out, c),
        }
        i += 1;
    }
    if depth != 0 {
        return Err("unmatched ( or \\(".into());
    }
    Ok(Translated {
        pattern: out,
        has_backrefs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> String {
        translate(s, Flavor::Basic).unwrap().pattern
    }
    fn e(s: &str) -> String {
        translate(s, Flavor::Extended).unwrap().pattern
    }

    #[test]
    fn basic_groups_and_literals() {
        assert_eq!(b(r"\(ab\)*c+"), r"(ab)*c\+");
        assert_eq!(b(r"a\{2,3\}"), "a{2,3}");
        assert_eq!(b("*a"), r"\*a");
        assert_eq!(b("a|b"), r"a\|b");
        assert_eq!(b("a$b$"), r"a\$b$");
        assert_eq!(e("[0-9]+x?"), "[0-9]+x?");
    }

    #[test]
    fn brackets() {
        assert_eq!(e(r"[\]"), r"[\\]");
        assert_eq!(e("[]a]"), r"[\]a]");
        assert_eq!(e("[[:digit:]x-z]"), "[[:digit:]x-z]");
        assert_eq!(e("[a[]"), r"[a\[]");
    }
}
