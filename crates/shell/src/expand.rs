//! Word expansion: brace, tilde, parameter, command substitution, arithmetic, field
//! splitting, pathname expansion and quote removal, in bash's order.

use std::collections::BTreeMap;

use wasmsand_exec::{Output, OutputBuffer};

use crate::error::ShellError;
use crate::interp::{AssignKey, Fd, Flow, FlowResult, Interp};
use crate::pattern;
use crate::syntax::ast::*;
use crate::vars::{ATTR_INTEGER, ATTR_READONLY, Value, Var};

/// A run of text inside a field being built, with how it may still be changed.
#[derive(Debug, Clone)]
struct Piece {
    text: String,
    /// Quoted text is neither split nor globbed, and keeps an otherwise empty field alive.
    quoted: bool,
    /// Unquoted expansion results are split on IFS.
    split: bool,
}

type Field = Vec<Piece>;

/// The parameter an expansion reads, after any `${!x}` indirection.
struct Target {
    param: Param,
    sub: Option<Subscript>,
    /// An indirection through a declared variable without a value: expands as unset.
    unset: bool,
}

/// A parameter's value before the operator is applied.
enum PV {
    Unset,
    Str(String),
    /// `$@`, `$*`, `${a[@]}`, `${a[*]}`; `star` for the `*` forms.
    List(Vec<String>, bool),
}

/// An arithmetic failure: a message for the script, or control flow from inside an
/// expansion in the expression.
pub(crate) enum AErr {
    Msg(String),
    Flow(Flow),
}

impl From<Flow> for AErr {
    fn from(f: Flow) -> Self {
        AErr::Flow(f)
    }
}

impl Interp {
    /// Where `~user` leads: a home directory, `~+`/`~-` the current and previous
    /// directory, `~N`/`~+N`/`~-N` an entry of the directory stack (as `dirs +N`/`-N`
    /// counts); `None` where bash leaves the word as it is.
    pub(crate) fn tilde_dir(&self, user: &str) -> Option<String> {
        match user {
            // Without HOME, bash falls back on the user's home directory.
            "" => Some(self.get_var("HOME").unwrap_or_else(|| "/home/user".into())),
            "+" => Some(self.st.cwd.clone()),
            "-" => self.get_var("OLDPWD"),
            "user" => Some("/home/user".into()),
            "root" => Some("/root".into()),
            u => {
                let (from_right, digits) = match u.as_bytes()[0] {
                    b'+' => (false, &u[1..]),
                    b'-' => (true, &u[1..]),
                    _ => (false, u),
                };
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                let n: usize = digits.parse().ok()?;
                let mut all = vec![self.st.cwd.clone()];
                all.extend(self.st.dirstack.iter().rev().cloned());
                let i = if from_right {
                    all.len().checked_sub(n + 1)?
                } else {
                    n
                };
                all.get(i).cloned()
            }
        }
    }

    /// Full expansion of several words into fields (command arguments, `for` lists).
    pub(crate) fn expand_words(&mut self, words: &[Word]) -> FlowResult<Vec<String>> {
        let mut out = Vec::new();
        for w in words {
            out.extend(self.expand_word_fields(w)?);
        }
        Ok(out)
    }

    pub(crate) fn expand_word_fields(&mut self, word: &Word) -> FlowResult<Vec<String>> {
        // Fast path: a plain literal word without glob characters is itself.
        if let [WordPart::Literal(s)] = word.parts.as_slice()
            && !s.contains(['*', '?', '['])
            && !(s.contains('(') && self.extglob())
            && !s.contains("=~")
        {
            return Ok(vec![s.clone()]);
        }
        let braced = word.parts.iter().any(|p| matches!(p, WordPart::Brace(_)));
        let words = self.brace_expand(word)?;
        let mut out = Vec::new();
        for w in &words {
            let w = &assignment_tilde(w);
            // Tilde expansion comes after brace expansion: `{~,x}`, `~{,/a}`.
            let w = &if braced {
                leading_tilde(w)
            } else {
                std::borrow::Cow::Borrowed(&**w)
            };
            let mut fields: Vec<Field> = vec![Vec::new()];
            self.expand_parts(&w.parts, false, &mut fields)?;
            let ifs = self.get_var("IFS");
            let ifs = ifs.as_deref().unwrap_or(" \t\n");
            for f in fields {
                for f in split_field(f, ifs) {
                    self.glob_field(f, &mut out)?;
                }
            }
            if out.len() > self.st.limits.max_brace_words {
                return Err(self.limit(format!(
                    "expansion: too many words (limit: {})",
                    self.st.limits.max_brace_words
                )));
            }
        }
        Ok(out)
    }

    /// Expansion without splitting nor globbing (assignments, `case` subjects, `[[ ]]`,
    /// here-strings): lists are joined with spaces.
    pub(crate) fn expand_string(&mut self, word: &Word) -> FlowResult<String> {
        if let [WordPart::Literal(s)] | [WordPart::Quoted(s)] = word.parts.as_slice() {
            return Ok(s.clone());
        }
        let mut fields: Vec<Field> = vec![Vec::new()];
        let saved = std::mem::replace(&mut self.unsplit, true);
        let r = self.expand_parts(&word.parts, false, &mut fields);
        self.unsplit = saved;
        r?;
        let s = join_fields(&fields, |p| p.text.clone());
        self.check_size(s.len(), "expansion")?;
        Ok(s)
    }

    /// `shopt -s extglob`: extended patterns are parsed in words and matched in patterns.
    pub(crate) fn extglob(&self) -> bool {
        self.st.opts.extra.contains("extglob")
    }

    /// How text parses in the current state (`shopt -s extglob`, aliases).
    pub(crate) fn parse_options(&self) -> crate::ParseOptions {
        crate::ParseOptions {
            extglob: self.extglob(),
            aliases: self.st.opts.expand_aliases.then(|| self.st.aliases.clone()),
            line_base: 1,
        }
    }

    /// A pattern: quoted parts are escaped so they match literally.
    pub(crate) fn expand_pattern(&mut self, word: &Word) -> FlowResult<String> {
        let ext = self.extglob();
        self.expand_pattern_ext(word, ext)
    }

    /// [`Self::expand_pattern`], with extended groups (`@(a|b)`) special or not: `[[ ]]`
    /// always takes them, as in bash 5.2; elsewhere `shopt -s extglob` decides.
    pub(crate) fn expand_pattern_ext(&mut self, word: &Word, ext: bool) -> FlowResult<String> {
        let mut fields: Vec<Field> = vec![Vec::new()];
        self.expand_parts(&word.parts, false, &mut fields)?;
        Ok(join_fields(&fields, |p| {
            if p.quoted {
                pattern::escape(&p.text)
            } else if ext {
                p.text.clone()
            } else {
                pattern::plain_parens(&p.text)
            }
        }))
    }

    /// The replacement of `${x/pat/rep}` as [`substitute`] reads it: a quoted `&` or `\\`
    /// stands for itself, an unquoted `&` for the matched text.
    pub(crate) fn expand_replacement(&mut self, word: &Word) -> FlowResult<String> {
        let mut fields: Vec<Field> = vec![Vec::new()];
        self.expand_parts(&word.parts, false, &mut fields)?;
        Ok(join_fields(&fields, |p| {
            if p.quoted {
                p.text.replace('\\', "\\\\").replace('&', "\\&")
            } else {
                p.text.clone()
            }
        }))
    }

    /// An extended regex for `=~`: quoted parts match literally.
    pub(crate) fn expand_regex(&mut self, word: &Word) -> FlowResult<String> {
        let mut fields: Vec<Field> = vec![Vec::new()];
        self.expand_parts(&word.parts, false, &mut fields)?;
        Ok(join_fields(&fields, |p| {
            if p.quoted {
                regex_escape(&p.text)
            } else {
                p.text.clone()
            }
        }))
    }

    pub(crate) fn expand_heredoc(&mut self, body: &Word) -> FlowResult<String> {
        let mut fields: Vec<Field> = vec![Vec::new()];
        self.expand_parts(&body.parts, true, &mut fields)?;
        Ok(join_fields(&fields, |p| p.text.clone()))
    }

    fn expand_parts(
        &mut self,
        parts: &[WordPart],
        in_dq: bool,
        out: &mut Vec<Field>,
    ) -> FlowResult<()> {
        for part in parts {
            match part {
                WordPart::Literal(s) => push(out, s.clone(), in_dq, false),
                WordPart::Quoted(s) => push(out, s.clone(), true, false),
                WordPart::DoubleQuoted(inner) => {
                    let only_list =
                        matches!(inner.as_slice(), [WordPart::Param(p)] if is_list_param(p));
                    if !only_list {
                        push(out, String::new(), true, false);
                    }
                    self.expand_parts(inner, true, out)?;
                }
                WordPart::Param(p) => self.expand_param(p, in_dq, out)?,
                WordPart::CommandSubst { script: s, .. } => {
                    let text = self.command_subst(s)?;
                    push(out, text, in_dq, !in_dq);
                }
                WordPart::ProcessSubst { output, script } => {
                    let path = self.process_subst(*output, script)?;
                    push(out, path, in_dq, false);
                }
                WordPart::Arith(a) => {
                    let v = self.arith_or_exit(a)?;
                    push(out, v.to_string(), in_dq, !in_dq);
                }
                WordPart::Tilde(user) => {
                    let v = self.tilde_dir(user).unwrap_or_else(|| format!("~{user}"));
                    push(out, v, true, false);
                }
                WordPart::Brace(b) => {
                    // Only reached where bash does not brace-expand: keep the text.
                    push(out, brace_text(b), in_dq, false);
                }
                WordPart::BadBackquote {
                    message,
                    line,
                    shown,
                    ..
                } => {
                    if !message.is_empty() {
                        let head =
                            format!("{}: command substitution: line {line}: ", self.code_file());
                        let mut text = format!("{head}{message}\n");
                        if let Some(at) = shown {
                            text.push_str(&format!("{head}`{at}'\n"));
                        }
                        self.err_raw(&text);
                    }
                    self.subst_status = Some(2);
                    self.st.status = 2;
                    push(out, String::new(), in_dq, !in_dq);
                }
                WordPart::BadSubst(b) => {
                    if in_dq && subscript_never_closes(&b.text) {
                        self.err(&format!(
                            "bad substitution: no closing `}}' in \"{}\"",
                            b.context
                        ));
                    } else {
                        self.err(&format!("{}: bad substitution", b.context));
                    }
                    return Err(Flow::Fatal(1));
                }
            }
        }
        Ok(())
    }

