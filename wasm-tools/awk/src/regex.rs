//! POSIX extended regular expressions (with gawk's extensions) on top of the `regex` crate.
//!
//! The ERE is translated into the crate's syntax. The crate finds the leftmost match with
//! leftmost-first preference; POSIX wants the longest match starting there, so when the pattern
//! could match more than one length, an anchored PikeVM run that keeps every match extends it.

use std::cell::{OnceCell, RefCell};

use regex_automata::nfa::thompson::pikevm::{self, PikeVM};
use regex_automata::util::captures::Captures;
use regex_automata::{Anchored, Input, MatchKind};

struct Longest {
    vm: PikeVM,
    cache: RefCell<pikevm::Cache>,
    caps: RefCell<Captures>,
}

pub struct AwkRegex {
    re: regex::Regex,
    pattern: String,
    /// Whether leftmost-first and leftmost-longest could disagree.
    ambiguous: bool,
    longest: OnceCell<Option<Longest>>,
}

/// A position in a match: (start, end) byte offsets.
pub type Span = (usize, usize);

impl AwkRegex {
    pub fn new(src: &str, icase: bool) -> Result<AwkRegex, String> {
        let body = translate(src)?;
        let pattern = format!("(?s{}){}", if icase { "i" } else { "" }, body);
        let re = regex::RegexBuilder::new(&pattern)
            .size_limit(50 << 20)
            .build()
            .map_err(|e| {
                let s = e.to_string();
                s.lines()
                    .last()
                    .unwrap_or("invalid regexp")
                    .trim()
                    .to_string()
            })?;
        let ambiguous = body.contains(['|', '*', '+', '?', '{']);
        Ok(AwkRegex {
            re,
            pattern,
            ambiguous,
            longest: OnceCell::new(),
        })
    }

    pub fn is_match(&self, s: &str) -> bool {
        self.re.is_match(s)
    }

    fn longest(&self) -> Option<&Longest> {
        self.longest
            .get_or_init(|| {
                let vm = PikeVM::builder()
                    .configure(PikeVM::config().match_kind(MatchKind::All))
                    .build(&self.pattern)
                    .ok()?;
                let cache = RefCell::new(vm.create_cache());
                let caps = RefCell::new(vm.create_captures());
                Some(Longest { vm, cache, caps })
            })
            .as_ref()
    }

    /// The leftmost-longest match at or after `start`.
    pub fn find_at(&self, s: &str, start: usize) -> Option<Span> {
        let m = self.re.find_at(s, start)?;
        let (b, mut e) = (m.start(), m.end());
        if self.ambiguous
            && e < s.len()
            && let Some(l) = self.longest()
        {
            let input = Input::new(s).span(b..s.len()).anchored(Anchored::Yes);
            let mut cache = l.cache.borrow_mut();
            let mut caps = l.caps.borrow_mut();
            l.vm.search(&mut cache, &input, &mut caps);
            if let Some(lm) = caps.get_match()
                && lm.end() > e
            {
                e = lm.end();
            }
        }
        Some((b, e))
    }

    /// The leftmost-longest match at or after `start` with its groups (index 0 is the whole).
    pub fn captures_at(&self, s: &str, start: usize) -> Option<Vec<Option<Span>>> {
        let (b, e) = self.find_at(s, start)?;
        if let Some(l) = self.longest() {
            let input = Input::new(s).span(b..s.len()).anchored(Anchored::Yes);
            let mut cache = l.cache.borrow_mut();
            let mut caps = l.caps.borrow_mut();
            l.vm.search(&mut cache, &input, &mut caps);
            if caps.get_match().is_some_and(|m| m.end() == e) {
                return Some(
                    (0..caps.group_len())
                        .map(|g| caps.get_group(g).map(|sp| (sp.start, sp.end)))
                        .collect(),
                );
            }
        }
        let c = self.re.captures_at(s, b)?;
        let mut v: Vec<Option<Span>> = c.iter().map(|m| m.map(|m| (m.start(), m.end()))).collect();
        v[0] = Some((b, e));
        Some(v)
    }
}

fn is_crate_meta(c: char) -> bool {
    matches!(
        c,
        '\\' | '.'
            | '+'
            | '*'
            | '?'
            | '('
            | ')'
            | '|'
            | '['
            | ']'
            | '{'
            | '}'
            | '^'
            | '$'
            | '#'
            | '&'
            | '-'
            | '~'
    )
}

fn push_literal(out: &mut String, c: char) {
    if is_crate_meta(c) {
        out.push('\\');
        out.push(c);
    } else if c.is_control() || c == ' ' {
        out.push_str(&format!("\\x{{{:x}}}", c as u32));
    } else {
        out.push(c);
    }
}

