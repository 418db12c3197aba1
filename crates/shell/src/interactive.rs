//! `bash -i` as bash runs it without a terminal, which is always the case in the sandbox: the
//! start-up files, then either the `-c` text or the shell's input read a complete command at
//! a time, each with `PROMPT_COMMAND` and its prompt written to stderr followed by the line
//! read (readline echoes what it reads when its input is no terminal), errors that never end
//! the shell, and the history list kept and saved to `HISTFILE`. A non-interactive shell
//! shares the history list's upkeep under `set -o history`.

use crate::input::InputLines;
use crate::interp::{Flow, Interp};
use crate::vars::{Value, Var};

/// What `bash -i` sources before its first command (`--norc`, `--rcfile FILE`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Startup {
    pub norc: bool,
    pub rcfile: Option<String>,
}

/// Debian's bash sources this before the user's file, `--rcfile` or not.
const SYSTEM_BASHRC: &str = "/etc/bash.bashrc";

impl Interp {
    /// Whether commands read go into the history list (`set -o history`).
    pub(crate) fn keeps_history(&self) -> bool {
        self.st.opts.extra.contains("history")
    }

    /// Turns this shell interactive: what bash says when it finds no terminal to control, the
    /// options and variables an interactive bash starts with, then the start-up files. An
    /// `exit` in one of those ends the shell (`Err(Flow::Exit)`). A shell that reads its
    /// input (no `-c`) then sizes its history and loads it from `HISTFILE`.
    pub(crate) fn start_interactive(
        &mut self,
        startup: &Startup,
        reads_input: bool,
    ) -> Result<(), Flow> {
        self.err_raw(&format!(
            "bash: cannot set terminal process group ({}): Inappropriate ioctl for device\n\
             bash: no job control in this shell\n",
            self.shell_pid()
        ));
        self.st.opts.interactive = true;
        for name in ["emacs", "history", "histexpand"] {
            self.set_option(name, true);
        }
        self.set_shopt("expand_aliases", true);
        let home = self.get_var("HOME").unwrap_or_default();
        let defaults = [
            ("PS1", "\\s-\\v\\$ ".to_string()),
            ("PS2", "> ".to_string()),
            ("HISTFILE", format!("{home}/.bash_history")),
        ];
        for (name, value) in defaults {
            if self.st.vars.get(name).is_none() {
                self.st.vars.put(name, Var::scalar(value.as_str()));
            }
        }
        self.sync_option_vars();
        if !startup.norc {
            let user = startup
                .rcfile
                .clone()
                .unwrap_or_else(|| format!("{home}/.bashrc"));
            for file in [SYSTEM_BASHRC.to_string(), user] {
                let path = wasmsand_vfs::path::join(&self.st.cwd, &file);
                let readable = self
                    .rt
                    .vfs
                    .lock()
                    .stat(&path)
                    .is_ok_and(|m| m.file_type != wasmsand_vfs::FileType::Dir);
                // A missing start-up file is skipped without a word, as in bash.
                if readable {
                    match self.source_path(&file, &path, &[]) {
                        Err(Flow::Exit(s)) => return Err(Flow::Exit(s)),
                        Err(Flow::Abort(a)) => return Err(Flow::Abort(a)),
                        _ => {}
                    }
                }
            }
        }
        if reads_input {
            self.load_history_file();
        }
        Ok(())
    }

    /// Sizes the history as bash's `load_history` does (`HISTSIZE` 500 unless set,
    /// `HISTFILESIZE` as `HISTSIZE`, the file cut to it) and reads the file `HISTFILE` names
    /// into the list.
    fn load_history_file(&mut self) {
        if self.st.vars.get("HISTSIZE").is_none() {
            self.st.vars.put("HISTSIZE", Var::scalar("500"));
        }
        if self.st.vars.get("HISTFILESIZE").is_none() {
            let size = self.get_var("HISTSIZE").unwrap_or_default();
            self.st.vars.put("HISTFILESIZE", Var::scalar(size));
        }
        if let Some(n) = self
            .get_var("HISTFILESIZE")
            .and_then(|v| v.trim().parse::<usize>().ok())
        {
            self.truncate_history_file(n);
        }
        let Some(file) = self.get_var("HISTFILE").filter(|f| !f.is_empty()) else {
            return;
        };
        let path = wasmsand_vfs::path::join(&self.st.cwd, &file);
        let Ok(data) = self.rt.vfs.lock().read(&path) else {
            return;
        };
        let text = wasmsand_exec::raw::decode(&data);
        let mut count = 0;
        for line in text.lines() {
            self.st.history.push_back(line.to_string());
            count += 1;
        }
        self.st.history_lines_read = count;
        self.truncate_history(true);
    }

