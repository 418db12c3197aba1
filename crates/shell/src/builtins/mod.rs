//! The builtins: everything bash does in its own process, run here in the host.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::ast::CondBinOp;
use crate::execute::{AssignedValue, DeclArg};
use crate::expand::AErr;
use crate::interp::{Fd, Flow, FlowResult, InSrc, Interp, strerror};
use crate::printf::{echo_escapes, quote_single};
use crate::vars::{
    ATTR_EXPORT, ATTR_INTEGER, ATTR_LOWER, ATTR_NAMEREF, ATTR_READONLY, ATTR_TRACE, ATTR_UPPER,
    Value, Var, is_valid_name,
};

const BUILTINS: &[&str] = &[
    ".",
    ":",
    "[",
    "alias",
    "bash",
    "break",
    "builtin",
    "cd",
    "chmod",
    "command",
    "continue",
    "declare",
    "dirs",
    "disown",
    "echo",
    "env",
    "eval",
    "exec",
    "exit",
    "export",
    "false",
    "getopts",
    "hash",
    "help",
    "history",
    "jobs",
    "kill",
    "let",
    "local",
    "mapfile",
    "nohup",
    "popd",
    "printf",
    "pushd",
    "pwd",
    "read",
    "readarray",
    "readonly",
    "return",
    "set",
    "setsid",
    "sh",
    "shift",
    "shopt",
    "sleep",
    "source",
    "test",
    "timeout",
    "times",
    "trap",
    "true",
    "type",
    "typeset",
    "ulimit",
    "umask",
    "unalias",
    "unset",
    "wait",
    "which",
    "xargs",
];

/// `help -s NAME`: each builtin's synopsis, as bash 5.2 prints it.
const HELP_SYNOPSES: &[(&str, &str)] = &[
    (".", ". filename [arguments]"),
    (":", ":"),
    ("[", "[ arg... ]"),
    ("alias", "alias [-p] [name[=value] ... ]"),
    ("break", "break [n]"),
    ("builtin", "builtin [shell-builtin [arg ...]]"),
    ("cd", "cd [-L|[-P [-e]] [-@]] [dir]"),
    ("command", "command [-pVv] command [arg ...]"),
    ("continue", "continue [n]"),
    (
        "declare",
        "declare [-aAfFgiIlnrtux] [name[=value] ...] or declare -p [-aAfFilnrtux] [name ...]",
    ),
    ("dirs", "dirs [-clpv] [+N] [-N]"),
    ("echo", "echo [-neE] [arg ...]"),
    ("eval", "eval [arg ...]"),
    (
        "exec",
        "exec [-cl] [-a name] [command [argument ...]] [redirection ...]",
    ),
    ("exit", "exit [n]"),
    ("export", "export [-fn] [name[=value] ...] or export -p"),
    ("false", "false"),
    ("getopts", "getopts optstring name [arg ...]"),
    ("hash", "hash [-lr] [-p pathname] [-dt] [name ...]"),
    ("help", "help [-dms] [pattern ...]"),
    (
        "history",
        "history [-c] [-d offset] [n] or history -anrw [filename] or history -ps arg [arg...]",
    ),
    ("let", "let arg [arg ...]"),
    ("local", "local [option] name[=value] ..."),
    (
        "mapfile",
        "mapfile [-d delim] [-n count] [-O origin] [-s count] [-t] [-u fd] [-C callback] [-c quantum] [array]",
    ),
    ("popd", "popd [-n] [+N | -N]"),
    ("printf", "printf [-v var] format [arguments]"),
    ("pushd", "pushd [-n] [+N | -N | dir]"),
    ("pwd", "pwd [-LP]"),
    (
        "read",
        "read [-ers] [-a array] [-d delim] [-i text] [-n nchars] [-N nchars] [-p prompt] [-t timeout] [-u fd] [name ...]",
    ),
    (
        "readarray",
        "readarray [-d delim] [-n count] [-O origin] [-s count] [-t] [-u fd] [-C callback] [-c quantum] [array]",
    ),
    (
        "readonly",
        "readonly [-aAf] [name[=value] ...] or readonly -p",
    ),
    ("return", "return [n]"),
    (
        "set",
        "set [-abefhkmnptuvxBCEHPT] [-o option-name] [--] [-] [arg ...]",
    ),
    ("shift", "shift [n]"),
    ("shopt", "shopt [-pqsu] [-o] [optname ...]"),
    ("source", "source filename [arguments]"),
    ("test", "test [expr]"),
    ("trap", "trap [-lp] [[arg] signal_spec ...]"),
    ("true", "true"),
    ("type", "type [-afptP] name [name ...]"),
    (
        "typeset",
        "typeset [-aAfFgiIlnrtux] name[=value] ... or typeset -p [-aAfFilnrtux] [name ...]",
    ),
    ("times", "times"),
    ("ulimit", "ulimit [-SHabcdefiklmnpqrstuvxPRT] [limit]"),
    ("umask", "umask [-p] [-S] [mode]"),
    ("unalias", "unalias [-a] name [name ...]"),
    ("unset", "unset [-f] [-v] [-n] [name ...]"),
    (
        "jobs",
        "jobs [-lnprs] [jobspec ...] or jobs -x command [args]",
    ),
    ("disown", "disown [-h] [-ar] [jobspec ... | pid ...]"),
    ("wait", "wait [-fn] [-p var] [id ...]"),
];

const KEYWORDS: &[&str] = &[
    "if", "then", "else", "elif", "fi", "case", "esac", "for", "select", "while", "until", "do",
    "done", "in", "function", "time", "{", "}", "!", "[[", "]]", "coproc",
];

pub(crate) fn is_builtin(name: &str) -> bool {
    BUILTINS.binary_search(&name).is_ok()
}

pub(crate) fn is_declaration(name: &str) -> bool {
    matches!(
        name,
        "declare" | "typeset" | "local" | "export" | "readonly"
    )
}

/// Names a tool may have that the shell provides itself: they are not looked up as files.
pub fn builtin_names() -> &'static [&'static str] {
    BUILTINS
}

impl Interp {
    pub(crate) fn run_builtin(&mut self, name: &str, argv: &[String]) -> FlowResult {
        self.check()?;
        let args = &argv[1..];
        match name {
            ":" | "true" => Ok(0),
            "false" => Ok(1),
            "echo" => Ok(self.b_echo(args)),
            "printf" => self.b_printf(args),
            "test" => Ok(self.b_test(args, false)),
            "[" => Ok(self.b_test(args, true)),
            "cd" => Ok(self.b_cd(args)),
            "pwd" => Ok(self.b_pwd(args)),
            "exit" => {
                if args.len() > 1 {
                    self.err("exit: too many arguments");
                    return Err(Flow::Exit(1));
                }
                let s = self.status_arg("exit", args)?;
                Err(Flow::Exit(s))
            }
            "return" => {
                if !self.st.vars.in_function() && self.sourcing == 0 {
                    self.err("return: can only `return' from a function or sourced script");
                    return Ok(2);
                }
                let s = self.status_arg("return", args)?;
                Err(Flow::Return(s))
            }
            "break" | "continue" => {
                // Extra arguments end a `bash -c` shell (a script file would go on).
                if args.len() > 1 && self.loops > 0 {
                    self.err(&format!("{name}: too many arguments"));
                    return Err(Flow::Exit(1));
                }
                let n = match args.first() {
                    None => 1,
                    Some(a) => match a.trim().parse::<i64>() {
                        Ok(n) if n > 0 => n.min(u32::MAX as i64) as u32,
                        Ok(_) => {
                            // bash reports the count and still leaves the loop.
                            self.err(&format!("{name}: {a}: loop count out of range"));
                            self.st.status = 1;
                            if self.loops == 0 {
                                return Ok(1);
                            }
                            return Err(if name == "break" {
                                Flow::Break(1)
                            } else {
                                Flow::Continue(1)
                            });
                        }
                        Err(_) => {
                            self.err(&format!("{name}: {a}: numeric argument required"));
                            return Err(Flow::Exit(128));
                        }
                    },
                };
                if self.loops == 0 {
                    self.err(&format!(
                        "{name}: only meaningful in a `for', `while', or `until' loop"
                    ));
                    return Ok(0);
                }
                let n = n.min(self.loops);
                self.st.status = 0;
                Err(if name == "break" {
                    Flow::Break(n)
                } else {
                    Flow::Continue(n)
                })
            }
            "shift" => {
                let n = match args.first() {
                    None => 1,
                    Some(a) => match a.trim().parse::<i64>() {
                        Ok(n) if n >= 0 => n as usize,
                        Ok(_) => {
                            self.err(&format!("shift: {a}: shift count out of range"));
                            return Ok(1);
                        }
                        Err(_) => {
                            self.err(&format!("shift: {a}: numeric argument required"));
                            return Ok(1);
                        }
                    },
                };
                if n > self.st.positional.len() {
                    return Ok(1);
                }
                self.st.positional.drain(..n);
                Ok(0)
            }
            "eval" => {
                let args = match args.first() {
                    Some(a) if a == "--" => &args[1..],
                    _ => args,
                };
                let src = args.join(" ");
                // An error that abandons the rest of a line abandons only the eval'd text.
                match self.eval_string(&src) {
                    Err(Flow::Fatal(s)) => Ok(s),
                    r => r,
                }
            }
            "source" | "." => self.b_source(name, args),
            "set" => Ok(self.b_set(args)),
            "shopt" => Ok(self.b_shopt(args)),
            "unset" => Ok(self.b_unset(args)),
            "let" => self.b_let(args),
            "read" => self.b_read(args),
            "mapfile" | "readarray" => self.b_mapfile(name, args),
            "trap" => Ok(self.b_trap(args)),
            "wait" => self.b_wait(args),
            "jobs" => Ok(self.b_jobs(args)),
            "disown" => Ok(self.b_disown(args)),
            "nohup" | "setsid" => self.b_nohup(name, args),
            "getopts" => Ok(self.b_getopts(args)),
            "type" => Ok(self.b_type(args)),
            "which" => Ok(self.b_which(args)),
            "timeout" => self.b_timeout(args),
            "command" => self.b_command(args),
            "builtin" => match args.first() {
                Some(n) if is_builtin(n) => self.run_builtin(&n.clone(), args),
                Some(n) => {
                    self.err(&format!("builtin: {n}: not a shell builtin"));
                    Ok(1)
                }
                None => Ok(0),
            },
            "hash" => Ok(0),
            "help" => Ok(self.b_help(args)),
            "kill" => self.b_kill(args),
            "alias" => Ok(self.b_alias(args)),
            "unalias" => Ok(self.b_unalias(args)),
            "pushd" => Ok(self.b_pushd(args)),
            "popd" => Ok(self.b_popd(args)),
            "dirs" => Ok(self.b_dirs(args)),
            "umask" => Ok(self.b_umask(args)),
            "ulimit" => Ok(self.b_ulimit(args)),
            "times" => Ok(self.b_times()),
            "history" => self.b_history(args),
            "exec" => self.b_exec(args),
            "sleep" => self.b_sleep(args),
            "bash" | "sh" => self.b_bash(args),
            "xargs" => self.b_xargs(args),
            "chmod" => Ok(self.b_chmod(args)),
            "env" => self.b_env(args),
            "declare" | "typeset" | "local" | "export" | "readonly" => {
                let dargs = args.iter().cloned().map(DeclArg::Plain).collect();
                self.run_declaration(name, dargs)
            }
            _ => {
                self.err(&format!("{name}: not implemented"));
                Ok(2)
            }
        }
    }

    /// `help NAME`: the synopsis line (the long descriptions are not carried).
    fn b_help(&mut self, args: &[String]) -> i32 {
        let topics: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
        let mut text = String::new();
        let mut status = 0;
        if topics.is_empty() {
            for (_, syn) in HELP_SYNOPSES {
                text.push_str(&format!(" {syn}\n"));
            }
        }
        for t in topics {
            let hits: Vec<&(&str, &str)> = HELP_SYNOPSES
                .iter()
                .filter(|(n, _)| crate::pattern::matches(t, n))
                .collect();
            if hits.is_empty() {
                self.err(&format!(
                    "help: no help topics match `{t}'.  Try `help help' or `man -k {t}' or `info {t}'."
                ));
                status = 1;
            }
            for (n, syn) in hits {
                text.push_str(&format!("{n}: {syn}\n"));
            }
        }
        let s = self.out_str(&text);
        if s != 0 { s } else { status }
    }

    fn status_arg(&mut self, name: &str, args: &[String]) -> FlowResult<i32> {
        match args.first() {
            None => Ok(self.st.status),
            Some(a) => match a.trim().parse::<i64>() {
                Ok(n) => Ok((n & 0xff) as i32),
                Err(_) => {
                    self.err(&format!("{name}: {a}: numeric argument required"));
                    Ok(2)
                }
            },
        }
    }

    pub(crate) fn out_str(&mut self, s: &str) -> i32 {
        match self.out(s.as_bytes()) {
            Ok(()) => 0,
            Err(st) => st,
        }
    }

    // ---- echo / printf ----

    fn b_echo(&mut self, args: &[String]) -> i32 {
        let mut newline = true;
        let mut escapes = false;
        let mut i = 0;
        while i < args.len() {
            let a = &args[i];
            if a.len() < 2 || !a.starts_with('-') || !a[1..].chars().all(|c| "neE".contains(c)) {
                break;
            }
            for c in a[1..].chars() {
                match c {
                    'n' => newline = false,
                    'e' => escapes = true,
                    _ => escapes = false,
                }
            }
            i += 1;
        }
        let mut out = Vec::new();
        for (j, a) in args[i..].iter().enumerate() {
            if j > 0 {
                out.push(b' ');
            }
            if escapes {
                let (bytes, stop) = echo_escapes(a);
                out.extend_from_slice(&bytes);
                if stop {
                    return match self.out(&out) {
                        Ok(()) => 0,
                        Err(s) => s,
                    };
                }
            } else {
                out.extend_from_slice(a.as_bytes());
            }
        }
        if newline {
            out.push(b'\n');
        }
        match self.out(&out) {
            Ok(()) => 0,
            Err(s) => s,
        }
    }

