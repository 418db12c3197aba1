//! The syntax tree produced by [`super::parser::parse`].
//!
//! Words keep their quoting structure (which parts were quoted, which came from expansions)
//! because field splitting, globbing, brace expansion and pattern matching all depend on it
//! and must happen later, in the interpreter.

/// A list of commands: a whole script, the body of a compound command, or the inside of a
/// command substitution.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Script {
    /// The and-or lists in source order, separated by `;`, `&` or newlines; empty for an
    /// empty script or a body of only comments.
    pub items: Vec<ListItem>,
}

/// One and-or list, run in the background when it was terminated by `&`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListItem {
    /// The commands of the item.
    pub and_or: AndOr,
    /// Terminated by `&`: run asynchronously, `$!` set, status 0 right away.
    pub background: bool,
}

/// `first && second || third ...`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AndOr {
    /// The pipeline that always runs.
    pub first: Pipeline,
    /// The following pipelines, each with the operator before it; evaluated left to right
    /// with equal precedence, as bash does (`a || b && c` is `(a || b) && c`).
    pub rest: Vec<(AndOrOp, Pipeline)>,
}

/// The operator joining two pipelines of an [`AndOr`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AndOrOp {
    /// `&&`: run the next pipeline only when the status so far is 0.
    And,
    /// `||`: run the next pipeline only when the status so far is not 0.
    Or,
}

/// `[time] [!] cmd | cmd |& cmd`. A `|&` is stored as a trailing `2>&1` redirection on the
/// command before it, which is exactly how bash defines it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pipeline {
    /// Preceded by `!` (an odd number of them): the status is inverted and `set -e` ignores
    /// the pipeline.
    pub negated: bool,
    /// Preceded by the `time` keyword (`time -p` too; the `-p` is not kept).
    pub timed: bool,
    /// The commands joined by `|` or `|&`, at least one.
    pub commands: Vec<Command>,
    /// 1-based line of the first command: `$LINENO` in `[[ ]]`, `(( ))`, a `for` word list
    /// or an ERR trap after a compound command is this line, as in bash.
    pub line: usize,
}

/// One command of a pipeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Assignments, words and redirections: `A=1 cmd arg >f`.
    Simple(SimpleCommand),
    /// A compound command with the redirections written after it (`while ...; done < f`).
    Compound(CompoundCommand, Vec<Redirect>),
    /// `name() { ...; }` or `function name { ...; }`: defines the function when run.
    FunctionDef(FunctionDef),
}

/// `A=1 B=2 cmd arg... >redir`. Any of the three lists may be empty, but not all of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimpleCommand {
    /// The `name=value` prefixes: in effect for this command only, or set in the shell when
    /// there are no words.
    pub assignments: Vec<Assignment>,
    /// The command name and its arguments, before expansion.
    pub words: Vec<Arg>,
    /// The redirections, in source order wherever they were written among the words.
    pub redirects: Vec<Redirect>,
    /// 1-based line of the command's first token (for `$LINENO` and error messages).
    pub line: usize,
    /// The line its last word ends on: an `eval`'s text counts its lines from there, as bash
    /// has read the whole command when it runs it.
    pub end_line: usize,
}

/// A command word. Arguments of declaration builtins (`declare`, `typeset`, `local`, `export`,
/// `readonly`) that look like assignments are parsed as assignments, as bash does, so that
/// `declare -A m=([k]=v)` works and `local x=$y` is not field-split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arg {
    /// An ordinary word: expanded, field-split and globbed.
    Word(Word),
    /// `name=value` given to a declaration builtin: expanded as an assignment value.
    Assignment(Assignment),
}

/// `name=value`, `name+=value`, `name[sub]=value`, `name=(a b [k]=v)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    /// The variable name (a valid identifier).
    pub name: String,
    /// The subscript of `name[sub]=`, unexpanded: indexed arrays evaluate it arithmetically,
    /// associative ones use it as a string key, and only the interpreter knows which.
    pub index: Option<Word>,
    /// `+=`: append to the string, add to an integer variable, or add array elements.
    pub append: bool,
    /// The right-hand side.
    pub value: AssignValue,
}

