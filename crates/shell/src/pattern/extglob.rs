//! Extended patterns (`?(..)`, `*(..)`, `+(..)`, `@(..)`, `!(..)`), for patterns that use them.
//!
//! The plain matcher in `pattern` is a one-pass NFA over single-character tokens; groups with
//! alternatives, repetition and negation do not fit it. This matcher decides "does the node list
//! from here match exactly text[pos..end]" recursively, memoized on (sequence, node, pos, end),
//! which is polynomial in the text length. A step budget bounds the worst case, so no pattern
//! can make a match run away with the shell's time: past it, the match fails.

use std::collections::HashMap;

use super::bracket::{Bracket, parse_bracket};

/// Steps one match may take before it gives up (and reports no match).
const BUDGET: u64 = 2_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `?(..)`: zero or one.
    Opt,
    /// `*(..)`: zero or more.
    Star,
    /// `+(..)`: one or more.
    Plus,
    /// `@(..)`: exactly one.
    One,
    /// `!(..)`: anything that none of them matches.
    Not,
}

#[derive(Debug)]
enum Node {
    Char(char),
    Any,
    Star,
    Set(Box<Bracket>),
    /// A group and the indices of its alternatives in the sequence arena.
    Group(Kind, Vec<usize>),
}

/// A parsed extended pattern: `seqs[0]` is the whole pattern.
#[derive(Debug)]
pub struct ExtPattern {
    seqs: Vec<Vec<Node>>,
    nocase: bool,
}

/// Whether `chars[i]` opens a group: one of `?*+@!` followed by `(` with a matching `)`.
fn group_at(chars: &[char], i: usize) -> Option<usize> {
    if !matches!(chars.get(i), Some('?' | '*' | '+' | '@' | '!')) || chars.get(i + 1) != Some(&'(')
    {
        return None;
    }
    let mut depth = 0usize;
    let mut j = i + 1;
    while j < chars.len() {
        match chars[j] {
            '\\' => j += 1,
            '[' => {
                if let Some((_, next)) = parse_bracket(chars, j + 1) {
                    j = next;
                    continue;
                }
            }
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(j);
                }
            }
            _ => {}
        }
        j += 1;
    }
    None
}

/// Whether the (escaped) pattern contains an extended group.
pub fn has_group(pattern: &str) -> bool {
    if !pattern.contains('(') {
        return false;
    }
    let chars: Vec<char> = pattern.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '[' => match parse_bracket(&chars, i + 1) {
                Some((_, next)) => i = next,
                None => i += 1,
            },
            _ => {
                if group_at(&chars, i).is_some() {
                    return true;
                }
                i += 1;
            }
        }
    }
    false
}

impl ExtPattern {
    /// Parses `pattern` (escaped as `pattern` describes); `None` when it has no group, so the
    /// caller keeps the faster plain matcher.
    pub fn parse(pattern: &str, nocase: bool) -> Option<ExtPattern> {
        if !has_group(pattern) {
            return None;
        }
        let chars: Vec<char> = pattern.chars().collect();
        let mut p = ExtPattern {
            seqs: vec![Vec::new()],
            nocase,
        };
        p.parse_seq(&chars, 0);
        Some(p)
    }

    /// Parses `chars` into the sequence `seq` of the arena.
    fn parse_seq(&mut self, chars: &[char], seq: usize) {
        let mut nodes = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if let Some(close) = group_at(chars, i) {
                let kind = match c {
                    '?' => Kind::Opt,
                    '*' => Kind::Star,
                    '+' => Kind::Plus,
                    '@' => Kind::One,
                    _ => Kind::Not,
                };
                let mut alts = Vec::new();
                for alt in split_alternatives(&chars[i + 2..close]) {
                    let id = self.seqs.len();
                    self.seqs.push(Vec::new());
                    self.parse_seq(alt, id);
                    alts.push(id);
                }
                nodes.push(Node::Group(kind, alts));
                i = close + 1;
                continue;
            }
            match c {
                '\\' => {
                    nodes.push(Node::Char(chars.get(i + 1).copied().unwrap_or('\\')));
                    i += 2;
                }
                '*' => {
                    if !matches!(nodes.last(), Some(Node::Star)) {
                        nodes.push(Node::Star);
                    }
                    i += 1;
                }
                '?' => {
                    nodes.push(Node::Any);
                    i += 1;
                }
                '[' => match parse_bracket(chars, i + 1) {
                    Some((set, next)) => {
                        nodes.push(Node::Set(Box::new(set)));
                        i = next;
                    }
                    None => {
                        nodes.push(Node::Char('['));
                        i += 1;
                    }
                },
                _ => {
                    nodes.push(Node::Char(c));
                    i += 1;
                }
            }
        }
        self.seqs[seq] = nodes;
    }

    /// Whether the pattern starts with a literal `.` (pathname expansion shows dot files then).
    pub fn explicit_dot(&self) -> bool {
        matches!(self.seqs[0].first(), Some(Node::Char('.')))
    }

    /// A matcher over `text`, reusable for many (start, end) questions about the same text.
    pub fn matcher<'a>(&'a self, text: &str) -> Matcher<'a> {
        Matcher {
            pat: self,
            text: text.chars().collect(),
            memo: HashMap::new(),
            budget: BUDGET,
        }
    }

    pub fn matches(&self, text: &str) -> bool {
        let mut m = self.matcher(text);
        let n = m.text.len();
        m.whole(0, n)
    }
}

