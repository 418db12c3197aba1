//! A shell reading its commands from its standard input (`bash < file`, `... | bash`,
//! `bash -s`, `bash -i`): one complete command at a time, each line read only when the
//! command needs it, as bash reads a pipe. What follows is still there for the commands
//! themselves, so `read` or `cat` in the script reads the script's next lines, as in bash.

use crate::ParseError;
use crate::ast::Script;
use crate::interp::{FlowResult, Interp};
use crate::syntax::parser::parse_chunk;

/// Past this many lines into one command, its text is parsed again only each time it has
/// doubled: a command thousands of lines long must not cost a parse per line (quadratic).
/// Such a command may then be read together with a few lines after it.
const LINES_PARSED_ONE_BY_ONE: usize = 256;

/// The lines read so far from descriptor 0, kept for the history and for error messages;
/// or the lines of a text the shell has whole ([`InputLines::from_text`]).
#[derive(Default)]
pub(crate) struct InputLines {
    pub lines: Vec<String>,
    eof: bool,
    /// Read from descriptor 0 (not a text given whole).
    streaming: bool,
}

impl InputLines {
    /// Reads from descriptor 0.
    pub(crate) fn stdin() -> Self {
        InputLines {
            streaming: true,
            ..Self::default()
        }
    }

    /// The lines of `text`, all there already.
    pub(crate) fn from_text(text: &str) -> Self {
        InputLines {
            lines: text.split_inclusive('\n').map(str::to_string).collect(),
            eof: true,
            streaming: false,
        }
    }

    /// Reads one more line from descriptor 0 (a byte at a time, so nothing past it is taken
    /// from whoever reads next); false at the end of the input.
    fn read_line(&mut self, it: &mut Interp) -> FlowResult<bool> {
        if self.eof {
            return Ok(false);
        }
        let mut buf = Vec::new();
        loop {
            match it.read_byte(0)? {
                Some(b) => {
                    buf.push(b);
                    if b == b'\n' {
                        break;
                    }
                    if buf.len() > it.st.limits.max_word_bytes {
                        return Err(it.limit("bash: script line on stdin too large".into()));
                    }
                }
                None => {
                    self.eof = true;
                    break;
                }
            }
        }
        if buf.is_empty() {
            return Ok(false);
        }
        // bash drops NUL bytes from what it reads as script text.
        self.lines
            .push(wasmsand_exec::raw::decode_vec(buf).replace('\0', ""));
        Ok(true)
    }

    /// The text read so far, for error messages that quote a line.
    pub(crate) fn text(&self) -> String {
        self.lines.concat()
    }

    /// The next complete command from line `start` (as few whole lines as make it complete,
    /// read as needed) and the line after it; `Ok(None)` at the end of the input. As
    /// [`crate::next_chunk`] does with text it has whole.
    pub(crate) fn next_chunk(
        &mut self,
        it: &mut Interp,
        start: usize,
    ) -> FlowResult<Option<Result<(Script, usize), ParseError>>> {
        if start >= self.lines.len() && !self.read_line(it)? {
            return Ok(None);
        }
        let mut end = start + 1;
        let mut next_parse = end;
        loop {
            let text: String = self.lines[start..end].concat();
            let continued = crate::ends_in_continuation(&text);
            let parsed = if continued || end < next_parse {
                None
            } else {
                let mut opts = it.parse_options();
                opts.line_base = start + 1;
                Some(parse_chunk(&text, &opts))
            };
            let wants_more = match &parsed {
                None => true,
                Some(Ok((_, more))) => *more,
                Some(Err(e)) => e.is_incomplete(),
            };
            if wants_more && (end < self.lines.len() || self.read_line(it)?) {
                end += 1;
                if parsed.is_some() {
                    let lines = end - start;
                    next_parse = if self.streaming && lines > LINES_PARSED_ONE_BY_ONE {
                        start + 2 * (lines - 1)
                    } else {
                        end
                    };
                }
                continue;
            }
            let result = match parsed {
                Some(r) => r,
                // The input ended inside a line continuation or before a planned parse.
                None => {
                    let mut opts = it.parse_options();
                    opts.line_base = start + 1;
                    parse_chunk(&text, &opts)
                }
            };
            return Ok(Some(result.map(|(script, _)| (script, end))));
        }
    }
}