/// The right-hand side of an [`Assignment`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AssignValue {
    /// `name=word`: expanded without field splitting or globbing; may be empty (`x=`).
    Scalar(Word),
    /// `name=(elem ...)`: a compound array assignment.
    Array(Vec<ArrayElem>),
}

/// An element of an array literal: `v` or `[k]=v`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArrayElem {
    /// The `[k]` of `[k]=v`, unexpanded; `None` for a plain `v` (next index).
    pub key: Option<Word>,
    /// `[k]+=v`: appends to the element.
    pub append: bool,
    /// The element's value, unexpanded.
    pub value: Word,
}

/// A function definition: `name() compound` or `function name [()] compound`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionDef {
    /// The function name as written.
    pub name: String,
    /// Always a [`Command::Compound`]; its redirections apply on every call.
    pub body: Box<Command>,
    /// The file the definition ran in (`BASH_SOURCE` of its calls); set when it runs, not by
    /// the parser. `None`: outside any file, which bash reports as `environment`.
    pub source: Option<std::sync::Arc<str>>,
    /// The line the definition ran on (`declare -F` under `extdebug`); set when it runs.
    pub line: usize,
    /// What the body's own line numbers count from: the line an `eval`'d or trap text that
    /// defined it started on (0 in a file); set when it runs.
    pub line_offset: usize,
}

/// A compound command: a reserved-word construct, a group or a subshell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompoundCommand {
    /// `{ list; }`: runs in the current shell.
    Group(Script),
    /// `( list )`: runs in a copy of the shell state; changes do not leak back.
    Subshell(Script),
    /// `if cond; then body; [elif cond; then body;]... [else body;] fi`
    If {
        /// `if`/`elif` conditions with their `then` bodies, in order.
        branches: Vec<(Script, Script)>,
        /// The `else` body; `None` without `else` (the status is then 0 if no branch ran).
        else_body: Option<Script>,
    },
    /// `while cond; do body; done`
    While {
        /// Run before each iteration; the loop goes on while its status is 0.
        cond: Script,
        /// The loop body.
        body: Script,
    },
    /// `until cond; do body; done`
    Until {
        /// Run before each iteration; the loop goes on while its status is not 0.
        cond: Script,
        /// The loop body.
        body: Script,
    },
    /// `for name in words; do body; done`; `words` is `None` for `for name; do` ("$@").
    For {
        /// The loop variable's name.
        var: String,
        /// The words to expand into the list of values; `None` without `in`.
        words: Option<Vec<Word>>,
        /// The loop body.
        body: Script,
    },
    /// `select name in words; do body; done`.
    Select {
        /// The variable set to the chosen item.
        var: String,
        /// The words to expand into the menu; `None` without `in` (`"$@"`).
        words: Option<Vec<Word>>,
        /// Run after each choice until `break` or end of input.
        body: Script,
    },
    /// `for ((init; cond; step)); do body; done`; an empty part is `None`.
    ArithFor {
        /// Evaluated once before the loop.
        init: Option<Box<Arith>>,
        /// Tested before each iteration; `None` counts as true (loop forever).
        cond: Option<Box<Arith>>,
        /// Evaluated after each iteration.
        step: Option<Box<Arith>>,
        /// The loop body.
        body: Script,
    },
    /// `case word in pattern) body ;; ... esac`
    Case {
        /// The subject, expanded without splitting or globbing.
        word: Word,
        /// The clauses in source order.
        items: Vec<CaseItem>,
    },
    /// `coproc [NAME] command`: the command runs asynchronously, its stdin and stdout on pipes
    /// whose other ends the shell holds as descriptors `${NAME[1]}` and `${NAME[0]}`.
    Coproc {
        /// `COPROC` unless named; only a compound command can be named.
        name: String,
        /// The command run as the coprocess.
        body: Box<Command>,
    },
    /// `(( expr ))`
    Arith(Arith),
    /// `[[ expr ]]`
    Cond(CondExpr),
}

