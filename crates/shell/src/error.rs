use thiserror::Error;

/// A syntax error, positioned at the offending token (1-based line and column).
///
/// `message` is shaped like bash's own (`syntax error near unexpected token `fi'`), so the
/// interpreter can print it exactly as bash would, see [`ParseError::render`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("line {line}, column {column}: {message}")]
pub struct ParseError {
    pub line: usize,
    pub column: usize,
    pub message: String,
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
}

impl ParseError {
    /// An error inside `[[ ]]`: bash drops the line without changing `$?` (and says nothing
    /// at all about a missing operand).
    /// The text ended inside a construct: more lines may complete it.
    pub fn is_incomplete(&self) -> bool {
        self.message.contains("unexpected EOF") || self.message.contains("unexpected end of file")
    }

    pub fn keeps_status(&self) -> bool {
        self.message.is_empty() || self.message.contains("conditional")
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
            SourceKind::Script(name) => (
                format!("{name}: line {}: ", self.line),
                format!("{name}: line {}: ", self.line),
            ),
        };
        if self.message.is_empty() {
            return String::new();
        }
        let mut out = format!("{head}{}\n", self.message);
        if self.message.starts_with("syntax error near") {
            let text = source
                .lines()
                .nth(self.line.saturating_sub(1))
                .unwrap_or("");
            out.push_str(&format!("{line_prefix}`{text}'\n"));
        }
        out
    }
}