    /// Runs a command substitution in a subshell and returns its output without trailing
    /// newlines.
    pub(crate) fn command_subst(&mut self, s: &Script) -> FlowResult<String> {
        self.enter()?;
        let r = self.command_subst_inner(s);
        self.depth -= 1;
        self.reap_coprocs();
        r
    }

    fn command_subst_inner(&mut self, s: &Script) -> FlowResult<String> {
        // `$(< file)` reads the file without a subshell.
        if let Some(w) = only_file_input(s) {
            let (data, status) = self.read_file_input(w, "command substitution")?;
            self.subst_status = Some(status);
            let mut text = wasmsand_exec::raw::decode(&data);
            if text.contains('\0') {
                self.err("warning: command substitution: ignored null byte in input");
                text.retain(|c| c != '\0');
            }
            return Ok(trim_newlines(text));
        }
        let (out, status) = self.capture(s, "command substitution")?;
        self.subst_status = Some(status);
        self.st.status = status;
        let mut text = wasmsand_exec::raw::decode_vec(out);
        if text.contains('\0') {
            // bash strings cannot hold NUL: it drops them (with a warning).
            self.err("warning: command substitution: ignored null byte in input");
            text.retain(|c| c != '\0');
        }
        Ok(trim_newlines(text))
    }

    /// The contents of the file a `< file` on its own names, as `$(< file)` and `<(< file)`
    /// give them, and the status (1 when it cannot be read).
    fn read_file_input(&mut self, w: &Word, what: &str) -> FlowResult<(Vec<u8>, i32)> {
        let name = self.expand_string(w)?;
        let abs = wasmsand_vfs::path::join(&self.st.cwd, &name);
        let data = self.rt.vfs.lock().read(&abs);
        match data {
            Ok(d) => {
                self.check_size(d.len(), what)?;
                Ok((d.to_vec(), 0))
            }
            Err(e) => {
                self.err(&format!("{name}: {}", crate::error::strerror(e.errno)));
                Ok((Vec::new(), 1))
            }
        }
    }

