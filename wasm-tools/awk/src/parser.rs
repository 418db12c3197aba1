//! Recursive-descent parser producing `ast::Program` with variables resolved to slots.

use std::collections::HashMap;
use std::rc::Rc;

use crate::ast::*;
use crate::builtins::Builtin;
use crate::lexer::{Pos, Tok, Token};

/// Nesting beyond this is refused, so that parsing and evaluation stay within a small stack.
const MAX_NESTING: usize = 200;
/// Evaluation recursion follows the tree's depth, which long operator chains also add to.
const MAX_TREE_DEPTH: usize = 600;

pub struct ParseError {
    pub pos: Pos,
    pub msg: String,
    /// gawk prints the source line and a caret for syntax errors, but not for other errors.
    pub caret: bool,
}

type PResult<T> = Result<T, ParseError>;

struct FuncInfo {
    /// For each local slot, whether the body uses it as an array.
    array_use: Vec<bool>,
    /// (callee, argument position, caller local) for bare locals passed to other functions.
    passes: Vec<(usize, usize, usize)>,
}

pub struct Parser {
    toks: Vec<Token>,
    i: usize,
    prog: Program,
    global_ids: HashMap<String, usize>,
    func_ids: HashMap<String, usize>,
    locals: Option<HashMap<String, usize>>,
    cur_func: Option<usize>,
    finfo: Vec<FuncInfo>,
    no_gt: bool,
    no_in: bool,
    depth: usize,
    loop_depth: usize,
    in_func: bool,
    regex_ids: HashMap<String, usize>,
}

fn is_lvalue(e: &Expr) -> bool {
    matches!(e, Expr::Var(_) | Expr::Field(_) | Expr::Index(..))
}

impl Parser {
    pub fn new(toks: Vec<Token>) -> Parser {
        let mut p = Parser {
            toks,
            i: 0,
            prog: Program::default(),
            global_ids: HashMap::new(),
            func_ids: HashMap::new(),
            locals: None,
            cur_func: None,
            finfo: Vec::new(),
            no_gt: false,
            no_in: false,
            depth: 0,
            loop_depth: 0,
            in_func: false,
            regex_ids: HashMap::new(),
        };
        for name in SPECIAL_NAMES {
            p.global(name);
        }
        p
    }

    fn global(&mut self, name: &str) -> usize {
        if let Some(&i) = self.global_ids.get(name) {
            return i;
        }
        let i = self.prog.globals.len();
        self.prog.globals.push(name.to_string());
        self.global_ids.insert(name.to_string(), i);
        i
    }

    fn func_id(&mut self, name: &str) -> usize {
        if let Some(&i) = self.func_ids.get(name) {
            return i;
        }
        let i = self.prog.funcs.len();
        self.prog.funcs.push(Func {
            name: name.to_string(),
            nparams: 0,
            array_params: Vec::new(),
            body: Vec::new(),
            defined: false,
        });
        self.finfo.push(FuncInfo {
            array_use: Vec::new(),
            passes: Vec::new(),
        });
        self.func_ids.insert(name.to_string(), i);
        i
    }

    fn regex_id(&mut self, src: &str) -> usize {
        if let Some(&i) = self.regex_ids.get(src) {
            return i;
        }
        let i = self.prog.regexes.len();
        self.prog.regexes.push(src.to_string());
        self.regex_ids.insert(src.to_string(), i);
        i
    }

    fn peek(&self) -> &Tok {
        &self.toks[self.i].tok
    }

    fn peek_at(&self, k: usize) -> &Tok {
        let j = (self.i + k).min(self.toks.len() - 1);
        &self.toks[j].tok
    }

    fn pos(&self) -> Pos {
        self.toks[self.i].pos
    }

    fn advance(&mut self) -> Tok {
        let t = self.toks[self.i].tok.clone();
        if self.i + 1 < self.toks.len() {
            self.i += 1;
        }
        t
    }

    fn at_end(&self) -> bool {
        self.i + 1 >= self.toks.len() && matches!(self.peek(), Tok::Newline | Tok::Eof)
    }

    fn err<T>(&self) -> PResult<T> {
        let msg = if matches!(self.peek(), Tok::Newline | Tok::Eof) {
            "unexpected newline or end of string"
        } else {
            "syntax error"
        };
        Err(ParseError {
            pos: self.pos(),
            msg: msg.into(),
            caret: true,
        })
    }

    fn err_msg<T>(&self, msg: &str) -> PResult<T> {
        Err(ParseError {
            pos: self.pos(),
            msg: msg.into(),
            caret: false,
        })
    }

    fn expect(&mut self, t: Tok) -> PResult<()> {
        if *self.peek() == t {
            self.advance();
            Ok(())
        } else {
            self.err()
        }
    }

    fn skip_newlines(&mut self) {
        while matches!(self.peek(), Tok::Newline) && !self.at_end() {
            self.advance();
        }
    }