    fn b_printf(&mut self, args: &[String]) -> FlowResult {
        let mut args = args;
        let mut var = None;
        if args.first().map(String::as_str) == Some("-v") {
            match args.get(1) {
                Some(v) => {
                    let base = v.split('[').next().unwrap_or("");
                    if !is_valid_name(base) || (v.contains('[') && !v.ends_with(']')) {
                        self.err(&format!("printf: `{v}': not a valid identifier"));
                        return Ok(2);
                    }
                    var = Some(v.clone());
                    args = &args[2..];
                }
                None => {
                    self.err("printf: -v: option requires an argument");
                    return Ok(2);
                }
            }
        }
        if args.first().map(String::as_str) == Some("--") {
            args = &args[1..];
        }
        let Some(fmt) = args.first() else {
            self.err("printf: usage: printf [-v var] format [arguments]");
            return Ok(2);
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
        let start = now - self.rt.started.elapsed().as_secs() as i64;
        let tz = self.get_var("TZ");
        let p = crate::printf::printf_in_zone(fmt, &args[1..], now, start, tz.as_deref());
        for e in &p.errors {
            self.err(e);
        }
        if let Some(n) = p.too_large {
            return Err(self.limit(format!(
                "printf: field width or precision too large ({n}, limit: {} bytes)",
                crate::printf::MAX_FIELD
            )));
        }
        let status = match var {
            Some(v) => {
                // A variable ends at a NUL byte, as a C string does in bash.
                let end = p.out.iter().position(|&b| b == 0).unwrap_or(p.out.len());
                let text = String::from_utf8_lossy(&p.out[..end]).into_owned();
                let r = match v.find('[') {
                    Some(i) if v.ends_with(']') => {
                        let name = v[..i].to_string();
                        match self.runtime_key_for(&name, &v[i + 1..v.len() - 1]) {
                            Ok(k) => self.assign(&name, Some(k), text, false),
                            Err(m) => Err(m),
                        }
                    }
                    _ => self.set_var(&v, text),
                };
                if let Err(m) = r {
                    self.err(&format!("printf: {m}"));
                    return Ok(1);
                }
                p.status
            }
            None => match self.out(&p.out) {
                Ok(()) => p.status,
                Err(s) => s,
            },
        };
        Ok(status)
    }

    // ---- test / [ ----

    fn b_test(&mut self, args: &[String], bracket: bool) -> i32 {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let args = if bracket {
            match args.split_last() {
                Some((&"]", rest)) => rest.to_vec(),
                _ => {
                    self.err("[: missing `]'");
                    return 2;
                }
            }
        } else {
            args
        };
        let name = if bracket { "[" } else { "test" };
        match self.test_expr(&args) {
            Ok(true) => 0,
            Ok(false) => 1,
            Err(m) => {
                self.err(&format!("{name}: {m}"));
                2
            }
        }
    }

    fn test_expr(&mut self, a: &[&str]) -> Result<bool, String> {
        // POSIX fixes the meaning by argument count up to four.
        match a.len() {
            0 => Ok(false),
            1 => Ok(!a[0].is_empty()),
            2 => {
                if a[0] == "!" {
                    return Ok(a[1].is_empty());
                }
                self.test_unary(a[0], a[1])
            }
            3 => {
                if let Some(op) = test_binop(a[1]) {
                    return self.test_binary(a[0], op, a[2]);
                }
                if a[1] == "-a" {
                    return Ok(!a[0].is_empty() && !a[2].is_empty());
                }
                if a[1] == "-o" {
                    return Ok(!a[0].is_empty() || !a[2].is_empty());
                }
                if a[0] == "!" {
                    return self.test_expr(&a[1..]).map(|b| !b);
                }
                if a[0] == "(" && a[2] == ")" {
                    return Ok(!a[1].is_empty());
                }
                Err(format!("{}: binary operator expected", a[1]))
            }
            4 if a[0] == "!" => self.test_expr(&a[1..]).map(|b| !b),
            4 if a[0] == "(" && a[3] == ")" => self.test_expr(&a[1..3]),
            _ => {
                let mut pos = 0;
                let r = self.test_or(a, &mut pos)?;
                if pos < a.len() {
                    return Err(format!("{}: unexpected argument", a[pos]));
                }
                Ok(r)
            }
        }
    }

    fn test_or(&mut self, a: &[&str], pos: &mut usize) -> Result<bool, String> {
        let mut v = self.test_and(a, pos)?;
        while *pos < a.len() && a[*pos] == "-o" {
            *pos += 1;
            let r = self.test_and(a, pos)?;
            v = v || r;
        }
        Ok(v)
    }

    fn test_and(&mut self, a: &[&str], pos: &mut usize) -> Result<bool, String> {
        let mut v = self.test_not(a, pos)?;
        while *pos < a.len() && a[*pos] == "-a" {
            *pos += 1;
            let r = self.test_not(a, pos)?;
            v = v && r;
        }
        Ok(v)
    }

    fn test_not(&mut self, a: &[&str], pos: &mut usize) -> Result<bool, String> {
        if *pos < a.len() && a[*pos] == "!" {
            *pos += 1;
            return self.test_not(a, pos).map(|b| !b);
        }
        self.test_primary(a, pos)
    }

    fn test_primary(&mut self, a: &[&str], pos: &mut usize) -> Result<bool, String> {
        let Some(&first) = a.get(*pos) else {
            return Err("argument expected".into());
        };
        if first == "(" {
            *pos += 1;
            let v = self.test_or(a, pos)?;
            if a.get(*pos) != Some(&")") {
                return Err("`)' expected".into());
            }
            *pos += 1;
            return Ok(v);
        }
        if let Some(&op) = a.get(*pos + 1)
            && let Some(bop) = test_binop(op)
            && *pos + 2 < a.len()
        {
            let r = self.test_binary(first, bop, a[*pos + 2]);
            *pos += 3;
            return r;
        }
        if first.len() == 2 && first.starts_with('-') && *pos + 1 < a.len() {
            let r = self.test_unary(first, a[*pos + 1]);
            *pos += 2;
            return r;
        }
        *pos += 1;
        Ok(!first.is_empty())
    }

    fn test_unary(&mut self, op: &str, arg: &str) -> Result<bool, String> {
        let mut c = op.chars();
        match (c.next(), c.next(), c.next()) {
            (Some('-'), Some(ch), None) if "abcdefghknoprstuvwxzGLNOS".contains(ch) => {
                self.unary_test(ch, arg)
            }
            _ => Err(format!("{op}: unary operator expected")),
        }
    }

    fn test_binary(&mut self, l: &str, op: CondBinOp, r: &str) -> Result<bool, String> {
        self.binary_test(l, op, r)
    }

    // ---- directories ----

    fn b_cd(&mut self, args: &[String]) -> i32 {
        let mut physical = false;
        let mut rest: Vec<&String> = Vec::new();
        for a in args {
            match a.as_str() {
                "-P" => physical = true,
                "-L" => physical = false,
                "--" => {}
                _ => rest.push(a),
            }
        }
        if rest.len() > 1 {
            self.err("cd: too many arguments");
            return 1;
        }
        let mut print = false;
        let target = match rest.first().map(|s| s.as_str()) {
            None => match self.get_var("HOME") {
                Some(h) => h,
                None => {
                    self.err("cd: HOME not set");
                    return 1;
                }
            },
            Some("-") => match self.get_var("OLDPWD") {
                Some(o) => {
                    print = true;
                    o
                }
                None => {
                    self.err("cd: OLDPWD not set");
                    return 1;
                }
            },
            Some(d) => d.to_string(),
        };
        // CDPATH: a relative name not starting with `.` is looked for in each of its
        // directories first; bash prints where it went when that was not the current one.
        let starts_dot = target == "."
            || target == ".."
            || target.starts_with("./")
            || target.starts_with("../");
        if !target.starts_with('/')
            && !starts_dot
            && !print
            && let Some(cdpath) = self.get_var("CDPATH")
        {
            for dir in cdpath.split(':') {
                let candidate = if dir.is_empty() {
                    format!("./{target}")
                } else {
                    format!("{}/{target}", dir.trim_end_matches('/'))
                };
                let abs = wasmsand_vfs::path::join(&self.st.cwd, &candidate);
                let is_dir = self
                    .rt
                    .vfs
                    .lock()
                    .stat(&abs)
                    .is_ok_and(|m| m.file_type == wasmsand_vfs::FileType::Dir);
                if is_dir && self.change_dir(&candidate, physical).is_ok() {
                    if !dir.is_empty() {
                        let cwd = self.st.cwd.clone();
                        return self.out_str(&format!("{cwd}\n"));
                    }
                    return 0;
                }
            }
        }
        match self.change_dir(&target, physical) {
            Ok(()) => {
                if print {
                    let cwd = self.st.cwd.clone();
                    return self.out_str(&format!("{cwd}\n"));
                }
                0
            }
            Err(m) => {
                self.err(&format!("cd: {m}"));
                1
            }
        }
    }

    pub(crate) fn change_dir(&mut self, target: &str, physical: bool) -> Result<(), String> {
        if target.is_empty() {
            return Ok(());
        }
        let joined = wasmsand_vfs::path::join(&self.st.cwd, target);
        let vfs = self.rt.vfs.lock();
        let meta = vfs
            .stat(&joined)
            .map_err(|e| format!("{target}: {}", strerror(e.errno)))?;
        if meta.file_type != wasmsand_vfs::FileType::Dir {
            return Err(format!("{target}: Not a directory"));
        }
        let new = if physical {
            vfs.realpath(&joined)
                .map_err(|e| format!("{target}: {}", strerror(e.errno)))?
        } else {
            wasmsand_vfs::path::normalize(&joined)
        };
        drop(vfs);
        let old = std::mem::replace(&mut self.st.cwd, new.clone());
        let _ = self.assign_exported_if_set("OLDPWD", old);
        let _ = self.assign_exported_if_set("PWD", new);
        Ok(())
    }

    fn assign_exported_if_set(&mut self, name: &str, v: String) -> Result<(), String> {
        let attrs = self
            .st
            .vars
            .get(name)
            .map(|v| v.attrs)
            .unwrap_or(ATTR_EXPORT);
        self.st.vars.put(
            name,
            Var {
                value: Value::Str(v),
                attrs: attrs & !ATTR_READONLY | (attrs & ATTR_EXPORT),
            },
        );
        Ok(())
    }

    fn b_pwd(&mut self, args: &[String]) -> i32 {
        let physical = args.iter().any(|a| a == "-P");
        let cwd = if physical {
            self.rt
                .vfs
                .lock()
                .realpath(&self.st.cwd)
                .unwrap_or_else(|_| self.st.cwd.clone())
        } else {
            self.st.cwd.clone()
        };
        self.out_str(&format!("{cwd}\n"))
    }

    fn tilde_short(&self, p: &str) -> String {
        match self.get_var("HOME") {
            Some(h) if !h.is_empty() && h != "/" && (p == h || p.starts_with(&format!("{h}/"))) => {
                format!("~{}", &p[h.len()..])
            }
            _ => p.to_string(),
        }
    }

    fn dirs_line(&self) -> String {
        let mut parts = vec![self.tilde_short(&self.st.cwd)];
        for d in self.st.dirstack.iter().rev() {
            parts.push(self.tilde_short(d));
        }
        format!("{}\n", parts.join(" "))
    }

    fn b_pushd(&mut self, args: &[String]) -> i32 {
        let quiet = args.iter().any(|a| a == "-n");
        let rest: Vec<&String> = args.iter().filter(|a| *a != "-n").collect();
        match rest.first() {
            None => {
                let Some(top) = self.st.dirstack.pop() else {
                    self.err("pushd: no other directory");
                    return 1;
                };
                let cur = self.st.cwd.clone();
                if let Err(m) = self.change_dir(&top, false) {
                    self.st.dirstack.push(top);
                    self.err(&format!("pushd: {m}"));
                    return 1;
                }
                self.st.dirstack.push(cur);
            }
            Some(d) => {
                let cur = self.st.cwd.clone();
                if let Err(m) = self.change_dir(d, false) {
                    self.err(&format!("pushd: {m}"));
                    return 1;
                }
                self.st.dirstack.push(cur);
            }
        }
        if quiet {
            return 0;
        }
        let line = self.dirs_line();
        self.out_str(&line)
    }

    fn b_popd(&mut self, _args: &[String]) -> i32 {
        let Some(top) = self.st.dirstack.pop() else {
            self.err("popd: directory stack empty");
            return 1;
        };
        if let Err(m) = self.change_dir(&top, false) {
            self.err(&format!("popd: {m}"));
            return 1;
        }
        let line = self.dirs_line();
        self.out_str(&line)
    }

    fn b_dirs(&mut self, args: &[String]) -> i32 {
        if args.iter().any(|a| a == "-c") {
            self.st.dirstack.clear();
            return 0;
        }
        let full = args.iter().any(|a| a == "-l");
        let per_line = args.iter().any(|a| a == "-p" || a == "-v");
        let numbered = args.iter().any(|a| a == "-v");
        let mut all = vec![self.st.cwd.clone()];
        all.extend(self.st.dirstack.iter().rev().cloned());
        let shown: Vec<String> = all
            .iter()
            .map(|d| if full { d.clone() } else { self.tilde_short(d) })
            .collect();
        let text = if per_line {
            shown
                .iter()
                .enumerate()
                .map(|(i, d)| {
                    if numbered {
                        format!("{i:2}  {d}\n")
                    } else {
                        format!("{d}\n")
                    }
                })
                .collect()
        } else {
            format!("{}\n", shown.join(" "))
        };
        self.out_str(&text)
    }

    /// `ulimit`: values are recorded per session and shown back; the sandbox's own limits
    /// (memory, time, processes) are what actually bound a run.
    fn b_ulimit(&mut self, args: &[String]) -> i32 {
        let mut ops: Vec<(char, Option<String>)> = Vec::new();
        let mut all = false;
        let mut i = 0;
        while let Some(a) = args.get(i) {
            i += 1;
            if a == "--" {
                if let Some(v) = args.get(i) {
                    match ops.last_mut() {
                        Some((_, slot @ None)) => *slot = Some(v.clone()),
                        _ => ops.push(('f', Some(v.clone()))),
                    }
                }
                break;
            }
            if let Some(flags) = a.strip_prefix('-').filter(|f| !f.is_empty()) {
                for c in flags.chars() {
                    match c {
                        'S' | 'H' => {}
                        'a' => all = true,
                        c if ULIMITS.iter().any(|u| u.0 == c) => ops.push((c, None)),
                        c => {
                            self.err(&format!("ulimit: -{c}: invalid option"));
                            self.err_raw(
                                "ulimit: usage: ulimit [-SHabcdefiklmnpqrstuvxPRT] [limit]\n",
                            );
                            return 2;
                        }
                    }
                }
                continue;
            }
            match ops.last_mut() {
                Some((_, slot @ None)) => *slot = Some(a.clone()),
                _ => ops.push(('f', Some(a.clone()))),
            }
        }
        let mut text = String::new();
        if all {
            for (c, ..) in ULIMITS {
                text.push_str(&self.ulimit_line(*c, true));
            }
        }
        if ops.is_empty() && !all {
            ops.push(('f', None));
        }
        let labelled = ops.len() > 1;
        for (c, v) in ops {
            match v {
                None => text.push_str(&self.ulimit_line(c, labelled)),
                Some(v) => {
                    let value = match v.as_str() {
                        "unlimited" => None,
                        "hard" | "soft" => self.ulimit_value(c),
                        _ => match v.parse::<u64>() {
                            Ok(n) => Some(n),
                            Err(_) => {
                                self.err(&format!("ulimit: {v}: invalid number"));
                                return 1;
                            }
                        },
                    };
                    self.st.ulimits.insert(c, value);
                }
            }
        }
        self.out_str(&text)
    }

    fn ulimit_value(&self, c: char) -> Option<u64> {
        match self.st.ulimits.get(&c) {
            Some(v) => *v,
            None => ULIMITS.iter().find(|u| u.0 == c).and_then(|u| u.3),
        }
    }

    fn ulimit_line(&self, c: char, labelled: bool) -> String {
        let value = match self.ulimit_value(c) {
            Some(n) => n.to_string(),
            None => "unlimited".into(),
        };
        if !labelled {
            return format!("{value}\n");
        }
        let Some((_, desc, units, _)) = ULIMITS.iter().find(|u| u.0 == c) else {
            return format!("{value}\n");
        };
        let unit = if units.is_empty() {
            format!("(-{c}) ")
        } else {
            format!("({units}, -{c}) ")
        };
        format!("{desc:<20} {unit:>20}{value}\n")
    }

    /// `times`: the shell's own time (none worth counting: it runs in the host) and its
    /// children's, the programs' CPU time.
    fn b_times(&mut self) -> i32 {
        let fmt = |d: Duration| {
            let secs = d.as_secs();
            format!("{}m{}.{:03}s", secs / 60, secs % 60, d.subsec_millis())
        };
        let children = self.usage.stats().cpu_time;
        let text = format!(
            "{} {}\n{} {}\n",
            fmt(Duration::ZERO),
            fmt(Duration::ZERO),
            fmt(children),
            fmt(Duration::ZERO)
        );
        self.out_str(&text)
    }

    /// `history`: a non-interactive bash keeps no history, so there is never anything to
    /// list; the arguments are still checked as bash does.
    fn b_history(&mut self, args: &[String]) -> FlowResult {
        let mut rest = args;
        if let Some(a) = rest.first() {
            if a == "--" {
                rest = &rest[1..];
            } else if let Some(flags) = a.strip_prefix('-').filter(|f| !f.is_empty()) {
                for c in flags.chars() {
                    if c == 'd' {
                        let off = rest.get(1).map(String::as_str).unwrap_or("");
                        self.err(&format!("history: {off}: history position out of range"));
                        return Ok(1);
                    }
                    if !"canrwps".contains(c) {
                        self.err(&format!("history: -{c}: invalid option"));
                        self.err_raw(&format!(
                            "history: usage: {}\n",
                            HELP_SYNOPSES
                                .iter()
                                .find(|h| h.0 == "history")
                                .map_or("", |h| h.1)
                        ));
                        return Ok(2);
                    }
                }
                return Ok(0);
            }
        }
        if let Some(n) = rest.first()
            && n.trim_start_matches('+').parse::<i64>().is_err()
        {
            self.err(&format!("history: {n}: numeric argument required"));
            return Ok(1);
        }
        if rest.len() > 1 {
            // bash treats a count followed by more words as fatal, ending the shell.
            self.err("history: too many arguments");
            return Err(Flow::Exit(1));
        }
        Ok(0)
    }

    fn b_umask(&mut self, args: &[String]) -> i32 {
        let mut symbolic = false;
        let mut reusable = false;
        let mut i = 0;
        while let Some(a) = args.get(i) {
            if a == "--" {
                i += 1;
                break;
            }
            // A lone `-` is no option: bash takes it as "no mode", like plain `umask`.
            if !a.starts_with('-') || a == "-" {
                break;
            }
            for c in a[1..].chars() {
                match c {
                    'S' => symbolic = true,
                    'p' => reusable = true,
                    _ => {
                        self.err(&format!("umask: -{c}: invalid option"));
                        self.err_raw("umask: usage: umask [-p] [-S] [mode]\n");
                        return 2;
                    }
                }
            }
            i += 1;
        }
        let mode = args.get(i);
        if mode.is_some_and(|m| m == "-") {
            return 0;
        }
        if let Some(v) = mode {
            let new = if v.starts_with(|c: char| c.is_ascii_digit()) {
                match u32::from_str_radix(v, 8) {
                    Ok(n) if n <= 0o777 => n,
                    _ => {
                        self.err(&format!("umask: {v}: octal number out of range"));
                        return 1;
                    }
                }
            } else {
                match symbolic_mode(v, !self.st.umask & 0o777) {
                    Ok(perms) => !perms & 0o777,
                    Err(e) => {
                        self.err(&format!("umask: {e}"));
                        return 1;
                    }
                }
            };
            self.st.umask = new;
            self.rt.vfs.lock().set_umask(new);
            // bash prints the mask after setting it only for `-S`.
            if !symbolic {
                return 0;
            }
        }
        let m = self.st.umask;
        let prefix = if reusable { "umask " } else { "" };
        if symbolic {
            let f = |shift: u32| {
                let bits = !(m >> shift) & 7;
                let mut s = String::new();
                for (bit, ch) in [(4, 'r'), (2, 'w'), (1, 'x')] {
                    if bits & bit != 0 {
                        s.push(ch);
                    }
                }
                s
            };
            let opt = if reusable { "-S " } else { "" };
            self.out_str(&format!("{prefix}{opt}u={},g={},o={}\n", f(6), f(3), f(0)))
        } else {
            self.out_str(&format!("{prefix}{m:04o}\n"))
        }
    }

    // ---- variables ----

    fn b_unset(&mut self, args: &[String]) -> i32 {
        let mut funcs = false;
        let mut vars_only = false;
        let mut nameref = false;
        let mut status = 0;
        let mut options_done = false;
        for a in args {
            if !options_done && a.starts_with('-') && a.len() > 1 {
                if a == "--" {
                    options_done = true;
                    continue;
                }
                for c in a[1..].chars() {
                    match c {
                        'f' => funcs = true,
                        'v' => vars_only = true,
                        'n' => nameref = true,
                        _ => {
                            self.err(&format!("unset: -{c}: invalid option"));
                            self.err_raw("unset: usage: unset [-f] [-v] [-n] [name ...]\n");
                            return 2;
                        }
                    }
                }
                continue;
            }
            options_done = true;
            if funcs && !vars_only {
                self.st.functions.remove(a);
                continue;
            }
            let (name, key) = match a.find('[') {
                Some(i) if a.ends_with(']') => {
                    (a[..i].to_string(), Some(a[i + 1..a.len() - 1].to_string()))
                }
                _ => (a.clone(), None),
            };
            if !is_valid_name(&name) {
                // Without -v an invalid variable name may still be a function's: no error.
                if vars_only {
                    self.err(&format!("unset: `{a}': not a valid identifier"));
                    status = 1;
                } else {
                    self.st.functions.remove(a);
                }
                continue;
            }
            let (name, key) = if nameref && key.is_none() {
                (name, None)
            } else {
                let (target, sub) = self.resolve_ref(&name);
                (target, key.or(sub))
            };
            if let Some(key) = key {
                if let Some(v) = self.st.vars.get(&name)
                    && v.has(ATTR_READONLY)
                {
                    self.err(&format!("unset: {name}: cannot unset: readonly variable"));
                    status = 1;
                    continue;
                }
                let is_assoc = matches!(
                    self.st.vars.get(&name).map(|v| &v.value),
                    Some(Value::Assoc(_))
                );
                if !is_assoc && (key == "@" || key == "*") {
                    let _ = self.unset_var(&name);
                    continue;
                }
                let k = self.runtime_key_for(&name, &key);
                if let Some(var) = self.st.vars.get_mut(&name) {
                    match (&mut var.value, k) {
                        (Value::Indexed(m), Ok(crate::interp::AssignKey::Index(i))) => {
                            let i = if i < 0 {
                                m.keys().next_back().map(|k| k + 1 + i).unwrap_or(i)
                            } else {
                                i
                            };
                            m.remove(&i);
                        }
                        (Value::Assoc(m), Ok(crate::interp::AssignKey::Key(k))) => {
                            m.remove(&k);
                        }
                        (Value::Str(_), Ok(crate::interp::AssignKey::Index(0 | -1))) => {
                            var.value = Value::Unset;
                        }
                        (_, Err(m)) => {
                            self.err(&format!("unset: {m}"));
                            status = 1;
                        }
                        _ => {}
                    }
                }
                continue;
            }
            if self.st.vars.get(&name).is_some() {
                if let Err(m) = self.unset_var(&name) {
                    self.err(&m);
                    status = 1;
                }
            } else if !vars_only && !nameref {
                self.st.functions.remove(&name);
            }
        }
        status
    }

    pub(crate) fn run_declaration(&mut self, name: &str, args: Vec<DeclArg>) -> FlowResult {
        let mut add: u8 = 0;
        let mut remove: u8 = 0;
        let mut array = false;
        let mut assoc = false;
        let mut print = false;
        let mut global = false;
        let mut funcs = false;
        let mut func_names = false;
        let mut items: Vec<DeclArg> = Vec::new();
        let mut options_done = false;
        match name {
            "export" => add |= ATTR_EXPORT,
            "readonly" => add |= ATTR_READONLY,
            _ => {}
        }
        for a in args {
            if let DeclArg::Plain(s) = &a
                && !options_done
                && (s.starts_with('-') || s.starts_with('+'))
                && s.len() > 1
            {
                if s == "--" {
                    options_done = true;
                    continue;
                }
                let on = s.starts_with('-');
                for c in s[1..].chars() {
                    let bit = match c {
                        'x' => ATTR_EXPORT,
                        'r' => ATTR_READONLY,
                        'i' => ATTR_INTEGER,
                        'l' => ATTR_LOWER,
                        'u' => ATTR_UPPER,
                        't' => ATTR_TRACE,
                        'a' => {
                            array = true;
                            0
                        }
                        'A' => {
                            assoc = true;
                            0
                        }
                        'p' => {
                            print = true;
                            0
                        }
                        'g' if name != "local" && name != "export" && name != "readonly" => {
                            global = true;
                            0
                        }
                        'f' => {
                            funcs = true;
                            0
                        }
                        'F' if name != "export" && name != "readonly" => {
                            func_names = true;
                            0
                        }
                        'n' if name == "export" => {
                            remove |= ATTR_EXPORT;
                            add &= !ATTR_EXPORT;
                            0
                        }
                        'n' => ATTR_NAMEREF,
                        _ => {
                            self.err(&format!("{name}: -{c}: invalid option"));
                            self.err_raw(&format!("{name}: usage: {}\n", decl_usage(name)));
                            return Ok(2);
                        }
                    };
                    if on {
                        add |= bit;
                    } else {
                        remove |= bit;
                        add &= !bit;
                    }
                }
                continue;
            }
            items.push(a);
        }
        if name == "local" && !self.st.vars.in_function() {
            self.err("local: can only be used in a function");
            return Ok(1);
        }
        if (funcs || func_names) && (name == "export" || name == "readonly") && !items.is_empty() {
            let mut status = 0;
            for a in &items {
                let n = match a {
                    DeclArg::Plain(s) => s.clone(),
                    DeclArg::Assign(a, _) => a.name.clone(),
                };
                if !self.st.functions.contains_key(&n) {
                    self.err(&format!("{name}: {n}: not a function"));
                    status = 1;
                } else if name == "export" {
                    if remove & ATTR_EXPORT != 0 {
                        self.st.exported_functions.remove(&n);
                    } else {
                        self.st.exported_functions.insert(n);
                    }
                } else {
                    self.st.readonly_functions.insert(n);
                }
            }
            return Ok(status);
        }
        if funcs || func_names {
            return Ok(self.print_functions(&items, func_names));
        }
        if items.is_empty() {
            return Ok(self.list_declarations(name, add, array, assoc, print));
        }
        if print {
            return Ok(self.print_declarations(name, &items));
        }
        let make_local = (name == "local" || (self.st.vars.in_function() && !global))
            && name != "export"
            && name != "readonly";
        let mut status = 0;
        for item in items {
            if name == "local"
                && let DeclArg::Plain(s) = &item
                && s == "-"
            {
                // `local -`: the function's option changes end with it.
                if let Some(slot) = self.saved_opts.last_mut()
                    && slot.is_none()
                {
                    *slot = Some(self.st.opts.clone());
                }
                continue;
            }
            let (var_name, shown, value) = match item {
                DeclArg::Plain(s) => match self.plain_declaration(&s, array || assoc)? {
                    PlainDecl::Name(n) => (n, s, None),
                    PlainDecl::Assign(a, v) => (a.name.clone(), s, Some((a, v))),
                    PlainDecl::Invalid => {
                        self.err(&format!("{name}: `{s}': not a valid identifier"));
                        status = 1;
                        continue;
                    }
                },
                DeclArg::Assign(a, v) => (a.name.clone(), a.name.clone(), Some((a, v))),
            };
            if !is_valid_name(&var_name) {
                self.err(&format!("{name}: `{shown}': not a valid identifier"));
                status = 1;
                continue;
            }
            if let Some(v) = self.st.vars.get(&var_name)
                && v.has(ATTR_READONLY)
                && (value.is_some() || remove & ATTR_READONLY != 0)
            {
                self.err(&format!("{name}: {var_name}: readonly variable"));
                status = 1;
                continue;
            }
            if add & ATTR_NAMEREF != 0 {
                if let Err(m) = self.declare_nameref(&var_name, add, make_local, value) {
                    self.err(&format!("{name}: {m}"));
                    status = 1;
                }
                continue;
            }
            if let Some(existing) = self.st.vars.get(&var_name).map(|v| &v.value) {
                let stays_visible = !make_local || self.st.vars.is_local_here(&var_name);
                if stays_visible && assoc && matches!(existing, Value::Indexed(_)) {
                    self.err(&format!(
                        "{name}: {var_name}: cannot convert indexed to associative array"
                    ));
                    status = 1;
                    continue;
                }
                if stays_visible && array && !assoc && matches!(existing, Value::Assoc(_)) {
                    self.err(&format!(
                        "{name}: {var_name}: cannot convert associative to indexed array"
                    ));
                    status = 1;
                    continue;
                }
            }
            if make_local {
                self.st.vars.make_local(&var_name);
            } else if global && self.st.vars.in_function() {
                // `declare -g` inside a function writes the global binding.
                let r = self.declare_global(&var_name, add, remove, array, assoc, value);
                if let Err(m) = r {
                    self.err(&m);
                    status = 1;
                }
                continue;
            }
            let mut var = self.st.vars.get(&var_name).cloned().unwrap_or(Var {
                value: Value::Unset,
                attrs: 0,
            });
            let was_unset = matches!(var.value, Value::Unset);
            if assoc && !matches!(var.value, Value::Assoc(_)) {
                var.value = Value::Assoc(crate::vars::AssocMap::new());
            } else if array && !matches!(var.value, Value::Indexed(_) | Value::Assoc(_)) {
                var.value = match std::mem::replace(&mut var.value, Value::Unset) {
                    Value::Str(s) => Value::Indexed(BTreeMap::from([(0, s)])),
                    _ => Value::Indexed(BTreeMap::new()),
                };
            }
            var.attrs = (var.attrs | add) & !remove;
            if was_unset && value.is_none() && var.is_array() {
                var.attrs |= crate::vars::ATTR_NOVALUE;
            }
            if add & ATTR_UPPER != 0 {
                var.attrs &= !ATTR_LOWER;
            } else if add & ATTR_LOWER != 0 {
                var.attrs &= !ATTR_UPPER;
            }
            let readonly_after = var.attrs & ATTR_READONLY != 0;
            var.attrs &= !ATTR_READONLY;
            self.st.vars.put(&var_name, var);
            if let Some((a, v)) = value {
                let r = match v {
                    AssignedValue::Array(items) => self.assign_array(&a.name, items, a.append),
                    other => self.store_assignment(&a, other),
                };
                if let Err(m) = r {
                    self.err(&format!("{name}: {m}"));
                    status = 1;
                }
            }
            if readonly_after && let Some(v) = self.st.vars.get_mut(&var_name) {
                v.attrs |= ATTR_READONLY;
            }
        }
        Ok(status)
    }

    /// A declaration argument that came from an expansion (`export "$n=$v"`, `local $x`,
    /// `builtin declare a=1`): bash splits it at its first `=` as it would an assignment
    /// word. A `(...)` value is an array literal only for arrays (bash 5.2).
    fn plain_declaration(&mut self, s: &str, array: bool) -> FlowResult<PlainDecl> {
        let Some(eq) = s.find('=') else {
            return Ok(PlainDecl::Name(s.to_string()));
        };
        let (lhs, val) = (&s[..eq], &s[eq + 1..]);
        let (lhs, append) = match lhs.strip_suffix('+') {
            Some(l) => (l, true),
            None => (lhs, false),
        };
        let (name, index) = match lhs.find('[') {
            Some(i) if lhs.ends_with(']') && i + 1 < lhs.len() => {
                (&lhs[..i], Some(lhs[i + 1..lhs.len() - 1].to_string()))
            }
            _ => (lhs, None),
        };
        if !is_valid_name(name) {
            return Ok(PlainDecl::Invalid);
        }
        let is_array_var = self.st.vars.get(name).is_some_and(|v| v.is_array());
        let mut a = crate::ast::Assignment {
            name: name.to_string(),
            index: None,
            append,
            value: crate::ast::AssignValue::Scalar(crate::ast::Word::default()),
        };
        if index.is_none()
            && (array || is_array_var)
            && val.starts_with('(')
            && val.ends_with(')')
            && let Ok(script) = crate::parse(&format!("{name}={val}"))
            && let Some(crate::ast::ListItem {
                and_or:
                    crate::ast::AndOr {
                        first: crate::ast::Pipeline { commands, .. },
                        ..
                    },
                ..
            }) = script.items.first()
            && let Some(crate::ast::Command::Simple(sc)) = commands.first()
            && let Some(parsed) = sc.assignments.first()
            && matches!(parsed.value, crate::ast::AssignValue::Array(_))
        {
            a.value = parsed.value.clone();
            let v = self.eval_assignment(&a)?;
            return Ok(PlainDecl::Assign(a, v));
        }
        let v = match index {
            Some(k) => AssignedValue::Elem(k, val.to_string()),
            None => AssignedValue::Scalar(val.to_string()),
        };
        Ok(PlainDecl::Assign(a, v))
    }

    /// `declare -n name[=target]`: the value is stored as is, never followed.
    fn declare_nameref(
        &mut self,
        name: &str,
        add: u8,
        make_local: bool,
        value: Option<(crate::ast::Assignment, AssignedValue)>,
    ) -> Result<(), String> {
        let target = match value {
            Some((_, AssignedValue::Scalar(t))) => Some(t),
            Some(_) => return Err(format!("{name}: reference variable cannot be an array")),
            None => None,
        };
        // `declare -n ref` on a set variable makes its value the target: checked the same.
        let existing = match self.st.vars.get(name).map(|v| &v.value) {
            Some(Value::Str(t)) if target.is_none() => Some(t.clone()),
            _ => None,
        };
        if let Some(t) = target.as_ref().or(existing.as_ref()) {
            let base = t.split('[').next().unwrap_or("");
            let sub_ok = match t.find('[') {
                Some(i) => t.ends_with(']') && i + 1 < t.len() - 1,
                None => true,
            };
            if !(t.is_empty() || is_valid_name(base) && sub_ok) {
                return Err(format!("`{t}': invalid variable name for name reference"));
            }
            if t == name {
                return Err(format!(
                    "{name}: nameref variable self references not allowed"
                ));
            }
        }
        if make_local {
            self.st.vars.make_local(name);
        }
        let mut var = self.st.vars.get(name).cloned().unwrap_or(Var {
            value: Value::Unset,
            attrs: 0,
        });
        var.attrs |= add;
        if let Some(t) = target {
            var.value = Value::Str(t);
        }
        self.st.vars.put(name, var);
        Ok(())
    }

    fn print_functions(&mut self, items: &[DeclArg], names_only: bool) -> i32 {
        let mut names: Vec<String> = if items.is_empty() {
            let mut v: Vec<String> = self.st.functions.keys().cloned().collect();
            v.sort();
            v
        } else {
            items
                .iter()
                .map(|a| match a {
                    DeclArg::Plain(s) => s.clone(),
                    DeclArg::Assign(a, _) => a.name.clone(),
                })
                .collect()
        };
        let mut status = 0;
        let mut text = String::new();
        for n in names.drain(..) {
            match self.st.functions.get(&n).cloned() {
                Some(_) if names_only => {
                    if items.is_empty() {
                        text.push_str(&format!("declare -f {n}\n"));
                    } else {
                        text.push_str(&format!("{n}\n"));
                    }
                }
                Some(f) => {
                    text.push_str(&crate::printer::function_text(&f));
                    text.push('\n');
                }
                None => status = 1,
            }
        }
        let s = self.out_str(&text);
        if s != 0 { s } else { status }
    }

    fn declare_global(
        &mut self,
        name: &str,
        add: u8,
        remove: u8,
        array: bool,
        assoc: bool,
        value: Option<(crate::ast::Assignment, AssignedValue)>,
    ) -> Result<(), String> {
        if !self.st.vars.is_shadowed(name) {
            let mut var = self.st.vars.get(name).cloned().unwrap_or(Var {
                value: Value::Unset,
                attrs: 0,
            });
            if assoc && !matches!(var.value, Value::Assoc(_)) {
                var.value = Value::Assoc(crate::vars::AssocMap::new());
            } else if array && !matches!(var.value, Value::Indexed(_) | Value::Assoc(_)) {
                var.value = Value::Indexed(BTreeMap::new());
            }
            var.attrs = (var.attrs | add) & !remove;
            self.st.vars.put(name, var);
            return match value {
                Some((a, AssignedValue::Array(items))) => {
                    self.assign_array(&a.name, items, a.append)
                }
                Some((a, v)) => self.store_assignment(&a, v),
                None => Ok(()),
            };
        }
        // A local hides the global: assign in the visible slot, then move the result into
        // the global binding and put the local back.
        let visible = self.st.vars.get(name).cloned();
        let global = self.st.vars.with_global(name, |g| g.clone());
        let mut var = global.unwrap_or(Var {
            value: if assoc {
                Value::Assoc(crate::vars::AssocMap::new())
            } else if array {
                Value::Indexed(BTreeMap::new())
            } else {
                Value::Unset
            },
            attrs: 0,
        });
        var.attrs = (var.attrs | add) & !remove;
        self.st.vars.put(name, var);
        let r = match value {
            Some((a, AssignedValue::Array(items))) => self.assign_array(&a.name, items, a.append),
            Some((a, v)) => self.store_assignment(&a, v),
            None => Ok(()),
        };
        let result = self.st.vars.get(name).cloned();
        self.st.vars.with_global(name, |g| *g = result);
        match visible {
            Some(v) => self.st.vars.put(name, v),
            None => {
                self.st.vars.remove(name);
            }
        }
        r
    }

    /// `declare -p` / `export` / `readonly -p` without names: every variable with the
    /// requested attributes; plain `declare` lists them as `set` does.
    fn list_declarations(
        &mut self,
        name: &str,
        filter: u8,
        array: bool,
        assoc: bool,
        print: bool,
    ) -> i32 {
        let set_style = matches!(name, "declare" | "typeset" | "local")
            && filter == 0
            && !array
            && !assoc
            && !print;
        let locals_only = name == "local";
        let mut text = String::new();
        for n in self.st.vars.names() {
            let Some(v) = self.st.vars.get(&n) else {
                continue;
            };
            if v.attrs & filter != filter
                || (array && !matches!(v.value, Value::Indexed(_)))
                || (assoc && !matches!(v.value, Value::Assoc(_)))
                || (locals_only && !self.st.vars.is_local_here(&n))
            {
                continue;
            }
            if set_style {
                text.push_str(&set_line(&n, v));
            } else {
                text.push_str(&declare_line(&n, v));
                text.push('\n');
            }
        }
        self.out_str(&text)
    }

    fn print_declarations(&mut self, name: &str, items: &[DeclArg]) -> i32 {
        let mut text = String::new();
        let mut status = 0;
        for a in items {
            let n = match a {
                DeclArg::Plain(s) => s.clone(),
                DeclArg::Assign(a, _) => a.name.clone(),
            };
            let Some(v) = self.st.vars.get(&n).cloned() else {
                self.err(&format!("{name}: {n}: not found"));
                status = 1;
                continue;
            };
            text.clear();
            text.push_str(&declare_line(&n, &v));
            text.push('\n');
            let s = self.out_str(&text);
            if s != 0 {
                return s;
            }
        }
        status
    }

    fn b_let(&mut self, args: &[String]) -> FlowResult {
        if args.is_empty() {
            self.err("let: expression expected");
            return Ok(1);
        }
        let mut last = 0;
        for a in args {
            match self.eval_arith_text(a) {
                Ok(v) => last = v,
                Err(AErr::Msg(m)) => {
                    self.err(&format!("let: {m}"));
                    return Ok(1);
                }
                Err(AErr::Flow(f)) => return Err(f),
            }
        }
        Ok((last == 0) as i32)
    }

    // ---- set / shopt ----

    pub(crate) fn option_value(&self, name: &str) -> Option<bool> {
        let o = &self.st.opts;
        Some(match name {
            "errexit" => o.errexit,
            "nounset" => o.nounset,
            "pipefail" => o.pipefail,
            "xtrace" => o.xtrace,
            "noglob" => o.noglob,
            "noclobber" => o.noclobber,
            "allexport" => o.allexport,
            "noexec" => o.noexec,
            "errtrace" => o.errtrace,
            "functrace" => o.functrace,
            n if SET_OPTIONS.contains(&n) => o.extra.contains(n),
            _ => return None,
        })
    }

    pub(crate) fn set_option(&mut self, name: &str, on: bool) -> bool {
        let o = &mut self.st.opts;
        match name {
            "errexit" => o.errexit = on,
            "nounset" => o.nounset = on,
            "pipefail" => o.pipefail = on,
            "xtrace" => o.xtrace = on,
            "noglob" => o.noglob = on,
            "noclobber" => o.noclobber = on,
            "allexport" => o.allexport = on,
            "noexec" => o.noexec = on,
            "errtrace" => o.errtrace = on,
            "functrace" => o.functrace = on,
            n if SET_OPTIONS.contains(&n) => {
                if on {
                    o.extra.insert(n.to_string());
                } else {
                    o.extra.remove(n);
                }
            }
            _ => return false,
        }
        true
    }

    /// `shopt` options: the ones the shell models, then the rest as plain flags.
    pub(crate) fn shopt_value(&self, name: &str) -> Option<bool> {
        let o = &self.st.opts;
        Some(match name {
            "nullglob" => o.nullglob,
            "dotglob" => o.dotglob,
            "failglob" => o.failglob,
            "nocaseglob" => o.nocaseglob,
            "nocasematch" => o.nocasematch,
            "expand_aliases" => o.expand_aliases,
            "lastpipe" => o.lastpipe,
            n if SHOPT_OPTIONS.iter().any(|(k, _)| *k == n) => o.extra.contains(n),
            _ => return None,
        })
    }

    fn set_shopt(&mut self, name: &str, on: bool) -> bool {
        let o = &mut self.st.opts;
        let slot = match name {
            "nullglob" => &mut o.nullglob,
            "dotglob" => &mut o.dotglob,
            "failglob" => &mut o.failglob,
            "nocaseglob" => &mut o.nocaseglob,
            "nocasematch" => &mut o.nocasematch,
            "expand_aliases" => &mut o.expand_aliases,
            "lastpipe" => &mut o.lastpipe,
            n if SHOPT_OPTIONS.iter().any(|(k, _)| *k == n) => {
                if on {
                    o.extra.insert(n.to_string());
                } else {
                    o.extra.remove(n);
                }
                return true;
            }
            _ => return false,
        };
        *slot = on;
        true
    }

    /// `$SHELLOPTS`: the `set -o` options that are on.
    pub(crate) fn shellopts(&self) -> String {
        SET_OPTIONS
            .iter()
            .filter(|n| self.option_value(n) == Some(true))
            .copied()
            .collect::<Vec<_>>()
            .join(":")
    }

    /// `$BASHOPTS`: the `shopt` options that are on.
    pub(crate) fn bashopts(&self) -> String {
        SHOPT_OPTIONS
            .iter()
            .filter(|(n, _)| self.shopt_value(n) == Some(true))
            .map(|(n, _)| *n)
            .collect::<Vec<_>>()
            .join(":")
    }

    fn b_set(&mut self, args: &[String]) -> i32 {
        if args.is_empty() {
            let mut text = String::new();
            for n in self.st.vars.names() {
                if let Some(v) = self.st.vars.get(&n)
                    && !matches!(v.value, Value::Unset)
                {
                    text.push_str(&set_line(&n, v));
                }
            }
            return self.out_str(&text);
        }
        let mut i = 0;
        while i < args.len() {
            let a = &args[i];
            if a == "--" {
                self.st.positional = args[i + 1..].to_vec();
                return 0;
            }
            if a == "-" {
                self.st.opts.xtrace = false;
                self.st.opts.extra.remove("verbose");
                if i + 1 < args.len() {
                    self.st.positional = args[i + 1..].to_vec();
                }
                return 0;
            }
            if a == "+" {
                if i + 1 < args.len() {
                    self.st.positional = args[i + 1..].to_vec();
                }
                return 0;
            }
            let on = a.starts_with('-');
            if !(on || a.starts_with('+')) || a.len() < 2 {
                self.st.positional = args[i..].to_vec();
                return 0;
            }
            for c in a[1..].chars() {
                let name = match c {
                    'e' => "errexit",
                    'u' => "nounset",
                    'x' => "xtrace",
                    'f' => "noglob",
                    'C' => "noclobber",
                    'a' => "allexport",
                    'n' => "noexec",
                    'h' => "hashall",
                    'B' => "braceexpand",
                    'H' => "histexpand",
                    'm' => "monitor",
                    'b' => "notify",
                    'v' => "verbose",
                    'T' => "functrace",
                    'E' => "errtrace",
                    'P' => "physical",
                    'k' => "keyword",
                    't' => "onecmd",
                    'o' => {
                        i += 1;
                        match args.get(i) {
                            Some(n) => {
                                if !self.set_option(n, on) {
                                    self.err(&format!("set: {n}: invalid option name"));
                                    return 2;
                                }
                            }
                            None => {
                                let text = self.options_listing(on);
                                return self.out_str(&text);
                            }
                        }
                        continue;
                    }
                    _ => {
                        self.err(&format!("set: {}{c}: invalid option", &a[..1]));
                        return 2;
                    }
                };
                self.set_option(name, on);
            }
            i += 1;
        }
        0
    }

    fn options_listing(&self, dash: bool) -> String {
        let mut s = String::new();
        for n in SET_OPTIONS {
            let v = self.option_value(n).unwrap_or(false);
            if dash {
                s.push_str(&format!("{n:<15}\t{}\n", if v { "on" } else { "off" }));
            } else {
                s.push_str(&format!("set {}o {n}\n", if v { '-' } else { '+' }));
            }
        }
        s
    }

    fn b_shopt(&mut self, args: &[String]) -> i32 {
        let mut mode: Option<bool> = None;
        let mut quiet = false;
        let mut print = false;
        let mut set_o = false;
        let mut names = Vec::new();
        let mut options_done = false;
        for a in args {
            if !options_done && a.starts_with('-') && a.len() > 1 {
                if a == "--" {
                    options_done = true;
                    continue;
                }
                for c in a[1..].chars() {
                    match c {
                        's' => mode = Some(true),
                        'u' => mode = Some(false),
                        'q' => quiet = true,
                        'p' => print = true,
                        'o' => set_o = true,
                        _ => {
                            self.err(&format!("shopt: -{c}: invalid option"));
                            self.err_raw("shopt: usage: shopt [-pqsu] [-o] [optname ...]\n");
                            return 2;
                        }
                    }
                }
                continue;
            }
            options_done = true;
            names.push(a.clone());
        }
        let all: Vec<String> = if set_o {
            SET_OPTIONS.iter().map(|s| s.to_string()).collect()
        } else {
            SHOPT_OPTIONS.iter().map(|(s, _)| s.to_string()).collect()
        };
        let listing = names.is_empty();
        let targets = if listing { all } else { names };
        let mut status = 0;
        let mut text = String::new();
        for n in &targets {
            let current = if set_o {
                self.option_value(n)
            } else {
                self.shopt_value(n)
            };
            let Some(v) = current else {
                self.err(&format!("shopt: {n}: invalid shell option name"));
                status = 1;
                continue;
            };
            match mode {
                Some(m) if !listing => {
                    if set_o {
                        self.set_option(n, m);
                    } else {
                        self.set_shopt(n, m);
                    }
                }
                Some(m) => {
                    // `shopt -s` alone lists the options that are on.
                    if v == m {
                        text.push_str(&shopt_line(n, v, print, set_o));
                    }
                }
                None => {
                    if !v {
                        status = 1;
                    }
                    text.push_str(&shopt_line(n, v, print, set_o));
                }
            }
        }
        if listing {
            status = 0;
        }
        if !quiet && !text.is_empty() {
            let s = self.out_str(&text);
            if s != 0 {
                return s;
            }
        }
        status
    }

    fn read_byte_by(&mut self, fd: u32, deadline: Instant) -> FlowResult<Result<Option<u8>, ()>> {
        let mut b = [0u8; 1];
        if let Some(Fd::In(InSrc::Pipe(p))) = self.fds.get(fd).cloned() {
            let until = match self.rt.deadline() {
                Some(d) if d < deadline => d,
                _ => deadline,
            };
            return match p.read_until(&mut b, until) {
                Ok(0) => Ok(Ok(None)),
                Ok(_) => Ok(Ok(Some(b[0]))),
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                    self.check()?;
                    Ok(Err(()))
                }
                Err(_) => {
                    self.check()?;
                    Ok(Ok(None))
                }
            };
        }
        Ok(Ok(self.read_byte(fd)?))
    }