    /// `<(cmd)`: a file holding cmd's whole output; `>(cmd)`: an empty file that cmd reads as
    /// its stdin once the command using it is done. A WASI guest cannot read a pipe by a
    /// `/dev/fd` name, so the data goes through a file of the sandbox's tree, removed when
    /// the pipeline ends (see `run_pipeline`).
    fn process_subst(&mut self, output: bool, s: &Script) -> FlowResult<String> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = format!("/tmp/.wasmsand-procsub-{n}");
        let data = if output {
            Vec::new()
        } else if let Some(w) = only_file_input(s) {
            self.read_file_input(w, "process substitution")?.0
        } else {
            self.enter()?;
            let r = self.capture(s, "process substitution");
            self.depth -= 1;
            r?.0
        };
        let written = {
            let mut vfs = self.rt.vfs.lock();
            let _ = vfs.mkdir_p("/tmp");
            vfs.write(&path, &data)
        };
        if let Err(e) = written {
            self.err(&format!("{path}: {}", crate::error::strerror(e.errno)));
            return Err(Flow::Fatal(1));
        }
        self.procsubs
            .push((path.clone(), output.then(|| s.clone())));
        Ok(path)
    }

    /// Ends the process substitutions made since `mark`: runs the `>( )` readers on what
    /// was written, then removes the files.
    pub(crate) fn finish_process_substs(&mut self, mark: usize) -> FlowResult<()> {
        if self.procsubs.len() <= mark {
            return Ok(());
        }
        let done: Vec<_> = self.procsubs.drain(mark..).collect();
        let mut result = Ok(());
        for (path, reader) in done {
            if let Some(script) = reader
                && result.is_ok()
            {
                let f = wasmsand_exec::OpenFile::new(self.rt.vfs.clone(), path.clone(), false);
                let mut child = self.fork();
                child
                    .fds
                    .set(0, Some(Fd::In(crate::interp::InSrc::File(f))));
                let _ = child.run_as_subshell(|c| c.run_script(&script));
                drop(child);
                result = self.check();
            }
            let _ = self.rt.vfs.lock().unlink(&path);
        }
        result
    }

    /// Runs a script in a subshell and returns what it wrote to stdout, and its status.
    pub(crate) fn capture(&mut self, s: &Script, what: &str) -> FlowResult<(Vec<u8>, i32)> {
        self.count_process()?;
        let cap = self.st.limits.max_word_bytes as u64;
        // Past the cap the whole run stops: a producer like `cat /dev/zero` would otherwise
        // run on (its bytes dropped) until the deadline.
        let rt = self.rt.clone();
        let seen = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let what_owned = what.to_string();
        let buf =
            OutputBuffer::new(cap + 1).with_callback(std::sync::Arc::new(move |chunk: &[u8]| {
                let total = seen
                    .fetch_add(chunk.len() as u64, std::sync::atomic::Ordering::Relaxed)
                    + chunk.len() as u64;
                if total > cap {
                    rt.set_abort(crate::interp::Abort::Limit(format!(
                        "{what_owned}: output too large (limit: {cap} bytes)"
                    )));
                }
            }));
        let mut child = self.fork();
        child.fds.set(1, Some(Fd::Out(Output::Buffer(buf.clone()))));
        // bash clears `set -e` in a command substitution unless `inherit_errexit` (or POSIX
        // mode) keeps it: `$(a; false; b)` runs b.
        if what == "command substitution"
            && self.shopt_value("inherit_errexit") != Some(true)
            && !self.st.opts.extra.contains("posix")
        {
            child.st.opts.errexit = false;
        }
        child.in_procsub = what == "process substitution";
        let status = child.run_as_subshell(|c| c.run_script(s));
        drop(child);
        let out = buf.take();
        if out.len() as u64 > cap {
            return Err(self.limit(format!("{what}: output too large (limit: {cap} bytes)")));
        }
        self.check()?;
        Ok((out.as_bytes().to_vec(), status))
    }

    // ---- parameters ----

    fn param_value(&mut self, param: &Param, sub: &Option<Subscript>) -> FlowResult<PV> {
        match param {
            Param::Named(name) => self.named_value(name, sub),
            Param::Positional(0) => Ok(PV::Str(self.st.arg0.clone())),
            Param::Positional(n) => Ok(match self.st.positional.get(*n as usize - 1) {
                Some(v) => PV::Str(v.clone()),
                None => PV::Unset,
            }),
            Param::Special(c) => Ok(match c {
                '@' => PV::List(self.st.positional.clone(), false),
                '*' => PV::List(self.st.positional.clone(), true),
                '#' => PV::Str(self.st.positional.len().to_string()),
                '?' => PV::Str(self.st.status.to_string()),
                '$' => PV::Str(self.shell_pid().to_string()),
                '!' => match self.last_bg {
                    Some(p) => PV::Str(p.to_string()),
                    None => PV::Unset,
                },
                '-' => PV::Str(self.option_flags()),
                _ => PV::Unset,
            }),
        }
    }

    pub(crate) fn option_flags(&self) -> String {
        let mut s = String::new();
        for (c, name) in [
            ('a', "allexport"),
            ('b', "notify"),
            ('e', "errexit"),
            ('f', "noglob"),
            ('h', "hashall"),
            ('k', "keyword"),
            ('m', "monitor"),
            ('n', "noexec"),
            ('t', "onecmd"),
            ('u', "nounset"),
            ('v', "verbose"),
            ('x', "xtrace"),
            ('B', "braceexpand"),
            ('C', "noclobber"),
            ('E', "errtrace"),
            ('H', "histexpand"),
            ('P', "physical"),
            ('T', "functrace"),
        ] {
            if self.option_value(name) == Some(true) {
                s.push(c);
            }
            if c == 'h' && self.st.opts.interactive {
                s.push('i');
            }
        }
        match self.invocation {
            crate::interp::Invocation::DashC => s.push('c'),
            crate::interp::Invocation::Stdin { .. } => s.push('s'),
            crate::interp::Invocation::File => {}
        }
        s
    }

    fn named_value(&mut self, name: &str, sub: &Option<Subscript>) -> FlowResult<PV> {
        self.touch_bash_argv(name);
        // The arrays bash computes when read are made for this read only.
        if matches!(name, "BASH_ALIASES" | "BASH_CMDS" | "GROUPS" | "DIRSTACK")
            && let Some(v) = self.dynamic_var(name)
        {
            self.st.vars.put(name, v);
            let r = self.named_value_stored(name, sub);
            self.st.vars.remove(name);
            return r;
        }
        self.named_value_stored(name, sub)
    }

    fn named_value_stored(&mut self, name: &str, sub: &Option<Subscript>) -> FlowResult<PV> {
        // A cycle, or a chain longer than bash follows, leads nowhere.
        if self
            .st
            .vars
            .get(name)
            .is_some_and(|v| v.has(crate::vars::ATTR_NAMEREF))
            && self.ref_is_circular(name)
        {
            return Ok(PV::Unset);
        }
        let (resolved, ref_sub) = self.resolve_ref(name);
        if let (Some(k), None) = (&ref_sub, sub) {
            // A reference to `a[i+1]`, `a[$k]` or `a[@]` reads as that subscript written
            // in place.
            let sub = match k.as_str() {
                "@" => Subscript::At,
                "*" => Subscript::Star,
                k => Subscript::Index(runtime_subscript(k)),
            };
            return self.named_value(&resolved, &Some(sub));
        }
        // A subscript on a reference whose target is an element names nothing (bash reads
        // `${r[0]}` of `declare -n r='a[1]'` as unset).
        if ref_sub.is_some() {
            return Ok(match sub {
                Some(Subscript::At) => PV::List(Vec::new(), false),
                Some(Subscript::Star) => PV::List(Vec::new(), true),
                _ => PV::Unset,
            });
        }
        let name = resolved.as_str();
        let Some(sub) = sub else {
            return Ok(match self.get_var(name) {
                Some(v) => PV::Str(v),
                None => PV::Unset,
            });
        };
        let var = self.st.vars.get(name).cloned();
        match sub {
            Subscript::At | Subscript::Star => {
                let star = matches!(sub, Subscript::Star);
                let items = match var.map(|v| v.value) {
                    Some(Value::Str(s)) => vec![s],
                    Some(Value::Indexed(m)) => m.into_values().collect(),
                    Some(Value::Assoc(m)) => m.values().cloned().collect(),
                    _ => Vec::new(),
                };
                Ok(PV::List(items, star))
            }
            Subscript::Index(w) => {
                let is_assoc = matches!(var.as_ref().map(|v| &v.value), Some(Value::Assoc(_)));
                if is_assoc {
                    let key = self.expand_string(w)?;
                    Ok(match var.map(|v| v.value) {
                        Some(Value::Assoc(m)) => m.get(&key).cloned().map_or(PV::Unset, PV::Str),
                        _ => PV::Unset,
                    })
                } else {
                    let text = self.expand_string(w)?;
                    let i = match self.eval_arith_text(&text) {
                        Ok(i) => i,
                        Err(AErr::Msg(m)) => {
                            self.err(&m);
                            return Err(self.line_error());
                        }
                        Err(AErr::Flow(f)) => return Err(f),
                    };
                    Ok(match var.map(|v| v.value) {
                        Some(Value::Str(s)) if i == 0 || i == -1 => PV::Str(s),
                        Some(Value::Indexed(m)) => {
                            let idx = if i < 0 {
                                m.keys().next_back().map(|k| k + 1 + i).unwrap_or(-1)
                            } else {
                                i
                            };
                            m.get(&idx).cloned().map_or(PV::Unset, PV::Str)
                        }
                        _ => PV::Unset,
                    })
                }
            }
        }
    }

    fn expand_param(&mut self, pe: &ParamExp, in_dq: bool, out: &mut Vec<Field>) -> FlowResult<()> {
        if self.expand_name_list(pe, in_dq, out) || self.expand_nameref_name(pe, in_dq, out)? {
            return Ok(());
        }
        let target = self.param_target(pe)?;
        if self.expand_array_slice(pe, &target, in_dq, out)? {
            return Ok(());
        }
        self.apply_param_op(pe, target, in_dq, out)
    }

    /// `${!prefix*}` and `${!arr[@]}`: name and key lists, not indirections. False when `pe`
    /// is neither.
    fn expand_name_list(&mut self, pe: &ParamExp, in_dq: bool, out: &mut Vec<Field>) -> bool {
        match &pe.op {
            ParamOp::PrefixNames { star } => {
                let Param::Named(prefix) = &pe.param else {
                    return true;
                };
                let names: Vec<String> = self
                    .st
                    .vars
                    .names()
                    .into_iter()
                    .filter(|n| n.starts_with(prefix.as_str()))
                    .collect();
                // Unquoted with an empty IFS, bash joins the names into one word (with IFS's
                // empty first character), where `${a[*]}` stays separate words.
                if *star && !in_dq && self.get_var("IFS").is_some_and(|s| s.is_empty()) {
                    push(out, names.concat(), false, false);
                    return true;
                }
                self.push_value(PV::List(names, *star), in_dq, out);
                true
            }
            ParamOp::Keys { star } => {
                let Param::Named(name) = &pe.param else {
                    return true;
                };
                let (name, ref_sub) = &self.resolve_ref(name);
                // A reference to an element has no keys of its own (bash 5.2).
                if ref_sub.is_some() {
                    self.push_value(PV::List(Vec::new(), *star), in_dq, out);
                    return true;
                }
                self.touch_bash_argv(name);
                let dynamic = self.dynamic_var(name);
                let keys = match self
                    .st
                    .vars
                    .get(name)
                    .or(dynamic.as_ref())
                    .map(|v| &v.value)
                {
                    Some(Value::Indexed(m)) => m.keys().map(|k| k.to_string()).collect(),
                    Some(Value::Assoc(m)) => m.keys().cloned().collect(),
                    Some(Value::Str(_)) => vec!["0".to_string()],
                    _ => Vec::new(),
                };
                // And `${!a[*]}` so into one word joined with spaces.
                if *star && !in_dq && self.get_var("IFS").is_some_and(|s| s.is_empty()) {
                    push(out, keys.join(" "), false, false);
                    return true;
                }
                self.push_value(PV::List(keys, *star), in_dq, out);
                true
            }
            _ => false,
        }
    }

    /// `${!ref}` of a nameref: the name it refers to (what bash gives), not its value. False
    /// when `pe` is not that.
    fn expand_nameref_name(
        &mut self,
        pe: &ParamExp,
        in_dq: bool,
        out: &mut Vec<Field>,
    ) -> FlowResult<bool> {
        if pe.indirect
            && pe.subscript.is_none()
            && let Param::Named(n) = &pe.param
            && let Some(v) = self.st.vars.get(n)
            && v.has(crate::vars::ATTR_NAMEREF)
        {
            // The name the chain ends at (an element: `a[1]`).
            let target = match v.scalar_value() {
                Some(t) if !t.is_empty() && !self.ref_is_circular(n) => match self.resolve_ref(n) {
                    (t, Some(k)) => PV::Str(format!("{t}[{k}]")),
                    (t, None) => PV::Str(t),
                },
                t => t.map_or(PV::Unset, |t| PV::Str(t.to_string())),
            };
            let v = match &pe.op {
                ParamOp::None => target,
                op => self.apply_op(op, target, false)?,
            };
            self.push_value(v, in_dq, out);
            return Ok(true);
        }
        Ok(false)
    }

    /// The parameter `pe` expands: itself, or for `${!x}` the one `x`'s value names. An
    /// indirection through a declared but unset variable leads nowhere (`unset`).
    fn param_target(&mut self, pe: &ParamExp) -> FlowResult<Target> {
        let mut unset_target = false;
        let (param, sub) = if pe.indirect {
            let target = match self.param_value(&pe.param, &pe.subscript)? {
                PV::Str(s) => s,
                // A declared array's empty `a[@]` leads nowhere, as an unset variable does.
                PV::List(l, _)
                    if l.is_empty()
                        && matches!(&pe.param, Param::Named(n) if self.st.vars.get(n).is_some()) =>
                {
                    unset_target = true;
                    String::new()
                }
                PV::List(l, _) => l.join(" "),
                PV::Unset => {
                    // bash: a name never declared cannot be followed (the line is
                    // abandoned); a declared one without a value leads nowhere.
                    let n = param_name(&pe.param);
                    if let Param::Named(name) = &pe.param
                        && self.st.vars.get(name).is_none()
                    {
                        self.err(&format!("{n}: invalid indirect expansion"));
                        return Err(Flow::Fatal(1));
                    }
                    if self.st.opts.nounset {
                        self.err(&format!("!{n}: unbound variable"));
                        return Err(Flow::Unbound);
                    }
                    unset_target = true;
                    String::new()
                }
            };
            match parse_param_ref(&target) {
                Some(r) => r,
                None if unset_target => (pe.param.clone(), None),
                None => {
                    self.err(&format!("{target}: invalid variable name"));
                    return Err(Flow::Fatal(1));
                }
            }
        } else {
            (pe.param.clone(), pe.subscript.clone())
        };
        Ok(Target {
            param,
            sub,
            unset: unset_target,
        })
    }

    /// `${a[@]:off:len}` of an array: slices count indices, not elements (sparse arrays
    /// differ). False when `pe` is not an array slice.
    fn expand_array_slice(
        &mut self,
        pe: &ParamExp,
        t: &Target,
        in_dq: bool,
        out: &mut Vec<Field>,
    ) -> FlowResult<bool> {
        if let ParamOp::Substring { offset, length } = &pe.op
            && let Param::Named(n) = &t.param
            && let Some(Subscript::At | Subscript::Star) = &t.sub
        {
            let resolved = self.resolve_ref(n).0;
            let array = self
                .st
                .vars
                .get(&resolved)
                .map(|v| v.value.clone())
                .filter(|v| matches!(v, Value::Indexed(_) | Value::Assoc(_)));
            if let Some(array) = array {
                let star = matches!(t.sub, Some(Subscript::Star));
                let off = self.arith_or_exit(offset)?;
                let len = match length {
                    Some(l) => Some(self.arith_or_exit(l)?),
                    None => None,
                };
                if let Some(l) = len
                    && l < 0
                {
                    self.err(&format!("{l}: substring expression < 0"));
                    return Err(Flow::Fatal(1));
                }
                let take = len.map_or(usize::MAX, |l| l as usize);
                let items: Vec<String> = match array {
                    Value::Indexed(m) => {
                        let top = m
                            .keys()
                            .next_back()
                            .map(|k| k.saturating_add(1))
                            .unwrap_or(0);
                        let start = if off < 0 {
                            top.saturating_add(off)
                        } else {
                            off
                        };
                        if start < 0 {
                            Vec::new()
                        } else {
                            m.range(start..)
                                .map(|(_, v)| v.clone())
                                .take(take)
                                .collect()
                        }
                    }
                    Value::Assoc(m) => {
                        // bash numbers an associative array's elements from 1 for a slice,
                        // and 0 is the first one too; from the end they count as usual.
                        let start = match off {
                            0 => 0,
                            o if o > 0 => o - 1,
                            o => m.len() as i64 + o,
                        };
                        if start < 0 {
                            Vec::new()
                        } else {
                            m.values()
                                .skip(start as usize)
                                .take(take)
                                .cloned()
                                .collect()
                        }
                    }
                    _ => unreachable!("filtered to arrays above"),
                };
                self.push_value(PV::List(items, star), in_dq, out);
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// `pe`'s operator (`:-`, `#`, `@a`, ...) applied to the value of `t`.
    fn apply_param_op(
        &mut self,
        pe: &ParamExp,
        t: Target,
        in_dq: bool,
        out: &mut Vec<Field>,
    ) -> FlowResult<()> {
        let Target {
            param,
            sub,
            unset: unset_target,
        } = t;
        let value = if unset_target {
            PV::Unset
        } else {
            self.param_value(&param, &sub)?
        };
        // bash tests `${a[@]:-x}` on the elements joined (by a space for `@`, by IFS's first
        // character for `*`): two empty elements join to a non-null " ".
        // Through an indirection (`ref='a[@]'; ${!ref:-x}`) bash tests only that there are
        // elements: `a=("")` is not null there.
        let ifs_sep = self.get_var("IFS").is_none_or(|s| !s.is_empty());
        let is_set_nonnull = |v: &PV, colon: bool| match v {
            PV::Unset => false,
            PV::Str(s) => !colon || !s.is_empty(),
            PV::List(l, star) => {
                if colon && !pe.indirect {
                    // Unquoted, several empty words are not null whatever IFS is.
                    l.iter().any(|s| !s.is_empty()) || (l.len() > 1 && (!star || ifs_sep || !in_dq))
                } else {
                    !l.is_empty()
                }
            }
        };
        // bash 5.2 reads a reference to an array element unset or not without `set -u`
        // complaining, and measures it as 0 long.
        let element_ref = !pe.indirect
            && sub.is_none()
            && matches!(&param, Param::Named(n) if self.st.vars.get(n).is_some_and(|v| v.has(crate::vars::ATTR_NAMEREF)) && self.resolve_ref(n).1.is_some());
        match &pe.op {
            ParamOp::None => {
                if matches!(value, PV::Unset) && self.st.opts.nounset && !element_ref {
                    return Err(self.unbound(&param, &sub));
                }
                self.push_value(value, in_dq, out);
            }
            ParamOp::Length if element_ref => push(out, "0".into(), in_dq, !in_dq),
            ParamOp::Length => {
                let n = match value {
                    PV::Unset => {
                        if self.st.opts.nounset {
                            return Err(self.unbound(&param, &sub));
                        }
                        0
                    }
                    PV::Str(s) if self.byte_locale() => wasmsand_exec::raw::byte_len(&s),
                    PV::Str(s) => s.chars().count(),
                    PV::List(l, _) => l.len(),
                };
                push(out, n.to_string(), in_dq, !in_dq);
            }
            ParamOp::Default { colon, word } => {
                if is_set_nonnull(&value, *colon) {
                    self.push_value(value, in_dq, out);
                } else {
                    self.expand_operand(word, in_dq, out)?;
                }
            }
            ParamOp::Alternate { colon, word } => {
                if is_set_nonnull(&value, *colon) {
                    self.expand_operand(word, in_dq, out)?;
                }
            }
            ParamOp::Assign { colon, word } => {
                if is_set_nonnull(&value, *colon) {
                    self.push_value(value, in_dq, out);
                } else {
                    let v = self.assign_default(&param, &sub, word)?;
                    push(out, v, in_dq, !in_dq);
                }
            }
            ParamOp::Error { colon, word } => {
                if is_set_nonnull(&value, *colon) {
                    self.push_value(value, in_dq, out);
                } else {
                    let msg = self.expand_string(word)?;
                    let msg = if msg.is_empty() {
                        if *colon {
                            "parameter null or not set".to_string()
                        } else {
                            "parameter not set".to_string()
                        }
                    } else {
                        msg
                    };
                    self.err(&format!("{}: {msg}", param_display(&param, &sub)));
                    return Err(Flow::Unbound);
                }
            }
            ParamOp::Transform('K')
                if matches!(&param, Param::Named(_))
                    && matches!(sub, Some(Subscript::At | Subscript::Star)) =>
            {
                let Param::Named(name) = &param else {
                    unreachable!()
                };
                let text = self.key_value_pairs(name);
                push(out, text, in_dq, !in_dq);
            }
            ParamOp::Transform('a') if matches!(value, PV::Unset) && self.st.opts.nounset => {
                return Err(self.unbound(&param, &sub));
            }
            // Special parameters have no attributes, and an indirection that led nowhere
            // names no variable.
            ParamOp::Transform('a') if unset_target || !matches!(&param, Param::Named(_)) => {}
            // bash's `${a[@]@a}` repeats the array's attributes once per element;
            // `${a[i]@a}` is the array's attributes.
            ParamOp::Transform('a') => {
                let Param::Named(name) = &param else {
                    unreachable!()
                };
                // Through a reference, the attributes of the variable it names.
                let name = &self.reference_target(name);
                let letters = self
                    .st
                    .vars
                    .get(name)
                    .map(crate::vars::print::attr_letters)
                    .unwrap_or_default();
                let v = match value {
                    PV::List(items, star) => PV::List(vec![letters; items.len()], star),
                    _ => PV::Str(letters),
                };
                self.push_value(v, in_dq, out);
            }
            ParamOp::Transform('A') if matches!(&param, Param::Named(_)) => {
                let Param::Named(name) = &param else {
                    unreachable!()
                };
                let name = &self.reference_target(name);
                let var = self.st.vars.get(name).cloned();
                let text = match var {
                    None => String::new(),
                    // An array named without `[@]`, or one element of it: bash recreates
                    // that element as the variable (`declare -ai a='2'`).
                    Some(v)
                        if v.is_array()
                            && !matches!(sub, Some(Subscript::At | Subscript::Star)) =>
                    {
                        let flags = crate::vars::print::attr_letters(&v);
                        match &value {
                            PV::Str(s) => format!(
                                "declare -{flags} {name}={}",
                                crate::printf::quote_single(s)
                            ),
                            _ => format!("declare -{flags} {name}"),
                        }
                    }
                    Some(v) => crate::vars::print::assignment_form(name, &v),
                };
                push(out, text, in_dq, !in_dq);
            }
            op => {
                if matches!(value, PV::Unset) && self.st.opts.nounset {
                    return Err(self.unbound(&param, &sub));
                }
                let is_positional_list = matches!(param, Param::Special('@' | '*'));
                let v = self.apply_op(op, value, is_positional_list)?;
                self.push_value(v, in_dq, out);
            }
        }
        Ok(())
    }

    /// bash's `${a[@]@K}`: key/value pairs, quoted as `declare -p` quotes them.
    fn key_value_pairs(&self, name: &str) -> String {
        let name = self.resolve_ref(name).0;
        let dq = |v: &str| {
            let mut o = String::from("\"");
            for c in v.chars() {
                if matches!(c, '"' | '\\' | '$' | '`') {
                    o.push('\\');
                }
                o.push(c);
            }
            o.push('"');
            o
        };
        match self.st.vars.get(&name).map(|v| &v.value) {
            Some(Value::Assoc(m)) => m
                .iter()
                .map(|(k, v)| format!("{k} {} ", dq(v)))
                .collect::<String>(),
            Some(Value::Indexed(m)) => m
                .iter()
                .map(|(k, v)| format!("{k} {}", dq(v)))
                .collect::<Vec<_>>()
                .join(" "),
            Some(Value::Str(s)) => format!("0 {}", dq(s)),
            _ => String::new(),
        }
    }

    /// `${x=word}` / `${x:=word}` when `x` is unset (or null): assigns the expanded word and
    /// returns it.
    fn assign_default(
        &mut self,
        param: &Param,
        sub: &Option<Subscript>,
        word: &Word,
    ) -> FlowResult<String> {
        let v = self.expand_string(word)?;
        let Param::Named(name) = param else {
            self.err(&format!(
                "${}: cannot assign in this way",
                param_name(param)
            ));
            return Err(Flow::Fatal(1));
        };
        let key = match sub {
            Some(Subscript::Index(w)) => Some(self.subscript_key(name, w)?),
            _ => None,
        };
        // `${r:=x}` of a readonly `r` abandons the line, in `-c` text too.
        if let Err(m) = self.assign(name, key, v.clone(), false) {
            self.err(&m.to_string());
            return Err(Flow::Fatal(1));
        }
        Ok(v)
    }

    /// Reports `param` unbound (under `set -u`) and gives the flow that abandons the line.
    fn unbound(&mut self, param: &Param, sub: &Option<Subscript>) -> Flow {
        self.err(&format!("{}: unbound variable", param_display(param, sub)));
        Flow::Unbound
    }

    /// The word of `${x:-word}` / `${x:+word}`: unquoted, even its literal text is split.
    fn expand_operand(&mut self, word: &Word, in_dq: bool, out: &mut Vec<Field>) -> FlowResult<()> {
        let mut tmp: Vec<Field> = vec![Vec::new()];
        self.expand_parts(&word.parts, in_dq, &mut tmp)?;
        for (i, mut field) in tmp.into_iter().enumerate() {
            if !in_dq {
                for p in field.iter_mut() {
                    if !p.quoted {
                        p.split = true;
                    }
                }
            }
            if i == 0 {
                if let Some(f) = out.last_mut() {
                    f.extend(field);
                }
            } else {
                out.push(field);
            }
        }
        Ok(())
    }

    fn subscript_key(&mut self, name: &str, w: &Word) -> FlowResult<AssignKey> {
        let text = self.expand_string(w)?;
        let name = &self.resolve_ref(name).0;
        let is_assoc = matches!(
            self.st.vars.get(name).map(|v| &v.value),
            Some(Value::Assoc(_))
        );
        if is_assoc {
            return Ok(AssignKey::Key(text));
        }
        match self.eval_arith_text(&text) {
            Ok(i) => Ok(AssignKey::Index(i)),
            Err(AErr::Msg(m)) => {
                self.err(&m);
                Err(self.line_error())
            }
            Err(AErr::Flow(f)) => Err(f),
        }
    }

    fn apply_op(&mut self, op: &ParamOp, value: PV, positional: bool) -> FlowResult<PV> {
        // In the C locale the operations see bytes: each value goes through them as one char
        // per byte and comes back (patterns are mapped the same way below).
        let bytes = self.byte_locale();
        let each = |v: PV, f: &mut dyn FnMut(&str) -> String| -> PV {
            let mut g = |s: &str| {
                if bytes {
                    crate::interp::chars_as_bytes(&f(&crate::interp::bytes_as_chars(s)))
                } else {
                    f(s)
                }
            };
            match v {
                PV::Unset => PV::Str(g("")),
                PV::Str(s) => PV::Str(g(&s)),
                PV::List(l, star) => PV::List(l.iter().map(|s| g(s)).collect(), star),
            }
        };
        let pattern_text = |p: String| {
            if bytes {
                crate::interp::bytes_as_chars(&p)
            } else {
                p
            }
        };
        Ok(match op {
            ParamOp::Substring { offset, length } => {
                let off = self.arith_or_exit(offset)?;
                let len = match length {
                    Some(l) => Some(self.arith_or_exit(l)?),
                    None => None,
                };
                match value {
                    PV::List(l, star) => {
                        // `${@:0}` starts with $0.
                        let mut items = l;
                        let mut off = off;
                        if positional {
                            items.insert(0, self.st.arg0.clone());
                        }
                        let n = items.len() as i64;
                        if off < 0 {
                            off += n;
                            if off < 0 {
                                return Ok(PV::List(Vec::new(), star));
                            }
                        }
                        let start = off.min(n) as usize;
                        let end = match len {
                            None => n as usize,
                            Some(l) if l < 0 => {
                                self.err(&format!("{l}: substring expression < 0"));
                                return Err(Flow::Fatal(1));
                            }
                            Some(l) => (start as i64 + l).min(n) as usize,
                        };
                        PV::List(items[start..end.max(start)].to_vec(), star)
                    }
                    PV::Unset => PV::Str(String::new()),
                    PV::Str(s) => {
                        let text = if bytes {
                            crate::interp::bytes_as_chars(&s)
                        } else {
                            s
                        };
                        let chars: Vec<char> = text.chars().collect();
                        let n = chars.len() as i64;
                        let start = if off < 0 { n + off } else { off };
                        if start < 0 || start > n {
                            return Ok(PV::Str(String::new()));
                        }
                        let end = match len {
                            None => n,
                            Some(l) if l < 0 => {
                                let e = n + l;
                                if e < start {
                                    self.err(&format!("{l}: substring expression < 0"));
                                    return Err(Flow::Fatal(1));
                                }
                                e
                            }
                            Some(l) => (start + l).min(n),
                        };
                        let piece: String = chars[start as usize..end as usize].iter().collect();
                        PV::Str(if bytes {
                            crate::interp::chars_as_bytes(&piece)
                        } else {
                            piece
                        })
                    }
                }
            }
            ParamOp::RemovePrefix { longest, pattern } => {
                let pat = pattern_text(self.expand_pattern(pattern)?);
                each(
                    value,
                    &mut |s| match pattern::strip_prefix_len(s, &pat, *longest) {
                        Some(n) => s[n..].to_string(),
                        None => s.to_string(),
                    },
                )
            }
            ParamOp::RemoveSuffix { longest, pattern } => {
                let pat = pattern_text(self.expand_pattern(pattern)?);
                each(
                    value,
                    &mut |s| match pattern::strip_suffix_start(s, &pat, *longest) {
                        Some(n) => s[..n].to_string(),
                        None => s.to_string(),
                    },
                )
            }
            ParamOp::Replace {
                mode,
                pattern: pw,
                replacement,
            } => {
                let pat = pattern_text(self.expand_pattern(pw)?);
                let rep = pattern_text(self.expand_replacement(replacement)?);
                let mode = *mode;
                // `shopt -s nocasematch` applies to pattern substitution too (bash 5.2).
                let nocase = self.st.opts.nocasematch;
                each(value, &mut |s| replace(s, &pat, &rep, mode, nocase))
            }
            ParamOp::Case {
                upper,
                all,
                pattern: pw,
            } => {
                let pat = self.expand_pattern(pw)?;
                let (upper, all) = (*upper, *all);
                each(value, &mut |s| change_case(s, &pat, upper, all))
            }
            ParamOp::Transform(c) => {
                let c = *c;
                match c {
                    // An unset variable quotes to nothing, not to ''.
                    'Q' if matches!(value, PV::Unset) => PV::Unset,
                    'Q' => each(value, &mut |s| crate::printf::quote_single(s)),
                    'E' => each(value, &mut |s| {
                        wasmsand_exec::raw::decode_vec(crate::printf::echo_escapes(s).0)
                    }),
                    'P' => match value {
                        PV::Str(s) => PV::Str(self.prompt_expand(&s)?),
                        PV::List(l, star) => {
                            let mut out = Vec::new();
                            for s in l {
                                out.push(self.prompt_expand(&s)?);
                            }
                            PV::List(out, star)
                        }
                        PV::Unset => PV::Unset,
                    },
                    'U' => each(value, &mut |s| s.to_uppercase()),
                    'L' => each(value, &mut |s| s.to_lowercase()),
                    'u' => each(value, &mut |s| change_case(s, "", true, false)),
                    'a' => value,
                    // A scalar's key/value form is its quoted value.
                    'K' | 'k' if matches!(value, PV::Str(_)) => {
                        each(value, &mut |s| crate::printf::quote_single(s))
                    }
                    'A' | 'K' | 'k' => value,
                    _ => {
                        self.err(&format!("@{c}: bad substitution"));
                        return Err(Flow::Exit(1));
                    }
                }
            }
            _ => value,
        })
    }

    fn push_value(&mut self, v: PV, in_dq: bool, out: &mut Vec<Field>) {
        match v {
            PV::Unset => push(out, String::new(), in_dq, false),
            PV::Str(s) => push(out, s, in_dq, !in_dq),
            PV::List(items, star) => {
                if star && (in_dq || self.unsplit) {
                    let ifs = self.get_var("IFS");
                    let sep = match ifs.as_deref() {
                        None => " ".to_string(),
                        Some(s) => s.chars().next().map(String::from).unwrap_or_default(),
                    };
                    push(out, items.join(&sep), in_dq, false);
                    return;
                }
                // With a first IFS character that is not white space, bash joins the words
                // with it and splits the result: an empty word between two others stays an
                // empty field (`IFS=x; set -- a "" b; echo $@`).
                if !in_dq
                    && !self.unsplit
                    && let Some(sep) = self
                        .get_var("IFS")
                        .and_then(|s| s.chars().next())
                        .filter(|c| !matches!(c, ' ' | '\t' | '\n'))
                {
                    push(out, items.join(&sep.to_string()), false, true);
                    return;
                }
                for (i, item) in items.into_iter().enumerate() {
                    if i > 0 {
                        out.push(Vec::new());
                    }
                    push(out, item, in_dq, !in_dq);
                }
            }
        }
    }

    // ---- globbing ----

    fn glob_field(&mut self, f: Field, out: &mut Vec<String>) -> FlowResult<()> {
        let literal: String = f.iter().map(|p| p.text.as_str()).collect();
        let ext = self.extglob();
        let globbable = !self.st.opts.noglob
            && f.iter().any(|p| {
                !p.quoted && (p.text.contains(['*', '?', '[']) || (ext && p.text.contains('(')))
            });
        if !globbable {
            out.push(literal);
            return Ok(());
        }
        let pat: String = f
            .iter()
            .map(|p| {
                if p.quoted {
                    pattern::escape(&p.text)
                } else if ext {
                    p.text.clone()
                } else {
                    pattern::plain_parens(&p.text)
                }
            })
            .collect();
        if !pattern::has_meta(&pat) {
            out.push(literal);
            return Ok(());
        }
        let ignore = pattern::split_globignore(&self.get_var("GLOBIGNORE").unwrap_or_default());
        let opts = pattern::GlobOptions {
            dotglob: self.st.opts.dotglob,
            nullglob: self.st.opts.nullglob,
            nocaseglob: self.st.opts.nocaseglob,
            max_results: self.st.limits.max_glob_results,
            globstar: self.shopt_value("globstar") == Some(true),
            skipdots: self.shopt_value("globskipdots") != Some(false),
            bytes: self.byte_locale(),
        };
        let mut r = {
            let vfs = self.rt.vfs.lock();
            pattern::glob(&vfs, &self.st.cwd, &pat, &opts)
        };
        if !ignore.is_empty()
            && let Ok(v) = &mut r
        {
            v.retain(|p| {
                let base = p.rsplit('/').next().unwrap_or(p);
                base != "." && base != ".." && !ignore.iter().any(|i| pattern::matches_path(i, p))
            });
        }
        match r {
            Ok(v) if v.is_empty() => {
                if self.st.opts.failglob {
                    self.err(&format!("no match: {literal}"));
                    return Err(Flow::Fatal(1));
                }
                if !self.st.opts.nullglob {
                    out.push(literal);
                }
            }
            Ok(v) => out.extend(v),
            Err(e) => return Err(self.limit(format!("{literal}: {e}"))),
        }
        Ok(())
    }

    // ---- brace expansion ----

    /// Expands the brace parts of a word into several words, bounded.
    pub(crate) fn brace_expand(&mut self, word: &Word) -> FlowResult<Vec<Word>> {
        if !word.parts.iter().any(|p| matches!(p, WordPart::Brace(_))) {
            return Ok(vec![word.clone()]);
        }
        let limit = self.st.limits.max_brace_words;
        let mut acc: Vec<Vec<WordPart>> = vec![Vec::new()];
        for part in &word.parts {
            match part {
                WordPart::Brace(b) => {
                    let alts = self.brace_alternatives(b)?;
                    if acc.len().saturating_mul(alts.len()) > limit {
                        return Err(
                            self.limit(format!("brace expansion: too many words (limit: {limit})"))
                        );
                    }
                    let mut next = Vec::with_capacity(acc.len() * alts.len());
                    for prefix in &acc {
                        for alt in &alts {
                            let mut p = prefix.clone();
                            p.extend(alt.parts.iter().cloned());
                            next.push(p);
                        }
                    }
                    acc = next;
                }
                other => {
                    for p in acc.iter_mut() {
                        p.push(other.clone());
                    }
                }
            }
        }
        let mut out = Vec::new();
        for mut parts in acc {
            join_bare_names(&mut parts);
            let w = Word { parts };
            // Alternatives may hold braces of their own (`{a,b{1,2}}`).
            let more = self.brace_expand(&w)?;
            out.extend(more);
            if out.len() > limit {
                return Err(self.limit(format!("brace expansion: too many words (limit: {limit})")));
            }
        }
        Ok(out)
    }

    fn brace_alternatives(&mut self, b: &BraceExp) -> FlowResult<Vec<Word>> {
        match b {
            BraceExp::List(words) => Ok(words.clone()),
            BraceExp::Seq { start, end, step } => {
                let limit = self.st.limits.max_brace_words;
                let step_n: i64 = step
                    .as_deref()
                    .and_then(|s| s.parse::<i64>().ok())
                    .unwrap_or(1);
                let step_abs = step_n.unsigned_abs().max(1) as i128;
                if let (Ok(a), Ok(z)) = (start.parse::<i64>(), end.parse::<i64>()) {
                    let count = ((a as i128 - z as i128).abs() / step_abs) + 1;
                    if count > limit as i128 {
                        return Err(
                            self.limit(format!("brace expansion: too many words (limit: {limit})"))
                        );
                    }
                    let width = if has_zero_pad(start) || has_zero_pad(end) {
                        start.len().max(end.len())
                    } else {
                        0
                    };
                    let mut v = Vec::new();
                    let mut i = a as i128;
                    let up = z as i128 >= a as i128;
                    while (up && i <= z as i128) || (!up && i >= z as i128) {
                        let s = if width > 0 {
                            if i < 0 {
                                format!("-{:0w$}", -i, w = width - 1)
                            } else {
                                format!("{:0w$}", i, w = width)
                            }
                        } else {
                            i.to_string()
                        };
                        v.push(Word::literal(&s));
                        if up { i += step_abs } else { i -= step_abs }
                    }
                    return Ok(v);
                }
                let (Some(a), Some(z)) = (single_char(start), single_char(end)) else {
                    return Ok(vec![Word::literal(&brace_text(b))]);
                };
                let (a, z) = (a as u32, z as u32);
                let mut v = Vec::new();
                let mut i = a as i64;
                let up = z >= a;
                while (up && i <= z as i64) || (!up && i >= z as i64) {
                    if let Some(c) = char::from_u32(i as u32) {
                        // bash's generated `\` is then taken as an escape: an empty word.
                        let text = if c == '\\' {
                            String::new()
                        } else {
                            c.to_string()
                        };
                        v.push(Word {
                            parts: vec![WordPart::Quoted(text)],
                        });
                    }
                    if up {
                        i += step_abs as i64
                    } else {
                        i -= step_abs as i64
                    }
                }
                Ok(v)
            }
        }
    }

    // ---- assignments ----

    pub(crate) fn eval_assignment(&mut self, a: &Assignment) -> FlowResult<AssignedValue> {
        Ok(match &a.value {
            AssignValue::Scalar(w) => {
                let v = self.expand_string(w)?;
                match &a.index {
                    Some(iw) => {
                        let target = self.resolve_ref(&a.name).0;
                        let assoc = matches!(
                            self.st.vars.get(&target).map(|v| &v.value),
                            Some(Value::Assoc(_))
                        );
                        // An indexed array's subscript is arithmetic on the text: its single
                        // quotes stay and make the error bash reports (`a['2']=3`).
                        let k = if !assoc
                            && iw.parts.iter().any(|p| matches!(p, WordPart::Quoted(_)))
                        {
                            let mut text = String::new();
                            for p in &iw.parts {
                                match p {
                                    WordPart::Quoted(q) => text.push_str(&format!("'{q}'")),
                                    other => text.push_str(&self.expand_string(&Word {
                                        parts: vec![other.clone()],
                                    })?),
                                }
                            }
                            text
                        } else {
                            self.expand_string(iw)?
                        };
                        AssignedValue::Elem(k, v)
                    }
                    None => AssignedValue::Scalar(v),
                }
            }
            AssignValue::Array(_) if a.index.is_some() => {
                let sub = a.index.as_ref().map(source_text).unwrap_or_default();
                self.err(&format!(
                    "{}[{sub}]: cannot assign list to array member",
                    a.name
                ));
                return Err(Flow::Fatal(1));
            }
            AssignValue::Array(elems) => {
                let target = self.resolve_ref(&a.name).0;
                let assoc = self.assoc_literal
                    || matches!(
                        self.st.vars.get(&target).map(|v| &v.value),
                        Some(Value::Assoc(_))
                    );
                let mut out = Vec::new();
                for e in elems {
                    // Brace expansion comes first and works on the text: `[k]=-{a,b}-` turns
                    // into the words `[k]=-a-` and `[k]=-b-`, plain values then.
                    // (Not in an associative array's literal.)
                    if !assoc
                        && e.key.is_some()
                        && e.value
                            .parts
                            .iter()
                            .any(|p| matches!(p, WordPart::Literal(l) if l.contains('{')))
                        && let Some(word) = reparsed_word(&crate::printer::array_elem_text(e))
                        && word.parts.iter().any(|p| matches!(p, WordPart::Brace(_)))
                    {
                        for f in self.expand_word_fields(&word)? {
                            out.push((None, false, f));
                        }
                        continue;
                    }
                    match &e.key {
                        // bash does no tilde expansion in `[k]=~` of an associative array.
                        Some(k) if assoc => {
                            let k = self.expand_string(k)?;
                            let value = Word {
                                parts: e
                                    .value
                                    .parts
                                    .iter()
                                    .map(|p| match p {
                                        WordPart::Tilde(user) => {
                                            WordPart::Literal(format!("~{user}"))
                                        }
                                        p => p.clone(),
                                    })
                                    .collect(),
                            };
                            let v = self.expand_string(&value)?;
                            out.push((Some(k), e.append, v));
                        }
                        Some(k) => {
                            let k = self.expand_string(k)?;
                            let v = self.expand_string(&e.value)?;
                            out.push((Some(k), e.append, v));
                        }
                        None => {
                            for f in self.expand_word_fields(&e.value)? {
                                out.push((None, false, f));
                            }
                        }
                    }
                }
                AssignedValue::Array(out)
            }
        })
    }

    /// Stores an evaluated assignment; the message is for `bash: line N: ...`.
    pub(crate) fn store_assignment(
        &mut self,
        a: &Assignment,
        v: AssignedValue,
    ) -> Result<(), ShellError> {
        match v {
            AssignedValue::Scalar(s) => self.assign(&a.name, None, s, a.append),
            AssignedValue::Elem(k, s) => {
                let key = self.key_for(&a.name, &k)?;
                self.assign(&a.name, Some(key), s, a.append)
            }
            AssignedValue::Array(items) => self.assign_array(&a.name, items, a.append),
        }
    }

    /// Assigns to a name given as a runtime string, which may be an element (`printf -v
    /// 'a[1]'`, `{a[1]}>file`).
    pub(crate) fn assign_named(&mut self, target: &str, text: String) -> Result<(), ShellError> {
        match target.find('[') {
            Some(i) if target.ends_with(']') => {
                let name = target[..i].to_string();
                let key = self.runtime_key_for(&name, &target[i + 1..target.len() - 1])?;
                self.assign(&name, Some(key), text, false)
            }
            _ => self.set_var(target, text),
        }
    }

    /// The value of a name given as a runtime string, which may be an element (`a[1]`).
    pub(crate) fn value_of_named(&self, target: &str) -> Option<String> {
        match target.find('[') {
            Some(i) if target.ends_with(']') => {
                self.element_value(&target[..i], &target[i + 1..target.len() - 1])
            }
            _ => self.get_var(target),
        }
    }

    /// [`Self::key_for`] for a subscript written in a runtime string (`printf -v 'a[$k]'`,
    /// `unset 'a["k"]'`, a `declare -n` target): an associative key is expanded first.
    pub(crate) fn runtime_key_for(&mut self, name: &str, k: &str) -> Result<AssignKey, ShellError> {
        let target = self.resolve_ref(name).0;
        if matches!(
            self.st.vars.get(&target).map(|v| &v.value),
            Some(Value::Assoc(_))
        ) {
            return match self.expand_string(&runtime_subscript(k)) {
                Ok(key) => Ok(AssignKey::Key(key)),
                Err(_) => Err(ShellError::BadSubscript(k.to_string())),
            };
        }
        self.key_for(name, k)
    }

    pub(crate) fn key_for(&mut self, name: &str, k: &str) -> Result<AssignKey, ShellError> {
        let name = &self.resolve_ref(name).0;
        let is_assoc = matches!(
            self.st.vars.get(name).map(|v| &v.value),
            Some(Value::Assoc(_))
        );
        if is_assoc {
            Ok(AssignKey::Key(k.to_string()))
        } else if k.trim().is_empty() {
            Err(ShellError::BadSubscript(format!("{name}[{k}]")))
        } else {
            match self.eval_arith_text(k) {
                Ok(i) => Ok(AssignKey::Index(i)),
                Err(AErr::Msg(m)) => Err(ShellError::SubscriptArith(m)),
                Err(AErr::Flow(_)) => Err(ShellError::BadSubscript(k.to_string())),
            }
        }
    }

    pub(crate) fn assign_array(
        &mut self,
        name: &str,
        items: Vec<(Option<String>, bool, String)>,
        append: bool,
    ) -> Result<(), ShellError> {
        let (resolved, sub) = self.resolve_ref(name);
        if let Some(k) = sub {
            return Err(ShellError::InvalidIdentifier(format!("{resolved}[{k}]")));
        }
        let name = resolved.as_str();
        let existing = self.st.vars.get(name).cloned();
        if let Some(v) = &existing
            && v.has(ATTR_READONLY)
        {
            return Err(ShellError::Readonly(name.to_string()));
        }
        let attrs = existing.as_ref().map(|v| v.attrs).unwrap_or(0) & !crate::vars::ATTR_NOVALUE;
        let is_assoc = matches!(existing.as_ref().map(|v| &v.value), Some(Value::Assoc(_)));
        let integer = attrs & ATTR_INTEGER != 0;
        if is_assoc {
            // `a=([k]+=v)` builds a new table, but `+=` reads the value `k` had before the
            // assignment (bash 5.2 fills the new table while the old one is still the
            // variable's).
            let (mut m, before) = match (append, existing.map(|v| v.value)) {
                (true, Some(Value::Assoc(m))) => (m, None),
                (false, Some(Value::Assoc(old))) => (crate::vars::AssocMap::new(), Some(old)),
                _ => (crate::vars::AssocMap::new(), None),
            };
            let mut pending_key: Option<String> = None;
            // `(k1 v1 k2 v2)` pairs only when the list starts without a subscript.
            let pairs = items.first().is_some_and(|(k, _, _)| k.is_none());
            for (k, add, v) in items {
                match k {
                    Some(k) => {
                        let v = crate::interp::apply_case_attrs(attrs, v);
                        let prior = match &before {
                            Some(old) if add => Some(old.get(&k).cloned().unwrap_or_default()),
                            _ => None,
                        };
                        let slot = m.slot(k);
                        match prior {
                            Some(p) => *slot = p + &v,
                            None if add => slot.push_str(&v),
                            None => *slot = v,
                        }
                    }
                    None if !pairs => self.err(&format!(
                        "{name}: {v}: must use subscript when assigning associative array"
                    )),
                    // bash 5.1+: `(k1 v1 k2 v2)` pairs up keys and values.
                    None => match pending_key.take() {
                        Some(key) => {
                            m.insert(key, v);
                        }
                        None => pending_key = Some(v),
                    },
                }
            }
            if let Some(k) = pending_key {
                m.insert(k, String::new());
            }
            self.st.vars.put(
                name,
                Var {
                    value: Value::Assoc(m),
                    attrs,
                },
            );
            return Ok(());
        }
        let mut m = match (append, existing.map(|v| v.value)) {
            (true, Some(Value::Indexed(m))) => m,
            (true, Some(Value::Str(s))) => BTreeMap::from([(0, s)]),
            _ => BTreeMap::new(),
        };
        let mut next = m.keys().next_back().map(|k| k.wrapping_add(1)).unwrap_or(0);
        for (k, add, v) in items {
            // bash fills the array in place: a subscript naming the array itself
            // (`a=([0]=5 [a[0]]=x)`) sees the elements assigned before it.
            if k.as_deref().is_some_and(|k| k.contains(name)) {
                self.st.vars.put(
                    name,
                    Var {
                        value: Value::Indexed(m.clone()),
                        attrs,
                    },
                );
            }
            let idx = match k {
                Some(k) => match self.eval_arith_text(&k) {
                    Ok(i) if i < 0 => {
                        let top = m
                            .keys()
                            .next_back()
                            .map(|k| k.saturating_add(1))
                            .unwrap_or(0);
                        if top + i < 0 {
                            return Err(ShellError::BadSubscript(format!("[{k}]")));
                        }
                        top + i
                    }
                    Ok(i) => i,
                    Err(AErr::Msg(msg)) => return Err(ShellError::Arith(msg)),
                    Err(AErr::Flow(_)) => return Err(ShellError::BadSubscript(k.to_string())),
                },
                None => next,
            };
            let v = if integer {
                let base = if add {
                    m.get(&idx).cloned().unwrap_or_default()
                } else {
                    String::new()
                };
                match self.eval_arith_text(&v) {
                    Ok(n) => {
                        let b = if base.is_empty() {
                            0
                        } else {
                            self.eval_arith_text(&base).unwrap_or(0)
                        };
                        b.wrapping_add(n).to_string()
                    }
                    Err(AErr::Msg(msg)) => return Err(ShellError::Arith(msg)),
                    Err(AErr::Flow(_)) => v,
                }
            } else {
                let v = crate::interp::apply_case_attrs(attrs, v);
                if add {
                    format!("{}{v}", m.get(&idx).map(String::as_str).unwrap_or(""))
                } else {
                    v
                }
            };
            m.insert(idx, v);
            next = idx.wrapping_add(1);
        }
        self.st.vars.put(
            name,
            Var {
                value: Value::Indexed(m),
                attrs,
            },
        );
        Ok(())
    }
}

/// bash expands a tilde after the `=` of an argument that looks like an assignment
/// (`echo x=~`, `[ x=~ = ... ]`).
fn assignment_tilde(w: &Word) -> std::borrow::Cow<'_, Word> {
    if let Some(WordPart::Literal(s)) = w.parts.first()
        && let Some(eq) = s.find("=~")
        && crate::vars::is_valid_name(&s[..eq])
    {
        let rest = &s[eq + 2..];
        if rest.is_empty() || rest.starts_with('/') || rest.starts_with(':') {
            let mut parts = vec![
                WordPart::Literal(s[..=eq].to_string()),
                WordPart::Tilde(String::new()),
            ];
            if !rest.is_empty() {
                parts.push(WordPart::Literal(rest.to_string()));
            }
            parts.extend(w.parts[1..].iter().cloned());
            return std::borrow::Cow::Owned(Word { parts });
        }
    }
    std::borrow::Cow::Borrowed(w)
}

/// A word that brace expansion left starting with an unquoted `~user` prefix.
fn leading_tilde(w: &Word) -> std::borrow::Cow<'_, Word> {
    // Brace expansion leaves the prefix in pieces (`~{/src,root}` gives `~` then `root`).
    let lits = w
        .parts
        .iter()
        .take_while(|p| matches!(p, WordPart::Literal(_)))
        .count();
    if lits > 1 {
        let joined: String = w.parts[..lits]
            .iter()
            .map(|p| match p {
                WordPart::Literal(l) => l.as_str(),
                _ => "",
            })
            .collect();
        let mut parts = vec![WordPart::Literal(joined)];
        parts.extend(w.parts[lits..].iter().cloned());
        let merged = Word { parts };
        return match leading_tilde(&merged) {
            std::borrow::Cow::Owned(t) => std::borrow::Cow::Owned(t),
            std::borrow::Cow::Borrowed(_) => std::borrow::Cow::Borrowed(w),
        };
    }
    if let Some(WordPart::Literal(s)) = w.parts.first()
        && let Some(rest) = s.strip_prefix('~')
    {
        let end = rest.find('/').unwrap_or(rest.len());
        let user = &rest[..end];
        let user_ok = user.is_empty()
            || user == "+"
            || user == "-"
            || user
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
        let ends_prefix = end < rest.len()
            || match w.parts.get(1) {
                None => true,
                Some(WordPart::Literal(n)) => n.starts_with('/'),
                _ => false,
            };
        if user_ok && ends_prefix {
            let mut parts = vec![WordPart::Tilde(user.to_string())];
            if end < rest.len() {
                parts.push(WordPart::Literal(rest[end..].to_string()));
            }
            parts.extend(w.parts[1..].iter().cloned());
            return std::borrow::Cow::Owned(Word { parts });
        }
    }
    std::borrow::Cow::Borrowed(w)
}

