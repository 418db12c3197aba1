//! Commands that are programs in bash but builtins here, because a WASI program can neither
//! start another program nor change permission bits: `env`, `xargs`, `chmod`, and `sleep`
//! (which waits on the run's deadline and cancel token).

use std::time::{Duration, Instant};

use crate::error::strerror;
use crate::interp::{Fd, FlowResult, InSrc, Interp};
use crate::vars::{ATTR_EXPORT, Value, Var};

use super::io::unescape_delim;

impl Interp {
    pub(super) fn b_sleep(&mut self, args: &[String]) -> FlowResult {
        if args.is_empty() {
            // GNU sleep's words: it is a program, so no shell prefix.
            self.err_raw("sleep: missing operand\nTry 'sleep --help' for more information.\n");
            return Ok(1);
        }
        // GNU sleep ends its options at `--`; with nothing after it, it sleeps no time.
        let args = match args.first().map(String::as_str) {
            Some("--") => &args[1..],
            _ => args,
        };
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

    /// GNU `time [-p] [-f FORMAT] [-o FILE [-a]] [-v] [-q] COMMAND [ARG]...`: runs the command as
    /// a program and reports on stderr (or FILE) in GNU time's formats. The sandbox measures
    /// wall-clock time only: user and system time, memory and I/O counts read 0.
    pub(super) fn b_time_program(&mut self, args: &[String]) -> FlowResult {
        const DEFAULT: &str = "%Uuser %Ssystem %Eelapsed %PCPU (%Xavgtext+%Davgdata %Mmaxresident)k\n%Iinputs+%Ooutputs (%Fmajor+%Rminor)pagefaults %Wswaps";
        const PORTABLE: &str = "real %e\nuser %U\nsys %S";
        const VERBOSE: &str = "\tCommand being timed: \"%C\"\n\tUser time (seconds): %U\n\tSystem time (seconds): %S\n\tPercent of CPU this job got: %P\n\tElapsed (wall clock) time (h:mm:ss or m:ss): %E\n\tAverage shared text size (kbytes): %X\n\tAverage unshared data size (kbytes): %D\n\tAverage stack size (kbytes): %p\n\tAverage total size (kbytes): %K\n\tMaximum resident set size (kbytes): %M\n\tAverage resident set size (kbytes): %t\n\tMajor (requiring I/O) page faults: %F\n\tMinor (reclaiming a frame) page faults: %R\n\tVoluntary context switches: %w\n\tInvoluntary context switches: %c\n\tSwaps: %W\n\tFile system inputs: %I\n\tFile system outputs: %O\n\tSocket messages sent: %s\n\tSocket messages received: %r\n\tSignals delivered: %k\n\tPage size (bytes): %Z\n\tExit status: %x";
        let usage = |i: &mut Self, what: String| {
            i.err_raw(&format!(
                "time: {what}\nTry 'time --help' for more information.\n"
            ));
            Ok(125)
        };
        // GNU time reads TIME from its environment: the shell's exported variables.
        let mut format = self
            .st
            .vars
            .environ()
            .into_iter()
            .find_map(|(k, v)| (k == "TIME").then_some(v))
            .unwrap_or_else(|| DEFAULT.to_string());
        let (mut output, mut append, mut quiet, mut portable) =
            (None::<String>, false, false, false);
        let mut i = 0;
        while let Some(a) = args.get(i) {
            let next = |i: &mut usize| {
                *i += 1;
                args.get(*i).cloned()
            };
            match a.as_str() {
                "--" => {
                    i += 1;
                    break;
                }
                "-p" | "--portability" => {
                    format = PORTABLE.into();
                    portable = true;
                }
                "-v" | "--verbose" => format = VERBOSE.into(),
                "-a" | "--append" => append = true,
                "-q" | "--quiet" => quiet = true,
                "-V" | "--version" => {
                    return Ok(self.out_str(
                        "time (GNU Time) UNKNOWN\nCopyright (C) 2018 Free Software Foundation, Inc.\nLicense GPLv3+: GNU GPL version 3 or later <https://gnu.org/licenses/gpl.html>.\nThis is free software: you are free to change and redistribute it.\nThere is NO WARRANTY, to the extent permitted by law.\n\nWritten by David Keppel, David MacKenzie, and Assaf Gordon.\n",
                    ));
                }
                "--help" => {
                    return Ok(self.out_str(
                        "Usage: time [OPTION...] COMMAND [ARG...]\nRun COMMAND, then print its running time on standard error.\n",
                    ));
                }
                "-f" | "-o" => {
                    let Some(v) = next(&mut i) else {
                        return usage(
                            self,
                            format!("option requires an argument -- '{}'", &a[1..]),
                        );
                    };
                    if a == "-f" {
                        format = v;
                    } else {
                        output = Some(v);
                    }
                }
                s if s.starts_with("--format=") => format = s["--format=".len()..].into(),
                s if s.starts_with("--output=") => output = Some(s["--output=".len()..].into()),
                s if s.starts_with('-') && s.len() > 1 => {
                    return usage(self, format!("invalid option -- '{}'", &s[1..2]));
                }
                _ => break,
            }
            i += 1;
        }
        let argv = args[i..].to_vec();
        if argv.is_empty() {
            return usage(self, "missing program to run".into());
        }
        let started = Instant::now();
        let status = self.run_plain_argv(argv.clone())?;
        let secs = started.elapsed().as_secs_f64();
        let mut report = String::new();
        // POSIX's format (-p) has no such line.
        let quiet = quiet || portable;
        if !quiet && status > 128 {
            report.push_str(&format!("Command terminated by signal {}\n", status - 128));
        } else if !quiet && status != 0 {
            report.push_str(&format!("Command exited with non-zero status {status}\n"));
        }
        report.push_str(&time_format(&format, secs, status, &argv.join(" ")));
        report.push('\n');
        match output {
            None => self.err_raw(&report),
            Some(file) => {
                let path = wasmsand_vfs::path::join(&self.st.cwd, &file);
                if append {
                    let old = self.rt.vfs.lock().read(&path).map(|d| d.to_vec());
                    if let Ok(old) = old {
                        report = wasmsand_exec::raw::decode(&old) + &report;
                    }
                }
                let written = self
                    .rt
                    .vfs
                    .lock()
                    .write(&path, wasmsand_exec::raw::encode(&report));
                if let Err(e) = written {
                    self.err_raw(&format!(
                        "time: cannot open output file: {}\n",
                        strerror(e.errno)
                    ));
                }
            }
        }
        Ok(status)
    }

    /// `env`: the guest's could not start a program, so the shell runs the command itself
    /// with the modified environment (GNU's options; the signal ones are accepted and mean
    /// nothing here, as no signal reaches a guest from outside).
    pub(super) fn b_env(&mut self, args: &[String]) -> FlowResult {
        let mut env = self.st.vars.environ();
        // What a shell exports to a program it runs: `_` is the program's path (not when
        // `env` itself ran this one: that environment is exactly what it was given).
        if !self.exact_env {
            env.retain(|(k, _)| k != "_");
            env.push(("_".into(), "/usr/bin/env".into()));
            env.sort();
        }
        let mut args: Vec<String> = args.to_vec();
        let (mut null, mut debug, mut chdir) = (false, false, None::<String>);
        let mut notes = String::new();
        let fail = |me: &mut Self, msg: &str| {
            me.err_raw(&format!(
                "env: {msg}\nTry 'env --help' for more information.\n"
            ));
            Ok(125)
        };
        let mut i = 0;
        while i < args.len() {
            let a = args[i].clone();
            if a == "-" {
                env.clear();
                notes.push_str("cleaning environ\n");
                i += 1;
                break;
            }
            if a == "--" {
                i += 1;
                break;
            }
            if let Some(long) = a.strip_prefix("--") {
                let (name, value) = match long.split_once('=') {
                    Some((n, v)) => (n, Some(v.to_string())),
                    None => (long, None),
                };
                const LONG: [&str; 12] = [
                    "ignore-environment",
                    "null",
                    "unset",
                    "chdir",
                    "split-string",
                    "block-signal",
                    "default-signal",
                    "ignore-signal",
                    "list-signal-handling",
                    "debug",
                    "help",
                    "version",
                ];
                let matches: Vec<&str> = LONG
                    .iter()
                    .copied()
                    .filter(|l| l.starts_with(name))
                    .collect();
                let full = match matches.as_slice() {
                    [one] => *one,
                    _ if LONG.contains(&name) => name,
                    [] => return fail(self, &format!("unrecognized option '{a}'")),
                    _ => return fail(self, &format!("option '{a}' is ambiguous")),
                };
                let needs_value = matches!(full, "unset" | "chdir" | "split-string");
                let value = match value {
                    Some(v) if needs_value || full.ends_with("-signal") => Some(v),
                    Some(_) => {
                        return fail(
                            self,
                            &format!("option '--{full}' doesn't allow an argument"),
                        );
                    }
                    None if needs_value => {
                        i += 1;
                        match args.get(i) {
                            Some(v) => Some(v.clone()),
                            None => {
                                return fail(
                                    self,
                                    &format!("option '--{full}' requires an argument"),
                                );
                            }
                        }
                    }
                    None => None,
                };
                match full {
                    "help" => return Ok(self.out_str(ENV_HELP)),
                    "version" => {
                        let text = super::system::coreutils_version(
                            "env",
                            "Richard Mlynarik, David MacKenzie, and Assaf Gordon",
                        );
                        return Ok(self.out_str(&text));
                    }
                    "ignore-environment" => {
                        env.clear();
                        notes.push_str("cleaning environ\n");
                    }
                    "null" => null = true,
                    "debug" => debug = true,
                    "unset" => {
                        let n = value.unwrap_or_default();
                        env.retain(|(k, _)| *k != n);
                        notes.push_str(&format!("unset:    {n}\n"));
                    }
                    "chdir" => chdir = value,
                    "split-string" => {
                        let words = split_env_string(&value.unwrap_or_default(), &env);
                        args.splice(i + 1..i + 1, words);
                    }
                    _ => {}
                }
                i += 1;
                continue;
            }
            if !(a.starts_with('-') && a.len() > 1) {
                break;
            }
            // Short options, several in one word; one that takes a value takes the rest of
            // the word or the next one.
            let letters: Vec<char> = a[1..].chars().collect();
            let mut j = 0;
            while j < letters.len() {
                let c = letters[j];
                j += 1;
                match c {
                    'i' => {
                        env.clear();
                        notes.push_str("cleaning environ\n");
                    }
                    '0' => null = true,
                    'v' => debug = true,
                    'u' | 'C' | 'S' => {
                        let rest: String = letters[j..].iter().collect();
                        j = letters.len();
                        let value = if !rest.is_empty() {
                            rest
                        } else {
                            i += 1;
                            match args.get(i) {
                                Some(v) => v.clone(),
                                None => {
                                    return fail(
                                        self,
                                        &format!("option requires an argument -- '{c}'"),
                                    );
                                }
                            }
                        };
                        match c {
                            'u' => {
                                env.retain(|(k, _)| *k != value);
                                notes.push_str(&format!("unset:    {value}\n"));
                            }
                            'C' => chdir = Some(value),
                            _ => {
                                let words = split_env_string(&value, &env);
                                args.splice(i + 1..i + 1, words);
                            }
                        }
                    }
                    _ => return fail(self, &format!("invalid option -- '{c}'")),
                }
            }
            i += 1;
        }
        while let Some((k, v)) = args.get(i).and_then(|a| a.split_once('=')) {
            notes.push_str(&format!("setenv:   {k}={v}\n"));
            let (k, v) = (k.to_string(), v.to_string());
            env.retain(|(name, _)| *name != k);
            env.push((k, v));
            i += 1;
        }
        let cmd = args[i.min(args.len())..].to_vec();
        if cmd.is_empty() {
            if chdir.is_some() {
                return fail(self, "must specify command with --chdir (-C)");
            }
            if debug {
                self.err_raw(&notes);
            }
            let end = if null { '\0' } else { '\n' };
            let text: String = env.iter().map(|(k, v)| format!("{k}={v}{end}")).collect();
            return Ok(self.out_str(&text));
        }
        if null {
            return fail(self, "cannot specify --null (-0) with command");
        }
        // GNU quotes as the locale does: ‘’ in a UTF-8 one.
        let (open, close) = if self.utf8_locale() {
            ("‘", "’")
        } else {
            ("'", "'")
        };
        if let Some(dir) = &chdir {
            notes.push_str(&format!("chdir:    {open}{dir}{close}\n"));
        }
        if debug {
            notes.push_str(&format!("executing: {}\n", cmd[0]));
            for (n, a) in cmd.iter().enumerate() {
                notes.push_str(&format!("   arg[{n}]= {open}{a}{close}\n"));
            }
            self.err_raw(&notes);
        }
        let name = cmd[0].clone();
        let runs_in_shell = self.builtin_enabled(&name) || self.st.functions.contains_key(&name);
        if !runs_in_shell && chdir.is_none() {
            let outer = std::mem::replace(&mut self.exact_env, true);
            let r = self.run_external(cmd, env);
            self.exact_env = outer;
            return r;
        }
        // A subshell whose exported variables are exactly `env`, in the directory asked for.
        let mut child = self.fork();
        child.exact_env = true;
        if let Some(dir) = chdir {
            let target = wasmsand_vfs::path::join(&child.st.cwd, &dir);
            let is_dir = child.rt.vfs.lock().stat(&target).map(|m| m.file_type);
            if !matches!(is_dir, Ok(wasmsand_vfs::FileType::Dir)) {
                let why = match is_dir {
                    Ok(_) => "Not a directory".to_string(),
                    Err(e) => strerror(e.errno).to_string(),
                };
                self.err_raw(&format!(
                    "env: cannot change directory to {open}{dir}{close}: {why}\n"
                ));
                return Ok(125);
            }
            child.st.cwd = target;
        }
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
        if !runs_in_shell {
            let s = child.run_as_subshell(|c| c.run_external(cmd, env));
            drop(child);
            self.check()?;
            return Ok(s);
        }
        let s = child.run_as_subshell(|c| c.run_argv(cmd));
        drop(child);
        self.check()?;
        Ok(s)
    }

    pub(super) fn b_xargs(&mut self, args: &[String]) -> FlowResult {
        let o = match XargsOpts::parse(args) {
            Ok(o) => o,
            Err(msg) => {
                self.err_raw(&format!(
                    "xargs: {msg}\nTry 'xargs --help' for more information.\n"
                ));
                return Ok(1);
            }
        };
        let mut cmd: Vec<String> = args[o.command..].to_vec();
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
        let text = wasmsand_exec::raw::decode(&input);
        // Items, grouped by the input lines that end them when -L counts lines.
        let lines: Vec<Vec<String>> = match (o.delim, &o.replace) {
            (Some(d), _) => vec![
                text.split(d as char)
                    .map(str::to_string)
                    .filter(|s| !s.is_empty())
                    .collect(),
            ],
            (None, Some(_)) => text
                .lines()
                .map(|l| l.trim_start().to_string())
                .filter(|l| !l.is_empty())
                .map(|l| vec![l])
                .collect(),
            (None, None) => split_lines(&text, o.eof.as_deref()),
        };
        let items: Vec<String> = lines.iter().flatten().cloned().collect();
        if items.is_empty() && (o.no_run_empty || o.replace.is_some()) {
            return Ok(0);
        }
        let batches = match &o.replace {
            Some(r) => items
                .iter()
                .map(|it| cmd.iter().map(|c| c.replace(r.as_str(), it)).collect())
                .collect(),
            None => match batch(&cmd, &lines, &o) {
                Ok(b) => b,
                Err(msg) => {
                    self.err_raw(&format!("xargs: {msg}\n"));
                    return Ok(1);
                }
            },
        };
        let mut status = 0;
        let saved_stdin = self.fds.get(0).cloned();
        self.fds.set(0, Some(Fd::In(InSrc::Empty)));
        for argv in batches {
            self.check()?;
            if o.trace {
                let line = format!("{}\n", argv.join(" "));
                self.err_raw(&line);
            }
            let s = self.run_argv(argv)?;
            // GNU xargs stops at once when the command cannot be found or run.
            if s == 255 || s == 126 || s == 127 {
                status = if s == 255 { 124 } else { s };
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
        if self.builtin_enabled(&name) {
            return self.run_builtin(&name, &argv);
        }
        let env = self.st.vars.environ();
        self.run_external(argv, env)
    }

    /// Modes are the shell's to change: the guest `chmod` has no WASI call for it.
    pub(super) fn b_chmod(&mut self, args: &[String]) -> i32 {
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

/// xargs' options (GNU's, as getopt reads them: clusters, attached or separate values).
#[derive(Default)]
struct XargsOpts {
    max_args: Option<usize>,
    max_lines: Option<usize>,
    max_chars: Option<usize>,
    replace: Option<String>,
    delim: Option<u8>,
    eof: Option<String>,
    no_run_empty: bool,
    trace: bool,
    exit_on_size: bool,
    /// Index of the command's first word.
    command: usize,
}

impl XargsOpts {
    fn parse(args: &[String]) -> Result<XargsOpts, String> {
        let mut o = XargsOpts::default();
        let number = |opt: &str, v: &str| -> Result<usize, String> {
            v.parse::<usize>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("invalid number \"{v}\" for -{opt} option"))
        };
        let mut i = 0;
        while i < args.len() {
            let a = args[i].as_str();
            if a == "--" {
                i += 1;
                break;
            }
            if !a.starts_with('-') || a.len() < 2 {
                break;
            }
            if let Some(long) = a.strip_prefix("--") {
                let (name, value) = match long.split_once('=') {
                    Some((n, v)) => (n, Some(v.to_string())),
                    None => (long, None),
                };
                let required = |i: &mut usize| -> Result<String, String> {
                    match &value {
                        Some(v) => Ok(v.clone()),
                        None => {
                            *i += 1;
                            args.get(*i)
                                .cloned()
                                .ok_or_else(|| format!("option '--{name}' requires an argument"))
                        }
                    }
                };
                match name {
                    "null" => o.delim = Some(0),
                    "no-run-if-empty" => o.no_run_empty = true,
                    "verbose" => o.trace = true,
                    "exit" => o.exit_on_size = true,
                    "max-args" => o.max_args = Some(number("n", &required(&mut i)?)?),
                    "max-chars" => o.max_chars = Some(number("s", &required(&mut i)?)?),
                    "max-procs" => {
                        required(&mut i)?;
                    }
                    "delimiter" => o.delim = Some(unescape_delim(&required(&mut i)?)),
                    "max-lines" => {
                        o.max_lines = Some(match value {
                            Some(v) => number("l", &v)?,
                            None => 1,
                        })
                    }
                    "replace" => o.replace = Some(value.unwrap_or_else(|| "{}".into())),
                    "eof" => o.eof = value.filter(|v| !v.is_empty()),
                    _ => return Err(format!("unrecognized option '{a}'")),
                }
                i += 1;
                continue;
            }
            let chars: Vec<(usize, char)> = a.char_indices().skip(1).collect();
            for (at, c) in chars {
                let rest = &a[at + c.len_utf8()..];
                match c {
                    '0' => o.delim = Some(0),
                    'r' => o.no_run_empty = true,
                    't' => o.trace = true,
                    'x' => o.exit_on_size = true,
                    // Optional values: only attached ones.
                    'e' => {
                        o.eof = Some(rest.to_string()).filter(|v| !v.is_empty());
                        break;
                    }
                    'i' => {
                        o.replace = Some(if rest.is_empty() { "{}" } else { rest }.to_string());
                        break;
                    }
                    'l' => {
                        o.max_lines = Some(if rest.is_empty() {
                            1
                        } else {
                            number("l", rest)?
                        });
                        break;
                    }
                    'n' | 'L' | 'I' | 'd' | 'P' | 's' | 'E' => {
                        let v = if rest.is_empty() {
                            i += 1;
                            args.get(i)
                                .cloned()
                                .ok_or_else(|| format!("option requires an argument -- '{c}'"))?
                        } else {
                            rest.to_string()
                        };
                        match c {
                            'n' => o.max_args = Some(number("n", &v)?),
                            'L' => o.max_lines = Some(number("L", &v)?),
                            's' => o.max_chars = Some(number("s", &v)?),
                            'I' => o.replace = Some(v),
                            'd' => o.delim = Some(unescape_delim(&v)),
                            'E' => o.eof = Some(v).filter(|v| !v.is_empty()),
                            _ => {}
                        }
                        break;
                    }
                    _ => return Err(format!("invalid option -- '{c}'")),
                }
            }
            i += 1;
        }
        o.command = i.min(args.len());
        Ok(o)
    }
}

/// GNU's default room for one command line (its argument and environment space, less
/// headroom): what `xargs --show-limits` calls the size of the command buffer.
const XARGS_MAX_CHARS: usize = 128 * 1024;

/// Command lines of `cmd` and the items: at most `max_args` items, `max_lines` input lines and
/// `max_chars` bytes (each word with its terminating NUL, as the kernel counts them) each.
fn batch(cmd: &[String], lines: &[Vec<String>], o: &XargsOpts) -> Result<Vec<Vec<String>>, String> {
    let size = |w: &String| w.len() + 1;
    let base: usize = cmd.iter().map(size).sum();
    let max_chars = o.max_chars.unwrap_or(XARGS_MAX_CHARS);
    if base > max_chars {
        return Err("cannot fit single argument within argument list size limit".into());
    }
    let mut out: Vec<Vec<String>> = Vec::new();
    let mut cur: Vec<String> = Vec::new();
    let (mut bytes, mut nlines) = (base, 0usize);
    let flush = |cur: &mut Vec<String>, out: &mut Vec<Vec<String>>| {
        let mut v = cmd.to_vec();
        v.append(cur);
        out.push(v);
    };
    for line in lines {
        for item in line {
            let full = o.max_args.is_some_and(|n| cur.len() >= n);
            if full || (bytes + size(item) > max_chars && !cur.is_empty()) {
                if !full && o.exit_on_size {
                    return Err("argument list too long".into());
                }
                flush(&mut cur, &mut out);
                bytes = base;
                nlines = 0;
            }
            if bytes + size(item) > max_chars {
                return Err("argument line too long".into());
            }
            bytes += size(item);
            cur.push(item.clone());
        }
        if o.max_lines.is_some() && !line.is_empty() {
            nlines += 1;
            if o.max_lines.is_some_and(|n| nlines >= n) {
                flush(&mut cur, &mut out);
                bytes = base;
                nlines = 0;
            }
        }
    }
    if !cur.is_empty() || out.is_empty() {
        flush(&mut cur, &mut out);
    }
    Ok(out)
}

/// The default input parsing, item by item, grouped by the input line that ends them (a line
/// ending in a blank goes on into the next, as -L reads them), up to the end-of-file string.
fn split_lines(text: &str, eof: Option<&str>) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = Vec::new();
    let mut cur: Vec<String> = Vec::new();
    for line in text.split_inclusive('\n') {
        let items = split_xargs(line);
        for it in items {
            if Some(it.as_str()) == eof {
                if !cur.is_empty() {
                    out.push(cur);
                }
                return out;
            }
            cur.push(it);
        }
        let body = line.strip_suffix('\n').unwrap_or(line);
        if !body.ends_with([' ', '\t']) && !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
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

/// GNU time's `%` escapes (and `\n`, `\t`, `\\`) for a run of `secs` seconds that ended with
/// `status`. What the sandbox does not measure reads 0.
fn time_format(format: &str, secs: f64, status: i32, command: &str) -> String {
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        match c {
            '%' => match chars.next() {
                Some('e') => out.push_str(&format!("{secs:.2}")),
                Some('E') => {
                    let cs = (secs * 100.0).round() as u64;
                    let (h, m, s, c) = (cs / 360_000, cs / 6000 % 60, cs / 100 % 60, cs % 100);
                    if h > 0 {
                        out.push_str(&format!("{h}:{m:02}:{s:02}"));
                    } else {
                        out.push_str(&format!("{m}:{s:02}.{c:02}"));
                    }
                }
                Some('U' | 'S') => out.push_str("0.00"),
                Some('P') => out.push_str("0%"),
                Some('x') => out.push_str(&status.to_string()),
                Some('C') => out.push_str(command),
                Some('Z') => out.push_str("4096"),
                Some('%') => out.push('%'),
                Some(
                    'M' | 't' | 'K' | 'D' | 'p' | 'X' | 'F' | 'R' | 'W' | 'c' | 'w' | 'I' | 'O'
                    | 'r' | 's' | 'k',
                ) => out.push('0'),
                Some(other) => {
                    out.push('?');
                    out.push(other);
                }
                None => out.push('?'),
            },
            '\\' => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('\\') => out.push('\\'),
                Some(other) => {
                    out.push('?');
                    out.push('\\');
                    out.push(other);
                }
                None => out.push('\\'),
            },
            c => out.push(c),
        }
    }
    out
}

/// `env -S STRING`: words split at blanks, with GNU's quotes, backslash escapes and `${NAME}`
/// from the environment being built.
fn split_env_string(text: &str, env: &[(String, String)]) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur: Option<String> = None;
    let mut chars = text.chars().peekable();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match (quote, c) {
            (None, ' ' | '\t' | '\n') => {
                if let Some(w) = cur.take() {
                    words.push(w);
                }
            }
            (None, '#') if cur.is_none() => break,
            (None, '\'' | '"') => {
                quote = Some(c);
                cur.get_or_insert_with(String::new);
            }
            (Some(q), _) if c == q => quote = None,
            (Some('\''), _) => cur.get_or_insert_with(String::new).push(c),
            (_, '\\') => {
                let Some(n) = chars.next() else { break };
                let w = cur.get_or_insert_with(String::new);
                match n {
                    'n' => w.push('\n'),
                    't' => w.push('\t'),
                    'r' => w.push('\r'),
                    'f' => w.push('\x0c'),
                    'v' => w.push('\x0b'),
                    '_' if quote.is_none() => {
                        words.push(std::mem::take(w));
                        cur = None;
                    }
                    '_' => w.push(' '),
                    'c' => break,
                    other => w.push(other),
                }
            }
            (_, '$') if chars.peek() == Some(&'{') => {
                chars.next();
                let name: String = chars.by_ref().take_while(|&c| c != '}').collect();
                let value = env
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.as_str());
                cur.get_or_insert_with(String::new)
                    .push_str(value.unwrap_or(""));
            }
            _ => cur.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(cur);
    words
}

const ENV_HELP: &str = "Usage: env [OPTION]... [-] [NAME=VALUE]... [COMMAND [ARG]...]
Set each NAME to VALUE in the environment and run COMMAND.

Mandatory arguments to long options are mandatory for short options too.
  -i, --ignore-environment  start with an empty environment
  -0, --null           end each output line with NUL, not newline
  -u, --unset=NAME     remove variable from the environment
  -C, --chdir=DIR      change working directory to DIR
  -S, --split-string=S  process and split S into separate arguments;
                        used to pass multiple arguments on shebang lines
      --block-signal[=SIG]    block delivery of SIG signal(s) to COMMAND
      --default-signal[=SIG]  reset handling of SIG signal(s) to the default
      --ignore-signal[=SIG]   set handling of SIG signal(s) to do nothing
      --list-signal-handling  list non default signal handling to stderr
  -v, --debug          print verbose information for each processing step
      --help        display this help and exit
      --version     output version information and exit

A mere - implies -i.  If no COMMAND, print the resulting environment.

SIG may be a signal name like 'PIPE', or a signal number like '13'.
Without SIG, all known signals are included.  Multiple signals can be
comma-separated.

GNU coreutils online help: <https://www.gnu.org/software/coreutils/>
Full documentation <https://www.gnu.org/software/coreutils/env>
or available locally via: info '(coreutils) env invocation'
";