    /// The interactive shell reading its input (see [`InputLines`]): before each command,
    /// `PROMPT_COMMAND`, then the prompt (`PS1`, `PS2` for each further line) and the lines on
    /// stderr; the command goes into the history and runs. A syntax error or a fatal error
    /// ends only that command. At the end of the input: `exit` after the prompt.
    pub(crate) fn run_interactive(&mut self) -> i32 {
        let mut input = InputLines::stdin();
        let mut start = 0;
        let mut status = self.st.status;
        self.st.command_number = 1;
        loop {
            self.prompt_command();
            self.st.history_offset = self.st.history.len();
            let ps1 = self.prompt_text("PS1");
            let parsed = match input.next_chunk(self, start) {
                Ok(Some(parsed)) => parsed,
                Ok(None) => {
                    self.err_raw(&format!("{ps1}exit\n"));
                    return status;
                }
                Err(f) => return crate::flow_status(self, f),
            };
            let end = match &parsed {
                Ok((_, end)) => *end,
                Err(e) => e.line.clamp(start + 1, input.lines.len()),
            };
            let text = input.text();
            let lines: Vec<&str> = input.lines.iter().map(String::as_str).collect();
            let mut echo = ps1;
            for (k, line) in lines[start..end].iter().enumerate() {
                if k > 0 {
                    echo.push_str(&self.prompt_text("PS2"));
                }
                echo.push_str(line);
                if !line.ends_with('\n') {
                    echo.push('\n');
                }
            }
            self.err_raw(&echo);
            self.remember(&lines[start..end]);
            match parsed {
                Ok((script, _)) => {
                    let r = crate::run_items(self, &script);
                    // A command that did not parse is not counted.
                    self.st.command_number += 1;
                    match r {
                        Ok(s) => status = s,
                        Err(Flow::Exit(s)) => return s,
                        Err(f @ Flow::Abort(_)) => return crate::flow_status(self, f),
                        Err(f) => status = crate::flow_status(self, f),
                    }
                }
                // The input ended inside a command: bash asks for more with `PS2`, then
                // gives up and exits.
                Err(e) if e.is_incomplete() => {
                    let ps2 = self.prompt_text("PS2");
                    self.err_raw(&format!(
                        "{ps2}{}exit\n",
                        e.render_in(&text, crate::SourceKind::Interactive)
                    ));
                    return 2;
                }
                Err(e) => {
                    self.err_raw(&e.render_in(&text, crate::SourceKind::Interactive));
                    status = if e.keeps_status() { self.st.status } else { 2 };
                }
            }
            self.st.status = status;
            start = end;
        }
    }

    /// `PROMPT_COMMAND` (each element of it when it is an array), before a prompt. Its errors
    /// are reported and forgotten, and `$?` stays what the last command left.
    fn prompt_command(&mut self) {
        let commands: Vec<String> = match self.st.vars.get("PROMPT_COMMAND").map(|v| &v.value) {
            Some(Value::Str(s)) => vec![s.clone()],
            Some(Value::Indexed(a)) => a.values().cloned().collect(),
            Some(Value::Assoc(m)) => m.values().cloned().collect(),
            _ => return,
        };
        let status = self.st.status;
        for c in commands {
            if let Err(Flow::Exit(s)) = self.eval_string(&c) {
                // `exit` in PROMPT_COMMAND ends the shell at the next command's end, as the
                // status it leaves; the sandbox has no terminal to keep open.
                self.st.status = s;
            }
        }
        self.st.status = status;
    }

    /// A prompt variable expanded as bash shows it (`\u`, `$var`, ...); empty when unset.
    fn prompt_text(&mut self, name: &str) -> String {
        let raw = self.get_var(name).unwrap_or_default();
        // A command substitution in the prompt leaves `$?` as the last command set it.
        let status = self.st.status;
        let text = self.prompt_expand(&raw).unwrap_or(raw);
        self.st.status = status;
        // Readline shows the prompt without its markers of invisible text.
        text.replace(['\u{1}', '\u{2}'], "")
    }