/// Splits a group's body at its top-level `|`s.
fn split_alternatives(chars: &[char]) -> Vec<&[char]> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 1,
            '[' => {
                if let Some((_, next)) = parse_bracket(chars, i + 1) {
                    i = next;
                    continue;
                }
            }
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            '|' if depth == 0 => {
                out.push(&chars[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    out.push(&chars[start..]);
    out
}

pub struct Matcher<'a> {
    pat: &'a ExtPattern,
    /// The text as characters; positions below are character indices.
    pub text: Vec<char>,
    memo: HashMap<(u32, u32, u32, u32), bool>,
    budget: u64,
}

impl Matcher<'_> {
    /// Whether the whole pattern matches exactly `text[pos..end]` (character indices).
    pub fn whole(&mut self, pos: usize, end: usize) -> bool {
        self.seq(0, 0, pos, end)
    }

    fn seq(&mut self, seq: usize, i: usize, pos: usize, end: usize) -> bool {
        let nodes = &self.pat.seqs[seq];
        if i == nodes.len() {
            return pos == end;
        }
        if self.budget == 0 {
            return false;
        }
        self.budget -= 1;
        let key = (seq as u32, i as u32, pos as u32, end as u32);
        if let Some(&hit) = self.memo.get(&key) {
            return hit;
        }
        let nocase = self.pat.nocase;
        let one = |n: &Node, c: char| match n {
            Node::Char(x) => *x == c || (nocase && x.to_lowercase().eq(c.to_lowercase())),
            Node::Any => true,
            Node::Set(set) => set.test(c, nocase),
            _ => false,
        };
        let hit = match &nodes[i] {
            Node::Star => (pos..=end).any(|k| self.seq(seq, i + 1, k, end)),
            Node::Group(kind, alts) => {
                let (kind, alts) = (*kind, alts.clone());
                self.group(kind, &alts, seq, i, pos, end)
            }
            n => pos < end && one(n, self.text[pos]) && self.seq(seq, i + 1, pos + 1, end),
        };
        self.memo.insert(key, hit);
        hit
    }

    fn any_alt(&mut self, alts: &[usize], pos: usize, mid: usize) -> bool {
        alts.iter().any(|&a| self.seq(a, 0, pos, mid))
    }

    fn group(
        &mut self,
        kind: Kind,
        alts: &[usize],
        seq: usize,
        i: usize,
        pos: usize,
        end: usize,
    ) -> bool {
        let zero_ok = matches!(kind, Kind::Opt | Kind::Star);
        if zero_ok && self.seq(seq, i + 1, pos, end) {
            return true;
        }
        if matches!(kind, Kind::Star | Kind::Plus) {
            // Positions reachable by one or more repetitions, breadth first: iterative, so a
            // long text cannot nest the recursion once per repetition.
            let mut reached = std::collections::BTreeSet::new();
            let mut frontier = vec![pos];
            while let Some(p) = frontier.pop() {
                for mid in p..=end {
                    if reached.contains(&mid) || (mid == p && p != pos) {
                        continue;
                    }
                    if self.any_alt(alts, p, mid) {
                        reached.insert(mid);
                        if mid > p {
                            frontier.push(mid);
                        }
                    }
                }
            }
            return reached.into_iter().any(|r| self.seq(seq, i + 1, r, end));
        }
        for mid in pos..=end {
            let hit = match kind {
                Kind::Not => !self.any_alt(alts, pos, mid) && self.seq(seq, i + 1, mid, end),
                _ => self.any_alt(alts, pos, mid) && self.seq(seq, i + 1, mid, end),
            };
            if hit {
                return true;
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pat: &str, text: &str) -> bool {
        ExtPattern::parse(pat, false)
            .expect("has a group")
            .matches(text)
    }

    #[test]
    fn groups_like_bash() {
        // (pattern, text, `[[ text == pattern ]]` in bash 5.2)
        let table = [
            ("--@(help|verbose)", "--verbose", true),
            ("--@(help|verbose)", "--oops", false),
            ("--?(help|verbose)", "--", true),
            ("--?(help|verbose)", "--helphelp", false),
            ("--+(help|verbose)", "--helpverbose", true),
            ("--+(help|verbose)", "--", false),
            ("--*(help|verbose)", "--", true),
            ("--*(help|verbose)", "--helpx", false),
            ("!(*.txt)", "a.txt", false),
            ("!(*.txt)", "a.py", true),
            ("!(foo)", "", true),
            ("!(foo)", "foo", false),
            ("!(foo)", "foobar", true),
            ("*!(.txt)", "a.txt", true),
            ("@(a|b)*@(c|d)", "axxd", true),
            (
                "--@(help|no-@(long|short)-option)",
                "--no-short-option",
                true,
            ),
            ("+([0-9])", "2024", true),
            ("+([0-9])", "20a4", false),
            ("@(a\\|b)", "a|b", true),
            ("*(a|)", "aaa", true),
        ];
        for (pat, text, want) in table {
            assert_eq!(m(pat, text), want, "[[ {text:?} == {pat} ]]");
        }
    }

    #[test]
    fn no_runaway() {
        let text = "a".repeat(3000);
        // Nested repetition over a long text: must end (budget or memo), not hang.
        let _ = m("*(*(a|aa)|+(a))b", &text);
    }
}
