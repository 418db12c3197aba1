//! Functions printed back as bash prints them (`declare -f`, `type`): bash does not keep the
//! text a function was written with but reprints its parsed form in a fixed layout (four
//! spaces per level, `;` between commands, `do`/`then` placement), and scripts compare that
//! output.

use std::cell::RefCell;

use crate::syntax::ast::*;

thread_local! {
    /// Here-documents begun inside a substitution whose bodies cannot be written inside it
    /// (the script ended in them, so no delimiter line closes them before the `)`): as in the
    /// source, they wait for the newline of the line around it. Words are printed by free
    /// functions, below the printer that writes that line.
    static CARRIED: RefCell<Vec<HereDoc>> = const { RefCell::new(Vec::new()) };
    /// `script_text` is printing, substitutions included: where bash's `declare -f` writes
    /// text that does not read back as the same tree, the text that does is written.
    static READ_BACK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// `name () \n{ \n    body\n}` as `declare -f name` prints it.
pub(crate) fn function_text(f: &FunctionDef) -> String {
    let mut p = Printer::top();
    p.function(f, false);
    // The definition's own here-documents; inside a list they wait for what follows it on
    // its line (`f() { ...; } <<E &`).
    p.flush_heredocs();
    p.out
}

/// A simple command as `BASH_COMMAND` shows it.
pub(crate) fn simple_command_text(c: &SimpleCommand) -> String {
    let mut p = Printer::top();
    p.command(&Command::Simple(c.clone()));
    p.out
}

/// An and-or list on one line, as `jobs` shows a job (heredoc bodies follow it).
pub(crate) fn and_or_text(ao: &AndOr) -> String {
    let mut p = Printer::top();
    p.and_or(ao);
    p.flush_heredocs();
    p.out.trim_end_matches('\n').to_string()
}

/// A command on one line, as `jobs` shows a coprocess.
pub(crate) fn command_text(c: &Command) -> String {
    let mut p = Printer::top();
    p.command(c);
    p.flush_heredocs();
    p.out.trim_end_matches('\n').to_string()
}

/// A whole script in the layout of a function body at the outermost level: what `declare -f`
/// prints for a body, except where bash's printing would not read back the same (an unnamed
/// simple coprocess), so parsing it again must give the same tree (the fuzz target
/// `shell_parse` holds the printer to that).
pub fn script_text(s: &Script) -> String {
    let mut p = Printer {
        in_function: true,
        reparsable: true,
        whole_text: true,
        ..Printer::top()
    };
    let outer = READ_BACK.replace(true);
    p.list(s, false);
    p.one_line = false;
    p.flush_heredocs();
    READ_BACK.set(outer);
    p.out
}

/// A word in source form.
pub(crate) fn word_source(w: &Word) -> String {
    let text = word_text(w);
    CARRIED.take();
    text
}

/// Whether a `$` before `c` would start an expansion (or a `$'...'` / `$"..."` string):
/// elsewhere a `$` is plain text, as bash reads it, and is shown as written.
fn starts_expansion(c: char) -> bool {
    c.is_ascii_alphanumeric()
        || matches!(
            c,
            '_' | '{' | '(' | '[' | '\'' | '"' | '@' | '*' | '#' | '?' | '$' | '!' | '-'
        )
}

/// Whether the text ends in a blank that separates words: a space after an odd number of
/// backslashes is part of the word before it (`a\ ` then `3>&1` must not join).
fn ends_with_blank(out: &str) -> bool {
    if out.ends_with('\n') {
        return true;
    }
    let Some(rest) = out.strip_suffix(' ') else {
        return false;
    };
    rest.bytes().rev().take_while(|&b| b == b'\\').count() % 2 == 0
}

/// An arithmetic text without the blanks around it, which arithmetic skips; other white
/// space (a form feed) is an error there and stays, and so does the blank after an odd run of
/// backslashes (`\<newline>` is a line continuation, `\` alone an error).
fn trim_blanks(text: &str) -> &str {
    const BLANKS: [char; 3] = [' ', '\t', '\n'];
    let mut end = text.trim_end_matches(BLANKS).len();
    let escapes = text[..end]
        .bytes()
        .rev()
        .take_while(|&b| b == b'\\')
        .count();
    if escapes % 2 == 1 && end < text.len() {
        end += 1;
    }
    text[..end].trim_start_matches(BLANKS)
}

/// A word's text for a decision about how to print it: the bodies its substitutions carry
/// are left for when it is printed, or they would be written twice.
fn word_looked_at(w: &Word) -> String {
    let before = CARRIED.take();
    let text = word_text(w);
    CARRIED.set(before);
    text
}

/// Whether a simple command's words, printed after `coproc `, would read as a named
/// coprocess.
fn reads_as_coproc_name(words: &[Arg]) -> bool {
    let text = |w: Option<&Arg>| match w {
        Some(Arg::Word(w)) => word_looked_at(w),
        _ => String::new(),
    };
    crate::syntax::parser::reads_as_coproc_name(&text(words.first()), &text(words.get(1)))
}

/// Whether no line can end a here-document: its delimiter holds a newline, or it strips tabs
/// and its delimiter begins with one (each line loses its leading tabs before the compare).
fn endless(h: &HereDoc) -> bool {
    h.delimiter.contains('\n') || (h.strip_tabs && h.delimiter.starts_with('\t'))
}

/// Whether a dup's target is a literal descriptor number or `-`.
fn dup_target_is_fd(t: &RedirTarget) -> bool {
    match t {
        RedirTarget::Word(w) => w
            .as_literal()
            .is_some_and(|l| l == "-" || (!l.is_empty() && l.bytes().all(|b| b.is_ascii_digit()))),
        RedirTarget::HereDoc(_) => false,
    }
}

#[derive(Default)]
struct Printer {
    out: String,
    indent: usize,
    /// Printing a function body: a `{ }` group takes lines of its own there, but stays on
    /// one line in a command's text (`jobs`, `BASH_COMMAND`), as in bash.
    in_function: bool,
    /// Here-document bodies to write after the current command's line.
    heredocs: Vec<HereDoc>,
    /// Text that must parse back to the same tree, where bash's own printing would not
    /// (`script_text`).
    reparsable: bool,
    /// A here-document body was written that ran to the end of its text without a newline
    /// (one begun inside backticks, whose text ends at the closing backtick): where the
    /// output ended after it.
    open_body: Option<usize>,
    /// Printing the text of backticks, where such a body ends the text as it did in the
    /// source (no delimiter line, which would become part of it).
    backticks: bool,
    /// The command being printed follows `time `, where a first word `-p` is its option.
    after_time: bool,
    /// The command being printed is an unnamed coprocess's, after `coproc `: a first word
    /// that is a name, before a word that starts a compound command, would be read as the
    /// coprocess's name.
    after_coproc: bool,
    /// The whole text is printed (`script_text`): a here-document that can have no end may
    /// put the rest of it on one line.
    whole_text: bool,
    /// A here-document whose delimiter holds a newline was written: no line can end it, so
    /// its body took all the text after its line, and the source had the rest of the
    /// commands around it on that line. Everything after it is written on one line, and the
    /// bodies at the very end; a line break would begin its body there.
    one_line: bool,
}

impl Printer {
    /// A printer for a whole text: no line is waiting for here-document bodies yet (a
    /// printer before it may have stopped without its newline).
    fn top() -> Printer {
        CARRIED.take();
        Printer::default()
    }

    /// A printer for the text of a substitution. bash shows that text as it was written,
    /// which is source and reads back (an unnamed coprocess has no name in it).
    fn nested() -> Printer {
        Printer {
            reparsable: true,
            ..Printer::default()
        }
    }

    /// The text of a substitution whose here-document bodies run to the end of the script:
    /// without them, which wait for the line around it (`CARRIED`).
    fn carrying(script: &Script) -> Printer {
        // A body no line can end takes the whole text after the line around the
        // substitution, so the rest of the substitution stays on that line, as at the top.
        let mut p = Printer {
            whole_text: true,
            ..Printer::nested()
        };
        p.inline_list(script);
        p.heredocs.extend(CARRIED.take());
        let docs = std::mem::take(&mut p.heredocs);
        CARRIED.with_borrow_mut(|c| c.extend(docs));
        p
    }

    fn ind(&mut self) {
        for _ in 0..self.indent {
            self.out.push(' ');
        }
    }

    /// A line break. Bodies of here-documents begun on the line that ends here follow it, as
    /// bash reads them after the first newline (a function's body printed over several lines
    /// after `cat <<E ||` would otherwise take the first of its lines for the body).
    fn newline(&mut self) {
        if self.holds_line() {
            self.semicolon();
            self.out.push(' ');
            return;
        }
        if self.heredocs.is_empty() && CARRIED.with_borrow(Vec::is_empty) {
            self.out.push('\n');
        } else {
            self.flush_heredocs();
        }
        self.ind();
    }

    /// A line break after a word that opens a body (`then`, `do`, `else`, `{`, `in`, a case
    /// pattern), where one line needs no `;`.
    fn opener_break(&mut self) {
        if self.holds_line() {
            if !self.out.ends_with(' ') {
                self.out.push(' ');
            }
            return;
        }
        self.newline();
    }

    /// bash's `semicolon()`: ends a command list unless it already ends with a terminator.
    fn semicolon(&mut self) {
        if !self.out.ends_with(['&', ';', '\n']) {
            self.out.push(';');
        }
    }

    fn function(&mut self, f: &FunctionDef, keyword: bool) {
        let outer = std::mem::replace(&mut self.in_function, true);
        self.function_body(f, keyword);
        self.in_function = outer;
    }

    fn function_body(&mut self, f: &FunctionDef, keyword: bool) {
        if keyword {
            self.out.push_str("function ");
        }
        self.out.push_str(&f.name);
        self.out.push_str(" () ");
        match f.body.as_ref() {
            Command::Compound(CompoundCommand::Group(s), redirs) => {
                self.opener_break();
                self.out.push_str("{ ");
                self.indent += 4;
                self.list(s, true);
                self.indent -= 4;
                self.newline();
                self.out.push('}');
                self.redirects(redirs);
            }
            // Text that must read back keeps any other body as it is: in braces, a body with
            // redirections (`f() ( ... ) >out`) would read back as a group around them.
            other if self.reparsable => self.command(other),
            // bash shows any other body (`f() ( ... )`, `f() if ...`) inside braces.
            other => {
                self.opener_break();
                self.out.push_str("{ ");
                self.indent += 4;
                self.opener_break();
                self.command(other);
                self.flush_heredocs();
                self.indent -= 4;
                if !self.out.ends_with('\n') {
                    self.newline();
                } else {
                    self.ind();
                }
                self.out.push('}');
            }
        }
    }

    /// A command list, one command per line.
    fn list(&mut self, s: &Script, first_on_new_line: bool) {
        for (i, item) in s.items.iter().enumerate() {
            if i > 0 {
                let prev = &s.items[i - 1];
                if prev.background {
                    self.out.push(' ');
                } else if self.out.ends_with('\n') {
                    self.ind();
                } else {
                    self.out.push(';');
                    self.newline();
                }
            } else if first_on_new_line {
                self.opener_break();
            }
            self.and_or(&item.and_or);
            if item.background {
                self.out.push_str(" &");
            }
            self.flush_heredocs();
        }
    }

    /// A list on one line, as in `if a; then` and `while b; do`.
    fn inline_list(&mut self, s: &Script) {
        for (i, item) in s.items.iter().enumerate() {
            if i > 0 {
                if s.items[i - 1].background {
                    self.out.push(' ');
                } else {
                    self.out.push_str("; ");
                }
            }
            self.and_or(&item.and_or);
            if item.background {
                self.out.push_str(" &");
            }
        }
    }

    /// Whether the rest of the text stays on the current line (`one_line`): also once a
    /// substitution on it carried out a body that no line can end.
    fn holds_line(&mut self) -> bool {
        if !self.one_line && self.whole_text {
            self.one_line = CARRIED.with_borrow(|c| c.iter().any(endless));
        }
        self.one_line
    }

    fn flush_heredocs(&mut self) {
        if self.holds_line() {
            return;
        }
        self.heredocs.extend(CARRIED.take());
        if self.heredocs.is_empty() {
            return;
        }
        for h in std::mem::take(&mut self.heredocs) {
            self.out.push('\n');
            self.out.push_str(&h.text);
            // A body the script ended inside has no newline of its own before the delimiter,
            // and one whose delimiter holds a newline always runs to the end (no line can
            // match it).
            if !self.out.ends_with('\n') || endless(&h) {
                self.open_body = Some(self.out.len());
                if self.backticks {
                    return;
                }
                // No line matches a delimiter holding a newline: written out, its lines
                // would only join the body (where an unquoted one's `${` must then close).
                // Nor do the here-documents after it on the line get a body: it took all
                // the text there was, so theirs were empty, and their delimiter lines would
                // join its body too.
                if endless(&h) {
                    break;
                }
                // An unquoted body the script ended inside a line continuation of: the
                // newline written after it would join the delimiter's line to the body.
                let escapes = self.out.bytes().rev().take_while(|&b| b == b'\\').count();
                if !h.quoted && escapes % 2 == 1 {
                    self.out.push('\n');
                }
                self.out.push('\n');
            }
            self.out.push_str(&h.delimiter);
        }
        self.out.push('\n');
    }

    fn and_or(&mut self, ao: &AndOr) {
        self.pipeline(&ao.first);
        for (op, p) in &ao.rest {
            self.out.push_str(match op {
                AndOrOp::And => " && ",
                AndOrOp::Or => " || ",
            });
            self.pipeline(p);
        }
    }

    fn pipeline(&mut self, p: &Pipeline) {
        if p.timed {
            self.out.push_str("time ");
        }
        // `! !` negates nothing twice: a pipeline of one empty command, which bash's
        // `declare -f` writes as nothing at all, and nothing reads back as no pipeline.
        let twice_negated = READ_BACK.get()
            && !p.negated
            && matches!(p.commands.as_slice(), [Command::Simple(c)]
                if c.words.is_empty() && c.assignments.is_empty() && c.redirects.is_empty());
        if p.negated {
            self.out.push_str("! ");
        } else if twice_negated {
            self.out.push_str("! ! ");
        }
        for (i, c) in p.commands.iter().enumerate() {
            if i > 0 {
                self.out.push_str(" | ");
            }
            self.after_time = i == 0 && p.timed && !p.negated;
            self.command(c);
            self.after_time = false;
        }
    }

    fn command(&mut self, c: &Command) {
        match c {
            Command::Simple(s) => {
                // `>f }` runs a command named `}`: printed words first, the `}` would close
                // a group. The redirections go first, where the source had them.
                // So too for a first word `-p` after `time`, which would be its option.
                // And for `coproc <<E n {`, a simple command `n {`: printed words first,
                // `coproc n {` would read as a coprocess named `n`.
                let after_coproc = std::mem::take(&mut self.after_coproc);
                let redirects_first = s.assignments.is_empty()
                    && !s.redirects.is_empty()
                    && (s.words.first().is_some_and(|w| match w {
                        Arg::Word(w) => {
                            let text = word_looked_at(w);
                            crate::syntax::parser::is_reserved(&text)
                                || (self.after_time && text == "-p")
                        }
                        Arg::Assignment(_) => false,
                    }) || (after_coproc && reads_as_coproc_name(&s.words)));
                if redirects_first {
                    self.redirects(&s.redirects);
                    self.out.push(' ');
                }
                let mut parts: Vec<String> = Vec::new();
                for a in &s.assignments {
                    parts.push(assignment_text(a));
                }
                for w in &s.words {
                    parts.push(match w {
                        Arg::Word(w) => word_text(w),
                        Arg::Assignment(a) => assignment_text(a),
                    });
                }
                self.out.push_str(&parts.join(" "));
                if !redirects_first {
                    self.redirects(&s.redirects);
                }
            }
            Command::Compound(c, redirs) => {
                self.compound(c);
                self.redirects(redirs);
            }
            Command::FunctionDef(f) => self.function(f, true),
        }
    }

    fn redirects(&mut self, redirs: &[Redirect]) {
        for r in redirs {
            if !self.out.is_empty() && !ends_with_blank(&self.out) {
                self.out.push(' ');
            }
            match (r.fd, r.op) {
                _ if r.fd_var.is_some() => self
                    .out
                    .push_str(&format!("{{{}}}", r.fd_var.as_deref().unwrap_or(""))),
                (Some(fd), _) => self.out.push_str(&fd.to_string()),
                // bash spells out the descriptor of a bare `>&2` / `<&3`; not of `>&file`
                // or `>&$x`, where the bare form means stdout and stderr together when the
                // word is not a descriptor, and `1>&` would mean stdout alone.
                (None, RedirOp::DupWrite) if dup_target_is_fd(&r.target) => self.out.push('1'),
                (None, RedirOp::DupRead) if dup_target_is_fd(&r.target) => self.out.push('0'),
                _ => {}
            }
            let op = match r.op {
                RedirOp::Read => "<",
                RedirOp::Write => ">",
                RedirOp::Append => ">>",
                RedirOp::Clobber => ">|",
                RedirOp::ReadWrite => "<>",
                RedirOp::DupRead => "<&",
                RedirOp::DupWrite => ">&",
                RedirOp::WriteAll => "&>",
                RedirOp::AppendAll => "&>>",
                RedirOp::HereDoc => "<<",
                RedirOp::HereString => "<<<",
            };
            self.out.push_str(op);
            match &r.target {
                RedirTarget::HereDoc(h) => {
                    if h.strip_tabs {
                        self.out.push('-');
                    }
                    if h.quoted {
                        // Only quote removal applies to a delimiter: a `'` in it is closed,
                        // escaped and reopened.
                        let d = h.delimiter.replace('\'', "'\\''");
                        self.out.push_str(&format!("'{d}'"));
                    } else {
                        // `<< -x` is the delimiter `-x`; `<<-x` would strip tabs for `x`,
                        // and `<< <(x)` written together would read as `<<<`.
                        if (!h.strip_tabs && h.delimiter.starts_with('-'))
                            || h.delimiter.starts_with(['<', '>'])
                        {
                            self.out.push(' ');
                        }
                        self.out.push_str(&h.delimiter);
                    }
                    // Bodies are read in the order their operators are: those carried out of
                    // the words before this one come first.
                    self.heredocs.extend(CARRIED.take());
                    self.heredocs.push(h.clone());
                    if self.whole_text && endless(h) {
                        self.one_line = true;
                    }
                }
                RedirTarget::Word(w) => {
                    if !matches!(r.op, RedirOp::DupRead | RedirOp::DupWrite) {
                        self.out.push(' ');
                    }
                    self.out.push_str(&word_text(w));
                }
            }
        }
    }

    fn body(&mut self, s: &Script) {
        self.indent += 4;
        self.list(s, false);
        self.semicolon();
        self.indent -= 4;
    }

    fn compound(&mut self, c: &CompoundCommand) {
        match c {
            CompoundCommand::Group(s) if !self.in_function => {
                self.out.push_str("{ ");
                self.inline_list(s);
                self.semicolon();
                self.out.push_str(" }");
            }
            CompoundCommand::Group(s) => {
                self.out.push_str("{ ");
                self.indent += 4;
                self.list(s, true);
                self.indent -= 4;
                self.newline();
                self.out.push('}');
            }
            CompoundCommand::Coproc { name, body } => {
                self.out.push_str("coproc ");
                // bash names an unnamed simple coprocess too (`coproc COPROC cat`), which
                // reads back as the command `COPROC`; `script_text` leaves the name out there.
                // A coprocess of a coprocess has no name either (`coproc coproc cat`).
                let named = matches!(**body, Command::Compound(ref c, _)
                    if !matches!(c, CompoundCommand::Coproc { .. }));
                if !self.reparsable || named {
                    self.out.push_str(name);
                    self.out.push(' ');
                } else {
                    self.after_coproc = true;
                }
                self.command(body);
                self.after_coproc = false;
            }
            CompoundCommand::Subshell(s) => {
                self.out.push_str("( ");
                self.list(s, false);
                // A bare `!` right before the `)` would negate it: a syntax error. bash's
                // `declare -f` writes it so all the same.
                let bare_not = READ_BACK.get()
                    && s.items.last().is_some_and(|i| {
                        !i.background && i.and_or.rest.is_empty() && {
                            let p = &i.and_or.first;
                            p.negated
                                && match p.commands.as_slice() {
                                    [] => true,
                                    [Command::Simple(c)] => {
                                        c.words.is_empty()
                                            && c.assignments.is_empty()
                                            && c.redirects.is_empty()
                                    }
                                    _ => false,
                                }
                        }
                    });
                if bare_not {
                    self.out.push(';');
                }
                self.out.push_str(" )");
            }
            CompoundCommand::If {
                branches,
                else_body,
            } => self.if_chain(branches, else_body.as_ref()),
            CompoundCommand::While { cond, body } | CompoundCommand::Until { cond, body } => {
                let kw = if matches!(c, CompoundCommand::While { .. }) {
                    "while "
                } else {
                    "until "
                };
                self.out.push_str(kw);
                self.inline_list(cond);
                self.out.push_str("; do");
                self.indent += 4;
                self.opener_break();
                self.indent -= 4;
                self.body(body);
                self.newline();
                self.out.push_str("done");
            }
            CompoundCommand::For { var, words, body }
            | CompoundCommand::Select { var, words, body } => {
                let kw = if matches!(c, CompoundCommand::For { .. }) {
                    "for"
                } else {
                    "select"
                };
                match words {
                    Some(ws) => {
                        let list = ws.iter().map(word_text).collect::<Vec<_>>().join(" ");
                        self.out.push_str(&format!("{kw} {var} in {list};"));
                    }
                    // Text that must read back keeps the list left out; bash's `declare -f`
                    // writes the `"$@"` it stands for.
                    None if READ_BACK.get() => self.out.push_str(&format!("{kw} {var};")),
                    None => self.out.push_str(&format!("{kw} {var} in \"$@\";")),
                }
                self.do_body(body);
            }
            CompoundCommand::ArithFor {
                init,
                cond,
                step,
                body,
            } => {
                fn t(a: &Option<Box<Arith>>) -> &str {
                    a.as_ref().map(|a| trim_blanks(&a.source)).unwrap_or("")
                }
                self.out
                    .push_str(&format!("for (({}; {}; {}))", t(init), t(cond), t(step)));
                self.do_body(body);
            }
            CompoundCommand::Case { word, items } => {
                self.out.push_str(&format!("case {} in ", word_text(word)));
                self.indent += 4;
                for item in items {
                    self.opener_break();
                    let pats: Vec<String> = item.patterns.iter().map(word_text).collect();
                    self.out.push_str(&pats.join(" | "));
                    self.out.push(')');
                    if item.body.items.is_empty() {
                        self.opener_break();
                    } else {
                        self.indent += 4;
                        self.list(&item.body, true);
                        self.indent -= 4;
                        self.newline();
                    }
                    self.out.push_str(match item.terminator {
                        CaseTerminator::Break => ";;",
                        CaseTerminator::FallThrough => ";&",
                        CaseTerminator::Continue => ";;&",
                    });
                }
                self.indent -= 4;
                self.opener_break();
                self.out.push_str("esac");
            }
            CompoundCommand::Arith(a) => {
                self.out
                    .push_str(&format!("(( {} ))", trim_blanks(&a.source)));
            }
            CompoundCommand::Cond(e) => {
                self.out.push_str("[[ ");
                self.out.push_str(&cond_text(e));
                self.out.push_str(" ]]");
            }
        }
    }

    fn do_body(&mut self, body: &Script) {
        self.opener_break();
        self.out.push_str("do");
        self.indent += 4;
        self.opener_break();
        self.indent -= 4;
        self.body(body);
        self.newline();
        self.out.push_str("done");
    }

    fn if_chain(&mut self, branches: &[(Script, Script)], else_body: Option<&Script>) {
        let Some(((cond, then), rest)) = branches.split_first() else {
            return;
        };
        self.out.push_str("if ");
        self.inline_list(cond);
        self.out.push_str("; then");
        self.indent += 4;
        self.opener_break();
        self.indent -= 4;
        self.body(then);
        if !rest.is_empty() {
            self.newline();
            self.out.push_str("else");
            self.indent += 4;
            self.opener_break();
            self.if_chain(rest, else_body);
            self.out.push(';');
            self.indent -= 4;
        } else if let Some(e) = else_body {
            self.newline();
            self.out.push_str("else");
            self.indent += 4;
            self.opener_break();
            self.indent -= 4;
            self.body(e);
        }
        self.newline();
        self.out.push_str("fi");
    }
}

fn cond_text(e: &CondExpr) -> String {
    match e {
        CondExpr::Word(w) => word_text(w),
        CondExpr::Unary(op, w) => format!("-{op} {}", word_text(w)),
        CondExpr::Binary(l, op, r) => {
            let op = op.as_str();
            format!("{} {op} {}", word_text(l), word_text(r))
        }
        CondExpr::Not(e) => format!("! {}", cond_text(e)),
        CondExpr::And(a, b) => format!("{} && {}", cond_text(a), cond_text(b)),
        CondExpr::Or(a, b) => format!("{} || {}", cond_text(a), cond_text(b)),
    }
}

fn assignment_text(a: &Assignment) -> String {
    let mut s = a.name.clone();
    if let Some(i) = &a.index {
        s.push('[');
        s.push_str(&word_text(i));
        s.push(']');
    }
    if a.append {
        s.push('+');
    }
    s.push('=');
    match &a.value {
        AssignValue::Scalar(w) => s.push_str(&word_text(w)),
        AssignValue::Array(elems) => s.push_str(&array_literal_text(elems)),
    }
    s
}

/// An array literal's element in source form: `v`, `[k]=v` or `[k]+=v`.
pub(crate) fn array_elem_text(e: &ArrayElem) -> String {
    let value = word_text(&e.value);
    match &e.key {
        Some(k) => format!(
            "[{}]{}={value}",
            word_text(k),
            if e.append { "+" } else { "" }
        ),
        None => value,
    }
}

/// An array literal written back in source form: `(a [k]=v)`.
pub(crate) fn array_literal_text(elems: &[ArrayElem]) -> String {
    let items: Vec<String> = elems.iter().map(array_elem_text).collect();
    format!("({})", items.join(" "))
}

/// A word written back in source form.
fn word_text(w: &Word) -> String {
    let mut s = String::new();
    parts_text(&w.parts, false, &mut s);
    s
}

/// Prints the text of a substitution apart from the here-documents carried out of the words
/// before it: the substitution's own printers write the bodies they find waiting, and those
/// belong to the line around it. Its own carried bodies follow the earlier ones, in the order
/// their operators are read.
fn apart(print: impl FnOnce() -> String) -> String {
    let before = CARRIED.take();
    let text = print();
    CARRIED.with_borrow_mut(|carried| {
        let own = std::mem::replace(carried, before);
        carried.extend(own);
    });
    text
}

/// `$(...)`, or backquotes where only they give a here-document's body back.
fn command_subst_text(script: &Script, in_dq: bool) -> String {
    let mut d = Printer::nested();
    d.inline_list(script);
    // A here-document inside keeps its body, on the lines before the `)`.
    d.flush_heredocs();
    let p = match d.open_body {
        None => d,
        // A body without a final newline that ends the text can only have ended at a closing
        // backquote, which alone gives it back (`$(...)` needs a delimiter line after it).
        Some(_) => {
            let mut b = Printer {
                backticks: true,
                ..Printer::nested()
            };
            b.inline_list(script);
            b.flush_heredocs();
            if b.open_body.is_none_or(|end| end == b.out.len()) {
                let mut s = String::from('`');
                for c in b.out.chars() {
                    if matches!(c, '\\' | '`') || (in_dq && c == '"') {
                        s.push('\\');
                    }
                    s.push(c);
                }
                s.push('`');
                return s;
            }
            Printer::carrying(script)
        }
    };
    // `$( (a) )` is a subshell; `$((a) )` would read as arithmetic.
    let gap = if p.out.starts_with('(') { " " } else { "" };
    format!("$({gap}{})", p.out)
}

/// `<(...)` or `>(...)`.
fn process_subst_text(output: bool, script: &Script) -> String {
    let mut p = Printer::nested();
    p.inline_list(script);
    p.flush_heredocs();
    if p.open_body.is_some() {
        p = Printer::carrying(script);
    }
    // As in `$( (a) )`: a subshell first is kept apart from the `(`.
    let gap = if p.out.starts_with('(') { " " } else { "" };
    format!("{}({gap}{})", if output { '>' } else { '<' }, p.out)
}

fn parts_text(parts: &[WordPart], in_dq: bool, s: &mut String) {
    for (i, p) in parts.iter().enumerate() {
        match p {
            // A `$` that ends a literal would join the next part (`$$(`, `$'`, `$"`): it is
            // written escaped.
            WordPart::Literal(t) if t.ends_with('$') && i + 1 < parts.len() => {
                s.push_str(&t[..t.len() - 1]);
                s.push_str("\\$");
            }
            WordPart::Literal(t) => s.push_str(t),
            // Inside double quotes a backslash escapes only `$`, `` ` ``, `"`, `\` and a
            // newline: `"%s\n"` shows as written, not as `"%s\\n"`.
            WordPart::Quoted(t) if in_dq => {
                let mut cs = t.chars().peekable();
                while let Some(c) = cs.next() {
                    let escape = match c {
                        '"' | '`' => true,
                        // At the end of the text, what follows decides: the next part, or the
                        // closing quote, before which a `$` is plain (`"a$"`).
                        '$' => match cs.peek() {
                            Some(&n) => starts_expansion(n),
                            None => rest_starts_expansion(&parts[i + 1..], in_dq),
                        },
                        '\\' => cs
                            .peek()
                            .is_none_or(|n| matches!(n, '$' | '`' | '"' | '\\' | '\n')),
                        _ => false,
                    };
                    if escape {
                        s.push('\\');
                    }
                    s.push(c);
                }
            }
            WordPart::Quoted(t) => {
                let mut cs = t.chars();
                match (cs.next(), cs.next()) {
                    // One quoted control character or raw byte shows in single quotes, as
                    // bash's source would have it; any other one, a quote too, after a
                    // backslash.
                    (Some(c), None)
                        if !c.is_alphanumeric()
                            && !c.is_control()
                            && wasmsand_exec::raw::raw_byte(c).is_none() =>
                    {
                        s.push('\\');
                        s.push(c);
                    }
                    // Each `'` as `\'` between single-quoted runs: every other byte (a NUL, a
                    // control character) stays as written, where `$'...'` would make a NUL an
                    // escape that ends the string.
                    _ if t.contains('\'') => {
                        for (k, run) in t.split('\'').enumerate() {
                            if k > 0 {
                                s.push_str("\\'");
                            }
                            if !run.is_empty() {
                                s.push('\'');
                                s.push_str(run);
                                s.push('\'');
                            }
                        }
                    }
                    _ => {
                        s.push('\'');
                        s.push_str(t);
                        s.push('\'');
                    }
                }
            }
            WordPart::DoubleQuoted(inner) => {
                s.push('"');
                parts_text(inner, true, s);
                s.push('"');
            }
            WordPart::Param(pe) => {
                s.push_str(&param_text(pe, continues_name(parts.get(i + 1)), in_dq));
            }
            WordPart::CommandSubst {
                backquoted: Some(b),
                ..
            } => {
                s.push('`');
                s.push_str(b);
                s.push('`');
            }
            WordPart::CommandSubst {
                script,
                backquoted: None,
            } => s.push_str(&apart(|| command_subst_text(script, in_dq))),
            WordPart::ProcessSubst { output, script } => {
                s.push_str(&apart(|| process_subst_text(*output, script)));
            }
            WordPart::Arith(a) if a.bracket => {
                s.push_str("$[");
                s.push_str(&a.source);
                s.push(']');
            }
            WordPart::Arith(a) => {
                s.push_str("$((");
                s.push_str(&a.source);
                s.push_str("))");
            }
            WordPart::Tilde(u) => {
                s.push('~');
                s.push_str(u);
            }
            WordPart::Brace(b) => s.push_str(&brace_text(b)),
            WordPart::BadSubst(b) => s.push_str(&b.text),
            WordPart::BadBackquote { raw, .. } => {
                s.push('`');
                s.push_str(raw);
                s.push('`');
            }
        }
    }
}

/// Whether a part starts with what would join a `$name` before it: `${x}y` is not `$xy`.
fn continues_name(next: Option<&WordPart>) -> bool {
    match next {
        Some(WordPart::Literal(t)) | Some(WordPart::Quoted(t)) => t
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '['),
        _ => false,
    }
}

