//! Bracket expressions (`[a-z]`, `[!x]`, `[[:alpha:]]`, `[[=a=]]`): what both the plain
//! matcher and the extended-pattern matcher use for one character.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Named {
    Alpha,
    Digit,
    Alnum,
    Upper,
    Lower,
    Space,
    Blank,
    Punct,
    Xdigit,
    Cntrl,
    Print,
    Graph,
    /// An unknown class name: matches nothing, as in bash.
    Never,
}

impl Named {
    fn from_name(name: &str) -> Named {
        match name {
            "alpha" => Named::Alpha,
            "digit" => Named::Digit,
            "alnum" => Named::Alnum,
            "upper" => Named::Upper,
            "lower" => Named::Lower,
            "space" => Named::Space,
            "blank" => Named::Blank,
            "punct" => Named::Punct,
            "xdigit" => Named::Xdigit,
            "cntrl" => Named::Cntrl,
            "print" => Named::Print,
            "graph" => Named::Graph,
            _ => Named::Never,
        }
    }

    /// The classes as glibc's C.UTF-8 locale defines them: letters are Unicode letters, but
    /// digits are only ASCII; punctuation is any visible non-alphanumeric character.
    fn test(self, c: char) -> bool {
        let space = |c: char| {
            c.is_whitespace() && !matches!(c, '\u{a0}' | '\u{2007}' | '\u{202f}' | '\u{85}')
        };
        let cntrl = |c: char| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}');
        let alnum = |c: char| c.is_alphabetic() || c.is_ascii_digit();
        let print = |c: char| !cntrl(c);
        match self {
            Named::Alpha => c.is_alphabetic(),
            Named::Digit => c.is_ascii_digit(),
            Named::Alnum => alnum(c),
            Named::Upper => c.is_uppercase(),
            Named::Lower => c.is_lowercase(),
            Named::Space => space(c),
            Named::Blank => {
                c == '\t' || (space(c) && !matches!(c, '\n'..='\r' | '\u{2028}' | '\u{2029}'))
            }
            Named::Punct => print(c) && !space(c) && !alnum(c),
            Named::Xdigit => c.is_ascii_hexdigit(),
            Named::Cntrl => cntrl(c),
            Named::Print => print(c),
            Named::Graph => print(c) && !space(c),
            Named::Never => false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Item {
    Ch(char),
    Range(char, char),
    Class(Named),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Bracket {
    negated: bool,
    items: Vec<Item>,
}

impl Bracket {
    pub(crate) fn test(&self, c: char, nocase: bool) -> bool {
        let hit = |c: char| {
            self.items.iter().any(|it| match *it {
                Item::Ch(x) => x == c,
                Item::Range(lo, hi) => lo <= c && c <= hi,
                Item::Class(n) => n.test(c),
            })
        };
        let mut found = hit(c);
        if !found && nocase {
            found = c.to_lowercase().any(hit) || c.to_uppercase().any(hit);
        }
        found != self.negated
    }
}

/// Parses a bracket expression whose `[` is just before `start`; `None` if it is not closed
/// (then the `[` is an ordinary character). Returns the set and the index after its `]`.
pub(crate) fn parse_bracket(chars: &[char], start: usize) -> Option<(Bracket, usize)> {
    let mut i = start;
    let negated = matches!(chars.get(i), Some('!' | '^'));
    if negated {
        i += 1;
    }
    let mut items = Vec::new();
    let mut first = true;
    loop {
        let c = *chars.get(i)?;
        if c == ']' && !first {
            return Some((Bracket { negated, items }, i + 1));
        }
        first = false;
        if c == '['
            && let Some(&kind @ (':' | '=' | '.')) = chars.get(i + 1)
            && let Some(end) = find_close(chars, i + 2, kind)
        {
            let name: String = chars[i + 2..end].iter().collect();
            if kind == ':' {
                items.push(Item::Class(Named::from_name(&name)));
            } else {
                let mut it = name.chars();
                match (it.next(), it.next()) {
                    (Some(ch), None) => items.push(Item::Ch(ch)),
                    _ => items.push(Item::Class(Named::Never)),
                }
            }
            i = end + 2;
            continue;
        }
        let lo;
        if c == '\\' && i + 1 < chars.len() {
            lo = chars[i + 1];
            i += 2;
        } else {
            lo = c;
            i += 1;
        }
        if chars.get(i) == Some(&'-') && chars.get(i + 1).is_some_and(|&n| n != ']') {
            let (hi, next) = if chars[i + 1] == '\\' && i + 2 < chars.len() {
                (chars[i + 2], i + 3)
            } else {
                (chars[i + 1], i + 2)
            };
            items.push(Item::Range(lo, hi));
            i = next;
        } else {
            items.push(Item::Ch(lo));
        }
    }
}

/// Index of the `kind` in a closing `kind]` at or after `from`, within one bracket expression.
fn find_close(chars: &[char], from: usize, kind: char) -> Option<usize> {
    let mut j = from;
    while j + 1 < chars.len() {
        if chars[j] == kind && chars[j + 1] == ']' {
            return Some(j);
        }
        if chars[j] == ']' {
            return None;
        }
        j += 1;
    }
    None
}
