//! Programmable completion as a script meets it: `complete` keeps completion specifications,
//! `compopt` changes their options, `compgen` generates what a specification would offer.
//!
//! Nothing here completes a line being typed (the shell has no line editor). The point is
//! that scripts written for an interactive bash (a sourced `.bashrc`, a bash-completion
//! file, a test of a completion function) run as they do there: `complete` stores and lists
//! specifications, and `compgen -F`/`-C` call the functions and commands those name.

use crate::interp::{FlowResult, Interp};
use crate::vars::{Value, Var};
use std::collections::BTreeMap;

use super::BUILTINS;
use super::meta::KEYWORDS;
use crate::completion::{
    ACTIONS, CompSpec, DEFAULT_CMD, EMPTY_CMD, INITIAL_WORD, OPTIONS, single_quoted,
};

/// The order bash generates actions in (`gen_action_completions`): the lists it keeps
/// first, then the ones readline's functions make, directories last.
const GENERATION_ORDER: [&str; 24] = [
    "alias",
    "arrayvar",
    "binding",
    "builtin",
    "disabled",
    "enabled",
    "export",
    "function",
    "helptopic",
    "hostname",
    "job",
    "keyword",
    "running",
    "setopt",
    "shopt",
    "signal",
    "stopped",
    "variable",
    "command",
    "file",
    "user",
    "group",
    "service",
    "directory",
];

/// What bash's help knows as topics, in its order (`compgen -A helptopic`).
const HELP_TOPICS: &[&str] = &[
    "%",
    "(( ... ))",
    ".",
    ":",
    "[",
    "[[ ... ]]",
    "alias",
    "bg",
    "bind",
    "break",
    "builtin",
    "caller",
    "case",
    "cd",
    "command",
    "compgen",
    "complete",
    "compopt",
    "continue",
    "coproc",
    "declare",
    "dirs",
    "disown",
    "echo",
    "enable",
    "eval",
    "exec",
    "exit",
    "export",
    "false",
    "fc",
    "fg",
    "for",
    "for ((",
    "function",
    "getopts",
    "hash",
    "help",
    "history",
    "if",
    "jobs",
    "kill",
    "let",
    "local",
    "logout",
    "mapfile",
    "popd",
    "printf",
    "pushd",
    "pwd",
    "read",
    "readarray",
    "readonly",
    "return",
    "select",
    "set",
    "shift",
    "shopt",
    "source",
    "suspend",
    "test",
    "time",
    "times",
    "trap",
    "true",
    "type",
    "typeset",
    "ulimit",
    "umask",
    "unalias",
    "unset",
    "until",
    "variables",
    "wait",
    "while",
    "{ ... }",
];

/// What one of the three builtins was given.
#[derive(Default)]
struct Parsed {
    spec: CompSpec,
    /// `-o` options turned off (`compopt +o`).
    options_off: u8,
    print: bool,
    remove: bool,
    /// The `-D`, `-E` and `-I` names given.
    special: Vec<&'static str>,
    rest: Vec<String>,
}

enum Bad {
    /// Status 2 after a message and the usage line.
    Usage(String),
    /// Status 2 after a message alone.
    Invalid(String),
}

