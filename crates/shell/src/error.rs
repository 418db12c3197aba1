use thiserror::Error;

pub use crate::syntax::error::{ParseError, ParseErrorKind, SourceKind};

/// What went wrong while running a script, short of control flow (`crate::interp::Flow`).
///
/// `Display` is the text bash prints after `bash: line N: ` (the conformance corpus compares
/// stderr with bash's, so the wording is bash's, not ours); callers match on the variant
/// instead of the text.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ShellError {
    /// The descriptor is closed, or not open for the operation.
    #[error("Bad file descriptor")]
    BadFd,
    /// A pipe or output stream failed; `message` is what bash prints for it (`Broken pipe`).
    #[error("{message}")]
    Io {
        /// The kind of the underlying I/O error (`BrokenPipe` for a closed reader).
        kind: std::io::ErrorKind,
        /// The text printed for it.
        message: String,
    },
    /// The file tree refused an operation (`No such file or directory`, `Read-only file
    /// system`, ...).
    #[error("{}", strerror(*.0))]
    Fs(wasmsand_vfs::Errno),
    /// A value longer than [`crate::ShellLimits`]'s `max_word_bytes`.
    #[error("{name}: value too large ({len} bytes, limit: {limit})")]
    TooLarge {
        /// The variable the value was assigned to.
        name: String,
        /// Its size in bytes.
        len: usize,
        /// The limit in bytes.
        limit: usize,
    },
    /// The file tree refused an operation on a path the user named (`cd: x: No such file or
    /// directory`).
    #[error("{path}: {}", strerror(*errno))]
    Path {
        /// The path as the user wrote it.
        path: String,
        /// Why the file tree refused it.
        errno: wasmsand_vfs::Errno,
    },
    /// A redirection names a descriptor that is not open, or past the highest one
    /// (`3>&-; echo >&3`).
    #[error("{0}: Bad file descriptor")]
    BadFdNamed(String),
    /// A redirection's word expanded to no word or to several (`> $empty`, `> *.txt`).
    #[error("{0}: ambiguous redirect")]
    AmbiguousRedirect(String),
    /// `{name}>file` with every descriptor from 10 up in use.
    #[error("{0}: Too many open files")]
    TooManyFiles(String),
    /// A failure whose message was printed where it happened.
    #[error("")]
    Reported,
    /// `{name}>file` where `name` cannot take the descriptor's number (readonly).
    #[error("{0}: cannot assign fd to variable")]
    FdVariable(String),
    /// `> file` under `set -o noclobber` when the file exists.
    #[error("{0}: cannot overwrite existing file")]
    Clobber(String),
    /// An assignment to a variable whose `declare -n` chain comes back to itself
    /// (`declare -n a=b b=a; a=1`); bash warns and the assignment fails.
    #[error("warning: {0}: circular name reference")]
    CircularRef(String),
    /// A name that cannot be assigned as asked: an element or list through a `declare -n`
    /// whose target is itself an element (`declare -n r='a[0]'; r[1]=x`).
    #[error("`{0}': not a valid identifier")]
    InvalidIdentifier(String),
    /// An assignment to a readonly variable.
    #[error("{0}: readonly variable")]
    Readonly(String),
    /// `unset` of a readonly variable.
    #[error("unset: {0}: cannot unset: readonly variable")]
    CannotUnset(String),
    /// A subscript that is not a valid index or key (`a[x y]`, `a[-9]` past the start).
    #[error("{0}: bad array subscript")]
    BadSubscript(String),
    /// An arithmetic error in an indexed array's subscript (`a[1+]=x`): bash prints it and
    /// the shell exits with status 1.
    #[error("{0}")]
    SubscriptArith(String),
    /// An arithmetic error, worded by the evaluator (`1/0: division by 0 (error token is
    /// "0")`).
    #[error("{0}")]
    Arith(String),
    /// A bad operand or operator of `test`/`[`/`[[ ]]` (`x: integer expression expected`,
    /// `-q: unary operator expected`).
    #[error("{0}")]
    Test(String),
    /// `[[ s =~ re ]]` with an invalid `re`: bash prints nothing and the status is 2.
    #[error("")]
    BadRegex,
    /// An argument a builtin refuses, worded as bash words it for that builtin
    /// (`x: Not a directory`, `` `z': invalid symbolic mode operator``).
    #[error("{0}")]
    Usage(String),
    /// A wasm module that could not be compiled or instantiated.
    #[error("{0}")]
    Load(String),
}

impl ShellError {
    /// An error of a pipe or stream, with the text bash prints for it.
    pub fn io(e: &std::io::Error) -> ShellError {
        let message = match e.kind() {
            std::io::ErrorKind::BrokenPipe => "Broken pipe".to_string(),
            _ => e.to_string(),
        };
        ShellError::Io {
            kind: e.kind(),
            message,
        }
    }

    /// A broken pipe: the reader went away (bash's SIGPIPE).
    pub fn is_broken_pipe(&self) -> bool {
        matches!(
            self,
            ShellError::Io {
                kind: std::io::ErrorKind::BrokenPipe,
                ..
            }
        )
    }
}

/// Why [`crate::ShellState::from_portable`] refused a description.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum StateError {
    /// Not the shape `to_portable` writes; serde's account of where it differs.
    #[error("shell state: {0}")]
    Malformed(String),
    /// A function's text does not parse.
    #[error("shell state: {0}")]
    FunctionSyntax(ParseError),
    /// A function's text parses, but not to one function definition.
    #[error("shell state: not a function definition: {0:?}")]
    NotAFunction(String),
}

/// The `strerror` text bash prints (`No such file or directory`).
pub(crate) fn strerror(e: wasmsand_vfs::Errno) -> String {
    let d = e.description();
    let mut c = d.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}
