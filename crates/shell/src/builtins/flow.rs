//! Control flow: `exit`, `return`, `break`/`continue`, `eval`, `source`/`.`, `exec`, and
//! `bash`/`sh` (a script run in a child shell).

use crate::error::strerror;
use crate::interp::{Fd, Flow, FlowResult, Interp, Invocation};

impl Interp {
    /// What a special builtin given too many arguments does: in `bash -c` text it ends the
    /// shell; in a script (a file or stdin) it abandons the command being run, and the
    /// script goes on with the next line.
    pub(crate) fn too_many_arguments(&mut self, name: &str) -> Flow {
        self.err(&format!("{name}: too many arguments"));
        self.line_error()
    }

    /// What an error bash treats as fatal to `bash -c` text does (a special builtin's bad
    /// arguments, an arithmetic error in a subscript): there it ends the shell with status 1;
    /// a script (a file or stdin) abandons the line and goes on with the next.
    pub(crate) fn line_error(&self) -> Flow {
        if self.invocation == Invocation::DashC {
            Flow::Exit(1)
        } else {
            Flow::Fatal(1)
        }
    }

    pub(super) fn b_exit(&mut self, args: &[String]) -> FlowResult {
        if args.len() > 1 {
            return Err(self.too_many_arguments("exit"));
        }
        let s = self.status_arg("exit", args)?;
        // An interactive shell says it is leaving; its subshells do not.
        if self.st.opts.interactive && self.is_shell_itself() {
            self.err_raw("exit\n");
        }
        Err(Flow::Exit(s))
    }

    /// `logout`: `exit` for a login shell (`bash -l`), refused in any other.
    pub(super) fn b_logout(&mut self, args: &[String]) -> FlowResult {
        if self.shopt_value("login_shell") != Some(true) {
            self.err("logout: not login shell: use `exit'");
            return Ok(1);
        }
        self.b_exit(args)
    }

    /// `suspend`: no shell in a sandbox can be stopped (nothing would continue it), so it is
    /// refused as bash refuses a shell without job control, `-f` too.
    pub(super) fn b_suspend(&mut self, args: &[String]) -> i32 {
        match args.first().map(String::as_str) {
            None | Some("-f") | Some("--") => {
                self.err("suspend: cannot suspend: no job control");
                1
            }
            Some(a) if a.starts_with('-') => {
                self.err(&format!("suspend: {a}: invalid option"));
                self.usage("suspend");
                2
            }
            Some(_) => {
                self.err("suspend: too many arguments");
                2
            }
        }
    }

    pub(super) fn b_return(&mut self, args: &[String]) -> FlowResult {
        if args.len() > 1 {
            return Err(self.too_many_arguments("return"));
        }
        if !self.st.vars.in_function() && self.sourcing == 0 {
            self.err("return: can only `return' from a function or sourced script");
            return Ok(2);
        }
        let s = self.status_arg("return", args)?;
        Err(Flow::Return(s))
    }