/// Parses the options the three builtins share; `allowed` are the letters this one takes.
fn parse(args: &[String], allowed: &str) -> Result<Parsed, Bad> {
    let mut p = Parsed::default();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if a == "--" {
            break;
        }
        let (on, flags) = match a.as_bytes() {
            [b'-', _, ..] => (true, &a[1..]),
            // `+o` is compopt's way of turning an option off.
            [b'+', b'o', ..] if allowed.contains('+') => (false, &a[1..]),
            _ => {
                i -= 1;
                break;
            }
        };
        for (k, c) in flags.char_indices() {
            if !allowed.contains(c) || c == '+' {
                return Err(Bad::Usage(format!("-{c}: invalid option")));
            }
            if "oAGWXPSFC".contains(c) {
                let rest = &flags[k + c.len_utf8()..];
                let value = if rest.is_empty() {
                    i += 1;
                    match args.get(i - 1) {
                        Some(v) => v.clone(),
                        None => {
                            return Err(Bad::Usage(format!("-{c}: option requires an argument")));
                        }
                    }
                } else {
                    rest.to_string()
                };
                let s = &mut p.spec;
                match c {
                    'o' => {
                        let Some(bit) = OPTIONS.iter().position(|o| *o == value) else {
                            return Err(Bad::Invalid(format!("{value}: invalid option name")));
                        };
                        if on {
                            s.options |= 1 << bit;
                            p.options_off &= !(1 << bit);
                        } else {
                            p.options_off |= 1 << bit;
                            s.options &= !(1 << bit);
                        }
                    }
                    'A' => {
                        let Some(bit) = ACTIONS.iter().position(|(n, _)| *n == value) else {
                            return Err(Bad::Invalid(format!("{value}: invalid action name")));
                        };
                        s.actions |= 1 << bit;
                    }
                    'G' => s.glob = Some(value),
                    'W' => s.words = Some(value),
                    'X' => s.filter = Some(value),
                    'P' => s.prefix = Some(value),
                    'S' => s.suffix = Some(value),
                    'F' => s.function = Some(value),
                    _ => s.command = Some(value),
                }
                break;
            }
            match c {
                'p' => p.print = true,
                'r' => p.remove = true,
                'D' => p.special.push(DEFAULT_CMD),
                'E' => p.special.push(EMPTY_CMD),
                'I' => p.special.push(INITIAL_WORD),
                _ => {
                    let bit = ACTIONS
                        .iter()
                        .position(|(_, l)| *l == Some(c))
                        .expect("the allowed letters are actions");
                    p.spec.actions |= 1 << bit;
                }
            }
        }
    }
    p.rest = args[i..].to_vec();
    Ok(p)
}

impl Interp {
    /// Reports a parse failure of `name`'s options; the status.
    fn comp_bad(&mut self, name: &str, bad: Bad) -> i32 {
        match bad {
            Bad::Usage(msg) => {
                self.err(&format!("{name}: {msg}"));
                self.usage(name);
            }
            Bad::Invalid(msg) => self.err(&format!("{name}: {msg}")),
        }
        2
    }

    /// The stored specifications as bash lists them: by the 256 buckets of the names' hash,
    /// each bucket newest first.
    fn comp_listing(&self) -> Vec<(String, CompSpec)> {
        let mut all: Vec<(String, CompSpec)> = self
            .st
            .completions
            .iter()
            .map(|(n, s)| (n.clone(), s.clone()))
            .collect();
        all.sort_by_key(|(n, s)| (crate::vars::bash_hash(n) & 255, std::cmp::Reverse(s.seq)));
        all
    }

    /// `complete [-abcdefgjksuv] [-pr] [-DEI] [-o option] [-A action] [-G globpat]
    /// [-W wordlist] [-F function] [-C command] [-X filterpat] [-P prefix] [-S suffix]
    /// [name ...]`.
    pub(super) fn b_complete(&mut self, args: &[String]) -> i32 {
        let mut p = match parse(args, "abcdefgjksuvprDEIoAGWXPSFC") {
            Ok(p) => p,
            Err(bad) => return self.comp_bad("complete", bad),
        };
        let mut names: Vec<String> = p.special.iter().map(|s| s.to_string()).collect();
        names.append(&mut p.rest);
        let bare = args.is_empty() || (p.print && names.is_empty());
        if bare {
            let text: String = self
                .comp_listing()
                .iter()
                .map(|(n, s)| s.line(n) + "\n")
                .collect();
            return self.out_str(&text);
        }
        if p.remove {
            if names.is_empty() {
                self.st.completions.clear();
                return 0;
            }
            // bash removes silently what is not there.
            for n in &names {
                self.st.completions.remove(n);
            }
            return 0;
        }
        if p.print {
            let mut status = 0;
            let mut text = String::new();
            for n in &names {
                match self.st.completions.get(n) {
                    Some(s) => text.push_str(&(s.line(n) + "\n")),
                    None => {
                        self.err(&format!("complete: {n}: no completion specification"));
                        status = 1;
                    }
                }
            }
            let s = self.out_str(&text);
            return if s != 0 { s } else { status };
        }
        if names.is_empty() {
            self.usage("complete");
            return 2;
        }
        for n in names {
            let seq = self.st.completions.values().map(|s| s.seq + 1).max();
            let spec = CompSpec {
                seq: seq.unwrap_or(0),
                ..p.spec.clone()
            };
            self.st.completions.insert(n, spec);
        }
        0
    }

