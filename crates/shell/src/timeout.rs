//! `timeout` and `which`: commands that are separate programs on Linux but need the shell here.
//! A WASI program cannot start or stop another one, so `timeout` runs its command in a
//! subshell with a runtime of its own (its own deadline and cancellation), nested inside the
//! run's: the command is stopped at the earlier of the two, and only the inner one is a 124.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use wasmsand_exec::CancelToken;

use crate::interp::{Abort, Flow, FlowResult, Interp, Runtime, THREAD_STACK};

const TIMEOUT_HELP: &str = "\
Usage: timeout [OPTION] DURATION COMMAND [ARG]...
  or:  timeout [OPTION]
Start COMMAND, and stop it if it still runs after DURATION.

  --preserve-status      exit with the status of COMMAND even when it timed out
                           (128+N for signal N), instead of 124
  --foreground           accepted; there is no terminal in the sandbox
  -k, --kill-after=DURATION
                         accepted; a sandboxed command cannot ignore the first
                           signal, so it is always stopped at DURATION
  -s, --signal=SIGNAL    the signal to report as sent at the timeout (default TERM);
                           a name (TERM, SIGKILL) or a number
  -v, --verbose          say on stderr which signal was sent at the timeout
      --help             display this help and exit

DURATION is a number with an optional suffix: s (seconds, the default), m (minutes),
h (hours) or d (days). A duration of 0 disables the timeout. The command also ends at the
run's own deadline, which then ends the whole run.

Exit status: 124 if COMMAND timed out (and --preserve-status was not given), 125 if timeout
itself failed, 126 if COMMAND was found but cannot be run, 127 if it was not found, 137 if
it was sent KILL, otherwise the exit status of COMMAND.
";

const SIGNALS: &[(&str, i32)] = &[
    ("HUP", 1),
    ("INT", 2),
    ("QUIT", 3),
    ("ILL", 4),
    ("TRAP", 5),
    ("ABRT", 6),
    ("BUS", 7),
    ("FPE", 8),
    ("KILL", 9),
    ("USR1", 10),
    ("SEGV", 11),
    ("USR2", 12),
    ("PIPE", 13),
    ("ALRM", 14),
    ("TERM", 15),
    ("CHLD", 17),
    ("CONT", 18),
    ("STOP", 19),
    ("TSTP", 20),
    ("TTIN", 21),
    ("TTOU", 22),
    ("URG", 23),
    ("XCPU", 24),
    ("XFSZ", 25),
    ("VTALRM", 26),
    ("PROF", 27),
    ("WINCH", 28),
    ("IO", 29),
    ("PWR", 30),
    ("SYS", 31),
];

fn parse_signal(s: &str) -> Option<(String, i32)> {
    if let Ok(n) = s.parse::<i32>() {
        let name = SIGNALS
            .iter()
            .find(|(_, v)| *v == n)
            .map(|(k, _)| k.to_string())?;
        return Some((name, n));
    }
    let up = s.to_ascii_uppercase();
    let bare = up.strip_prefix("SIG").unwrap_or(&up);
    SIGNALS
        .iter()
        .find(|(k, _)| *k == bare)
        .map(|(k, v)| (k.to_string(), *v))
}

/// GNU's DURATION: a non-negative decimal number with an optional s/m/h/d suffix.
fn parse_duration(s: &str) -> Option<Duration> {
    let (num, mult) = match s.chars().last()? {
        's' => (&s[..s.len() - 1], 1.0),
        'm' => (&s[..s.len() - 1], 60.0),
        'h' => (&s[..s.len() - 1], 3600.0),
        'd' => (&s[..s.len() - 1], 86400.0),
        _ => (s, 1.0),
    };
    if num.is_empty() || !num.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return None;
    }
    let v: f64 = num.parse().ok()?;
    let secs = v * mult;
    if !secs.is_finite() || secs < 0.0 {
        return None;
    }
    // Longer than any run may last: the same as no timeout.
    Some(Duration::from_secs_f64(secs.min(1e9)))
}