    /// Adds a command read as `lines` to the history, joined as bash's `cmdhist` joins the
    /// lines of one command, and subject to `HISTCONTROL` and `HISTIGNORE`.
    pub(crate) fn remember(&mut self, lines: &[&str]) {
        if !self.keeps_history() {
            return;
        }
        // Whether this line is the history's last entry, which `fc` and `history -s` then
        // take for their own command line (bash's `hist_last_line_added`).
        self.st.history_last_added = false;
        let entry = join_history_lines(lines);
        if entry.trim().is_empty() {
            return;
        }
        let control = self.get_var("HISTCONTROL").unwrap_or_default();
        let control: Vec<&str> = control.split(':').collect();
        let has =
            |c: &str| control.contains(&c) || (c != "erasedups" && control.contains(&"ignoreboth"));
        if has("ignorespace") && entry.starts_with(' ') {
            return;
        }
        if has("ignoredups") && self.st.history.back() == Some(&entry) {
            return;
        }
        if let Some(ignore) = self.get_var("HISTIGNORE").filter(|s| !s.is_empty()) {
            let previous = self.st.history.back().cloned().unwrap_or_default();
            let hit = ignore.split(':').filter(|p| !p.is_empty()).any(|p| {
                // `&` stands for the previous history entry.
                let pat = p.replace('&', &crate::pattern::escape(&previous));
                crate::pattern::matches(&pat, &entry)
            });
            if hit {
                return;
            }
        }
        if has("erasedups") {
            self.st.history.retain(|e| e != &entry);
        }
        self.st.history.push_back(entry);
        self.st.history_new += 1;
        self.st.history_last_added = true;
        self.st.history_pushed = false;
        self.truncate_history(true);
    }

    /// Keeps the list to `$HISTSIZE` entries, the newest. Readline numbers what is left as
    /// it does: an entry pushed out by one added moves the numbers on by one, but cutting
    /// the list to a new size numbers it from the count of entries dropped (bash's
    /// `stifle_history`), however far it had moved on before.
    pub(crate) fn truncate_history(&mut self, adding: bool) {
        let Some(n) = self
            .get_var("HISTSIZE")
            .and_then(|v| v.trim().parse::<usize>().ok())
        else {
            return;
        };
        let dropped = self.st.history.len().saturating_sub(n);
        if dropped == 0 {
            return;
        }
        self.st.history = self.st.history.skip(dropped);
        if adding {
            self.st.history_base += dropped;
        } else {
            self.st.history_base = dropped;
        }
    }

    /// At the shell's end, as bash's `maybe_save_shell_history`: the commands this shell added
    /// and `history -a` did not write yet are appended to `HISTFILE` (the whole list is
    /// written instead when `HISTSIZE` dropped some of them), and the file is cut to
    /// `HISTFILESIZE` lines.
    pub(crate) fn save_history(&mut self) {
        let new = self.st.history_new;
        if new == 0 {
            return;
        }
        let Some(file) = self.get_var("HISTFILE").filter(|f| !f.is_empty()) else {
            return;
        };
        let path = wasmsand_vfs::path::join(&self.st.cwd, &file);
        let entries: Vec<String> = self.st.history.iter().cloned().collect();
        let (mut text, added) = if new <= entries.len() {
            let old = self
                .rt
                .vfs
                .lock()
                .read(&path)
                .map(|d| d.to_vec())
                .unwrap_or_default();
            let mut old = wasmsand_exec::raw::decode_vec(old);
            if !old.is_empty() && !old.ends_with('\n') {
                old.push('\n');
            }
            (old, &entries[entries.len() - new..])
        } else {
            (String::new(), &entries[..])
        };
        for e in added {
            text.push_str(e);
            text.push('\n');
        }
        // A file the shell cannot write is left as it is, as bash leaves it.
        if self
            .rt
            .vfs
            .lock()
            .write(&path, wasmsand_exec::raw::encode(&text))
            .is_ok()
        {
            self.st.history_new = 0;
            if let Some(n) = self
                .get_var("HISTFILESIZE")
                .and_then(|v| v.trim().parse::<usize>().ok())
            {
                self.truncate_history_file(n);
            }
        }
    }
}