fn is_list_param(p: &ParamExp) -> bool {
    // `"${!a[@]}"` of an empty (or declared, unset) array is no word, like `"${a[@]}"`.
    if matches!(p.op, ParamOp::Keys { star: false }) {
        return true;
    }
    // Per-element operators keep `"${a[@]...}"` a list: an empty one is no word at all.
    let per_element = matches!(
        p.op,
        ParamOp::None
            | ParamOp::Substring { .. }
            | ParamOp::RemovePrefix { .. }
            | ParamOp::RemoveSuffix { .. }
            | ParamOp::Replace { .. }
            | ParamOp::Case { .. }
            | ParamOp::Alternate { .. }
            | ParamOp::Transform('Q' | 'E' | 'U' | 'L' | 'u' | 'P' | 'a')
    );
    if p.indirect || !per_element {
        return false;
    }
    matches!(p.param, Param::Special('@'))
        || (matches!(p.subscript, Some(Subscript::At)) && matches!(p.param, Param::Named(_)))
}

fn push(out: &mut [Field], text: String, quoted: bool, split: bool) {
    if let Some(f) = out.last_mut() {
        f.push(Piece {
            text,
            quoted,
            split,
        });
    }
}

fn join_fields(fields: &[Field], f: impl Fn(&Piece) -> String) -> String {
    let mut s = String::new();
    for (i, field) in fields.iter().enumerate() {
        if i > 0 {
            s.push(' ');
        }
        for p in field {
            s.push_str(&f(p));
        }
    }
    s
}