impl Interp {
    fn timeout_usage(&mut self, msg: &str) -> FlowResult {
        self.err_raw(&format!(
            "timeout: {msg}\nTry 'timeout --help' for more information.\n"
        ));
        Ok(125)
    }

    pub(crate) fn b_timeout(&mut self, args: &[String]) -> FlowResult {
        let mut preserve = false;
        let mut verbose = false;
        let mut signal = ("TERM".to_string(), 15);
        let mut i = 0;
        while i < args.len() {
            let a = args[i].as_str();
            if a == "--" {
                i += 1;
                break;
            }
            if !a.starts_with('-') || a == "-" {
                break;
            }
            let (opt, inline) = match a.split_once('=') {
                Some((o, v)) if a.starts_with("--") => (o, Some(v.to_string())),
                _ => (a, None),
            };
            // Short options may carry their value glued (`-sKILL`, `-k5`).
            let (opt, inline) = match opt {
                _ if opt.starts_with("--") => (opt, inline),
                _ if opt.len() > 2 && (opt.starts_with("-s") || opt.starts_with("-k")) => {
                    (&opt[..2], Some(opt[2..].to_string()))
                }
                _ => (opt, inline),
            };
            let needs_value = matches!(opt, "-s" | "--signal" | "-k" | "--kill-after");
            let value = if needs_value {
                match inline {
                    Some(v) => Some(v),
                    None => {
                        i += 1;
                        match args.get(i) {
                            Some(v) => Some(v.clone()),
                            None => {
                                return self.timeout_usage(&format!(
                                    "option requires an argument -- '{}'",
                                    opt.trim_start_matches('-')
                                ));
                            }
                        }
                    }
                }
            } else {
                None
            };
            match opt {
                "--help" => {
                    return Ok(self.out_str(TIMEOUT_HELP));
                }
                "--version" => {
                    return Ok(self.out_str("timeout (wasmsand)\n"));
                }
                "--preserve-status" => preserve = true,
                "--foreground" => {}
                "-v" | "--verbose" => verbose = true,
                "-s" | "--signal" => {
                    let v = value.unwrap_or_default();
                    match parse_signal(&v) {
                        Some(s) => signal = s,
                        None => return self.timeout_usage(&format!("'{v}': invalid signal")),
                    }
                }
                "-k" | "--kill-after" => {
                    let v = value.unwrap_or_default();
                    if parse_duration(&v).is_none() {
                        return self.timeout_usage(&format!("invalid time interval '{v}'"));
                    }
                }
                _ if opt.starts_with("--") => {
                    return self.timeout_usage(&format!("unrecognized option '{opt}'"));
                }
                _ => {
                    return self.timeout_usage(&format!(
                        "invalid option -- '{}'",
                        &opt[1..2.min(opt.len())]
                    ));
                }
            }
            i += 1;
        }
        let rest = &args[i..];
        // GNU prints only the pointer to --help when operands are missing.
        if rest.len() < 2 {
            self.err_raw("Try 'timeout --help' for more information.\n");
            return Ok(125);
        }
        let dur_text = &rest[0];
        let Some(duration) = parse_duration(dur_text) else {
            return self.timeout_usage(&format!("invalid time interval '{dur_text}'"));
        };
        let cmd = rest[1..].to_vec();
        let name = cmd[0].clone();
        // GNU timeout execs a program: functions are not seen, builtins stand for the
        // programs of the same name.
        if !self.builtin_enabled(&name)
            && let Some((msg, status)) = self.program_problem(&name)
        {
            self.err_raw(&format!("timeout: failed to run command '{name}': {msg}\n"));
            return Ok(status);
        }
        if duration.is_zero() {
            let mut child = self.fork();
            let s = child.run_as_subshell(|c| c.run_plain_argv(cmd));
            drop(child);
            self.check()?;
            return Ok(s);
        }
        self.run_with_timeout(cmd, duration, preserve, verbose, signal)
    }