/// Whether the text `parts` print to starts with what a `$` before it would expand with.
fn rest_starts_expansion(parts: &[WordPart], in_dq: bool) -> bool {
    if parts.is_empty() {
        return false;
    }
    let mut rest = String::new();
    parts_text(parts, in_dq, &mut rest);
    rest.chars().next().is_some_and(starts_expansion)
}

fn brace_text(b: &BraceExp) -> String {
    match b {
        BraceExp::List(alts) => {
            let items: Vec<String> = alts.iter().map(word_text).collect();
            format!("{{{}}}", items.join(","))
        }
        BraceExp::Seq { start, end, step } => match step {
            Some(st) => format!("{{{start}..{end}..{st}}}"),
            None => format!("{{{start}..{end}}}"),
        },
    }
}

/// The operand word of `${x:-word}` (and `=`, `?`, `+`, a replacement) inside double quotes:
/// there single quotes are plain characters, so quoted text is shown with backslashes only.
fn dq_operand_text(w: &Word) -> String {
    let mut s = String::new();
    for (i, p) in w.parts.iter().enumerate() {
        match p {
            WordPart::Quoted(t) => {
                for c in t.chars() {
                    if matches!(c, '"' | '\\' | '$' | '`' | '}') {
                        s.push('\\');
                    }
                    s.push(c);
                }
            }
            // A `$` ending a literal would join the part after it, as in `parts_text`.
            WordPart::Literal(t) if t.ends_with('$') && i + 1 < w.parts.len() => {
                s.push_str(&t[..t.len() - 1]);
                s.push_str("\\$");
            }
            WordPart::Param(pe) => {
                s.push_str(&param_text(pe, continues_name(w.parts.get(i + 1)), true));
            }
            other => parts_text(std::slice::from_ref(other), true, &mut s),
        }
    }
    s
}