    /// Reads one byte from descriptor `fd`; `None` at end of input.
    fn read_byte(&mut self, fd: u32) -> FlowResult<Option<u8>> {
        let mut b = [0u8; 1];
        match self.fds.get(fd).cloned() {
            Some(Fd::In(InSrc::Pipe(p))) => match p.read(&mut b) {
                Ok(0) => Ok(None),
                Ok(_) => Ok(Some(b[0])),
                Err(_) => {
                    self.check()?;
                    Ok(None)
                }
            },
            Some(Fd::In(InSrc::File(f))) => match f.read(&mut b) {
                Ok(0) | Err(_) => Ok(None),
                Ok(_) => Ok(Some(b[0])),
            },
            Some(Fd::In(InSrc::Bytes(c))) => {
                let mut g = c.lock();
                let pos = g.1;
                if pos < g.0.len() {
                    g.1 += 1;
                    Ok(Some(g.0[pos]))
                } else {
                    Ok(None)
                }
            }
            _ => Ok(None),
        }
    }

    fn b_read(&mut self, args: &[String]) -> FlowResult {
        let mut raw = false;
        let mut prompt = None;
        let mut array: Option<String> = None;
        let mut delim = b'\n';
        let mut nchars: Option<usize> = None;
        let mut exact = false;
        let mut fd = 0u32;
        let mut silent_timeout: Option<f64> = None;
        let mut names = Vec::new();
        let mut i = 0;
        while i < args.len() {
            let a = &args[i];
            if !a.starts_with('-') || a == "-" || !names.is_empty() {
                names.push(a.clone());
                i += 1;
                continue;
            }
            if a == "--" {
                names.extend(args[i + 1..].iter().cloned());
                break;
            }
            let mut chars = a[1..].chars();
            while let Some(c) = chars.next() {
                let mut value = || -> Option<String> {
                    let rest: String = chars.by_ref().collect();
                    if !rest.is_empty() {
                        Some(rest)
                    } else {
                        i += 1;
                        args.get(i).cloned()
                    }
                };
                match c {
                    'r' => raw = true,
                    's' | 'e' => {}
                    'p' => prompt = value(),
                    'a' => array = value(),
                    'd' => delim = value().and_then(|v| v.bytes().next()).unwrap_or(0),
                    'n' => nchars = value().and_then(|v| v.parse().ok()),
                    'N' => {
                        nchars = value().and_then(|v| v.parse().ok());
                        exact = true;
                    }
                    't' => silent_timeout = value().and_then(|v| v.parse().ok()),
                    'u' => fd = value().and_then(|v| v.parse().ok()).unwrap_or(0),
                    _ => {
                        self.err(&format!("read: -{c}: invalid option"));
                        return Ok(2);
                    }
                }
            }
            i += 1;
        }
        if let Some(p) = prompt {
            let _ = self.write_fd(2, p.as_bytes());
        }
        if silent_timeout == Some(0.0) {
            let ready = matches!(
                self.fds.get(fd),
                Some(Fd::In(InSrc::Bytes(_) | InSrc::File(_) | InSrc::Empty))
            );
            return Ok(if ready { 0 } else { 1 });
        }
        let deadline = silent_timeout.map(|t| Instant::now() + Duration::from_secs_f64(t.max(0.0)));
        let mut buf: Vec<u8> = Vec::new();
        // Bytes that came from a backslash escape: never field separators.
        let mut escaped: Vec<bool> = Vec::new();
        let mut got_delim = false;
        let mut count = 0usize;
        let max = self.st.limits.max_word_bytes;
        loop {
            if let Some(n) = nchars
                && count >= n
            {
                break;
            }
            let next = match deadline {
                Some(d) => match self.read_byte_by(fd, d)? {
                    Ok(b) => b,
                    Err(()) => return Ok(142),
                },
                None => self.read_byte(fd)?,
            };
            let Some(b) = next else {
                break;
            };
            if b == delim && !exact {
                got_delim = true;
                break;
            }
            if b == 0 {
                // bash strings cannot hold NUL: `read` drops it.
                continue;
            }
            if b == b'\\' && !raw {
                match self.read_byte(fd)? {
                    Some(b'\n') => continue,
                    Some(n) => {
                        buf.push(n);
                        escaped.push(true);
                        count += 1;
                        continue;
                    }
                    None => break,
                }
            }
            buf.push(b);
            escaped.push(false);
            count += 1;
            if buf.len() > max {
                return Err(self.limit(format!("read: line too long (limit: {max} bytes)")));
            }
        }
        let at_eof = !got_delim && nchars.is_none_or(|n| count < n);
        let text = String::from_utf8_lossy(&buf).into_owned();
        let ifs = self.get_var("IFS").unwrap_or_else(|| " \t\n".into());
        // End of input before the delimiter is status 1, even when some text was read.
        let status = i32::from(at_eof);
        if let Some(arr) = array {
            let fields = split_read(
                &text,
                &escaped_chars(&text, &buf, &escaped),
                &ifs,
                usize::MAX,
            );
            let items = fields.into_iter().map(|f| (None, f)).collect();
            if let Err(m) = self.assign_array_fresh(&arr, items) {
                self.err(&format!("read: {m}"));
                return Ok(1);
            }
            return Ok(status);
        }
        if names.is_empty() {
            // REPLY keeps the line as read, without IFS trimming.
            if let Err(m) = self.set_var("REPLY", text) {
                self.err(&format!("read: {m}"));
                return Ok(1);
            }
            return Ok(status);
        }
        let esc = escaped_chars(&text, &buf, &escaped);
        let fields = split_read(&text, &esc, &ifs, names.len());
        for (k, n) in names.iter().enumerate() {
            if !is_valid_name(n) {
                self.err(&format!("read: `{n}': not a valid identifier"));
                return Ok(1);
            }
            let v = fields.get(k).cloned().unwrap_or_default();
            if let Err(m) = self.set_var(n, v) {
                self.err(&format!("read: {m}"));
                return Ok(1);
            }
        }
        Ok(status)
    }

