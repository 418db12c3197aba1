//! The parsed program. Variables are already resolved to slots: globals index the
//! interpreter's global table, locals index the current function frame.

use std::rc::Rc;

use crate::builtins::Builtin;

pub const NF: usize = 0;
pub const NR: usize = 1;
pub const FNR: usize = 2;
pub const FS: usize = 3;
pub const OFS: usize = 4;
pub const ORS: usize = 5;
pub const RS: usize = 6;
pub const SUBSEP: usize = 7;
pub const CONVFMT: usize = 8;
pub const OFMT: usize = 9;
pub const RSTART: usize = 10;
pub const RLENGTH: usize = 11;
pub const FILENAME: usize = 12;
pub const ENVIRON: usize = 13;
pub const ARGC: usize = 14;
pub const ARGV: usize = 15;
pub const IGNORECASE: usize = 16;
pub const RT: usize = 17;
pub const PROCINFO: usize = 18;
pub const FIELDWIDTHS: usize = 19;
pub const FPAT: usize = 20;
pub const ERRNO: usize = 21;
pub const NUM_SPECIAL: usize = 22;

pub const SPECIAL_NAMES: [&str; NUM_SPECIAL] = [
    "NF",
    "NR",
    "FNR",
    "FS",
    "OFS",
    "ORS",
    "RS",
    "SUBSEP",
    "CONVFMT",
    "OFMT",
    "RSTART",
    "RLENGTH",
    "FILENAME",
    "ENVIRON",
    "ARGC",
    "ARGV",
    "IGNORECASE",
    "RT",
    "PROCINFO",
    "FIELDWIDTHS",
    "FPAT",
    "ERRNO",
];

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Var {
    Global(usize),
    Local(usize),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Pow,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CmpOp {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

#[derive(Debug)]
pub enum GetlineSrc {
    Main,
    File(Box<Expr>),
    Cmd(Box<Expr>),
}

#[derive(Debug)]
pub enum Expr {
    Num(f64),
    Str(Rc<str>),
    /// A regex literal used as a value: matches against $0.
    Regex(usize),
    Var(Var),
    Field(Box<Expr>),
    Index(Var, Vec<Expr>),
    In(Vec<Expr>, Var),
    Assign(Box<Expr>, Box<Expr>),
    AugAssign(BinOp, Box<Expr>, Box<Expr>),
    Cond(Box<Expr>, Box<Expr>, Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    Neg(Box<Expr>),
    Plus(Box<Expr>),
    Bin(BinOp, Box<Expr>, Box<Expr>),
    Cmp(CmpOp, Box<Expr>, Box<Expr>),
    Concat(Vec<Expr>),
    /// `l ~ r` (or `!~` when the flag is set).
    Match(bool, Box<Expr>, Box<Expr>),
    PreIncr(f64, Box<Expr>),
    PostIncr(f64, Box<Expr>),
    Call(usize, Vec<Expr>, u32),
    Builtin(Builtin, Vec<Expr>),
    Getline(GetlineSrc, Option<Box<Expr>>),
    /// A parenthesized expression; kept so `(x) > y` in print is a comparison, not a redirect.
    Group(Box<Expr>),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RedirKind {
    Write,
    Append,
    Pipe,
}

#[derive(Debug)]
pub struct Redirect {
    pub kind: RedirKind,
    pub target: Expr,
}

#[derive(Debug)]
pub enum CaseLabel {
    Value(Expr),
    Regex(usize),
    Default,
}

#[derive(Debug)]
pub enum StmtKind {
    Expr(Expr),
    Print(Vec<Expr>, Option<Redirect>),
    Printf(Vec<Expr>, Option<Redirect>),
    If(Expr, Box<Stmt>, Option<Box<Stmt>>),
    While(Expr, Box<Stmt>),
    Do(Box<Stmt>, Expr),
    For(
        Option<Box<Stmt>>,
        Option<Expr>,
        Option<Box<Stmt>>,
        Box<Stmt>,
    ),
    ForIn(Expr, Var, Box<Stmt>),
    Block(Vec<Stmt>),
    Next,
    NextFile,
    Exit(Option<Expr>),
    Return(Option<Expr>),
    Break,
    Continue,
    Delete(Var, Option<Vec<Expr>>),
    Switch(Expr, Vec<(CaseLabel, Vec<Stmt>)>),
}

#[derive(Debug)]
pub struct Stmt {
    pub line: u32,
    pub src: u16,
    pub kind: StmtKind,
}

#[derive(Debug)]
pub enum Pattern {
    All,
    Expr(Expr),
    Range(Expr, Expr),
}

#[derive(Debug)]
pub struct Rule {
    pub pattern: Pattern,
    /// None means `{ print }`.
    pub action: Option<Vec<Stmt>>,
    pub line: u32,
    pub src: u16,
}

#[derive(Debug)]
pub struct Func {
    pub name: String,
    pub nparams: usize,
    pub array_params: Vec<bool>,
    pub body: Vec<Stmt>,
    pub defined: bool,
}

#[derive(Debug, Default)]
pub struct Program {
    pub begin: Vec<Vec<Stmt>>,
    pub end: Vec<Vec<Stmt>>,
    pub beginfile: Vec<Vec<Stmt>>,
    pub endfile: Vec<Vec<Stmt>>,
    pub rules: Vec<Rule>,
    pub funcs: Vec<Func>,
    pub globals: Vec<String>,
    /// Regex literal sources, indexed by `Expr::Regex`.
    pub regexes: Vec<String>,
}
