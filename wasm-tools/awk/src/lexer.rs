//! Splits program text into tokens. Whether `/` starts a regex depends on the token before it,
//! which is known here, so the whole program is tokenized up front and the parser may backtrack.

use crate::builtins::Builtin;

#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    Newline,
    Eof,
    LBrace,
    RBrace,
    LParen,
    RParen,
    LBracket,
    RBracket,
    Semi,
    Comma,
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
    Caret,
    Not,
    Gt,
    Lt,
    Ge,
    Le,
    Eq,
    Ne,
    Match,
    NoMatch,
    And,
    Or,
    Question,
    Colon,
    Assign,
    AddAssign,
    SubAssign,
    MulAssign,
    DivAssign,
    ModAssign,
    PowAssign,
    Incr,
    Decr,
    Dollar,
    Pipe,
    PipeAmp,
    Append,
    Number(f64),
    Str(String),
    Regex(String),
    Name(String),
    /// A name written immediately before `(`: only then is it a user function call.
    FuncName(String),
    Builtin(Builtin),
    Begin,
    End,
    BeginFile,
    EndFile,
    Function,
    If,
    Else,
    While,
    For,
    Do,
    Break,
    Continue,
    Next,
    NextFile,
    Exit,
    Return,
    Delete,
    Getline,
    Print,
    Printf,
    In,
    Switch,
    Case,
    Default,
}

/// Where a token starts: which source (for `-f` files), its line, and byte column.
#[derive(Debug, Clone, Copy, Default)]
pub struct Pos {
    pub src: u16,
    pub line: u32,
    pub col: u32,
}

#[derive(Debug, Clone)]
pub struct Token {
    pub tok: Tok,
    pub pos: Pos,
}

/// A lexical error: the message and where it happened.
pub struct LexError {
    pub msg: String,
    pub pos: Pos,
}

fn keyword(s: &str) -> Option<Tok> {
    Some(match s {
        "BEGIN" => Tok::Begin,
        "END" => Tok::End,
        "BEGINFILE" => Tok::BeginFile,
        "ENDFILE" => Tok::EndFile,
        "function" | "func" => Tok::Function,
        "if" => Tok::If,
        "else" => Tok::Else,
        "while" => Tok::While,
        "for" => Tok::For,
        "do" => Tok::Do,
        "break" => Tok::Break,
        "continue" => Tok::Continue,
        "next" => Tok::Next,
        "nextfile" => Tok::NextFile,
        "exit" => Tok::Exit,
        "return" => Tok::Return,
        "delete" => Tok::Delete,
        "getline" => Tok::Getline,
        "print" => Tok::Print,
        "printf" => Tok::Printf,
        "in" => Tok::In,
        "switch" => Tok::Switch,
        "case" => Tok::Case,
        "default" => Tok::Default,
        _ => return Builtin::from_name(s).map(Tok::Builtin),
    })
}

/// Whether a `/` after this token is division (the token ends an operand) rather than a regex.
fn ends_operand(t: &Tok) -> bool {
    matches!(
        t,
        Tok::Number(_)
            | Tok::Str(_)
            | Tok::Regex(_)
            | Tok::Name(_)
            | Tok::RParen
            | Tok::RBracket
            | Tok::Dollar
            | Tok::Incr
            | Tok::Decr
            | Tok::Builtin(_)
    )
}

/// Processes the escapes of a string literal (also used for `-v` values and command-line
/// assignments, which POSIX says are escape-processed the same way).
pub fn unescape(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(&e) = chars.get(i) else {
            out.push('\\');
            break;
        };
        i += 1;
        match e {
            'n' => out.push('\n'),
            't' => out.push('\t'),
            'r' => out.push('\r'),
            'a' => out.push('\x07'),
            'b' => out.push('\x08'),
            'f' => out.push('\x0c'),
            'v' => out.push('\x0b'),
            '\\' => out.push('\\'),
            '"' => out.push('"'),
            '/' => out.push('/'),
            '0'..='7' => {
                let mut n = e.to_digit(8).unwrap_or(0);
                let mut k = 0;
                while k < 2 {
                    match chars.get(i).and_then(|c| c.to_digit(8)) {
                        Some(d) => {
                            n = n * 8 + d;
                            i += 1;
                            k += 1;
                        }
                        None => break,
                    }
                }
                out.push(crate::value::byte_char((n & 0xff) as u8));
            }
            'x' => {
                let mut n = 0u32;
                let mut k = 0;
                while k < 2 {
                    match chars.get(i).and_then(|c| c.to_digit(16)) {
                        Some(d) => {
                            n = n * 16 + d;
                            i += 1;
                            k += 1;
                        }
                        None => break,
                    }
                }
                if k == 0 {
                    out.push('\\');
                    out.push('x');
                } else {
                    out.push(crate::value::byte_char(n as u8));
                }
            }
            other => out.push(other),
        }
    }
    out
}

