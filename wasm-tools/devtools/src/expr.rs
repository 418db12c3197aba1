//! `expr` as GNU coreutils evaluates it: integers of any size, string comparison when either
//! side is not a number, anchored BRE matching for `:`, exit 0/1/2/3.

use num_bigint::BigInt;
use num_traits::{Signed, Zero};

const HELP: &str = "\
Usage: expr EXPRESSION
  or:  expr OPTION

Evaluate EXPRESSION and print its value. Operators, lowest precedence first:

  A | B        A if it is neither empty nor 0, else B
  A & B        A if neither is empty nor 0, else 0
  A < B, A <= B, A = B, A != B, A >= B, A > B
               1 or 0; numeric when both are integers, else string order
  A + B, A - B
  A * B, A / B, A % B       integer arithmetic of any size
  STRING : REGEXP           anchored match of a basic regular expression: the
                            \\( \\) group if there is one, else the matched length
  match STRING REGEXP, substr STRING POS LENGTH, index STRING CHARS,
  length STRING, + TOKEN (TOKEN as a plain string), ( EXPRESSION )

Exit status: 0 if the value is neither empty nor 0, 1 if it is, 2 for an invalid
expression, 3 for another error.
";

#[derive(Clone, Debug)]
enum Val {
    Int(BigInt),
    Str(String),
}

impl Val {
    fn text(&self) -> String {
        match self {
            Val::Int(i) => i.to_string(),
            Val::Str(s) => s.clone(),
        }
    }

    fn as_int(&self) -> Option<BigInt> {
        match self {
            Val::Int(i) => Some(i.clone()),
            Val::Str(s) => parse_int(s),
        }
    }

    fn is_null(&self) -> bool {
        match self {
            Val::Int(i) => i.is_zero(),
            Val::Str(s) => s.is_empty() || parse_int(s).is_some_and(|i| i.is_zero()),
        }
    }
}

/// GNU accepts an optional `-` and decimal digits (no `+`, no spaces).
fn parse_int(s: &str) -> Option<BigInt> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

enum Fail {
    Syntax(String),
    Error(String),
}

struct P<'a> {
    a: &'a [String],
    i: usize,
}

fn quote(s: &str) -> String {
    format!("'{s}'")
}