    fn assign_array_fresh(
        &mut self,
        name: &str,
        items: Vec<(Option<String>, String)>,
    ) -> Result<(), String> {
        if let Some(v) = self.st.vars.get(name)
            && v.has(ATTR_READONLY)
        {
            return Err(format!("{name}: readonly variable"));
        }
        let attrs = self.st.vars.get(name).map(|v| v.attrs).unwrap_or(0);
        self.st.vars.put(
            name,
            Var {
                value: Value::Indexed(BTreeMap::new()),
                attrs,
            },
        );
        let items = items.into_iter().map(|(k, v)| (k, false, v)).collect();
        self.assign_array(name, items, false)
    }

    fn b_mapfile(&mut self, name: &str, args: &[String]) -> FlowResult {
        let mut trim = false;
        let mut delim = b'\n';
        let mut max: Option<usize> = None;
        let mut skip = 0usize;
        let mut fd = 0u32;
        let mut origin: Option<i64> = None;
        let mut callback: Option<String> = None;
        let mut quantum = 5000usize;
        let mut target = "MAPFILE".to_string();
        let mut i = 0;
        while i < args.len() {
            let a = args[i].as_str();
            if !(a.starts_with('-') && a.len() > 1) {
                target = a.to_string();
                i += 1;
                continue;
            }
            let flags: Vec<char> = a[1..].chars().collect();
            for (j, c) in flags.iter().enumerate() {
                let takes_value = matches!(c, 'd' | 'n' | 's' | 'u' | 'O' | 'c' | 'C');
                let value = if takes_value {
                    let rest: String = flags[j + 1..].iter().collect();
                    if rest.is_empty() {
                        i += 1;
                        args.get(i).cloned().unwrap_or_default()
                    } else {
                        rest
                    }
                } else {
                    String::new()
                };
                let bad_count = |me: &mut Interp, v: &str| {
                    me.err(&format!("{name}: {v}: invalid line count"));
                };
                match c {
                    't' => trim = true,
                    'd' => delim = value.bytes().next().unwrap_or(0),
                    'n' => match value.parse::<usize>() {
                        Ok(n) => max = (n > 0).then_some(n),
                        Err(_) => {
                            bad_count(self, &value);
                            return Ok(1);
                        }
                    },
                    's' => match value.parse::<usize>() {
                        Ok(n) => skip = n,
                        Err(_) => {
                            bad_count(self, &value);
                            return Ok(1);
                        }
                    },
                    'u' => fd = value.parse().unwrap_or(0),
                    'O' => match value.parse::<i64>() {
                        Ok(n) if n >= 0 => origin = Some(n),
                        _ => {
                            self.err(&format!("{name}: {value}: invalid array origin"));
                            return Ok(1);
                        }
                    },
                    'c' => match value.parse::<usize>() {
                        Ok(n) if n > 0 => quantum = n,
                        _ => {
                            self.err(&format!("{name}: {value}: invalid callback quantum"));
                            return Ok(1);
                        }
                    },
                    'C' => callback = Some(value),
                    c => {
                        self.err(&format!("{name}: -{c}: invalid option"));
                        return Ok(2);
                    }
                }
                if takes_value {
                    break;
                }
            }
            i += 1;
        }
        if !is_valid_name(&target) {
            self.err(&format!("{name}: `{target}': not a valid identifier"));
            return Ok(1);
        }
        if origin.is_none() {
            if let Err(m) = self.assign_array_fresh(&target, Vec::new()) {
                self.err(&format!("{name}: {m}"));
                return Ok(1);
            }
        } else if !self.st.vars.get(&target).is_some_and(|v| v.is_array()) {
            let _ = self.assign_array(&target, Vec::new(), true);
        }
        let mut index = origin.unwrap_or(0);
        let mut line = Vec::new();
        let mut seen = 0usize;
        let mut stored = 0usize;
        let mut total = 0usize;
        let limit = self.st.limits.max_word_bytes;
        loop {
            if max.is_some_and(|m| stored >= m) {
                break;
            }
            let b = self.read_byte(fd)?;
            let end = match b {
                None => true,
                Some(c) => {
                    line.push(c);
                    total += 1;
                    if total > limit {
                        return Err(
                            self.limit(format!("{name}: input too large (limit: {limit} bytes)"))
                        );
                    }
                    c == delim
                }
            };
            if end && !line.is_empty() {
                // A NUL delimiter cannot be kept: bash strings end there.
                if (trim || delim == 0) && line.last() == Some(&delim) {
                    line.pop();
                }
                if seen >= skip {
                    let text = String::from_utf8_lossy(&line).into_owned();
                    if let Some(cb) = &callback
                        && (stored + 1).is_multiple_of(quantum)
                    {
                        let cmd = format!("{cb} {index} {}", crate::printf::quote_single(&text));
                        self.eval_string(&cmd)?;
                    }
                    let r = self.assign(
                        &target,
                        Some(crate::interp::AssignKey::Index(index)),
                        text,
                        false,
                    );
                    if let Err(m) = r {
                        self.err(&format!("{name}: {m}"));
                        return Ok(1);
                    }
                    index += 1;
                    stored += 1;
                }
                seen += 1;
                line.clear();
            }
            if b.is_none() {
                break;
            }
        }
        Ok(0)
    }

