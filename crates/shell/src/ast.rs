//! The syntax tree produced by [`crate::parse`].
//!
//! Words keep their quoting structure (which parts were quoted, which came from expansions)
//! because field splitting, globbing, brace expansion and pattern matching all depend on it
//! and must happen later, in the interpreter.

/// A list of commands: a whole script, the body of a compound command, or the inside of a
/// command substitution.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Script {
    pub items: Vec<ListItem>,
}

/// One and-or list, run in the background when it was terminated by `&`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListItem {
    pub and_or: AndOr,
    pub background: bool,
}

/// `first && second || third ...`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AndOr {
    pub first: Pipeline,
    pub rest: Vec<(AndOrOp, Pipeline)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AndOrOp {
    And,
    Or,
}

/// `[time] [!] cmd | cmd |& cmd`. A `|&` is stored as a trailing `2>&1` redirection on the
/// command before it, which is exactly how bash defines it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pipeline {
    pub negated: bool,
    pub timed: bool,
    pub commands: Vec<Command>,
    /// 1-based line of the first command: `$LINENO` in `[[ ]]`, `(( ))`, a `for` word list
    /// or an ERR trap after a compound command is this line, as in bash.
    pub line: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Simple(SimpleCommand),
    /// A compound command with the redirections written after it (`while ...; done < f`).
    Compound(CompoundCommand, Vec<Redirect>),
    FunctionDef(FunctionDef),
}

/// `A=1 B=2 cmd arg... >redir`. Any of the three lists may be empty, but not all of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimpleCommand {
    pub assignments: Vec<Assignment>,
    pub words: Vec<Arg>,
    pub redirects: Vec<Redirect>,
    /// 1-based line of the command's first token (for `$LINENO` and error messages).
    pub line: usize,
}

/// A command word. Arguments of declaration builtins (`declare`, `typeset`, `local`, `export`,
/// `readonly`) that look like assignments are parsed as assignments, as bash does, so that
/// `declare -A m=([k]=v)` works and `local x=$y` is not field-split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arg {
    Word(Word),
    Assignment(Assignment),
}

/// `name=value`, `name+=value`, `name[sub]=value`, `name=(a b [k]=v)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    pub name: String,
    /// The subscript of `name[sub]=`, unexpanded: indexed arrays evaluate it arithmetically,
    /// associative ones use it as a string key, and only the interpreter knows which.
    pub index: Option<Word>,
    pub append: bool,
    pub value: AssignValue,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AssignValue {
    Scalar(Word),
    Array(Vec<ArrayElem>),
}

