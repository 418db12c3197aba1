//! Arithmetic expressions: the second stage, from tokens to [`ArithExpr`].
//!
//! The first stage (finding where `$(( ... ))` ends and turning `$x`, `$(...)` into words)
//! needs the word parser, so it lives in [`crate::syntax::parser`]; this stage is self-contained.

use crate::syntax::ast::{ArithBinOp, ArithExpr, ArithUnaryOp, LValue, Word};

#[derive(Debug, Clone)]
pub(crate) enum Tok {
    Num(String),
    Ident(String),
    Op(&'static str),
    Word(Word),
    /// A character that is no part of any operator: always an error, reported at evaluation.
    Bad,
    /// `'text'`: an operand only inside an array subscript, where an associative array's key
    /// may be quoted (`A['k']`); anywhere else an error, as in bash.
    SingleQuoted(String),
}

#[derive(Debug, Clone)]
pub(crate) struct Token {
    pub tok: Tok,
    /// Byte offset in the expression's source text, for bash's `(error token is "...")`.
    pub start: usize,
}

/// The nesting limit was hit: unlike other arithmetic errors this is a parse error.
pub(crate) struct TooDeep;

pub(crate) const OPERATORS: &[&str] = &[
    "<<=", ">>=", "&&", "||", "++", "--", "**", "<<", ">>", "<=", ">=", "==", "!=", "+=", "-=",
    "*=", "/=", "%=", "&=", "^=", "|=", "+", "-", "*", "/", "%", "<", ">", "=", "!", "~", "&", "^",
    "|", "?", ":", ",", "(", ")", "[", "]",
];

/// Parses a token list. The outer `Err` is the depth limit; the inner one is the message bash
/// prints when the expression is evaluated (a `String` on purpose: the text is the data, kept
/// in [`crate::syntax::ast::Arith`] until then).
pub(crate) fn parse_tokens(
    tokens: Vec<Token>,
    source: &str,
    depth_budget: usize,
) -> Result<Result<ArithExpr, String>, TooDeep> {
    if tokens.is_empty() {
        return Ok(Ok(ArithExpr::Number(0)));
    }
    let mut p = ArithParser {
        tokens,
        pos: 0,
        source,
        depth: 0,
        budget: depth_budget,
        in_subscript: 0,
    };
    let result = p.comma().and_then(|e| {
        if p.pos < p.tokens.len() {
            Err(p.error("syntax error in expression"))
        } else {
            Ok(e)
        }
    });
    match result {
        Ok(e) => Ok(Ok(e)),
        Err(Fail::Syntax(m)) => Ok(Err(m)),
        Err(Fail::TooDeep) => Err(TooDeep),
    }
}

enum Fail {
    Syntax(String),
    TooDeep,
}

type ArithResult<T> = Result<T, Fail>;

struct ArithParser<'a> {
    tokens: Vec<Token>,
    pos: usize,
    source: &'a str,
    depth: usize,
    budget: usize,
    /// Nesting of `name[...]` subscripts around the current token.
    in_subscript: usize,
}

fn binop(op: &str) -> Option<(ArithBinOp, u8)> {
    use ArithBinOp::*;
    Some(match op {
        "||" => (LogOr, 1),
        "&&" => (LogAnd, 2),
        "|" => (BitOr, 3),
        "^" => (BitXor, 4),
        "&" => (BitAnd, 5),
        "==" => (Eq, 6),
        "!=" => (Ne, 6),
        "<" => (Lt, 7),
        "<=" => (Le, 7),
        ">" => (Gt, 7),
        ">=" => (Ge, 7),
        "<<" => (Shl, 8),
        ">>" => (Shr, 8),
        "+" => (Add, 9),
        "-" => (Sub, 9),
        "*" => (Mul, 10),
        "/" => (Div, 10),
        "%" => (Rem, 10),
        "**" => (Pow, 11),
        _ => return None,
    })
}

fn assign_op(op: &str) -> Option<Option<ArithBinOp>> {
    use ArithBinOp::*;
    Some(match op {
        "=" => None,
        "+=" => Some(Add),
        "-=" => Some(Sub),
        "*=" => Some(Mul),
        "/=" => Some(Div),
        "%=" => Some(Rem),
        "<<=" => Some(Shl),
        ">>=" => Some(Shr),
        "&=" => Some(BitAnd),
        "^=" => Some(BitXor),
        "|=" => Some(BitOr),
        _ => return None,
    })
}

fn as_lvalue(e: &ArithExpr) -> Option<LValue> {
    match e {
        ArithExpr::Var(n) => Some(LValue::Var(n.clone())),
        ArithExpr::Elem(n, i) => Some(LValue::Elem(n.clone(), i.clone())),
        _ => None,
    }
}