    /// `compopt [-o|+o option] [-DEI] [name ...]`: changes or lists the options of stored
    /// specifications.
    pub(super) fn b_compopt(&mut self, args: &[String]) -> i32 {
        let p = match parse(args, "o+DEI") {
            Ok(p) => p,
            Err(bad) => return self.comp_bad("compopt", bad),
        };
        let mut names: Vec<String> = p.special.iter().map(|s| s.to_string()).collect();
        names.extend(p.rest);
        // Without a name it changes the completion in progress, and only readline starts
        // one (a function `compgen -F` calls is not in one, in bash either).
        if names.is_empty() {
            self.err("compopt: not currently executing completion function");
            return 1;
        }
        let listing = p.spec.options == 0 && p.options_off == 0;
        let mut text = String::new();
        let mut status = 0;
        for n in names {
            let Some(spec) = self.st.completions.get_mut(&n) else {
                self.err(&format!("compopt: {n}: no completion specification"));
                status = 1;
                continue;
            };
            if listing {
                let mut line = String::from("compopt ");
                for (i, o) in OPTIONS.iter().enumerate() {
                    let sign = if spec.options & (1 << i) != 0 {
                        '-'
                    } else {
                        '+'
                    };
                    line.push_str(&format!("{sign}o {o} "));
                }
                text.push_str(&line);
                text.push_str(&n);
                text.push('\n');
            } else {
                spec.options = (spec.options | p.spec.options) & !p.options_off;
            }
        }
        let s = self.out_str(&text);
        if s != 0 { s } else { status }
    }

    /// `compgen`: the completions of WORD (everything, without one) from the actions
    /// (`-a -b ... -v`, `-A action`), files matching a pattern (`-G`), a word list (`-W`,
    /// split at IFS and expanded as the shell expands words), a function (`-F`, called as
    /// readline would call it, its `COMPREPLY` taken) and a command (`-C`, its output lines),
    /// filtered by `-X` (`!` keeps the matches instead; `&` stands for WORD) and wrapped in
    /// `-P`/`-S`. Status 1 when nothing is generated.
    pub(super) fn b_compgen(&mut self, args: &[String]) -> FlowResult {
        let p = match parse(args, "abcdefgjksuvoAGWXPSFC") {
            Ok(p) => p,
            Err(bad) => return Ok(self.comp_bad("compgen", bad)),
        };
        let word = p.rest.first().cloned().unwrap_or_default();
        // bash warns that outside a line being completed the function and command see no
        // line (`COMP_WORDS` empty, `COMP_CWORD` -1).
        if p.spec.function.is_some() {
            self.err("compgen: warning: -F option may not work as you expect");
        }
        if p.spec.command.is_some() {
            self.err("compgen: warning: -C option may not work as you expect");
        }
        match self.generate(&p.spec, "compgen", &word) {
            Ok(out) if !out.is_empty() => {
                let text: String = out.iter().map(|w| format!("{w}\n")).collect();
                Ok(self.out_str(&text))
            }
            Ok(_) => Ok(1),
            // An expansion that fails in a word list abandons the line, as in a command's
            // words.
            Err(e) => Err(e),
        }
    }