/// Splits a field on IFS where its pieces allow it. IFS whitespace runs delimit (and are
/// trimmed at both ends); every other IFS character delimits on its own, with the whitespace
/// around it, so `a,,b` has an empty field and `a , b` does not.
fn split_field(f: Field, ifs: &str) -> Vec<Field> {
    if !f.iter().any(|p| p.split && !p.text.is_empty()) || ifs.is_empty() {
        return if field_alive(&f) { vec![f] } else { Vec::new() };
    }
    #[derive(PartialEq)]
    enum Last {
        /// Start of the word or just after a non-whitespace delimiter.
        Hard,
        /// A field was just ended by whitespace.
        Space,
        Text,
    }
    let is_ws = |c: char| ifs.contains(c) && matches!(c, ' ' | '\t' | '\n');
    let mut out: Vec<Field> = Vec::new();
    let mut cur: Field = Vec::new();
    let mut last = Last::Hard;
    for p in f {
        if !p.split {
            if !p.text.is_empty() || p.quoted {
                last = Last::Text;
            }
            cur.push(p);
            continue;
        }
        let mut buf = String::new();
        for c in p.text.chars() {
            if !ifs.contains(c) {
                buf.push(c);
                last = Last::Text;
                continue;
            }
            if !buf.is_empty() {
                cur.push(Piece {
                    text: std::mem::take(&mut buf),
                    quoted: false,
                    split: false,
                });
            }
            if is_ws(c) {
                if field_alive(&cur) {
                    out.push(std::mem::take(&mut cur));
                    last = Last::Space;
                }
            } else {
                if field_alive(&cur) || last == Last::Hard {
                    out.push(std::mem::take(&mut cur));
                }
                cur.clear();
                last = Last::Hard;
            }
        }
        if !buf.is_empty() {
            cur.push(Piece {
                text: buf,
                quoted: false,
                split: false,
            });
        }
    }
    if field_alive(&cur) {
        out.push(cur);
    }
    out
}