    /// `break` and `continue`.
    pub(super) fn b_loop_control(&mut self, name: &str, args: &[String]) -> FlowResult {
        if args.len() > 1 && self.loops > 0 {
            return Err(self.too_many_arguments(name));
        }
        let n = match args.first() {
            None => 1,
            Some(a) => match a.trim().parse::<i64>() {
                Ok(n) if n > 0 => n.min(u32::MAX as i64) as u32,
                Ok(_) => {
                    // bash reports the count and leaves every loop it is in, with status 1
                    // (`continue 0` too).
                    self.err(&format!("{name}: {a}: loop count out of range"));
                    self.st.status = 1;
                    if self.loops == 0 {
                        return Ok(1);
                    }
                    return Err(Flow::Break(self.loops));
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

    pub(super) fn b_eval(&mut self, args: &[String]) -> FlowResult {
        let args = match self.no_options("eval", args) {
            Ok(a) => a,
            Err(st) => return Ok(st),
        };
        let src = args.join(" ");
        // An error that abandons the rest of a line abandons only the eval'd text.
        match self.eval_command_text(&src) {
            Err(Flow::Fatal(s)) => Ok(s),
            r => r,
        }
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

    /// `caller [N]`: where the current function (or frame N above it) was called from, as
    /// `LINE FILE` without N and `LINE NAME FILE` with it; 1 when there is no such frame.
    pub(super) fn b_caller(&mut self, args: &[String]) -> i32 {
        let args = match self.no_options("caller", args) {
            Ok(a) => a,
            Err(st) => return st,
        };
        let inner: Vec<crate::interp::SourceFrame> = self.frames.iter().rev().cloned().collect();
        let Some(n) = args.first() else {
            let Some(cur) = inner.first() else {
                return 1;
            };
            let outer = inner.get(1).map_or("NULL".into(), |f| f.file.to_string());
            return self.out_str(&format!("{} {outer}\n", cur.line));
        };
        let Ok(n) = n.trim().parse::<usize>() else {
            self.err(&format!("caller: {n}: invalid number"));
            self.usage("caller");
            return 2;
        };
        match (inner.get(n), inner.get(n + 1)) {
            (Some(cur), Some(outer)) => {
                self.out_str(&format!("{} {} {}\n", cur.line, outer.kind, outer.file))
            }
            _ => 1,
        }
    }

    pub(super) fn b_source(&mut self, name: &str, args: &[String]) -> FlowResult {
        let args = match self.no_options(name, args) {
            Ok(a) => a,
            Err(st) => return Ok(st),
        };
        let Some(file) = args.first() else {
            self.err(&format!("{name}: filename argument required"));
            self.usage(name);
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
        self.source_path(file, &path, &args[1..])
    }

    /// Runs the file at `path` (named `file` in messages and `BASH_SOURCE`) in this shell, with
    /// `args` as its positional parameters when there are any.
    pub(crate) fn source_path(&mut self, file: &str, path: &str, args: &[String]) -> FlowResult {
        // The shell's own input descriptors by name, as bash opens them: `source /dev/stdin`
        // runs what is left on its standard input.
        let data =
            match input_fd_path(path).filter(|&fd| matches!(self.fds.get(fd), Some(Fd::In(_)))) {
                Some(fd) => Ok(bytes::Bytes::from(self.read_fd_to_end(fd, "source")?)),
                None => self.rt.vfs.lock().read(path),
            };
        let data = match data {
            Ok(d) => d,
            Err(e) => {
                self.err(&format!("{file}: {}", strerror(e.errno)));
                // A special builtin's failure ends a POSIX-mode script, unless `command`
                // ran it.
                if self.st.opts.extra.contains("posix")
                    && !self.st.opts.interactive
                    && !self.via_command
                {
                    return Err(Flow::Exit(1));
                }
                return Ok(1);
            }
        };
        // bash drops NUL bytes from what it reads as script text.
        let text = wasmsand_exec::raw::decode(&data).replace('\0', "");
        let script = match crate::parse(&text) {
            Ok(s) => s,
            Err(e) => {
                // Named by the file, as bash names it; an interactive shell puts its own
                // name in front.
                let mut report = e.render_in(&text, crate::SourceKind::Script(file));
                if self.st.opts.interactive {
                    report = report.lines().map(|l| format!("bash: {l}\n")).collect();
                }
                self.err_raw(&report);
                return Ok(2);
            }
        };
        self.enter()?;
        let saved_pos = if args.is_empty() {
            None
        } else {
            Some(std::mem::replace(&mut self.st.positional, args.to_vec()))
        };
        self.sourcing += 1;
        // bash puts the file's name on `BASH_ARGV` when `source` has no arguments, and the
        // arguments when it has some under `extdebug`.
        let pushed_args = args.is_empty() || self.st.opts.extdebug;
        if args.is_empty() {
            self.push_bash_args(&[file.to_string()]);
        } else if pushed_args {
            self.push_bash_args(args);
        }
        self.frames.push(crate::interp::SourceFrame {
            file: std::sync::Arc::from(file),
            kind: "source".into(),
            line: self.line,
        });
        self.sync_bash_source();
        self.set_funcname();
        let offset = std::mem::replace(&mut self.line_offset, 0);
        let mut r = if self.st.opts.interactive {
            self.run_lines_discarding(&script)
        } else {
            self.run_script(&script)
        };
        self.line_offset = offset;
        self.frames.pop();
        if pushed_args {
            self.pop_bash_args();
        }
        self.sync_bash_source();
        self.set_funcname();
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

    /// An interactive bash reads a sourced file a line at a time, as it reads its input: an
    /// expansion error abandons that line (status 1) and the file goes on.
    fn run_lines_discarding(&mut self, script: &crate::syntax::ast::Script) -> FlowResult {
        let mut status = 0;
        let mut skip_through: Option<usize> = None;
        for item in &script.items {
            let line = crate::item_line(item);
            if let (Some(limit), Some(l)) = (skip_through, line)
                && l <= limit
            {
                continue;
            }
            skip_through = None;
            let one = crate::syntax::ast::Script {
                items: vec![item.clone()],
            };
            match self.run_script(&one) {
                Ok(s) => status = s,
                Err(Flow::Unbound) => {
                    status = 1;
                    self.st.status = 1;
                    skip_through = Some(self.line.max(line.unwrap_or(0)));
                }
                Err(e) => return Err(e),
            }
        }
        Ok(status)
    }

    pub(super) fn b_exec(&mut self, args: &[String]) -> FlowResult {
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
        // `exec -c CMD` runs CMD with an empty environment, as `env -i` does (a `bash` it
        // starts sees no exported variable either).
        if clear_env && !args.is_empty() {
            let mut with_env = vec!["-i".to_string(), "--".to_string()];
            with_env.extend(args.iter().cloned());
            let status = self.b_env(&with_env)?;
            return Err(Flow::Exit(status));
        }
        if args.is_empty() {
            // `exec >file`: the redirections stay for the rest of the shell.
            self.keep_redirs = true;
            return Ok(0);
        }
        // bash's `exec` hands the program the exported variables only, without the `_`
        // it adds for a command it runs.
        self.exact_env = true;
        let status = if self.builtin_enabled(&args[0]) {
            self.run_builtin(&args[0].clone(), args)?
        } else if let Some(f) = self.st.functions.get(&args[0]).cloned() {
            self.call_function(&f, args.to_vec())?
        } else {
            let env = self.st.vars.environ();
            self.run_external(args.to_vec(), env)?
        };
        Err(Flow::Exit(status))
    }

    pub(super) fn b_bash(&mut self, name: &str, args: &[String]) -> FlowResult {
        // bash's invocation: option words first (`-c` is a flag: the command is the first
        // word after the options), `-o name`/`-O name` take the next word.
        let mut i = 0;
        let mut dash_c = false;
        let mut dash_s = false;
        let mut opts = vec![crate::execute::StartOption::Name(name.to_string())];
        while i < args.len() {
            let a = &args[i];
            if a == "--" || a == "-" {
                i += 1;
                break;
            }
            if let Some(long) = a.strip_prefix("--") {
                match long {
                    "posix" => opts.push(crate::execute::StartOption::Set("posix".into(), true)),
                    "rcfile" | "init-file" => {
                        i += 1;
                        let Some(file) = args.get(i) else {
                            self.err_raw(&format!("bash: {long}: option requires an argument\n"));
                            return Ok(2);
                        };
                        opts.push(crate::execute::StartOption::RcFile(file.clone()));
                    }
                    "norc" => opts.push(crate::execute::StartOption::NoRc),
                    // What the shell was started as, for `shopt login_shell`.
                    "login" => opts.push(crate::execute::StartOption::Shopt(
                        "login_shell".into(),
                        true,
                    )),
                    "noprofile" | "noediting" | "restricted" | "verbose" => {}
                    // bash prints these and exits, whatever follows.
                    "help" => return Ok(self.out_str(BASH_HELP)),
                    "version" => {
                        return Ok(self.out_str(&format!("{BASH_VERSION_LINE}{BASH_VERSION_TEXT}")));
                    }
                    _ => {
                        self.err_raw(&format!("bash: --{long}: invalid option\n"));
                        return Ok(2);
                    }
                }
                i += 1;
                continue;
            }
            if !((a.starts_with('-') || a.starts_with('+')) && a.len() > 1) {
                break;
            }
            let on = a.starts_with('-');
            for c in a[1..].chars() {
                match c {
                    'c' => dash_c = true,
                    'o' | 'O' => {
                        i += 1;
                        let Some(name) = args.get(i) else {
                            self.err_raw(&format!("bash: -{c}: option requires an argument\n"));
                            return Ok(2);
                        };
                        opts.push(if c == 'o' {
                            crate::execute::StartOption::Set(name.clone(), on)
                        } else {
                            crate::execute::StartOption::Shopt(name.clone(), on)
                        });
                    }
                    'i' => opts.push(crate::execute::StartOption::Interactive),
                    's' => dash_s = true,
                    'l' if on => opts.push(crate::execute::StartOption::Shopt(
                        "login_shell".into(),
                        true,
                    )),
                    // Restricted and privileged shells are not modelled: the flags are
                    // accepted and the shell runs as it would.
                    'l' | 'r' | 'p' => {}
                    c => match crate::options::option_letter(c) {
                        Some(name) => opts.push(crate::execute::StartOption::Set(name.into(), on)),
                        None => {
                            self.err_raw(&format!("bash: {}{c}: invalid option\n", &a[..1]));
                            return Ok(2);
                        }
                    },
                }
            }
            i += 1;
        }
        let command = if dash_c {
            match args.get(i) {
                Some(c) => {
                    i += 1;
                    Some(c.clone())
                }
                None => {
                    self.err_raw("bash: -c: option requires an argument\n");
                    return Ok(2);
                }
            }
        } else {
            None
        };
        let env = self.st.vars.environ();
        if let Some(cmd) = command {
            let arg0 = args.get(i).cloned().unwrap_or_else(|| "bash".into());
            let rest = args.get(i + 1..).map(|s| s.to_vec()).unwrap_or_default();
            return self.run_shell_script(&cmd, arg0, rest, env, Invocation::DashC, &opts);
        }
        let invocation = if args.get(i).is_some() && !dash_s {
            Invocation::File
        } else {
            Invocation::Stdin {
                seekable: matches!(self.fds.get(0), Some(Fd::In(crate::interp::InSrc::File(_)))),
            }
        };
        let (text, arg0, rest) = match args.get(i) {
            // `bash -s ARG...`: the script comes from stdin, the words are its parameters.
            Some(_) if dash_s => (String::new(), "bash".into(), args[i..].to_vec()),
            Some(file) => {
                let path = wasmsand_vfs::path::join(&self.st.cwd, file);
                let data = self.rt.vfs.lock().read(&path);
                match data {
                    Ok(d) if crate::execute::looks_binary(&d) => {
                        self.err_raw(&format!("{file}: {file}: cannot execute binary file\n"));
                        return Ok(126);
                    }
                    Ok(d) => (
                        wasmsand_exec::raw::decode(&d),
                        file.clone(),
                        args[i + 1..].to_vec(),
                    ),
                    Err(e) => {
                        self.err_raw(&format!("bash: {file}: {}\n", strerror(e.errno)));
                        return Ok(127);
                    }
                }
            }
            // Read by the new shell a command at a time (`crate::input`).
            None => (String::new(), "bash".into(), Vec::new()),
        };
        self.run_shell_script(&text, arg0, rest, env, invocation, &opts)
    }
}

/// `bash --help`, as Debian's bash 5.2.15 prints it (its first line has that `-` before the
/// machine type).
const BASH_HELP: &str = "GNU bash, version 5.2.15(1)-release-(x86_64-pc-linux-gnu)
Usage:\tbash [GNU long option] [option] ...
\tbash [GNU long option] [option] script-file ...
GNU long options:
\t--debug
\t--debugger
\t--dump-po-strings
\t--dump-strings
\t--help
\t--init-file
\t--login
\t--noediting
\t--noprofile
\t--norc
\t--posix
\t--pretty-print
\t--rcfile
\t--restricted
\t--verbose
\t--version
Shell options:
\t-ilrsD or -c command or -O shopt_option\t\t(invocation only)
\t-abefhkmnptuvxBCEHPT or -o option
Type `bash -c \"help set\"' for more information about shell options.
Type `bash -c help' for more information about shell builtin commands.
Use the `bashbug' command to report bugs.

bash home page: <http://www.gnu.org/software/bash>
General help using GNU software: <http://www.gnu.org/gethelp/>
";

/// The first line of `bash --version`, which `help` prints too.
pub(super) const BASH_VERSION_LINE: &str =
    "GNU bash, version 5.2.15(1)-release (x86_64-pc-linux-gnu)";

/// `bash --version`, after its first line.
const BASH_VERSION_TEXT: &str = "
Copyright (C) 2022 Free Software Foundation, Inc.
License GPLv3+: GNU GPL version 3 or later <http://gnu.org/licenses/gpl.html>

This is free software; you are free to change and redistribute it.
There is NO WARRANTY, to the extent permitted by law.
";

/// The descriptor a path names when it is one of the shell's own (`/dev/stdin`, `/dev/fd/N`,
/// `/proc/self/fd/N`).
fn input_fd_path(path: &str) -> Option<u32> {
    if path == "/dev/stdin" {
        return Some(0);
    }
    path.strip_prefix("/dev/fd/")
        .or_else(|| path.strip_prefix("/proc/self/fd/"))
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|n| n.parse().ok())
}