impl CompoundCommand {
    /// Whether it runs command lists of its own (`{ }`, `if`, loops, `case`): their commands
    /// set `$?`, PIPESTATUS and trap ERR themselves, not the compound command again.
    pub fn runs_lists(&self) -> bool {
        matches!(
            self,
            CompoundCommand::Group(_)
                | CompoundCommand::If { .. }
                | CompoundCommand::While { .. }
                | CompoundCommand::Until { .. }
                | CompoundCommand::For { .. }
                | CompoundCommand::ArithFor { .. }
                | CompoundCommand::Select { .. }
                | CompoundCommand::Case { .. }
        )
    }
}

/// One clause of a `case`: `pat1 | pat2) body ;;`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaseItem {
    /// The `|`-separated patterns, at least one; glob patterns whose quoted parts match
    /// literally.
    pub patterns: Vec<Word>,
    /// Run when a pattern matches; may be empty.
    pub body: Script,
    /// What happens after the body ran.
    pub terminator: CaseTerminator,
}

/// How a [`CaseItem`] ends, which decides what `case` does after running its body.
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
    /// `left op right`.
    Binary(Word, CondBinOp, Word),
    /// `! expr`
    Not(Box<CondExpr>),
    /// `a && b`: `b` is evaluated only when `a` is true.
    And(Box<CondExpr>, Box<CondExpr>),
    /// `a || b`: `b` is evaluated only when `a` is false.
    Or(Box<CondExpr>, Box<CondExpr>),
}

/// A binary operator of `[[ ]]` (and of `test`/`[`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CondBinOp {
    /// `==` or `=`: the right side is a glob pattern (its quoted parts match literally).
    PatEq,
    /// `!=`
    PatNe,
    /// `=~`: the right side is an extended regex (its quoted parts match literally).
    Match,
    /// `<`: the left string sorts before the right one.
    StrLt,
    /// `>`: the left string sorts after the right one.
    StrGt,
    /// `-eq`: both sides are evaluated arithmetically (in `[[ ]]`) and compared.
    IntEq,
    /// `-ne`
    IntNe,
    /// `-lt`
    IntLt,
    /// `-le`
    IntLe,
    /// `-gt`
    IntGt,
    /// `-ge`
    IntGe,
    /// `-nt`: the left file is newer than the right one (or only the left one exists).
    NewerThan,
    /// `-ot`: the left file is older than the right one (or only the right one exists).
    OlderThan,
    /// `-ef`: both names refer to the same file.
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

/// One redirection: `[n]op target`, `{name}op target`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    /// The explicit descriptor (`2>`), `None` for the operator's default.
    pub fd: Option<u32>,
    /// `{name}>file`: the descriptor is allocated (10 and up) and its number stored in `name`.
    pub fd_var: Option<String>,
    /// The redirection operator.
    pub op: RedirOp,
    /// What it redirects to: a word, or a here-document's body.
    pub target: RedirTarget,
}

/// A redirection operator; the default descriptor is 0 for the `<` forms and 1 for the `>`
/// ones, while `&>` and `&>>` redirect both 1 and 2.
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

/// The right side of a [`Redirect`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RedirTarget {
    /// A file name, a descriptor number or `-` (for the dup operators), or a here-string.
    Word(Word),
    /// The body of `<<` / `<<-`.
    HereDoc(HereDoc),
}

/// A here-document, with its body read from the lines after the command.
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
    /// The body's text as it was read (after `<<-` removed its tabs): bash prints a
    /// here-document back as written, and nothing but that text reads back to the same body
    /// (a substitution in it may hold a here-document whose delimiter line would end it).
    pub text: String,
}

/// A shell word: a sequence of parts with their quoting kept.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Word {
    /// The parts in order, adjacent in the source (`a"b"$c` is three parts that expand
    /// into one field).
    pub parts: Vec<WordPart>,
}