/// The lines of one command as one history entry: a line ending inside quotes or a
/// here-document keeps its newline; after a word that a command cannot end with (`then`,
/// `do`, `|`, `&&`, `{`, ...) the next line follows a blank, else a `;` and a blank.
fn join_history_lines(lines: &[&str]) -> String {
    let mut entry = String::new();
    let mut scan = LineScan::default();
    let mut continued = false;
    for (k, line) in lines.iter().enumerate() {
        let mut body = line.strip_suffix('\n').unwrap_or(line);
        if k > 0 && !continued {
            if scan.keeps_newline() {
                entry.push('\n');
            } else if body.trim().is_empty() {
                scan.line(body);
                continue;
            } else if scan.wants_blank() {
                entry.push(' ');
            } else {
                entry.push_str("; ");
            }
        }
        // A line continuation outside quotes joins the next line directly, as bash reads it.
        continued = false;
        if scan.quote != Some('\'') && !scan.in_body && line.ends_with("\\\n") {
            let run = body.bytes().rev().take_while(|&b| b == b'\\').count();
            if run % 2 == 1 {
                body = &body[..body.len() - 1];
                continued = true;
            }
        }
        entry.push_str(body);
        scan.line(body);
    }
    // A command that ends with a here-document's body keeps the newline after it.
    if scan.body_ended {
        entry.push('\n');
    }
    entry
}

/// Just enough of the shell's lexing to join a command's lines as bash's history does: open
/// quotes, here-documents whose bodies follow, and the last token of a line.
#[derive(Default)]
struct LineScan {
    /// The quote open at the end of the last line: `'`, `"` or `` ` ``.
    quote: Option<char>,
    /// Delimiters of here-documents whose bodies have not ended, the first one's body next.
    heredocs: Vec<String>,
    /// Inside a here-document's body.
    in_body: bool,
    /// The last line ended a here-document's body.
    body_ended: bool,
    /// The last token: an operator, or a word with whether it was a reserved word.
    last: Token,
    /// The next word starts a command (so a reserved word there is one).
    command_start: bool,
    /// The words of the current simple command so far (`for x in`: `in` is reserved third).
    words: Vec<String>,
}

#[derive(Default, PartialEq)]
enum Token {
    #[default]
    None,
    Operator(String),
    Word(String, bool),
}

/// Reserved words after which bash joins the next line with a blank.
const JOIN_WITH_BLANK: &[&str] = &[
    "{", "case", "do", "else", "if", "then", "until", "while", "in", "elif",
];
const RESERVED: &[&str] = &[
    "!", "{", "}", "case", "do", "done", "elif", "else", "esac", "fi", "for", "function", "if",
    "in", "select", "then", "time", "until", "while", "[[", "]]", "coproc",
];

impl LineScan {
    fn keeps_newline(&self) -> bool {
        self.quote.is_some() || self.in_body || !self.heredocs.is_empty()
    }

    fn wants_blank(&self) -> bool {
        match &self.last {
            Token::None => true,
            Token::Operator(op) => !op.starts_with(['<', '>']),
            Token::Word(w, reserved) => *reserved && JOIN_WITH_BLANK.contains(&w.as_str()),
        }
    }

    fn word(&mut self, w: String) {
        let reserved = if self.command_start && RESERVED.contains(&w.as_str()) {
            true
        } else {
            w == "in"
                && self.words.len() == 2
                && matches!(self.words[0].as_str(), "for" | "case" | "select")
        };
        self.command_start = reserved && !matches!(w.as_str(), "}" | "done" | "fi" | "esac" | "]]");
        if reserved && w == "in" {
            // `case x in`: a pattern comes next, which is no command.
            self.command_start = self.words.first().is_some_and(|f| f != "case");
        }
        self.words.push(w.clone());
        if self.words.len() == 2 && matches!(self.words[0].as_str(), "for" | "case" | "select") {
            self.command_start = false;
        }
        self.last = Token::Word(w, reserved);
    }

    fn operator(&mut self, op: &str) {
        self.command_start = !op.starts_with(['<', '>']);
        if self.command_start {
            self.words.clear();
        }
        self.last = Token::Operator(op.to_string());
    }