pub fn tokenize(text: &str, src: u16) -> Result<Vec<Token>, LexError> {
    let b: Vec<char> = text.chars().collect();
    let mut toks: Vec<Token> = Vec::new();
    let mut i = 0usize;
    let mut line = 1u32;
    let mut line_start = 0usize;
    while i < b.len() {
        let c = b[i];
        let pos = Pos {
            src,
            line,
            col: (i - line_start) as u32,
        };
        let push = |toks: &mut Vec<Token>, tok: Tok| toks.push(Token { tok, pos });
        match c {
            ' ' | '\t' | '\r' => {
                i += 1;
            }
            '\\' if b.get(i + 1) == Some(&'\n') => {
                i += 2;
                line += 1;
                line_start = i;
            }
            '\\' if b.get(i + 1) == Some(&'\r') && b.get(i + 2) == Some(&'\n') => {
                i += 3;
                line += 1;
                line_start = i;
            }
            '\n' => {
                push(&mut toks, Tok::Newline);
                i += 1;
                line += 1;
                line_start = i;
            }
            '#' => {
                while i < b.len() && b[i] != '\n' {
                    i += 1;
                }
            }
            '"' => {
                i += 1;
                let mut raw = String::new();
                loop {
                    match b.get(i) {
                        None | Some('\n') => {
                            return Err(LexError {
                                msg: "unterminated string".into(),
                                pos,
                            });
                        }
                        Some('"') => {
                            i += 1;
                            break;
                        }
                        Some('\\') => {
                            match b.get(i + 1) {
                                Some('\n') => {
                                    i += 2;
                                    line += 1;
                                    line_start = i;
                                }
                                Some(&n) => {
                                    raw.push('\\');
                                    raw.push(n);
                                    i += 2;
                                }
                                None => {
                                    raw.push('\\');
                                    i += 1;
                                }
                            }
                            continue;
                        }
                        Some(&ch) => {
                            raw.push(ch);
                            i += 1;
                        }
                    }
                }
                push(&mut toks, Tok::Str(string_literal(&raw)));
            }
            '/' if !toks.last().is_some_and(|t| ends_operand(&t.tok)) => {
                i += 1;
                let mut raw = String::new();
                let mut in_bracket = false;
                loop {
                    match b.get(i) {
                        None | Some('\n') => {
                            return Err(LexError {
                                msg: "unterminated regexp".into(),
                                pos,
                            });
                        }
                        Some('/') if !in_bracket => {
                            i += 1;
                            break;
                        }
                        Some('\\') => {
                            if b.get(i + 1) == Some(&'\n') {
                                i += 2;
                                line += 1;
                                line_start = i;
                                continue;
                            }
                            raw.push('\\');
                            if let Some(&n) = b.get(i + 1) {
                                raw.push(n);
                            }
                            i += 2;
                        }
                        Some('[') if !in_bracket => {
                            in_bracket = true;
                            raw.push('[');
                            i += 1;
                            if b.get(i) == Some(&'^') {
                                raw.push('^');
                                i += 1;
                            }
                            if b.get(i) == Some(&']') {
                                raw.push(']');
                                i += 1;
                            }
                        }
                        Some('[') if in_bracket && b.get(i + 1) == Some(&':') => {
                            // A class name such as [:alpha:] inside a bracket expression.
                            raw.push('[');
                            raw.push(':');
                            i += 2;
                            while i < b.len() && b[i] != '\n' {
                                raw.push(b[i]);
                                if b[i] == ']' && b[i - 1] == ':' {
                                    i += 1;
                                    break;
                                }
                                i += 1;
                            }
                        }
                        Some(']') if in_bracket => {
                            in_bracket = false;
                            raw.push(']');
                            i += 1;
                        }
                        Some(&ch) => {
                            raw.push(ch);
                            i += 1;
                        }
                    }
                }
                push(&mut toks, Tok::Regex(raw));
            }
            '0'..='9' | '.' if c != '.' || b.get(i + 1).is_some_and(|d| d.is_ascii_digit()) => {
                let start = i;
                if c == '0' && matches!(b.get(i + 1), Some('x') | Some('X')) {
                    let mut j = i + 2;
                    while j < b.len() && b[j].is_ascii_hexdigit() {
                        j += 1;
                    }
                    if j > i + 2 {
                        let s: String = b[i + 2..j].iter().collect();
                        let v = u64::from_str_radix(&s, 16).map(|v| v as f64).unwrap_or(0.0);
                        push(&mut toks, Tok::Number(v));
                        i = j;
                        continue;
                    }
                }
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
                let mut is_int = true;
                if i < b.len() && b[i] == '.' {
                    is_int = false;
                    i += 1;
                    while i < b.len() && b[i].is_ascii_digit() {
                        i += 1;
                    }
                }
                if i < b.len() && (b[i] == 'e' || b[i] == 'E') {
                    let mut j = i + 1;
                    if j < b.len() && (b[j] == '+' || b[j] == '-') {
                        j += 1;
                    }
                    if j < b.len() && b[j].is_ascii_digit() {
                        is_int = false;
                        while j < b.len() && b[j].is_ascii_digit() {
                            j += 1;
                        }
                        i = j;
                    }
                }
                let s: String = b[start..i].iter().collect();
                let v = if is_int
                    && s.len() > 1
                    && s.starts_with('0')
                    && s.chars().all(|d| ('0'..='7').contains(&d))
                {
                    u64::from_str_radix(&s, 8).map(|v| v as f64).unwrap_or(0.0)
                } else {
                    s.parse::<f64>().unwrap_or(0.0)
                };
                push(&mut toks, Tok::Number(v));
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == '_') {
                    i += 1;
                }
                let s: String = b[start..i].iter().collect();
                let tok = match keyword(&s) {
                    Some(t) => t,
                    None if b.get(i) == Some(&'(') => Tok::FuncName(s),
                    None => Tok::Name(s),
                };
                push(&mut toks, tok);
            }
            _ => {
                let n1 = b.get(i + 1).copied();
                let n2 = b.get(i + 2).copied();
                let (tok, len) = match (c, n1) {
                    ('{', _) => (Tok::LBrace, 1),
                    ('}', _) => (Tok::RBrace, 1),
                    ('(', _) => (Tok::LParen, 1),
                    (')', _) => (Tok::RParen, 1),
                    ('[', _) => (Tok::LBracket, 1),
                    (']', _) => (Tok::RBracket, 1),
                    (';', _) => (Tok::Semi, 1),
                    (',', _) => (Tok::Comma, 1),
                    ('+', Some('+')) => (Tok::Incr, 2),
                    ('+', Some('=')) => (Tok::AddAssign, 2),
                    ('+', _) => (Tok::Plus, 1),
                    ('-', Some('-')) => (Tok::Decr, 2),
                    ('-', Some('=')) => (Tok::SubAssign, 2),
                    ('-', _) => (Tok::Minus, 1),
                    ('*', Some('*')) if n2 == Some('=') => (Tok::PowAssign, 3),
                    ('*', Some('*')) => (Tok::Caret, 2),
                    ('*', Some('=')) => (Tok::MulAssign, 2),
                    ('*', _) => (Tok::Star, 1),
                    ('/', Some('=')) => (Tok::DivAssign, 2),
                    ('/', _) => (Tok::Slash, 1),
                    ('%', Some('=')) => (Tok::ModAssign, 2),
                    ('%', _) => (Tok::Percent, 1),
                    ('^', Some('=')) => (Tok::PowAssign, 2),
                    ('^', _) => (Tok::Caret, 1),
                    ('!', Some('=')) => (Tok::Ne, 2),
                    ('!', Some('~')) => (Tok::NoMatch, 2),
                    ('!', _) => (Tok::Not, 1),
                    ('>', Some('=')) => (Tok::Ge, 2),
                    ('>', Some('>')) => (Tok::Append, 2),
                    ('>', _) => (Tok::Gt, 1),
                    ('<', Some('=')) => (Tok::Le, 2),
                    ('<', _) => (Tok::Lt, 1),
                    ('=', Some('=')) => (Tok::Eq, 2),
                    ('=', _) => (Tok::Assign, 1),
                    ('~', _) => (Tok::Match, 1),
                    ('&', Some('&')) => (Tok::And, 2),
                    ('|', Some('|')) => (Tok::Or, 2),
                    ('|', Some('&')) => (Tok::PipeAmp, 2),
                    ('|', _) => (Tok::Pipe, 1),
                    ('?', _) => (Tok::Question, 1),
                    (':', _) => (Tok::Colon, 1),
                    ('$', _) => (Tok::Dollar, 1),
                    _ => {
                        return Err(LexError {
                            msg: format!("invalid char '{c}' in expression"),
                            pos,
                        });
                    }
                };
                push(&mut toks, tok);
                i += len;
            }
        }
    }
    toks.push(Token {
        tok: Tok::Newline,
        pos: Pos {
            src,
            line,
            col: (i - line_start) as u32,
        },
    });
    Ok(toks)
}

/// A string literal's escapes: unknown ones lose the backslash, as in gawk.
fn string_literal(raw: &str) -> String {
    unescape(raw)
}