    // ---- traps, jobs, getopts ----

    fn b_trap(&mut self, args: &[String]) -> i32 {
        let mut args: &[String] = args;
        let mut print = false;
        while let Some(first) = args.first() {
            match first.as_str() {
                "-p" => print = true,
                "-l" => {
                    let mut text = String::new();
                    for (i, (n, name)) in signals().iter().enumerate() {
                        text.push_str(&format!("{n:2}) SIG{name}"));
                        text.push(if (i + 1).is_multiple_of(5) {
                            '\n'
                        } else {
                            '\t'
                        });
                    }
                    if !text.ends_with('\n') {
                        text.push('\n');
                    }
                    return self.out_str(&text);
                }
                "--" => {
                    args = &args[1..];
                    break;
                }
                o if o.starts_with('-') && o.len() > 1 && o != "-" => {
                    self.err(&format!("trap: {o}: invalid option"));
                    self.err_raw("trap: usage: trap [-lp] [[arg] signal_spec ...]\n");
                    return 2;
                }
                _ => break,
            }
            args = &args[1..];
        }
        if print || args.is_empty() {
            let traps = self
                .inherited_traps
                .clone()
                .unwrap_or_else(|| self.st.traps.clone());
            let mut status = 0;
            let wanted: Vec<String> = if args.is_empty() {
                let mut all: Vec<String> = traps.keys().cloned().collect();
                all.sort_by_key(|k| signal_order(k));
                all
            } else {
                let mut v = Vec::new();
                for a in args {
                    match signal_name(a) {
                        Some(n) => v.push(n),
                        None => {
                            self.err(&format!("trap: {a}: invalid signal specification"));
                            status = 1;
                        }
                    }
                }
                v
            };
            let mut text = String::new();
            for sig in wanted {
                if let Some(action) = traps.get(&sig) {
                    text.push_str(&format!(
                        "trap -- {} {sig}\n",
                        crate::printf::quote_single(action)
                    ));
                }
            }
            let s = self.out_str(&text);
            return if s != 0 { s } else { status };
        }
        // `trap N` alone (a signal number) resets it, as `trap - N` would.
        let (action, sigs) = if args.len() == 1 || args[0] == "-" {
            (None, if args[0] == "-" { &args[1..] } else { args })
        } else if args[0].parse::<u32>().is_ok() && signal_name(&args[0]).is_some() {
            (None, args)
        } else {
            (Some(args[0].clone()), &args[1..])
        };
        self.inherited_traps = None;
        let mut status = 0;
        for s in sigs {
            let Some(sig) = signal_name(s) else {
                self.err(&format!("trap: {s}: invalid signal specification"));
                status = 1;
                continue;
            };
            match &action {
                Some(a) => {
                    self.st.traps.insert(sig, a.clone());
                }
                None => {
                    self.st.traps.remove(&sig);
                }
            }
        }
        status
    }

    /// `kill`: signals can only reach the shell itself (`kill -USR1 $$` runs its trap, or
    /// ends it as the signal's default action would); other processes are threads here.
    fn b_kill(&mut self, args: &[String]) -> FlowResult {
        let usage = |me: &mut Interp| {
            me.err_raw("kill: usage: kill [-s sigspec | -n signum | -sigspec] pid | jobspec ... or kill -l [sigspec]\n");
            Ok(2)
        };
        if args.is_empty() {
            return usage(self);
        }
        let mut sig = "SIGTERM".to_string();
        let mut i = 0;
        if args[0] == "-l" || args[0] == "-L" {
            if args.len() == 1 {
                return Ok(self.b_trap(&["-l".to_string()]));
            }
            let mut text = String::new();
            let mut status = 0;
            for a in &args[1..] {
                let table = signals();
                if a == "0" {
                    // Signal 0 is the EXIT trap's number.
                    text.push_str("EXIT\n");
                } else if let Ok(n) = a.parse::<u32>() {
                    let n = if n > 128 { n - 128 } else { n };
                    match table.iter().find(|(k, _)| *k == n) {
                        Some((_, name)) => text.push_str(&format!("{name}\n")),
                        None => {
                            self.err(&format!("kill: {a}: invalid signal specification"));
                            status = 1;
                        }
                    }
                } else {
                    match signal_name(a).and_then(|n| {
                        let bare = n.strip_prefix("SIG").unwrap_or(&n).to_string();
                        table.iter().find(|(_, s)| *s == bare).map(|(k, _)| *k)
                    }) {
                        Some(k) => text.push_str(&format!("{k}\n")),
                        None => {
                            self.err(&format!("kill: {a}: invalid signal specification"));
                            status = 1;
                        }
                    }
                }
            }
            let s = self.out_str(&text);
            return Ok(if s != 0 { s } else { status });
        }
        if args[0] == "-s" || args[0] == "-n" {
            let Some(spec) = args.get(1) else {
                return usage(self);
            };
            match signal_name(spec) {
                Some(n) => sig = n,
                None => {
                    self.err(&format!("kill: {spec}: invalid signal specification"));
                    return Ok(1);
                }
            }
            i = 2;
        } else if let Some(spec) = args[0].strip_prefix('-')
            && !spec.is_empty()
            && spec != "-"
        {
            if spec == "0" {
                sig = "0".into();
            } else {
                match signal_name(spec) {
                    Some(n) => sig = n,
                    None => {
                        self.err(&format!("kill: {spec}: invalid signal specification"));
                        return Ok(1);
                    }
                }
            }
            i = 1;
        } else if args[0] == "--" {
            i = 1;
        }
        let pids = &args[i..];
        if pids.is_empty() {
            return usage(self);
        }
        let mut status = 0;
        for p in pids {
            let own = p.parse::<u32>().ok() == Some(self.rt.shell_pid);
            if !own {
                let bare = sig.strip_prefix("SIG").unwrap_or(&sig);
                let num = match bare {
                    "0" | "EXIT" => 0,
                    _ => signals()
                        .iter()
                        .find(|(_, s)| *s == bare)
                        .map_or(15, |(k, _)| *k),
                };
                if let Some(s) = self.kill_job(p, num) {
                    if s != 0 {
                        status = s;
                    }
                    continue;
                }
                match p.parse::<i64>() {
                    Ok(_) => self.err(&format!("kill: ({p}) - No such process")),
                    Err(_) => self.err(&format!("kill: {p}: arguments must be process or job IDs")),
                }
                status = 1;
                continue;
            }
            if sig == "0" || sig == "EXIT" {
                continue;
            }
            match self.st.traps.get(&sig).cloned() {
                Some(action) if action.is_empty() => {}
                Some(action) => self.run_trap_action(&action)?,
                None => {
                    let bare = sig.strip_prefix("SIG").unwrap_or(&sig).to_string();
                    // Default actions: these are ignored, the rest end the shell.
                    if matches!(bare.as_str(), "CHLD" | "URG" | "WINCH" | "CONT") {
                        continue;
                    }
                    let n = signals()
                        .iter()
                        .find(|(_, s)| *s == bare)
                        .map(|(k, _)| *k)
                        .unwrap_or(15);
                    return Err(Flow::Exit(128 + n as i32));
                }
            }
        }
        Ok(status)
    }