fn field_alive(f: &Field) -> bool {
    f.iter().any(|p| p.quoted || !p.text.is_empty())
}

fn trim_newlines(mut s: String) -> String {
    while s.ends_with('\n') {
        s.pop();
    }
    s
}

fn has_zero_pad(s: &str) -> bool {
    let d = s.strip_prefix('-').unwrap_or(s);
    d.len() > 1 && d.starts_with('0')
}

fn single_char(s: &str) -> Option<char> {
    let mut c = s.chars();
    let first = c.next()?;
    c.next().is_none().then_some(first)
}

fn brace_text(b: &BraceExp) -> String {
    match b {
        BraceExp::List(words) => {
            let inner: Vec<String> = words.iter().map(literal_text).collect();
            format!("{{{}}}", inner.join(","))
        }
        BraceExp::Seq { start, end, step } => match step {
            Some(s) => format!("{{{start}..{end}..{s}}}"),
            None => format!("{{{start}..{end}}}"),
        },
    }
}

/// The text of a word's literal and quoted parts (a quoted here-doc body, messages).
pub(crate) fn literal_text(w: &Word) -> String {
    let mut s = String::new();
    for p in &w.parts {
        match p {
            WordPart::Literal(t) | WordPart::Quoted(t) => s.push_str(t),
            WordPart::DoubleQuoted(inner) => s.push_str(&literal_text(&Word {
                parts: inner.clone(),
            })),
            WordPart::Brace(b) => s.push_str(&brace_text(b)),
            WordPart::BadSubst(b) => s.push_str(&b.text),
            WordPart::Tilde(u) => {
                s.push('~');
                s.push_str(u);
            }
            WordPart::Param(p) => {
                s.push('$');
                s.push_str(&param_name(&p.param));
            }
            WordPart::CommandSubst { .. }
            | WordPart::ProcessSubst { .. }
            | WordPart::BadBackquote { .. } => s.push_str("$(...)"),
            WordPart::Arith(a) => {
                s.push_str("$((");
                s.push_str(&a.source);
                s.push_str("))");
            }
        }
    }
    s
}