    /// What `spec` offers for `word` on command `cmd`'s line, as bash's
    /// `gen_compspec_completions` makes it.
    fn generate(&mut self, spec: &CompSpec, cmd: &str, word: &str) -> FlowResult<Vec<String>> {
        let mut out: Vec<String> = Vec::new();
        for action in GENERATION_ORDER {
            let bit = ACTIONS.iter().position(|(n, _)| *n == action);
            if bit.is_some_and(|b| spec.actions & (1 << b) != 0) {
                out.extend(self.action_names(action, word));
            }
        }
        if let Some(g) = &spec.glob {
            // The pattern globbed as a word of a command line is.
            let matched = self.expand_words(&shell_words(g))?;
            out.extend(matched.into_iter().filter(|m| m != g));
        }
        if let Some(list) = &spec.words {
            // bash splits the list at IFS first (quotes, backslashes and substitutions
            // protect a delimiter), then expands each piece as one word.
            let ifs = self.get_var("IFS").unwrap_or_else(|| " \t\n".into());
            let mut pieces = Vec::new();
            for piece in ifs_pieces(list, &ifs) {
                pieces.extend(shell_words(&one_word(&piece)));
            }
            // Expanded as words are, but never as patterns.
            let noglob = std::mem::replace(&mut self.st.opts.noglob, true);
            let expanded = self.expand_words(&pieces);
            self.st.opts.noglob = noglob;
            out.extend(expanded?.into_iter().filter(|w| w.starts_with(word)));
        }
        if let Some(f) = &spec.function {
            out.extend(self.completion_function(f, cmd, word)?);
        }
        if let Some(c) = &spec.command {
            out.extend(self.completion_command(c, cmd, word)?);
        }
        if let Some(f) = &spec.filter {
            // A leading `!` negates the filter, unless extglob reads `!(...)` as a pattern.
            let negated = f.starts_with('!') && !(self.extglob() && f.starts_with("!("));
            let (keep, pat) = match negated {
                true => (true, &f[1..]),
                false => (false, f.as_str()),
            };
            let pat = with_word(pat, word);
            let pat = if self.extglob() {
                pat
            } else {
                crate::pattern::plain_parens(&pat)
            };
            out.retain(|w| crate::pattern::matches(&pat, w) == keep);
        }
        let (pre, suf) = (
            spec.prefix.as_deref().unwrap_or(""),
            spec.suffix.as_deref().unwrap_or(""),
        );
        if !pre.is_empty() || !suf.is_empty() {
            for w in &mut out {
                *w = format!("{pre}{w}{suf}");
            }
        }
        // The options that fall back on names of files: directories when nothing matched
        // (`dirnames`) or always (`plusdirs`), then readline's file names (`default`) when
        // still nothing did. (`bashdefault`'s command and variable names give compgen none.)
        let has = |o: &str| {
            OPTIONS
                .iter()
                .position(|n| *n == o)
                .is_some_and(|b| spec.options & (1 << b) != 0)
        };
        if out.is_empty() && has("dirnames") {
            out = self.file_names(true, word);
        }
        if has("plusdirs") {
            out.extend(self.file_names(true, word));
        }
        if out.is_empty() && has("default") {
            out = self.file_names(false, word);
        }
        Ok(out)
    }

    /// Calls completion function `f` as readline would for `word` as the only word of an
    /// empty line (what `compgen` has): arguments the command, the word and the word before
    /// it, `COMP_WORDS`/`COMP_CWORD`/`COMP_LINE`/`COMP_POINT` set for the call and unset
    /// after; what it left in `COMPREPLY` (an array, or a scalar as one word).
    fn completion_function(&mut self, f: &str, cmd: &str, word: &str) -> FlowResult<Vec<String>> {
        let Some(def) = self.st.functions.get(f).cloned() else {
            self.err(&format!("compgen: {f}: function not found"));
            return Ok(Vec::new());
        };
        let names = [
            "COMP_WORDS",
            "COMP_CWORD",
            "COMP_LINE",
            "COMP_POINT",
            "COMP_KEY",
            "COMP_TYPE",
        ];
        let values = [None, Some("-1"), Some(""), Some("0"), Some("0"), Some("0")];
        for (n, v) in names.iter().zip(values) {
            let value = match v {
                Some(s) => Value::Str(s.into()),
                None => Value::Indexed(BTreeMap::new()),
            };
            self.st.vars.put(n, Var { value, attrs: 0 });
        }
        let argv = vec![
            f.to_string(),
            cmd.to_string(),
            word.to_string(),
            String::new(),
        ];
        let called = self.call_function(&def, argv);
        for n in names {
            self.st.vars.remove(n);
        }
        called?;
        let reply = match self.st.vars.get("COMPREPLY").map(|v| v.value.clone()) {
            Some(Value::Indexed(m)) => m.into_values().collect(),
            Some(Value::Assoc(m)) => m.values().cloned().collect(),
            Some(Value::Str(s)) => vec![s],
            _ => Vec::new(),
        };
        self.st.vars.remove("COMPREPLY");
        Ok(reply)
    }

    /// Runs completion command `c` with the command, the word and the word before it as
    /// arguments; its output's lines.
    fn completion_command(&mut self, c: &str, cmd: &str, word: &str) -> FlowResult<Vec<String>> {
        let text = format!("{c} {} {} ''", single_quoted(cmd), single_quoted(word));
        let Ok(script) = crate::parse(&text) else {
            return Ok(Vec::new());
        };
        let (out, _) = self.capture(&script, "compgen -C")?;
        Ok(wasmsand_exec::raw::decode(&out)
            .lines()
            .map(str::to_string)
            .collect())
    }