    fn b_getopts(&mut self, args: &[String]) -> i32 {
        if args.len() < 2 {
            self.err("getopts: usage: getopts optstring name [arg ...]");
            return 2;
        }
        let var = args[1].clone();
        // bash parses the option (moving OPTIND, setting OPTARG) before it finds the name
        // is bad; nothing is assigned to it and the status is 1.
        let status = self.getopts_step(args, &var);
        if !is_valid_name(&var) {
            self.st.vars.remove(&var);
            self.err(&format!("getopts: `{var}': not a valid identifier"));
            return 1;
        }
        status
    }

    fn getopts_step(&mut self, args: &[String], var: &str) -> i32 {
        let var = if is_valid_name(var) { var } else { "" };
        let spec = args[0].clone();
        let params: Vec<String> = if args.len() > 2 {
            args[2..].to_vec()
        } else {
            self.st.positional.clone()
        };
        let silent = spec.starts_with(':');
        let spec = spec.trim_start_matches(':').to_string();
        let optind: usize = self
            .get_var("OPTIND")
            .and_then(|v| v.parse().ok())
            .unwrap_or(1)
            .max(1);
        if optind != self.getopts_optind {
            self.getopts_char = 0;
        }
        let set = |me: &mut Interp, name: &str, v: String| {
            if !name.is_empty() {
                let _ = me.set_var(name, v);
            }
        };
        let Some(arg) = params.get(optind - 1).cloned() else {
            // Past the last argument OPTIND points just after it, whatever it was.
            set(self, "OPTIND", (params.len() + 1).to_string());
            self.getopts_optind = params.len() + 1;
            self.st.vars.remove("OPTARG");
            set(self, var, "?".into());
            self.getopts_char = 0;
            return 1;
        };
        if self.getopts_char == 0 {
            if arg == "--" {
                set(self, "OPTIND", (optind + 1).to_string());
                self.getopts_optind = optind + 1;
                self.st.vars.remove("OPTARG");
                set(self, var, "?".into());
                return 1;
            }
            if !arg.starts_with('-') || arg == "-" {
                self.st.vars.remove("OPTARG");
                set(self, var, "?".into());
                return 1;
            }
            self.getopts_char = 1;
        }
        let chars: Vec<char> = arg.chars().collect();
        let c = chars[self.getopts_char];
        self.getopts_char += 1;
        let mut next_optind = optind;
        let at_end = self.getopts_char >= chars.len();
        if at_end {
            next_optind += 1;
            self.getopts_char = 0;
        }
        let pos = spec.find(c).filter(|_| c != ':');
        match pos {
            None => {
                if silent {
                    set(self, "OPTARG", c.to_string());
                } else {
                    self.err_raw(&format!("bash: illegal option -- {c}\n"));
                    self.st.vars.remove("OPTARG");
                }
                set(self, var, "?".into());
            }
            Some(p) => {
                let takes_arg = spec[p + c.len_utf8()..].starts_with(':');
                if takes_arg {
                    if !at_end {
                        let rest: String = chars[self.getopts_char..].iter().collect();
                        set(self, "OPTARG", rest);
                        next_optind += 1;
                        self.getopts_char = 0;
                    } else if let Some(v) = params.get(next_optind - 1).cloned() {
                        set(self, "OPTARG", v);
                        next_optind += 1;
                    } else if silent {
                        set(self, "OPTARG", c.to_string());
                        set(self, var, ":".into());
                        set(self, "OPTIND", next_optind.to_string());
                        self.getopts_optind = next_optind;
                        return 0;
                    } else {
                        self.err_raw(&format!("bash: option requires an argument -- {c}\n"));
                        self.st.vars.remove("OPTARG");
                        set(self, var, "?".into());
                        set(self, "OPTIND", next_optind.to_string());
                        self.getopts_optind = next_optind;
                        return 0;
                    }
                } else {
                    self.st.vars.remove("OPTARG");
                }
                set(self, var, c.to_string());
            }
        }
        set(self, "OPTIND", next_optind.to_string());
        self.getopts_optind = next_optind;
        0
    }

    // ---- type / command / which ----

    fn describe(&self, name: &str) -> Option<(&'static str, String)> {
        if self.st.opts.expand_aliases
            && let Some(a) = self.st.aliases.get(name)
        {
            return Some(("alias", a.clone()));
        }
        if KEYWORDS.contains(&name) {
            return Some(("keyword", String::new()));
        }
        if self.st.functions.contains_key(name) {
            return Some(("function", String::new()));
        }
        if is_builtin(name) {
            return Some(("builtin", String::new()));
        }
        let path = if name.contains('/') {
            let p = wasmsand_vfs::path::join(&self.st.cwd, name);
            self.rt
                .vfs
                .lock()
                .stat(&p)
                .ok()
                .filter(|m| m.mode & 0o111 != 0 && m.file_type == wasmsand_vfs::FileType::File)
                .map(|_| name.to_string())
        } else {
            self.find_in_path(name)
        };
        path.map(|p| ("file", p))
    }

    /// Every meaning of `name` in lookup order (`type -a`): alias, keyword, function,
    /// builtin, then each executable file along `$PATH`.
    fn describe_all(&self, name: &str, skip_funcs: bool) -> Vec<(&'static str, String)> {
        let mut v = Vec::new();
        if self.st.opts.expand_aliases
            && let Some(a) = self.st.aliases.get(name)
        {
            v.push(("alias", a.clone()));
        }
        if KEYWORDS.contains(&name) {
            v.push(("keyword", String::new()));
        }
        if !skip_funcs && self.st.functions.contains_key(name) {
            v.push(("function", String::new()));
        }
        if is_builtin(name) {
            v.push(("builtin", String::new()));
        }
        v.extend(self.path_files(name).into_iter().map(|p| ("file", p)));
        v
    }

    /// The executable files `name` finds: itself when it has a slash, else along `$PATH`.
    fn path_files(&self, name: &str) -> Vec<String> {
        let vfs = self.rt.vfs.lock();
        let ok = |p: &str| {
            vfs.stat(p)
                .is_ok_and(|m| m.mode & 0o111 != 0 && m.file_type == wasmsand_vfs::FileType::File)
        };
        if name.contains('/') {
            let p = wasmsand_vfs::path::join(&self.st.cwd, name);
            return if ok(&p) {
                vec![name.to_string()]
            } else {
                Vec::new()
            };
        }
        if name.is_empty() {
            return Vec::new();
        }
        let path = self
            .get_var("PATH")
            .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
        let mut out: Vec<String> = Vec::new();
        for dir in path.split(':') {
            let shown = if dir.is_empty() {
                name.to_string()
            } else {
                format!("{}/{name}", dir.trim_end_matches('/'))
            };
            let full = wasmsand_vfs::path::join(&self.st.cwd, &shown);
            if ok(&full) && !out.contains(&shown) {
                out.push(shown);
            }
        }
        out
    }

    fn b_type(&mut self, args: &[String]) -> i32 {
        let mut terse = false;
        let mut path_only = false;
        let mut force_path = false;
        let mut all = false;
        let mut skip_funcs = false;
        let mut names = Vec::new();
        let mut options_done = false;
        for a in args {
            if !options_done && a.starts_with('-') && a.len() > 1 {
                if a == "--" {
                    options_done = true;
                    continue;
                }
                for c in a[1..].chars() {
                    match c {
                        't' => terse = true,
                        'p' => path_only = true,
                        'P' => force_path = true,
                        'a' => all = true,
                        'f' => skip_funcs = true,
                        _ => {
                            self.err(&format!("type: -{c}: invalid option"));
                            self.err_raw("type: usage: type [-afptP] name [name ...]\n");
                            return 2;
                        }
                    }
                }
                continue;
            }
            options_done = true;
            names.push(a.clone());
        }
        let mut status = 0;
        for n in names {
            let mut text = String::new();
            let found = if force_path {
                let files = self.path_files(&n);
                let files = if all {
                    files
                } else {
                    files.into_iter().take(1).collect()
                };
                for f in &files {
                    text.push_str(&format!("{f}\n"));
                }
                !files.is_empty()
            } else {
                let mut meanings = self.describe_all(&n, skip_funcs);
                if !all {
                    meanings.truncate(1);
                }
                for (kind, extra) in &meanings {
                    if path_only {
                        if *kind == "file" {
                            text.push_str(&format!("{extra}\n"));
                        }
                    } else if terse {
                        text.push_str(&format!("{kind}\n"));
                    } else {
                        text.push_str(&match *kind {
                            "alias" => format!("{n} is aliased to `{extra}'\n"),
                            "keyword" => format!("{n} is a shell keyword\n"),
                            "function" => {
                                let body = self
                                    .st
                                    .functions
                                    .get(&n)
                                    .map(|f| crate::printer::function_text(f))
                                    .unwrap_or_default();
                                format!("{n} is a function\n{body}\n")
                            }
                            "builtin" => format!("{n} is a shell builtin\n"),
                            _ => format!("{n} is {extra}\n"),
                        });
                    }
                }
                !meanings.is_empty()
            };
            if !found {
                if !terse && !path_only && !force_path {
                    self.err(&format!("type: {n}: not found"));
                }
                status = 1;
            }
            let s = self.out_str(&text);
            if s != 0 {
                return s;
            }
        }
        status
    }

    fn b_command(&mut self, args: &[String]) -> FlowResult {
        let mut verbose = None;
        let mut i = 0;
        while i < args.len() && args[i].starts_with('-') && args[i].len() > 1 {
            match args[i].as_str() {
                "-v" => verbose = Some(false),
                "-V" => verbose = Some(true),
                "-p" => {}
                "--" => {
                    i += 1;
                    break;
                }
                o => {
                    self.err(&format!("command: {o}: invalid option"));
                    return Ok(2);
                }
            }
            i += 1;
        }
        let rest = &args[i..];
        let Some(name) = rest.first() else {
            return Ok(0);
        };
        if let Some(long) = verbose {
            let mut status = 0;
            let mut found = false;
            for n in rest {
                let text = match self.describe(n) {
                    Some(_) if long => {
                        if self.b_type(std::slice::from_ref(n)) != 0 {
                            status = 1;
                        } else {
                            found = true;
                        }
                        continue;
                    }
                    Some(("file", p)) => format!("{p}\n"),
                    Some(("alias", v)) => {
                        format!("alias {n}={}\n", crate::printf::quote_single(&v))
                    }
                    Some(_) => format!("{n}\n"),
                    None => {
                        if long {
                            self.err(&format!("command: {n}: not found"));
                        }
                        continue;
                    }
                };
                found = true;
                let s = self.out_str(&text);
                if s != 0 {
                    return Ok(s);
                }
            }
            // Found at least one name: bash's status is then 0.
            return Ok(if found { 0 } else { status.max(1) });
        }
        if is_builtin(name) {
            return self.run_builtin(&name.clone(), rest);
        }
        let env = self.st.vars.environ();
        self.run_external(rest.to_vec(), env)
    }

    // ---- aliases ----

    fn b_alias(&mut self, args: &[String]) -> i32 {
        let args = args.strip_prefix(&["--".to_string()]).unwrap_or(args);
        let args: Vec<&String> = args.iter().filter(|a| *a != "-p").collect();
        if args.is_empty() {
            let mut text = String::new();
            for (k, v) in self.st.aliases.iter() {
                text.push_str(&format!("alias {k}={}\n", crate::printf::quote_single(v)));
            }
            return self.out_str(&text);
        }
        let mut status = 0;
        let mut text = String::new();
        for a in args {
            match a.split_once('=') {
                Some((k, v)) => {
                    self.st.aliases.insert(k.to_string(), v.to_string());
                }
                None => match self.st.aliases.get(a.as_str()) {
                    Some(v) => {
                        text.push_str(&format!("alias {a}={}\n", crate::printf::quote_single(v)))
                    }
                    None => {
                        self.err(&format!("alias: {a}: not found"));
                        status = 1;
                    }
                },
            }
        }
        let s = self.out_str(&text);
        if s != 0 { s } else { status }
    }

    fn b_unalias(&mut self, args: &[String]) -> i32 {
        let args = args.strip_prefix(&["--".to_string()]).unwrap_or(args);
        if args.is_empty() {
            self.err("unalias: usage: unalias [-a] name [name ...]");
            return 2;
        }
        let mut status = 0;
        for a in args {
            if a == "-a" {
                self.st.aliases.clear();
            } else if self.st.aliases.remove(a.as_str()).is_none() {
                self.err(&format!("unalias: {a}: not found"));
                status = 1;
            }
        }
        status
    }

    // ---- source / exec / bash / sleep ----

    fn b_source(&mut self, name: &str, args: &[String]) -> FlowResult {
        let Some(file) = args.first() else {
            self.err(&format!("{name}: filename argument required"));
            return Ok(2);
        };
        let path = if file.contains('/') {
            wasmsand_vfs::path::join(&self.st.cwd, file)
        } else {
            // `source` looks along PATH for a readable file; no exec bit is needed.
            let path_var = self.get_var("PATH").unwrap_or_default();
            let vfs = self.rt.vfs.lock();
            path_var
                .split(':')
                .map(|d| {
                    let d = if d.is_empty() { "." } else { d };
                    wasmsand_vfs::path::join(&self.st.cwd, &format!("{d}/{file}"))
                })
                .find(|p| {
                    vfs.stat(p)
                        .is_ok_and(|m| m.file_type == wasmsand_vfs::FileType::File)
                })
                .unwrap_or_else(|| wasmsand_vfs::path::join(&self.st.cwd, file))
        };
        let data = self.rt.vfs.lock().read(&path);
        let data = match data {
            Ok(d) => d,
            Err(e) => {
                self.err(&format!("{file}: {}", strerror(e.errno)));
                return Ok(1);
            }
        };
        let text = String::from_utf8_lossy(&data).into_owned();
        let script = match crate::parse(&text) {
            Ok(s) => s,
            Err(e) => {
                self.err_raw(&format!("{}\n", e.render()));
                return Ok(2);
            }
        };
        self.enter()?;
        let saved_pos = if args.len() > 1 {
            Some(std::mem::replace(
                &mut self.st.positional,
                args[1..].to_vec(),
            ))
        } else {
            None
        };
        self.sourcing += 1;
        let offset = std::mem::replace(&mut self.line_offset, 0);
        let mut r = self.run_script(&script);
        self.line_offset = offset;
        self.sourcing -= 1;
        if matches!(r, Ok(_) | Err(Flow::Return(_)))
            && let Err(e) = self.source_return_trap()
        {
            r = Err(e);
        }
        if let Some(p) = saved_pos {
            self.st.positional = p;
        }
        self.depth -= 1;
        match r {
            Err(Flow::Return(s)) => Ok(s),
            other => other,
        }
    }

