//! `bc`, the arbitrary-precision calculator language of POSIX with GNU bc's extensions
//! (`print`, `else`, `!`, `&&`, `||`, `halt`, `define void`, arrays by reference `*a[]`,
//! multi-letter names, `#` comments, `last`; `read` is not supported). Each top-level statement runs as soon as it is read, as in bc; an
//! error reports the line and the input goes on with the next statement.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;

use crate::bcnum::{MathErr, Num};

const HELP: &str = "\
usage: bc [options] [file ...]
  -h  --help         print this usage and exit
  -l  --mathlib      use the predefined math routines (s c a l e j) and scale=20
  -q  --quiet        do not print the welcome (none is printed anyway)
  -s  --standard     accepted (non-standard bc constructs are not errors here)
  -w  --warn         accepted
  -v  --version      print version information and exit
The files are run in order, then the standard input.
";

// ---- lexer ----

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Num(String),
    Name(String),
    Str(String),
    Op(&'static str),
    Nl,
    Eof,
}

const OPS: &[&str] = &[
    "++", "--", "+=", "-=", "*=", "/=", "%=", "^=", "==", "!=", "<=", ">=", "&&", "||", "+", "-",
    "*", "/", "%", "^", "=", "<", ">", "!", "(", ")", "{", "}", "[", "]", ",", ";",
];

struct Lexer {
    src: Vec<char>,
    i: usize,
    line: usize,
    /// Messages about skipped characters, printed by the reader in order with its own.
    notes: Vec<String>,
}

impl Lexer {
    /// The next token. A character bc does not know is reported (in `notes`) and skipped, as
    /// GNU bc's lexer does: the parser goes on as if it were not there.
    fn next(&mut self) -> Result<(Tok, usize), String> {
        loop {
            if let Some(t) = self.token()? {
                return Ok(t);
            }
        }
    }

    fn token(&mut self) -> Result<Option<(Tok, usize)>, String> {
        loop {
            let Some(&c) = self.src.get(self.i) else {
                return Ok(Some((Tok::Eof, self.line)));
            };
            match c {
                ' ' | '\t' | '\r' => self.i += 1,
                '\\' if self.src.get(self.i + 1) == Some(&'\n') => {
                    self.i += 2;
                    self.line += 1;
                }
                '#' => {
                    while self.src.get(self.i).is_some_and(|&c| c != '\n') {
                        self.i += 1;
                    }
                }
                '/' if self.src.get(self.i + 1) == Some(&'*') => {
                    let start = self.line;
                    self.i += 2;
                    loop {
                        match self.src.get(self.i) {
                            None => return Err(format!("{start}: comment end not found")),
                            Some('*') if self.src.get(self.i + 1) == Some(&'/') => {
                                self.i += 2;
                                break;
                            }
                            Some('\n') => {
                                self.line += 1;
                                self.i += 1;
                            }
                            _ => self.i += 1,
                        }
                    }
                }
                _ => break,
            }
        }
        let c = self.src[self.i];
        let line = self.line;
        if c == '\n' {
            self.i += 1;
            self.line += 1;
            return Ok(Some((Tok::Nl, line)));
        }
        if c.is_ascii_digit() || c.is_ascii_uppercase() || c == '.' {
            let start = self.i;
            let mut dot = false;
            while let Some(&d) = self.src.get(self.i) {
                if d.is_ascii_digit() || d.is_ascii_uppercase() {
                    self.i += 1;
                } else if d == '.' && !dot {
                    dot = true;
                    self.i += 1;
                } else if d == '\\' && self.src.get(self.i + 1) == Some(&'\n') {
                    self.i += 2;
                    self.line += 1;
                } else {
                    break;
                }
            }
            let text: String = self.src[start..self.i]
                .iter()
                .filter(|&&c| c != '\\' && c != '\n')
                .collect();
            return Ok(Some((Tok::Num(text), line)));
        }
        if c.is_ascii_lowercase() {
            let start = self.i;
            while self
                .src
                .get(self.i)
                .is_some_and(|&d| d.is_ascii_lowercase() || d.is_ascii_digit() || d == '_')
            {
                self.i += 1;
            }
            return Ok(Some((
                Tok::Name(self.src[start..self.i].iter().collect()),
                line,
            )));
        }
        if c == '"' {
            let start = self.i + 1;
            let mut j = start;
            while self.src.get(j).is_some_and(|&d| d != '"') {
                if self.src[j] == '\n' {
                    self.line += 1;
                }
                j += 1;
            }
            if j >= self.src.len() {
                // Consumed, so that reading goes on past it (the error ends the input).
                self.i = self.src.len();
                return Err(format!("{line}: string end not found"));
            }
            self.i = j + 1;
            return Ok(Some((Tok::Str(self.src[start..j].iter().collect()), line)));
        }
        for op in OPS {
            let n = op.len();
            if self.i + n <= self.src.len()
                && self.src[self.i..self.i + n].iter().copied().eq(op.chars())
            {
                self.i += n;
                return Ok(Some((Tok::Op(op), line)));
            }
        }
        self.i += 1;
        self.notes.push(format!("{line}: illegal character: {c}"));
        Ok(None)
    }
}

// ---- syntax ----

#[derive(Clone, Debug)]
enum LVal {
    Var(String),
    Elem(String, Box<Expr>),
    Scale,
    Ibase,
    Obase,
    Last,
}