impl P<'_> {
    fn peek(&self) -> Option<&str> {
        self.a.get(self.i).map(String::as_str)
    }

    fn eat(&mut self, op: &str) -> bool {
        if self.peek() == Some(op) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn missing_after(&self) -> Fail {
        Fail::Syntax(format!(
            "syntax error: missing argument after {}",
            quote(&self.a[self.i - 1])
        ))
    }

    fn or(&mut self) -> Result<Val, Fail> {
        let mut l = self.and()?;
        while self.eat("|") {
            let r = self.and()?;
            l = if !l.is_null() {
                l
            } else if !r.is_null() {
                r
            } else {
                Val::Int(BigInt::zero())
            };
        }
        Ok(l)
    }

    fn and(&mut self) -> Result<Val, Fail> {
        let mut l = self.cmp()?;
        while self.eat("&") {
            let r = self.cmp()?;
            if l.is_null() || r.is_null() {
                l = Val::Int(BigInt::zero());
            }
        }
        Ok(l)
    }

    fn cmp(&mut self) -> Result<Val, Fail> {
        let mut l = self.add()?;
        loop {
            let op = match self.peek() {
                Some(o @ ("<" | "<=" | "=" | "==" | "!=" | ">=" | ">")) => o.to_string(),
                _ => return Ok(l),
            };
            self.i += 1;
            let r = self.add()?;
            let ord = match (l.as_int(), r.as_int()) {
                (Some(a), Some(b)) => a.cmp(&b),
                _ => l.text().as_bytes().cmp(r.text().as_bytes()),
            };
            use std::cmp::Ordering::*;
            let t = match op.as_str() {
                "<" => ord == Less,
                "<=" => ord != Greater,
                "=" | "==" => ord == Equal,
                "!=" => ord != Equal,
                ">=" => ord != Less,
                _ => ord == Greater,
            };
            l = Val::Int(BigInt::from(t as u8));
        }
    }

    fn add(&mut self) -> Result<Val, Fail> {
        let mut l = self.mul()?;
        loop {
            let op = match self.peek() {
                Some(o @ ("+" | "-")) => o.to_string(),
                _ => return Ok(l),
            };
            self.i += 1;
            let r = self.mul()?;
            let (a, b) = ints(&l, &r)?;
            l = Val::Int(if op == "+" { a + b } else { a - b });
        }
    }

    fn mul(&mut self) -> Result<Val, Fail> {
        let mut l = self.matches()?;
        loop {
            let op = match self.peek() {
                Some(o @ ("*" | "/" | "%")) => o.to_string(),
                _ => return Ok(l),
            };
            self.i += 1;
            let r = self.matches()?;
            let (a, b) = ints(&l, &r)?;
            if op != "*" && b.is_zero() {
                return Err(Fail::Syntax("division by zero".into()));
            }
            // Truncating division, as C's.
            l = Val::Int(match op.as_str() {
                "*" => a * b,
                "/" => &a / &b,
                _ => &a % &b,
            });
        }
    }

    fn matches(&mut self) -> Result<Val, Fail> {
        let mut l = self.primary()?;
        while self.eat(":") {
            let r = self.primary()?;
            l = bre_match(&l.text(), &r.text())?;
        }
        Ok(l)
    }

    fn operand(&mut self) -> Result<String, Fail> {
        match self.a.get(self.i) {
            Some(s) => {
                self.i += 1;
                Ok(s.clone())
            }
            None => Err(self.missing_after()),
        }
    }

    fn primary(&mut self) -> Result<Val, Fail> {
        let Some(tok) = self.peek().map(str::to_string) else {
            return Err(if self.i == 0 {
                Fail::Syntax("missing operand".into())
            } else {
                self.missing_after()
            });
        };
        self.i += 1;
        match tok.as_str() {
            "(" => {
                let v = self.or()?;
                if !self.eat(")") {
                    return Err(match self.peek() {
                        Some(t) => Fail::Syntax(format!(
                            "syntax error: expecting ')' instead of {}",
                            quote(t)
                        )),
                        None => Fail::Syntax(format!(
                            "syntax error: expecting ')' after {}",
                            quote(&self.a[self.i - 1])
                        )),
                    });
                }
                Ok(v)
            }
            "+" => Ok(Val::Str(self.operand()?)),
            "length" => {
                let s = self.operand()?;
                Ok(Val::Int(BigInt::from(s.chars().count())))
            }
            "match" => {
                let s = self.operand()?;
                let re = self.operand()?;
                bre_match(&s, &re)
            }
            "index" => {
                let s = self.operand()?;
                let set = self.operand()?;
                let pos = s.chars().position(|c| set.contains(c)).map_or(0, |p| p + 1);
                Ok(Val::Int(BigInt::from(pos)))
            }
            "substr" => {
                let s = self.operand()?;
                let pos = self.operand()?;
                let len = self.operand()?;
                let chars: Vec<char> = s.chars().collect();
                let (Some(pos), Some(len)) = (parse_int(&pos), parse_int(&len)) else {
                    return Ok(Val::Str(String::new()));
                };
                let n = BigInt::from(chars.len());
                if pos < BigInt::from(1) || pos > n || !len.is_positive() {
                    return Ok(Val::Str(String::new()));
                }
                let start: usize = (pos - 1u8).try_into().unwrap_or(usize::MAX);
                let len: usize = len.try_into().unwrap_or(usize::MAX);
                let end = start.saturating_add(len).min(chars.len());
                Ok(Val::Str(chars[start..end].iter().collect()))
            }
            ")" => Err(Fail::Syntax("syntax error: unexpected ')'".into())),
            _ => Ok(Val::Str(tok)),
        }
    }
}

fn ints(l: &Val, r: &Val) -> Result<(BigInt, BigInt), Fail> {
    match (l.as_int(), r.as_int()) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => Err(Fail::Syntax("non-integer argument".into())),
    }
}

fn bre_match(s: &str, re: &str) -> Result<Val, Fail> {
    let t = crate::posix_re::translate(re, crate::posix_re::Flavor::Basic)
        .map_err(|e| Fail::Syntax(e.to_string()))?;
    let rx = regex::Regex::new(&format!("^(?:{})", t.pattern))
        .map_err(|e| Fail::Error(format!("invalid regular expression: {e}")))?;
    let groups = rx.captures_len() > 1;
    match rx.captures(s) {
        Some(c) if groups => Ok(Val::Str(
            c.get(1).map(|m| m.as_str().to_string()).unwrap_or_default(),
        )),
        Some(c) => Ok(Val::Int(BigInt::from(c[0].chars().count()))),
        None if groups => Ok(Val::Str(String::new())),
        None => Ok(Val::Int(BigInt::zero())),
    }
}

pub fn main(args: &[String]) -> i32 {
    let args: &[String] = match args.first().map(String::as_str) {
        Some("--help") => {
            crate::out(HELP.as_bytes());
            return 0;
        }
        Some("--version") => {
            crate::out(b"expr (wasmsand)\n");
            return 0;
        }
        Some("--") => &args[1..],
        _ => args,
    };
    if args.is_empty() {
        eprintln!("expr: missing operand\nTry 'expr --help' for more information.");
        return 2;
    }
    let mut p = P { a: args, i: 0 };
    let r = p.or().and_then(|v| match p.peek() {
        None => Ok(v),
        Some(t) => Err(Fail::Syntax(format!(
            "syntax error: unexpected argument {}",
            quote(t)
        ))),
    });
    match r {
        Ok(v) => {
            crate::out(format!("{}\n", v.text()).as_bytes());
            if v.is_null() { 1 } else { 0 }
        }
        Err(Fail::Syntax(m)) => {
            eprintln!("expr: {m}");
            2
        }
        Err(Fail::Error(m)) => {
            eprintln!("expr: {m}");
            3
        }
    }
}
