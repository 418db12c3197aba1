//! Bash glob patterns: matching (case, [[ ]], ${x#pat}, ...) and pathname expansion.
//!
//! A pattern is a `&str` in which every character that must match literally (it came from
//! quoted text) is preceded by a backslash; unescaped `*`, `?` and `[...]` are special.
//!
//! Matching compiles the pattern to a list of single-character tokens and stars and runs it as
//! an NFA over the text (one pass, O(text × pattern) at worst), so no pattern can make a match
//! take exponential time. The same automaton, run with the start position carried by each
//! state, finds the leftmost-longest match of `${x/pat/rep}` in one pass as well.

use wasmsand_vfs::{Vfs, path};

mod bracket;
mod extglob;

use bracket::{Bracket, parse_bracket};
use extglob::ExtPattern;

/// Whether `pattern` contains an unescaped `*`, `?`, or a `[` that opens a complete bracket
/// expression (anything else is plain text and needs no matching or globbing).
pub fn has_meta(pattern: &str) -> bool {
    let chars: Vec<char> = pattern.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '*' | '?' => return true,
            '@' | '+' | '!' if chars.get(i + 1) == Some(&'(') && extglob::has_group(pattern) => {
                return true;
            }
            '[' => {
                if parse_bracket(&chars, i + 1).is_some() {
                    return true;
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    false
}

/// The literal text of a pattern: escaping backslashes removed. A trailing lone backslash
/// stays, as it escapes nothing.
pub fn unescape(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut it = pattern.chars();
    while let Some(c) = it.next() {
        if c == '\\' {
            match it.next() {
                Some(n) => out.push(n),
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A pattern that matches exactly `text`.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        // Parentheses and bars too: quoted, they must not open an extended group; and what
        // is special inside brackets (`[C\-D]` holds a `-`, `[\!a]` a `!`).
        if matches!(
            c,
            '*' | '?' | '[' | ']' | '\\' | '(' | ')' | '|' | '-' | '!' | '^'
        ) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Unquoted pattern text with `(`, `)` and `|` made literal (their escapes kept intact): what
/// they are when `extglob` is off, so that they cannot open an extended group.
pub fn plain_parens(text: &str) -> String {
    if !text.contains(['(', ')', '|']) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 4);
    let mut it = text.chars();
    while let Some(c) = it.next() {
        match c {
            '\\' => {
                out.push(c);
                if let Some(n) = it.next() {
                    out.push(n);
                }
            }
            '(' | ')' | '|' => {
                out.push('\\');
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

/// Whether the whole of `text` matches `pattern`. `*` also matches `/`.
pub fn matches(pattern: &str, text: &str) -> bool {
    matches_opts(pattern, text, false)
}

/// [`matches()`] as a pathname: `*`, `?` and brackets do not match a `/`, so the pattern and the
/// path must have as many components (how bash applies `GLOBIGNORE`).
pub fn matches_path(pattern: &str, path: &str) -> bool {
    let comps = split_components(pattern);
    let parts: Vec<&str> = path.split('/').collect();
    comps.len() == parts.len() && comps.iter().zip(parts).all(|(c, p)| matches(c, p))
}

/// The patterns of `GLOBIGNORE`: separated by `:`, except inside a bracket expression
/// (`[[:alnum:]]*` is one pattern).
pub fn split_globignore(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut depth = 0usize;
    let mut chars = value.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                cur.push(c);
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
                continue;
            }
            '[' => depth += 1,
            ']' if depth > 0 => depth -= 1,
            ':' if depth == 0 => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// [`matches()`], optionally ignoring case (`shopt -s nocasematch`).
pub fn matches_opts(pattern: &str, text: &str, nocase: bool) -> bool {
    if let Some(ext) = ExtPattern::parse(pattern, nocase) {
        return ext.matches(text);
    }
    let pat = Compiled::new(pattern, nocase);
    if let Some(lit) = pat.literal() {
        return if nocase {
            eq_nocase(&lit, text)
        } else {
            lit == text
        };
    }
    let mut run = Run::new(&pat);
    run.seed(0);
    for c in text.chars() {
        if !run.step(c) {
            return false;
        }
    }
    run.accepting().is_some()
}

/// Byte length of the shortest (or, with `longest`, longest) prefix of `text` that matches
/// `pattern`: what `${x#pat}` (`${x##pat}`) removes. `None` when no prefix matches.
pub fn strip_prefix_len(text: &str, pattern: &str, longest: bool) -> Option<usize> {
    if let Some(ext) = ExtPattern::parse(pattern, false) {
        let mut m = ext.matcher(text);
        let ends = char_ends(text);
        let mut pick = |k: usize| m.whole(0, k);
        return if longest {
            (0..ends.len()).rev().find(|&k| pick(k)).map(|k| ends[k])
        } else {
            (0..ends.len()).find(|&k| pick(k)).map(|k| ends[k])
        };
    }
    let pat = Compiled::new(pattern, false);
    if let Some(lit) = pat.literal() {
        return text.starts_with(lit.as_str()).then_some(lit.len());
    }
    let mut run = Run::new(&pat);
    run.seed(0);
    let mut best = run.accepting().map(|_| 0);
    if best.is_some() && !longest {
        return best;
    }
    for (i, c) in text.char_indices() {
        if !run.step(c) {
            break;
        }
        if run.accepting().is_some() {
            best = Some(i + c.len_utf8());
            if !longest {
                break;
            }
        }
    }
    best
}

/// Byte offset where the shortest (or, with `longest`, longest) suffix of `text` that matches
/// `pattern` starts: what `${x%pat}` (`${x%%pat}`) removes. `None` when no suffix matches.
pub fn strip_suffix_start(text: &str, pattern: &str, longest: bool) -> Option<usize> {
    if let Some(ext) = ExtPattern::parse(pattern, false) {
        let mut m = ext.matcher(text);
        let ends = char_ends(text);
        let n = ends.len() - 1;
        let mut pick = |k: usize| m.whole(k, n);
        return if longest {
            (0..=n).find(|&k| pick(k)).map(|k| ends[k])
        } else {
            (0..=n).rev().find(|&k| pick(k)).map(|k| ends[k])
        };
    }
    let mut pat = Compiled::new(pattern, false);
    if let Some(lit) = pat.literal() {
        return text.ends_with(lit.as_str()).then(|| text.len() - lit.len());
    }
    // A suffix matches exactly when its reversal matches the reversed pattern, and every token
    // is one character or a star, so the reversal is just the token list backwards.
    pat.toks.reverse();
    let mut run = Run::new(&pat);
    run.seed(0);
    let mut best = run.accepting().map(|_| text.len());
    if best.is_some() && !longest {
        return best;
    }
    for (i, c) in text.char_indices().rev() {
        if !run.step(c) {
            break;
        }
        if run.accepting().is_some() {
            best = Some(i);
            if !longest {
                break;
            }
        }
    }
    best
}

/// The leftmost match of `pattern` in `text` that starts at or after byte offset `from`, the
/// longest one at that position, as `(start, end)` byte offsets, as `${x/pat/rep}` picks it.
///
/// An empty pattern never matches (bash leaves `${x/}` and `${x//}` unchanged; the anchored
/// forms `${x/#/p}` and `${x/%/s}` are [`strip_prefix_len`] and [`strip_suffix_start`] with an
/// empty pattern). A pattern may match the empty string (`*`); as in bash, such a match is not
/// reported at the very end of a non-empty text, so a caller doing `${x//pat/rep}` copies one
/// character after an empty match and calls again.
pub fn find(text: &str, pattern: &str, from: usize) -> Option<(usize, usize)> {
    find_opts(text, pattern, from, false)
}

/// [`find`], optionally ignoring case.
pub fn find_opts(text: &str, pattern: &str, from: usize, nocase: bool) -> Option<(usize, usize)> {
    if pattern.is_empty() || from > text.len() || !text.is_char_boundary(from) {
        return None;
    }
    if let Some(ext) = ExtPattern::parse(pattern, nocase) {
        let mut m = ext.matcher(text);
        let ends = char_ends(text);
        let n = ends.len() - 1;
        let first = ends.iter().position(|&b| b == from)?;
        for s in first..=n {
            // As with the plain matcher: no empty match at the very end of a non-empty text.
            if s == n && n > 0 {
                break;
            }
            if let Some(e) = (s..=n).rev().find(|&e| m.whole(s, e)) {
                return Some((ends[s], ends[e]));
            }
        }
        return None;
    }
    let pat = Compiled::new(pattern, nocase);
    let at_end_ok = text.is_empty();
    if let Some(lit) = pat.literal().filter(|_| !nocase) {
        if lit.is_empty() {
            return None;
        }
        return text[from..]
            .find(lit.as_str())
            .map(|i| (from + i, from + i + lit.len()));
    }
    let mut run = Run::new(&pat);
    // Best match so far: (start, end). States are seeded at every position until some match is
    // found; after that only states that started earlier than it can still improve the answer
    // (leftmost wins), or states with the same start (longer wins).
    let mut best: Option<(usize, usize)> = None;
    let rest = &text[from..];
    let mut iter = rest.char_indices().peekable();
    let mut pos = from;
    loop {
        if best.is_none() && (pos < text.len() || at_end_ok) {
            run.seed(pos);
        }
        if let Some(start) = run.accepting() {
            match best {
                Some((s, _)) if s < start => {}
                _ => best = Some((start, pos)),
            }
        }
        if let Some((s, _)) = best {
            run.retain_starts_up_to(s);
        }
        let Some((_, c)) = iter.next() else { break };
        let alive = run.step(c);
        pos += c.len_utf8();
        if !alive && best.is_some() {
            break;
        }
    }
    best
}

/// Options of pathname expansion (the `shopt` settings that change it, and a bound).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlobOptions {
    /// Names starting with `.` also match a pattern not starting with `.` (never `.`/`..`).
    pub dotglob: bool,
    /// Informational for the caller, which decides what an empty result becomes.
    pub nullglob: bool,
    /// Match names ignoring case.
    pub nocaseglob: bool,
    /// Most paths one expansion (or one level of it) may produce before it is refused.
    pub max_results: usize,
    /// `shopt -s globstar`: a `**` component matches any number of directories.
    pub globstar: bool,
    /// `shopt globskipdots` (on by default): `.` and `..` never match; off, a pattern starting
    /// with `.` matches them too.
    pub skipdots: bool,
    /// The C locale: names and patterns are matched byte by byte, so `?` does not match the
    /// two bytes of `μ`.
    pub bytes: bool,
}

impl Default for GlobOptions {
    fn default() -> Self {
        GlobOptions {
            dotglob: false,
            nullglob: false,
            nocaseglob: false,
            max_results: 100_000,
            globstar: false,
            skipdots: true,
            bytes: false,
        }
    }
}

/// Why a pathname expansion was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GlobError {
    /// More paths matched than [`GlobOptions::max_results`] allows.
    #[error("pathname expansion produced more than {limit} paths")]
    TooMany {
        /// The limit that was exceeded.
        limit: usize,
    },
}

/// Pathname expansion of `pattern` against `vfs`, relative paths taken from `cwd`.
///
/// Results keep the pattern's form (relative stays relative, `./*` gives `./name`) and are
/// sorted by bytes. An empty vector means nothing matched. A pattern without any glob
/// character is not expanded at all: the result is its literal text, whether or not it exists,
/// as bash never removes or checks such a word.
pub fn glob(
    vfs: &Vfs,
    cwd: &str,
    pattern: &str,
    opts: &GlobOptions,
) -> Result<Vec<String>, GlobError> {
    let comps = split_components(pattern);
    if !comps.iter().any(|c| has_meta(c)) {
        return Ok(vec![unescape(pattern)]);
    }
    let too_many = || GlobError::TooMany {
        limit: opts.max_results,
    };
    let fs_path = |display: &str| {
        if display.is_empty() {
            cwd.to_owned()
        } else {
            path::join(cwd, display)
        }
    };
    let last = comps.len() - 1;
    let mut current: Vec<String> = vec![String::new()];
    let mut last_was_meta = false;
    for (idx, comp) in comps.iter().enumerate() {
        let sep = if idx < last { "/" } else { "" };
        if !has_meta(comp) {
            let lit = unescape(comp);
            for p in &mut current {
                p.push_str(&lit);
                p.push_str(sep);
            }
            last_was_meta = false;
            continue;
        }
        last_was_meta = true;
        if opts.globstar && comp == "**" {
            // Zero or more directories; as the last component, every file and directory
            // below (and the directory itself when it was named: `c/**` gives `c/`).
            let mut next = Vec::new();
            for prefix in &current {
                if idx < last || !prefix.is_empty() {
                    next.push(prefix.clone());
                }
                descend(vfs, &fs_path, prefix, idx < last, opts, &mut next)?;
            }
            current = next;
            continue;
        }
        let comp = if opts.bytes {
            crate::interp::bytes_as_chars(comp)
        } else {
            comp.clone()
        };
        let ext = ExtPattern::parse(&comp, opts.nocaseglob);
        let pat = Compiled::new(&comp, opts.nocaseglob);
        let explicit_dot = match &ext {
            Some(e) => e.explicit_dot(),
            None => matches!(pat.toks.first(), Some(Tok::Char('.'))),
        };
        let mut next = Vec::new();
        for prefix in &current {
            let Ok(entries) = vfs.readdir(&fs_path(prefix)) else {
                continue;
            };
            let mut names: Vec<String> = entries
                .into_iter()
                .map(|e| e.name)
                .filter(|n| n != "." && n != "..")
                .collect();
            if explicit_dot && !opts.skipdots {
                names.extend([".".to_string(), "..".to_string()]);
            }
            for name in names {
                if name.starts_with('.') && !explicit_dot && !opts.dotglob {
                    continue;
                }
                let subject = if opts.bytes {
                    std::borrow::Cow::Owned(crate::interp::bytes_as_chars(&name))
                } else {
                    std::borrow::Cow::Borrowed(name.as_str())
                };
                let hit = match &ext {
                    Some(x) => x.matches(&subject),
                    None => pat.matches_str(&subject),
                };
                if !hit {
                    continue;
                }
                if next.len() >= opts.max_results {
                    return Err(too_many());
                }
                next.push(format!("{prefix}{name}{sep}"));
            }
        }
        current = next;
        if current.is_empty() {
            return Ok(current);
        }
    }
    let dir_only = comps.last().is_some_and(|c| c.is_empty());
    if dir_only {
        current.retain(|p| vfs.stat(&fs_path(p)).is_ok_and(|m| m.is_dir()));
    } else if !last_was_meta {
        current.retain(|p| vfs.lstat(&fs_path(p)).is_ok());
    }
    // `**/` never names the starting directory itself.
    current.retain(|p| !p.is_empty());
    if current.len() > opts.max_results {
        return Err(too_many());
    }
    current.sort();
    current.dedup();
    Ok(current)
}

/// Everything below `prefix` for a `**` component: directories only (each with a trailing `/`)
/// when more components follow, else files and directories. Hidden names only with `dotglob`;
/// symbolic links are listed but not followed, as bash does.
fn descend(
    vfs: &Vfs,
    fs_path: &dyn Fn(&str) -> String,
    prefix: &str,
    dirs_only: bool,
    opts: &GlobOptions,
    out: &mut Vec<String>,
) -> Result<(), GlobError> {
    let Ok(entries) = vfs.readdir(&fs_path(prefix)) else {
        return Ok(());
    };
    for e in entries {
        if e.name == "." || e.name == ".." || (e.name.starts_with('.') && !opts.dotglob) {
            continue;
        }
        let is_dir = e.file_type == wasmsand_vfs::FileType::Dir;
        if out.len() >= opts.max_results {
            return Err(GlobError::TooMany {
                limit: opts.max_results,
            });
        }
        if is_dir {
            let sub = format!("{prefix}{}/", e.name);
            out.push(if dirs_only {
                sub.clone()
            } else {
                format!("{prefix}{}", e.name)
            });
            descend(vfs, fs_path, &sub, dirs_only, opts, out)?;
        } else if !dirs_only {
            out.push(format!("{prefix}{}", e.name));
        }
    }
    Ok(())
}

/// Splits a pattern at its slashes; an escaped slash still separates directories.
fn split_components(pattern: &str) -> Vec<String> {
    let mut comps = vec![String::new()];
    let mut it = pattern.chars();
    while let Some(c) = it.next() {
        match c {
            '/' => comps.push(String::new()),
            '\\' => match it.next() {
                Some('/') => comps.push(String::new()),
                Some(n) => {
                    if let Some(cur) = comps.last_mut() {
                        cur.push('\\');
                        cur.push(n);
                    }
                }
                None => {
                    if let Some(cur) = comps.last_mut() {
                        cur.push('\\');
                    }
                }
            },
            _ => {
                if let Some(cur) = comps.last_mut() {
                    cur.push(c);
                }
            }
        }
    }
    comps
}

/// Byte offset of every character boundary of `text`, its length included: index k is where
/// character k starts.
fn char_ends(text: &str) -> Vec<usize> {
    text.char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(text.len()))
        .collect()
}

fn eq_nocase(a: &str, b: &str) -> bool {
    a.chars()
        .flat_map(char::to_lowercase)
        .eq(b.chars().flat_map(char::to_lowercase))
}

fn char_eq(a: char, b: char, nocase: bool) -> bool {
    a == b || (nocase && a.to_lowercase().eq(b.to_lowercase()))
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Char(char),
    Any,
    Star,
    Set(Box<Bracket>),
}

#[derive(Debug)]
struct Compiled {
    toks: Vec<Tok>,
    nocase: bool,
}

impl Compiled {
    fn new(pattern: &str, nocase: bool) -> Compiled {
        let chars: Vec<char> = pattern.chars().collect();
        let mut toks = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            match c {
                '\\' => {
                    // A trailing lone backslash escapes nothing and stands for itself.
                    toks.push(Tok::Char(chars.get(i + 1).copied().unwrap_or('\\')));
                    i += 2;
                }
                '*' => {
                    if toks.last() != Some(&Tok::Star) {
                        toks.push(Tok::Star);
                    }
                    i += 1;
                }
                '?' => {
                    toks.push(Tok::Any);
                    i += 1;
                }
                '[' => match parse_bracket(&chars, i + 1) {
                    Some((set, next)) => {
                        toks.push(Tok::Set(Box::new(set)));
                        i = next;
                    }
                    None => {
                        toks.push(Tok::Char('['));
                        i += 1;
                    }
                },
                _ => {
                    toks.push(Tok::Char(c));
                    i += 1;
                }
            }
        }
        Compiled { toks, nocase }
    }

    /// The text the pattern stands for, when it has no special token.
    fn literal(&self) -> Option<String> {
        self.toks
            .iter()
            .map(|t| match t {
                Tok::Char(c) => Some(*c),
                _ => None,
            })
            .collect()
    }

    fn matches_str(&self, text: &str) -> bool {
        let mut run = Run::new(self);
        run.seed(0);
        for c in text.chars() {
            if !run.step(c) {
                return false;
            }
        }
        run.accepting().is_some()
    }
}

const NONE: usize = usize::MAX;

/// The live states of the NFA: for each position in the token list, the earliest text offset
/// at which a still-viable attempt reaching it started (`NONE` if none). Keeping only the
/// earliest start per state is enough, because attempts in the same state have identical
/// futures and the earlier one is preferred.
struct Run<'a> {
    pat: &'a Compiled,
    states: Vec<usize>,
    next: Vec<usize>,
}

impl<'a> Run<'a> {
    fn new(pat: &'a Compiled) -> Run<'a> {
        let n = pat.toks.len() + 1;
        Run {
            pat,
            states: vec![NONE; n],
            next: vec![NONE; n],
        }
    }

    fn seed(&mut self, start: usize) {
        if self.states[0] > start {
            self.states[0] = start;
        }
        close(&self.pat.toks, &mut self.states);
    }

    /// Consumes one character; false when no state survives.
    fn step(&mut self, c: char) -> bool {
        self.next.fill(NONE);
        let mut alive = false;
        for (i, tok) in self.pat.toks.iter().enumerate() {
            let s = self.states[i];
            if s == NONE {
                continue;
            }
            let target = match tok {
                Tok::Star => i,
                Tok::Any => i + 1,
                Tok::Char(x) if char_eq(*x, c, self.pat.nocase) => i + 1,
                Tok::Set(set) if set.test(c, self.pat.nocase) => i + 1,
                _ => continue,
            };
            if self.next[target] > s {
                self.next[target] = s;
            }
            alive = true;
        }
        std::mem::swap(&mut self.states, &mut self.next);
        close(&self.pat.toks, &mut self.states);
        alive
    }

    fn accepting(&self) -> Option<usize> {
        self.states.last().copied().filter(|&s| s != NONE)
    }

    fn retain_starts_up_to(&mut self, limit: usize) {
        for s in &mut self.states {
            if *s != NONE && *s > limit {
                *s = NONE;
            }
        }
    }
}

/// A star may match nothing, so a state before a star also holds the state after it.
fn close(toks: &[Tok], states: &mut [usize]) {
    for (i, tok) in toks.iter().enumerate() {
        if *tok == Tok::Star && states[i] < states[i + 1] {
            states[i + 1] = states[i];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmsand_vfs::VfsOptions;

    /// (text, pattern, result of `[[ $t == $p ]]` in bash 5.2, LC_ALL=C.UTF-8).
    const MATCH_TABLE: &[(&str, &str, bool)] = &[
        ("", "", true),
        ("a", "", false),
        ("", "*", true),
        ("abc", "a*", true),
        ("abc", "*c", true),
        ("abc", "*b", false),
        ("a/b", "a*b", true),
        ("abc", "a?c", true),
        ("ac", "a?c", false),
        ("é", "?", true),
        ("éa", "??", true),
        ("b", "[abc]", true),
        ("d", "[abc]", false),
        ("m", "[a-z]", true),
        ("é", "[a-z]", false),
        ("b", "[z-a]", false),
        ("z", "[z-a]", false),
        ("a", "[!]a]", false),
        ("b", "[!]a]", true),
        ("]", "[]a]", true),
        ("-", "[a-]", true),
        ("a", "[^a]", false),
        ("!", "[^a]", true),
        ("a", "[\\]", false),
        ("\\", "[\\]", false),
        ("[]", "[\\]", true),
        ("ab", "[ab", false),
        ("[ab", "[ab", true),
        ("b", "[a-c-e]", true),
        ("-", "[a-c-e]", true),
        ("d", "[a-c-e]", false),
        ("a", "[[:foo:]]", false),
        ("[", "[[:foo:]]", false),
        ("=", "[[=a=]]", false),
        ("a", "[[=a=]]", true),
        ("a", "[[.a.]]", true),
        ("a", "[[:alpha:]-z]", true),
        ("[", "[[]", true),
        ("é", "[[:alpha:]]", true),
        ("é", "[[:lower:]]", true),
        ("É", "[[:upper:]]", true),
        ("٣", "[[:digit:]]", false),
        ("7", "[[:digit:]]", true),
        ("\u{fffd}", "[[:print:]]", true),
        (" ", "[[:print:]]", true),
        (" ", "[[:graph:]]", false),
        ("→", "[[:punct:]]", true),
        ("é", "[[:alnum:]]", true),
        ("é", "[[:graph:]]", true),
        ("\t", "[[:blank:]]", true),
        ("\n", "[[:blank:]]", false),
        ("\n", "[[:space:]]", true),
        ("\x01", "[[:cntrl:]]", true),
        ("F", "[[:xdigit:]]", true),
        ("g", "[[:xdigit:]]", false),
        (",", "[[:punct:]]", true),
        ("a*", "a\\*", true),
        ("ab", "a\\*", false),
        ("a?", "a\\?", true),
        ("*", "[\\*]", true),
        ("x", "[\\*]", false),
        ("b", "[\\a-c]", true),
        ("ab", "a\\", false),
        ("a\\", "a\\", true),
        ("abcabc", "*b*b*", true),
        ("abcabc", "*b*b*b*", false),
        ("foo.txt", "*.txt", true),
        ("x", "[!a-w]", true),
        ("]", "[]]", true),
        ("]]", "[]]]", true),
    ];

    #[test]
    fn match_table() {
        for &(text, pat, want) in MATCH_TABLE {
            assert_eq!(matches(pat, text), want, "[[ {text:?} == {pat:?} ]]");
        }
    }

    #[test]
    fn nocase() {
        assert!(!matches_opts("A*[B]", "abx", true));
        assert!(matches_opts("A*[B]", "axb", true));
        assert!(matches_opts("ÉTÉ", "été", true));
        assert!(!matches("ÉTÉ", "été"));
    }

    #[test]
    fn meta_and_escape() {
        assert!(has_meta("a*"));
        assert!(has_meta("?"));
        assert!(has_meta("[ab]"));
        assert!(!has_meta("[ab"));
        assert!(!has_meta("a\\*"));
        assert!(!has_meta("plain"));
        assert!(!has_meta("\\[ab]"));
        assert_eq!(unescape("a\\*b\\\\c\\"), "a*b\\c\\");
        let odd = "a*b?[c]\\d é";
        assert_eq!(escape(odd), "a\\*b\\?\\[c\\]\\\\d é");
        assert_eq!(unescape(&escape(odd)), odd);
        assert!(matches(&escape(odd), odd));
        assert!(!has_meta(&escape(odd)));
    }

    fn strip(text: &str, pat: &str, op: &str) -> String {
        match op {
            "#" => strip_prefix_len(text, pat, false).map_or(text.into(), |n| text[n..].into()),
            "##" => strip_prefix_len(text, pat, true).map_or(text.into(), |n| text[n..].into()),
            "%" => strip_suffix_start(text, pat, false).map_or(text.into(), |n| text[..n].into()),
            _ => strip_suffix_start(text, pat, true).map_or(text.into(), |n| text[..n].into()),
        }
    }

    fn replace(text: &str, pat: &str, rep: &str, global: bool) -> String {
        let mut out = String::new();
        let mut pos = 0;
        while let Some((s, e)) = find(text, pat, pos) {
            out.push_str(&text[pos..s]);
            out.push_str(rep);
            pos = e;
            if s == e {
                match text[e..].chars().next() {
                    Some(c) => {
                        out.push(c);
                        pos += c.len_utf8();
                    }
                    None => break,
                }
            }
            if !global {
                break;
            }
        }
        out.push_str(&text[pos..]);
        out
    }

    #[test]
    fn strip_like_bash() {
        // Expected values from bash: x=...; echo "${x#p}" etc.
        let x = "/usr/lib/é/file.tar.gz";
        assert_eq!(strip(x, "*/", "#"), "usr/lib/é/file.tar.gz");
        assert_eq!(strip(x, "*/", "##"), "file.tar.gz");
        assert_eq!(strip(x, ".*", "%"), "/usr/lib/é/file.tar");
        assert_eq!(strip(x, ".*", "%%"), "/usr/lib/é/file");
        assert_eq!(strip(x, "/*é", "#"), "/file.tar.gz");
        assert_eq!(strip(x, "?", "#"), "usr/lib/é/file.tar.gz");
        assert_eq!(strip(x, "??", "%"), "/usr/lib/é/file.tar.");
        assert_eq!(strip(x, "nomatch", "#"), x);
        assert_eq!(strip(x, "*", "#"), x);
        assert_eq!(strip(x, "*", "##"), "");
        assert_eq!(strip(x, "*", "%"), x);
        assert_eq!(strip(x, "*", "%%"), "");
        assert_eq!(strip(x, "", "#"), x);
        assert_eq!(strip(x, "/usr", "#"), "/lib/é/file.tar.gz");
        assert_eq!(strip(x, "gz", "%"), "/usr/lib/é/file.tar.");
        assert_eq!(strip("é/é", "é", "%"), "é/");
        assert_eq!(strip("aaa", "a*", "#"), "aa");
        assert_eq!(strip("aaa", "a*", "##"), "");
        assert_eq!(strip("aXbXc", "*X", "%"), "aXbXc");
        assert_eq!(strip("aXbXc", "X*", "%"), "aXb");
        assert_eq!(strip("aXbXc", "X*", "%%"), "a");
    }

    #[test]
    fn replace_like_bash() {
        // Expected values from bash 5.2: x=...; echo "${x/p/r}" and "${x//p/r}".
        assert_eq!(replace("abc", "*", "X", true), "X");
        assert_eq!(replace("", "*", "X", true), "X");
        assert_eq!(replace("", "*", "X", false), "X");
        assert_eq!(replace("abc", "", "X", true), "abc");
        assert_eq!(replace("hello world", "o", "0", false), "hell0 world");
        assert_eq!(replace("hello world", "o", "0", true), "hell0 w0rld");
        assert_eq!(replace("hello world", "l*o", "_", false), "he_rld");
        assert_eq!(replace("a1b22c333", "[0-9]", "#", true), "a#b##c###");
        assert_eq!(replace("aXbXc", "X?", "-", true), "a--");
        assert_eq!(replace("ééé", "é", "e", true), "eee");
        assert_eq!(replace("abcabc", "b*", "", false), "a");
        assert_eq!(replace("xaay", "a*", "Q", true), "xQ");
        assert_eq!(replace("abab", "?b", "Z", true), "ZZ");
        assert_eq!(find("abcabc", "c", 3), Some((5, 6)));
        assert_eq!(find("abc", "z", 0), None);
        assert_eq!(find("abc", "b", 99), None);
    }

    #[test]
    fn no_exponential_blowup() {
        let text = "a".repeat(10_000);
        assert!(!matches("*a*a*a*a*a*b", &text));
        assert!(matches("*a*a*a*a*a*", &text));
        let big = "ab".repeat(50_000);
        assert_eq!(strip_prefix_len(&big, "*b", true), Some(big.len()));
        assert_eq!(strip_suffix_start(&big, "a*", true), Some(0));
        assert_eq!(replace(&big, "[a]", "", true).len(), 50_000);
        assert_eq!(replace(&big, "a", "", true).len(), 50_000);
    }

    fn test_vfs() -> Vfs {
        let mut v = Vfs::new(VfsOptions::default());
        for d in ["/w/a", "/w/a-b", "/w/.h", "/w/d/sub"] {
            v.mkdir_p(d).unwrap();
        }
        for f in [
            "/w/a/x",
            "/w/a-b/x",
            "/w/.hid",
            "/w/b",
            "/w/d/sub/f1",
            "/w/d/f2",
            "/w/B2",
        ] {
            v.write(f, b"").unwrap();
        }
        v.symlink("/w/d", "/w/link").unwrap();
        v.symlink("/nowhere", "/w/dangling").unwrap();
        v
    }

    fn g(v: &Vfs, pat: &str) -> Vec<String> {
        glob(v, "/w", pat, &GlobOptions::default()).unwrap()
    }

    #[test]
    fn glob_like_bash() {
        let v = test_vfs();
        assert_eq!(g(&v, "*/x"), ["a-b/x", "a/x"]);
        assert_eq!(g(&v, ".*"), [".h", ".hid"]);
        assert_eq!(g(&v, "*"), ["B2", "a", "a-b", "b", "d", "dangling", "link"]);
        assert_eq!(g(&v, "./b*"), ["./b"]);
        assert_eq!(g(&v, "a//*"), ["a//x"]);
        assert_eq!(g(&v, "*/"), ["a-b/", "a/", "d/", "link/"]);
        assert_eq!(g(&v, "[a-b]*/"), ["a-b/", "a/"]);
        assert_eq!(g(&v, "/w/a*/x"), ["/w/a-b/x", "/w/a/x"]);
        assert_eq!(g(&v, "link/*"), ["link/f2", "link/sub"]);
        assert_eq!(g(&v, "*/sub/f?"), ["d/sub/f1", "link/sub/f1"]);
        assert_eq!(g(&v, "*/nope"), Vec::<String>::new());
        assert_eq!(g(&v, "zz*"), Vec::<String>::new());
        assert_eq!(g(&v, "dang*"), ["dangling"]);
        assert_eq!(g(&v, "b/*"), Vec::<String>::new());
        assert_eq!(g(&v, "\\*"), ["*"]);
        assert_eq!(g(&v, "a\\*"), ["a*"]);
        assert_eq!(g(&v, "a/x/"), ["a/x/"]);
        assert_eq!(g(&v, "missing/*"), Vec::<String>::new());
        assert_eq!(
            glob(&v, "/", "w/?", &GlobOptions::default()).unwrap(),
            ["w/a", "w/b", "w/d"]
        );

        let dot = GlobOptions {
            dotglob: true,
            ..GlobOptions::default()
        };
        assert_eq!(
            glob(&v, "/w", "*", &dot).unwrap(),
            [".h", ".hid", "B2", "a", "a-b", "b", "d", "dangling", "link"]
        );
        let nocase = GlobOptions {
            nocaseglob: true,
            ..GlobOptions::default()
        };
        assert_eq!(glob(&v, "/w", "b*", &nocase).unwrap(), ["B2", "b"]);
        let small = GlobOptions {
            max_results: 3,
            ..GlobOptions::default()
        };
        assert_eq!(
            glob(&v, "/w", "*", &small),
            Err(GlobError::TooMany { limit: 3 })
        );
    }
}
