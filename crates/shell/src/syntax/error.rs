//! Syntax errors, and how bash words them for each kind of source.

use thiserror::Error;

/// A syntax error, positioned at the offending token (1-based line and column).
///
/// `message` is shaped like bash's own (`syntax error near unexpected token `fi'`), so the
/// interpreter can print it exactly as bash would, see [`ParseError::render`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("line {line}, column {column}: {message}")]
pub struct ParseError {
    /// 1-based line of the offending token in the parsed text.
    pub line: usize,
    /// 1-based column (in characters) of the offending token on its line.
    pub column: usize,
    /// The text bash prints after `line N: ` (empty for a `[[ ]]` error bash says nothing
    /// about).
    pub message: String,
    /// What kind of error it is, which decides what the interpreter does with it.
    pub kind: ParseErrorKind,
}

/// What kind of syntax error a [`ParseError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseErrorKind {
    /// `syntax error near unexpected token ...`: bash prints the offending line after it.
    UnexpectedToken,
    /// The text ended inside a construct (`unexpected EOF while looking for ...`, `unexpected
    /// end of file`): more lines may complete it.
    Incomplete,
    /// An error inside `[[ ]]`: bash drops the line without changing `$?` (and says nothing
    /// at all about a missing operand, `message` is then empty).
    Conditional,
    /// A token that is no word in a compound array assignment's list (`a=( x=() )`): bash
    /// reports it like an unexpected token, drops the rest of its line, sets `$?` to 1 and
    /// reads on (a shell under `set -e` exits 2 instead).
    ArrayLiteral,
    /// Any other.
    Syntax,
}

impl ParseError {
    /// The line bash prints on stderr for this error (without the trailing newline); the
    /// interpreter then exits with status 2, as bash does on a syntax error.
    pub fn render(&self) -> String {
        format!("bash: line {}: {}", self.line, self.message)
    }
}

/// Where a script came from, which decides how bash words its syntax errors.
#[derive(Debug, Clone, Copy)]
pub enum SourceKind<'a> {
    /// `bash -c TEXT` (and a sandbox's command line).
    DashC,
    /// `eval TEXT`.
    Eval,
    /// A script file run by name (`bash x.sh`, `./x.sh`).
    Script(&'a str),
    /// What an interactive shell reads: bash names neither a line nor the text.
    Interactive,
}

impl ParseError {
    /// The text ended inside a construct: more lines may complete it.
    pub fn is_incomplete(&self) -> bool {
        self.kind == ParseErrorKind::Incomplete
    }

    /// An error inside `[[ ]]`: bash drops the line without changing `$?` (and says nothing
    /// at all about a missing operand).
    pub fn keeps_status(&self) -> bool {
        self.kind == ParseErrorKind::Conditional
    }

    /// A bad compound array assignment: the shell drops the line and reads on with `$?` 1.
    pub fn drops_line(&self) -> bool {
        self.kind == ParseErrorKind::ArrayLiteral
    }

    /// The full stderr text bash prints for this error in `source` (newline-terminated): the
    /// message, then the offending line for `near unexpected token` errors.
    pub fn render_in(&self, source: &str, kind: SourceKind<'_>) -> String {
        let (head, line_prefix) = match kind {
            SourceKind::DashC => (
                format!("bash: -c: line {}: ", self.line),
                format!("bash: -c: line {}: ", self.line),
            ),
            SourceKind::Eval => ("bash: ".to_string(), "bash: ".to_string()),
            SourceKind::Interactive => {
                return if self.message.is_empty() {
                    String::new()
                } else {
                    format!("bash: {}\n", self.message)
                };
            }
            SourceKind::Script(name) => (
                format!("{name}: line {}: ", self.line),
                format!("{name}: line {}: ", self.line),
            ),
        };
        if self.message.is_empty() {
            return String::new();
        }
        let mut out = format!("{head}{}\n", self.message);
        if matches!(
            self.kind,
            ParseErrorKind::UnexpectedToken | ParseErrorKind::ArrayLiteral
        ) {
            let text = source
                .lines()
                .nth(self.line.saturating_sub(1))
                .unwrap_or("");
            out.push_str(&format!("{line_prefix}`{text}'\n"));
        }
        out
    }
}