/// One piece of a [`Word`], with how it was quoted.
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
    CommandSubst {
        /// The commands.
        script: Box<Script>,
        /// Written in backquotes: the text between them, escapes and all, printed back as it
        /// was written, as bash's `declare -f` does. The text is read on its own, so it may
        /// hold what `$(...)` would read otherwise, and only the same text is sure to read
        /// back as the same commands.
        backquoted: Option<Box<str>>,
    },
    /// `<(...)` (`output` false) or `>(...)` (`output` true).
    ProcessSubst {
        /// `>(...)`: the command reads what is written to the path.
        output: bool,
        /// The commands run with their input or output on the path the word expands to.
        script: Box<Script>,
    },
    /// `$((...))` (and the legacy `$[...]`).
    Arith(Box<Arith>),
    /// `~` (empty user: `$HOME`) or `~user`, at the start of a word or of an assignment value
    /// (also after `:` there). `~+` and `~-` keep their `+`/`-` as the user.
    Tilde(String),
    /// A brace expansion, only in words bash brace-expands (command arguments, `for` lists,
    /// array elements, redirection targets); the interpreter expands it before anything else.
    Brace(BraceExp),
    /// Backquotes whose text does not parse: bash reads backquoted text only when it expands
    /// it, so the error is the substitution's (`bash: command substitution: line 1: ...`,
    /// status 2, no output), not the script's.
    BadBackquote {
        /// The text between the backquotes, as written.
        raw: Box<str>,
        /// The syntax error's message (empty: bash says nothing).
        message: Box<str>,
        /// The line of the error, counted as the script's.
        line: usize,
        /// For `syntax error near unexpected token`, the line of the text it is on, which bash
        /// shows after the message.
        shown: Option<Box<str>>,
    },
    /// `${...}` that bash accepts at parse time but rejects when expanded (`${}`, `${a b}`),
    /// for the runtime error `bash: ${a b}: bad substitution`.
    BadSubst(BadSubst),
}

/// A `${...}` bash rejects when it expands it.
#[derive(Clone)]
pub struct BadSubst {
    /// The `${...}` as written.
    pub text: String,
    /// What bash's message names: the whole text being expanded around it, as written (the
    /// word, the text inside `"..."`, an operand, a here-document's body): `a${x!}b: bad
    /// substitution`. Derived from the source, so neither compared nor shown.
    pub context: String,
}

impl From<&str> for BadSubst {
    fn from(text: &str) -> BadSubst {
        BadSubst {
            text: text.into(),
            context: text.into(),
        }
    }
}

impl PartialEq for BadSubst {
    fn eq(&self, other: &BadSubst) -> bool {
        self.text == other.text
    }
}

impl Eq for BadSubst {}

impl std::fmt::Debug for BadSubst {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.text.fmt(f)
    }
}

/// A brace expansion `{...}` that bash would expand (at least one comma, or a valid range).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BraceExp {
    /// `{a,b,c}`: each alternative is a word that may itself contain braces.
    List(Vec<Word>),
    /// `{1..10..2}`, `{a..e}`, `{01..10}`: endpoints kept as written (zero padding matters);
    /// both are integers or both single letters, `step` an integer.
    Seq {
        /// The first endpoint as written.
        start: String,
        /// The last endpoint as written (included when the step reaches it).
        end: String,
        /// The `..step` part; `None` for a step of 1 (or -1 counting down).
        step: Option<String>,
    },
}

/// The parameter a [`ParamExp`] reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Param {
    /// A variable (or array) name: `$name`, `${name}`.
    Named(String),
    /// `$0` .. `$9`, `${10}` ...
    Positional(u32),
    /// One of `@ * # ? $ ! -`.
    Special(char),
}

/// The `[...]` after a parameter name in `${name[...]}`.
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
#[derive(Debug, Clone)]
pub struct ParamExp {
    /// The parameter named in the expansion.
    pub param: Param,
    /// `${name[...]}`; `None` without brackets (element 0 of an array).
    pub subscript: Option<Subscript>,
    /// `${!name...}`: use the value of `name` as the name of the parameter to expand.
    pub indirect: bool,
    /// What is done with the value.
    pub op: ParamOp,
    /// Written `$name`, without braces. Brace expansion works on the text, so a name that
    /// ends an alternative runs on into what follows the braces (`{$a,b}_c` reads `$a_c`).
    /// Only the form: two expansions that differ in it alone are equal.
    pub bare: bool,
}