/// A word as the user wrote it, roughly (for `ambiguous redirect`).
pub(crate) fn source_text(w: &Word) -> String {
    literal_text(w)
}

fn param_name(p: &Param) -> String {
    match p {
        Param::Named(n) => n.clone(),
        Param::Positional(n) => n.to_string(),
        Param::Special(c) => c.to_string(),
    }
}

fn param_display(p: &Param, sub: &Option<Subscript>) -> String {
    match sub {
        Some(Subscript::Index(w)) => format!("{}[{}]", param_name(p), literal_text(w)),
        _ => param_name(p),
    }
}

/// The subscript of `name[sub]` met in a string at run time (`unset 'a[$k]'`, `printf -v`,
/// `declare -n r='a["k"]'`, `${!ref}`, `test -v`): bash parses it as it parses the subscript of
/// an assignment, so quotes are removed and `$x` expands. Text that does not parse that way
/// stays a literal key.
pub(crate) fn runtime_subscript(k: &str) -> Word {
    if !k.contains(['$', '`', '"', '\'', '\\']) {
        return Word::literal(k);
    }
    let parsed = crate::syntax::parser::parse(&format!("_[{k}]="));
    if let Ok(script) = parsed
        && let [item] = script.items.as_slice()
        && item.and_or.rest.is_empty()
        && let [Command::Simple(cmd)] = item.and_or.first.commands.as_slice()
        && cmd.words.is_empty()
        && let [a] = cmd.assignments.as_slice()
        && let Some(w) = &a.index
    {
        return w.clone();
    }
    Word::literal(k)
}