    /// Why `name` cannot be started as a program: message and GNU's status.
    fn program_problem(&self, name: &str) -> Option<(&'static str, i32)> {
        if name.contains('/') {
            let full = wasmsand_vfs::path::join(&self.st.cwd, name);
            let vfs = self.rt.vfs.lock();
            return match vfs.stat(&full) {
                Err(_) => Some(("No such file or directory", 127)),
                Ok(m) if m.file_type == wasmsand_vfs::FileType::Dir => {
                    Some(("Permission denied", 126))
                }
                Ok(m) if m.mode & 0o111 == 0 => Some(("Permission denied", 126)),
                Ok(_) => None,
            };
        }
        match self.find_in_path(name) {
            Some(p) => {
                let vfs = self.rt.vfs.lock();
                let runnable = vfs.stat(&p).is_ok_and(|m| m.mode & 0o111 != 0);
                (!runnable).then_some(("Permission denied", 126))
            }
            None => Some(("No such file or directory", 127)),
        }
    }

    /// Runs `argv` as a program would be: builtins or files, never functions.
    pub(crate) fn run_plain_argv(&mut self, argv: Vec<String>) -> FlowResult {
        let name = argv[0].clone();
        if self.builtin_enabled(&name) {
            return self.run_builtin(&name, &argv);
        }
        let env = self.st.vars.environ();
        self.run_external(argv, env)
    }