    /// The names action `action` offers that start with `word`.
    fn action_names(&mut self, action: &str, word: &str) -> Vec<String> {
        let starts = |n: &String| n.starts_with(word);
        let owned = |it: &mut dyn Iterator<Item = &str>| -> Vec<String> {
            it.map(str::to_string).filter(starts).collect()
        };
        match action {
            "alias" => self
                .st
                .aliases
                .keys()
                .filter(|n| starts(n))
                .cloned()
                .collect(),
            "builtin" | "enabled" | "disabled" => {
                let want_disabled = action == "disabled";
                let list: Vec<&str> = BUILTINS
                    .iter()
                    .filter(|b| !b.program)
                    .map(|b| b.name)
                    .filter(|n| {
                        action == "builtin"
                            || self.st.disabled_builtins.contains(*n) == want_disabled
                    })
                    .collect();
                owned(&mut list.into_iter())
            }
            "keyword" => owned(&mut KEYWORDS.iter().copied()),
            "helptopic" => owned(&mut HELP_TOPICS.iter().copied()),
            "setopt" => owned(&mut crate::options::SET_OPTIONS.iter().copied()),
            "shopt" => owned(&mut crate::options::SHOPT_OPTIONS.iter().map(|(n, _)| *n)),
            "signal" => super::signals::completion_names()
                .into_iter()
                .filter(starts)
                .collect(),
            "function" => {
                let mut f: Vec<String> = self
                    .st
                    .functions
                    .keys()
                    .filter(|n| starts(n))
                    .cloned()
                    .collect();
                f.sort();
                f
            }
            "variable" => self.st.vars.names().into_iter().filter(starts).collect(),
            "arrayvar" => {
                self.st
                    .vars
                    .names()
                    .into_iter()
                    .filter(|n| {
                        starts(n)
                            && self.st.vars.get(n).is_some_and(|v| {
                                matches!(v.value, Value::Indexed(_) | Value::Assoc(_))
                            })
                    })
                    .collect()
            }
            "export" => self
                .st
                .vars
                .environ()
                .into_iter()
                .map(|(k, _)| k)
                .filter(starts)
                .collect(),
            "user" | "group" => self.account_names(action == "group", word),
            "binding" => owned(
                &mut crate::readline::defaults()
                    .functions
                    .iter()
                    .map(String::as_str),
            ),
            "command" => self.command_names(word),
            "directory" | "file" => self.file_names(action == "directory", word),
            // Jobs, services and host names: none here.
            _ => Vec::new(),
        }
    }

    /// The user (or group) names of `/etc/passwd` (`/etc/group`) in the sandbox, in the
    /// file's order; the session's own user when the file is missing.
    fn account_names(&self, group: bool, word: &str) -> Vec<String> {
        let file = if group { "/etc/group" } else { "/etc/passwd" };
        let text = self.rt.vfs.lock().read(file).ok();
        let names: Vec<String> = match text {
            Some(bytes) => String::from_utf8_lossy(&bytes)
                .lines()
                .filter_map(|l| l.split(':').next())
                .filter(|n| !n.is_empty())
                .map(str::to_string)
                .collect(),
            None => vec!["user".to_string()],
        };
        names.into_iter().filter(|n| n.starts_with(word)).collect()
    }

    fn command_names(&mut self, word: &str) -> Vec<String> {
        let mut all: Vec<String> = Vec::new();
        for a in ["alias", "keyword", "function", "builtin"] {
            all.extend(self.action_names(a, word));
        }
        let path = self.get_var("PATH").unwrap_or_default();
        let vfs = self.rt.vfs.lock();
        for dir in path.split(':').filter(|d| !d.is_empty()) {
            let dir = wasmsand_vfs::path::join(&self.st.cwd, dir);
            let Ok(entries) = vfs.readdir_metadata(&dir) else {
                continue;
            };
            for (name, _) in entries {
                let full = format!("{dir}/{name}");
                if name.starts_with(word)
                    && vfs
                        .stat(&full)
                        .is_ok_and(|m| m.is_file() && m.mode & 0o111 != 0)
                {
                    all.push(name);
                }
            }
        }
        all
    }