/// The character a backslash escape stands for, when it is a plain character. Advances `i`.
fn escape_char(chars: &[char], i: &mut usize) -> Option<char> {
    let c = chars[*i];
    *i += 1;
    Some(match c {
        'n' => '\n',
        't' => '\t',
        'r' => '\r',
        'f' => '\x0c',
        'v' => '\x0b',
        'a' => '\x07',
        'b' => '\x08',
        '0'..='7' => {
            let mut n = c.to_digit(8).unwrap_or(0);
            let mut k = 0;
            while k < 2 && *i < chars.len() {
                match chars[*i].to_digit(8) {
                    Some(d) => {
                        n = n * 8 + d;
                        *i += 1;
                        k += 1;
                    }
                    None => break,
                }
            }
            crate::value::byte_char((n & 0xff) as u8)
        }
        'x' => {
            let mut n = 0;
            let mut k = 0;
            while k < 2 && *i < chars.len() {
                match chars[*i].to_digit(16) {
                    Some(d) => {
                        n = n * 16 + d;
                        *i += 1;
                        k += 1;
                    }
                    None => break,
                }
            }
            if k == 0 {
                'x'
            } else {
                crate::value::byte_char(n as u8)
            }
        }
        _ => return None,
    })
}

fn class_body(name: &str) -> Option<&'static str> {
    Some(match name {
        "alpha" => "\\p{Alphabetic}",
        "alnum" => "\\p{Alphabetic}0-9",
        "upper" => "\\p{Uppercase}",
        "lower" => "\\p{Lowercase}",
        "digit" => "0-9",
        "xdigit" => "0-9A-Fa-f",
        "space" => "\\s",
        "blank" => " \\t",
        "punct" => "[:punct:]",
        "cntrl" => "[:cntrl:]",
        "print" => "[:print:]\\x{a0}-\\x{10ffff}",
        "graph" => "[:graph:]\\x{a1}-\\x{10ffff}",
        _ => return None,
    })
}

fn translate_bracket(chars: &[char], i: &mut usize, out: &mut String) -> Result<(), String> {
    let unmatched = || "Unmatched [, [^, [:, [., or [=".to_string();
    out.push('[');
    if *i < chars.len() && chars[*i] == '^' {
        out.push('^');
        *i += 1;
    }
    let mut first = true;
    let mut items = 0;
    loop {
        let Some(&c) = chars.get(*i) else {
            return Err(unmatched());
        };
        if c == ']' && !first {
            *i += 1;
            break;
        }
        first = false;
        if c == '[' && matches!(chars.get(*i + 1), Some(':') | Some('.') | Some('=')) {
            let kind = chars[*i + 1];
            let mut j = *i + 2;
            while j + 1 < chars.len() && !(chars[j] == kind && chars[j + 1] == ']') {
                j += 1;
            }
            if j + 1 >= chars.len() {
                return Err(unmatched());
            }
            let name: String = chars[*i + 2..j].iter().collect();
            *i = j + 2;
            if kind == ':' {
                match class_body(&name) {
                    Some(b) => out.push_str(b),
                    None => return Err("Invalid character class name".into()),
                }
            } else {
                for ch in name.chars() {
                    push_literal(out, ch);
                }
            }
            items += 1;
            continue;
        }
        let lit = if c == '\\' && *i + 1 < chars.len() {
            *i += 1;
            match escape_char(chars, i) {
                Some(e) => e,
                None => {
                    let e = chars[*i - 1];
                    match e {
                        'w' | 's' | 'W' | 'S' => {
                            out.push('\\');
                            out.push(e);
                            items += 1;
                            continue;
                        }
                        _ => e,
                    }
                }
            }
        } else {
            *i += 1;
            c
        };
        // A range, unless the '-' is the last thing before ']'.
        if chars.get(*i) == Some(&'-')
            && chars.get(*i + 1).is_some_and(|&n| n != ']')
            && *i + 1 < chars.len()
        {
            *i += 1;
            let hi_c = chars[*i];
            let hi = if hi_c == '\\' && *i + 1 < chars.len() {
                *i += 1;
                escape_char(chars, i).unwrap_or_else(|| chars[*i - 1])
            } else if hi_c == '[' && chars.get(*i + 1) == Some(&'.') {
                let mut j = *i + 2;
                while j + 1 < chars.len() && !(chars[j] == '.' && chars[j + 1] == ']') {
                    j += 1;
                }
                let ch = chars.get(*i + 2).copied().unwrap_or('.');
                *i = j + 2;
                ch
            } else {
                *i += 1;
                hi_c
            };
            if hi < lit {
                return Err("Invalid range end".into());
            }
            push_literal(out, lit);
            out.push('-');
            push_literal(out, hi);
        } else {
            push_literal(out, lit);
        }
        items += 1;
    }
    let _ = items;
    out.push(']');
    Ok(())
}

