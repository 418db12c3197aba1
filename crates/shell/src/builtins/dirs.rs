//! `cd`, `pwd`, and the directory stack: `pushd`, `popd`, `dirs`.

use crate::error::ShellError;
use crate::interp::Interp;
use crate::vars::{ATTR_READONLY, Value, Var};

impl Interp {
    pub(super) fn b_cd(&mut self, args: &[String]) -> i32 {
        let mut physical = false;
        let mut rest: Vec<&String> = Vec::new();
        let mut options_done = false;
        for a in args {
            if options_done || a == "-" || !a.starts_with('-') {
                options_done = true;
                rest.push(a);
                continue;
            }
            if a == "--" {
                options_done = true;
                continue;
            }
            for c in a[1..].chars() {
                match c {
                    'P' => physical = true,
                    'L' => physical = false,
                    'e' | '@' => {}
                    _ => return self.stack_usage("cd", &format!("-{c}"), "invalid option"),
                }
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
                if self.is_dir(&candidate) && self.change_dir(&candidate, physical).is_ok() {
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
                    // An empty OLDPWD changes nothing; bash then prints that empty name.
                    let shown = if target.is_empty() {
                        String::new()
                    } else {
                        self.st.cwd.clone()
                    };
                    return self.out_str(&format!("{shown}\n"));
                }
                0
            }
            Err(m) => {
                self.err(&format!("cd: {m}"));
                1
            }
        }
    }

    pub(crate) fn change_dir(&mut self, target: &str, physical: bool) -> Result<(), ShellError> {
        if target.is_empty() {
            return Ok(());
        }
        let joined = wasmsand_vfs::path::join(&self.st.cwd, target);
        let vfs = self.rt.vfs.lock();
        let path_error = |errno| ShellError::Path {
            path: target.to_string(),
            errno,
        };
        let meta = vfs.stat(&joined).map_err(|e| path_error(e.errno))?;
        if meta.file_type != wasmsand_vfs::FileType::Dir {
            return Err(path_error(wasmsand_vfs::Errno::ENOTDIR));
        }
        let new = if physical {
            vfs.realpath(&joined).map_err(|e| path_error(e.errno))?
        } else {
            wasmsand_vfs::path::normalize(&joined)
        };
        drop(vfs);
        self.st.cwd = new.clone();
        // OLDPWD is what `$PWD` said, nothing when it was unset.
        let old = self.get_var("PWD");
        let _ = self.assign_keeping_attrs("OLDPWD", old);
        let _ = self.assign_keeping_attrs("PWD", Some(new));
        Ok(())
    }

    /// bash's `cd` binds PWD and OLDPWD as they are: exported if they were, a new one not.
    fn assign_keeping_attrs(&mut self, name: &str, v: Option<String>) -> Result<(), ShellError> {
        let attrs = self.st.vars.get(name).map(|v| v.attrs).unwrap_or(0);
        self.st.vars.put(
            name,
            Var {
                value: v.map_or(Value::Unset, Value::Str),
                attrs: attrs & !ATTR_READONLY,
            },
        );
        Ok(())
    }