    fn file_names(&self, dirs_only: bool, word: &str) -> Vec<String> {
        let (dir_part, base) = match word.rfind('/') {
            Some(k) => (&word[..=k], &word[k + 1..]),
            None => ("", word),
        };
        // `~/` and `~user/` are looked up where they lead and shown as written.
        let looked_up = match dir_part.strip_prefix('~') {
            Some(rest) => {
                let (user, tail) = rest.split_once('/').unwrap_or((rest, ""));
                match self.tilde_dir(user) {
                    Some(home) => format!("{home}/{tail}"),
                    None => dir_part.to_string(),
                }
            }
            None => dir_part.to_string(),
        };
        let dir = wasmsand_vfs::path::join(
            &self.st.cwd,
            if looked_up.is_empty() {
                "."
            } else {
                &looked_up
            },
        );
        let vfs = self.rt.vfs.lock();
        let Ok(entries) = vfs.readdir(&dir) else {
            return Vec::new();
        };
        entries
            .into_iter()
            // readline's match-hidden-files (on by default) offers dot files too.
            .filter(|e| e.name.starts_with(base) && e.name != "." && e.name != "..")
            .filter(|e| {
                !dirs_only
                    || vfs
                        .stat(&format!("{dir}/{}", e.name))
                        .is_ok_and(|m| m.is_dir())
            })
            .map(|e| format!("{dir_part}{}", e.name))
            .collect()
    }
}

/// `-X`'s pattern with each unescaped `&` replaced by the word being completed (`\&` is a
/// literal `&`), as bash does.
fn with_word(pat: &str, word: &str) -> String {
    let mut out = String::with_capacity(pat.len());
    let mut chars = pat.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('&') => out.push('&'),
                Some(n) => {
                    out.push('\\');
                    out.push(n);
                }
                None => out.push('\\'),
            },
            '&' => out.push_str(word),
            c => out.push(c),
        }
    }
    out
}