impl PartialEq for ParamExp {
    fn eq(&self, other: &Self) -> bool {
        self.param == other.param
            && self.subscript == other.subscript
            && self.indirect == other.indirect
            && self.op == other.op
    }
}

impl Eq for ParamExp {}

/// The operation of a `${...}` expansion, after the parameter (and subscript). The words
/// in it are expanded only when the operation needs them (`${x:-$(cmd)}` runs `cmd` only
/// when `x` is unset or empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParamOp {
    /// `$x`, `${x}`, `${x[i]}`: the value itself.
    None,
    /// `${#x}`, `${#arr[@]}`
    Length,
    /// `${x:-w}` (`colon`: also when set but empty) and `${x-w}`
    Default {
        /// With `:`: also when the parameter is set but empty, not only when unset.
        colon: bool,
        /// The value used instead.
        word: Word,
    },
    /// `${x:=w}`, `${x=w}`
    Assign {
        /// With `:`: also when the parameter is set but empty, not only when unset.
        colon: bool,
        /// The value assigned to the parameter (a variable, not `$1` or a special one) and
        /// used.
        word: Word,
    },
    /// `${x:?w}`, `${x?w}`
    Error {
        /// With `:`: also when the parameter is set but empty, not only when unset.
        colon: bool,
        /// The message printed when the check fails (empty: bash's default message).
        word: Word,
    },
    /// `${x:+w}`, `${x+w}`
    Alternate {
        /// With `:`: the parameter must also be non-empty, not only set.
        colon: bool,
        /// The value used when the parameter is set; otherwise the expansion is empty.
        word: Word,
    },
    /// `${x:offset}`, `${x:offset:length}`
    Substring {
        /// Where to start (characters, or elements for `@`/arrays); negative counts from
        /// the end.
        offset: Arith,
        /// How many to take; `None` for the rest, negative ends that far before the end.
        length: Option<Arith>,
    },
    /// `${x#pat}` / `${x##pat}` (`longest`)
    RemovePrefix {
        /// `##`: remove the longest match instead of the shortest.
        longest: bool,
        /// The glob pattern; its quoted parts match literally.
        pattern: Word,
    },
    /// `${x%pat}` / `${x%%pat}`
    RemoveSuffix {
        /// `%%`: remove the longest match instead of the shortest.
        longest: bool,
        /// The glob pattern; its quoted parts match literally.
        pattern: Word,
    },
    /// `${x/pat/rep}`, `${x//pat/rep}`, `${x/#pat/rep}`, `${x/%pat/rep}`
    Replace {
        /// Which matches are replaced.
        mode: ReplaceMode,
        /// The glob pattern (longest match); its quoted parts match literally.
        pattern: Word,
        /// The replacement text; empty when the `/rep` part is missing (deletes the match).
        replacement: Word,
    },
    /// `${x^pat}`, `${x^^pat}` (`upper`), `${x,pat}`, `${x,,pat}`; `all` for the doubled forms.
    Case {
        /// `^`/`^^` upper-case; `,`/`,,` lower-case.
        upper: bool,
        /// The doubled form: every matching character, not only the first one.
        all: bool,
        /// Which characters to convert (a one-character glob); empty means any character.
        pattern: Word,
    },
    /// `${x@Q}` and the other `@` transformations: the operator letter.
    Transform(char),
    /// `${!prefix*}` (`star`) and `${!prefix@}`: names of variables starting with `prefix`.
    PrefixNames {
        /// `*` rather than `@` (differs only inside double quotes, as for `$*`/`$@`).
        star: bool,
    },
    /// `${!arr[@]}` / `${!arr[*]}` (`star`): the keys of an array.
    Keys {
        /// `[*]` rather than `[@]` (differs only inside double quotes, as for `$*`/`$@`).
        star: bool,
    },
}