impl ArithParser<'_> {
    fn peek_op(&self) -> Option<&'static str> {
        match self.tokens.get(self.pos) {
            Some(Token {
                tok: Tok::Op(o), ..
            }) => Some(o),
            _ => None,
        }
    }

    fn eat(&mut self, op: &str) -> bool {
        if self.peek_op() == Some(op) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// Bash's message: the whole expression, then what went wrong, then the rest of the
    /// expression from the offending token on.
    fn error(&self, what: &str) -> Fail {
        // bash skips the expression's leading blanks and keeps its trailing ones, here and in
        // the token.
        let src = self.source.trim_start();
        // At the end bash points at the last token (`1+` -> "+").
        let at = self.pos.min(self.tokens.len().saturating_sub(1));
        let rest = match self.tokens.get(at) {
            Some(t) => self.source.get(t.start..).unwrap_or("").trim_start(),
            None => "",
        };
        Fail::Syntax(format!("{src}: {what} (error token is \"{rest}\")"))
    }

    /// Every recursion that input length could drive passes through here.
    fn deeper<T>(&mut self, f: impl FnOnce(&mut Self) -> ArithResult<T>) -> ArithResult<T> {
        self.depth += 1;
        if self.depth > self.budget {
            return Err(Fail::TooDeep);
        }
        let r = f(self);
        self.depth -= 1;
        r
    }

    fn comma(&mut self) -> ArithResult<ArithExpr> {
        let mut lhs = self.assign()?;
        while self.eat(",") {
            let rhs = self.assign()?;
            lhs = ArithExpr::Binary(ArithBinOp::Comma, Box::new(lhs), Box::new(rhs));
        }
        Ok(lhs)
    }

    fn assign(&mut self) -> ArithResult<ArithExpr> {
        let lhs = self.ternary()?;
        if let Some(op) = self.peek_op().and_then(assign_op) {
            let Some(target) = as_lvalue(&lhs) else {
                return Err(self.error("attempted assignment to non-variable"));
            };
            self.pos += 1;
            let value = self.deeper(|p| p.assign())?;
            return Ok(ArithExpr::Assign {
                target,
                op,
                value: Box::new(value),
            });
        }
        Ok(lhs)
    }

    fn ternary(&mut self) -> ArithResult<ArithExpr> {
        let cond = self.binary(1)?;
        if !self.eat("?") {
            return Ok(cond);
        }
        let then = self.deeper(|p| p.comma())?;
        if !self.eat(":") {
            return Err(self.error("`:' expected for conditional expression"));
        }
        let other = self.deeper(|p| p.assign())?;
        Ok(ArithExpr::Conditional(
            Box::new(cond),
            Box::new(then),
            Box::new(other),
        ))
    }

    /// Precedence climbing: left-associative chains loop, so only `**` (right-associative)
    /// and the fixed number of precedence levels recurse.
    fn binary(&mut self, min_prec: u8) -> ArithResult<ArithExpr> {
        let mut lhs = self.unary()?;
        while let Some(op) = self.peek_op() {
            // `1--1` is `1 - -1`: a `++`/`--` after something that is not a variable is a
            // binary operator followed by a unary one, as bash's own lexer decides.
            if (op == "++" || op == "--") && as_lvalue(&lhs).is_none() && min_prec <= 9 {
                self.pos += 1;
                let rhs = self.deeper(|p| p.binary(10))?;
                let (bop, uop) = if op == "++" {
                    (ArithBinOp::Add, ArithUnaryOp::Plus)
                } else {
                    (ArithBinOp::Sub, ArithUnaryOp::Neg)
                };
                lhs = ArithExpr::Binary(
                    bop,
                    Box::new(lhs),
                    Box::new(ArithExpr::Unary(uop, Box::new(rhs))),
                );
                continue;
            }
            let Some((bop, prec)) = binop(op) else { break };
            if prec < min_prec {
                break;
            }
            self.pos += 1;
            let next = if bop == ArithBinOp::Pow {
                prec
            } else {
                prec + 1
            };
            let rhs = self.deeper(|p| p.binary(next))?;
            lhs = ArithExpr::Binary(bop, Box::new(lhs), Box::new(rhs));
        }
        Ok(lhs)
    }

    fn unary(&mut self) -> ArithResult<ArithExpr> {
        let op = self.peek_op();
        let uop = match op {
            Some("-") => Some(ArithUnaryOp::Neg),
            Some("+") => Some(ArithUnaryOp::Plus),
            Some("!") => Some(ArithUnaryOp::Not),
            Some("~") => Some(ArithUnaryOp::BitNot),
            _ => None,
        };
        if let Some(uop) = uop {
            self.pos += 1;
            let e = self.deeper(|p| p.unary())?;
            return Ok(ArithExpr::Unary(uop, Box::new(e)));
        }
        if op == Some("++") || op == Some("--") {
            self.pos += 1;
            let e = self.deeper(|p| p.unary())?;
            let increment = op == Some("++");
            return Ok(match as_lvalue(&e) {
                Some(target) => ArithExpr::IncDec {
                    target,
                    increment,
                    prefix: true,
                },
                // `++5` is `+(+5)`.
                None => {
                    let u = if increment {
                        ArithUnaryOp::Plus
                    } else {
                        ArithUnaryOp::Neg
                    };
                    ArithExpr::Unary(u, Box::new(ArithExpr::Unary(u, Box::new(e))))
                }
            });
        }
        let e = self.primary()?;
        if let Some(target) = as_lvalue(&e) {
            let op = self.peek_op();
            if op == Some("++") || op == Some("--") {
                self.pos += 1;
                return Ok(ArithExpr::IncDec {
                    target,
                    increment: op == Some("++"),
                    prefix: false,
                });
            }
        }
        Ok(e)
    }

    fn primary(&mut self) -> ArithResult<ArithExpr> {
        let Some(tok) = self.tokens.get(self.pos).cloned() else {
            return Err(self.error("syntax error: operand expected"));
        };
        match tok.tok {
            Tok::Num(raw) => {
                self.pos += 1;
                match parse_number(&raw) {
                    Ok(n) => Ok(ArithExpr::Number(n)),
                    // bash reports a bad constant while it reads it: the text up to the
                    // constant's end, and the constant.
                    Err(message) => {
                        let end = (tok.start + raw.len()).min(self.source.len());
                        let src = self.source.get(..end).unwrap_or("").trim_start();
                        Err(Fail::Syntax(format!(
                            "{src}: {message} (error token is \"{raw}\")"
                        )))
                    }
                }
            }
            Tok::Ident(name) => {
                self.pos += 1;
                if self.eat("[") {
                    self.in_subscript += 1;
                    let idx = self.deeper(|p| p.comma());
                    self.in_subscript -= 1;
                    let idx = idx?;
                    if !self.eat("]") {
                        return Err(self.error("syntax error: `]' expected"));
                    }
                    return Ok(ArithExpr::Elem(name, Box::new(idx)));
                }
                Ok(ArithExpr::Var(name))
            }
            Tok::Word(w) => {
                self.pos += 1;
                Ok(ArithExpr::Expansion(w))
            }
            Tok::Op("(") => {
                self.pos += 1;
                let e = self.deeper(|p| p.comma())?;
                if !self.eat(")") {
                    return Err(self.error("missing `)'"));
                }
                Ok(e)
            }
            Tok::SingleQuoted(text) if self.in_subscript > 0 => {
                self.pos += 1;
                Ok(ArithExpr::Expansion(Word {
                    parts: vec![crate::syntax::ast::WordPart::Quoted(text)],
                }))
            }
            Tok::Op(_) | Tok::Bad | Tok::SingleQuoted(_) => {
                Err(self.error("syntax error: operand expected"))
            }
        }
    }
}