/// Parses `{n}`, `{n,}`, `{n,m}` or `{,m}` at `i` (which points at `{`).
fn interval(chars: &[char], i: usize) -> Option<(String, usize)> {
    let mut j = i + 1;
    let mut lo = String::new();
    while j < chars.len() && chars[j].is_ascii_digit() {
        lo.push(chars[j]);
        j += 1;
    }
    let mut hi: Option<String> = None;
    if j < chars.len() && chars[j] == ',' {
        j += 1;
        let mut h = String::new();
        while j < chars.len() && chars[j].is_ascii_digit() {
            h.push(chars[j]);
            j += 1;
        }
        hi = Some(h);
    }
    if j >= chars.len() || chars[j] != '}' {
        return None;
    }
    if lo.is_empty() && hi.as_ref().is_none_or(|h| h.is_empty()) {
        return None;
    }
    let lo = if lo.is_empty() { "0".to_string() } else { lo };
    let s = match hi {
        None => format!("{{{lo}}}"),
        Some(h) if h.is_empty() => format!("{{{lo},}}"),
        Some(h) => format!("{{{lo},{h}}}"),
    };
    Some((s, j + 1))
}

pub fn translate(src: &str) -> Result<String, String> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len() + 8);
    let mut i = 0;
    // Where the last quantifiable atom starts in `out`, if there is one.
    let mut atom: Option<usize> = None;
    let mut quantified = false;
    let mut group_starts: Vec<usize> = Vec::new();
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' => {
                let start = out.len();
                i += 1;
                if i >= chars.len() {
                    out.push_str("\\\\");
                    atom = Some(start);
                    quantified = false;
                    continue;
                }
                let e = chars[i];
                let mut is_atom = true;
                match e {
                    'y' => {
                        out.push_str("\\b");
                        is_atom = false;
                        i += 1;
                    }
                    'B' => {
                        out.push_str("\\B");
                        is_atom = false;
                        i += 1;
                    }
                    '<' => {
                        out.push_str("\\b{start}");
                        is_atom = false;
                        i += 1;
                    }
                    '>' => {
                        out.push_str("\\b{end}");
                        is_atom = false;
                        i += 1;
                    }
                    '`' => {
                        out.push_str("\\A");
                        is_atom = false;
                        i += 1;
                    }
                    '\'' => {
                        out.push_str("\\z");
                        is_atom = false;
                        i += 1;
                    }
                    'w' | 'W' | 's' | 'S' => {
                        out.push('\\');
                        out.push(e);
                        i += 1;
                    }
                    _ => match escape_char(&chars, &mut i) {
                        Some(ch) => push_literal(&mut out, ch),
                        None => push_literal(&mut out, chars[i - 1]),
                    },
                }
                atom = if is_atom { Some(start) } else { None };
                quantified = false;
            }
            '[' => {
                let start = out.len();
                i += 1;
                translate_bracket(&chars, &mut i, &mut out)?;
                atom = Some(start);
                quantified = false;
            }
            '(' => {
                group_starts.push(out.len());
                out.push('(');
                i += 1;
                atom = None;
                quantified = false;
            }
            ')' => {
                let Some(start) = group_starts.pop() else {
                    return Err("Unmatched ) or \\)".into());
                };
                out.push(')');
                i += 1;
                atom = Some(start);
                quantified = false;
            }
            '|' => {
                out.push('|');
                i += 1;
                atom = None;
                quantified = false;
            }
            '^' | '$' => {
                out.push(c);
                i += 1;
                atom = None;
                quantified = false;
            }
            '.' => {
                atom = Some(out.len());
                out.push('.');
                i += 1;
                quantified = false;
            }
            '*' | '+' | '?' | '{' => {
                let q = if c == '{' {
                    match interval(&chars, i) {
                        Some((s, next)) if atom.is_some() => {
                            i = next;
                            Some(s)
                        }
                        _ => None,
                    }
                } else if atom.is_some() {
                    i += 1;
                    Some(c.to_string())
                } else {
                    None
                };
                match (q, atom) {
                    (Some(q), Some(a)) => {
                        if quantified {
                            // ERE allows stacked repetition; the crate would read `*?` as lazy.
                            out.insert_str(a, "(?:");
                            out.push(')');
                        }
                        out.push_str(&q);
                        quantified = true;
                    }
                    _ => {
                        // Nothing to repeat: the operator is an ordinary character.
                        i += 1;
                        atom = Some(out.len());
                        push_literal(&mut out, c);
                        quantified = false;
                    }
                }
            }
            _ => {
                atom = Some(out.len());
                push_literal(&mut out, c);
                i += 1;
                quantified = false;
            }
        }
    }
    if !group_starts.is_empty() {
        return Err("Unmatched ( or \\(".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn translation() {
        assert_eq!(translate("a{2}").unwrap(), "a{2}");
        assert_eq!(translate("{a").unwrap(), "\\{a");
        assert_eq!(translate("a{").unwrap(), "a\\{");
        assert_eq!(translate("*a").unwrap(), "\\*a");
        assert_eq!(translate("[]a]").unwrap(), "[\\]a]");
        assert_eq!(translate("[^]a-]").unwrap(), "[^\\]a\\-]");
        assert!(translate("[[:alpha:]]").is_ok());
        assert!(translate("(a").is_err());
    }

    #[test]
    fn longest() {
        let r = AwkRegex::new("a|ab", false).unwrap();
        assert_eq!(r.find_at("xabc", 0), Some((1, 3)));
        let r = AwkRegex::new("a*(ab)*", false).unwrap();
        assert_eq!(r.find_at("aabab", 0), Some((0, 5)));
    }
}