/// Which matches of [`ParamOp::Replace`] are replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplaceMode {
    /// `${x/pat/rep}`: the first match.
    First,
    /// `${x//pat/rep}`: every match.
    All,
    /// `${x/#pat/rep}`: a match at the start only.
    Prefix,
    /// `${x/%pat/rep}`: a match at the end only.
    Suffix,
}

/// An arithmetic expression as written, and its parse.
///
/// Bash reports arithmetic syntax errors when the expression is evaluated, not when the script
/// is parsed (`echo $((1+))` runs the commands before it and fails with status 1), so a bad
/// expression is not a [`super::error::ParseError`]: `expr` holds the message bash prints, e.g.
/// `1+: syntax error: operand expected (error token is "+")` (text that is the data, hence a
/// `String`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arith {
    /// The expression's text between the delimiters, as written: error messages quote it,
    /// and an expression that needs expanding first is re-read from it.
    pub source: String,
    /// The parsed expression, or the syntax error message reported when it is evaluated.
    pub expr: Result<ArithExpr, String>,
    /// Written in the old form, `$[...]`, and printed back in it: its text ends at a `]` and
    /// may hold what `$((...))` would read otherwise (an unbalanced `(`, a subscript's `]`).
    pub bracket: bool,
}

/// A node of a parsed arithmetic expression (64-bit signed, wrapping, as bash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArithExpr {
    /// A constant: decimal, `0x` hex, `0` octal or `base#digits`, already converted.
    Number(i64),
    /// A variable read; its value is itself evaluated as an expression (bash semantics).
    Var(String),
    /// `a[i]`
    Elem(String, Box<ArithExpr>),
    /// `$x`, `${...}`, `$(...)`, `"..."` inside an expression: expanded first, then the result
    /// is evaluated as an expression of its own.
    Expansion(Word),
    /// A prefix operator applied to its operand.
    Unary(ArithUnaryOp, Box<ArithExpr>),
    /// `++x`, `--x`, `x++`, `x--`
    IncDec {
        /// The variable or element changed.
        target: LValue,
        /// `++` rather than `--`.
        increment: bool,
        /// Written before the operand: the value is the new one, not the old one.
        prefix: bool,
    },
    /// `left op right`; `&&` and `||` evaluate their right side only when needed.
    Binary(ArithBinOp, Box<ArithExpr>, Box<ArithExpr>),
    /// `cond ? then : else`: only the chosen branch is evaluated.
    Conditional(Box<ArithExpr>, Box<ArithExpr>, Box<ArithExpr>),
    /// `x = e`, `x += e`, ...; `op` is `None` for plain `=`.
    Assign {
        /// The variable or element assigned.
        target: LValue,
        /// The operator of a compound assignment (`+` for `+=`).
        op: Option<ArithBinOp>,
        /// The right side; the assignment's value is the value stored.
        value: Box<ArithExpr>,
    },
}

/// What an arithmetic assignment or `++`/`--` changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LValue {
    /// A variable (element 0 when it is an array).
    Var(String),
    /// `name[index]`: an array element; the index is a key for an associative array.
    Elem(String, Box<ArithExpr>),
}

/// A prefix operator of arithmetic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArithUnaryOp {
    /// `-x`
    Neg,
    /// `+x`
    Plus,
    /// `!x`: 1 when `x` is 0, else 0.
    Not,
    /// `~x`
    BitNot,
}

/// A binary operator of arithmetic; comparisons and logical operators yield 1 or 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArithBinOp {
    /// `a, b`: both evaluated, the value is `b`.
    Comma,
    /// `||`
    LogOr,
    /// `&&`
    LogAnd,
    /// `|`
    BitOr,
    /// `^`
    BitXor,
    /// `&`
    BitAnd,
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `<<`
    Shl,
    /// `>>` (arithmetic: keeps the sign)
    Shr,
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`: truncates toward zero; dividing by 0 is an error.
    Div,
    /// `%`: the sign of the dividend; by 0 is an error.
    Rem,
    /// `**`: a negative exponent is an error.
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