/// An element of an array literal: `v` or `[k]=v`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArrayElem {
    pub key: Option<Word>,
    /// `[k]+=v`: appends to the element.
    pub append: bool,
    pub value: Word,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionDef {
    pub name: String,
    /// Always a [`Command::Compound`]; its redirections apply on every call.
    pub body: Box<Command>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompoundCommand {
    Group(Script),
    Subshell(Script),
    If {
        /// `if`/`elif` conditions with their `then` bodies, in order.
        branches: Vec<(Script, Script)>,
        else_body: Option<Script>,
    },
    While {
        cond: Script,
        body: Script,
    },
    Until {
        cond: Script,
        body: Script,
    },
    /// `for name in words; do body; done`; `words` is `None` for `for name; do` ("$@").
    For {
        var: String,
        words: Option<Vec<Word>>,
        body: Script,
    },
    /// `select name in words; do body; done`.
    Select {
        var: String,
        words: Option<Vec<Word>>,
        body: Script,
    },
    /// `for ((init; cond; step)); do body; done`; an empty part is `None`.
    ArithFor {
        init: Option<Arith>,
        cond: Option<Arith>,
        step: Option<Arith>,
        body: Script,
    },
    Case {
        word: Word,
        items: Vec<CaseItem>,
    },
    /// `(( expr ))`
    Arith(Arith),
    /// `[[ expr ]]`
    Cond(CondExpr),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaseItem {
    pub patterns: Vec<Word>,
    pub body: Script,
    pub terminator: CaseTerminator,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaseTerminator {
    /// `;;` (also used for a last item written without terminator)
    Break,
    /// `;&`: run the next item's body without testing its patterns.
    FallThrough,
    /// `;;&`: go on testing the following patterns.
    Continue,
}

/// A `[[ ]]` expression. Its words are never field-split nor globbed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CondExpr {
    /// A lone word: true when it expands to a non-empty string.
    Word(Word),
    /// `-f file`, `-z str`, ...: the operator letter without the dash.
    Unary(char, Word),
    Binary(Word, CondBinOp, Word),
    Not(Box<CondExpr>),
    And(Box<CondExpr>, Box<CondExpr>),
    Or(Box<CondExpr>, Box<CondExpr>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CondBinOp {
    /// `==` or `=`: the right side is a glob pattern (its quoted parts match literally).
    PatEq,
    /// `!=`
    PatNe,
    /// `=~`: the right side is an extended regex (its quoted parts match literally).
    Match,
    StrLt,
    StrGt,
    IntEq,
    IntNe,
    IntLt,
    IntLe,
    IntGt,
    IntGe,
    NewerThan,
    OlderThan,
    SameFile,
}

impl CondBinOp {
    /// Every spelling of every operator, the one printed first: the one table of the
    /// parser (`[[ ]]`), the printer and the `test` builtin.
    const SPELLINGS: &[(&str, CondBinOp)] = &[
        ("==", CondBinOp::PatEq),
        ("=", CondBinOp::PatEq),
        ("!=", CondBinOp::PatNe),
        ("=~", CondBinOp::Match),
        ("<", CondBinOp::StrLt),
        (">", CondBinOp::StrGt),
        ("-eq", CondBinOp::IntEq),
        ("-ne", CondBinOp::IntNe),
        ("-lt", CondBinOp::IntLt),
        ("-le", CondBinOp::IntLe),
        ("-gt", CondBinOp::IntGt),
        ("-ge", CondBinOp::IntGe),
        ("-nt", CondBinOp::NewerThan),
        ("-ot", CondBinOp::OlderThan),
        ("-ef", CondBinOp::SameFile),
    ];

    /// The operator spelled `word`.
    pub fn from_word(word: &str) -> Option<Self> {
        Self::SPELLINGS
            .iter()
            .find(|(w, _)| *w == word)
            .map(|&(_, op)| op)
    }

    /// How the operator is written back (`==` for `=` too).
    pub fn as_str(self) -> &'static str {
        Self::SPELLINGS
            .iter()
            .find(|(_, op)| *op == self)
            .map_or("", |(w, _)| w)
    }
}

/// The unary operators of `[[ ]]` and `test` (`-f FILE`, `-z STRING`, ...), by letter.
pub const COND_UNARY_OPS: &str = "abcdefghknoprstuvwxzGLNOSR";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    /// The explicit descriptor (`2>`), `None` for the operator's default.
    pub fd: Option<u32>,
    /// `{name}>file`: the descriptor is allocated (10 and up) and its number stored in `name`.
    pub fd_var: Option<String>,
    pub op: RedirOp,
    pub target: RedirTarget,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedirOp {
    /// `<`
    Read,
    /// `>`
    Write,
    /// `>>`
    Append,
    /// `>|`
    Clobber,
    /// `<>`
    ReadWrite,
    /// `<&`: the target is a descriptor number or `-`.
    DupRead,
    /// `>&`: the target is a descriptor number, `-`, or (bash extension) a file name.
    DupWrite,
    /// `&>`
    WriteAll,
    /// `&>>`
    AppendAll,
    /// `<<` and `<<-`
    HereDoc,
    /// `<<<`
    HereString,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RedirTarget {
    Word(Word),
    HereDoc(HereDoc),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HereDoc {
    /// The delimiter with its quotes removed.
    pub delimiter: String,
    /// A quoted delimiter (`<<'EOF'`, `<<"EOF"`, `<<\EOF`) means the body is not expanded; the
    /// body is then a single [`WordPart::Quoted`].
    pub quoted: bool,
    /// `<<-`: leading tabs were already stripped from the body.
    pub strip_tabs: bool,
    /// The body, ending with a newline (unless the script ended before the delimiter).
    pub body: Word,
}

/// A shell word: a sequence of parts with their quoting kept.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Word {
    pub parts: Vec<WordPart>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WordPart {
    /// Unquoted text: subject to globbing (`* ? [`), and to field splitting only when it came
    /// from an expansion (so never for this part itself).
    Literal(String),
    /// Text that was quoted: `'...'`, `$'...'` (escapes already decoded), a backslash-escaped
    /// character, or the literal text inside `"..."`. Never globbed nor split.
    Quoted(String),
    /// `"..."` (and `$"..."`): contains only `Quoted`, `Param`, `CommandSubst`, `Arith` and
    /// `BadSubst` parts; its expansions are not split nor globbed (`"$@"` still makes fields).
    DoubleQuoted(Vec<WordPart>),
    /// `$name`, `$1`, `$@`, `${...}`
    Param(Box<ParamExp>),
    /// `$(...)` or a backquoted command.
    CommandSubst(Box<Script>),
    /// `<(...)` (`output` false) or `>(...)` (`output` true).
    ProcessSubst { output: bool, script: Box<Script> },
    /// `$((...))` (and the legacy `$[...]`).
    Arith(Box<Arith>),
    /// `~` (empty user: `$HOME`) or `~user`, at the start of a word or of an assignment value
    /// (also after `:` there). `~+` and `~-` keep their `+`/`-` as the user.
    Tilde(String),
    /// A brace expansion, only in words bash brace-expands (command arguments, `for` lists,
    /// array elements, redirection targets); the interpreter expands it before anything else.
    Brace(BraceExp),
    /// `${...}` that bash accepts at parse time but rejects when expanded (`${}`, `${a b}`):
    /// the raw text, for the runtime error `bash: ${a b}: bad substitution`.
    BadSubst(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BraceExp {
    /// `{a,b,c}`: each alternative is a word that may itself contain braces.
    List(Vec<Word>),
    /// `{1..10..2}`, `{a..e}`, `{01..10}`: endpoints kept as written (zero padding matters);
    /// both are integers or both single letters, `step` an integer.
    Seq {
        start: String,
        end: String,
        step: Option<String>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Param {
    Named(String),
    /// `$0` .. `$9`, `${10}` ...
    Positional(u32),
    /// One of `@ * # ? $ ! -`.
    Special(char),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subscript {
    /// `[@]`
    At,
    /// `[*]`
    Star,
    /// `[expr]`: unexpanded, arithmetic or a key depending on the array's kind.
    Index(Word),
}

/// A parameter expansion: `$x`, `${x}`, `${!x}`, `${x[i]:-word}`, `${#x}`, ...
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamExp {
    pub param: Param,
    pub subscript: Option<Subscript>,
    /// `${!name...}`: use the value of `name` as the name of the parameter to expand.
    pub indirect: bool,
    pub op: ParamOp,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParamOp {
    None,
    /// `${#x}`, `${#arr[@]}`
    Length,
    /// `${x:-w}` (`colon`: also when set but empty) and `${x-w}`
    Default {
        colon: bool,
        word: Word,
    },
    /// `${x:=w}`, `${x=w}`
    Assign {
        colon: bool,
        word: Word,
    },
    /// `${x:?w}`, `${x?w}`
    Error {
        colon: bool,
        word: Word,
    },
    /// `${x:+w}`, `${x+w}`
    Alternate {
        colon: bool,
        word: Word,
    },
    /// `${x:offset}`, `${x:offset:length}`
    Substring {
        offset: Arith,
        length: Option<Arith>,
    },
    /// `${x#pat}` / `${x##pat}` (`longest`)
    RemovePrefix {
        longest: bool,
        pattern: Word,
    },
    /// `${x%pat}` / `${x%%pat}`
    RemoveSuffix {
        longest: bool,
        pattern: Word,
    },
    /// `${x/pat/rep}`, `${x//pat/rep}`, `${x/#pat/rep}`, `${x/%pat/rep}`
    Replace {
        mode: ReplaceMode,
        pattern: Word,
        replacement: Word,
    },
    /// `${x^pat}`, `${x^^pat}` (`upper`), `${x,pat}`, `${x,,pat}`; `all` for the doubled forms.
    Case {
        upper: bool,
        all: bool,
        pattern: Word,
    },
    /// `${x@Q}` and the other `@` transformations: the operator letter.
    Transform(char),
    /// `${!prefix*}` (`star`) and `${!prefix@}`: names of variables starting with `prefix`.
    PrefixNames {
        star: bool,
    },
    /// `${!arr[@]}` / `${!arr[*]}` (`star`): the keys of an array.
    Keys {
        star: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplaceMode {
    First,
    All,
    Prefix,
    Suffix,
}

/// An arithmetic expression as written, and its parse.
///
/// Bash reports arithmetic syntax errors when the expression is evaluated, not when the script
/// is parsed (`echo $((1+))` runs the commands before it and fails with status 1), so a bad
/// expression is not a [`crate::ParseError`]: `expr` holds the message bash prints, e.g.
/// `1+: syntax error: operand expected (error token is "+")` (text that is the data, hence a
/// `String`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arith {
    pub source: String,
    pub expr: Result<ArithExpr, String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArithExpr {
    Number(i64),
    /// A variable read; its value is itself evaluated as an expression (bash semantics).
    Var(String),
    /// `a[i]`
    Elem(String, Box<ArithExpr>),
    /// `$x`, `${...}`, `$(...)`, `"..."` inside an expression: expanded first, then the result
    /// is evaluated as an expression of its own.
    Expansion(Word),
    Unary(ArithUnaryOp, Box<ArithExpr>),
    /// `++x`, `--x`, `x++`, `x--`
    IncDec {
        target: LValue,
        increment: bool,
        prefix: bool,
    },
    Binary(ArithBinOp, Box<ArithExpr>, Box<ArithExpr>),
    Conditional(Box<ArithExpr>, Box<ArithExpr>, Box<ArithExpr>),
    /// `x = e`, `x += e`, ...; `op` is `None` for plain `=`.
    Assign {
        target: LValue,
        op: Option<ArithBinOp>,
        value: Box<ArithExpr>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LValue {
    Var(String),
    Elem(String, Box<ArithExpr>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArithUnaryOp {
    Neg,
    Plus,
    Not,
    BitNot,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArithBinOp {
    Comma,
    LogOr,
    LogAnd,
    BitOr,
    BitXor,
    BitAnd,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Shl,
    Shr,
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Pow,
}

impl Word {
    /// A word of one unquoted literal part.
    pub fn literal(s: &str) -> Word {
        Word {
            parts: vec![WordPart::Literal(s.to_string())],
        }
    }

    /// The text of a word made only of unquoted literal text, e.g. to recognise operators.
    pub fn as_literal(&self) -> Option<&str> {
        match self.parts.as_slice() {
            [WordPart::Literal(s)] => Some(s),
            _ => None,
        }
    }
}