#[derive(Clone, Debug)]
enum Arg {
    Val(Expr),
    Array(String),
}

#[derive(Clone, Debug)]
enum Expr {
    Num(String),
    Load(LVal),
    Group(Box<Expr>),
    Neg(Box<Expr>),
    Not(Box<Expr>),
    Bin(&'static str, Box<Expr>, Box<Expr>),
    Assign(&'static str, LVal, Box<Expr>),
    IncDec { lv: LVal, inc: bool, pre: bool },
    Call(String, Vec<Arg>),
    Length(Box<Expr>),
    Sqrt(Box<Expr>),
    ScaleOf(Box<Expr>),
}

#[derive(Clone, Debug)]
enum PItem {
    Str(String),
    Val(Expr),
}

#[derive(Clone, Debug)]
enum Stmt {
    Expr(Expr),
    Str(String),
    Print(Vec<PItem>),
    If(Expr, Box<Stmt>, Option<Box<Stmt>>),
    While(Expr, Box<Stmt>),
    For(Option<Expr>, Option<Expr>, Option<Expr>, Box<Stmt>),
    Block(Vec<Stmt>),
    Break,
    Continue,
    Return(Option<Expr>),
    Halt,
    Empty,
}

#[derive(Clone, Debug)]
struct Func {
    /// `define void f()`: calls give no value, and a call as a statement prints nothing.
    void: bool,
    params: Vec<(String, bool)>,
    /// Which parameters are arrays passed by reference (`*a[]`, GNU's extension): what the
    /// function leaves in them is the caller's array afterwards.
    by_ref: Vec<bool>,
    autos: Vec<(String, bool)>,
    body: Vec<Stmt>,
}

struct Parser {
    lx: Lexer,
    tok: Tok,
    /// Where the lexer stood before it read `tok`.
    tok_from: usize,
    line: usize,
    loops: u32,
    in_func: bool,
}

type PR<T> = Result<T, String>;

impl Parser {
    fn bump(&mut self) -> PR<Tok> {
        self.tok_from = self.lx.i;
        let (t, l) = self.lx.next()?;
        let old = std::mem::replace(&mut self.tok, t);
        self.line = l;
        Ok(old)
    }

    fn is(&self, op: &str) -> bool {
        matches!(&self.tok, Tok::Op(o) if *o == op)
    }

    fn expect(&mut self, op: &str) -> PR<()> {
        if self.is(op) {
            self.bump()?;
            Ok(())
        } else {
            Err(self.syntax())
        }
    }

    fn syntax(&self) -> String {
        // bc counts the line a newline ends as the next one.
        let line = if self.tok == Tok::Nl {
            self.line + 1
        } else {
            self.line
        };
        format!("{line}: syntax error")
    }

    fn skip_nl(&mut self) -> PR<()> {
        while self.tok == Tok::Nl {
            self.bump()?;
        }
        Ok(())
    }

    fn stmt(&mut self) -> PR<Stmt> {
        match self.tok.clone() {
            Tok::Str(s) => {
                self.bump()?;
                Ok(Stmt::Str(s))
            }
            Tok::Op("{") => {
                self.bump()?;
                let mut body = Vec::new();
                loop {
                    while self.tok == Tok::Nl || self.is(";") {
                        self.bump()?;
                    }
                    if self.is("}") {
                        self.bump()?;
                        break;
                    }
                    if self.tok == Tok::Eof {
                        return Err(self.syntax());
                    }
                    body.push(self.stmt()?);
                    if !(self.tok == Tok::Nl || self.is(";") || self.is("}")) {
                        return Err(self.syntax());
                    }
                }
                Ok(Stmt::Block(body))
            }
            Tok::Op(";") | Tok::Nl | Tok::Eof => Ok(Stmt::Empty),
            Tok::Name(n) => match n.as_str() {
                "if" => {
                    self.bump()?;
                    self.expect("(")?;
                    let c = self.expr()?;
                    self.expect(")")?;
                    self.skip_nl()?;
                    let then = self.stmt()?;
                    // `else` may follow on the next line.
                    let save = (self.lx.i, self.lx.line, self.tok.clone(), self.line);
                    self.skip_nl()?;
                    if self.tok == Tok::Name("else".into()) {
                        self.bump()?;
                        self.skip_nl()?;
                        let els = self.stmt()?;
                        return Ok(Stmt::If(c, Box::new(then), Some(Box::new(els))));
                    }
                    (self.lx.i, self.lx.line, self.tok, self.line) = save;
                    Ok(Stmt::If(c, Box::new(then), None))
                }
                "while" => {
                    self.bump()?;
                    self.expect("(")?;
                    let c = self.expr()?;
                    self.expect(")")?;
                    self.skip_nl()?;
                    self.loops += 1;
                    let body = self.stmt();
                    self.loops -= 1;
                    Ok(Stmt::While(c, Box::new(body?)))
                }
                "for" => {
                    self.bump()?;
                    self.expect("(")?;
                    let a = if self.is(";") {
                        None
                    } else {
                        Some(self.expr()?)
                    };
                    self.expect(";")?;
                    let b = if self.is(";") {
                        None
                    } else {
                        Some(self.expr()?)
                    };
                    self.expect(";")?;
                    let c = if self.is(")") {
                        None
                    } else {
                        Some(self.expr()?)
                    };
                    self.expect(")")?;
                    self.skip_nl()?;
                    self.loops += 1;
                    let body = self.stmt();
                    self.loops -= 1;
                    Ok(Stmt::For(a, b, c, Box::new(body?)))
                }
                "break" | "continue" => {
                    if self.loops == 0 {
                        return Err(format!(
                            "{}: {} outside a for/while",
                            self.line,
                            if n == "break" { "Break" } else { "Continue" }
                        ));
                    }
                    self.bump()?;
                    Ok(if n == "break" {
                        Stmt::Break
                    } else {
                        Stmt::Continue
                    })
                }
                "return" => {
                    if !self.in_func {
                        return Err(format!("{}: Return outside of a function.", self.line));
                    }
                    self.bump()?;
                    if self.tok == Tok::Nl || self.is(";") || self.is("}") || self.tok == Tok::Eof {
                        return Ok(Stmt::Return(None));
                    }
                    Ok(Stmt::Return(Some(self.expr()?)))
                }
                "halt" => {
                    self.bump()?;
                    Ok(Stmt::Halt)
                }
                "print" => {
                    self.bump()?;
                    let mut items = Vec::new();
                    loop {
                        if let Tok::Str(s) = self.tok.clone() {
                            self.bump()?;
                            items.push(PItem::Str(s));
                        } else {
                            items.push(PItem::Val(self.expr()?));
                        }
                        if self.is(",") {
                            self.bump()?;
                        } else {
                            break;
                        }
                    }
                    Ok(Stmt::Print(items))
                }
                _ => Ok(Stmt::Expr(self.expr()?)),
            },
            _ => Ok(Stmt::Expr(self.expr()?)),
        }
    }

    fn define(&mut self) -> PR<(String, Func)> {
        self.bump()?;
        let Tok::Name(mut name) = self.bump()? else {
            return Err(self.syntax());
        };
        let mut void = false;
        if name == "void" {
            // GNU's keyword: `define void f()`, and no function may be named `void`.
            let Tok::Name(real) = self.bump()? else {
                return Err(self.syntax());
            };
            (name, void) = (real, true);
        }
        self.expect("(")?;
        let mut by_ref = Vec::new();
        let params = self.names(")", Some(&mut by_ref))?;
        self.expect(")")?;
        self.skip_nl()?;
        if !self.is("{") {
            return Err(self.syntax());
        }
        self.bump()?;
        self.skip_nl()?;
        let mut autos = Vec::new();
        if self.tok == Tok::Name("auto".into()) {
            self.bump()?;
            autos = self.names(";", None)?;
            if !(self.is(";") || self.tok == Tok::Nl) {
                return Err(self.syntax());
            }
            self.bump()?;
        }
        self.in_func = true;
        let mut body = Vec::new();
        let r = (|| -> PR<()> {
            loop {
                while self.tok == Tok::Nl || self.is(";") {
                    self.bump()?;
                }
                if self.is("}") {
                    self.bump()?;
                    return Ok(());
                }
                if self.tok == Tok::Eof {
                    return Err(self.syntax());
                }
                body.push(self.stmt()?);
                if !(self.tok == Tok::Nl || self.is(";") || self.is("}")) {
                    return Err(self.syntax());
                }
            }
        })();
        self.in_func = false;
        r?;
        Ok((
            name,
            Func {
                void,
                params,
                by_ref,
                autos,
                body,
            },
        ))
    }

    /// `a, b[], c` up to `end` (not consumed); where `refs` is given (parameters), `*b[]`
    /// marks an array passed by reference.
    fn names(&mut self, end: &str, mut refs: Option<&mut Vec<bool>>) -> PR<Vec<(String, bool)>> {
        let mut out = Vec::new();
        if self.is(end) {
            return Ok(out);
        }
        loop {
            let by_ref = refs.is_some() && self.is("*");
            if by_ref {
                self.bump()?;
            }
            let Tok::Name(n) = self.bump()? else {
                return Err(self.syntax());
            };
            let arr = if self.is("[") {
                self.bump()?;
                self.expect("]")?;
                true
            } else {
                false
            };
            if by_ref && !arr {
                return Err(self.syntax());
            }
            if let Some(r) = refs.as_deref_mut() {
                r.push(by_ref);
            }
            out.push((n, arr));
            if self.is(",") {
                self.bump()?;
            } else {
                return Ok(out);
            }
        }
    }

    fn expr(&mut self) -> PR<Expr> {
        let mut l = self.and()?;
        while self.is("||") {
            self.bump()?;
            let r = self.and()?;
            l = Expr::Bin("||", Box::new(l), Box::new(r));
        }
        Ok(l)
    }

    fn and(&mut self) -> PR<Expr> {
        let mut l = self.not()?;
        while self.is("&&") {
            self.bump()?;
            let r = self.not()?;
            l = Expr::Bin("&&", Box::new(l), Box::new(r));
        }
        Ok(l)
    }

    fn not(&mut self) -> PR<Expr> {
        if self.is("!") {
            self.bump()?;
            return Ok(Expr::Not(Box::new(self.not()?)));
        }
        self.rel()
    }

    fn rel(&mut self) -> PR<Expr> {
        let mut l = self.assign()?;
        loop {
            let op = match &self.tok {
                Tok::Op(o @ ("<" | "<=" | ">" | ">=" | "==" | "!=")) => *o,
                _ => return Ok(l),
            };
            self.bump()?;
            let r = self.assign()?;
            l = Expr::Bin(op, Box::new(l), Box::new(r));
        }
    }

    fn assign(&mut self) -> PR<Expr> {
        let l = self.add()?;
        let op = match &self.tok {
            Tok::Op(o @ ("=" | "+=" | "-=" | "*=" | "/=" | "%=" | "^=")) => *o,
            _ => return Ok(l),
        };
        let Expr::Load(lv) = l else {
            return Err(self.syntax());
        };
        self.bump()?;
        let r = self.assign()?;
        Ok(Expr::Assign(op, lv, Box::new(r)))
    }

    fn add(&mut self) -> PR<Expr> {
        let mut l = self.mul()?;
        loop {
            let op = match &self.tok {
                Tok::Op(o @ ("+" | "-")) => *o,
                _ => return Ok(l),
            };
            self.bump()?;
            let r = self.mul()?;
            l = Expr::Bin(op, Box::new(l), Box::new(r));
        }
    }

    fn mul(&mut self) -> PR<Expr> {
        let mut l = self.pow()?;
        loop {
            let op = match &self.tok {
                Tok::Op(o @ ("*" | "/" | "%")) => *o,
                _ => return Ok(l),
            };
            self.bump()?;
            let r = self.pow()?;
            l = Expr::Bin(op, Box::new(l), Box::new(r));
        }
    }

    fn pow(&mut self) -> PR<Expr> {
        let l = self.unary()?;
        if self.is("^") {
            self.bump()?;
            let r = self.pow()?;
            return Ok(Expr::Bin("^", Box::new(l), Box::new(r)));
        }
        Ok(l)
    }

    /// In bc unary minus binds tighter than `^`: `-2^2` is 4.
    fn unary(&mut self) -> PR<Expr> {
        if self.is("-") {
            self.bump()?;
            return Ok(Expr::Neg(Box::new(self.unary()?)));
        }
        if self.is("++") || self.is("--") {
            let inc = self.is("++");
            self.bump()?;
            let lv = self.lvalue()?;
            return Ok(Expr::IncDec { lv, inc, pre: true });
        }
        let e = self.primary()?;
        if let Expr::Load(lv) = &e
            && (self.is("++") || self.is("--"))
        {
            let inc = self.is("++");
            self.bump()?;
            return Ok(Expr::IncDec {
                lv: lv.clone(),
                inc,
                pre: false,
            });
        }
        Ok(e)
    }

    fn lvalue(&mut self) -> PR<LVal> {
        match self.primary()? {
            Expr::Load(lv) => Ok(lv),
            _ => Err(self.syntax()),
        }
    }

    fn primary(&mut self) -> PR<Expr> {
        // A line cannot end inside an expression: the newline stays for the recovery.
        if matches!(self.tok, Tok::Nl | Tok::Eof) {
            return Err(self.syntax());
        }
        match self.bump()? {
            Tok::Num(n) if n == "." => Ok(Expr::Load(LVal::Last)),
            Tok::Num(n) => Ok(Expr::Num(n)),
            Tok::Op("(") => {
                let e = self.expr()?;
                self.expect(")")?;
                Ok(Expr::Group(Box::new(e)))
            }
            Tok::Name(n) => match n.as_str() {
                "scale" if self.is("(") => {
                    self.bump()?;
                    let e = self.expr()?;
                    self.expect(")")?;
                    Ok(Expr::ScaleOf(Box::new(e)))
                }
                "length" | "sqrt" => {
                    self.expect("(")?;
                    let e = Box::new(self.expr()?);
                    self.expect(")")?;
                    Ok(if n == "length" {
                        Expr::Length(e)
                    } else {
                        Expr::Sqrt(e)
                    })
                }
                "scale" => Ok(Expr::Load(LVal::Scale)),
                "ibase" => Ok(Expr::Load(LVal::Ibase)),
                "obase" => Ok(Expr::Load(LVal::Obase)),
                "last" => Ok(Expr::Load(LVal::Last)),
                "if" | "else" | "while" | "for" | "break" | "continue" | "return" | "define"
                | "auto" | "quit" | "halt" | "print" | "limits" | "read" | "void" => {
                    Err(self.syntax())
                }
                _ if self.is("(") => {
                    self.bump()?;
                    let mut args = Vec::new();
                    if !self.is(")") {
                        loop {
                            // `name[]` passes a whole array.
                            if let Tok::Name(a) = self.tok.clone() {
                                let save = (self.lx.i, self.lx.line, self.tok.clone(), self.line);
                                self.bump()?;
                                if self.is("[") {
                                    self.bump()?;
                                    if self.is("]") {
                                        self.bump()?;
                                        args.push(Arg::Array(a));
                                        if self.is(",") {
                                            self.bump()?;
                                            continue;
                                        }
                                        break;
                                    }
                                }
                                (self.lx.i, self.lx.line, self.tok, self.line) = save;
                            }
                            args.push(Arg::Val(self.expr()?));
                            if self.is(",") {
                                self.bump()?;
                            } else {
                                break;
                            }
                        }
                    }
                    self.expect(")")?;
                    Ok(Expr::Call(n, args))
                }
                _ if self.is("[") => {
                    self.bump()?;
                    let i = self.expr()?;
                    self.expect("]")?;
                    Ok(Expr::Load(LVal::Elem(n, Box::new(i))))
                }
                _ => Ok(Expr::Load(LVal::Var(n))),
            },
            _ => Err(self.syntax()),
        }
    }
}

// ---- evaluation ----

enum Ctl {
    Normal,
    Break,
    Continue,
    Return(Num),
}

enum Stop {
    Error(String),
    Halt,
}

type ER<T> = Result<T, Stop>;

fn rt(msg: &str) -> Stop {
    Stop::Error(format!("Runtime error: {msg}"))
}

struct Bc {
    vars: HashMap<String, Num>,
    arrays: HashMap<String, BTreeMap<usize, Num>>,
    funcs: HashMap<String, Func>,
    scale: u32,
    ibase: u32,
    obase: u32,
    last: Num,
    mathlib: bool,
    out: String,
    col: usize,
    line_len: usize,
    depth: u32,
}

const DIM_MAX: usize = 16_777_215;

impl Bc {
    fn emit_str(&mut self, s: &str) {
        for c in s.chars() {
            self.out.push(c);
            if c == '\n' {
                self.col = 0;
            } else {
                self.col += 1;
            }
        }
        self.flush_if_big();
    }

    /// Numbers wrap with a backslash before the line reaches BC_LINE_LENGTH.
    fn emit_num(&mut self, n: &Num) {
        let s = n.format(self.obase);
        for c in s.chars() {
            if self.line_len > 2 && self.col + 2 >= self.line_len {
                self.out.push_str("\\\n");
                self.col = 0;
            }
            self.out.push(c);
            self.col += 1;
        }
        self.flush_if_big();
    }

    fn flush_if_big(&mut self) {
        if self.out.len() > 1 << 16 {
            self.flush();
        }
    }

    fn flush(&mut self) {
        crate::out(self.out.as_bytes());
        self.out.clear();
    }

    fn load(&mut self, lv: &LVal) -> ER<Num> {
        Ok(match lv {
            LVal::Var(n) => self.vars.get(n).cloned().unwrap_or_default(),
            LVal::Elem(n, i) => {
                let i = self.index(i)?;
                self.arrays
                    .get(n)
                    .and_then(|a| a.get(&i))
                    .cloned()
                    .unwrap_or_default()
            }
            LVal::Scale => Num::int(i64::from(self.scale)),
            LVal::Ibase => Num::int(i64::from(self.ibase)),
            LVal::Obase => Num::int(i64::from(self.obase)),
            LVal::Last => self.last.clone(),
        })
    }

    fn index(&mut self, e: &Expr) -> ER<usize> {
        let v = self.eval(e)?;
        match v.to_i64() {
            Some(i) if (0..=DIM_MAX as i64).contains(&i) => Ok(i as usize),
            _ => Err(rt("Array index out of range")),
        }
    }

    fn store(&mut self, lv: &LVal, v: Num) -> ER<()> {
        match lv {
            LVal::Var(n) => {
                self.vars.insert(n.clone(), v);
            }
            LVal::Elem(n, i) => {
                let i = self.index(i)?;
                self.arrays.entry(n.clone()).or_default().insert(i, v);
            }
            LVal::Scale => {
                self.scale = match v.to_i64() {
                    Some(s) if (0..=i64::from(u32::MAX / 4)).contains(&s) => s as u32,
                    _ => return Err(rt("negative or huge scale")),
                }
            }
            LVal::Ibase => {
                let b = v.to_i64().unwrap_or(0);
                self.ibase = b.clamp(2, 16) as u32;
            }
            LVal::Obase => {
                let b = v.to_i64().unwrap_or(0);
                if b < 2 {
                    return Err(rt("obase too small"));
                }
                self.obase = b.min(i64::from(u32::MAX / 2)) as u32;
            }
            LVal::Last => self.last = v,
        }
        Ok(())
    }

    fn truth(&mut self, e: &Expr) -> ER<bool> {
        Ok(!self.eval(e)?.is_zero())
    }

    fn eval(&mut self, e: &Expr) -> ER<Num> {
        Ok(match e {
            Expr::Num(t) => Num::parse(t, self.ibase),
            Expr::Load(lv) => self.load(lv)?,
            Expr::Group(e) => self.eval(e)?,
            Expr::Neg(e) => self.eval(e)?.neg(),
            Expr::Not(e) => Num::int(i64::from(!self.truth(e)?)),
            Expr::Bin("&&", l, r) => Num::int(i64::from(self.truth(l)? && self.truth(r)?)),
            Expr::Bin("||", l, r) => Num::int(i64::from(self.truth(l)? || self.truth(r)?)),
            Expr::Bin(op, l, r) => {
                let a = self.eval(l)?;
                let b = self.eval(r)?;
                self.binop(op, &a, &b)?
            }
            Expr::Assign(op, lv, r) => {
                let v = self.eval(r)?;
                let v = if *op == "=" {
                    v
                } else {
                    let cur = self.load(lv)?;
                    self.binop(&op[..1], &cur, &v)?
                };
                self.store(lv, v.clone())?;
                v
            }
            Expr::IncDec { lv, inc, pre } => {
                let cur = self.load(lv)?;
                let next = if *inc {
                    cur.add(&Num::int(1))
                } else {
                    cur.sub(&Num::int(1))
                };
                self.store(lv, next.clone())?;
                if *pre { next } else { cur }
            }
            Expr::Length(e) => Num::int(i64::from(self.eval(e)?.length())),
            Expr::ScaleOf(e) => Num::int(i64::from(self.eval(e)?.s)),
            Expr::Sqrt(e) => {
                let v = self.eval(e)?;
                v.sqrt(self.scale)
                    .ok_or_else(|| rt("Square root of a negative number"))?
            }
            Expr::Call(name, args) => self.call(name, args)?,
        })
    }

    fn binop(&mut self, op: &str, a: &Num, b: &Num) -> ER<Num> {
        use std::cmp::Ordering::*;
        let rel = |t: bool| Num::int(i64::from(t));
        Ok(match op {
            "+" => a.add(b),
            "-" => a.sub(b),
            "*" => a.mul(b, self.scale),
            "/" => a.div(b, self.scale).ok_or_else(|| rt("Divide by zero"))?,
            "%" => a.rem(b, self.scale).ok_or_else(|| rt("Modulo by zero"))?,
            "^" => {
                if b.s > 0 && !b.rescale(0).sub(b).is_zero() {
                    eprintln!("Runtime warning: non-zero scale in exponent");
                }
                a.pow(&b.at(0), self.scale)
                    .ok_or_else(|| rt("exponent too large in raise"))?
            }
            "<" => rel(a.cmp(b) == Less),
            "<=" => rel(a.cmp(b) != Greater),
            ">" => rel(a.cmp(b) == Greater),
            ">=" => rel(a.cmp(b) != Less),
            "==" => rel(a.cmp(b) == Equal),
            _ => rel(a.cmp(b) != Equal),
        })
    }

    fn call(&mut self, name: &str, args: &[Arg]) -> ER<Num> {
        let Some(f) = self.funcs.get(name).cloned() else {
            if self.mathlib && matches!(name, "s" | "c" | "a" | "l" | "e" | "j") {
                let want = if name == "j" { 2 } else { 1 };
                if args.len() != want {
                    return Err(rt(&format!("Parameter number mismatch in {name}")));
                }
                let mut vals = Vec::new();
                for a in args {
                    match a {
                        Arg::Val(e) => vals.push(self.eval(e)?),
                        Arg::Array(_) => return Err(rt("Parameter type mismatch")),
                    }
                }
                return match crate::bcnum::math(name, &vals, self.scale) {
                    Ok(v) => Ok(v),
                    Err(MathErr::Domain) => {
                        // bc's l() of a non-positive number: GNU bc's library returns
                        // 1 - 10^scale (at scale 20, -99999999999999999999.000…).
                        let s = self.scale;
                        let p = crate::bcnum::pow10(s);
                        let v = (num_bigint::BigInt::from(1) - &p) * p;
                        Ok(Num { v, s })
                    }
                };
            }
            return Err(rt(&format!("Function {name} not defined.")));
        };
        if args.len() != f.params.len() {
            return Err(rt(&format!("Parameter number mismatch in {name}")));
        }
        if self.depth >= 2000 {
            return Err(rt("function calls nested too deeply"));
        }
        // Values first, in the caller's scope.
        let mut vals: Vec<Result<Num, BTreeMap<usize, Num>>> = Vec::new();
        for ((_, is_arr), a) in f.params.iter().zip(args) {
            match (a, is_arr) {
                (Arg::Val(e), false) => vals.push(Ok(self.eval(e)?)),
                (Arg::Array(n), true) => {
                    vals.push(Err(self.arrays.get(n).cloned().unwrap_or_default()))
                }
                _ => return Err(rt(&format!("Parameter type mismatch in {name}"))),
            }
        }
        // Dynamic scoping: parameters and autos shadow the caller's names until return.
        let mut saved_vars = Vec::new();
        let mut saved_arrays = Vec::new();
        for ((n, is_arr), v) in f.params.iter().zip(vals) {
            if *is_arr {
                let old = self.arrays.insert(n.clone(), v.err().unwrap_or_default());
                saved_arrays.push((n.clone(), old));
            } else {
                let old = self.vars.insert(n.clone(), v.ok().unwrap_or_default());
                saved_vars.push((n.clone(), old));
            }
        }
        for (n, is_arr) in &f.autos {
            if *is_arr {
                saved_arrays.push((n.clone(), self.arrays.insert(n.clone(), BTreeMap::new())));
            } else {
                saved_vars.push((n.clone(), self.vars.insert(n.clone(), Num::default())));
            }
        }
        self.depth += 1;
        let mut result = Ok(Num::default());
        for s in &f.body {
            match self.exec(s) {
                Ok(Ctl::Return(v)) => {
                    result = Ok(v);
                    break;
                }
                Ok(_) => {}
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        self.depth -= 1;
        // What the function left in its by-reference arrays, for the caller's arrays.
        let mut back = Vec::new();
        for (((n, _), by_ref), a) in f.params.iter().zip(&f.by_ref).zip(args) {
            if let (true, Arg::Array(caller)) = (by_ref, a) {
                back.push((
                    caller.clone(),
                    self.arrays.get(n).cloned().unwrap_or_default(),
                ));
            }
        }
        for (n, old) in saved_vars.into_iter().rev() {
            match old {
                Some(v) => self.vars.insert(n, v),
                None => self.vars.remove(&n),
            };
        }
        for (n, old) in saved_arrays.into_iter().rev() {
            match old {
                Some(v) => self.arrays.insert(n, v),
                None => self.arrays.remove(&n),
            };
        }
        for (caller, v) in back {
            self.arrays.insert(caller, v);
        }
        result
    }

    fn exec(&mut self, s: &Stmt) -> ER<Ctl> {
        match s {
            Stmt::Expr(e) => {
                let v = self.eval(e)?;
                let void_call =
                    matches!(e, Expr::Call(f, _) if self.funcs.get(f).is_some_and(|f| f.void));
                if !matches!(e, Expr::Assign(..)) && !void_call {
                    self.emit_num(&v);
                    self.emit_str("\n");
                    self.last = v;
                }
            }
            Stmt::Str(t) => self.emit_str(t),
            Stmt::Print(items) => {
                for it in items {
                    match it {
                        PItem::Str(t) => {
                            let t = unescape(t);
                            self.emit_str(&t);
                        }
                        PItem::Val(e) => {
                            let v = self.eval(e)?;
                            self.emit_num(&v);
                            self.last = v;
                        }
                    }
                }
            }
            Stmt::If(c, t, e) => {
                if self.truth(c)? {
                    return self.exec(t);
                } else if let Some(e) = e {
                    return self.exec(e);
                }
            }
            Stmt::While(c, body) => {
                while self.truth(c)? {
                    match self.exec(body)? {
                        Ctl::Break => break,
                        Ctl::Return(v) => return Ok(Ctl::Return(v)),
                        _ => {}
                    }
                }
            }
            Stmt::For(a, c, step, body) => {
                if let Some(a) = a {
                    self.eval(a)?;
                }
                loop {
                    if let Some(c) = c
                        && !self.truth(c)?
                    {
                        break;
                    }
                    match self.exec(body)? {
                        Ctl::Break => break,
                        Ctl::Return(v) => return Ok(Ctl::Return(v)),
                        _ => {}
                    }
                    if let Some(step) = step {
                        self.eval(step)?;
                    }
                }
            }
            Stmt::Block(b) => {
                for s in b {
                    match self.exec(s)? {
                        Ctl::Normal => {}
                        other => return Ok(other),
                    }
                }
            }
            Stmt::Break => return Ok(Ctl::Break),
            Stmt::Continue => return Ok(Ctl::Continue),
            Stmt::Return(e) => {
                let v = match e {
                    Some(e) => self.eval(e)?,
                    None => Num::default(),
                };
                return Ok(Ctl::Return(v));
            }
            Stmt::Halt => return Err(Stop::Halt),
            Stmt::Empty => {}
        }
        Ok(Ctl::Normal)
    }
}

fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('a') => out.push('\x07'),
            Some('b') => out.push('\x08'),
            Some('f') => out.push('\x0c'),
            Some('r') => out.push('\r'),
            Some('q') => out.push('"'),
            Some('e') => out.push('\\'),
            Some('\\') => out.push('\\'),
            Some(o) => {
                out.push('\\');
                out.push(o);
            }
            None => out.push('\\'),
        }
    }
    out
}

/// What ended a source: its end, or `quit`/`halt` (which end bc).
enum End {
    Eof,
    Quit,
    /// The source ended inside a line: its text from this char index on goes on in the next
    /// source, as GNU bc's lexer reads the files and then standard input as one stream.
    Carry(usize),
    /// The source ended while a line with a syntax error was being skipped: the skipping goes
    /// on in the next source, up to its first newline.
    Skip,
}

/// Runs one source. GNU bc runs a line only once its newline is read, so a last line without
/// one is never run: at the end of the last source it is a syntax error that GNU reports as
/// `(standard_in) 1` whatever the source was.
fn run_source(bc: &mut Bc, src: &str, label: &str, last: bool, status: &mut i32) -> End {
    let mut p = Parser {
        lx: Lexer {
            src: src.chars().collect(),
            i: 0,
            line: 1,
            notes: Vec::new(),
        },
        tok: Tok::Nl,
        tok_from: 0,
        line: 1,
        loops: 0,
        in_func: false,
    };
    // Output so far, then the lexer's notes, then `msg`: the order GNU bc prints them in.
    let report = |bc: &mut Bc, p: &mut Parser, msg: Option<&str>| {
        bc.flush();
        for n in p.lx.notes.drain(..) {
            eprintln!("{label} {n}");
        }
        if let Some(msg) = msg {
            eprintln!("{label} {msg}");
        }
    };
    if let Err(e) = p.bump() {
        report(bc, &mut p, Some(&e));
        *status = 1;
        return End::Eof;
    }
    let mut pending: Vec<Stmt> = Vec::new();
    let mut line_from = 0;
    loop {
        while p.tok == Tok::Nl || p.is(";") {
            if let Err(e) = p.bump() {
                report(bc, &mut p, Some(&e));
            }
        }
        if pending.is_empty() {
            line_from = p.tok_from;
        }
        if !p.lx.notes.is_empty() {
            report(bc, &mut p, None);
        }
        match &p.tok {
            Tok::Eof if pending.is_empty() => return End::Eof,
            Tok::Eof => return unterminated(bc, last, line_from),
            Tok::Name(n) if n == "quit" => {
                bc.flush();
                return End::Quit;
            }
            Tok::Name(n) if n == "limits" => {
                let _ = p.bump();
                bc.emit_str(
                    "BC_BASE_MAX     = 2147483647\nBC_DIM_MAX      = 16777215\n\
                     BC_SCALE_MAX    = 2147483647\nBC_STRING_MAX   = 2147483647\n\
                     MAX Exponent    = 1000000\n",
                );
                continue;
            }
            _ => {}
        }
        let parsed = if p.tok == Tok::Name("define".into()) {
            p.define().map(|(n, f)| {
                bc.funcs.insert(n, f);
                None
            })
        } else {
            p.stmt().and_then(|s| {
                if p.tok == Tok::Nl || p.is(";") || p.tok == Tok::Eof {
                    Ok(Some(s))
                } else {
                    Err(p.syntax())
                }
            })
        };
        match parsed {
            Ok(stmt) => {
                let statement = stmt.is_some();
                pending.extend(stmt);
                if p.tok == Tok::Eof && (statement || !pending.is_empty()) {
                    return unterminated(bc, last, line_from);
                }
                // bc compiles a whole line, then runs it; a runtime error abandons the rest.
                if matches!(p.tok, Tok::Nl | Tok::Eof) {
                    if !p.lx.notes.is_empty() {
                        report(bc, &mut p, None);
                    }
                    for s in std::mem::take(&mut pending) {
                        match bc.exec(&s) {
                            Ok(_) => {}
                            Err(Stop::Halt) => {
                                bc.flush();
                                return End::Quit;
                            }
                            Err(Stop::Error(m)) => {
                                bc.flush();
                                eprintln!("{m}");
                                break;
                            }
                        }
                    }
                }
            }
            Err(e) => {
                report(bc, &mut p, Some(&e));
                pending.clear();
                // Resume after the line that failed.
                while !(p.tok == Tok::Nl || p.tok == Tok::Eof) {
                    if p.bump().is_err() {
                        break;
                    }
                }
                if p.tok == Tok::Eof && !last {
                    return End::Skip;
                }
            }
        }
    }
}

/// The rest of a line a source left unfinished, followed by the next source. GNU bc's lexer
/// ends a token where a file ends (`halt` at the end of one file and `4` at the start of the
/// next are two tokens), which a space between them keeps.
fn joined(carried: String, next: &str) -> String {
    if carried.is_empty() {
        next.to_string()
    } else {
        carried + " " + next
    }
}

/// A source ended inside a line (statements read, no newline yet).
fn unterminated(bc: &mut Bc, last: bool, line_from: usize) -> End {
    if !last {
        return End::Carry(line_from);
    }
    bc.flush();
    eprintln!("(standard_in) 1: syntax error");
    End::Eof
}

pub fn main(args: &[String]) -> i32 {
    let mut mathlib = false;
    let mut files = Vec::new();
    for a in crate::split_clusters(args, "") {
        match a.as_str() {
            "-h" | "--help" => {
                crate::out(HELP.as_bytes());
                return 0;
            }
            "-v" | "--version" => {
                crate::out(b"bc (wasmsand)\n");
                return 0;
            }
            "-l" | "--mathlib" => mathlib = true,
            "-q" | "--quiet" | "-s" | "--standard" | "-w" | "--warn" | "-i" | "--interactive" => {}
            o if o.starts_with('-') && o.len() > 1 => {
                eprintln!("bc: invalid option -- '{}'", o.trim_start_matches('-'));
                eprint!("{HELP}");
                return 1;
            }
            f => files.push(f.to_string()),
        }
    }
    let line_len = std::env::var("BC_LINE_LENGTH")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(70);
    let mut bc = Bc {
        vars: HashMap::new(),
        arrays: HashMap::new(),
        funcs: HashMap::new(),
        scale: if mathlib { 20 } else { 0 },
        ibase: 10,
        obase: 10,
        last: Num::default(),
        mathlib,
        out: String::new(),
        col: 0,
        line_len,
        depth: 0,
    };
    let mut status = 0;
    let mut carried = String::new();
    let mut skipping = false;
    for f in &files {
        match std::fs::read(f) {
            Ok(d) => {
                let text = String::from_utf8_lossy(&d);
                let text = if skipping {
                    match text.split_once('\n') {
                        Some((_, rest)) => {
                            skipping = false;
                            rest.to_string()
                        }
                        None => continue,
                    }
                } else {
                    text.into_owned()
                };
                let src = joined(std::mem::take(&mut carried), &text);
                match run_source(&mut bc, &src, f, false, &mut status) {
                    End::Quit => {
                        bc.flush();
                        return status;
                    }
                    End::Carry(from) => carried = src.chars().skip(from).collect(),
                    End::Skip => skipping = true,
                    End::Eof => {}
                }
            }
            Err(e) => {
                bc.flush();
                eprintln!("File {f} is unavailable.");
                let _ = e;
                return 1;
            }
        }
    }
    let mut input = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut input);
    let mut text = String::from_utf8_lossy(&input).into_owned();
    if skipping {
        text = text
            .split_once('\n')
            .map(|(_, rest)| rest.to_string())
            .unwrap_or_default();
    }
    let src = joined(carried, &text);
    run_source(&mut bc, &src, "(standard_in)", true, &mut status);
    bc.flush();
    status
}