    fn b_exec(&mut self, args: &[String]) -> FlowResult {
        let mut args = args;
        let mut argv0 = None;
        let mut clear_env = false;
        while let Some(a) = args.first() {
            if a == "--" {
                args = &args[1..];
                break;
            }
            let Some(flags) = a.strip_prefix('-').filter(|f| !f.is_empty()) else {
                break;
            };
            args = &args[1..];
            for c in flags.chars() {
                match c {
                    'c' => clear_env = true,
                    // A login shell's `-` in argv[0]: nothing here reads it.
                    'l' => {}
                    'a' => match args.first() {
                        Some(n) => {
                            argv0 = Some(n.clone());
                            args = &args[1..];
                        }
                        None => {
                            self.err("exec: -a: option requires an argument");
                            return Ok(2);
                        }
                    },
                    _ => {
                        self.err(&format!("exec: -{c}: invalid option"));
                        self.err_raw(
                            "exec: usage: exec [-cl] [-a name] [command [argument ...]] [redirection ...]\n",
                        );
                        return Ok(2);
                    }
                }
            }
        }
        let mut owned: Vec<String>;
        if let Some(name) = argv0
            && matches!(args.first().map(String::as_str), Some("sh" | "bash"))
            && args.iter().any(|a| a == "-c")
        {
            // `exec -a NAME sh -c SCRIPT`: NAME is the script's `$0` unless one is given.
            owned = args.to_vec();
            let script_at = owned.iter().position(|a| a == "-c").unwrap_or(0) + 1;
            if owned.len() == script_at + 1 {
                owned.push(name);
            }
            args = &owned;
        }
        if clear_env {
            owned = args.to_vec();
            let status = self.run_external(owned, Vec::new())?;
            return Err(Flow::Exit(status));
        }
        if args.is_empty() {
            // `exec >file`: the redirections stay for the rest of the shell.
            self.keep_redirs = true;
            return Ok(0);
        }
        let status = if is_builtin(&args[0]) {
            self.run_builtin(&args[0].clone(), args)?
        } else if let Some(f) = self.st.functions.get(&args[0]).cloned() {
            self.call_function(&f, args.to_vec())?
        } else {
            let env = self.st.vars.environ();
            self.run_external(args.to_vec(), env)?
        };
        Err(Flow::Exit(status))
    }

    fn b_sleep(&mut self, args: &[String]) -> FlowResult {
        if args.is_empty() {
            self.err("sleep: missing operand");
            return Ok(1);
        }
        let mut total = 0f64;
        for a in args {
            let (num, mult) = match a.chars().last() {
                Some('s') => (&a[..a.len() - 1], 1.0),
                Some('m') => (&a[..a.len() - 1], 60.0),
                Some('h') => (&a[..a.len() - 1], 3600.0),
                Some('d') => (&a[..a.len() - 1], 86400.0),
                _ => (a.as_str(), 1.0),
            };
            match num.parse::<f64>() {
                Ok(v) if v >= 0.0 && v.is_finite() => total += v * mult,
                _ => {
                    self.err_raw(&format!("sleep: invalid time interval '{a}'\n"));
                    return Ok(1);
                }
            }
        }
        let end = Instant::now() + Duration::from_secs_f64(total.min(1e9));
        loop {
            self.check()?;
            let now = Instant::now();
            if now >= end {
                return Ok(0);
            }
            let step = (end - now).min(Duration::from_millis(5));
            std::thread::sleep(step);
        }
    }

    fn b_bash(&mut self, args: &[String]) -> FlowResult {
        let mut i = 0;
        let mut command: Option<String> = None;
        let mut opts: Vec<(String, bool)> = Vec::new();
        while i < args.len() {
            let a = &args[i];
            if a == "-c" {
                i += 1;
                command = Some(args.get(i).cloned().unwrap_or_default());
                if args.get(i).is_none() {
                    self.err_raw("bash: -c: option requires an argument\n");
                    return Ok(2);
                }
                i += 1;
                break;
            }
            if a == "--" {
                i += 1;
                break;
            }
            if (a.starts_with('-') || a.starts_with('+')) && a.len() > 1 {
                let on = a.starts_with('-');
                for c in a[1..].chars() {
                    match c {
                        'e' => opts.push(("errexit".into(), on)),
                        'u' => opts.push(("nounset".into(), on)),
                        'x' => opts.push(("xtrace".into(), on)),
                        'c' => {}
                        _ => {}
                    }
                }
                if a.contains('c') && a.starts_with('-') {
                    i += 1;
                    command = args.get(i).cloned();
                    i += 1;
                    break;
                }
                i += 1;
                continue;
            }
            break;
        }
        let env = self.st.vars.environ();
        if let Some(cmd) = command {
            let arg0 = args.get(i).cloned().unwrap_or_else(|| "bash".into());
            let rest = args.get(i + 1..).map(|s| s.to_vec()).unwrap_or_default();
            return self.run_shell_script(&cmd, arg0, rest, env, true, &opts);
        }
        let (text, arg0, rest) = match args.get(i) {
            Some(file) => {
                let path = wasmsand_vfs::path::join(&self.st.cwd, file);
                let data = self.rt.vfs.lock().read(&path);
                match data {
                    Ok(d) => (
                        String::from_utf8_lossy(&d).into_owned(),
                        file.clone(),
                        args[i + 1..].to_vec(),
                    ),
                    Err(e) => {
                        self.err_raw(&format!("bash: {file}: {}\n", strerror(e.errno)));
                        return Ok(127);
                    }
                }
            }
            None => {
                let mut data = Vec::new();
                while let Some(b) = self.read_byte(0)? {
                    data.push(b);
                    if data.len() > self.st.limits.max_word_bytes {
                        return Err(self.limit("bash: script on stdin too large".into()));
                    }
                }
                (
                    String::from_utf8_lossy(&data).into_owned(),
                    "bash".into(),
                    Vec::new(),
                )
            }
        };
        self.run_shell_script(&text, arg0, rest, env, false, &opts)
    }

    // ---- env ----

    /// `env`: the guest's could not start a program, so the shell runs the command itself
    /// with the modified environment.
    fn b_env(&mut self, args: &[String]) -> FlowResult {
        let mut env = self.st.vars.environ();
        let mut i = 0;
        while i < args.len() {
            let a = args[i].as_str();
            if a == "-i" || a == "-" || a == "--ignore-environment" {
                env.clear();
            } else if a == "-u" || a == "--unset" {
                i += 1;
                if let Some(n) = args.get(i) {
                    env.retain(|(k, _)| k != n);
                }
            } else if let Some(n) = a.strip_prefix("-u") {
                env.retain(|(k, _)| k != n);
            } else if a == "--" {
                i += 1;
                break;
            } else if a.starts_with('-') && a.len() > 1 {
                self.err_raw(&format!("env: invalid option -- '{}'\n", &a[1..]));
                return Ok(125);
            } else if let Some((k, v)) = a.split_once('=') {
                env.retain(|(name, _)| name != k);
                env.push((k.to_string(), v.to_string()));
            } else {
                break;
            }
            i += 1;
        }
        let cmd = &args[i.min(args.len())..];
        if cmd.is_empty() {
            let text: String = env.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
            return Ok(self.out_str(&text));
        }
        let name = cmd[0].clone();
        if is_builtin(&name) || self.st.functions.contains_key(&name) {
            // A subshell whose exported variables are exactly `env`.
            let mut child = self.fork();
            for (k, _) in child.st.vars.environ() {
                child.st.vars.remove(&k);
            }
            for (k, v) in &env {
                child.st.vars.put(
                    k,
                    Var {
                        value: Value::Str(v.clone()),
                        attrs: ATTR_EXPORT,
                    },
                );
            }
            let cmd = cmd.to_vec();
            let s = child.run_as_subshell(|c| c.run_argv(cmd));
            drop(child);
            self.check()?;
            return Ok(s);
        }
        self.run_external(cmd.to_vec(), env)
    }

    // ---- xargs ----

    fn b_xargs(&mut self, args: &[String]) -> FlowResult {
        let mut max_args: Option<usize> = None;
        let mut max_lines: Option<usize> = None;
        let mut replace: Option<String> = None;
        let mut delim: Option<u8> = None;
        let mut no_run_empty = false;
        let mut trace = false;
        let mut i = 0;
        while i < args.len() && args[i].starts_with('-') && args[i].len() > 1 {
            let a = args[i].as_str();
            let mut val = |short: &str| -> Option<String> {
                if a.len() > short.len() {
                    Some(a[short.len()..].to_string())
                } else {
                    i += 1;
                    args.get(i).cloned()
                }
            };
            match a {
                "-0" | "--null" => delim = Some(0),
                "-r" | "--no-run-if-empty" => no_run_empty = true,
                "-t" | "--verbose" => trace = true,
                "--" => {
                    i += 1;
                    break;
                }
                s if s.starts_with("-n") => max_args = val("-n").and_then(|v| v.parse().ok()),
                s if s.starts_with("-L") => max_lines = val("-L").and_then(|v| v.parse().ok()),
                s if s.starts_with("-I") => replace = val("-I"),
                s if s.starts_with("-d") => {
                    delim = val("-d").map(|v| unescape_delim(&v));
                }
                s if s.starts_with("-P") => {
                    val("-P");
                }
                s if s.starts_with("-s") => {
                    val("-s");
                }
                s => {
                    self.err_raw(&format!("xargs: invalid option -- '{}'\n", &s[1..]));
                    return Ok(1);
                }
            }
            i += 1;
        }
        let mut cmd: Vec<String> = args[i..].to_vec();
        if cmd.is_empty() {
            cmd.push("echo".into());
        }
        let mut input = Vec::new();
        while let Some(b) = self.read_byte(0)? {
            input.push(b);
            if input.len() > self.st.limits.max_word_bytes {
                return Err(self.limit("xargs: input too large".into()));
            }
        }
        let text = String::from_utf8_lossy(&input).into_owned();
        // Items, each tagged with the input line it ended (for -L).
        let items: Vec<String> = match (delim, &replace) {
            (Some(d), _) => text
                .split(d as char)
                .map(str::to_string)
                .filter(|s| !s.is_empty())
                .collect(),
            (None, Some(_)) => text
                .lines()
                .map(|l| l.trim_start().to_string())
                .filter(|l| !l.is_empty())
                .collect(),
            (None, None) => split_xargs(&text),
        };
        if items.is_empty() && (no_run_empty || replace.is_some()) {
            return Ok(0);
        }
        let batches: Vec<Vec<String>> = if let Some(r) = &replace {
            items
                .iter()
                .map(|it| cmd.iter().map(|c| c.replace(r.as_str(), it)).collect())
                .collect()
        } else {
            let per = max_args.or(max_lines).unwrap_or(usize::MAX).max(1);
            let chunks: Vec<Vec<String>> = if items.is_empty() {
                vec![Vec::new()]
            } else {
                items.chunks(per).map(|c| c.to_vec()).collect()
            };
            chunks
                .into_iter()
                .map(|c| {
                    let mut v = cmd.clone();
                    v.extend(c);
                    v
                })
                .collect()
        };
        let mut status = 0;
        let saved_stdin = self.fds.get(0).cloned();
        self.fds.set(0, Some(Fd::In(InSrc::Empty)));
        for argv in batches {
            self.check()?;
            if trace {
                let line = format!("{}\n", argv.join(" "));
                self.err_raw(&line);
            }
            let s = self.run_argv(argv)?;
            if s == 255 {
                status = 124;
                break;
            }
            if s != 0 {
                status = 123;
            }
        }
        self.fds.set(0, saved_stdin);
        Ok(status)
    }

    /// Runs a command given as words (function, builtin or program), as `xargs` does.
    pub(crate) fn run_argv(&mut self, argv: Vec<String>) -> FlowResult {
        let name = argv[0].clone();
        if let Some(f) = self.st.functions.get(&name).cloned() {
            return self.call_function(&f, argv);
        }
        if is_builtin(&name) {
            return self.run_builtin(&name, &argv);
        }
        let env = self.st.vars.environ();
        self.run_external(argv, env)
    }

    // ---- chmod ----

    /// Modes are the shell's to change: the guest `chmod` has no WASI call for it.
    fn b_chmod(&mut self, args: &[String]) -> i32 {
        let mut recursive = false;
        let mut verbose = false;
        let mut rest = Vec::new();
        for a in args {
            match a.as_str() {
                "-R" | "--recursive" => recursive = true,
                "-v" | "-c" => verbose = true,
                "-f" | "--" => {}
                _ => rest.push(a.clone()),
            }
        }
        if rest.len() < 2 {
            self.err_raw("chmod: missing operand\n");
            return 1;
        }
        let spec = rest.remove(0);
        let mut status = 0;
        let mut paths: Vec<(String, String)> = rest
            .iter()
            .map(|p| (p.clone(), wasmsand_vfs::path::join(&self.st.cwd, p)))
            .collect();
        if recursive {
            let mut all = Vec::new();
            let vfs = self.rt.vfs.lock();
            for (shown, abs) in &paths {
                walk(&vfs, shown, abs, &mut all, 0);
            }
            paths = all;
        }
        for (shown, abs) in paths {
            let cur = self.rt.vfs.lock().stat(&abs);
            let meta = match cur {
                Ok(m) => m,
                Err(e) => {
                    self.err_raw(&format!(
                        "chmod: cannot access '{shown}': {}\n",
                        strerror(e.errno)
                    ));
                    status = 1;
                    continue;
                }
            };
            let is_dir = meta.file_type == wasmsand_vfs::FileType::Dir;
            let Some(mode) = parse_mode(&spec, meta.mode, is_dir, self.st.umask) else {
                self.err_raw(&format!("chmod: invalid mode: '{spec}'\n"));
                return 1;
            };
            let r = self.rt.vfs.lock().chmod(&abs, mode);
            if let Err(e) = r {
                self.err_raw(&format!(
                    "chmod: changing permissions of '{shown}': {}\n",
                    strerror(e.errno)
                ));
                status = 1;
            } else if verbose {
                let line = format!("mode of '{shown}' changed to {mode:04o}\n");
                let _ = self.out(line.as_bytes());
            }
        }
        status
    }
}

fn walk(
    vfs: &wasmsand_vfs::Vfs,
    shown: &str,
    abs: &str,
    out: &mut Vec<(String, String)>,
    depth: usize,
) {
    out.push((shown.to_string(), abs.to_string()));
    if depth > 256 {
        return;
    }
    if let Ok(m) = vfs.lstat(abs)
        && m.file_type == wasmsand_vfs::FileType::Dir
        && let Ok(entries) = vfs.readdir(abs)
    {
        for e in entries {
            walk(
                vfs,
                &format!("{shown}/{}", e.name),
                &format!("{abs}/{}", e.name),
                out,
                depth + 1,
            );
        }
    }
}

/// Octal or symbolic (`u+x,go-w`, `a=r`, `+X`) mode.
fn parse_mode(spec: &str, current: u32, is_dir: bool, umask: u32) -> Option<u32> {
    if spec.chars().all(|c| c.is_digit(8)) && !spec.is_empty() {
        return u32::from_str_radix(spec, 8).ok().filter(|m| *m <= 0o7777);
    }
    let mut mode = current & 0o7777;
    for clause in spec.split(',') {
        let who_end = clause.find(['+', '-', '=']).unwrap_or(clause.len());
        let who = &clause[..who_end];
        if who.chars().any(|c| !"ugoa".contains(c)) {
            return None;
        }
        let mut rest = &clause[who_end..];
        if rest.is_empty() {
            return None;
        }
        let mask = if who.is_empty() {
            0o7777 & !umask
        } else {
            let mut m = 0;
            for c in who.chars() {
                m |= match c {
                    'u' => 0o4700,
                    'g' => 0o2070,
                    'o' => 0o1007,
                    _ => 0o7777,
                };
            }
            m
        };
        while !rest.is_empty() {
            let op = rest.chars().next()?;
            rest = &rest[1..];
            let perm_end = rest.find(['+', '-', '=']).unwrap_or(rest.len());
            let perms = &rest[..perm_end];
            rest = &rest[perm_end..];
            let mut bits = 0;
            for c in perms.chars() {
                bits |= match c {
                    'r' => 0o444,
                    'w' => 0o222,
                    'x' => 0o111,
                    'X' => {
                        if is_dir || current & 0o111 != 0 {
                            0o111
                        } else {
                            0
                        }
                    }
                    's' => 0o6000,
                    't' => 0o1000,
                    _ => return None,
                };
            }
            let bits = bits & mask;
            match op {
                '+' => mode |= bits,
                '-' => mode &= !bits,
                '=' => {
                    let clear = if who.is_empty() { 0o7777 } else { mask };
                    mode = (mode & !clear) | bits;
                }
                _ => return None,
            }
        }
    }
    Some(mode)
}