fn param_text(pe: &ParamExp, braces_needed: bool, in_dq: bool) -> String {
    let name = match &pe.param {
        Param::Named(n) => n.clone(),
        Param::Positional(n) => n.to_string(),
        Param::Special(c) => c.to_string(),
    };
    let simple = !pe.indirect
        && pe.subscript.is_none()
        && matches!(pe.op, ParamOp::None)
        && !braces_needed
        && !matches!(pe.param, Param::Positional(n) if n > 9);
    if simple {
        return format!("${name}");
    }
    let sub = match &pe.subscript {
        None => String::new(),
        Some(Subscript::At) => "[@]".into(),
        Some(Subscript::Star) => "[*]".into(),
        Some(Subscript::Index(w)) => format!("[{}]", word_text(w)),
    };
    let bang = if pe.indirect { "!" } else { "" };
    let w = |w: &Word| word_text(w);
    let operand = |wd: &Word| {
        if in_dq {
            dq_operand_text(wd)
        } else {
            word_text(wd)
        }
    };
    let colon = |c: bool| if c { ":" } else { "" };
    match &pe.op {
        ParamOp::None => format!("${{{bang}{name}{sub}}}"),
        ParamOp::Length => format!("${{#{name}{sub}}}"),
        ParamOp::Default { colon: c, word } => {
            format!("${{{bang}{name}{sub}{}-{}}}", colon(*c), operand(word))
        }
        ParamOp::Assign { colon: c, word } => {
            format!("${{{bang}{name}{sub}{}={}}}", colon(*c), operand(word))
        }
        ParamOp::Error { colon: c, word } => {
            format!("${{{bang}{name}{sub}{}?{}}}", colon(*c), operand(word))
        }
        ParamOp::Alternate { colon: c, word } => {
            format!("${{{bang}{name}{sub}{}+{}}}", colon(*c), operand(word))
        }
        ParamOp::Substring { offset, length } => match length {
            Some(l) => format!("${{{bang}{name}{sub}:{}:{}}}", offset.source, l.source),
            None => format!("${{{bang}{name}{sub}:{}}}", offset.source),
        },
        ParamOp::RemovePrefix { longest, pattern } => format!(
            "${{{bang}{name}{sub}{}{}}}",
            if *longest { "##" } else { "#" },
            w(pattern)
        ),
        ParamOp::RemoveSuffix { longest, pattern } => format!(
            "${{{bang}{name}{sub}{}{}}}",
            if *longest { "%%" } else { "%" },
            w(pattern)
        ),
        ParamOp::Replace {
            mode,
            pattern,
            replacement,
        } => {
            let m = match mode {
                ReplaceMode::First => "/",
                ReplaceMode::All => "//",
                ReplaceMode::Prefix => "/#",
                ReplaceMode::Suffix => "/%",
            };
            // `${x/}` written `${x//}` would read as the other mode.
            if pattern.parts.is_empty() && replacement.parts.is_empty() {
                return format!("${{{bang}{name}{sub}{m}}}");
            }
            // bash 5.2 reads the replacement as unquoted text even inside double quotes.
            format!("${{{bang}{name}{sub}{m}{}/{}}}", w(pattern), w(replacement))
        }
        ParamOp::Case {
            upper,
            all,
            pattern,
        } => {
            let c = if *upper { "^" } else { "," };
            let op = if *all {
                format!("{c}{c}")
            } else {
                c.to_string()
            };
            format!("${{{bang}{name}{sub}{op}{}}}", w(pattern))
        }
        ParamOp::Transform(c) => format!("${{{bang}{name}{sub}@{c}}}"),
        ParamOp::PrefixNames { star } => format!("${{!{name}{}}}", if *star { "*" } else { "@" }),
        ParamOp::Keys { star } => format!("${{!{name}[{}]}}", if *star { "*" } else { "@" }),
    }
}
