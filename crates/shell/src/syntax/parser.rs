//! The parser: a hand-written recursive descent over the source bytes.
//!
//! Shell lexing depends on the grammar (keywords only in command position, `case` patterns,
//! here-documents, `[[ ]]`, `((`), so there is no separate token stream: each grammar rule reads
//! the bytes it needs. All syntax characters are ASCII, so working on bytes never splits a
//! UTF-8 sequence where it matters.
//!
//! Recursion only happens where the language nests (compound commands, substitutions,
//! `${...}` words, brace expansions, arithmetic and `[[ ]]` parentheses), and every such step
//! goes through `Parser::nested`, which stops at [`MAX_DEPTH`]. Long flat input (many
//! commands, long pipelines, long `&&` chains, long words) is handled by loops.

use std::collections::{HashMap, HashSet};

use crate::syntax::arith::{self, OPERATORS, Tok, Token};
use crate::syntax::ast::*;
use crate::syntax::error::ParseError;
use crate::syntax::error::ParseErrorKind;

/// How deeply constructs may nest (compound commands, substitutions, `${...}`, brace
/// expansions, arithmetic and `[[ ]]` parentheses, all counted together).
pub const MAX_DEPTH: usize = 200;

const DEPTH_MESSAGE: &str = "maximum nesting depth exceeded";

type ParseResult<T> = Result<T, ParseError>;

/// Parses a whole script.
pub fn parse(source: &str) -> Result<Script, ParseError> {
    parse_opts(source, &ParseOptions::default())
}

/// What of the shell's state changes how text parses.
#[derive(Debug, Clone, Default)]
pub struct ParseOptions {
    /// `shopt -s extglob` is on when parsing starts.
    pub extglob: bool,
    /// The aliases to expand (`shopt -s expand_aliases` is on), as bash does while reading:
    /// the first word of a simple command, and the word after an alias ending in a blank.
    pub aliases: Option<im::OrdMap<String, String>>,
    /// The line number of the text's first line.
    pub line_base: usize,
}

/// Parses a whole script with the given options.
pub fn parse_opts(source: &str, opts: &ParseOptions) -> Result<Script, ParseError> {
    parse_chunk(source, opts).map(|(s, _)| s)
}

/// [`parse_opts`], also telling whether a here-document ran to the end of the text without
/// its delimiter (complete for bash reading a whole script, but not for a reader that feeds
/// the text a line at a time).
pub fn parse_chunk(source: &str, opts: &ParseOptions) -> Result<(Script, bool), ParseError> {
    run_passes(source.as_bytes(), 0, opts.line_base.max(1), opts, |p| {
        let s = p.program()?;
        // A here-document whose line is the last, with no newline after it, has no body and
        // no delimiter: it ran to the end as well (bash warns the same way for both).
        Ok((s, p.doc_unterminated || !p.pending.is_empty()))
    })
}

/// Parses a whole script, with `extglob` telling whether `shopt -s extglob` is on when its
/// parsing starts. As bash reads a script a line at a time, a top-level `shopt -s/-u extglob`
/// takes effect on the lines after it (and `[[ ]]` accepts extended patterns always, as in
/// bash 5.2).
pub fn parse_with(source: &str, extglob: bool) -> Result<Script, ParseError> {
    parse_opts(
        source,
        &ParseOptions {
            extglob,
            ..ParseOptions::default()
        },
    )
}

/// Parses a string as an arithmetic expression, as `let`, `$((x))` with `x` holding an
/// expression, or an array subscript need at run time. Expansions (`$x`) are allowed.
pub fn parse_arith(source: &str) -> Result<Arith, ParseError> {
    run_passes(source.as_bytes(), 0, 1, &ParseOptions::default(), |p| {
        let start = p.pos;
        let tokens = p.arith_tokens(ArithEnd::Eof, start)?;
        let Some((tokens, end, _)) = tokens else {
            return Err(p.err_at(p.pos, "syntax error in expression"));
        };
        p.finish_arith(tokens, start, end)
    })
}