fn unescape_delim(v: &str) -> u8 {
    match v {
        "\\n" => b'\n',
        "\\t" => b'\t',
        "\\0" => 0,
        _ => v.bytes().next().unwrap_or(b'\n'),
    }
}

/// xargs' default parsing: blanks and newlines separate, quotes and backslashes group.
fn split_xargs(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut has = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' => {
                if has {
                    out.push(std::mem::take(&mut cur));
                    has = false;
                }
            }
            '\'' | '"' => {
                has = true;
                for d in chars.by_ref() {
                    if d == c {
                        break;
                    }
                    cur.push(d);
                }
            }
            '\\' => {
                has = true;
                if let Some(d) = chars.next() {
                    cur.push(d);
                }
            }
            _ => {
                has = true;
                cur.push(c);
            }
        }
    }
    if has {
        out.push(cur);
    }
    out
}

fn escaped_chars(text: &str, buf: &[u8], escaped: &[bool]) -> Vec<bool> {
    // Map byte flags onto chars (lossy decoding keeps one char per valid sequence).
    if text.len() == buf.len() {
        let mut v = Vec::new();
        let mut idx = 0;
        for c in text.chars() {
            v.push(escaped.get(idx).copied().unwrap_or(false));
            idx += c.len_utf8();
        }
        v
    } else {
        vec![false; text.chars().count()]
    }
}

/// `read`'s splitting: IFS whitespace trimmed at both ends, the last name gets the rest.
fn split_read(text: &str, escaped: &[bool], ifs: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let is_ws = |i: usize| {
        let c = chars[i];
        !escaped.get(i).copied().unwrap_or(false)
            && ifs.contains(c)
            && matches!(c, ' ' | '\t' | '\n')
    };
    let is_delim = |i: usize| !escaped.get(i).copied().unwrap_or(false) && ifs.contains(chars[i]);
    let mut fields = Vec::new();
    let mut i = 0;
    let len = chars.len();
    while i < len && is_ws(i) {
        i += 1;
    }
    while i < len {
        if fields.len() + 1 == n {
            // The last variable: the rest of the line minus trailing IFS whitespace.
            let mut end = len;
            while end > i && is_ws(end - 1) {
                end -= 1;
            }
            fields.push(chars[i..end].iter().collect());
            return fields;
        }
        let start = i;
        while i < len && !is_delim(i) {
            i += 1;
        }
        fields.push(chars[start..i].iter().collect::<String>());
        // Skip whitespace, one non-whitespace delimiter, then whitespace again.
        while i < len && is_ws(i) {
            i += 1;
        }
        if i < len && is_delim(i) && !is_ws(i) {
            i += 1;
            while i < len && is_ws(i) {
                i += 1;
            }
        }
    }
    fields
}

fn test_binop(op: &str) -> Option<CondBinOp> {
    Some(match op {
        "=" | "==" => CondBinOp::PatEq,
        "!=" => CondBinOp::PatNe,
        "<" => CondBinOp::StrLt,
        ">" => CondBinOp::StrGt,
        "-eq" => CondBinOp::IntEq,
        "-ne" => CondBinOp::IntNe,
        "-lt" => CondBinOp::IntLt,
        "-le" => CondBinOp::IntLe,
        "-gt" => CondBinOp::IntGt,
        "-ge" => CondBinOp::IntGe,
        "-nt" => CondBinOp::NewerThan,
        "-ot" => CondBinOp::OlderThan,
        "-ef" => CondBinOp::SameFile,
        _ => return None,
    })
}

/// `set -o` options, in the order bash lists them.
const SET_OPTIONS: &[&str] = &[
    "allexport",
    "braceexpand",
    "emacs",
    "errexit",
    "errtrace",
    "functrace",
    "hashall",
    "histexpand",
    "history",
    "ignoreeof",
    "interactive-comments",
    "keyword",
    "monitor",
    "noclobber",
    "noexec",
    "noglob",
    "nolog",
    "notify",
    "nounset",
    "onecmd",
    "physical",
    "pipefail",
    "posix",
    "privileged",
    "verbose",
    "vi",
    "xtrace",
];

/// `shopt` options of bash 5.2 in its order, with their defaults under `bash -c`.
pub(crate) const SHOPT_OPTIONS: &[(&str, bool)] = &[
    ("autocd", false),
    ("assoc_expand_once", false),
    ("cdable_vars", false),
    ("cdspell", false),
    ("checkhash", false),
    ("checkjobs", false),
    ("checkwinsize", true),
    ("cmdhist", true),
    ("compat31", false),
    ("compat32", false),
    ("compat40", false),
    ("compat41", false),
    ("compat42", false),
    ("compat43", false),
    ("compat44", false),
    ("complete_fullquote", true),
    ("direxpand", false),
    ("dirspell", false),
    ("dotglob", false),
    ("execfail", false),
    ("expand_aliases", false),
    ("extdebug", false),
    ("extglob", false),
    ("extquote", true),
    ("failglob", false),
    ("force_fignore", true),
    ("globasciiranges", true),
    ("globskipdots", true),
    ("globstar", false),
    ("gnu_errfmt", false),
    ("histappend", false),
    ("histreedit", false),
    ("histverify", false),
    ("hostcomplete", true),
    ("huponexit", false),
    ("inherit_errexit", false),
    ("interactive_comments", true),
    ("lastpipe", false),
    ("lithist", false),
    ("localvar_inherit", false),
    ("localvar_unset", false),
    ("login_shell", false),
    ("mailwarn", false),
    ("no_empty_cmd_completion", false),
    ("nocaseglob", false),
    ("nocasematch", false),
    ("noexpand_translation", false),
    ("nullglob", false),
    ("patsub_replacement", true),
    ("progcomp", true),
    ("progcomp_alias", false),
    ("promptvars", true),
    ("restricted_shell", false),
    ("shift_verbose", false),
    ("sourcepath", true),
    ("varredir_close", false),
    ("xpg_echo", false),
];

fn shopt_line(n: &str, v: bool, print: bool, set_o: bool) -> String {
    match (print, set_o) {
        (true, true) => format!("set {}o {n}\n", if v { '-' } else { '+' }),
        (true, false) => format!("shopt {} {n}\n", if v { "-s" } else { "-u" }),
        _ => format!("{n:<15}\t{}\n", if v { "on" } else { "off" }),
    }
}

/// Linux's signals as `trap -l` lists them: number and name without `SIG`.
fn signals() -> Vec<(u32, String)> {
    const NAMES: [&str; 31] = [
        "HUP", "INT", "QUIT", "ILL", "TRAP", "ABRT", "BUS", "FPE", "KILL", "USR1", "SEGV", "USR2",
        "PIPE", "ALRM", "TERM", "STKFLT", "CHLD", "CONT", "STOP", "TSTP", "TTIN", "TTOU", "URG",
        "XCPU", "XFSZ", "VTALRM", "PROF", "WINCH", "IO", "PWR", "SYS",
    ];
    let mut v: Vec<(u32, String)> = NAMES
        .iter()
        .enumerate()
        .map(|(i, n)| (i as u32 + 1, n.to_string()))
        .collect();
    v.push((34, "RTMIN".into()));
    for i in 1..=15 {
        v.push((34 + i, format!("RTMIN+{i}")));
    }
    for i in (1..=14).rev() {
        v.push((64 - i, format!("RTMAX-{i}")));
    }
    v.push((64, "RTMAX".into()));
    v
}

/// A trap's canonical name (`EXIT`, `SIGINT`, `ERR`) from a name or number in any case,
/// with or without `SIG`.
fn signal_name(s: &str) -> Option<String> {
    let u = s.to_uppercase();
    let u = u.strip_prefix("SIG").unwrap_or(&u).to_string();
    match u.as_str() {
        "0" | "EXIT" => return Some("EXIT".into()),
        "ERR" | "DEBUG" | "RETURN" => return Some(u),
        _ => {}
    }
    let table = signals();
    if let Ok(n) = u.parse::<u32>() {
        return table
            .iter()
            .find(|(k, _)| *k == n)
            .map(|(_, name)| format!("SIG{name}"));
    }
    table
        .iter()
        .find(|(_, name)| *name == u)
        .map(|(_, name)| format!("SIG{name}"))
}

/// Where a trap comes in `trap -p`: EXIT, the signals by number, then DEBUG, ERR, RETURN.
fn signal_order(name: &str) -> u32 {
    match name {
        "EXIT" => 0,
        "DEBUG" => 100,
        "ERR" => 101,
        "RETURN" => 102,
        n => {
            let bare = n.strip_prefix("SIG").unwrap_or(n);
            signals()
                .iter()
                .find(|(_, s)| s == bare)
                .map(|(k, _)| *k)
                .unwrap_or(99)
        }
    }
}

/// A scalar as `declare -p` prints it: double-quoted, or `$'...'` when it holds control
/// characters.
fn decl_quote(s: &str) -> String {
    if s.chars().any(|c| c.is_control()) {
        crate::printf::quote_single(s)
    } else {
        dq(s)
    }
}

/// Double-quoted value as `declare -p` prints it.
fn dq(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        if matches!(c, '"' | '\\' | '$' | '`') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// `${x@a}`: the attribute letters.
pub(crate) fn attr_letters(v: &Var) -> String {
    attr_flags(v).trim_start_matches('-').to_string()
}

/// `${x@A}`: a command that recreates the variable.
pub(crate) fn assignment_form(name: &str, v: &Var) -> String {
    let flags = attr_flags(v);
    match &v.value {
        Value::Str(s) if flags == "--" => format!("{name}={}", crate::printf::quote_single(s)),
        Value::Str(s) => format!("declare {flags} {name}={}", crate::printf::quote_single(s)),
        Value::Unset => format!("declare {flags} {name}"),
        _ => declare_line(name, v),
    }
}

fn attr_flags(v: &Var) -> String {
    let mut f = String::new();
    match v.value {
        Value::Indexed(_) => f.push('a'),
        Value::Assoc(_) => f.push('A'),
        _ => {}
    }
    for (bit, c) in [
        (ATTR_INTEGER, 'i'),
        (ATTR_NAMEREF, 'n'),
        (ATTR_READONLY, 'r'),
        (ATTR_TRACE, 't'),
        (ATTR_EXPORT, 'x'),
        (ATTR_LOWER, 'l'),
        (ATTR_UPPER, 'u'),
    ] {
        if v.has(bit) {
            f.push(c);
        }
    }
    if f.is_empty() {
        "--".into()
    } else {
        format!("-{f}")
    }
}

pub(crate) fn declare_line(name: &str, v: &Var) -> String {
    let flags = attr_flags(v);
    match &v.value {
        Value::Unset => format!("declare {flags} {name}"),
        Value::Str(s) => format!("declare {flags} {name}={}", decl_quote(s)),
        Value::Indexed(_) | Value::Assoc(_) if v.has(crate::vars::ATTR_NOVALUE) => {
            format!("declare {flags} {name}")
        }
        Value::Indexed(m) => {
            let body: Vec<String> = m.iter().map(|(k, v)| format!("[{k}]={}", dq(v))).collect();
            format!("declare {flags} {name}=({})", body.join(" "))
        }
        Value::Assoc(m) => {
            let body: String = m
                .iter()
                .map(|(k, v)| format!("[{}]={} ", assoc_key(k), dq(v)))
                .collect();
            format!("declare {flags} {name}=({body})")
        }
    }
}

fn assoc_key(k: &str) -> String {
    if k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !k.is_empty() {
        k.to_string()
    } else {
        dq(k)
    }
}

fn set_line(name: &str, v: &Var) -> String {
    match &v.value {
        Value::Str(s) => format!("{name}={}\n", set_quote(s)),
        Value::Indexed(m) => {
            let body: Vec<String> = m.iter().map(|(k, v)| format!("[{k}]={}", dq(v))).collect();
            format!("{name}=({})\n", body.join(" "))
        }
        Value::Assoc(m) => {
            let body: String = m
                .iter()
                .map(|(k, v)| format!("[{}]={} ", assoc_key(k), dq(v)))
                .collect();
            format!("{name}=({body})\n")
        }
        Value::Unset => String::new(),
    }
}

fn set_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./:,+@%=".contains(c))
    {
        s.to_string()
    } else {
        quote_single(s)
    }
}

/// What a declaration argument from an expansion turned out to be.
enum PlainDecl {
    Name(String),
    Assign(crate::ast::Assignment, AssignedValue),
    Invalid,
}

fn decl_usage(name: &str) -> &'static str {
    match name {
        "export" => "export [-fn] [name[=value] ...] or export -p",
        "readonly" => "readonly [-aAf] [name[=value] ...] or readonly -p",
        "local" => "local [option] name[=value] ...",
        "typeset" => {
            "typeset [-aAfFgiIlnrtux] name[=value] ... or typeset -p [-aAfFilnrtux] [name ...]"
        }
        _ => "declare [-aAfFgiIlnrtux] name[=value] ... or declare -p [-aAfFilnrtux] [name ...]",
    }
}

/// `ulimit`'s resources as bash lists them: option, description, units, default (the values
/// of a typical Linux host; `None` is unlimited).
const ULIMITS: &[(char, &str, &str, Option<u64>)] = &[
    ('R', "real-time non-blocking time", "microseconds", None),
    ('c', "core file size", "blocks", Some(0)),
    ('d', "data seg size", "kbytes", None),
    ('e', "scheduling priority", "", Some(0)),
    ('f', "file size", "blocks", None),
    ('i', "pending signals", "", Some(63_459)),
    ('l', "max locked memory", "kbytes", Some(8192)),
    ('m', "max memory size", "kbytes", None),
    ('n', "open files", "", Some(1024)),
    ('p', "pipe size", "512 bytes", Some(8)),
    ('q', "POSIX message queues", "bytes", Some(819_200)),
    ('r', "real-time priority", "", Some(0)),
    ('s', "stack size", "kbytes", Some(8192)),
    ('t', "cpu time", "seconds", None),
    ('u', "max user processes", "", Some(63_459)),
    ('v', "virtual memory", "kbytes", None),
    ('x', "file locks", "", None),
];

/// Applies a symbolic mode (`u=rwx,g-w,+x`) to permission bits, as bash's `umask` does:
/// no `who` means all, and `X`, `s`, `t` or copying (`g=u`) are not accepted.
fn symbolic_mode(mode: &str, initial: u32) -> Result<u32, String> {
    let mut bits = initial;
    let b = mode.as_bytes();
    let mut i = 0;
    loop {
        let mut who = 0;
        while let Some(&c) = b.get(i) {
            who |= match c {
                b'u' => 0o700,
                b'g' => 0o070,
                b'o' => 0o007,
                b'a' => 0o777,
                _ => break,
            };
            i += 1;
        }
        let op = b.get(i).copied();
        i += 1;
        if !matches!(op, Some(b'+' | b'-' | b'=')) {
            let c = op.map(char::from).unwrap_or_default();
            return Err(format!("`{c}': invalid symbolic mode operator"));
        }
        let mut perm = 0;
        while let Some(&c) = b.get(i) {
            perm |= match c {
                b'r' => 0o444,
                b'w' => 0o222,
                b'x' => 0o111,
                _ => break,
            };
            i += 1;
        }
        match b.get(i) {
            None | Some(b',') => {}
            Some(_) => {
                let c = mode[i..].chars().next().unwrap_or_default();
                return Err(format!("`{c}': invalid symbolic mode character"));
            }
        }
        if who != 0 {
            perm &= who;
        }
        match op {
            Some(b'+') => bits |= perm,
            Some(b'-') => bits &= !perm,
            _ => {
                let who = if who == 0 { 0o777 } else { who };
                bits = (bits & !who) | perm;
            }
        }
        if i >= b.len() {
            return Ok(bits);
        }
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn builtin_table_is_sorted_for_binary_search() {
        let mut sorted = super::BUILTINS.to_vec();
        sorted.sort();
        assert_eq!(sorted, super::BUILTINS);
    }
}