    fn run_with_timeout(
        &mut self,
        cmd: Vec<String>,
        duration: Duration,
        preserve: bool,
        verbose: bool,
        signal: (String, i32),
    ) -> FlowResult {
        self.reserve_job()?;
        let name = cmd[0].clone();
        let parent = self.rt.clone();
        let inner = Arc::new(Runtime {
            exec: parent.exec,
            vfs: parent.vfs.clone(),
            base_deadline: Some(Instant::now() + duration),
            compile_nanos: AtomicU64::new(0),
            cancel: CancelToken::new(),
            memory_limit: parent.memory_limit,
            tool_channel: parent.tool_channel.clone(),
            // The sandbox's process slots are the same inside; the run's count of programs
            // goes on inside.
            pids: parent.pids.clone(),
            open_files: parent.open_files.clone(),
            processes: AtomicUsize::new(parent.processes.load(Ordering::SeqCst)),
            next_pid: AtomicU32::new(parent.next_pid.load(Ordering::SeqCst)),
            detach: parent.detach.clone(),
            abort: Mutex::new(None),
            aborted: AtomicBool::new(false),
            started: parent.started,
            shell_pid: parent.shell_pid,
            pending_signals: parent.pending_signals.clone(),
            trapping_shells: parent.trapping_shells.clone(),
        });
        let mut child = self.fork();
        child.rt = inner.clone();
        let (tx, rx) = mpsc::channel();
        let spawned = std::thread::Builder::new()
            .stack_size(THREAD_STACK)
            .spawn(move || {
                let s = child.run_as_subshell(|c| c.run_plain_argv(cmd));
                drop(child);
                let _ = tx.send(s);
            });
        if let Err(e) = spawned {
            parent.pids.release();
            return Err(self.limit(format!("fork: {e}")));
        }
        // The run's own deadline and cancellation reach the command through its token; the
        // time it spent compiling modules moves the run's deadline as it moves its own.
        let status = loop {
            match rx.recv_timeout(Duration::from_millis(10)) {
                Ok(s) => break Some(s),
                Err(mpsc::RecvTimeoutError::Disconnected) => break None,
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
            let outer_deadline = parent
                .deadline()
                .map(|d| d + Duration::from_nanos(inner.compile_nanos.load(Ordering::Relaxed)));
            if parent.aborted.load(Ordering::Relaxed)
                || parent.cancel.is_cancelled()
                || outer_deadline.is_some_and(|d| Instant::now() >= d)
            {
                inner.cancel.cancel();
            }
        };
        parent.pids.release();
        parent.compile_nanos.fetch_add(
            inner.compile_nanos.load(Ordering::Relaxed),
            Ordering::Relaxed,
        );
        parent
            .processes
            .fetch_max(inner.processes.load(Ordering::SeqCst), Ordering::SeqCst);
        parent
            .next_pid
            .fetch_max(inner.next_pid.load(Ordering::SeqCst), Ordering::SeqCst);
        self.check()?;
        let Some(status) = status else {
            return Err(self.limit("timeout: the command's thread failed".into()));
        };
        match inner.abort.lock().clone() {
            None => Ok(status),
            Some(Abort::Timeout) => {
                if verbose {
                    self.err_raw(&format!(
                        "timeout: sending signal {} to command '{}'\n",
                        signal.0, name
                    ));
                }
                // KILL also ends GNU timeout itself, whatever --preserve-status says.
                if signal.1 == 9 || preserve {
                    Ok(128 + signal.1)
                } else {
                    Ok(124)
                }
            }
            // Only the outer run cancels the inner one, and that was reported above.
            Some(Abort::Cancelled) => Err(Flow::Abort(Abort::Cancelled)),
            Some(a @ (Abort::Limit(_) | Abort::Fork(_))) => {
                if matches!(a, Abort::Fork(_)) {
                    self.usage.pids_exhausted.store(true, Ordering::Relaxed);
                }
                self.rt.set_abort(a.clone());
                Err(Flow::Abort(a))
            }
        }
    }

    pub(crate) fn b_which(&mut self, args: &[String]) -> i32 {
        let mut all = false;
        let mut i = 0;
        while i < args.len() && args[i].starts_with('-') && args[i].len() > 1 {
            match args[i].as_str() {
                "--" => {
                    i += 1;
                    break;
                }
                "-a" => all = true,
                "--help" => {
                    return self.out_str(
                        "Usage: which [-a] args\n\
                         Print the first match of each command name in $PATH (with -a every \
                         match); exit 1 if any is missing.\n",
                    );
                }
                o => {
                    // debianutils: the complaint on stderr, the usage on stdout.
                    self.err_raw(&format!("Illegal option {o}\n"));
                    let _ = self.out_str("Usage: which [-a] args\n");
                    return 2;
                }
            }
            i += 1;
        }
        let names = &args[i..];
        if names.is_empty() {
            return 1;
        }
        let mut status = 0;
        let mut text = String::new();
        for n in names {
            let found = self.which_all(n, all);
            if found.is_empty() {
                status = 1;
            }
            for p in found {
                text.push_str(&p);
                text.push('\n');
            }
        }
        let s = self.out_str(&text);
        if s != 0 { s } else { status }
    }

    /// Executable regular files named `name` along `$PATH` (or `name` itself when it holds a
    /// slash), as debianutils' `which` lists them: the `$PATH` entry as written, then the
    /// name.
    fn which_all(&self, name: &str, all: bool) -> Vec<String> {
        let vfs = self.rt.vfs.lock();
        let is_exe = |p: &str| {
            vfs.stat(&wasmsand_vfs::path::join(&self.st.cwd, p))
                .is_ok_and(|m| m.file_type == wasmsand_vfs::FileType::File && m.mode & 0o111 != 0)
        };
        if name.contains('/') {
            return if is_exe(name) {
                vec![name.to_string()]
            } else {
                Vec::new()
            };
        }
        let path = self.get_var("PATH").unwrap_or_default();
        let mut out = Vec::new();
        for dir in path.split(':') {
            let cand = if dir.is_empty() {
                format!("./{name}")
            } else if dir.ends_with('/') {
                format!("{dir}{name}")
            } else {
                format!("{dir}/{name}")
            };
            if is_exe(&cand) {
                out.push(cand);
                if !all {
                    break;
                }
            }
        }
        out
    }
}
