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