/// The words of `text` as the shell parses a command's arguments (quotes and expansions kept
/// for the expansion that follows); nothing when it does not parse.
fn shell_words(text: &str) -> Vec<crate::syntax::ast::Word> {
    use crate::syntax::ast::{Arg, Command};
    let Ok(script) = crate::parse(&format!(": {text}")) else {
        return Vec::new();
    };
    match script.items.first().map(|i| &i.and_or.first.commands[..]) {
        Some([Command::Simple(s)]) => s
            .words
            .iter()
            .skip(1)
            .filter_map(|a| match a {
                Arg::Word(w) => Some(w.clone()),
                Arg::Assignment(_) => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// The index after the substitution (`$(...)`, `$((...))`, `${...}`, backquotes) that
/// starts at `at`, as bash's `skip_to_delim` steps over one; `None` when none starts there.
fn substitution_end(s: &[char], at: usize) -> Option<usize> {
    let (close, mut j) = match (s[at], s.get(at + 1)) {
        ('$', Some('(')) => (')', at + 2),
        ('$', Some('{')) => ('}', at + 2),
        ('`', _) => {
            let mut j = at + 1;
            while j < s.len() && s[j] != '`' {
                j += if s[j] == '\\' { 2 } else { 1 };
            }
            return Some((j + 1).min(s.len()));
        }
        _ => return None,
    };
    let open = if close == ')' { '(' } else { '{' };
    let mut depth = 1;
    while j < s.len() {
        match s[j] {
            '\\' => j += 1,
            '\'' => {
                j += 1;
                while j < s.len() && s[j] != '\'' {
                    j += 1;
                }
            }
            '"' => {
                j += 1;
                while j < s.len() && s[j] != '"' {
                    if s[j] == '\\' {
                        j += 1;
                    } else if let Some(e) = substitution_end(s, j) {
                        j = e;
                        continue;
                    }
                    j += 1;
                }
            }
            '$' | '`' => {
                if let Some(e) = substitution_end(s, j) {
                    j = e;
                    continue;
                }
            }
            c if c == open => depth += 1,
            c if c == close => {
                depth -= 1;
                if depth == 0 {
                    return Some(j + 1);
                }
            }
            _ => {}
        }
        j += 1;
    }
    Some(s.len())
}

/// A piece of word-list text: one kept as written (quoted text, an escape, a substitution,
/// a double quote) or a character standing bare (`true` inside double quotes).
enum Unit<'a> {
    Written(&'a [char]),
    Bare(char, bool),
}

/// `s` cut into [`Unit`]s the way bash's `skip_to_delim` steps over text.
fn units(s: &[char]) -> Vec<Unit<'_>> {
    let mut out = Vec::new();
    let mut dquote = false;
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        let end = match c {
            '\\' => (i + 2).min(s.len()),
            '\'' if !dquote => s[i + 1..]
                .iter()
                .position(|&q| q == '\'')
                .map_or(s.len(), |k| i + k + 2),
            '"' => {
                dquote = !dquote;
                i + 1
            }
            '$' | '`' => match substitution_end(s, i) {
                Some(end) => end,
                None => {
                    out.push(Unit::Bare(c, dquote));
                    i += 1;
                    continue;
                }
            },
            _ => {
                out.push(Unit::Bare(c, dquote));
                i += 1;
                continue;
            }
        };
        out.push(Unit::Written(&s[i..end]));
        i = end;
    }
    out
}

/// `text` cut at its unquoted, unescaped IFS characters outside substitutions, as bash's
/// `split_at_delims` cuts a `-W` word list: a run of IFS blanks is one delimiter, every
/// other IFS character one each.
fn ifs_pieces(text: &str, ifs: &str) -> Vec<String> {
    let s: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut last_blank = false;
    for unit in units(&s) {
        match unit {
            Unit::Bare(c, false) if ifs.contains(c) => {
                let blank = matches!(c, ' ' | '\t' | '\n');
                // A run of blanks is one delimiter, and leading blanks are none.
                if !(blank && (last_blank || (cur.is_empty() && out.is_empty()))) {
                    out.push(std::mem::take(&mut cur));
                }
                last_blank = blank;
            }
            Unit::Bare(c, _) => {
                last_blank = false;
                cur.push(c);
            }
            Unit::Written(w) => {
                last_blank = false;
                cur.extend(w);
            }
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out.retain(|p| !p.is_empty());
    out
}

/// `piece` as the text of one shell word: its unquoted blanks and operator characters
/// outside substitutions quoted, so that parsing it gives the one word bash expands.
fn one_word(piece: &str) -> String {
    let s: Vec<char> = piece.chars().collect();
    let mut out = String::with_capacity(piece.len() + 8);
    for unit in units(&s) {
        match unit {
            Unit::Bare(
                c @ (' ' | '\t' | '\n' | ';' | '|' | '&' | '<' | '>' | '(' | ')'),
                false,
            ) => {
                out.push('\'');
                out.push(c);
                out.push('\'');
            }
            Unit::Bare(c, _) => out.push(c),
            Unit::Written(w) => out.extend(w),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_word_list_is_cut_at_ifs_outside_quotes_and_substitutions() {
        assert_eq!(
            ifs_pieces(r#"a $(echo "x y") b"#, " \t\n"),
            vec!["a", r#"$(echo "x y")"#, "b"]
        );
        assert_eq!(
            ifs_pieces("foo $(( 1 / 0 )) `x y` ${a:- b}", " "),
            vec!["foo", "$(( 1 / 0 ))", "`x y`", "${a:- b}"]
        );
        assert_eq!(ifs_pieces("a:'b:c'::d", ":"), vec!["a", "'b:c'", "d"]);
        assert_eq!(one_word("a b$(echo c d)"), "a' 'b$(echo c d)");
    }

    #[test]
    fn an_ampersand_in_a_filter_is_the_word() {
        assert_eq!(with_word("&*", "ab"), "ab*");
        assert_eq!(with_word(r"\&x&", "w"), "&xw");
    }

    #[test]
    fn a_specification_prints_as_bash_prints_it() {
        let p = parse(
            &[
                "-o", "nospace", "-W", "a 'b", "-d", "-A", "shopt", "-F", "f", "x",
            ]
            .map(String::from),
            "abcdefgjksuvprDEIoAGWXPSFC",
        )
        .ok()
        .unwrap();
        assert_eq!(
            p.spec.line("x"),
            r"complete -o nospace -d -A shopt -W 'a '\''b' -F f x"
        );
        assert_eq!(p.rest, vec!["x"]);
    }
}