/// `name`, `name[sub]`, `1`, `@`: the target of `${!ref}`.
fn parse_param_ref(s: &str) -> Option<(Param, Option<Subscript>)> {
    if let Ok(n) = s.parse::<u32>() {
        return Some((Param::Positional(n), None));
    }
    if s.len() == 1 && "@*#?$!-".contains(s) {
        return Some((Param::Special(s.chars().next()?), None));
    }
    let (name, sub) = match s.find('[') {
        Some(i) if s.ends_with(']') => {
            let inner = &s[i + 1..s.len() - 1];
            let sub = match inner {
                "@" => Subscript::At,
                "*" => Subscript::Star,
                k => Subscript::Index(runtime_subscript(k)),
            };
            (&s[..i], Some(sub))
        }
        _ => (s, None),
    };
    crate::vars::is_valid_name(name).then(|| (Param::Named(name.to_string()), sub))
}

/// The replacement text for one match: bash 5.2's `patsub_replacement` puts the matched
/// text where an unescaped `&` is (`rep` is in pattern form: quoted characters escaped).
fn substitute(rep: &str, matched: &str) -> String {
    let mut out = String::new();
    let mut chars = rep.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(n) = chars.next() {
                    out.push(n);
                }
            }
            '&' => out.push_str(matched),
            c => out.push(c),
        }
    }
    out
}

/// How many characters a pattern always matches, `None` when that varies (`*`, extglob):
/// bash's MATCHLEN. With `bash_scan`, a bracket expression ends at the first `]` after its
/// first character as bash's scan has it, so `[^]]` counts two (`[^]` and `]`); otherwise
/// the `]` right after `[`, `[!` or `[^` is a member, as the matcher has it.
fn fixed_match_len(pat: &str, bash_scan: bool) -> Option<usize> {
    let p: Vec<char> = pat.chars().collect();
    let mut i = 0;
    let mut len = 0;
    while i < p.len() {
        let c = p[i];
        i += 1;
        match c {
            '\\' => {
                len += 1;
                i += 1;
            }
            '*' => return None,
            '?' | '+' | '@' | '!' if p.get(i) == Some(&'(') => return None,
            '[' => {
                // The first member may be `]`; for the matcher it comes after a `!` or `^`,
                // for bash's scan that `!` or `^` is the first member itself.
                let mut j = i;
                if !bash_scan && matches!(p.get(j), Some('!' | '^')) {
                    j += 1;
                }
                let mut first = true;
                let mut closed = false;
                while j < p.len() {
                    let m = p[j];
                    if m == ']' && !first {
                        closed = true;
                        break;
                    }
                    first = false;
                    match m {
                        '\\' => j += 2,
                        '[' if matches!(p.get(j + 1), Some(':' | '.' | '=')) => {
                            let kind = p[j + 1];
                            j += 2;
                            while j + 1 < p.len() && !(p[j] == kind && p[j + 1] == ']') {
                                j += 1;
                            }
                            j += 2;
                        }
                        _ => j += 1,
                    }
                }
                len += 1;
                // An unclosed bracket is ordinary text, read on from after the `[`.
                if closed {
                    i = j + 1;
                }
            }
            _ => len += 1,
        }
    }
    Some(len)
}

/// `${s/pat/rep}` and `${s//pat/rep}` where bash's scan of a bracket expression counts
/// `pat` longer than what it matches (`[^]]`): bash tries, at each position, only text of
/// the counted length, so such a pattern never matches there.
fn miscounted_by_bash(pat: &str) -> bool {
    let (bash, real) = (fixed_match_len(pat, true), fixed_match_len(pat, false));
    bash.is_some() && bash != real
}

/// bash's own search for such a pattern: at each position, the text of the counted length.
fn replace_in_windows(s: &str, pat: &str, rep: &str, mode: ReplaceMode, n: usize) -> String {
    let ends: Vec<usize> = s.char_indices().map(|(i, _)| i).chain([s.len()]).collect();
    let mut out = String::new();
    let (mut k, mut last) = (0, 0);
    while k + n < ends.len() {
        let (a, b) = (ends[k], ends[k + n]);
        if pattern::matches(pat, &s[a..b]) {
            out.push_str(&s[last..a]);
            out.push_str(&substitute(rep, &s[a..b]));
            last = b;
            k += n.max(1);
            if mode == ReplaceMode::First {
                break;
            }
        } else {
            k += 1;
        }
    }
    out.push_str(&s[last..]);
    out
}

fn replace(s: &str, pat: &str, rep: &str, mode: ReplaceMode, nocase: bool) -> String {
    if matches!(mode, ReplaceMode::First | ReplaceMode::All) && miscounted_by_bash(pat) {
        return replace_in_windows(s, pat, rep, mode, fixed_match_len(pat, true).unwrap_or(0));
    }
    // Anchored matches ignore case on ASCII text, where lowering keeps every offset.
    let folded;
    let (text, pat) = if nocase && s.is_ascii() && pat.is_ascii() {
        folded = (s.to_ascii_lowercase(), pat.to_ascii_lowercase());
        (folded.0.as_str(), folded.1.as_str())
    } else {
        (s, pat)
    };
    match mode {
        ReplaceMode::Prefix => match pattern::strip_prefix_len(text, pat, true) {
            Some(n) => format!("{}{}", substitute(rep, &s[..n]), &s[n..]),
            None => s.to_string(),
        },
        ReplaceMode::Suffix => match pattern::strip_suffix_start(text, pat, true) {
            Some(n) => format!("{}{}", &s[..n], substitute(rep, &s[n..])),
            None => s.to_string(),
        },
        ReplaceMode::First | ReplaceMode::All => {
            if pat.is_empty() {
                return s.to_string();
            }
            let mut out = String::new();
            let mut pos = 0;
            while pos <= s.len() {
                match pattern::find_opts(s, pat, pos, nocase) {
                    Some((a, b)) => {
                        out.push_str(&s[pos..a]);
                        out.push_str(&substitute(rep, &s[a..b]));
                        if b == a {
                            // An empty match: copy one char and move on.
                            match s[a..].chars().next() {
                                Some(c) => {
                                    out.push(c);
                                    pos = a + c.len_utf8();
                                }
                                None => {
                                    pos = s.len() + 1;
                                    break;
                                }
                            }
                        } else {
                            pos = b;
                        }
                        if mode == ReplaceMode::First {
                            break;
                        }
                    }
                    None => break,
                }
            }
            if pos <= s.len() {
                out.push_str(&s[pos..]);
            }
            out
        }
    }
}

fn change_case(s: &str, pat: &str, upper: bool, all: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for (i, c) in s.chars().enumerate() {
        let applies = (all || i == 0)
            && (pat.is_empty() || pattern::matches(pat, c.encode_utf8(&mut [0u8; 4])));
        if applies {
            if upper {
                out.extend(c.to_uppercase());
            } else {
                out.extend(c.to_lowercase());
            }
        } else {
            out.push(c);
        }
    }
    out
}

pub(crate) fn regex_escape(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// How `set -x` shows a word: bare when safe, else single-quoted as bash does.
pub(crate) fn quote_for_trace(s: &str) -> String {
    crate::printf::quote_unless(s, |c| {
        c.is_ascii_alphanumeric()
            || "_-./=:,+@%^".contains(c)
            || (!c.is_ascii() && wasmsand_exec::raw::raw_byte(c).is_none())
    })
}

/// The file of a script that is one `< file` and nothing else: bash substitutes that file's
/// contents for `$(< file)` and `<(< file)`.
fn only_file_input(s: &Script) -> Option<&Word> {
    if let [item] = s.items.as_slice()
        && !item.background
        && item.and_or.rest.is_empty()
        && let [Command::Simple(sc)] = item.and_or.first.commands.as_slice()
        && sc.words.is_empty()
        && sc.assignments.is_empty()
        && let [r] = sc.redirects.as_slice()
        && r.op == RedirOp::Read
        && r.fd.is_none()
        && let RedirTarget::Word(w) = &r.target
    {
        Some(w)
    } else {
        None
    }
}

/// After brace expansion, a bare `$name` that ended one alternative takes in the name
/// characters that follow it, as bash's expansion of the text does (`{$a,b}_c` gives `$a_c`
/// and `b_c`). The parser never leaves a bare name followed by name characters otherwise.
fn join_bare_names(parts: &mut Vec<WordPart>) {
    let mut i = 0;
    while i + 1 < parts.len() {
        let taken = match (&parts[i], &parts[i + 1]) {
            (WordPart::Param(pe), WordPart::Literal(next))
                if pe.bare && matches!(pe.param, Param::Named(_)) =>
            {
                next.bytes()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == b'_')
                    .count()
            }
            _ => 0,
        };
        if taken > 0 {
            let WordPart::Literal(next) = &mut parts[i + 1] else {
                unreachable!("matched above")
            };
            let head: String = next.drain(..taken).collect();
            let empty = next.is_empty();
            if let WordPart::Param(pe) = &mut parts[i]
                && let Param::Named(n) = &mut pe.param
            {
                n.push_str(&head);
            }
            if empty {
                parts.remove(i + 1);
                continue;
            }
        }
        i += 1;
    }
}

/// `text` parsed as one word of a command, with its brace expansions found.
fn reparsed_word(text: &str) -> Option<Word> {
    let script = crate::parse(&format!(": {text}")).ok()?;
    match script.items.first()?.and_or.first.commands.first()? {
        Command::Simple(sc) if sc.words.len() == 2 => match &sc.words[1] {
            Arg::Word(w) => Some(w.clone()),
            _ => None,
        },
        _ => None,
    }
}

/// The value side of an assignment after expansion.
#[derive(Debug, Clone)]
pub(crate) enum AssignedValue {
    Scalar(String),
    /// `name[key]=value`: the key as expanded text (arithmetic or a string, depending on the
    /// array's kind when it is stored).
    Elem(String, String),
    /// `(a b [k]=v [k]+=v)`: elements with their expanded keys and whether they append.
    Array(Vec<(Option<String>, bool, String)>),
}

/// Whether a bad `${...}` is a parameter with a subscript after which no `}` comes (`${m[}`,
/// `${m[x}y]`): inside double quotes bash, reading the text again when it expands it, reports
/// the `}` it cannot find there.
fn subscript_never_closes(text: &str) -> bool {
    let Some(rest) = text.strip_prefix("${") else {
        return false;
    };
    let name = rest
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
        .count();
    if name == 0 || rest.as_bytes().get(name) != Some(&b'[') {
        return false;
    }
    match rest[name..].find(']') {
        None => true,
        Some(close) => !rest[name + close..].contains('}'),
    }
}