    pub(super) fn b_pwd(&mut self, args: &[String]) -> i32 {
        let mut physical = false;
        for a in args {
            if a == "--" || !a.starts_with('-') || a.len() < 2 {
                break;
            }
            for c in a[1..].chars() {
                match c {
                    'P' => physical = true,
                    'L' => physical = false,
                    _ => return self.stack_usage("pwd", &format!("-{c}"), "invalid option"),
                }
            }
        }
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

    /// The whole stack as `dirs` shows it, left to right: the current directory first.
    fn dir_list(&self) -> Vec<String> {
        let mut all = vec![self.st.cwd.clone()];
        all.extend(self.st.dirstack.iter().rev().cloned());
        all
    }

    /// Stores `all` (as `dir_list` returns it) without its first entry, the current directory.
    fn set_dir_list(&mut self, all: &[String]) {
        self.st.dirstack = all[1..].iter().rev().cloned().collect();
    }

    /// `+N` / `-N`: an index counted from the left / right of the `dirs` list. `None` when
    /// the word is not one (bash's "invalid number", a usage error).
    fn stack_index(word: &str, len: usize) -> Option<Result<usize, ()>> {
        let (sign, digits) = word.split_at(1);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let n: usize = digits.parse().unwrap_or(usize::MAX);
        if n >= len {
            return Some(Err(()));
        }
        Some(Ok(if sign == "+" { n } else { len - 1 - n }))
    }

    fn stack_usage(&mut self, name: &str, word: &str, what: &str) -> i32 {
        self.err(&format!("{name}: {word}: {what}"));
        self.usage(name);
        2
    }

    pub(super) fn b_pushd(&mut self, args: &[String]) -> i32 {
        let mut no_cd = false;
        let mut rest: Vec<&String> = Vec::new();
        let mut options_done = false;
        for a in args {
            if !options_done && a == "-n" {
                no_cd = true;
            } else if !options_done && a == "--" {
                options_done = true;
            } else {
                options_done = true;
                rest.push(a);
            }
        }
        if rest.len() > 1 {
            self.err("pushd: too many arguments");
            return 1;
        }
        let mut all = self.dir_list();
        match rest.first().map(|s| s.as_str()) {
            None => {
                if all.len() < 2 {
                    self.err("pushd: no other directory");
                    return 1;
                }
                all.swap(0, 1);
            }
            Some(w) if w.len() > 1 && (w.starts_with('+') || w.starts_with('-')) => {
                match Self::stack_index(w, all.len()) {
                    None => return self.stack_usage("pushd", w, "invalid number"),
                    Some(Err(())) => {
                        self.err(&format!("pushd: {w}: directory stack index out of range"));
                        return 1;
                    }
                    Some(Ok(n)) => all.rotate_left(n),
                }
            }
            Some(d) => {
                let d = if d == "-" {
                    match self.get_var("OLDPWD") {
                        Some(o) => o,
                        None => {
                            self.err("pushd: OLDPWD not set");
                            return 1;
                        }
                    }
                } else {
                    d.to_string()
                };
                if no_cd {
                    all.insert(1, d);
                    self.set_dir_list(&all);
                    let line = self.dirs_line();
                    return self.out_str(&line);
                }
                if let Err(m) = self.change_dir(&d, false) {
                    self.err(&format!("pushd: {m}"));
                    return 1;
                }
                all.insert(0, self.st.cwd.clone());
                self.set_dir_list(&all);
                let line = self.dirs_line();
                return self.out_str(&line);
            }
        }
        if !no_cd && all[0] != self.st.cwd {
            let target = all[0].clone();
            if let Err(m) = self.change_dir(&target, false) {
                self.err(&format!("pushd: {m}"));
                return 1;
            }
            all[0] = self.st.cwd.clone();
        }
        self.set_dir_list(&all);
        let line = self.dirs_line();
        self.out_str(&line)
    }

    pub(super) fn b_popd(&mut self, args: &[String]) -> i32 {
        let mut no_cd = false;
        let mut index = None;
        let mut all = self.dir_list();
        let mut options_done = false;
        for a in args {
            if !options_done && a == "-n" {
                no_cd = true;
            } else if !options_done && a == "--" {
                options_done = true;
            } else if a.len() > 1 && (a.starts_with('+') || a.starts_with('-')) {
                match Self::stack_index(a, all.len()) {
                    None => return self.stack_usage("popd", a, "invalid number"),
                    Some(Err(())) => {
                        self.err(&format!("popd: {a}: directory stack index out of range"));
                        return 1;
                    }
                    Some(Ok(n)) => index = Some(n),
                }
            } else {
                return self.stack_usage("popd", a, "invalid argument");
            }
        }
        if all.len() < 2 {
            self.err("popd: directory stack empty");
            return 1;
        }
        let n = index.unwrap_or(if no_cd { 1 } else { 0 });
        if n == 0 {
            if let Err(m) = self.change_dir(&all[1].clone(), false) {
                self.err(&format!("popd: {m}"));
                return 1;
            }
            all.remove(0);
            all[0] = self.st.cwd.clone();
        } else {
            all.remove(n);
        }
        self.set_dir_list(&all);
        let line = self.dirs_line();
        self.out_str(&line)
    }

    pub(super) fn b_dirs(&mut self, args: &[String]) -> i32 {
        let (mut full, mut per_line, mut numbered, mut clear) = (false, false, false, false);
        let mut index = None;
        let all = self.dir_list();
        for a in args {
            match a.as_str() {
                "--" => {}
                "-c" => clear = true,
                "-l" => full = true,
                "-p" => per_line = true,
                "-v" => {
                    per_line = true;
                    numbered = true;
                }
                w if w.len() > 1 && (w.starts_with('+') || w.starts_with('-')) => {
                    match Self::stack_index(w, all.len()) {
                        None => return self.stack_usage("dirs", w, "invalid number"),
                        Some(Err(())) => {
                            let n = &w[1..];
                            self.err(&format!("dirs: {n}: directory stack index out of range"));
                            return 1;
                        }
                        Some(Ok(n)) => index = Some(n),
                    }
                }
                w => return self.stack_usage("dirs", w, "invalid option"),
            }
        }
        if clear {
            self.st.dirstack.clear();
            return 0;
        }
        let show = |d: &String| if full { d.clone() } else { self.tilde_short(d) };
        if let Some(n) = index {
            let text = format!("{}\n", show(&all[n]));
            return self.out_str(&text);
        }
        let shown: Vec<String> = all.iter().map(show).collect();
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
}
