//! The builtins: everything bash does in its own process, run here in the host.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::ast::CondBinOp;
use crate::execute::{AssignedValue, DeclArg};
use crate::expand::AErr;
use crate::interp::{Fd, Flow, InSrc, Interp, R, strerror};
use crate::printf::{echo_escapes, printf_with_time, quote_single};
use crate::vars::{
    ATTR_EXPORT, ATTR_INTEGER, ATTR_LOWER, ATTR_READONLY, ATTR_UPPER, Value, Var, is_valid_name,
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
    "echo",
    "env",
    "eval",
    "exec",
    "exit",
    "export",
    "false",
    "getopts",
    "hash",
    "let",
    "local",
    "mapfile",
    "popd",
    "printf",
    "pushd",
    "pwd",
    "read",
    "readarray",
    "readonly",
    "return",
    "set",
    "sh",
    "shift",
    "shopt",
    "sleep",
    "source",
    "test",
    "trap",
    "true",
    "type",
    "typeset",
    "umask",
    "unalias",
    "unset",
    "wait",
    "which",
    "xargs",
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
    pub(crate) fn run_builtin(&mut self, name: &str, argv: &[String]) -> R {
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
                let n = match args.first() {
                    None => 1,
                    Some(a) => match a.parse::<u32>() {
                        Ok(n) if n > 0 => n,
                        _ => {
                            self.err(&format!("{name}: {a}: loop count out of range"));
                            return Ok(1);
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
                Err(if name == "break" {
                    Flow::Break(n)
                } else {
                    Flow::Continue(n)
                })
            }
            "shift" => {
                let n = match args.first() {
                    None => 1,
                    Some(a) => match a.parse::<usize>() {
                        Ok(n) => n,
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
                let src = args.join(" ");
                self.eval_string(&src)
            }
            "source" | "." => self.b_source(name, args),
            "set" => Ok(self.b_set(args)),
            "shopt" => Ok(self.b_shopt(args)),
            "unset" => Ok(self.b_unset(args)),
            "let" => self.b_let(args),
            "read" => self.b_read(args),
            "mapfile" | "readarray" => self.b_mapfile(name, args),
            "trap" => Ok(self.b_trap(args)),
            "wait" => Ok(self.b_wait(args)),
            "getopts" => Ok(self.b_getopts(args)),
            "type" => Ok(self.b_type(args)),
            "which" => Ok(self.b_which(args)),
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
            "alias" => Ok(self.b_alias(args)),
            "unalias" => Ok(self.b_unalias(args)),
            "pushd" => Ok(self.b_pushd(args)),
            "popd" => Ok(self.b_popd(args)),
            "dirs" => Ok(self.b_dirs(args)),
            "umask" => Ok(self.b_umask(args)),
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

    fn status_arg(&mut self, name: &str, args: &[String]) -> R<i32> {
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

    fn out_str(&mut self, s: &str) -> i32 {
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

    fn b_printf(&mut self, args: &[String]) -> R {
        let mut args = args;
        let mut var = None;
        if args.first().map(String::as_str) == Some("-v") {
            match args.get(1) {
                Some(v) => {
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
        let p = printf_with_time(fmt, &args[1..], now, start);
        for e in &p.errors {
            self.err(e);
        }
        let status = match var {
            Some(v) => {
                let text = String::from_utf8_lossy(&p.out).into_owned();
                let r = match v.find('[') {
                    Some(i) if v.ends_with(']') => {
                        let name = v[..i].to_string();
                        match self.key_for(&name, &v[i + 1..v.len() - 1]) {
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

    fn b_umask(&mut self, args: &[String]) -> i32 {
        let symbolic = args.iter().any(|a| a == "-S");
        let rest: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
        match rest.first() {
            None => {
                let m = self.st.umask;
                if symbolic {
                    let f = |shift: u32| {
                        let bits = !(m >> shift) & 7;
                        let mut s = String::new();
                        if bits & 4 != 0 {
                            s.push('r');
                        }
                        if bits & 2 != 0 {
                            s.push('w');
                        }
                        if bits & 1 != 0 {
                            s.push('x');
                        }
                        s
                    };
                    self.out_str(&format!("u={},g={},o={}\n", f(6), f(3), f(0)))
                } else {
                    self.out_str(&format!("{m:04o}\n"))
                }
            }
            Some(v) => match u32::from_str_radix(v, 8) {
                Ok(n) if n <= 0o777 => {
                    self.st.umask = n;
                    self.rt.vfs.lock().set_umask(n);
                    0
                }
                _ => {
                    self.err(&format!("umask: {v}: octal number out of range"));
                    1
                }
            },
        }
    }

    // ---- variables ----

    fn b_unset(&mut self, args: &[String]) -> i32 {
        let mut funcs = false;
        let mut status = 0;
        for a in args {
            match a.as_str() {
                "-f" => {
                    funcs = true;
                    continue;
                }
                "-v" | "-n" => {
                    funcs = false;
                    continue;
                }
                _ => {}
            }
            if funcs {
                self.st.functions.remove(a);
                continue;
            }
            if let Some(i) = a.find('[')
                && a.ends_with(']')
            {
                let name = a[..i].to_string();
                let key = a[i + 1..a.len() - 1].to_string();
                if key == "@" || key == "*" {
                    let _ = self.unset_var(&name);
                    continue;
                }
                let k = self.key_for(&name, &key);
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
                        (Value::Str(_), Ok(crate::interp::AssignKey::Index(0))) => {
                            var.value = Value::Unset;
                        }
                        _ => {}
                    }
                }
                continue;
            }
            if !is_valid_name(a) {
                self.err(&format!("unset: `{a}': not a valid identifier"));
                status = 1;
                continue;
            }
            if self.st.vars.get(a).is_some() {
                if let Err(m) = self.unset_var(a) {
                    self.err(&m);
                    status = 1;
                }
            } else {
                self.st.functions.remove(a);
            }
        }
        status
    }

    pub(crate) fn run_declaration(&mut self, name: &str, args: Vec<DeclArg>) -> R {
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
                        'g' => {
                            global = true;
                            0
                        }
                        'f' => {
                            funcs = true;
                            0
                        }
                        'F' => {
                            func_names = true;
                            0
                        }
                        'n' if name == "export" => {
                            remove |= ATTR_EXPORT;
                            add &= !ATTR_EXPORT;
                            0
                        }
                        'n' | 't' => 0,
                        _ => {
                            self.err(&format!("{name}: -{c}: invalid option"));
                            return Ok(2);
                        }
                    };
                    if on {
                        add |= bit;
                    } else {
                        remove |= bit;
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
        if funcs || func_names {
            let mut names: Vec<String> = if items.is_empty() {
                self.st.functions.keys().cloned().collect()
            } else {
                items
                    .iter()
                    .map(|a| match a {
                        DeclArg::Plain(s) => s.clone(),
                        DeclArg::Assign(a, _) => a.name.clone(),
                    })
                    .collect()
            };
            names.sort();
            let mut status = 0;
            let mut text = String::new();
            for n in names {
                if self.st.functions.contains_key(&n) {
                    text.push_str(&format!("declare -f {n}\n"));
                } else {
                    status = 1;
                }
            }
            let s = self.out_str(&text);
            return Ok(if s != 0 { s } else { status });
        }
        if items.is_empty() || (print && items.iter().all(|a| matches!(a, DeclArg::Plain(_)))) {
            return Ok(self.print_declarations(name, &items, add, print));
        }
        let make_local = (name == "local" || (self.st.vars.in_function() && !global))
            && name != "export"
            && name != "readonly";
        let mut status = 0;
        for item in items {
            let (var_name, value) = match item {
                DeclArg::Plain(s) => (s, None),
                DeclArg::Assign(a, v) => (a.name.clone(), Some((a, v))),
            };
            if !is_valid_name(&var_name) {
                self.err(&format!("{name}: `{var_name}': not a valid identifier"));
                status = 1;
                continue;
            }
            if let Some(v) = self.st.vars.get(&var_name)
                && v.has(ATTR_READONLY)
                && (value.is_some() || remove & ATTR_READONLY != 0)
            {
                self.err(&format!("{var_name}: readonly variable"));
                status = 1;
                continue;
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
            if assoc && !matches!(var.value, Value::Assoc(_)) {
                var.value = Value::Assoc(BTreeMap::new());
            } else if array && !matches!(var.value, Value::Indexed(_) | Value::Assoc(_)) {
                var.value = match std::mem::replace(&mut var.value, Value::Unset) {
                    Value::Str(s) => Value::Indexed(BTreeMap::from([(0, s)])),
                    _ => Value::Indexed(BTreeMap::new()),
                };
            }
            var.attrs = (var.attrs | add) & !remove;
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
                var.value = Value::Assoc(BTreeMap::new());
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
                Value::Assoc(BTreeMap::new())
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

    fn print_declarations(&mut self, name: &str, items: &[DeclArg], filter: u8, _p: bool) -> i32 {
        let names: Vec<String> = if items.is_empty() {
            self.st
                .vars
                .names()
                .into_iter()
                .filter(|n| {
                    let v = self.st.vars.get(n);
                    filter == 0 || v.is_some_and(|v| v.attrs & filter == filter)
                })
                .collect()
        } else {
            items
                .iter()
                .filter_map(|a| match a {
                    DeclArg::Plain(s) => Some(s.clone()),
                    _ => None,
                })
                .collect()
        };
        let mut text = String::new();
        let mut status = 0;
        for n in names {
            let Some(v) = self.st.vars.get(&n).cloned() else {
                self.err(&format!("{name}: {n}: not found"));
                status = 1;
                continue;
            };
            text.push_str(&declare_line(&n, &v));
            text.push('\n');
        }
        let s = self.out_str(&text);
        if s != 0 { s } else { status }
    }

    fn b_let(&mut self, args: &[String]) -> R {
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
            "posix"
            | "braceexpand"
            | "hashall"
            | "interactive-comments"
            | "monitor"
            | "notify"
            | "verbose"
            | "nolog"
            | "ignoreeof"
            | "emacs"
            | "vi"
            | "physical"
            | "privileged"
            | "functrace"
            | "errtrace"
            | "histexpand"
            | "history"
            | "keyword"
            | "onecmd" => {}
            _ => return false,
        }
        true
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
                self.st.positional = args[i + 1..].to_vec();
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
                    'h' | 'B' | 'H' | 'm' | 'b' | 'v' | 'T' | 'E' | 'P' | 'k' | 't' => "posix",
                    'o' => {
                        i += 1;
                        match args.get(i) {
                            Some(n) => {
                                if !self.set_option(n, on) {
                                    self.err(&format!("set: {n}: invalid option name"));
                                    return 1;
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
        let names = [
            "allexport",
            "errexit",
            "noclobber",
            "noglob",
            "nounset",
            "pipefail",
            "xtrace",
        ];
        let mut s = String::new();
        for n in names {
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
        let mut names = Vec::new();
        for a in args {
            match a.as_str() {
                "-s" => mode = Some(true),
                "-u" => mode = Some(false),
                "-q" => quiet = true,
                "-o" | "-p" => {}
                n => names.push(n.to_string()),
            }
        }
        let mut status = 0;
        let mut text = String::new();
        for n in &names {
            let o = &mut self.st.opts;
            let slot: Option<&mut bool> = match n.as_str() {
                "nullglob" => Some(&mut o.nullglob),
                "dotglob" => Some(&mut o.dotglob),
                "failglob" => Some(&mut o.failglob),
                "nocaseglob" => Some(&mut o.nocaseglob),
                "nocasematch" => Some(&mut o.nocasematch),
                "expand_aliases" => Some(&mut o.expand_aliases),
                "lastpipe" => Some(&mut o.lastpipe),
                "pipefail" => Some(&mut o.pipefail),
                _ => None,
            };
            match (slot, mode) {
                (Some(s), Some(m)) => *s = m,
                (Some(s), None) => {
                    let v = *s;
                    if !v {
                        status = 1;
                    }
                    text.push_str(&format!("{n:<15}\t{}\n", if v { "on" } else { "off" }));
                }
                (None, _) => {
                    // Accepted so scripts that set them keep going; they change nothing here.
                    if !matches!(
                        n.as_str(),
                        "extglob"
                            | "globstar"
                            | "checkwinsize"
                            | "histappend"
                            | "cmdhist"
                            | "extquote"
                            | "promptvars"
                            | "sourcepath"
                            | "inherit_errexit"
                    ) {
                        self.err(&format!("shopt: {n}: invalid shell option name"));
                        status = 1;
                    }
                }
            }
        }
        if !quiet && !text.is_empty() {
            let s = self.out_str(&text);
            if s != 0 {
                return s;
            }
        }
        status
    }

    // ---- read / mapfile ----

    /// Reads one byte from descriptor `fd` before `deadline`: `Ok(None)` at end of input,
    /// `Err(())` when the deadline passed first.
    fn read_byte_by(&mut self, fd: u32, deadline: Instant) -> R<Result<Option<u8>, ()>> {
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
    fn read_byte(&mut self, fd: u32) -> R<Option<u8>> {
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

    fn b_read(&mut self, args: &[String]) -> R {
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
                Some(Fd::In(InSrc::Bytes(_) | InSrc::File(_)))
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
        self.assign_array(name, items, false)
    }

    fn b_mapfile(&mut self, name: &str, args: &[String]) -> R {
        let mut trim = false;
        let mut delim = b'\n';
        let mut max: Option<usize> = None;
        let mut skip = 0usize;
        let mut fd = 0u32;
        let mut target = "MAPFILE".to_string();
        let mut i = 0;
        while i < args.len() {
            let a = args[i].as_str();
            let mut next = || {
                i += 1;
                args.get(i).cloned().unwrap_or_default()
            };
            match a {
                "-t" => trim = true,
                "-d" => delim = next().bytes().next().unwrap_or(0),
                "-n" => max = next().parse().ok().filter(|n| *n > 0),
                "-s" => skip = next().parse().unwrap_or(0),
                "-u" => fd = next().parse().unwrap_or(0),
                "-O" | "-c" | "-C" => {
                    next();
                }
                s if s.starts_with('-') && s.len() > 1 => {
                    self.err(&format!("{name}: {s}: invalid option"));
                    return Ok(2);
                }
                s => target = s.to_string(),
            }
            i += 1;
        }
        let mut items = Vec::new();
        let mut line = Vec::new();
        let mut seen = 0usize;
        let mut total = 0usize;
        let limit = self.st.limits.max_word_bytes;
        loop {
            if max.is_some_and(|m| items.len() >= m) {
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
                if trim && line.last() == Some(&delim) {
                    line.pop();
                }
                if seen >= skip {
                    items.push((None, String::from_utf8_lossy(&line).into_owned()));
                }
                seen += 1;
                line.clear();
            }
            if b.is_none() {
                break;
            }
        }
        if let Err(m) = self.assign_array_fresh(&target, items) {
            self.err(&format!("{name}: {m}"));
            return Ok(1);
        }
        Ok(0)
    }

    // ---- traps, jobs, getopts ----

    fn b_trap(&mut self, args: &[String]) -> i32 {
        let list = |me: &mut Interp| {
            let mut text = String::new();
            for (sig, action) in me.st.traps.iter() {
                text.push_str(&format!(
                    "trap -- {} {sig}\n",
                    crate::printf::quote_single(action)
                ));
            }
            me.out_str(&text)
        };
        if args.is_empty() || args[0] == "-p" {
            return list(self);
        }
        if args[0] == "-l" {
            return self.out_str(" 1) SIGHUP\t 2) SIGINT\t 3) SIGQUIT\t15) SIGTERM\n");
        }
        let (action, sigs) = if args.len() == 1 {
            (None, args)
        } else if args[0] == "-" {
            (None, &args[1..])
        } else {
            (Some(args[0].clone()), &args[1..])
        };
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

    fn b_wait(&mut self, args: &[String]) -> i32 {
        let mut status = 0;
        if args.is_empty() {
            // `wait` without operands waits for every job and returns 0.
            for j in self.jobs.drain(..) {
                let _ = j.handle.join();
            }
            return 0;
        }
        for a in args {
            let pid: Option<u32> = a.trim_start_matches('%').parse().ok();
            let pos = pid.and_then(|p| self.jobs.iter().position(|j| j.pid == p));
            match pos {
                Some(i) => {
                    let j = self.jobs.remove(i);
                    status = j.handle.join().unwrap_or(1);
                }
                None => {
                    self.err(&format!("wait: pid {a} is not a child of this shell"));
                    status = 127;
                }
            }
        }
        status
    }

    fn b_getopts(&mut self, args: &[String]) -> i32 {
        if args.len() < 2 {
            self.err("getopts: usage: getopts optstring name [arg ...]");
            return 2;
        }
        let spec = args[0].clone();
        let var = args[1].clone();
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
            let _ = me.set_var(name, v);
        };
        let Some(arg) = params.get(optind - 1).cloned() else {
            set(self, &var, "?".into());
            self.getopts_char = 0;
            return 1;
        };
        if self.getopts_char == 0 {
            if arg == "--" {
                set(self, "OPTIND", (optind + 1).to_string());
                self.getopts_optind = optind + 1;
                set(self, &var, "?".into());
                return 1;
            }
            if !arg.starts_with('-') || arg == "-" {
                set(self, &var, "?".into());
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
                set(self, &var, "?".into());
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
                        set(self, &var, ":".into());
                        set(self, "OPTIND", next_optind.to_string());
                        self.getopts_optind = next_optind;
                        return 0;
                    } else {
                        self.err_raw(&format!("bash: option requires an argument -- {c}\n"));
                        self.st.vars.remove("OPTARG");
                        set(self, &var, "?".into());
                        set(self, "OPTIND", next_optind.to_string());
                        self.getopts_optind = next_optind;
                        return 0;
                    }
                } else {
                    self.st.vars.remove("OPTARG");
                }
                set(self, &var, c.to_string());
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

    fn b_type(&mut self, args: &[String]) -> i32 {
        let mut terse = false;
        let mut path_only = false;
        let mut names = Vec::new();
        for a in args {
            match a.as_str() {
                "-t" => terse = true,
                "-p" | "-P" => path_only = true,
                "-a" | "-f" => {}
                n => names.push(n.to_string()),
            }
        }
        let mut status = 0;
        let mut text = String::new();
        for n in names {
            match self.describe(&n) {
                None => {
                    if !terse && !path_only {
                        self.err(&format!("type: {n}: not found"));
                    }
                    status = 1;
                }
                Some((kind, extra)) => {
                    if path_only {
                        if kind == "file" {
                            text.push_str(&format!("{extra}\n"));
                        }
                    } else if terse {
                        text.push_str(&format!("{kind}\n"));
                    } else {
                        text.push_str(&match kind {
                            "alias" => format!("{n} is aliased to `{extra}'\n"),
                            "keyword" => format!("{n} is a shell keyword\n"),
                            "function" => format!("{n} is a function\n"),
                            "builtin" => format!("{n} is a shell builtin\n"),
                            _ => format!("{n} is {extra}\n"),
                        });
                    }
                }
            }
        }
        let s = self.out_str(&text);
        if s != 0 { s } else { status }
    }

    fn b_which(&mut self, args: &[String]) -> i32 {
        let mut status = 0;
        let mut text = String::new();
        for n in args.iter().filter(|a| !a.starts_with('-')) {
            let found = if n.contains('/') {
                self.describe(n)
                    .filter(|(k, _)| *k == "file")
                    .map(|(_, p)| p)
            } else {
                self.find_in_path(n)
            };
            match found {
                Some(p) => text.push_str(&format!("{p}\n")),
                None => status = 1,
            }
        }
        let s = self.out_str(&text);
        if s != 0 { s } else { status }
    }

    fn b_command(&mut self, args: &[String]) -> R {
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
            if long {
                return Ok(self.b_type(&rest[..1]));
            }
            let mut status = 0;
            let mut text = String::new();
            for n in rest {
                match self.describe(n) {
                    Some(("file", p)) => text.push_str(&format!("{p}\n")),
                    Some(("alias", v)) => text.push_str(&format!("alias {n}='{v}'\n")),
                    Some(_) => text.push_str(&format!("{n}\n")),
                    None => status = 1,
                }
            }
            let s = self.out_str(&text);
            return Ok(if s != 0 { s } else { status });
        }
        if is_builtin(name) {
            return self.run_builtin(&name.clone(), rest);
        }
        let env = self.st.vars.environ();
        self.run_external(rest.to_vec(), env)
    }

    // ---- aliases ----

    fn b_alias(&mut self, args: &[String]) -> i32 {
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

    fn b_source(&mut self, name: &str, args: &[String]) -> R {
        let Some(file) = args.first() else {
            self.err(&format!("{name}: filename argument required"));
            return Ok(2);
        };
        let path = if file.contains('/') {
            wasmsand_vfs::path::join(&self.st.cwd, file)
        } else {
            self.find_in_path(file)
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
        let r = self.run_script(&script);
        self.sourcing -= 1;
        if let Some(p) = saved_pos {
            self.st.positional = p;
        }
        self.depth -= 1;
        match r {
            Err(Flow::Return(s)) => Ok(s),
            other => other,
        }
    }

    fn b_exec(&mut self, args: &[String]) -> R {
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

    fn b_sleep(&mut self, args: &[String]) -> R {
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

    fn b_bash(&mut self, args: &[String]) -> R {
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
    fn b_env(&mut self, args: &[String]) -> R {
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

    fn b_xargs(&mut self, args: &[String]) -> R {
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
    pub(crate) fn run_argv(&mut self, argv: Vec<String>) -> R {
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

fn signal_name(s: &str) -> Option<String> {
    let u = s.to_uppercase();
    let u = u.strip_prefix("SIG").unwrap_or(&u).to_string();
    Some(match u.as_str() {
        "0" | "EXIT" => "EXIT".into(),
        "ERR" | "DEBUG" | "RETURN" => u,
        "1" | "HUP" => "SIGHUP".into(),
        "2" | "INT" => "SIGINT".into(),
        "3" | "QUIT" => "SIGQUIT".into(),
        "15" | "TERM" => "SIGTERM".into(),
        "USR1" | "10" => "SIGUSR1".into(),
        "USR2" | "12" => "SIGUSR2".into(),
        "PIPE" | "13" => "SIGPIPE".into(),
        "ALRM" | "14" => "SIGALRM".into(),
        "CHLD" | "17" => "SIGCHLD".into(),
        _ => return None,
    })
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
    if v.has(ATTR_INTEGER) {
        f.push('i');
    }
    if v.has(ATTR_LOWER) {
        f.push('l');
    }
    if v.has(ATTR_READONLY) {
        f.push('r');
    }
    if v.has(ATTR_UPPER) {
        f.push('u');
    }
    if v.has(ATTR_EXPORT) {
        f.push('x');
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
        Value::Str(s) => format!("declare {flags} {name}={}", dq(s)),
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

#[cfg(test)]
mod tests {
    #[test]
    fn builtin_table_is_sorted_for_binary_search() {
        let mut sorted = super::BUILTINS.to_vec();
        sorted.sort();
        assert_eq!(sorted, super::BUILTINS);
    }
}