    fn skip_terminators(&mut self) {
        while matches!(self.peek(), Tok::Newline | Tok::Semi) && !self.at_end() {
            self.advance();
        }
    }

    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return self.err_msg("program nested too deeply");
        }
        Ok(())
    }

    pub fn parse_program(mut self) -> PResult<Program> {
        loop {
            self.skip_terminators();
            if self.at_end() {
                break;
            }
            self.parse_item()?;
        }
        self.check_depth()?;
        self.infer_arrays();
        Ok(self.prog)
    }

    fn parse_item(&mut self) -> PResult<()> {
        let pos = self.pos();
        match self.peek().clone() {
            Tok::Begin | Tok::End | Tok::BeginFile | Tok::EndFile => {
                let which = self.advance();
                if *self.peek() != Tok::LBrace {
                    return self.err();
                }
                let body = self.parse_block()?;
                match which {
                    Tok::Begin => self.prog.begin.push(body),
                    Tok::End => self.prog.end.push(body),
                    Tok::BeginFile => self.prog.beginfile.push(body),
                    _ => self.prog.endfile.push(body),
                }
            }
            Tok::Function => {
                self.advance();
                self.parse_function()?;
            }
            Tok::LBrace => {
                let body = self.parse_block()?;
                self.prog.rules.push(Rule {
                    pattern: Pattern::All,
                    action: Some(body),
                    line: pos.line,
                    src: pos.src,
                });
            }
            _ => {
                let e1 = self.parse_expr()?;
                let pattern = if *self.peek() == Tok::Comma {
                    self.advance();
                    self.skip_newlines();
                    let e2 = self.parse_expr()?;
                    Pattern::Range(e1, e2)
                } else {
                    Pattern::Expr(e1)
                };
                let action = if *self.peek() == Tok::LBrace {
                    Some(self.parse_block()?)
                } else {
                    match self.peek() {
                        Tok::Newline | Tok::Semi | Tok::Eof => {}
                        _ => return self.err(),
                    }
                    None
                };
                self.prog.rules.push(Rule {
                    pattern,
                    action,
                    line: pos.line,
                    src: pos.src,
                });
            }
        }
        Ok(())
    }

    fn parse_function(&mut self) -> PResult<()> {
        let name = match self.advance() {
            Tok::Name(n) | Tok::FuncName(n) => n,
            _ => {
                self.i -= 1;
                return self.err();
            }
        };
        if self.global_ids.contains_key(&name) && self.global_ids[&name] < NUM_SPECIAL {
            return self.err_msg(&format!(
                "function `{name}': cannot use special variable `{name}' as a function name"
            ));
        }
        let fid = self.func_id(&name);
        if self.prog.funcs[fid].defined {
            return self.err_msg(&format!("function `{name}' previously defined"));
        }
        self.expect(Tok::LParen)?;
        let mut params: Vec<String> = Vec::new();
        if *self.peek() != Tok::RParen {
            loop {
                self.skip_newlines();
                match self.advance() {
                    Tok::Name(n) => {
                        if params.contains(&n) {
                            self.i -= 1;
                            return self.err_msg(&format!(
                                "function `{name}': parameter #{} `{n}' duplicates parameter #{}",
                                params.len() + 1,
                                params.iter().position(|p| *p == n).unwrap_or(0) + 1
                            ));
                        }
                        params.push(n)
                    }
                    _ => {
                        self.i -= 1;
                        return self.err();
                    }
                }
                self.skip_newlines();
                match self.peek() {
                    Tok::Comma => {
                        self.advance();
                    }
                    Tok::RParen => break,
                    _ => return self.err(),
                }
            }
        }
        self.expect(Tok::RParen)?;
        self.skip_newlines();
        if *self.peek() != Tok::LBrace {
            return self.err();
        }
        let mut map = HashMap::new();
        for (k, p) in params.iter().enumerate() {
            map.insert(p.clone(), k);
        }
        self.locals = Some(map);
        self.cur_func = Some(fid);
        self.in_func = true;
        self.finfo[fid].array_use = vec![false; params.len()];
        let body = self.parse_block()?;
        self.locals = None;
        self.cur_func = None;
        self.in_func = false;
        let f = &mut self.prog.funcs[fid];
        f.nparams = params.len();
        f.body = body;
        f.defined = true;
        Ok(())
    }

    fn parse_block(&mut self) -> PResult<Vec<Stmt>> {
        self.expect(Tok::LBrace)?;
        self.enter()?;
        let mut stmts = Vec::new();
        loop {
            self.skip_terminators();
            if *self.peek() == Tok::RBrace {
                self.advance();
                break;
            }
            if self.at_end() {
                return self.err();
            }
            stmts.push(self.parse_stmt()?);
        }
        self.depth -= 1;
        Ok(stmts)
    }

    /// Ends a simple statement: `;`, a newline, or (not consumed) `}`.
    fn end_simple(&mut self) -> PResult<()> {
        match self.peek() {
            Tok::Semi | Tok::Newline => {
                self.advance();
                Ok(())
            }
            Tok::RBrace | Tok::Eof => Ok(()),
            _ => self.err(),
        }
    }

    fn mk(&self, pos: Pos, kind: StmtKind) -> Stmt {
        Stmt {
            line: pos.line,
            src: pos.src,
            kind,
        }
    }

    fn parse_body(&mut self) -> PResult<Stmt> {
        self.skip_newlines();
        if *self.peek() == Tok::Semi {
            let pos = self.pos();
            self.advance();
            return Ok(self.mk(pos, StmtKind::Block(Vec::new())));
        }
        self.parse_stmt()
    }

    fn parse_stmt(&mut self) -> PResult<Stmt> {
        self.enter()?;
        let r = self.parse_stmt_inner();
        self.depth -= 1;
        r
    }

    fn parse_stmt_inner(&mut self) -> PResult<Stmt> {
        let pos = self.pos();
        match self.peek().clone() {
            Tok::LBrace => {
                let b = self.parse_block()?;
                Ok(self.mk(pos, StmtKind::Block(b)))
            }
            Tok::If => {
                self.advance();
                self.expect(Tok::LParen)?;
                let c = self.parse_expr_top()?;
                self.expect(Tok::RParen)?;
                let then = self.parse_body()?;
                let save = self.i;
                self.skip_terminators();
                let els = if *self.peek() == Tok::Else {
                    self.advance();
                    Some(Box::new(self.parse_body()?))
                } else {
                    self.i = save;
                    None
                };
                Ok(self.mk(pos, StmtKind::If(c, Box::new(then), els)))
            }
            Tok::While => {
                self.advance();
                self.expect(Tok::LParen)?;
                let c = self.parse_expr_top()?;
                self.expect(Tok::RParen)?;
                if *self.peek() == Tok::Semi {
                    self.advance();
                    return Ok(self.mk(
                        pos,
                        StmtKind::While(c, Box::new(self.mk(pos, StmtKind::Block(vec![])))),
                    ));
                }
                self.loop_depth += 1;
                let body = self.parse_body()?;
                self.loop_depth -= 1;
                Ok(self.mk(pos, StmtKind::While(c, Box::new(body))))
            }
            Tok::Do => {
                self.advance();
                self.loop_depth += 1;
                let body = self.parse_body()?;
                self.loop_depth -= 1;
                self.skip_terminators();
                self.expect(Tok::While)?;
                self.expect(Tok::LParen)?;
                let c = self.parse_expr_top()?;
                self.expect(Tok::RParen)?;
                self.end_simple()?;
                Ok(self.mk(pos, StmtKind::Do(Box::new(body), c)))
            }
            Tok::For => {
                self.advance();
                self.expect(Tok::LParen)?;
                if let (Tok::Name(v), Tok::In, Tok::Name(a), Tok::RParen) = (
                    self.peek().clone(),
                    self.peek_at(1).clone(),
                    self.peek_at(2).clone(),
                    self.peek_at(3).clone(),
                ) {
                    self.i += 4;
                    let var = Expr::Var(self.resolve(&v));
                    let arr = self.resolve_array(&a);
                    self.loop_depth += 1;
                    let body = self.parse_body()?;
                    self.loop_depth -= 1;
                    return Ok(self.mk(pos, StmtKind::ForIn(var, arr, Box::new(body))));
                }
                let init = if *self.peek() == Tok::Semi {
                    None
                } else {
                    Some(Box::new(self.parse_simple_stmt()?))
                };
                self.expect(Tok::Semi)?;
                self.skip_newlines();
                let cond = if *self.peek() == Tok::Semi {
                    None
                } else {
                    Some(self.parse_expr_top()?)
                };
                self.expect(Tok::Semi)?;
                self.skip_newlines();
                let step = if *self.peek() == Tok::RParen {
                    None
                } else {
                    Some(Box::new(self.parse_simple_stmt()?))
                };
                self.expect(Tok::RParen)?;
                if *self.peek() == Tok::Semi {
                    self.advance();
                    return Ok(self.mk(
                        pos,
                        StmtKind::For(
                            init,
                            cond,
                            step,
                            Box::new(self.mk(pos, StmtKind::Block(vec![]))),
                        ),
                    ));
                }
                self.loop_depth += 1;
                let body = self.parse_body()?;
                self.loop_depth -= 1;
                Ok(self.mk(pos, StmtKind::For(init, cond, step, Box::new(body))))
            }
            Tok::Switch => {
                self.advance();
                self.expect(Tok::LParen)?;
                let e = self.parse_expr_top()?;
                self.expect(Tok::RParen)?;
                self.skip_newlines();
                self.expect(Tok::LBrace)?;
                let mut cases = Vec::new();
                self.loop_depth += 1;
                loop {
                    self.skip_terminators();
                    match self.peek().clone() {
                        Tok::RBrace => {
                            self.advance();
                            break;
                        }
                        Tok::Case => {
                            self.advance();
                            let label = match self.peek().clone() {
                                Tok::Regex(r) => {
                                    self.advance();
                                    CaseLabel::Regex(self.regex_id(&r))
                                }
                                _ => CaseLabel::Value(self.parse_primary_like()?),
                            };
                            self.expect(Tok::Colon)?;
                            let body = self.parse_case_body()?;
                            cases.push((label, body));
                        }
                        Tok::Default => {
                            self.advance();
                            self.expect(Tok::Colon)?;
                            let body = self.parse_case_body()?;
                            cases.push((CaseLabel::Default, body));
                        }
                        _ => return self.err(),
                    }
                }
                self.loop_depth -= 1;
                Ok(self.mk(pos, StmtKind::Switch(e, cases)))
            }
            Tok::Semi => {
                self.advance();
                Ok(self.mk(pos, StmtKind::Block(vec![])))
            }
            _ => {
                let s = self.parse_simple_stmt()?;
                self.end_simple()?;
                Ok(s)
            }
        }
    }

    fn parse_case_body(&mut self) -> PResult<Vec<Stmt>> {
        let mut v = Vec::new();
        loop {
            self.skip_terminators();
            if matches!(self.peek(), Tok::Case | Tok::Default | Tok::RBrace) || self.at_end() {
                return Ok(v);
            }
            v.push(self.parse_stmt()?);
        }
    }

    fn parse_primary_like(&mut self) -> PResult<Expr> {
        match self.peek().clone() {
            Tok::Minus => {
                self.advance();
                match self.advance() {
                    Tok::Number(n) => Ok(Expr::Num(-n)),
                    _ => {
                        self.i -= 1;
                        self.err()
                    }
                }
            }
            Tok::Number(n) => {
                self.advance();
                Ok(Expr::Num(n))
            }
            Tok::Str(s) => {
                self.advance();
                Ok(Expr::Str(s.into()))
            }
            _ => self.err(),
        }
    }

    fn parse_simple_stmt(&mut self) -> PResult<Stmt> {
        let pos = self.pos();
        let kind = match self.peek().clone() {
            Tok::Print | Tok::Printf => {
                let is_printf = self.advance() == Tok::Printf;
                let args = self.parse_print_args()?;
                if is_printf && args.is_empty() {
                    return self.err();
                }
                let redir = match self.peek() {
                    Tok::Gt | Tok::Append | Tok::Pipe => {
                        let kind = match self.advance() {
                            Tok::Gt => RedirKind::Write,
                            Tok::Append => RedirKind::Append,
                            _ => RedirKind::Pipe,
                        };
                        let save = self.no_gt;
                        self.no_gt = true;
                        let target = self.parse_concat();
                        self.no_gt = save;
                        Some(Redirect {
                            kind,
                            target: target?,
                        })
                    }
                    _ => None,
                };
                if is_printf {
                    StmtKind::Printf(args, redir)
                } else {
                    StmtKind::Print(args, redir)
                }
            }
            Tok::Next => {
                self.advance();
                StmtKind::Next
            }
            Tok::NextFile => {
                self.advance();
                StmtKind::NextFile
            }
            Tok::Break | Tok::Continue => {
                let t = self.advance();
                if self.loop_depth == 0 {
                    self.i -= 1;
                    let w = if t == Tok::Break { "break" } else { "continue" };
                    return self.err_msg(&format!(
                        "error: `{w}' is not allowed outside a loop{}",
                        if t == Tok::Break { " or switch" } else { "" }
                    ));
                }
                if t == Tok::Break {
                    StmtKind::Break
                } else {
                    StmtKind::Continue
                }
            }
            Tok::Exit => {
                self.advance();
                if self.is_stmt_end() {
                    StmtKind::Exit(None)
                } else {
                    StmtKind::Exit(Some(self.parse_expr_top()?))
                }
            }
            Tok::Return => {
                self.advance();
                if !self.in_func {
                    self.i -= 1;
                    return self.err_msg("`return' used outside function context");
                }
                if self.is_stmt_end() {
                    StmtKind::Return(None)
                } else {
                    StmtKind::Return(Some(self.parse_expr_top()?))
                }
            }
            Tok::Delete => {
                self.advance();
                let paren = *self.peek() == Tok::LParen;
                if paren {
                    self.advance();
                }
                let name = match self.advance() {
                    Tok::Name(n) => n,
                    _ => {
                        self.i -= 1;
                        return self.err();
                    }
                };
                let arr = self.resolve_array(&name);
                let subs = if *self.peek() == Tok::LBracket {
                    self.advance();
                    let s = self.parse_expr_list_until(Tok::RBracket)?;
                    Some(s)
                } else {
                    None
                };
                if paren {
                    self.expect(Tok::RParen)?;
                }
                StmtKind::Delete(arr, subs)
            }
            _ => StmtKind::Expr(self.parse_expr_top()?),
        };
        Ok(self.mk(pos, kind))
    }

    fn is_stmt_end(&self) -> bool {
        matches!(
            self.peek(),
            Tok::Semi | Tok::Newline | Tok::RBrace | Tok::Eof
        )
    }

    fn parse_print_args(&mut self) -> PResult<Vec<Expr>> {
        let ends = |t: &Tok| {
            matches!(
                t,
                Tok::Semi
                    | Tok::Newline
                    | Tok::RBrace
                    | Tok::Eof
                    | Tok::Gt
                    | Tok::Append
                    | Tok::Pipe
            )
        };
        if ends(self.peek()) {
            return Ok(Vec::new());
        }
        if *self.peek() == Tok::LParen {
            let save = self.i;
            self.advance();
            let saved = (self.no_gt, self.no_in);
            self.no_gt = false;
            self.no_in = false;
            let list = self.parse_expr_list_until(Tok::RParen);
            self.no_gt = saved.0;
            self.no_in = saved.1;
            if let Ok(list) = list
                && ends(self.peek())
            {
                if list.is_empty() {
                    self.i -= 1;
                    return self.err();
                }
                return Ok(list);
            }
            self.i = save;
        }
        let save = self.no_gt;
        self.no_gt = true;
        let r = self.parse_expr_list_plain();
        self.no_gt = save;
        r
    }

    fn parse_expr_list_plain(&mut self) -> PResult<Vec<Expr>> {
        let mut v = vec![self.parse_expr()?];
        while *self.peek() == Tok::Comma {
            self.advance();
            self.skip_newlines();
            v.push(self.parse_expr()?);
        }
        Ok(v)
    }

    /// A comma-separated list ending in `close` (consumed); may be empty.
    fn parse_expr_list_until(&mut self, close: Tok) -> PResult<Vec<Expr>> {
        let saved = (self.no_gt, self.no_in);
        self.no_gt = false;
        self.no_in = false;
        let r = (|| {
            let mut v = Vec::new();
            self.skip_newlines();
            if *self.peek() == close {
                self.advance();
                return Ok(v);
            }
            loop {
                v.push(self.parse_expr()?);
                self.skip_newlines();
                match self.peek() {
                    Tok::Comma => {
                        self.advance();
                        self.skip_newlines();
                    }
                    t if *t == close => {
                        self.advance();
                        return Ok(v);
                    }
                    _ => return self.err(),
                }
            }
        })();
        self.no_gt = saved.0;
        self.no_in = saved.1;
        r
    }

    fn parse_expr_top(&mut self) -> PResult<Expr> {
        let saved = (self.no_gt, self.no_in);
        self.no_gt = false;
        self.no_in = false;
        let r = self.parse_expr();
        self.no_gt = saved.0;
        self.no_in = saved.1;
        r
    }

    fn parse_expr(&mut self) -> PResult<Expr> {
        self.enter()?;
        let r = self.parse_assign();
        self.depth -= 1;
        r
    }

    fn assign_op(t: &Tok) -> Option<Option<BinOp>> {
        Some(match t {
            Tok::Assign => None,
            Tok::AddAssign => Some(BinOp::Add),
            Tok::SubAssign => Some(BinOp::Sub),
            Tok::MulAssign => Some(BinOp::Mul),
            Tok::DivAssign => Some(BinOp::Div),
            Tok::ModAssign => Some(BinOp::Mod),
            Tok::PowAssign => Some(BinOp::Pow),
            _ => return None,
        })
    }

    fn parse_assign(&mut self) -> PResult<Expr> {
        let lhs = self.parse_ternary()?;
        if let Some(op) = Self::assign_op(self.peek())
            && is_lvalue(&lhs)
        {
            self.advance();
            self.skip_newlines();
            let rhs = self.parse_expr()?;
            return Ok(match op {
                None => Expr::Assign(Box::new(lhs), Box::new(rhs)),
                Some(op) => Expr::AugAssign(op, Box::new(lhs), Box::new(rhs)),
            });
        }
        Ok(lhs)
    }

    fn parse_ternary(&mut self) -> PResult<Expr> {
        let c = self.parse_or()?;
        if *self.peek() == Tok::Question {
            self.advance();
            self.skip_newlines();
            let a = self.parse_expr()?;
            self.skip_newlines();
            self.expect(Tok::Colon)?;
            self.skip_newlines();
            let b = self.parse_expr()?;
            return Ok(Expr::Cond(Box::new(c), Box::new(a), Box::new(b)));
        }
        Ok(c)
    }

    fn parse_or(&mut self) -> PResult<Expr> {
        let mut l = self.parse_and()?;
        while *self.peek() == Tok::Or {
            self.advance();
            self.skip_newlines();
            let r = self.parse_and()?;
            l = Expr::Or(Box::new(l), Box::new(r));
        }
        Ok(l)
    }

    fn parse_and(&mut self) -> PResult<Expr> {
        let mut l = self.parse_in()?;
        while *self.peek() == Tok::And {
            self.advance();
            self.skip_newlines();
            let r = self.parse_in()?;
            l = Expr::And(Box::new(l), Box::new(r));
        }
        Ok(l)
    }

    fn parse_in(&mut self) -> PResult<Expr> {
        let mut l = self.parse_match()?;
        while *self.peek() == Tok::In && !self.no_in {
            self.advance();
            let name = match self.advance() {
                Tok::Name(n) => n,
                _ => {
                    self.i -= 1;
                    return self.err();
                }
            };
            let arr = self.resolve_array(&name);
            l = Expr::In(vec![l], arr);
        }
        Ok(l)
    }

    fn parse_match(&mut self) -> PResult<Expr> {
        let mut l = self.parse_comparison()?;
        loop {
            let neg = match self.peek() {
                Tok::Match => false,
                Tok::NoMatch => true,
                _ => return Ok(l),
            };
            self.advance();
            let r = self.parse_comparison()?;
            l = Expr::Match(neg, Box::new(l), Box::new(r));
        }
    }

    fn parse_comparison(&mut self) -> PResult<Expr> {
        let l = self.parse_pipe_getline()?;
        let op = match self.peek() {
            Tok::Lt => CmpOp::Lt,
            Tok::Le => CmpOp::Le,
            Tok::Ne => CmpOp::Ne,
            Tok::Eq => CmpOp::Eq,
            Tok::Gt if !self.no_gt => CmpOp::Gt,
            Tok::Ge => CmpOp::Ge,
            _ => return Ok(l),
        };
        self.advance();
        let r = self.parse_pipe_getline()?;
        Ok(Expr::Cmp(op, Box::new(l), Box::new(r)))
    }

    fn parse_pipe_getline(&mut self) -> PResult<Expr> {
        let mut l = self.parse_concat()?;
        while *self.peek() == Tok::Pipe && *self.peek_at(1) == Tok::Getline {
            self.advance();
            self.advance();
            let var = self.parse_getline_var()?;
            l = Expr::Getline(GetlineSrc::Cmd(Box::new(l)), var);
        }
        Ok(l)
    }

    fn parse_getline_var(&mut self) -> PResult<Option<Box<Expr>>> {
        match self.peek().clone() {
            Tok::Name(_) | Tok::Dollar => {
                let e = self.parse_postfix_noincr()?;
                if !is_lvalue(&e) {
                    return self.err();
                }
                Ok(Some(Box::new(e)))
            }
            _ => Ok(None),
        }
    }

    fn starts_concat_operand(&self) -> bool {
        match self.peek() {
            Tok::Number(_)
            | Tok::Str(_)
            | Tok::Regex(_)
            | Tok::Name(_)
            | Tok::FuncName(_)
            | Tok::Builtin(_)
            | Tok::Dollar
            | Tok::Not
            | Tok::LParen
            | Tok::Incr
            | Tok::Decr => true,
            Tok::Minus | Tok::Plus => false,
            Tok::In => false,
            _ => false,
        }
    }

    fn parse_concat(&mut self) -> PResult<Expr> {
        let first = self.parse_additive()?;
        if !self.starts_concat_operand() {
            return Ok(first);
        }
        let mut v = vec![first];
        while self.starts_concat_operand() {
            v.push(self.parse_additive()?);
        }
        Ok(Expr::Concat(v))
    }

    fn parse_additive(&mut self) -> PResult<Expr> {
        let mut l = self.parse_mul()?;
        loop {
            let op = match self.peek() {
                Tok::Plus => BinOp::Add,
                Tok::Minus => BinOp::Sub,
                _ => return Ok(l),
            };
            self.advance();
            self.skip_newlines_after_binop();
            let r = self.parse_mul()?;
            l = Expr::Bin(op, Box::new(l), Box::new(r));
        }
    }

    fn skip_newlines_after_binop(&mut self) {}

    fn parse_mul(&mut self) -> PResult<Expr> {
        let mut l = self.parse_unary()?;
        loop {
            let op = match self.peek() {
                Tok::Star => BinOp::Mul,
                Tok::Slash => BinOp::Div,
                Tok::Percent => BinOp::Mod,
                _ => return Ok(l),
            };
            self.advance();
            let r = self.parse_unary()?;
            if let (Expr::Num(_), Expr::Num(d)) = (&l, &r)
                && *d == 0.0
                && op != BinOp::Mul
            {
                return self.err_msg(if op == BinOp::Div {
                    "error: division by zero attempted"
                } else {
                    "error: division by zero attempted in `%'"
                });
            }
            l = Expr::Bin(op, Box::new(l), Box::new(r));
        }
    }

    fn parse_unary(&mut self) -> PResult<Expr> {
        match self.peek() {
            Tok::Not => {
                self.advance();
                self.enter()?;
                let e = self.parse_unary();
                self.depth -= 1;
                Ok(Expr::Not(Box::new(e?)))
            }
            Tok::Minus => {
                self.advance();
                self.enter()?;
                let e = self.parse_unary();
                self.depth -= 1;
                Ok(Expr::Neg(Box::new(e?)))
            }
            Tok::Plus => {
                self.advance();
                self.enter()?;
                let e = self.parse_unary();
                self.depth -= 1;
                Ok(Expr::Plus(Box::new(e?)))
            }
            _ => self.parse_power(),
        }
    }

    fn parse_power(&mut self) -> PResult<Expr> {
        let base = self.parse_postfix()?;
        if *self.peek() == Tok::Caret {
            self.advance();
            self.enter()?;
            // Right associative, and the exponent may carry its own sign: 2^-1.
            let exp = match self.peek() {
                Tok::Minus | Tok::Plus | Tok::Not => self.parse_unary(),
                _ => self.parse_power(),
            };
            self.depth -= 1;
            return Ok(Expr::Bin(BinOp::Pow, Box::new(base), Box::new(exp?)));
        }
        Ok(base)
    }

    fn parse_postfix(&mut self) -> PResult<Expr> {
        let e = self.parse_primary()?;
        if is_lvalue(&e) {
            match self.peek() {
                Tok::Incr => {
                    self.advance();
                    return Ok(Expr::PostIncr(1.0, Box::new(e)));
                }
                Tok::Decr => {
                    self.advance();
                    return Ok(Expr::PostIncr(-1.0, Box::new(e)));
                }
                _ => {}
            }
        }
        Ok(e)
    }

    /// The operand of `$`, or a getline target: a primary without trailing `++`.
    fn parse_postfix_noincr(&mut self) -> PResult<Expr> {
        match self.peek().clone() {
            Tok::Dollar => {
                self.advance();
                let e = self.parse_dollar_operand()?;
                Ok(Expr::Field(Box::new(e)))
            }
            Tok::Name(n) => {
                self.advance();
                self.name_ref(&n)
            }
            _ => self.err(),
        }
    }

    fn parse_dollar_operand(&mut self) -> PResult<Expr> {
        self.enter()?;
        let r = match self.peek() {
            Tok::Minus => {
                self.advance();
                Ok(Expr::Neg(Box::new(self.parse_dollar_operand()?)))
            }
            Tok::Plus => {
                self.advance();
                Ok(Expr::Plus(Box::new(self.parse_dollar_operand()?)))
            }
            Tok::Not => {
                self.advance();
                Ok(Expr::Not(Box::new(self.parse_dollar_operand()?)))
            }
            Tok::Incr | Tok::Decr => {
                let d = if self.advance() == Tok::Incr {
                    1.0
                } else {
                    -1.0
                };
                let e = self.parse_postfix_noincr()?;
                Ok(Expr::PreIncr(d, Box::new(e)))
            }
            _ => self.parse_primary(),
        };
        self.depth -= 1;
        r
    }

    fn name_ref(&mut self, n: &str) -> PResult<Expr> {
        if *self.peek() == Tok::LBracket {
            self.advance();
            let subs = self.parse_expr_list_until(Tok::RBracket)?;
            if subs.is_empty() {
                self.i -= 1;
                return self.err();
            }
            let arr = self.resolve_array(n);
            return Ok(Expr::Index(arr, subs));
        }
        if self
            .func_ids
            .get(n)
            .is_some_and(|&f| self.prog.funcs[f].defined)
        {
            return self.err_msg(&format!(
                "error: attempt to use function `{n}' as a variable"
            ));
        }
        Ok(Expr::Var(self.resolve(n)))
    }

    fn resolve(&mut self, n: &str) -> Var {
        if let Some(l) = &self.locals
            && let Some(&k) = l.get(n)
        {
            return Var::Local(k);
        }
        Var::Global(self.global(n))
    }

    fn resolve_array(&mut self, n: &str) -> Var {
        let v = self.resolve(n);
        if let (Var::Local(k), Some(f)) = (v, self.cur_func) {
            self.finfo[f].array_use[k] = true;
        }
        v
    }

    fn parse_primary(&mut self) -> PResult<Expr> {
        let pos = self.pos();
        match self.advance() {
            Tok::Number(n) => Ok(Expr::Num(n)),
            Tok::Str(s) => Ok(Expr::Str(Rc::from(s.as_str()))),
            Tok::Regex(r) => Ok(Expr::Regex(self.regex_id(&r))),
            Tok::Dollar => {
                let e = self.parse_dollar_operand()?;
                Ok(Expr::Field(Box::new(e)))
            }
            Tok::LParen => {
                let list = self.parse_expr_list_until(Tok::RParen)?;
                if list.len() == 1 {
                    let e = list.into_iter().next().unwrap_or(Expr::Num(0.0));
                    return Ok(Expr::Group(Box::new(e)));
                }
                if list.is_empty() || *self.peek() != Tok::In {
                    self.i -= 1;
                    return self.err();
                }
                self.advance();
                let name = match self.advance() {
                    Tok::Name(n) => n,
                    _ => {
                        self.i -= 1;
                        return self.err();
                    }
                };
                let arr = self.resolve_array(&name);
                Ok(Expr::In(list, arr))
            }
            Tok::Incr | Tok::Decr => {
                let d = if self.toks[self.i - 1].tok == Tok::Incr {
                    1.0
                } else {
                    -1.0
                };
                let e = self.parse_postfix_noincr()?;
                Ok(Expr::PreIncr(d, Box::new(e)))
            }
            Tok::Not | Tok::Minus | Tok::Plus => {
                // Reached only in concatenation/`$` contexts, e.g. `$1 !x`.
                self.i -= 1;
                self.parse_unary()
            }
            Tok::Name(n) => self.name_ref(&n),
            Tok::FuncName(n) => {
                self.expect(Tok::LParen)?;
                let args = self.parse_expr_list_until(Tok::RParen)?;
                let fid = self.func_id(&n);
                if let Some(cf) = self.cur_func {
                    for (k, a) in args.iter().enumerate() {
                        if let Expr::Var(Var::Local(l)) = a {
                            self.finfo[cf].passes.push((fid, k, *l));
                        }
                    }
                }
                Ok(Expr::Call(fid, args, pos.line))
            }
            Tok::Builtin(b) => self.parse_builtin(b),
            Tok::Getline => {
                let var = self.parse_getline_var()?;
                if *self.peek() == Tok::Lt {
                    self.advance();
                    let f = self.parse_getline_file()?;
                    return Ok(Expr::Getline(GetlineSrc::File(Box::new(f)), var));
                }
                Ok(Expr::Getline(GetlineSrc::Main, var))
            }
            _ => {
                self.i -= 1;
                if matches!(self.peek(), Tok::Eof) {
                    return self.err();
                }
                self.err()
            }
        }
    }

    fn parse_getline_file(&mut self) -> PResult<Expr> {
        match self.peek() {
            Tok::Dollar => {
                self.advance();
                let e = self.parse_dollar_operand()?;
                Ok(Expr::Field(Box::new(e)))
            }
            _ => self.parse_primary(),
        }
    }

    fn parse_builtin(&mut self, b: Builtin) -> PResult<Expr> {
        if *self.peek() != Tok::LParen {
            if b == Builtin::Length {
                return Ok(Expr::Builtin(b, Vec::new()));
            }
            return self.err();
        }
        self.advance();
        let args = self.parse_expr_list_until(Tok::RParen)?;
        let (lo, hi) = b.arity();
        if args.len() < lo || args.len() > hi {
            self.i -= 1;
            return self.err_msg(&format!(
                "{} called with {} arguments",
                b.name(),
                args.len()
            ));
        }
        // Array arguments: mark function locals used as arrays.
        let array_pos: &[usize] = match b {
            Builtin::Split | Builtin::Patsplit => &[1, 3],
            Builtin::Match => &[2],
            Builtin::Asort | Builtin::Asorti => &[0, 1],
            _ => &[],
        };
        for &k in array_pos {
            if let Some(Expr::Var(Var::Local(l))) = args.get(k)
                && let Some(f) = self.cur_func
            {
                self.finfo[f].array_use[*l] = true;
            }
        }
        if matches!(b, Builtin::Sub | Builtin::Gsub)
            && let Some(t) = args.get(2)
            && !is_lvalue(t)
            && !matches!(t, Expr::Group(_))
        {
            // gawk accepts a non-lvalue target (with a warning) and discards the result.
        }
        Ok(Expr::Builtin(b, args))
    }

    fn infer_arrays(&mut self) {
        loop {
            let mut changed = false;
            for f in 0..self.finfo.len() {
                let passes = self.finfo[f].passes.clone();
                for (callee, k, l) in passes {
                    let callee_arr = self.finfo[callee]
                        .array_use
                        .get(k)
                        .copied()
                        .unwrap_or(false);
                    if callee_arr && !self.finfo[f].array_use[l] {
                        self.finfo[f].array_use[l] = true;
                        changed = true;
                    }
                }
            }
            if !changed {
                break;
            }
        }
        for (f, info) in self.finfo.iter().enumerate() {
            self.prog.funcs[f].array_params = info.array_use.clone();
        }
    }

    /// Walks every expression iteratively and refuses trees deeper than evaluation can bear.
    fn check_depth(&self) -> PResult<()> {
        let mut stack: Vec<(&Expr, usize)> = Vec::new();
        let mut stmts: Vec<&Stmt> = Vec::new();
        let mut exprs: Vec<&Expr> = Vec::new();
        for b in self
            .prog
            .begin
            .iter()
            .chain(&self.prog.end)
            .chain(&self.prog.beginfile)
            .chain(&self.prog.endfile)
        {
            stmts.extend(b.iter());
        }
        for r in &self.prog.rules {
            match &r.pattern {
                Pattern::All => {}
                Pattern::Expr(e) => exprs.push(e),
                Pattern::Range(a, b) => {
                    exprs.push(a);
                    exprs.push(b);
                }
            }
            if let Some(a) = &r.action {
                stmts.extend(a.iter());
            }
        }
        for f in &self.prog.funcs {
            stmts.extend(f.body.iter());
        }
        while let Some(s) = stmts.pop() {
            match &s.kind {
                StmtKind::Expr(e) => exprs.push(e),
                StmtKind::Print(a, r) | StmtKind::Printf(a, r) => {
                    exprs.extend(a.iter());
                    if let Some(r) = r {
                        exprs.push(&r.target);
                    }
                }
                StmtKind::If(c, t, e) => {
                    exprs.push(c);
                    stmts.push(t);
                    if let Some(e) = e {
                        stmts.push(e);
                    }
                }
                StmtKind::While(c, b) | StmtKind::Do(b, c) => {
                    exprs.push(c);
                    stmts.push(b);
                }
                StmtKind::For(i, c, st, b) => {
                    if let Some(i) = i {
                        stmts.push(i);
                    }
                    if let Some(c) = c {
                        exprs.push(c);
                    }
                    if let Some(st) = st {
                        stmts.push(st);
                    }
                    stmts.push(b);
                }
                StmtKind::ForIn(v, _, b) => {
                    exprs.push(v);
                    stmts.push(b);
                }
                StmtKind::Block(b) => stmts.extend(b.iter()),
                StmtKind::Exit(Some(e)) | StmtKind::Return(Some(e)) => exprs.push(e),
                StmtKind::Delete(_, Some(s)) => exprs.extend(s.iter()),
                StmtKind::Switch(e, cases) => {
                    exprs.push(e);
                    for (l, b) in cases {
                        if let CaseLabel::Value(v) = l {
                            exprs.push(v);
                        }
                        stmts.extend(b.iter());
                    }
                }
                _ => {}
            }
        }
        for e in exprs {
            stack.push((e, 1));
        }
        while let Some((e, d)) = stack.pop() {
            if d > MAX_TREE_DEPTH {
                return Err(ParseError {
                    pos: Pos::default(),
                    msg: "expression nested too deeply".into(),
                    caret: false,
                });
            }
            let d = d + 1;
            match e {
                Expr::Field(a)
                | Expr::Not(a)
                | Expr::Neg(a)
                | Expr::Plus(a)
                | Expr::PreIncr(_, a)
                | Expr::PostIncr(_, a)
                | Expr::Group(a) => stack.push((a, d)),
                Expr::Assign(a, b)
                | Expr::AugAssign(_, a, b)
                | Expr::And(a, b)
                | Expr::Or(a, b)
                | Expr::Bin(_, a, b)
                | Expr::Cmp(_, a, b)
                | Expr::Match(_, a, b) => {
                    stack.push((a, d));
                    stack.push((b, d));
                }
                Expr::Cond(a, b, c) => {
                    stack.push((a, d));
                    stack.push((b, d));
                    stack.push((c, d));
                }
                Expr::Index(_, v)
                | Expr::In(v, _)
                | Expr::Concat(v)
                | Expr::Call(_, v, _)
                | Expr::Builtin(_, v) => {
                    for x in v {
                        stack.push((x, d));
                    }
                }
                Expr::Getline(src, var) => {
                    if let GetlineSrc::File(x) | GetlineSrc::Cmd(x) = src {
                        stack.push((x, d));
                    }
                    if let Some(v) = var {
                        stack.push((v, d));
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}