/// Bash's integer constants: decimal, `0x` hex, leading-`0` octal and `base#digits` (bases 2
/// to 64; digits `0-9a-zA-Z@_`, letters case-insensitive up to base 36). Overflow wraps, as in
/// bash. The error is bash's message: a digit out of range, a base out of range, a second
/// base (`2#1#1`, `02#1`: a leading `0` is a base already), a base with no digit after it.
pub fn parse_number(raw: &str) -> Result<i64, &'static str> {
    let s = raw.as_bytes();
    let mut i = 0;
    let mut base: i64 = 10;
    let mut found_base = false;
    if s.first() == Some(&b'0') {
        i = 1;
        if s.len() == 1 {
            return Ok(0);
        }
        if matches!(s[1], b'x' | b'X') {
            base = 16;
            i = 2;
        } else {
            base = 8;
        }
        found_base = true;
    }
    let mut n: i64 = 0;
    while let Some(&c) = s.get(i) {
        i += 1;
        if c == b'#' {
            if found_base {
                return Err("invalid number");
            }
            if !(2..=64).contains(&n) {
                return Err("invalid arithmetic base");
            }
            base = n;
            n = 0;
            found_base = true;
            if !s
                .get(i)
                .is_some_and(|&d| d.is_ascii_alphanumeric() || d == b'_' || d == b'@')
            {
                return Err("invalid integer constant");
            }
            continue;
        }
        let d = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'z' => c - b'a' + 10,
            b'A'..=b'Z' if base <= 36 => c - b'A' + 10,
            b'A'..=b'Z' => c - b'A' + 36,
            b'@' => 62,
            b'_' => 63,
            _ => break,
        };
        if i64::from(d) >= base {
            return Err("value too great for base");
        }
        n = n.wrapping_mul(base).wrapping_add(i64::from(d));
    }
    Ok(n)
}
