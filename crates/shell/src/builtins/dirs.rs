//! `cd`, `pwd`, and the directory stack: `pushd`, `popd`, `dirs`.

use crate::error::ShellError;
use crate::interp::Interp;
use crate::vars::{ATTR_EXPORT, ATTR_READONLY, Value, Var};

impl Interp {
    pub(super) fn b_cd(&mut self, args: &[String]) -> i32 {
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
        let old = std::mem::replace(&mut self.st.cwd, new.clone());
        let _ = self.assign_exported_if_set("OLDPWD", old);
        let _ = self.assign_exported_if_set("PWD", new);
        Ok(())
    }

    fn assign_exported_if_set(&mut self, name: &str, v: String) -> Result<(), ShellError> {
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

    pub(super) fn b_pwd(&mut self, args: &[String]) -> i32 {
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

    pub(super) fn b_pushd(&mut self, args: &[String]) -> i32 {
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

    pub(super) fn b_popd(&mut self, _args: &[String]) -> i32 {
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

    pub(super) fn b_dirs(&mut self, args: &[String]) -> i32 {
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
}