    fn line(&mut self, line: &str) {
        self.body_ended = false;
        if self.in_body || (self.quote.is_none() && !self.heredocs.is_empty()) {
            let delim = self.heredocs.first().cloned().unwrap_or_default();
            if line.trim_start_matches('\t') == delim {
                self.heredocs.remove(0);
                self.in_body = !self.heredocs.is_empty();
                self.body_ended = self.heredocs.is_empty();
            } else {
                self.in_body = true;
            }
            return;
        }
        if self.quote.is_none() {
            self.command_start = true;
            self.words.clear();
        }
        let b: Vec<char> = line.chars().collect();
        let mut i = 0;
        let mut word = String::new();
        while i < b.len() {
            let c = b[i];
            if let Some(q) = self.quote {
                if c == q {
                    self.quote = None;
                } else if c == '\\' && q != '\'' {
                    word.push(c);
                    i += 1;
                }
                if let Some(&c) = b.get(i) {
                    word.push(c);
                }
                i += 1;
                continue;
            }
            match c {
                '\'' | '"' | '`' => {
                    self.quote = Some(c);
                    word.push(c);
                }
                '\\' => {
                    word.push(c);
                    if let Some(&n) = b.get(i + 1) {
                        word.push(n);
                    }
                    i += 1;
                }
                '#' if word.is_empty() => break,
                ' ' | '\t' => {
                    if !word.is_empty() {
                        self.word(std::mem::take(&mut word));
                    }
                }
                '<' if b.get(i + 1) == Some(&'<') && b.get(i + 2) != Some(&'<') => {
                    if !word.is_empty() {
                        self.word(std::mem::take(&mut word));
                    }
                    i += 2;
                    if b.get(i) == Some(&'-') {
                        i += 1;
                    }
                    while b.get(i).is_some_and(|c| *c == ' ' || *c == '\t') {
                        i += 1;
                    }
                    let mut delim = String::new();
                    while let Some(&c) = b.get(i) {
                        if matches!(c, ' ' | '\t' | ';' | '|' | '&' | ')' | '<' | '>') {
                            break;
                        }
                        if c != '\'' && c != '"' && c != '\\' {
                            delim.push(c);
                        }
                        i += 1;
                    }
                    self.heredocs.push(delim.clone());
                    // The delimiter is the redirection's word, no command's.
                    self.last = Token::Word(delim, false);
                    continue;
                }
                ';' | '&' | '|' | '(' | ')' | '<' | '>' => {
                    if !word.is_empty() {
                        self.word(std::mem::take(&mut word));
                    }
                    let mut op = String::from(c);
                    while let Some(&n) = b.get(i + 1) {
                        let longer = format!("{op}{n}");
                        if matches!(
                            longer.as_str(),
                            ";;" | ";&"
                                | ";;&"
                                | "&&"
                                | "||"
                                | "|&"
                                | ">>"
                                | ">&"
                                | "<&"
                                | "&>"
                                | "&>>"
                                | "<>"
                                | ">|"
                        ) {
                            op = longer;
                            i += 1;
                        } else {
                            break;
                        }
                    }
                    self.operator(&op);
                }
                _ => word.push(c),
            }
            i += 1;
        }
        if !word.is_empty() && self.quote.is_none() {
            self.word(word);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::join_history_lines;

    #[test]
    fn lines_of_one_command_join_as_bash_keeps_them() {
        let j = |s: &str| join_history_lines(&s.split_inclusive('\n').collect::<Vec<_>>());
        assert_eq!(j("if true\nthen echo b\nfi\n"), "if true; then echo b; fi");
        assert_eq!(
            j("for i in 1 2\ndo echo $i\ndone\n"),
            "for i in 1 2; do echo $i; done"
        );
        assert_eq!(j("echo \"a\nb\"\n"), "echo \"a\nb\"");
        assert_eq!(j("cat <<E\nx\nE\n"), "cat <<E\nx\nE\n");
        assert_eq!(
            j("if true\nthen\n  echo in\nfi\n"),
            "if true; then   echo in; fi"
        );
        assert_eq!(j("echo then\nls\n"), "echo then; ls");
        assert_eq!(j("f() {\n  echo x\n}\n"), "f() {   echo x; }");
        assert_eq!(j("echo \"q\nr\" \\\n s\n"), "echo \"q\nr\"  s");
        assert_eq!(
            j("case x in\nx) echo y;;\nesac\n"),
            "case x in x) echo y;; esac"
        );
        assert_eq!(j("a |\nb &&\nc\n"), "a | b && c");
        assert_eq!(j("echo a # c\n"), "echo a # c");
    }
}