/// Runs a parse, and runs it again when it met here-documents: a body is read at the newline
/// after its operator, when the redirection node is already built, so the second pass builds
/// it with the body found by the first. Cheaper and simpler than patching the tree.
fn run_passes<T>(
    src: &[u8],
    depth: usize,
    line_base: usize,
    opts: &ParseOptions,
    f: impl Fn(&mut Parser<'_>) -> ParseResult<T>,
) -> ParseResult<T> {
    if depth > MAX_DEPTH {
        return Err(ParseError {
            line: line_base,
            column: 1,
            message: DEPTH_MESSAGE.into(),
            kind: ParseErrorKind::Syntax,
        });
    }
    let mut p = Parser::new(src, depth, line_base);
    p.extglob = opts.extglob;
    p.aliases = opts.aliases.clone().filter(|a| !a.is_empty());
    let out = f(&mut p)?;
    if p.bodies.is_empty() {
        return Ok(out);
    }
    p.pos = 0;
    p.depth = depth;
    p.pending.clear();
    p.second_pass = true;
    p.extglob = opts.extglob;
    p.active_aliases.clear();
    // Alias expansion rewrote the text; the second pass redoes the same rewrites.
    p.set_src(std::borrow::Cow::Borrowed(src));
    f(&mut p)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    AndAnd,
    OrOr,
    DSemiAmp,
    DSemi,
    SemiAmp,
    Semi,
    PipeAmp,
    Pipe,
    Amp,
    LParen,
    RParen,
    Newline,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Command words, assignment values, redirection targets, patterns, `[[ ]]` operands.
    Normal,
    /// The right side of `=~`: parentheses and `|` belong to the regex.
    Regex,
    /// Inside `"..."`.
    DQuote,
    /// The word of `${x:-word}` (ends at `}`; at `/` too for a replacement pattern).
    Param { dq: bool, slash: bool },
    /// Inside `name[...]`.
    Subscript,
    /// The body of a here-document with an unquoted delimiter.
    HereDoc,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tilde {
    No,
    /// At the start of the word.
    Start,
    /// At the start and after each unquoted `:` (assignment values).
    Assign,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ArithEnd {
    /// `))`; a lone `)` means this was not arithmetic after all.
    DParen,
    /// `;` (the first two parts of `for ((`).
    Semi,
    /// `:` or `}` (offset of `${x:off:len}`).
    Colon,
    /// `}`
    Brace,
    /// `]` (`$[...]`)
    Bracket,
    /// End of input (`parse_arith`).
    Eof,
}

#[derive(Debug, Clone)]
struct PendingDoc {
    op_pos: usize,
    delimiter: Vec<u8>,
    quoted: bool,
    strip_tabs: bool,
}

struct Parser<'a> {
    src: std::borrow::Cow<'a, [u8]>,
    pos: usize,
    depth: usize,
    line_base: usize,
    /// Offsets of every newline, to turn positions into lines in O(log n).
    newlines: Vec<usize>,
    pending: Vec<PendingDoc>,
    /// Here-document bodies by operator position, collected by the first pass.
    bodies: HashMap<usize, (Word, String)>,
    second_pass: bool,
    /// Positions of `((` that turned out not to be arithmetic: never tried twice, which keeps
    /// nested `((((` linear instead of exponential.
    not_arith: HashSet<usize>,
    /// Positions of `${#` that turned out not to be a length (`${#a[i]x}`), for the same
    /// reason: each failed try re-parsed the rest, doubling the work per nested `${#a[`.
    not_length: HashSet<usize>,
    /// `[` positions in `${...}` that read as no subscript: tried once, as `not_length`.
    not_subscript: HashSet<usize>,
    /// Where the `$(` whose `(` is at a position ends when parsed (`subst_end`), shared with
    /// the parsers that find it: nested subscripts are read once each, not once per level.
    subst_ends: std::rc::Rc<std::cell::RefCell<HashMap<usize, Option<usize>>>>,
    /// Inside `$(...)` or `<(...)`: a bare `!` is no command before the `)` there.
    in_subst: usize,
    /// Reading `"..."` inside the word of a double-quoted `${...}`: there bash lets a
    /// backslash quote any character (`"${v:+"x\xy"}"` is `xxy`).
    dq_in_dq_param: bool,
    backticks: HashMap<usize, Script>,
    /// Extended glob groups are words' text (`shopt -s extglob` in effect for this line).
    extglob: bool,
    /// Inside `[[ ]]`, where they are always accepted.
    in_cond: usize,
    /// Lists being parsed, to tell the top level (where `shopt` changes later lines).
    list_depth: usize,
    aliases: Option<im::OrdMap<String, String>>,
    /// The alias just expanded ended in a blank: the next word, the first at or after this
    /// offset (the end of the alias text), is checked for an alias too.
    alias_next: Option<usize>,
    /// Aliases expanded at the current command's word (see `expand_aliases_here`).
    cmd_aliases: Vec<String>,
    /// Aliases whose text is still being read, with where that text ends: bash does not expand
    /// an alias again inside its own text, however many commands that text holds.
    active_aliases: Vec<(String, usize)>,
    /// Parsing an assignment's value: the words of its `${x-word}` operands expand `~`
    /// after each `:` too (`y=${u-~:~}`), as bash.
    tilde_assign: bool,
    /// Where a command word that `try_assignment` found to be `name[...]` without an `=`
    /// ends: bash reads it to the balanced `]` across blanks and operators (`a[; x ]` is one
    /// word), as it reads a subscript.
    subscript_word_end: Option<usize>,
    /// A here-document body reached the end of the text without its delimiter.
    doc_unterminated: bool,
}

fn newline_offsets(src: &[u8]) -> Vec<usize> {
    src.iter()
        .enumerate()
        .filter(|(_, c)| **c == b'\n')
        .map(|(i, _)| i)
        .collect()
}

/// `Some(on)` when a command's text is a plain `shopt -s/-u ... extglob ...`.
fn shopt_extglob(text: &[u8]) -> Option<bool> {
    let text = std::str::from_utf8(text).ok()?;
    let mut words = text.split_ascii_whitespace();
    if words.next()? != "shopt" {
        return None;
    }
    let mut on = None;
    let mut named = false;
    for w in words {
        match w {
            "-s" => on = Some(true),
            "-u" => on = Some(false),
            "extglob" => named = true,
            w if w.starts_with('-') => {}
            _ => {}
        }
    }
    if named { on } else { None }
}

fn is_meta(c: u8) -> bool {
    matches!(
        c,
        b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b'<' | b'>' | b'(' | b')'
    )
}

fn is_name_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}

/// Whether `word` has an assignment's shape: a name, an optional subscript and an optional `+`,
/// then `=`.
fn assigns(word: &[u8]) -> bool {
    let Some(eq) = word.iter().position(|&c| c == b'=') else {
        return false;
    };
    let mut lhs = &word[..eq];
    if let Some(l) = lhs.strip_suffix(b"+") {
        lhs = l;
    }
    if let Some(open) = lhs.iter().position(|&c| c == b'[') {
        if lhs.last() != Some(&b']') {
            return false;
        }
        lhs = &lhs[..open];
    }
    lhs.first().is_some_and(|&c| is_name_start(c)) && lhs.iter().all(|&c| is_name_char(c))
}

fn is_name_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

const CLOSERS: &[&str] = &["then", "else", "elif", "fi", "do", "done", "esac", "}"];
const RESERVED: &[&str] = &[
    "if", "then", "else", "elif", "fi", "do", "done", "case", "esac", "while", "until", "for",
    "select", "function", "in", "time", "{", "}", "!", "[[", "]]", "coproc",
];

/// Whether `word` is read as a reserved word where a command starts.
pub(crate) fn is_reserved(word: &str) -> bool {
    RESERVED.contains(&word)
}

/// The reserved words that start a compound command (a `(` does too).
const COMPOUND_STARTS: &[&str] = &["if", "while", "until", "for", "select", "case", "{", "[["];

/// Whether `coproc WORDS...` reads its first word as the coprocess's name: a word of name
/// characters before a compound command.
pub(crate) fn reads_as_coproc_name(first: &str, second: &str) -> bool {
    !first.is_empty() && first.bytes().all(is_name_char) && COMPOUND_STARTS.contains(&second)
}

impl<'a> Parser<'a> {
    fn new(src: &'a [u8], depth: usize, line_base: usize) -> Self {
        let newlines = newline_offsets(src);
        Parser {
            src: std::borrow::Cow::Borrowed(src),
            pos: 0,
            depth,
            line_base,
            newlines,
            pending: Vec::new(),
            bodies: HashMap::new(),
            second_pass: false,
            not_arith: HashSet::new(),
            not_length: HashSet::new(),
            not_subscript: HashSet::new(),
            subst_ends: Default::default(),
            in_subst: 0,
            dq_in_dq_param: false,
            backticks: HashMap::new(),
            extglob: false,
            in_cond: 0,
            list_depth: 0,
            aliases: None,
            alias_next: None,
            cmd_aliases: Vec::new(),
            active_aliases: Vec::new(),
            tilde_assign: false,
            subscript_word_end: None,
            doc_unterminated: false,
        }
    }

    fn opts(&self) -> ParseOptions {
        ParseOptions {
            extglob: self.extglob,
            aliases: self.aliases.clone(),
            line_base: 1,
        }
    }

    fn set_src(&mut self, src: std::borrow::Cow<'a, [u8]>) {
        self.newlines = newline_offsets(&src);
        self.subst_ends = Default::default();
        self.src = src;
    }

    /// Alias expansion at the current position (a command word, or the word after an alias
    /// that ends in a blank): while the word there is an unquoted alias name not expanded at
    /// this position yet, its text replaces it in the input, which is then read again, as bash
    /// pushes alias text back into its input.
    fn expand_aliases_here(&mut self, command_position: bool) {
        // The names expanded for this command's word so far: a command word after
        // assignments or redirections (`FOO=1 ll`) is checked again, never into a loop.
        let mut seen = if command_position {
            std::mem::take(&mut self.cmd_aliases)
        } else {
            Vec::new()
        };
        self.expand_aliases_with(command_position, &mut seen);
        if command_position {
            self.cmd_aliases = seen;
        }
    }

    fn expand_aliases_with(&mut self, command_position: bool, seen: &mut Vec<String>) {
        let Some(aliases) = self.aliases.clone() else {
            return;
        };
        if !command_position {
            match self.alias_next {
                Some(at) if self.pos >= at => self.alias_next = None,
                _ => return,
            }
        }
        loop {
            let start = self.pos;
            let mut end = start;
            while let Some(&c) = self.src.get(end) {
                if is_meta(c) || matches!(c, b'\'' | b'"' | b'\\' | b'$' | b'`' | b'=' | b'/') {
                    break;
                }
                end += 1;
            }
            if end == start || !self.delim_at(end - start) {
                return;
            }
            let name = lossy(&self.src[start..end]);
            if seen.contains(&name) || seen.len() > 64 {
                return;
            }
            self.active_aliases.retain(|(_, until)| *until > start);
            if self.active_aliases.iter().any(|(n, _)| *n == name) {
                return;
            }
            let Some(value) = aliases.get(&name) else {
                return;
            };
            let mut text = self.src[..start].to_vec();
            text.extend_from_slice(value.as_bytes());
            text.extend_from_slice(&self.src[end..]);
            self.alias_next = value.ends_with([' ', '\t']).then_some(start + value.len());
            self.set_src(std::borrow::Cow::Owned(text));
            // The texts this one is inside grow by what replaced the name.
            for (_, until) in &mut self.active_aliases {
                *until = *until + value.len() - (end - start);
            }
            self.active_aliases
                .push((name.clone(), start + value.len()));
            seen.push(name);
            self.skip_blanks();
        }
    }

    // ----- positions and errors -----

    fn at(&self, k: usize) -> Option<u8> {
        self.src.get(self.pos + k).copied()
    }

    fn eof(&self) -> bool {
        self.pos >= self.src.len()
    }

    fn starts(&self, s: &str) -> bool {
        self.src[self.pos.min(self.src.len())..].starts_with(s.as_bytes())
    }

    fn delim_at(&self, k: usize) -> bool {
        self.at(k).is_none_or(is_meta)
    }

    fn line_at(&self, pos: usize) -> usize {
        self.line_base + self.newlines.partition_point(|&n| n < pos)
    }

    fn err_at(&self, pos: usize, message: impl Into<String>) -> ParseError {
        let pos = pos.min(self.src.len());
        let idx = self.newlines.partition_point(|&n| n < pos);
        let line_start = if idx == 0 {
            0
        } else {
            self.newlines[idx - 1] + 1
        };
        ParseError {
            line: self.line_base + idx,
            column: String::from_utf8_lossy(&self.src[line_start..pos])
                .chars()
                .count()
                + 1,
            message: message.into(),
            kind: ParseErrorKind::Syntax,
        }
    }

    /// An error inside `[[ ]]` (bash keeps `$?` for those).
    fn cond_err_at(&self, pos: usize, message: impl Into<String>) -> ParseError {
        ParseError {
            kind: ParseErrorKind::Conditional,
            ..self.err_at(pos, message)
        }
    }

    /// `syntax error near unexpected token ...` (bash shows the offending line after it).
    fn unexpected_at(&self, pos: usize, message: impl Into<String>) -> ParseError {
        ParseError {
            kind: ParseErrorKind::UnexpectedToken,
            ..self.err_at(pos, message)
        }
    }

    /// The input ended inside a construct opened at `pos`.
    fn incomplete_at(&self, pos: usize, message: impl Into<String>) -> ParseError {
        ParseError {
            kind: ParseErrorKind::Incomplete,
            ..self.err_at(pos, message)
        }
    }

    /// Bash numbers an error at end of input as if the input ended with a newline and the
    /// error were on the line after it (`bash -c 'if true'` reports line 2).
    fn eof_err(&self, message: impl Into<String>) -> ParseError {
        let mut e = self.err_at(self.src.len(), message);
        let extra = usize::from(!self.src.is_empty() && !self.src.ends_with(b"\n"));
        e.line = self.line_base + self.newlines.len() + extra;
        e.kind = ParseErrorKind::Incomplete;
        e
    }

    fn unclosed(&self, open: usize, what: &str) -> ParseError {
        self.incomplete_at(
            open,
            format!("unexpected EOF while looking for matching `{what}'"),
        )
    }

    /// The text of the token at the current position, as bash quotes it in messages.
    fn token_text(&self) -> String {
        if let Some((op, len)) = self.peek_op() {
            if op == Op::Newline {
                return "newline".into();
            }
            return lossy(&self.src[self.pos..self.pos + len]);
        }
        let mut end = self.pos;
        while end < self.src.len() && (end == self.pos || !is_meta(self.src[end])) {
            end += 1;
            // Redirection operators are tokens of their own.
            if matches!(self.src[end - 1], b'<' | b'>') {
                while end < self.src.len() && matches!(self.src[end], b'<' | b'>' | b'&' | b'|') {
                    end += 1;
                }
                break;
            }
        }
        lossy(&self.src[self.pos..end])
    }

    #[inline(never)]
    fn unexpected(&mut self) -> ParseError {
        self.skip_blanks();
        if self.eof() {
            return self.eof_err("syntax error: unexpected end of file");
        }
        let t = self.token_text();
        self.unexpected_at(
            self.pos,
            format!("syntax error near unexpected token `{t}'"),
        )
    }

    /// Where a word is required (a name, a redirection target), bash reports the end of the
    /// line as the token `newline`, even at the end of input.
    #[inline(never)]
    fn expected_word(&mut self) -> ParseError {
        self.skip_blanks();
        if self.eof() {
            return self.unexpected_at(self.pos, "syntax error near unexpected token `newline'");
        }
        self.unexpected()
    }

    fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> ParseResult<T>) -> ParseResult<T> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.err_at(self.pos, DEPTH_MESSAGE));
        }
        let r = f(self);
        self.depth -= 1;
        r
    }

    // ----- low-level scanning -----

    fn skip_blanks(&mut self) {
        loop {
            match self.at(0) {
                Some(b' ' | b'\t') => self.pos += 1,
                Some(b'\\') if self.at(1) == Some(b'\n') => self.pos += 2,
                Some(b'#') => {
                    while !self.eof() && self.at(0) != Some(b'\n') {
                        self.pos += 1;
                    }
                }
                _ => break,
            }
        }
        self.join_split_reserved();
    }

    /// bash removes line continuations before it reads a word, so `i\<newline>f` is the
    /// reserved word `if`. A reserved word split so is written whole, its continuations moved
    /// after it (where `peek_reserved` looks past them); the word's text is the same either way,
    /// and the line count too.
    fn join_split_reserved(&mut self) {
        const LONGEST: usize = 8;
        let start = self.pos;
        // Called before every word: most have no continuation right after their first run of
        // bytes, and end here.
        let word_byte = |c: &u8| !is_meta(*c) && *c != b'\\';
        let run = self.src[start.min(self.src.len())..]
            .iter()
            .take(LONGEST)
            .take_while(|c| word_byte(c))
            .count();
        if run == 0 || run == LONGEST || self.src.get(start + run..start + run + 2) != Some(b"\\\n")
        {
            return;
        }
        let mut buf = [0u8; LONGEST];
        let (mut len, mut j, mut split) = (0, start, false);
        loop {
            let next = self.past_continuations(j);
            if next > j && len > 0 {
                split = true;
            }
            j = next;
            match self.src.get(j) {
                Some(c) if word_byte(c) && len < LONGEST => {
                    buf[len] = *c;
                    len += 1;
                    j += 1;
                }
                _ => break,
            }
        }
        let letters = &buf[..len];
        // `j` is past any continuations after the last letter; the rewrite ends at that letter.
        let mut end = j;
        while end >= start + 2 && self.src[end - 2] == b'\\' && self.src[end - 1] == b'\n' {
            end -= 2;
        }
        let word = std::str::from_utf8(letters).unwrap_or("");
        let pairs = (end - start - letters.len()) / 2;
        if !split || pairs == 0 || !RESERVED.contains(&word) || !self.delim_at(j - self.pos) {
            return;
        }
        let src = self.src.to_mut();
        src[start..start + letters.len()].copy_from_slice(letters);
        for i in 0..pairs {
            let at = start + letters.len() + 2 * i;
            src[at] = b'\\';
            src[at + 1] = b'\n';
        }
        let first = self.newlines.partition_point(|&n| n < start);
        for i in 0..pairs {
            if let Some(n) = self.newlines.get_mut(first + i) {
                *n = start + letters.len() + 2 * i + 1;
            }
        }
    }

    fn skip_linebreaks(&mut self) -> ParseResult<()> {
        loop {
            self.skip_blanks();
            if self.at(0) == Some(b'\n') {
                self.newline()?;
            } else {
                return Ok(());
            }
        }
    }

    /// Consumes a newline token; the bodies of the here-documents started on its line follow.
    #[inline(never)]
    fn newline(&mut self) -> ParseResult<()> {
        self.pos += 1;
        if self.pending.is_empty() {
            return Ok(());
        }
        for doc in std::mem::take(&mut self.pending) {
            let body_line = self.line_at(self.pos);
            let mut text = Vec::new();
            // A missing delimiter is only a warning in bash: the body runs to the end.
            let mut found = false;
            while !self.eof() {
                let end = self.src[self.pos..]
                    .iter()
                    .position(|&c| c == b'\n')
                    .map_or(self.src.len(), |i| self.pos + i);
                let mut line = &self.src[self.pos..end];
                if doc.strip_tabs {
                    while let [b'\t', rest @ ..] = line {
                        line = rest;
                    }
                }
                self.pos = (end + 1).min(self.src.len());
                if line == doc.delimiter.as_slice() {
                    found = true;
                    break;
                }
                text.extend_from_slice(line);
                if end < self.src.len() {
                    text.push(b'\n');
                }
            }
            self.doc_unterminated |= !found;
            if self.second_pass {
                continue;
            }
            let body = if doc.quoted || text.is_empty() {
                let mut w = Word::default();
                if !text.is_empty() {
                    w.parts.push(WordPart::Quoted(lossy(&text)));
                }
                w
            } else {
                run_passes(&text, self.depth + 1, body_line, &self.opts(), |p| {
                    let parts = p.word_parts(Mode::HereDoc, Tilde::No)?;
                    Ok(Word { parts })
                })?
            };
            self.bodies.insert(doc.op_pos, (body, lossy(&text)));
        }
        Ok(())
    }

    fn peek_op(&self) -> Option<(Op, usize)> {
        let c = self.at(0)?;
        let n = self.at(1);
        Some(match (c, n) {
            (b';', Some(b';')) if self.at(2) == Some(b'&') => (Op::DSemiAmp, 3),
            (b';', Some(b';')) => (Op::DSemi, 2),
            (b';', Some(b'&')) => (Op::SemiAmp, 2),
            (b';', _) => (Op::Semi, 1),
            (b'&', Some(b'&')) => (Op::AndAnd, 2),
            (b'&', Some(b'>')) => return None,
            (b'&', _) => (Op::Amp, 1),
            (b'|', Some(b'|')) => (Op::OrOr, 2),
            (b'|', Some(b'&')) => (Op::PipeAmp, 2),
            (b'|', _) => (Op::Pipe, 1),
            (b'(', _) => (Op::LParen, 1),
            (b')', _) => (Op::RParen, 1),
            (b'\n', _) => (Op::Newline, 1),
            _ => return None,
        })
    }

    fn peek_reserved(&self) -> Option<&'static str> {
        RESERVED
            .iter()
            .copied()
            .find(|w| self.starts(w) && self.delim_after_continuations(w.len()))
    }

    /// `delim_at`, past any line continuations first: bash removes them before it reads a
    /// word, so `then\<newline><newline>` is `then` and a newline.
    fn delim_after_continuations(&self, k: usize) -> bool {
        let at = self.past_continuations(self.pos + k);
        self.src.get(at).is_none_or(|&c| is_meta(c))
    }

    /// Whether only terminators are left before the end of the substitution being read:
    /// bash reads a substitution's text without them, so a bare `!` there is followed by
    /// the `)` (or the end of backquoted text), a syntax error.
    fn ends_substitution(&self) -> bool {
        let mut j = self.pos;
        while let Some(&c) = self.src.get(j) {
            match c {
                b' ' | b'\t' | b'\n' | b';' => j += 1,
                // A comment after a terminator runs to its line's end.
                b'#' if j > self.pos => {
                    while self.src.get(j).is_some_and(|&c| c != b'\n') {
                        j += 1;
                    }
                }
                _ => break,
            }
        }
        match self.src.get(j) {
            None => self.depth > 0,
            Some(b')') => self.in_subst > 0,
            _ => false,
        }
    }

    /// Where an assignment's value starts, its `=` or `+=` being at `op`.
    fn after_assign_op(&self, op: usize, append: bool) -> usize {
        let eq = if append {
            self.past_continuations(op + 1)
        } else {
            op
        };
        eq + 1
    }

    /// The position `pos`, or past the line continuations that start there.
    fn past_continuations(&self, mut pos: usize) -> usize {
        while self.src.get(pos) == Some(&b'\\') && self.src.get(pos + 1) == Some(&b'\n') {
            pos += 2;
        }
        pos
    }

    fn expect_reserved(&mut self, word: &str) -> ParseResult<()> {
        self.skip_blanks();
        if self.peek_reserved() == Some(word) {
            self.pos += word.len();
            Ok(())
        } else {
            Err(self.unexpected())
        }
    }

    fn at_list_end(&mut self) -> bool {
        self.skip_blanks();
        if self.eof() {
            return true;
        }
        if let Some((op, _)) = self.peek_op() {
            return matches!(op, Op::RParen | Op::DSemi | Op::DSemiAmp | Op::SemiAmp);
        }
        self.peek_reserved().is_some_and(|w| CLOSERS.contains(&w))
    }

    // ----- lists, pipelines, commands -----

    fn program(&mut self) -> ParseResult<Script> {
        let s = self.list()?;
        self.skip_linebreaks()?;
        if !self.eof() {
            return Err(self.unexpected());
        }
        Ok(s)
    }

    #[inline(never)]
    fn list(&mut self) -> ParseResult<Script> {
        self.list_depth += 1;
        let r = self.list_items();
        self.list_depth -= 1;
        r
    }

    fn list_items(&mut self) -> ParseResult<Script> {
        let mut items = Vec::new();
        let top = self.list_depth == 1 && self.depth == 0;
        let mut extglob_next: Option<bool> = None;
        loop {
            let before = self.pos;
            self.skip_linebreaks()?;
            if let Some(on) = extglob_next
                && self.src[before..self.pos].contains(&b'\n')
            {
                self.extglob = on;
                extglob_next = None;
            }
            if self.at_list_end() {
                break;
            }
            let start = self.pos;
            let and_or = self.and_or()?;
            if top && let Some(on) = shopt_extglob(&self.src[start..self.pos]) {
                extglob_next = Some(on);
            }
            self.skip_blanks();
            let (background, go_on) = match self.peek_op() {
                Some((Op::Semi, _)) => {
                    self.pos += 1;
                    (false, true)
                }
                Some((Op::Amp, _)) => {
                    self.pos += 1;
                    (true, true)
                }
                Some((Op::Newline, _)) => (false, true),
                _ => (false, false),
            };
            items.push(ListItem { and_or, background });
            if !go_on {
                break;
            }
        }
        Ok(Script { items })
    }

    fn nonempty_list(&mut self) -> ParseResult<Script> {
        let s = self.list()?;
        if s.items.is_empty() {
            return Err(self.unexpected());
        }
        Ok(s)
    }

    #[inline(never)]
    fn and_or(&mut self) -> ParseResult<AndOr> {
        let first = self.pipeline()?;
        let mut rest = Vec::new();
        loop {
            self.skip_blanks();
            let op = match self.peek_op() {
                Some((Op::AndAnd, _)) => AndOrOp::And,
                Some((Op::OrOr, _)) => AndOrOp::Or,
                _ => break,
            };
            self.pos += 2;
            self.skip_linebreaks()?;
            rest.push((op, self.pipeline()?));
        }
        Ok(AndOr { first, rest })
    }

    #[inline(never)]
    fn pipeline(&mut self) -> ParseResult<Pipeline> {
        let (mut timed, mut negated, mut bang) = (false, false, false);
        loop {
            self.skip_blanks();
            match self.peek_reserved() {
                Some("time") => {
                    self.pos += 4;
                    timed = true;
                    self.skip_blanks();
                    if self.starts("-p") && self.delim_at(2) {
                        self.pos += 2;
                    }
                }
                Some("!") => {
                    self.pos += 1;
                    negated = !negated;
                    bang = true;
                }
                _ => break,
            }
        }
        self.skip_blanks();
        let line = self.line_at(self.pos);
        // A bare `time` (or `time -p`) times nothing: bash prints the report for an empty
        // command. A bare `!` before a `;`, a newline or the end of a script negates nothing
        // (status 1); the end of a backquoted text is no such end in bash.
        let bare_bang = bang
            && ((self.eof() && self.depth == 0)
                || matches!(self.peek_op(), Some((Op::Newline | Op::Semi, _))))
            && !self.ends_substitution();
        if bare_bang
            || timed
                && (self.eof()
                    || matches!(
                        self.peek_op(),
                        Some((
                            Op::Newline
                                | Op::Semi
                                | Op::Amp
                                | Op::AndAnd
                                | Op::OrOr
                                | Op::RParen
                                | Op::DSemi
                                | Op::DSemiAmp
                                | Op::SemiAmp,
                            _
                        ))
                    ))
        {
            let nothing = Command::Simple(SimpleCommand {
                assignments: Vec::new(),
                words: Vec::new(),
                redirects: Vec::new(),
                line,
                end_line: line,
            });
            return Ok(Pipeline {
                negated,
                timed,
                commands: vec![nothing],
                line,
            });
        }
        let mut commands = vec![self.command()?];
        loop {
            self.skip_blanks();
            match self.peek_op() {
                Some((Op::Pipe, _)) => self.pos += 1,
                Some((Op::PipeAmp, _)) => {
                    self.pos += 2;
                    let dup = Redirect {
                        fd: Some(2),
                        fd_var: None,
                        op: RedirOp::DupWrite,
                        target: RedirTarget::Word(Word::literal("1")),
                    };
                    if let Some(last) = commands.last_mut() {
                        redirect_stderr_too(last, dup);
                    }
                }
                _ => break,
            }
            self.skip_linebreaks()?;
            commands.push(self.command()?);
        }
        Ok(Pipeline {
            negated,
            timed,
            commands,
            line,
        })
    }

    #[inline(never)]
    fn command(&mut self) -> ParseResult<Command> {
        self.skip_blanks();
        self.alias_next = None;
        self.cmd_aliases.clear();
        self.expand_aliases_here(true);
        if self.eof() {
            return Err(self.unexpected());
        }
        if self.starts("((") {
            return self.nested(|p| p.compound());
        }
        match self.peek_reserved() {
            Some("if" | "while" | "until" | "for" | "select" | "case" | "{" | "[[") => {
                return self.nested(|p| p.compound());
            }
            Some("function") => return self.nested(|p| p.function_keyword()),
            Some("coproc") => return self.nested(|p| p.coproc()),
            Some("then" | "else" | "elif" | "fi" | "do" | "done" | "esac" | "}") => {
                return Err(self.unexpected());
            }
            _ => {}
        }
        match self.peek_op() {
            Some((Op::LParen, _)) => self.nested(|p| p.compound()),
            Some(_) => Err(self.unexpected()),
            None => self.simple(),
        }
    }

    /// `coproc [NAME] command`. A word is the coprocess's name only when a compound command
    /// follows it; otherwise it starts the (simple) command, as in bash.
    #[inline(never)]
    fn coproc(&mut self) -> ParseResult<Command> {
        self.pos += "coproc".len();
        self.skip_blanks();
        let start = self.pos;
        let len = self.src[start..]
            .iter()
            .take_while(|&&c| is_name_char(c))
            .count();
        let mut name = String::from("COPROC");
        // bash takes any such word before a compound command for the name, and refuses a
        // bad one (`123bad`) only when the coprocess starts.
        if len > 0 && self.delim_at(len) {
            self.pos += len;
            self.skip_blanks();
            if self.at_compound_start() {
                name = lossy(&self.src[start..start + len]);
            } else {
                self.pos = start;
            }
        }
        let body = Box::new(self.command()?);
        Ok(Command::Compound(
            CompoundCommand::Coproc { name, body },
            Vec::new(),
        ))
    }

    fn at_compound_start(&self) -> bool {
        self.at(0) == Some(b'(')
            || self
                .peek_reserved()
                .is_some_and(|w| COMPOUND_STARTS.contains(&w))
    }

    /// A compound command and the redirections after it.
    #[inline(never)]
    fn compound(&mut self) -> ParseResult<Command> {
        let cc = if self.starts("((") {
            let open = self.pos;
            match self.try_dparen()? {
                Some(a) => CompoundCommand::Arith(a),
                None => {
                    self.pos = open;
                    self.subshell()?
                }
            }
        } else if self.at(0) == Some(b'(') {
            self.subshell()?
        } else {
            match self.peek_reserved() {
                Some("if") => self.if_command()?,
                Some("while") => self.while_command(false)?,
                Some("until") => self.while_command(true)?,
                Some("for") => self.for_command(false)?,
                Some("select") => self.for_command(true)?,
                Some("case") => self.case_command()?,
                Some("{") => {
                    self.pos += 1;
                    let body = self.nonempty_list()?;
                    self.expect_reserved("}")?;
                    CompoundCommand::Group(body)
                }
                Some("[[") => self.cond_command()?,
                _ => return Err(self.unexpected()),
            }
        };
        let mut redirects = Vec::new();
        loop {
            self.skip_blanks();
            match self.try_redirect()? {
                Some(r) => redirects.push(r),
                None => break,
            }
        }
        Ok(Command::Compound(cc, redirects))
    }

    #[inline(never)]
    fn subshell(&mut self) -> ParseResult<CompoundCommand> {
        self.pos += 1;
        let body = self.nonempty_list()?;
        self.skip_blanks();
        if self.at(0) != Some(b')') {
            return Err(self.unexpected());
        }
        self.pos += 1;
        Ok(CompoundCommand::Subshell(body))
    }

    #[inline(never)]
    fn if_command(&mut self) -> ParseResult<CompoundCommand> {
        self.pos += 2;
        let mut branches = Vec::new();
        let mut else_body = None;
        loop {
            let cond = self.nonempty_list()?;
            self.expect_reserved("then")?;
            let body = self.nonempty_list()?;
            branches.push((cond, body));
            self.skip_blanks();
            match self.peek_reserved() {
                Some("elif") => self.pos += 4,
                Some("else") => {
                    self.pos += 4;
                    else_body = Some(self.nonempty_list()?);
                    self.expect_reserved("fi")?;
                    break;
                }
                Some("fi") => {
                    self.pos += 2;
                    break;
                }
                _ => return Err(self.unexpected()),
            }
        }
        Ok(CompoundCommand::If {
            branches,
            else_body,
        })
    }

    #[inline(never)]
    fn while_command(&mut self, until: bool) -> ParseResult<CompoundCommand> {
        self.pos += 5;
        let cond = self.nonempty_list()?;
        let body = self.do_group()?;
        Ok(if until {
            CompoundCommand::Until { cond, body }
        } else {
            CompoundCommand::While { cond, body }
        })
    }

    /// `do list done`, or `{ list }` which bash accepts after `for` too.
    #[inline(never)]
    fn do_group(&mut self) -> ParseResult<Script> {
        self.skip_linebreaks()?;
        match self.peek_reserved() {
            Some("do") => {
                self.pos += 2;
                let body = self.nonempty_list()?;
                self.expect_reserved("done")?;
                Ok(body)
            }
            Some("{") => {
                self.pos += 1;
                let body = self.nonempty_list()?;
                self.expect_reserved("}")?;
                Ok(body)
            }
            _ => Err(self.unexpected()),
        }
    }

    #[inline(never)]
    fn for_command(&mut self, select: bool) -> ParseResult<CompoundCommand> {
        self.pos += if select { 6 } else { 3 };
        self.skip_blanks();
        if !select && self.starts("((") {
            return self.arith_for();
        }
        // bash checks the word after an alias whose text ends in a blank for an alias
        // wherever it is: `alias FOR='for ' eye='i ' IN='in '` spell a loop's every word.
        self.expand_aliases_here(false);
        if self.delim_at(0) {
            return Err(self.expected_word());
        }
        let start = self.pos;
        self.word_parts(Mode::Normal, Tilde::No)?;
        let var = lossy(&self.src[start..self.pos]);
        self.skip_blanks();
        self.expand_aliases_here(false);
        let mut words = None;
        if self.at(0) == Some(b';') && self.peek_op() == Some((Op::Semi, 1)) {
            self.pos += 1;
        } else {
            self.skip_linebreaks()?;
            if self.peek_reserved() == Some("in") {
                self.pos += 2;
                let mut list = Vec::new();
                loop {
                    self.skip_blanks();
                    self.expand_aliases_here(false);
                    match self.at(0) {
                        None | Some(b'\n') => break,
                        Some(b';') if self.peek_op() == Some((Op::Semi, 1)) => {
                            self.pos += 1;
                            break;
                        }
                        // A process substitution is a word there too.
                        Some(b'<' | b'>') if self.at(1) == Some(b'(') => {
                            list.push(self.command_word()?)
                        }
                        Some(c) if is_meta(c) => return Err(self.unexpected()),
                        _ => list.push(self.command_word()?),
                    }
                }
                words = Some(list);
            }
        }
        let body = self.do_group()?;
        Ok(if select {
            CompoundCommand::Select { var, words, body }
        } else {
            CompoundCommand::For { var, words, body }
        })
    }

    #[inline(never)]
    fn arith_for(&mut self) -> ParseResult<CompoundCommand> {
        let open = self.pos;
        self.pos += 2;
        let mut parts = Vec::new();
        for end in [ArithEnd::Semi, ArithEnd::Semi, ArithEnd::DParen] {
            let start = self.pos;
            match self.arith_tokens(end, open)? {
                Some((tokens, stop, _)) if tokens.is_empty() => {
                    let _ = stop;
                    parts.push(None)
                }
                Some((tokens, stop, _)) => {
                    parts.push(Some(Box::new(self.finish_arith(tokens, start, stop)?)))
                }
                None => return Err(self.unexpected()),
            }
        }
        self.skip_blanks();
        if self.peek_op() == Some((Op::Semi, 1)) {
            self.pos += 1;
        }
        let body = self.do_group()?;
        let mut parts = parts.into_iter();
        Ok(CompoundCommand::ArithFor {
            init: parts.next().flatten(),
            cond: parts.next().flatten(),
            step: parts.next().flatten(),
            body,
        })
    }

    #[inline(never)]
    fn case_command(&mut self) -> ParseResult<CompoundCommand> {
        self.pos += 4;
        self.skip_blanks();
        if self.delim_at(0) {
            return Err(self.expected_word());
        }
        let word = Word {
            parts: self.word_parts(Mode::Normal, Tilde::Start)?,
        };
        self.skip_linebreaks()?;
        if self.peek_reserved() != Some("in") {
            return Err(self.unexpected());
        }
        self.pos += 2;
        let mut items = Vec::new();
        loop {
            self.skip_linebreaks()?;
            if self.peek_reserved() == Some("esac") {
                self.pos += 4;
                break;
            }
            if self.at(0) == Some(b'(') {
                self.pos += 1;
            }
            let mut patterns = Vec::new();
            loop {
                self.skip_blanks();
                if self.delim_at(0) {
                    return Err(self.unexpected());
                }
                patterns.push(Word {
                    parts: self.word_parts(Mode::Normal, Tilde::Start)?,
                });
                self.skip_blanks();
                if self.peek_op() == Some((Op::Pipe, 1)) {
                    self.pos += 1;
                } else {
                    break;
                }
            }
            if self.at(0) != Some(b')') {
                return Err(self.unexpected());
            }
            self.pos += 1;
            let body = self.list()?;
            self.skip_blanks();
            let terminator = match self.peek_op() {
                Some((Op::DSemi, n)) => {
                    self.pos += n;
                    CaseTerminator::Break
                }
                Some((Op::SemiAmp, n)) => {
                    self.pos += n;
                    CaseTerminator::FallThrough
                }
                Some((Op::DSemiAmp, n)) => {
                    self.pos += n;
                    CaseTerminator::Continue
                }
                _ if self.peek_reserved() == Some("esac") => CaseTerminator::Break,
                _ => return Err(self.unexpected()),
            };
            items.push(CaseItem {
                patterns,
                body,
                terminator,
            });
        }
        Ok(CompoundCommand::Case { word, items })
    }

    #[inline(never)]
    fn function_keyword(&mut self) -> ParseResult<Command> {
        self.pos += 8;
        self.skip_blanks();
        if self.delim_at(0) {
            return Err(self.expected_word());
        }
        let start = self.pos;
        self.word_parts(Mode::Normal, Tilde::No)?;
        let name = lossy(&self.src[start..self.pos]);
        self.skip_blanks();
        if self.at(0) == Some(b'(') {
            self.pos += 1;
            self.skip_blanks();
            if self.at(0) != Some(b')') {
                return Err(self.unexpected());
            }
            self.pos += 1;
        }
        self.function_body(name)
    }

    #[inline(never)]
    fn function_body(&mut self, name: String) -> ParseResult<Command> {
        self.skip_linebreaks()?;
        if !self.at_compound_start() {
            return Err(self.unexpected());
        }
        let body = self.nested(|p| p.compound())?;
        Ok(Command::FunctionDef(FunctionDef {
            name,
            body: Box::new(body),
            source: None,
            line: 0,
            line_offset: 0,
        }))
    }

    #[inline(never)]
    fn simple(&mut self) -> ParseResult<Command> {
        let line = self.line_at(self.pos);
        let mut assignments = Vec::new();
        let mut words: Vec<Arg> = Vec::new();
        let mut redirects = Vec::new();
        loop {
            self.skip_blanks();
            let process_subst = matches!(self.at(0), Some(b'<' | b'>')) && self.at(1) == Some(b'(');
            if !process_subst {
                if let Some(r) = self.try_redirect()? {
                    redirects.push(r);
                    continue;
                }
                if self.delim_at(0) {
                    break;
                }
                let decl = match words.first() {
                    None => true,
                    Some(Arg::Word(w)) => w
                        .as_literal()
                        .is_some_and(|name| super::DECLARATION_COMMANDS.contains(&name)),
                    Some(Arg::Assignment(_)) => false,
                };
                if decl && let Some(a) = self.try_assignment(words.is_empty())? {
                    if words.is_empty() {
                        assignments.push(a);
                    } else {
                        words.push(Arg::Assignment(a));
                    }
                    continue;
                }
            }
            if self.alias_next.is_some() && !words.is_empty() {
                self.expand_aliases_here(false);
                if self.delim_at(0) {
                    break;
                }
            }
            // bash: the command word may follow assignments and redirections (`>f ll`).
            if words.is_empty() && (!assignments.is_empty() || !redirects.is_empty()) {
                let expanded = self.cmd_aliases.len();
                self.expand_aliases_here(true);
                if self.cmd_aliases.len() > expanded {
                    // The alias text may start with assignments or redirections of its own.
                    self.subscript_word_end = None;
                    continue;
                }
            }
            let start = self.pos;
            let mut w = self.command_word()?;
            if self.pos == start {
                // Cannot happen for a non-delimiter; a guard against looping forever.
                return Err(self.unexpected());
            }
            // `let x=(1+2)*3`: bash reads the parentheses of a `let` argument as part of it.
            let is_let =
                matches!(words.first(), Some(Arg::Word(f)) if f.as_literal() == Some("let"));
            while is_let && self.at(0) == Some(b'(') {
                let open = self.pos;
                let mut depth = 0usize;
                let mut end = None;
                for (j, &c) in self.src[open..].iter().enumerate() {
                    match c {
                        b'(' => depth += 1,
                        b')' => {
                            depth -= 1;
                            if depth == 0 {
                                end = Some(open + j + 1);
                                break;
                            }
                        }
                        b'\n' => break,
                        _ => {}
                    }
                }
                let Some(end) = end else {
                    return Err(self.unclosed(open, ")"));
                };
                w.parts.push(WordPart::Literal(lossy(&self.src[open..end])));
                self.pos = end;
                if !self.delim_at(0) && self.at(0) != Some(b'(') {
                    let more = self.command_word()?;
                    w.parts.extend(more.parts);
                }
            }
            let first = words.is_empty() && assignments.is_empty() && redirects.is_empty();
            words.push(Arg::Word(w));
            if first {
                let name_end = self.pos;
                self.skip_blanks();
                if self.at(0) == Some(b'(') {
                    // bash reads `a=b` before `()` as an assignment, after which `(` is
                    // unexpected: `a=b() { :; }` is a syntax error (`function a=b` is not).
                    if assigns(&self.src[start..name_end]) {
                        return Err(self.unexpected());
                    }
                    self.pos += 1;
                    self.skip_blanks();
                    if self.at(0) != Some(b')') {
                        return Err(self.unexpected());
                    }
                    self.pos += 1;
                    let name = lossy(&self.src[start..name_end]);
                    return self.nested(|p| p.function_body(name));
                }
            }
        }
        if assignments.is_empty() && words.is_empty() && redirects.is_empty() {
            return Err(self.unexpected());
        }
        Ok(Command::Simple(SimpleCommand {
            assignments,
            words,
            redirects,
            line,
            end_line: self.line_at(self.pos),
        }))
    }

    #[inline(never)]
    fn try_redirect(&mut self) -> ParseResult<Option<Redirect>> {
        let start = self.pos;
        let mut i = 0;
        while self.at(i).is_some_and(|c| c.is_ascii_digit()) {
            i += 1;
        }
        let mut fd = None;
        let mut fd_var = None;
        if i == 0 && self.at(0) == Some(b'{') {
            // `{name}>file`: a name in braces right before the operator.
            let mut j = 1;
            while self
                .at(j)
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_')
            {
                j += 1;
            }
            // bash 5.2 takes an array element too: `{fds[1]}>&-`.
            if j > 1 && self.at(j) == Some(b'[') {
                let mut k = j + 1;
                while self
                    .at(k)
                    .is_some_and(|c| !matches!(c, b']' | b'}' | b'\n'))
                {
                    k += 1;
                }
                if self.at(k) == Some(b']') && k > j + 1 {
                    j = k + 1;
                }
            }
            let name = &self.src[start + 1..start + j];
            if j > 1
                && !name[0].is_ascii_digit()
                && self.at(j) == Some(b'}')
                && matches!(self.at(j + 1), Some(b'<' | b'>'))
                && self.at(j + 2) != Some(b'(')
            {
                fd_var = Some(lossy(name));
                i = j + 1;
            }
        }
        if i > 0 && fd_var.is_none() {
            if !matches!(self.at(i), Some(b'<' | b'>')) {
                return Ok(None);
            }
            match std::str::from_utf8(&self.src[start..start + i])
                .ok()
                .and_then(|s| s.parse::<u32>().ok())
            {
                Some(n) => fd = Some(n),
                None => return Ok(None),
            }
        }
        self.pos += i;
        let (op, len, strip) = if fd.is_none() && self.starts("&>>") {
            (RedirOp::AppendAll, 3, false)
        } else if fd.is_none() && self.starts("&>") {
            (RedirOp::WriteAll, 2, false)
        } else if self.starts("<<<") {
            (RedirOp::HereString, 3, false)
        } else if self.starts("<<-") {
            (RedirOp::HereDoc, 3, true)
        } else if self.starts("<<") {
            (RedirOp::HereDoc, 2, false)
        } else if self.starts("<>") {
            (RedirOp::ReadWrite, 2, false)
        } else if self.starts("<&") {
            (RedirOp::DupRead, 2, false)
        } else if self.starts("<(") || self.starts(">(") {
            self.pos = start;
            return Ok(None);
        } else if self.starts("<") {
            (RedirOp::Read, 1, false)
        } else if self.starts(">>") {
            (RedirOp::Append, 2, false)
        } else if self.starts(">|") {
            (RedirOp::Clobber, 2, false)
        } else if self.starts(">&") {
            (RedirOp::DupWrite, 2, false)
        } else if self.starts(">") {
            (RedirOp::Write, 1, false)
        } else {
            self.pos = start;
            return Ok(None);
        };
        let op_pos = self.pos;
        self.pos += len;
        self.skip_blanks();
        let process_subst = matches!(self.at(0), Some(b'<' | b'>')) && self.at(1) == Some(b'(');
        if self.delim_at(0) && !process_subst {
            return Err(self.expected_word());
        }
        if op == RedirOp::HereDoc {
            let wstart = self.pos;
            let outer = self.pending.len();
            self.word_parts(Mode::Normal, Tilde::No)?;
            // The delimiter is text (only its quotes are removed): a here-document begun in a
            // substitution inside it, still waiting for its body, is not the script's.
            self.pending.truncate(outer);
            // bash removes line continuations before it reads the word: they neither quote
            // the delimiter nor are part of it.
            let raw = strip_continuations(&self.src[wstart..self.pos]);
            let quoted = raw.iter().any(|c| matches!(c, b'\'' | b'"' | b'\\'));
            let delimiter = remove_quotes(&raw);
            self.pending.push(PendingDoc {
                op_pos,
                delimiter: delimiter.clone(),
                quoted,
                strip_tabs: strip,
            });
            let (body, text) = self.bodies.get(&op_pos).cloned().unwrap_or_default();
            return Ok(Some(Redirect {
                fd,
                fd_var,
                op,
                target: RedirTarget::HereDoc(HereDoc {
                    delimiter: lossy(&delimiter),
                    quoted,
                    strip_tabs: strip,
                    body,
                    text,
                }),
            }));
        }
        let target = if op == RedirOp::HereString {
            Word {
                parts: self.word_parts(Mode::Normal, Tilde::Start)?,
            }
        } else {
            self.command_word()?
        };
        Ok(Some(Redirect {
            fd,
            fd_var,
            op,
            target: RedirTarget::Word(target),
        }))
    }

    /// The index of the `]` closing the `[` at `open`, if it closes before a blank (unless
    /// `blanks`) or an operator (unless `to_end`).
    fn scan_subscript(&self, open: usize, blanks: bool, to_end: bool) -> Option<usize> {
        let mut depth = 0usize;
        let mut j = open;
        while j < self.src.len() {
            match self.src[j] {
                b'[' => depth += 1,
                b']' => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(j);
                    }
                }
                b'\\' => j += 1,
                b'\'' | b'"' => j = self.quoted_end(j),
                // bash reads a subscript as a balanced text: expansions, parentheses and
                // blanks are part of it (`a[$(f x)]=v`, `a[(1+2)]=v`, `a[1 + 1]=v`).
                // A command substitution ends where parsing it ends: its text may hold
                // anything (`${)}`, here-documents, words with subscripts of their own).
                b'$' if self.src.get(j + 1) == Some(&b'(')
                    && self.src.get(j + 2) != Some(&b'(') =>
                {
                    j = self.subst_end(j + 1)?;
                }
                b'$' if matches!(self.src.get(j + 1), Some(b'(' | b'{')) => {
                    let (o, c) = if self.src[j + 1] == b'(' {
                        (b'(', b')')
                    } else {
                        (b'{', b'}')
                    };
                    j = self.skip_balanced(j + 1, o, c)?;
                }
                b'`' => j = self.backquote_end(j, self.src.len()),
                b'(' => j = self.skip_balanced(j, b'(', b')')?,
                _ if to_end => {}
                b' ' | b'\t' if !blanks => return None,
                b' ' | b'\t' | b'<' | b'>' | b'|' | b'&' => {}
                c if is_meta(c) => return None,
                _ => {}
            }
            j += 1;
        }
        None
    }

    /// Whether a subscript of `${...}` from `start` to its `]` at `end` is one bash reads:
    /// its lexer ends the `${` at the first `}` not nested in it, and only the word (which
    /// ends at a blank or an operator) is read again for the subscript when expanded.
    fn subscript_in_word(&self, start: usize, end: usize) -> bool {
        let (mut depth, mut closed) = (0usize, false);
        let mut j = start;
        while j < end {
            match self.src[j] {
                b'\\' => j += 1,
                b'\'' | b'"' => j = self.quoted_end(j),
                b'$' if self.src.get(j + 1) == Some(&b'(') => {
                    j = self.skip_balanced(j + 1, b'(', b')').unwrap_or(end)
                }
                // Backquoted text is part of the word, blanks and all.
                b'`' => j = self.backquote_end(j, end),
                b'{' => depth += 1,
                b'}' if depth == 0 => closed = true,
                b'}' => depth -= 1,
                c if closed && (c == b' ' || c == b'\t' || is_meta(c)) => return false,
                _ => {}
            }
            j += 1;
        }
        true
    }

    /// The index of the backquote that closes the one at `at`, an escaped one not counting
    /// (`end` when none does before it).
    fn backquote_end(&self, at: usize, end: usize) -> usize {
        let mut j = at + 1;
        while j < end && self.src[j] != b'`' {
            if self.src[j] == b'\\' {
                j += 1;
            }
            j += 1;
        }
        j.min(end)
    }

    /// The index of the quote that closes the one at `at` (or the text's end): a backslash
    /// escapes within `"..."` and `$'...'`, not within `'...'`.
    fn quoted_end(&self, at: usize) -> usize {
        let q = self.src[at];
        let dollar = at > 0 && self.src[at - 1] == b'$' && {
            let before = &self.src[..at - 1];
            before.iter().rev().take_while(|&&c| c == b'\\').count() % 2 == 0
        };
        let escapes = q == b'"' || dollar;
        let mut j = at + 1;
        while j < self.src.len() && self.src[j] != q {
            if escapes && self.src[j] == b'\\' {
                j += 1;
            }
            j += 1;
        }
        j
    }

    /// The index of the `)` that ends the command substitution whose `(` is at `open`, as
    /// parsing its text finds it (`None` when that fails): a lexical scan cannot tell, and
    /// the word read after the scan parses it.
    fn subst_end(&self, open: usize) -> Option<usize> {
        if let Some(end) = self.subst_ends.borrow().get(&open) {
            return *end;
        }
        // Alias expansion rewrites the text a parser reads, and positions with it.
        if self.aliases.is_some() {
            return self.skip_balanced(open, b'(', b')');
        }
        if self.depth + 1 > MAX_DEPTH {
            return None;
        }
        // Made over no text, then given this one and its line offsets: finding them again
        // would cost a pass over the whole text for every substitution looked at.
        let mut p = Parser::new(&[], self.depth + 1, self.line_base);
        p.src = std::borrow::Cow::Borrowed(&self.src);
        p.newlines.clone_from(&self.newlines);
        p.extglob = self.extglob;
        p.aliases = self.aliases.clone();
        p.subst_ends = self.subst_ends.clone();
        p.pos = open + 1;
        let end = p.subst_body(open).ok().map(|_| p.pos - 1);
        self.subst_ends.borrow_mut().insert(open, end);
        end
    }

    /// The index of the `close` matching the `open` at `at`, past quotes and escapes; `None`
    /// when the text ends (or a line does) first. As bash's lexer reads a balanced text,
    /// backquotes, `$(...)` and `${...}` inside are read whole: a `)` in `$(${)})` or a `}` in
    /// `${x:-$(})}` closes nothing.
    fn skip_balanced(&self, at: usize, open: u8, close: u8) -> Option<usize> {
        let mut depth = 0usize;
        let mut j = at;
        while j < self.src.len() {
            match self.src[j] {
                b'\\' => j += 1,
                b'\'' | b'"' => j = self.quoted_end(j),
                b'`' => {
                    j = self.backquote_end(j, self.src.len());
                    if j >= self.src.len() {
                        return None;
                    }
                }
                b'$' if depth > 0 && matches!(self.src.get(j + 1), Some(b'(' | b'{')) => {
                    let (o, c) = if self.src[j + 1] == b'(' {
                        (b'(', b')')
                    } else {
                        (b'{', b'}')
                    };
                    if o != open {
                        j = self.skip_balanced(j + 1, o, c)?;
                    }
                }
                c if c == open => depth += 1,
                c if c == close => {
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

    /// `name=`, `name+=`, `name[sub]=` at the current position, with its value.
    /// `prefix`: before the command word, where bash reads a subscript across blanks
    /// (`a[1 + 1]=v`) and up to the end of the text; a declaration builtin's arguments are
    /// plain words (`declare a[ b ]=x` is three).
    #[inline(never)]
    fn try_assignment(&mut self, prefix: bool) -> ParseResult<Option<Assignment>> {
        let start = self.pos;
        if !self.at(0).is_some_and(is_name_start) {
            return Ok(None);
        }
        // bash removes line continuations before it reads a word: `a\<newline>b=1` assigns
        // `ab`.
        let mut name = Vec::new();
        let mut q = start;
        while let Some(&c) = self.src.get(q).filter(|&&c| is_name_char(c)) {
            name.push(c);
            q = self.past_continuations(q + 1);
        }
        let mut sub = None;
        let mut sub_close = 0;
        if self.src.get(q) == Some(&b'[') {
            let Some(close) = self.scan_subscript(q, prefix, false) else {
                // Before the command word bash reads `name[` to its balanced `]` across
                // anything, and the text ending first is an error (`a[$[]=x`, `a[[]=x`).
                if prefix {
                    match self.scan_subscript(q, true, true) {
                        None => return Err(self.unclosed(q, "]")),
                        Some(close) => self.subscript_word_end = Some(close + 1),
                    }
                }
                return Ok(None);
            };
            sub = Some(q + 1);
            sub_close = close;
            q = self.past_continuations(close + 1);
        }
        let append = self.src.get(q) == Some(&b'+')
            && self.src.get(self.past_continuations(q + 1)) == Some(&b'=');
        if !append && self.src.get(q) != Some(&b'=') {
            // Not an assignment: the command word, which holds the whole `[...]`.
            if prefix && sub.is_some() {
                self.subscript_word_end = Some(q);
            }
            return Ok(None);
        }
        let name = lossy(&name);
        let mut value_at = self.after_assign_op(q, append);
        let index = match sub {
            Some(s) => {
                self.pos = s;
                let len = self.src.len();
                let parts = self.word_parts(Mode::Subscript, Tilde::No)?;
                if self.src.len() == len && self.pos != sub_close {
                    // An expansion in the subscript took its `]` for its own (`a[${b[}x]=v}`):
                    // the text is no assignment, only a word, read whole.
                    self.pos = start;
                    if prefix {
                        self.subscript_word_end = Some(sub_close + 1);
                    }
                    return Ok(None);
                }
                // An alias in a `$( )` of the subscript rewrites the text after it.
                if self.at(0) == Some(b']') {
                    value_at = self.after_assign_op(self.past_continuations(self.pos + 1), append);
                }
                Some(Word { parts })
            }
            None => None,
        };
        self.pos = value_at;
        let value = if self.at(0) == Some(b'(') {
            AssignValue::Array(self.array_literal()?)
        } else {
            AssignValue::Scalar(Word {
                parts: self.word_parts(Mode::Normal, Tilde::Assign)?,
            })
        };
        Ok(Some(Assignment {
            name,
            index,
            append,
            value,
        }))
    }

    #[inline(never)]
    fn array_literal(&mut self) -> ParseResult<Vec<ArrayElem>> {
        let open = self.pos;
        self.pos += 1;
        let mut elems = Vec::new();
        loop {
            self.skip_linebreaks()?;
            match self.at(0) {
                None => return Err(self.unclosed(open, ")")),
                Some(b')') => {
                    self.pos += 1;
                    return Ok(elems);
                }
                Some(c) if is_meta(c) => {
                    return Err(ParseError {
                        kind: ParseErrorKind::ArrayLiteral,
                        ..self.unexpected()
                    });
                }
                _ => {}
            }
            // bash reads an element that starts with `[` to its balanced `]` across blanks,
            // newlines and operators (`([a b]=1 [c;d]=2)`), as a key when `=` follows and as
            // part of the word otherwise; the text ending first is an error.
            let close = if self.at(0) == Some(b'[') {
                match self.scan_subscript(self.pos, true, true) {
                    Some(close) => Some(close),
                    None => return Err(self.unclosed(self.pos, "]")),
                }
            } else {
                None
            };
            if let Some(close) = close
                && (self.src.get(close + 1) == Some(&b'=')
                    || (self.src.get(close + 1) == Some(&b'+')
                        && self.src.get(close + 2) == Some(&b'=')))
            {
                let append = self.src.get(close + 1) == Some(&b'+');
                self.pos += 1;
                let key_at = self.pos;
                let key = Word {
                    parts: self.word_parts(Mode::Subscript, Tilde::No)?,
                };
                if self.pos != close {
                    // An expansion in the key took its `]`: no key, a word read whole.
                    self.pos = key_at - 1;
                    self.subscript_word_end = Some(close + 1);
                    let value = self.command_word()?;
                    elems.push(ArrayElem {
                        key: None,
                        append: false,
                        value,
                    });
                    continue;
                }
                self.pos = close + if append { 3 } else { 2 };
                let value = Word {
                    parts: self.word_parts(Mode::Normal, Tilde::Assign)?,
                };
                elems.push(ArrayElem {
                    key: Some(key),
                    append,
                    value,
                });
                continue;
            }
            self.subscript_word_end = close.map(|c| c + 1);
            let value = self.command_word()?;
            elems.push(ArrayElem {
                key: None,
                append: false,
                value,
            });
        }
    }

    // ----- [[ ]] -----

    #[inline(never)]
    fn cond_command(&mut self) -> ParseResult<CompoundCommand> {
        self.pos += 2;
        self.in_cond += 1;
        let e = self.cond_or();
        self.in_cond -= 1;
        let e = e?;
        self.cond_skip();
        if self.starts("]]") && self.delim_at(2) {
            self.pos += 2;
            return Ok(CompoundCommand::Cond(e));
        }
        if self.eof() {
            return Err(self.eof_err("unexpected EOF while looking for `]]'"));
        }
        if self.at_cond_word() {
            return Err(self.cond_err_at(self.pos, "syntax error in conditional expression"));
        }
        Err(self.cond_unexpected("syntax error in conditional expression: unexpected token"))
    }

    fn cond_skip(&mut self) {
        loop {
            self.skip_blanks();
            // Newlines are allowed inside `[[ ]]` where an operand or operator can follow.
            if self.at(0) == Some(b'\n') && self.pending.is_empty() {
                self.pos += 1;
            } else {
                return;
            }
        }
    }

    fn cond_token(&self) -> String {
        match self.at(0) {
            None | Some(b'\n') => "newline".into(),
            _ if self.starts("]]") => "]]".into(),
            _ => self.token_text(),
        }
    }

    fn cond_unexpected(&self, prefix: &str) -> ParseError {
        if self.eof() {
            return self.eof_err("unexpected EOF while looking for `]]'");
        }
        let t = self.cond_token();
        self.cond_err_at(self.pos, format!("{prefix} `{t}'"))
    }

    fn at_cond_word(&self) -> bool {
        !(self.delim_at(0) || (self.starts("]]") && self.delim_at(2)))
    }

    fn cond_or(&mut self) -> ParseResult<CondExpr> {
        self.cond_chain("||", Self::cond_and, CondExpr::Or)
    }

    fn cond_and(&mut self) -> ParseResult<CondExpr> {
        self.cond_chain("&&", Self::cond_term, CondExpr::And)
    }

    /// One left-associative level of `[[ ]]`: `operand (op operand)*`.
    fn cond_chain(
        &mut self,
        op: &str,
        operand: fn(&mut Self) -> ParseResult<CondExpr>,
        join: fn(Box<CondExpr>, Box<CondExpr>) -> CondExpr,
    ) -> ParseResult<CondExpr> {
        let mut lhs = operand(self)?;
        loop {
            self.cond_skip();
            if !self.starts(op) {
                return Ok(lhs);
            }
            self.pos += op.len();
            let rhs = operand(self)?;
            lhs = join(Box::new(lhs), Box::new(rhs));
        }
    }

    #[inline(never)]
    fn cond_term(&mut self) -> ParseResult<CondExpr> {
        self.cond_skip();
        // With extglob on, `!(x)` is a pattern word, not a negated group.
        if self.at(0) == Some(b'!')
            && self.delim_at(1)
            && !(self.extglob && self.at(1) == Some(b'('))
        {
            self.pos += 1;
            let e = self.nested(|p| p.cond_term())?;
            return Ok(CondExpr::Not(Box::new(e)));
        }
        if self.at(0) == Some(b'(') {
            self.pos += 1;
            let e = self.nested(|p| p.cond_or())?;
            self.cond_skip();
            if self.at(0) != Some(b')') {
                return Err(self.cond_unexpected_expected_paren());
            }
            self.pos += 1;
            return Ok(e);
        }
        if !self.at_cond_word() {
            // bash says nothing about a missing operand before `]]` (`[[ ]]`, `[[ ! ]]`).
            if self.starts("]]") {
                return Err(self.cond_err_at(self.pos, ""));
            }
            if self.eof() {
                return Err(self.eof_err("unexpected EOF while looking for `]]'"));
            }
            let t = self.cond_token();
            return Err(self.cond_err_at(
                self.pos,
                format!("unexpected token `{t}' in conditional command"),
            ));
        }
        let raw_start = self.pos;
        let w = Word {
            parts: self.word_parts(Mode::Normal, Tilde::Start)?,
        };
        let raw = &self.src[raw_start..self.pos];
        if let [b'-', c] = raw
            && COND_UNARY_OPS.as_bytes().contains(c)
        {
            let c = *c as char;
            self.cond_skip();
            if !self.at_cond_word() {
                return Err(self.cond_arg_error("unary"));
            }
            let arg = Word {
                parts: self.word_parts(Mode::Normal, Tilde::Start)?,
            };
            return Ok(CondExpr::Unary(c, arg));
        }
        self.cond_skip();
        let op = match self.at(0) {
            Some(b'<') => Some((CondBinOp::StrLt, 1)),
            Some(b'>') => Some((CondBinOp::StrGt, 1)),
            _ if self.at_cond_word() => {
                let end = (self.pos..self.src.len())
                    .find(|&j| is_meta(self.src[j]))
                    .unwrap_or(self.src.len());
                let word = std::str::from_utf8(&self.src[self.pos..end]).ok();
                let Some(op) = word.and_then(CondBinOp::from_word) else {
                    return Err(self.cond_err_at(self.pos, "conditional binary operator expected"));
                };
                Some((op, end - self.pos))
            }
            None | Some(b'\n') => {
                return Err(self.cond_err_at(
                    self.pos,
                    "unexpected token `newline', conditional binary operator expected",
                ));
            }
            _ => None,
        };
        let Some((op, len)) = op else {
            return Ok(CondExpr::Word(w));
        };
        self.pos += len;
        self.cond_skip();
        // A regex may start with a group: `[[ $x =~ (a|b)+ ]]`.
        let regex_group = op == CondBinOp::Match && self.at(0) == Some(b'(');
        if !regex_group && !self.at_cond_word() {
            return Err(self.cond_arg_error("binary"));
        }
        let mode = if op == CondBinOp::Match {
            Mode::Regex
        } else {
            Mode::Normal
        };
        let rhs = Word {
            parts: self.word_parts(mode, Tilde::Start)?,
        };
        Ok(CondExpr::Binary(w, op, rhs))
    }

    fn cond_unexpected_expected_paren(&self) -> ParseError {
        if self.eof() {
            return self.eof_err("unexpected EOF while looking for `]]'");
        }
        let t = self.cond_token();
        self.err_at(self.pos, format!("unexpected token `{t}', expected `)'"))
    }

    fn cond_arg_error(&self, kind: &str) -> ParseError {
        let t = self.cond_token();
        self.cond_err_at(
            self.pos,
            format!("unexpected argument `{t}' to conditional {kind} operator"),
        )
    }

    // ----- words -----

    /// A command argument: parsed, then brace expansion markers found.
    #[inline(never)]
    fn command_word(&mut self) -> ParseResult<Word> {
        let through = self
            .subscript_word_end
            .take()
            .filter(|&end| end > self.pos)
            .unwrap_or(0);
        let saved = std::mem::replace(&mut self.tilde_assign, false);
        let parts = self.word_parts_in(Mode::Normal, Tilde::Start, through);
        self.tilde_assign = saved;
        let parts = parts?;
        let parts = self.braces(parts)?;
        Ok(Word { parts })
    }

    fn word_parts(&mut self, mode: Mode, tilde: Tilde) -> ParseResult<Vec<WordPart>> {
        if mode != Mode::Normal {
            return self.word_parts_in(mode, tilde, 0);
        }
        let saved = std::mem::replace(&mut self.tilde_assign, tilde == Tilde::Assign);
        let r = self.word_parts_in(mode, tilde, 0);
        self.tilde_assign = saved;
        r
    }

    #[inline(never)]
    /// `through`: the word does not end before this position (see `subscript_word_end`).
    fn word_parts_in(
        &mut self,
        mode: Mode,
        tilde: Tilde,
        through: usize,
    ) -> ParseResult<Vec<WordPart>> {
        let quoted_ctx = matches!(
            mode,
            Mode::DQuote | Mode::HereDoc | Mode::Param { dq: true, .. }
        );
        let mut w = WordScan {
            parts: Vec::new(),
            lit: Vec::new(),
            quoted: quoted_ctx,
            start: self.pos,
            depth: 0,
            ext_depth: 0,
            ext_open: 0,
            squote_in_param: false,
            squote_open: 0,
            through,
        };
        while let Some(c) = self.at(0) {
            if mode == Mode::Normal && self.ext_glob_step(&mut w, c) {
                continue;
            }
            if self.word_ends_at(&w, c, mode) {
                break;
            }
            match c {
                b'\\' => self.word_escape(&mut w, mode),
                b'\'' if !quoted_ctx => {
                    w.flush();
                    let open = self.pos;
                    let Some(close) = self.src[open + 1..].iter().position(|&c| c == b'\'') else {
                        return Err(self.unclosed(open, "'"));
                    };
                    let close = open + 1 + close;
                    w.parts
                        .push(WordPart::Quoted(lossy(&self.src[open + 1..close])));
                    self.pos = close + 1;
                }
                // In "${x-'...'}" the single quotes stay but still hide a `}` (bash prints
                // `'}'` for "${u-'}'}"), and one that does not close is an error, as in bash.
                b'\'' if matches!(mode, Mode::Param { dq: true, .. }) => {
                    if !w.squote_in_param {
                        w.squote_open = self.pos;
                    }
                    w.squote_in_param = !w.squote_in_param;
                    w.lit.push(b'\'');
                    self.pos += 1;
                }
                b'"' if !matches!(mode, Mode::DQuote | Mode::HereDoc) => {
                    w.flush();
                    let nested = matches!(mode, Mode::Param { dq: true, .. });
                    let outer = std::mem::replace(&mut self.dq_in_dq_param, nested);
                    let part = self.double_quoted();
                    self.dq_in_dq_param = outer;
                    w.parts.push(part?);
                }
                b'`' => {
                    w.flush();
                    w.parts.push(self.backtick(mode == Mode::DQuote)?);
                }
                b'$' => match self.dollar(quoted_ctx)? {
                    // `$\<newline>`, rewritten: the `$` is read again after the continuation.
                    Some(WordPart::Literal(t)) if t.is_empty() => {}
                    Some(p) => {
                        w.flush();
                        w.parts.push(p);
                    }
                    None => {
                        w.lit.push(b'$');
                        self.pos += 1;
                    }
                },
                b'~' if tilde != Tilde::No
                    && !quoted_ctx
                    && (self.pos == w.start
                        || (tilde == Tilde::Assign
                            && w.lit.last() == Some(&b':')
                            && self.src[self.pos - 1] == b':')) =>
                {
                    match self.tilde_prefix(mode) {
                        Some((user, len)) => {
                            w.flush();
                            w.parts.push(WordPart::Tilde(user));
                            self.pos += len;
                        }
                        None => {
                            w.lit.push(b'~');
                            self.pos += 1;
                        }
                    }
                }
                b'<' | b'>'
                    if mode == Mode::Normal && self.pos == w.start && self.at(1) == Some(b'(') =>
                {
                    let output = c == b'>';
                    self.pos += 2;
                    let open = self.pos - 1;
                    let script = self.nested(|p| p.subst_body(open))?;
                    w.parts.push(WordPart::ProcessSubst {
                        output,
                        script: Box::new(script),
                    });
                }
                _ => {
                    match (mode, c) {
                        _ if w.squote_in_param => {}
                        // A bare `{` does not nest in `${...}`: bash ends `${x:-a{b}c}` at
                        // the first `}` (`a{b`, then `c}`).
                        (Mode::Regex, b'(') | (Mode::Subscript, b'[') => w.depth += 1,
                        (Mode::Regex, b')') | (Mode::Subscript, b']') => w.depth -= 1,
                        _ => {}
                    }
                    w.lit.push(c);
                    self.pos += 1;
                }
            }
        }
        if w.ext_depth > 0 {
            return Err(self.unclosed(w.ext_open, "("));
        }
        if w.squote_in_param {
            return Err(self.unclosed(w.squote_open, "'"));
        }
        w.flush();
        // bash names the whole text it was expanding when a `${...}` in it is bad.
        for p in &mut w.parts {
            if let WordPart::BadSubst(b) = p
                && b.context.is_empty()
            {
                b.context = self
                    .src
                    .get(w.start..self.pos)
                    .map_or_else(|| b.text.clone(), lossy);
            }
        }
        Ok(w.parts)
    }

    /// Inside an extended glob group (`@(a|b)`, `!(x)`, ...) metacharacters are pattern text,
    /// up to the group's closing parenthesis: takes an opening `?(`/`*(`/`+(`/`@(`/`!(` (where
    /// extended globs are on) or a parenthesis inside a group as literal text. Whether it did.
    fn ext_glob_step(&mut self, w: &mut WordScan, c: u8) -> bool {
        if (self.extglob || self.in_cond > 0 || w.ext_depth > 0)
            && matches!(c, b'?' | b'*' | b'+' | b'@' | b'!')
            && self.at(1) == Some(b'(')
        {
            if w.ext_depth == 0 {
                w.ext_open = self.pos + 1;
            }
            w.ext_depth += 1;
            w.lit.extend_from_slice(&[c, b'(']);
            self.pos += 2;
            return true;
        }
        if w.ext_depth > 0 && matches!(c, b'(' | b')') {
            if c == b'(' {
                w.ext_depth += 1;
            } else {
                w.ext_depth -= 1;
            }
            w.lit.push(c);
            self.pos += 1;
            return true;
        }
        false
    }

    /// Whether `c`, unquoted at the current position, ends a word read in `mode`.
    fn word_ends_at(&self, w: &WordScan, c: u8, mode: Mode) -> bool {
        match mode {
            Mode::Normal => {
                self.pos >= w.through
                    && w.ext_depth == 0
                    && is_meta(c)
                    && !(self.pos == w.start
                        && matches!(c, b'<' | b'>')
                        && self.at(1) == Some(b'('))
            }
            Mode::Regex => w.depth == 0 && (matches!(c, b' ' | b'\t' | b'\n' | b';' | b'&' | b')')),
            Mode::DQuote => c == b'"',
            Mode::Param { slash, .. } => {
                !w.squote_in_param && w.depth == 0 && (c == b'}' || (slash && c == b'/'))
            }
            Mode::Subscript => w.depth == 0 && c == b']',
            Mode::HereDoc => false,
        }
    }

    /// A backslash at the current position: a line continuation, an escaped character, or
    /// (in double quotes and here-documents, before a character it does not escape there)
    /// itself.
    fn word_escape(&mut self, w: &mut WordScan, mode: Mode) {
        match self.at(1) {
            // A backslash that ends the input escapes nothing and stands for itself. It is kept
            // as a quoted backslash, which means the same and prints as `\\`: as bare text it
            // would join whatever a printer writes after it.
            None => {
                w.flush();
                w.parts.push(WordPart::Quoted("\\".to_owned()));
                self.pos += 1;
            }
            Some(b'\n') => self.pos += 2,
            Some(n) if w.quoted && !(mode == Mode::DQuote && self.dq_in_dq_param) => {
                let special = matches!(n, b'$' | b'`' | b'\\')
                    || (n == b'"' && matches!(mode, Mode::DQuote | Mode::Param { dq: true, .. }))
                    || (n == b'}' && matches!(mode, Mode::Param { .. }));
                if special {
                    w.flush();
                    w.parts.push(WordPart::Quoted((n as char).to_string()));
                    self.pos += 2;
                } else {
                    w.lit.push(b'\\');
                    self.pos += 1;
                }
            }
            Some(_) => {
                w.flush();
                self.pos += 1;
                let len = utf8_len(&self.src[self.pos..]);
                w.parts
                    .push(WordPart::Quoted(lossy(&self.src[self.pos..self.pos + len])));
                self.pos += len;
            }
        }
    }

    /// `~user` at the current position: the user name and the length consumed.
    #[inline(never)]
    fn tilde_prefix(&self, mode: Mode) -> Option<(String, usize)> {
        let mut i = 1;
        let mut user = Vec::new();
        loop {
            match self.at(i) {
                Some(c) if c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-' | b'+') => {
                    user.push(c);
                    i += 1;
                }
                // bash removes a line continuation before it reads the word (`~ro\<newline>ot`).
                Some(b'\\') if self.at(i + 1) == Some(b'\n') => i += 2,
                _ => break,
            }
        }
        let ok = match self.at(i) {
            None | Some(b'/') => true,
            // A colon ends the prefix in any word (`~:x` is `$HOME:x`); only assignments
            // expand tildes after one.
            Some(b':') => true,
            Some(b'}') => matches!(mode, Mode::Param { .. }),
            Some(c) => match mode {
                Mode::Normal => is_meta(c),
                // `[[ $x =~ ~ ]]`: the home directory, matched literally (it is quoted).
                Mode::Regex => matches!(c, b' ' | b'\t' | b'\n' | b';' | b'&' | b')'),
                _ => false,
            },
        };
        ok.then(|| (lossy(&user), i))
    }

    #[inline(never)]
    fn double_quoted(&mut self) -> ParseResult<WordPart> {
        let open = self.pos;
        self.pos += 1;
        let parts = self.word_parts(Mode::DQuote, Tilde::No)?;
        if self.at(0) != Some(b'"') {
            return Err(self.unclosed(open, "\""));
        }
        self.pos += 1;
        Ok(WordPart::DoubleQuoted(parts))
    }

    /// Body of `$(`, `<(`, `>(`: a script up to the closing parenthesis.
    #[inline(never)]
    fn subst_body(&mut self, _open: usize) -> ParseResult<Script> {
        // A newline inside reads only the bodies of here-documents begun inside: those of
        // the line around it follow that line, as in bash. One inside still waiting at the
        // `)` reads its body after the line too, after theirs.
        let outer = std::mem::take(&mut self.pending);
        let outer_dq = std::mem::take(&mut self.dq_in_dq_param);
        self.in_subst += 1;
        let r = self.subst_list();
        self.in_subst -= 1;
        self.dq_in_dq_param = outer_dq;
        let inner = std::mem::replace(&mut self.pending, outer);
        self.pending.extend(inner);
        r
    }

    fn subst_list(&mut self) -> ParseResult<Script> {
        let s = self.list()?;
        self.skip_linebreaks()?;
        match self.at(0) {
            Some(b')') => {
                self.pos += 1;
                Ok(s)
            }
            None => Err(self.eof_err("unexpected EOF while looking for matching `)'")),
            _ => Err(self.unexpected()),
        }
    }

    #[inline(never)]
    fn backtick(&mut self, in_dq: bool) -> ParseResult<WordPart> {
        let open = self.pos;
        self.pos = self.backquote_end(open, self.src.len());
        if self.pos >= self.src.len() {
            return Err(self.unclosed(open, "`"));
        }
        let raw = &self.src[open + 1..self.pos];
        self.pos += 1;
        let backquoted = Some(lossy(raw).into_boxed_str());
        if let Some(s) = self.backticks.get(&open) {
            return Ok(WordPart::CommandSubst {
                script: Box::new(s.clone()),
                backquoted,
            });
        }
        let content = backquoted_content(raw, in_dq);
        let line = self.line_at(open);
        let s = match run_passes(&content, self.depth + 1, line, &self.opts(), |p| {
            p.program()
        }) {
            Ok(s) => s,
            // Too deep a nesting stays the script's error: it bounds the parser itself.
            Err(e) if e.message == DEPTH_MESSAGE => return Err(e),
            // bash numbers its lines as the script's, from the line the backquotes start on.
            Err(e) => {
                let shown = (e.kind == ParseErrorKind::UnexpectedToken).then(|| {
                    let text = String::from_utf8_lossy(&content);
                    let at = text.lines().nth(e.line.saturating_sub(line)).unwrap_or("");
                    at.into()
                });
                return Ok(WordPart::BadBackquote {
                    raw: lossy(raw).into_boxed_str(),
                    message: e.message.into_boxed_str(),
                    line: e.line,
                    shown,
                });
            }
        };
        self.backticks.insert(open, s.clone());
        Ok(WordPart::CommandSubst {
            script: Box::new(s),
            backquoted,
        })
    }

    /// At `$`: the expansion, or `None` when the `$` is literal.
    #[inline(never)]
    fn dollar(&mut self, quoted_ctx: bool) -> ParseResult<Option<WordPart>> {
        let open = self.pos;
        // `$\<newline>?` is `$?`: bash removes the line continuation first. Moving the `$`
        // past it lets the caller skip the continuation and meet the `$` again.
        if self.at(1) == Some(b'\\') && self.at(2) == Some(b'\n') {
            let src = self.src.to_mut();
            src[open..open + 3].copy_from_slice(b"\\\n$");
            if let Ok(i) = self.newlines.binary_search(&(open + 2)) {
                self.newlines[i] = open + 1;
            }
            return Ok(Some(WordPart::Literal(String::new())));
        }
        let Some(n) = self.at(1) else { return Ok(None) };
        Ok(Some(match n {
            b'\'' if !quoted_ctx => {
                self.pos += 2;
                let s = self.ansi_c(open)?;
                WordPart::Quoted(s)
            }
            b'"' if !quoted_ctx => {
                self.pos += 1;
                self.double_quoted()?
            }
            b'(' => {
                self.pos += 1;
                if self.at(1) == Some(b'(')
                    && let Some(a) = self.try_dparen()?
                {
                    return Ok(Some(WordPart::Arith(Box::new(a))));
                }
                self.pos = open + 2;
                let s = self.nested(|p| p.subst_body(open))?;
                WordPart::CommandSubst {
                    script: Box::new(s),
                    backquoted: None,
                }
            }
            b'[' => {
                self.pos += 2;
                let start = self.pos;
                let a = self.nested(|p| {
                    let (tokens, end, _) = p
                        .arith_tokens(ArithEnd::Bracket, open)?
                        .ok_or_else(|| p.unclosed(open, "]"))?;
                    p.finish_arith(tokens, start, end)
                })?;
                WordPart::Arith(Box::new(Arith { bracket: true, ..a }))
            }
            b'{' => {
                self.pos += 2;
                self.nested(|p| p.param_brace(open, quoted_ctx))?
            }
            c if is_name_start(c) => {
                let mut i = 2;
                while self.at(i).is_some_and(is_name_char) {
                    i += 1;
                }
                let name = lossy(&self.src[self.pos + 1..self.pos + i]);
                self.pos += i;
                simple_param(Param::Named(name))
            }
            c if c.is_ascii_digit() => {
                self.pos += 2;
                simple_param(Param::Positional(u32::from(c - b'0')))
            }
            b'@' | b'*' | b'#' | b'?' | b'$' | b'!' | b'-' => {
                self.pos += 2;
                simple_param(Param::Special(n as char))
            }
            _ => return Ok(None),
        }))
    }

    /// The byte at the position when it is before `end`.
    fn at_before(&self, end: usize) -> Option<u8> {
        (self.pos < end).then(|| self.src[self.pos])
    }

    /// `$'...'` with the current position after the opening quote.
    #[inline(never)]
    fn ansi_c(&mut self, open: usize) -> ParseResult<String> {
        // The string ends at the first `'` not escaped by a backslash; its escapes are then
        // decoded within it (so `\c` takes the next character of the string, never its end).
        let mut end = self.pos;
        loop {
            match self.src.get(end) {
                None => return Err(self.unclosed(open + 1, "'")),
                Some(b'\'') => break,
                Some(b'\\') => end += 2,
                Some(_) => end += 1,
            }
        }
        let mut out: Vec<u8> = Vec::new();
        // Where an escape made a NUL (`\0`, `\x00`, `\c@`): the string ends there, as C
        // strings do in bash. A NUL byte written as such is text like any other.
        let mut nul_at = None;
        loop {
            if self.pos >= end {
                self.pos = end + 1;
                break;
            }
            let c = self.src[self.pos];
            self.pos += 1;
            match c {
                b'\\' => {
                    let Some(e) = self.at_before(end) else {
                        continue;
                    };
                    self.pos += 1;
                    let len = out.len();
                    match e {
                        b'a' => out.push(7),
                        b'b' => out.push(8),
                        b'e' | b'E' => out.push(0x1b),
                        b'f' => out.push(12),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'v' => out.push(11),
                        b'\\' | b'\'' | b'"' | b'?' => out.push(e),
                        b'0'..=b'7' => {
                            let mut v = u32::from(e - b'0');
                            for _ in 0..2 {
                                match self.at_before(end) {
                                    Some(d @ b'0'..=b'7') => {
                                        v = v * 8 + u32::from(d - b'0');
                                        self.pos += 1;
                                    }
                                    _ => break,
                                }
                            }
                            out.push((v & 0xff) as u8);
                        }
                        b'x' | b'u' | b'U' => {
                            let max = match e {
                                b'x' => 2,
                                b'u' => 4,
                                _ => 8,
                            };
                            // bash's `\x{HHH}`: any number of digits, the last two
                            // count; a missing `}` is no error, and no digits make a NUL.
                            let braced = e == b'x' && self.at_before(end) == Some(b'{');
                            if braced {
                                self.pos += 1;
                            }
                            let mut v: u32 = 0;
                            let mut n = 0;
                            while braced || n < max {
                                match self.at_before(end).and_then(|d| (d as char).to_digit(16)) {
                                    Some(d) => {
                                        v = if braced {
                                            (v * 16 + d) & 0xFF
                                        } else {
                                            v * 16 + d
                                        };
                                        self.pos += 1;
                                        n += 1;
                                    }
                                    None => break,
                                }
                            }
                            if braced {
                                if self.at_before(end) == Some(b'}') {
                                    self.pos += 1;
                                }
                                out.push(v as u8);
                            } else if n == 0 {
                                out.push(b'\\');
                                out.push(e);
                            } else if e == b'x' {
                                out.push(v as u8);
                            } else {
                                let ch = char::from_u32(v).unwrap_or('\u{fffd}');
                                let mut buf = [0u8; 4];
                                out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                            }
                        }
                        b'c' => match self.at_before(end) {
                            Some(x) => {
                                self.pos += 1;
                                // bash's TOCTRL: `?` is DEL, anything else its upper
                                // case masked to five bits (`\c0` is 0x10, `\c-` CR).
                                out.push(if x == b'?' {
                                    0x7f
                                } else {
                                    x.to_ascii_uppercase() & 0x1f
                                });
                            }
                            None => out.extend_from_slice(b"\\c"),
                        },
                        other => {
                            out.push(b'\\');
                            out.push(other);
                        }
                    }
                    if nul_at.is_none() {
                        nul_at = out[len..].iter().position(|b| *b == 0).map(|i| len + i);
                    }
                }
                _ => match wasmsand_exec::raw::raw_byte_at(&self.src[self.pos - 1..]) {
                    Some(b) => {
                        out.push(b);
                        self.pos += 3;
                    }
                    None => out.push(c),
                },
            }
        }
        Ok(wasmsand_exec::raw::decode(
            &out[..nul_at.unwrap_or(out.len())],
        ))
    }

    fn param_name(&mut self) -> Option<Param> {
        let c = self.at(0)?;
        if is_name_start(c) {
            let mut i = 1;
            while self.at(i).is_some_and(is_name_char) {
                i += 1;
            }
            let name = lossy(&self.src[self.pos..self.pos + i]);
            self.pos += i;
            return Some(Param::Named(name));
        }
        if c.is_ascii_digit() {
            let mut i = 1;
            while self.at(i).is_some_and(|c| c.is_ascii_digit()) {
                i += 1;
            }
            let n = std::str::from_utf8(&self.src[self.pos..self.pos + i])
                .ok()?
                .parse()
                .ok()?;
            self.pos += i;
            return Some(Param::Positional(n));
        }
        if matches!(c, b'@' | b'*' | b'#' | b'?' | b'$' | b'!' | b'-') {
            self.pos += 1;
            return Some(Param::Special(c as char));
        }
        None
    }

    /// `None` too, with nothing consumed, for a `[` without its `]`: bash reads such a
    /// `${...}` to its first `}` and reports a bad substitution when it is expanded.
    fn opt_subscript(&mut self) -> ParseResult<Option<Subscript>> {
        if self.at(0) != Some(b'[') {
            return Ok(None);
        }
        if self.starts("[@]") {
            self.pos += 3;
            return Ok(Some(Subscript::At));
        }
        if self.starts("[*]") {
            self.pos += 3;
            return Ok(Some(Subscript::Star));
        }
        if self.not_subscript.contains(&self.pos) {
            return Ok(None);
        }
        let (save, pending) = (self.pos, self.pending.clone());
        self.pos += 1;
        // Text that does not read as a subscript (a quote left open past the `}`) is no
        // subscript either: the `${...}` ends at its first `}`.
        let parts = self.word_parts(Mode::Subscript, Tilde::No);
        let closed = self.at(0) == Some(b']') && self.subscript_in_word(save + 1, self.pos);
        let (Ok(parts), true) = (parts, closed) else {
            self.pos = save;
            self.pending = pending;
            self.not_subscript.insert(save);
            return Ok(None);
        };
        self.pos += 1;
        Ok(Some(Subscript::Index(Word { parts })))
    }

    /// `${...}` with the position after `${`; `open` is the `$`.
    #[inline(never)]
    fn param_brace(&mut self, open: usize, in_dq: bool) -> ParseResult<WordPart> {
        let outer = std::mem::take(&mut self.dq_in_dq_param);
        let r = self.param_brace_in(open, in_dq);
        self.dq_in_dq_param = outer;
        r
    }

    fn param_brace_in(&mut self, open: usize, in_dq: bool) -> ParseResult<WordPart> {
        if let Some(length) = self.param_length(open)? {
            return Ok(length);
        }
        let indirect = match self.param_indirect() {
            Indirect::No => false,
            Indirect::Yes => true,
            Indirect::PrefixNames(part) => return Ok(part),
        };
        let Some(param) = self.param_name() else {
            return self.bad_subst(open);
        };
        // `${a[]}`: an empty subscript is a bad substitution in bash.
        if matches!(param, Param::Named(_)) && self.starts("[]") {
            return self.bad_subst(open);
        }
        let sub = if matches!(param, Param::Named(_)) {
            self.opt_subscript()?
        } else {
            None
        };
        if indirect
            && matches!(sub, Some(Subscript::At | Subscript::Star))
            && self.at(0) == Some(b'}')
        {
            self.pos += 1;
            let star = sub == Some(Subscript::Star);
            return Ok(param_part(param, None, false, ParamOp::Keys { star }));
        }
        let Some(op) = self.param_op(open, in_dq)? else {
            return self.bad_subst(open);
        };
        Ok(param_part(param, sub, indirect, op))
    }

    /// `${#name}`, `${#name[i]}`: `None` (and nothing consumed) when what follows the `#` is
    /// not a parameter closed by `}` (`${#}` is `$#`; `${#-x}` is an operator on it).
    fn param_length(&mut self, open: usize) -> ParseResult<Option<WordPart>> {
        if self.at(0) != Some(b'#') || self.at(1) == Some(b'}') || self.not_length.contains(&open) {
            return Ok(None);
        }
        let save = self.pos;
        self.pos += 1;
        if let Some(param) = self.param_name() {
            let sub = self.opt_subscript()?;
            if self.at(0) == Some(b'}') {
                self.pos += 1;
                return Ok(Some(param_part(param, sub, false, ParamOp::Length)));
            }
        }
        self.not_length.insert(open);
        self.pos = save;
        Ok(None)
    }

    /// The `!` of `${!name}` (indirection) and the whole of `${!prefix*}`/`${!prefix@}`.
    fn param_indirect(&mut self) -> Indirect {
        if self.at(0) != Some(b'!') || self.at(1) == Some(b'}') {
            return Indirect::No;
        }
        let save = self.pos;
        self.pos += 1;
        let names_param = self
            .at(0)
            .is_some_and(|c| is_name_start(c) || c.is_ascii_digit())
            || matches!(
                self.at(0),
                Some(b'@' | b'*' | b'#' | b'?' | b'$' | b'!' | b'-')
            );
        if !names_param {
            self.pos = save;
            return Indirect::No;
        }
        if let Some(Param::Named(n)) = self.clone_param_name()
            && matches!(self.src.get(self.pos + n.len()), Some(b'*' | b'@'))
            && self.src.get(self.pos + n.len() + 1) == Some(&b'}')
        {
            let star = self.src[self.pos + n.len()] == b'*';
            self.pos += n.len() + 2;
            return Indirect::PrefixNames(param_part(
                Param::Named(n),
                None,
                false,
                ParamOp::PrefixNames { star },
            ));
        }
        Indirect::Yes
    }

    /// The word after an operator of `${...}`, up to and past the closing `}`.
    fn param_word(&mut self, open: usize, dq: bool) -> ParseResult<Word> {
        let tilde = if self.tilde_assign {
            Tilde::Assign
        } else {
            Tilde::Start
        };
        let parts = self.word_parts(Mode::Param { dq, slash: false }, tilde)?;
        if self.at(0) != Some(b'}') {
            return Err(self.unclosed(open, "}"));
        }
        self.pos += 1;
        Ok(Word { parts })
    }

    /// The operator after the parameter of `${...}` (none, `:-`, `#`, `/`, `^`, `@Q`, ...) and
    /// its words, up to and past the closing `}`. `None`: no operator, a bad substitution.
    fn param_op(&mut self, open: usize, in_dq: bool) -> ParseResult<Option<ParamOp>> {
        let Some(c) = self.at(0) else {
            return Err(self.unclosed(open, "}"));
        };
        Ok(Some(match c {
            b'}' => {
                self.pos += 1;
                ParamOp::None
            }
            b':' if matches!(self.at(1), Some(b'-' | b'=' | b'?' | b'+')) => {
                let k = self.at(1);
                self.pos += 2;
                let w = self.param_word(open, in_dq)?;
                colon_op(k, true, w)
            }
            b'-' | b'=' | b'?' | b'+' => {
                self.pos += 1;
                let w = self.param_word(open, in_dq)?;
                colon_op(Some(c), false, w)
            }
            // `${x:}`: an offset that is not there (`${x: }` is offset 0).
            b':' if self.at(1) == Some(b'}') => return Ok(None),
            b':' => self.param_substring(open)?,
            b'#' | b'%' => {
                let longest = self.at(1) == Some(c);
                self.pos += if longest { 2 } else { 1 };
                let pattern = self.param_word(open, false)?;
                if c == b'#' {
                    ParamOp::RemovePrefix { longest, pattern }
                } else {
                    ParamOp::RemoveSuffix { longest, pattern }
                }
            }
            b'/' => self.param_replace(open)?,
            b'^' | b',' => {
                let all = self.at(1) == Some(c);
                self.pos += if all { 2 } else { 1 };
                let pattern = self.param_word(open, false)?;
                ParamOp::Case {
                    upper: c == b'^',
                    all,
                    pattern,
                }
            }
            b'@' if self.at(1).is_some_and(|c| c.is_ascii_alphabetic())
                && self.at(2) == Some(b'}') =>
            {
                let t = self.at(1).unwrap_or(b'Q') as char;
                self.pos += 3;
                ParamOp::Transform(t)
            }
            _ => return Ok(None),
        }))
    }

    /// `${x:offset}`, `${x:offset:length}`, at the `:`.
    fn param_substring(&mut self, open: usize) -> ParseResult<ParamOp> {
        self.pos += 1;
        let start = self.pos;
        let (tokens, end, stop) = self
            .arith_tokens(ArithEnd::Colon, open)?
            .ok_or_else(|| self.unclosed(open, "}"))?;
        let offset = self.finish_arith(tokens, start, end)?;
        let length = if stop == b':' {
            let start = self.pos;
            let (tokens, end, _) = self
                .arith_tokens(ArithEnd::Brace, open)?
                .ok_or_else(|| self.unclosed(open, "}"))?;
            Some(self.finish_arith(tokens, start, end)?)
        } else {
            None
        };
        Ok(ParamOp::Substring { offset, length })
    }

    /// `${x/pattern/replacement}` and its `//`, `/#`, `/%` forms, at the first `/`.
    fn param_replace(&mut self, open: usize) -> ParseResult<ParamOp> {
        // bash removes line continuations before it reads the operator: `${x/\<newline>#a}`
        // is `${x/#a}`.
        self.pos = self.past_continuations(self.pos + 1);
        let mode = match self.at(0) {
            Some(b'/') => ReplaceMode::All,
            Some(b'#') => ReplaceMode::Prefix,
            Some(b'%') => ReplaceMode::Suffix,
            _ => ReplaceMode::First,
        };
        if mode != ReplaceMode::First {
            self.pos = self.past_continuations(self.pos + 1);
        }
        // bash: a pattern is never empty after `//`, so a `/` there is its first character
        // (`${x////c}` replaces `/` with `c`).
        let lead_slash = mode == ReplaceMode::All && self.at(0) == Some(b'/');
        if lead_slash {
            self.pos += 1;
        }
        // A leading `~` is expanded, except after `#`/`%` where it is not the start.
        let tilde = if matches!(mode, ReplaceMode::All | ReplaceMode::First) && !lead_slash {
            Tilde::Start
        } else {
            Tilde::No
        };
        let mut parts = self.word_parts(
            Mode::Param {
                dq: false,
                slash: true,
            },
            tilde,
        )?;
        if lead_slash {
            parts.insert(0, WordPart::Literal("/".into()));
        }
        let pattern = Word { parts };
        let replacement = if self.at(0) == Some(b'/') {
            self.pos += 1;
            // bash 5.2 reads the replacement as unquoted text even inside double quotes:
            // `"${x/a/'q'}"` gives `q`, `"${x/a/\q}"` `q`, `"${x/a/~}"` the home directory.
            self.param_word(open, false)?
        } else if self.at(0) == Some(b'}') {
            self.pos += 1;
            Word::default()
        } else {
            return Err(self.unclosed(open, "}"));
        };
        Ok(ParamOp::Replace {
            mode,
            pattern,
            replacement,
        })
    }

    fn clone_param_name(&mut self) -> Option<Param> {
        let save = self.pos;
        let p = self.param_name();
        self.pos = save;
        p
    }

    /// A `${...}` bash accepts when parsing and rejects when expanding: skip to its `}`.
    #[inline(never)]
    fn bad_subst(&mut self, open: usize) -> ParseResult<WordPart> {
        let mut depth = 0usize;
        while let Some(c) = self.at(0) {
            self.pos += 1;
            match c {
                b'\\' => self.pos += 1,
                b'{' => depth += 1,
                b'}' if depth == 0 => {
                    let end = self.pos.min(self.src.len());
                    return Ok(WordPart::BadSubst(BadSubst {
                        text: lossy(&self.src[open..end]),
                        context: String::new(),
                    }));
                }
                b'}' => depth -= 1,
                b'\'' | b'"' => self.pos = self.quoted_end(self.pos - 1) + 1,
                // bash's lexer reads the `${...}` as a balanced text: backquotes and `$(...)`
                // in it are read whole (a `}` inside them closes nothing), and one left open
                // is a syntax error, whatever the `${...}` turns out to mean.
                b'`' => {
                    let end = self.backquote_end(self.pos - 1, self.src.len());
                    if end >= self.src.len() {
                        return Err(self.unclosed(self.pos - 1, "`"));
                    }
                    self.pos = end + 1;
                }
                b'$' if self.at(0) == Some(b'(') => {
                    match self.skip_balanced(self.pos, b'(', b')') {
                        Some(end) => self.pos = end + 1,
                        None => return Err(self.unclosed(self.pos, ")")),
                    }
                }
                _ => {}
            }
        }
        Err(self.unclosed(open, "}"))
    }

    // ----- arithmetic -----

    /// At `((`: an arithmetic expression up to `))`, or `None` (position unchanged) when the
    /// parentheses turn out to be nested subshells or a command substitution.
    #[inline(never)]
    fn try_dparen(&mut self) -> ParseResult<Option<Arith>> {
        let open = self.pos;
        if self.not_arith.contains(&open) {
            return Ok(None);
        }
        let pending = self.pending.clone();
        self.pos += 2;
        let start = self.pos;
        match self.nested(|p| p.arith_tokens(ArithEnd::DParen, open))? {
            Some((tokens, end, _)) => Ok(Some(self.finish_arith(tokens, start, end)?)),
            None => {
                self.not_arith.insert(open);
                self.pending = pending;
                self.pos = open;
                Ok(None)
            }
        }
    }

    #[inline(never)]
    fn finish_arith(&self, tokens: Vec<Token>, start: usize, end: usize) -> ParseResult<Arith> {
        let source = lossy(&self.src[start..end]);
        let budget = MAX_DEPTH.saturating_sub(self.depth);
        match arith::parse_tokens(tokens, &source, budget) {
            Ok(expr) => Ok(Arith {
                source,
                expr,
                bracket: false,
            }),
            Err(arith::TooDeep) => Err(self.err_at(start, DEPTH_MESSAGE)),
        }
    }

    /// Stage one of arithmetic: tokens up to the end marker. Returns the tokens, where the
    /// expression text ends, and the byte that ended it; `None` for a `((` that is no
    /// arithmetic.
    #[inline(never)]
    fn arith_tokens(
        &mut self,
        end: ArithEnd,
        open: usize,
    ) -> ParseResult<Option<(Vec<Token>, usize, u8)>> {
        let start = self.pos;
        let mut tokens = Vec::new();
        let (mut parens, mut brackets, mut ternary) = (0usize, 0usize, 0usize);
        let closer = match end {
            ArithEnd::Colon | ArithEnd::Brace => "}",
            ArithEnd::Bracket => "]",
            _ => ")",
        };
        loop {
            while let Some(c) = self.at(0) {
                if matches!(c, b' ' | b'\t' | b'\n') {
                    self.pos += 1;
                } else if c == b'\\' && self.at(1) == Some(b'\n') {
                    self.pos += 2;
                } else {
                    break;
                }
            }
            let here = self.pos;
            let Some(c) = self.at(0) else {
                if end == ArithEnd::Eof {
                    return Ok(Some((tokens, here, 0)));
                }
                return Err(self.unclosed(open, closer));
            };
            match (end, c) {
                (ArithEnd::DParen | ArithEnd::Semi, b')') if parens == 0 => {
                    if end == ArithEnd::DParen && self.at(1) == Some(b')') {
                        self.pos += 2;
                        return Ok(Some((tokens, here, c)));
                    }
                    return Ok(None);
                }
                (ArithEnd::Semi, b';') if parens == 0 => {
                    self.pos += 1;
                    return Ok(Some((tokens, here, c)));
                }
                (ArithEnd::Colon, b':') if parens == 0 && ternary == 0 => {
                    self.pos += 1;
                    return Ok(Some((tokens, here, c)));
                }
                (ArithEnd::Colon | ArithEnd::Brace, b'}') if parens == 0 => {
                    self.pos += 1;
                    return Ok(Some((tokens, here, c)));
                }
                (ArithEnd::Bracket, b']') if brackets == 0 => {
                    self.pos += 1;
                    return Ok(Some((tokens, here, c)));
                }
                _ => {}
            }
            let tok = if c.is_ascii_digit() {
                let mut i = 1;
                while self
                    .at(i)
                    .is_some_and(|d| d.is_ascii_alphanumeric() || matches!(d, b'_' | b'#' | b'@'))
                {
                    i += 1;
                }
                let raw = lossy(&self.src[here..here + i]);
                self.pos += i;
                Tok::Num(raw)
            } else if is_name_start(c) {
                let mut i = 1;
                while self.at(i).is_some_and(is_name_char) {
                    i += 1;
                }
                let raw = lossy(&self.src[here..here + i]);
                self.pos += i;
                Tok::Ident(raw)
            } else if c == b'$' && self.at(1) == Some(b'"') {
                // `$"..."` (a locale string) is a double-quoted string here.
                self.pos += 1;
                let p = self.double_quoted()?;
                Tok::Word(Word { parts: vec![p] })
            } else if c == b'$' {
                match self.dollar(true)? {
                    // `$\<newline>` became `\<newline>$`: skipped as a blank, then read again.
                    Some(WordPart::Literal(l)) if l.is_empty() => continue,
                    Some(p) => Tok::Word(Word { parts: vec![p] }),
                    None => {
                        self.pos += 1;
                        Tok::Bad
                    }
                }
            } else if c == b'"' {
                let p = self.double_quoted()?;
                Tok::Word(Word { parts: vec![p] })
            } else if c == b'`' {
                let p = self.backtick(false)?;
                Tok::Word(Word { parts: vec![p] })
            } else if c == b'\'' {
                let Some(close) = self.src[here + 1..].iter().position(|&d| d == b'\'') else {
                    return Err(self.unclosed(here, "'"));
                };
                self.pos = here + close + 2;
                Tok::SingleQuoted(lossy(&self.src[here + 1..here + 1 + close]))
            } else if let Some(op) = OPERATORS.iter().find(|o| self.starts(o)) {
                self.pos += op.len();
                match *op {
                    "(" => {
                        parens += 1;
                        if self.depth + parens > MAX_DEPTH {
                            return Err(self.err_at(here, DEPTH_MESSAGE));
                        }
                    }
                    ")" => parens = parens.saturating_sub(1),
                    "[" => brackets += 1,
                    "]" => brackets = brackets.saturating_sub(1),
                    "?" => ternary += 1,
                    ":" => ternary = ternary.saturating_sub(1),
                    _ => {}
                }
                Tok::Op(op)
            } else if c == b'\\' && self.at(1).is_some() {
                // An escaped character is a bad token with its backslash, never an operator:
                // bash reads `$((n\)))` to its `))` and reports `\)`.
                self.pos += 1 + utf8_len(&self.src[here + 1..]);
                Tok::Bad
            } else {
                self.pos += utf8_len(&self.src[here..]);
                Tok::Bad
            };
            tokens.push(Token {
                tok,
                start: here - start,
            });
        }
    }

    // ----- brace expansion -----

    /// Finds brace expansions in a parsed word. Matching braces are paired in one pass with a
    /// stack, so a word full of unmatched `{` stays linear.
    #[inline(never)]
    fn braces(&self, parts: Vec<WordPart>) -> ParseResult<Vec<WordPart>> {
        let has_brace = parts
            .iter()
            .any(|p| matches!(p, WordPart::Literal(s) if s.contains('{')));
        if !has_brace {
            return Ok(parts);
        }
        let mut atoms: Vec<Atom> = Vec::new();
        for p in parts {
            match p {
                WordPart::Literal(s) => atoms.extend(s.bytes().map(Atom::Ch)),
                other => atoms.push(Atom::Part(Some(other))),
            }
        }
        let mut pairs: Vec<Option<(usize, Vec<usize>)>> = vec![None; atoms.len()];
        let mut stack: Vec<(usize, Vec<usize>)> = Vec::new();
        for (i, a) in atoms.iter().enumerate() {
            match a {
                Atom::Ch(b'{') => stack.push((i, Vec::new())),
                Atom::Ch(b',') => {
                    if let Some(top) = stack.last_mut() {
                        top.1.push(i);
                    }
                }
                Atom::Ch(b'}') => {
                    if let Some((o, commas)) = stack.pop() {
                        pairs[o] = Some((i, commas));
                    }
                }
                _ => {}
            }
        }
        let budget = MAX_DEPTH.saturating_sub(self.depth);
        let n = atoms.len();
        build_braces(&mut atoms, &pairs, 0, n, budget)
            .ok_or_else(|| self.err_at(self.pos, DEPTH_MESSAGE))
    }
}

enum Atom {
    Ch(u8),
    Part(Option<WordPart>),
}

/// Builds the parts of `atoms[lo..hi]`; `None` when nesting exceeds `budget`.
fn build_braces(
    atoms: &mut [Atom],
    pairs: &[Option<(usize, Vec<usize>)>],
    lo: usize,
    hi: usize,
    budget: usize,
) -> Option<Vec<WordPart>> {
    let mut out = Vec::new();
    let mut lit: Vec<u8> = Vec::new();
    let flush = |out: &mut Vec<WordPart>, lit: &mut Vec<u8>| {
        if !lit.is_empty() {
            out.push(WordPart::Literal(lossy(lit)));
            lit.clear();
        }
    };
    let mut i = lo;
    while i < hi {
        match &mut atoms[i] {
            Atom::Ch(b'{') => {
                if let Some((close, commas)) = &pairs[i] {
                    let close = *close;
                    if !commas.is_empty() {
                        if budget == 0 {
                            return None;
                        }
                        let mut bounds = vec![i];
                        bounds.extend(commas.iter().copied());
                        bounds.push(close);
                        let mut alts = Vec::new();
                        for w in bounds.windows(2) {
                            let parts = build_braces(atoms, pairs, w[0] + 1, w[1], budget - 1)?;
                            alts.push(Word { parts });
                        }
                        flush(&mut out, &mut lit);
                        out.push(WordPart::Brace(BraceExp::List(alts)));
                        i = close + 1;
                        continue;
                    }
                    if let Some(seq) = brace_seq(&atoms[i + 1..close]) {
                        flush(&mut out, &mut lit);
                        out.push(WordPart::Brace(seq));
                        i = close + 1;
                        continue;
                    }
                }
                lit.push(b'{');
            }
            Atom::Ch(c) => lit.push(*c),
            Atom::Part(p) => {
                flush(&mut out, &mut lit);
                if let Some(p) = p.take() {
                    out.push(p);
                }
            }
        }
        i += 1;
    }
    flush(&mut out, &mut lit);
    Some(out)
}

fn brace_seq(atoms: &[Atom]) -> Option<BraceExp> {
    let mut s = Vec::with_capacity(atoms.len());
    for a in atoms {
        match a {
            Atom::Ch(c) => s.push(*c),
            Atom::Part(_) => return None,
        }
    }
    let s = std::str::from_utf8(&s).ok()?;
    let fields: Vec<&str> = s.split("..").collect();
    if !(2..=3).contains(&fields.len()) {
        return None;
    }
    let is_int = |f: &str| {
        let d = f.strip_prefix(['-', '+']).unwrap_or(f);
        !d.is_empty() && d.bytes().all(|c| c.is_ascii_digit())
    };
    let is_char = |f: &str| f.len() == 1 && f.as_bytes()[0].is_ascii_alphabetic();
    let ok = (is_int(fields[0]) && is_int(fields[1])) || (is_char(fields[0]) && is_char(fields[1]));
    if !ok || (fields.len() == 3 && !is_int(fields[2])) {
        return None;
    }
    Some(BraceExp::Seq {
        start: fields[0].to_string(),
        end: fields[1].to_string(),
        step: fields.get(2).map(|s| s.to_string()),
    })
}

fn simple_param(param: Param) -> WordPart {
    WordPart::Param(Box::new(ParamExp {
        bare: matches!(param, Param::Named(_)),
        param,
        subscript: None,
        indirect: false,
        op: ParamOp::None,
    }))
}

/// A `${...}` expansion as a word part.
fn param_part(param: Param, subscript: Option<Subscript>, indirect: bool, op: ParamOp) -> WordPart {
    WordPart::Param(Box::new(ParamExp {
        param,
        subscript,
        indirect,
        op,
        bare: false,
    }))
}

/// A word being read: its finished parts, the literal text not yet made a part, and where
/// the reading is.
struct WordScan {
    parts: Vec<WordPart>,
    lit: Vec<u8>,
    /// Whether the text is quoted (double quotes, a here-document, `"${x-...}"`).
    quoted: bool,
    /// Where the word starts (a `~` or a `<(` is special only there).
    start: usize,
    /// Nesting of the brackets the mode counts (`(` in a regex, `{` in `${...}`, `[` in a
    /// subscript) so that only the outermost closing one ends the word.
    depth: usize,
    /// Nesting of extended glob groups, and where the outermost opened.
    ext_depth: usize,
    ext_open: usize,
    /// Between the single quotes of "${x-'...'}": they stay in the value and hide a `}`, but
    /// `$` still expands inside them.
    squote_in_param: bool,
    squote_open: usize,
    /// The word goes on at least to here, whatever it meets (0: no such end).
    through: usize,
}

impl WordScan {
    /// Makes the pending literal text a part.
    fn flush(&mut self) {
        if !self.lit.is_empty() {
            let s = lossy(&self.lit);
            self.lit.clear();
            self.parts.push(if self.quoted {
                WordPart::Quoted(s)
            } else {
                WordPart::Literal(s)
            });
        }
    }
}

/// What a `!` after `${` turned out to be.
enum Indirect {
    /// No `!`, or one that is the parameter itself (`${!}`).
    No,
    /// `${!name...}`: the value names the parameter to expand.
    Yes,
    /// `${!prefix*}`, `${!prefix@}`, parsed whole.
    PrefixNames(WordPart),
}

fn colon_op(kind: Option<u8>, colon: bool, word: Word) -> ParamOp {
    match kind {
        Some(b'-') => ParamOp::Default { colon, word },
        Some(b'=') => ParamOp::Assign { colon, word },
        Some(b'?') => ParamOp::Error { colon, word },
        _ => ParamOp::Alternate { colon, word },
    }
}

fn utf8_len(b: &[u8]) -> usize {
    match b.first() {
        None => 0,
        Some(&c) if c < 0x80 => 1,
        Some(&c) => {
            let n = if c >= 0xF0 {
                4
            } else if c >= 0xE0 {
                3
            } else {
                2
            };
            // Only continuation bytes belong to the character; stop early on malformed input.
            1 + b[1..]
                .iter()
                .take(n - 1)
                .take_while(|&&d| d & 0xC0 == 0x80)
                .count()
        }
    }
}

/// The delimiter of a here-document: its word with quotes removed (no expansion happens).
/// A word's text without its line continuations (a backslash and a newline, outside single
/// quotes).
fn strip_continuations(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut quote = None;
    let mut i = 0;
    while i < raw.len() {
        let c = raw[i];
        match (quote, c) {
            (None | Some(b'"'), b'\\') if i + 1 < raw.len() => {
                if raw[i + 1] != b'\n' {
                    out.extend_from_slice(&raw[i..i + 2]);
                }
                i += 2;
                continue;
            }
            (None, b'\'' | b'"') => quote = Some(c),
            (Some(q), _) if c == q => quote = None,
            _ => {}
        }
        out.push(c);
        i += 1;
    }
    out
}

fn remove_quotes(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < raw.len() {
        match raw[i] {
            b'\'' => {
                i += 1;
                while i < raw.len() && raw[i] != b'\'' {
                    out.push(raw[i]);
                    i += 1;
                }
            }
            b'"' => {
                i += 1;
                while i < raw.len() && raw[i] != b'"' {
                    if raw[i] == b'\\'
                        && i + 1 < raw.len()
                        && matches!(raw[i + 1], b'$' | b'`' | b'"' | b'\\')
                    {
                        i += 1;
                    }
                    out.push(raw[i]);
                    i += 1;
                }
            }
            b'\\' if i + 1 < raw.len() => {
                i += 1;
                out.push(raw[i]);
            }
            c => out.push(c),
        }
        i += 1;
    }
    out
}

/// `|&`'s `2>&1`, on the command before it. A coprocess's goes on its body, where a
/// redirection written after `coproc cmd` lands, so that its printed form reads back the same.
fn redirect_stderr_too(cmd: &mut Command, dup: Redirect) {
    match cmd {
        Command::Simple(s) => s.redirects.push(dup),
        Command::Compound(CompoundCommand::Coproc { body, .. }, _) => {
            redirect_stderr_too(body, dup)
        }
        Command::Compound(_, r) => r.push(dup),
        Command::FunctionDef(f) => {
            if let Command::Compound(_, r) = f.body.as_mut() {
                r.push(dup);
            }
        }
    }
}

/// The text a backquoted command is read from: the backslash before `$`, `` ` ``, `\\` (and
/// `"` inside `"..."`) removed, every other one kept.
fn backquoted_content(raw: &[u8], in_dq: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let c = raw[i];
        if c == b'\\'
            && let Some(&n) = raw.get(i + 1)
            && (matches!(n, b'$' | b'`' | b'\\') || (in_dq && n == b'"'))
        {
            out.push(n);
            i += 2;
            continue;
        }
        out.push(c);
        i += 1;
    }
    out
}
