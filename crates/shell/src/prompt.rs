//! Prompt strings as `${x@P}` expands them: bash's backslash escapes (`\u`, `\w`, `\t`,
//! `\D{fmt}`, `\nnn`, ...) first, then the expansions of a double-quoted string. What an
//! escape inserts (a directory named `$foo`, say) is quoted so that it is not expanded again.

use crate::interp::{FlowResult, Interp};

use crate::builtins::system::USER;

impl Interp {
    /// `${x@P}` of the text `s`.
    pub(crate) fn prompt_expand(&mut self, s: &str) -> FlowResult<String> {
        let decoded = self.decode_prompt(s);
        // `shopt -u promptvars`: the escapes only, the backslashes they left removed.
        if self.shopt_value("promptvars") == Some(false) {
            return Ok(unescape_prompt(&decoded));
        }
        self.expand_dq_text(&decoded)
    }

    fn decode_prompt(&mut self, s: &str) -> String {
        let chars: Vec<char> = s.chars().collect();
        let mut out = String::new();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            i += 1;
            if c != '\\' {
                out.push(c);
                continue;
            }
            let Some(&e) = chars.get(i) else {
                out.push('\\');
                break;
            };
            i += 1;
            let value = match e {
                'a' | 'e' | 'n' | 'r' => {
                    out.push(match e {
                        'a' => '\u{7}',
                        'e' => '\u{1b}',
                        'n' => '\n',
                        _ => '\r',
                    });
                    continue;
                }
                // A literal backslash, left for the expansion that follows (`\\$` is `$`).
                '\\' => {
                    out.push('\\');
                    continue;
                }
                // Readline's invisible-text markers (\001, \002) where bash edits lines, in
                // an interactive shell; nothing elsewhere.
                '[' | ']' => {
                    if self.st.opts.interactive {
                        out.push(if e == '[' { '\u{1}' } else { '\u{2}' });
                    }
                    continue;
                }
                '$' => {
                    out.push_str(if USER.0 == 0 { "#" } else { "\\$" });
                    continue;
                }
                '0'..='7' => {
                    let mut n = e.to_digit(8).unwrap_or(0);
                    let mut digits = 1;
                    while digits < 3
                        && let Some(d) = chars.get(i).and_then(|c| c.to_digit(8))
                    {
                        n = n * 8 + d;
                        i += 1;
                        digits += 1;
                    }
                    out.push(char::from((n & 0xff) as u8));
                    continue;
                }
                'd' => self.prompt_time("%a %b %d"),
                'D' if chars.get(i) == Some(&'{') => {
                    let rest: String = chars[i + 1..].iter().collect();
                    match rest.find('}') {
                        Some(end) => {
                            let fmt = &rest[..end];
                            i += 1 + fmt.chars().count() + 1;
                            self.prompt_time(if fmt.is_empty() { "%X" } else { fmt })
                        }
                        None => {
                            out.push_str("\\D");
                            continue;
                        }
                    }
                }
                't' => self.prompt_time("%H:%M:%S"),
                'T' => self.prompt_time("%I:%M:%S"),
                '@' => self.prompt_time("%I:%M %p"),
                'A' => self.prompt_time("%H:%M"),
                'h' | 'H' => {
                    let host = self.host_name();
                    if e == 'h' {
                        host.split('.').next().unwrap_or("").to_string()
                    } else {
                        host
                    }
                }
                // Jobs still running, a subshell's (`echo "${PS1@P}" | grep`) counting those
                // of the shell it came from, as bash's copied job table does.
                'j' => (self.jobs.iter().filter(|j| j.commands_running()).count()
                    + self.parent_jobs.iter().filter(|v| v.is_running()).count())
                .to_string(),
                // No terminal: bash shows "tty".
                'l' => "tty".to_string(),
                's' => self
                    .st
                    .arg0
                    .rsplit('/')
                    .next()
                    .unwrap_or("bash")
                    .to_string(),
                'u' => USER.1.to_string(),
                'v' => "5.2".to_string(),
                'V' => "5.2.15".to_string(),
                'w' | 'W' => {
                    let cwd = self.get_var("PWD").unwrap_or_else(|| self.st.cwd.clone());
                    let home = self.get_var("HOME").filter(|h| !h.is_empty());
                    match home {
                        Some(h) if cwd == h => "~".to_string(),
                        Some(h) if e == 'w' && cwd.starts_with(&format!("{h}/")) => {
                            format!("~{}", &cwd[h.len()..])
                        }
                        _ if e == 'W' && cwd != "/" => {
                            cwd.rsplit('/').next().unwrap_or("").to_string()
                        }
                        _ => cwd,
                    }
                }
                // The number the command being read has in the history; 1 while the shell
                // keeps none, as in bash.
                '!' => if self.keeps_history() {
                    self.st.history_base + self.st.history_offset
                } else {
                    1
                }
                .to_string(),
                '#' => self.st.command_number.to_string(),
                other => {
                    out.push('\\');
                    out.push(other);
                    continue;
                }
            };
            // Inserted text is not expanded again.
            for ch in value.chars() {
                if matches!(ch, '\\' | '$' | '`') {
                    out.push('\\');
                }
                out.push(ch);
            }
        }
        out
    }

    /// The `TZ` the clock functions see: as in bash, only an exported one reaches them.
    pub(crate) fn clock_zone(&self) -> Option<String> {
        self.st
            .vars
            .get("TZ")
            .filter(|v| v.has(crate::vars::ATTR_EXPORT))
            .and_then(|v| v.scalar_value().map(str::to_string))
    }

    /// The current time as `strftime` would format it, in the zone of an exported `TZ`.
    fn prompt_time(&self, fmt: &str) -> String {
        let now = (crate::interp::wall_clock_ns(&self.rt.vfs) / 1_000_000_000) as i64;
        crate::printf::format_time(fmt, now, self.clock_zone().as_deref())
    }
}

/// A decoded prompt without the expansion step: a backslash before `\\`, `$`, `` ` `` or `"`
/// goes, as the double-quoted reading would have removed it.
fn unescape_prompt(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\'
            && let Some(&n) = chars.peek()
            && matches!(n, '\\' | '$' | '`' | '"')
        {
            out.push(n);
            chars.next();
            continue;
        }
        out.push(c);
    }
    out
}
