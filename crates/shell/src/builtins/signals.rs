//! `trap` and `kill`, and the signal table they share.

use crate::interp::{Flow, FlowResult, Interp};

impl Interp {
    pub(super) fn b_trap(&mut self, args: &[String]) -> i32 {
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
                    // Always plain single quotes, control characters and newlines
                    // included: bash's trap listing never switches to $'...'.
                    let quoted = format!("'{}'", action.replace('\'', "'\\''"));
                    text.push_str(&format!("trap -- {quoted} {sig}\n"));
                }
            }
            let s = self.out_str(&text);
            return if s != 0 { s } else { status };
        }
        // One word that names no signal (`trap badsig`, `trap 99`, `trap -`) is a usage
        // error in bash, not an invalid signal.
        if args.len() == 1 && (args[0] == "-" || signal_name(&args[0]).is_none()) {
            self.usage("trap");
            return 2;
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
            // Ignored since the shell started: bash changes nothing, and says nothing.
            if self.st.untrappable.contains(&sig) && !self.st.opts.interactive {
                continue;
            }
            match &action {
                Some(a) => {
                    if sig == "SIGINT" && !a.is_empty() {
                        self.int_trapped = true;
                    }
                    self.st.traps.insert(sig, a.clone());
                }
                None => {
                    self.st.traps.remove(&sig);
                }
            }
        }
        self.publish_traps();
        status
    }

    /// A `bash` of the run (not the run's own shell, nor a subshell) tells the run which
    /// signals it traps (see [`crate::interp::Runtime::trapping_shells`]).
    pub(crate) fn publish_traps(&mut self) {
        if self.nested_shell_pid.is_none() || !self.is_shell_itself() {
            return;
        }
        let pid = self.shell_pid();
        let mut shells = self.rt.trapping_shells.lock();
        if self.st.traps.is_empty() {
            shells.remove(&pid);
        } else {
            let trapped = self
                .st
                .traps
                .keys()
                .filter(|k| k.starts_with("SIG"))
                .cloned()
                .collect();
            shells.insert(pid, trapped);
        }
    }

    /// `kill`: signals can only reach the shell itself (`kill -USR1 $$` runs its trap, or
    /// ends it as the signal's default action would); other processes are threads here.
    pub(super) fn b_kill(&mut self, args: &[String]) -> FlowResult {
        let usage = |me: &mut Interp| {
            me.usage("kill");
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
                } else if a.eq_ignore_ascii_case("EXIT") {
                    text.push_str("0\n");
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
        let bashpid = self.bashpid();
        for p in pids {
            let pid = p.parse::<u32>().ok();
            // From a subshell, `$$` is the shell that started it (and a `bash -c` has the
            // shells around it): that shell takes the signal when the command it waits for
            // ends, with its own traps.
            if let Some(pid) = pid
                && pid != bashpid
                && (pid == self.shell_pid() || self.outer_shells.contains(&pid))
            {
                if sig != "0" && sig != "EXIT" {
                    self.rt.pending_signals.lock().push((pid, sig.clone()));
                }
                continue;
            }
            let own = pid == Some(bashpid);
            // A job that is a `bash` with traps takes a trapped signal when the command it
            // runs ends. An untrapped SIGINT it drops: bash, finding that the command it
            // waited for did not die of it, takes the interrupt as handled and reads on.
            if !own
                && sig != "0"
                && sig != "EXIT"
                && let Some(job_pid) = self.job_pid(p)
                && let Some(trapped) = self.rt.trapping_shells.lock().get(&job_pid).cloned()
                && (trapped.contains(&sig) || sig == "SIGINT")
            {
                if trapped.contains(&sig) {
                    self.rt.pending_signals.lock().push((job_pid, sig.clone()));
                }
                continue;
            }
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
            // A signal sent from its own trap's action comes after the action, as a handler
            // blocks its signal: never a trap inside itself without end.
            if self.trap_running(crate::interp::TrapKind::Signal) {
                self.rt.pending_signals.lock().push((bashpid, sig.clone()));
                continue;
            }
            self.take_signal(&sig)?;
        }
        Ok(status)
    }

    /// This shell receives `sig` (canonical name): its trap runs, an ignored signal and one
    /// ignored by default do nothing, any other ends the shell with 128 + its number.
    pub(crate) fn take_signal(&mut self, sig: &str) -> FlowResult<()> {
        match self.st.traps.get(sig).cloned() {
            Some(action) if action.is_empty() => Ok(()),
            Some(action) => self.run_trap_action(&action, crate::interp::TrapKind::Signal),
            None => {
                let bare = sig.strip_prefix("SIG").unwrap_or(sig);
                if matches!(bare, "CHLD" | "URG" | "WINCH" | "CONT") {
                    return Ok(());
                }
                let n = signal_number(bare).unwrap_or(15);
                Err(Flow::Exit(128 + n as i32))
            }
        }
    }

    /// [`Self::take_signal`] for a builtin that a trapped signal interrupts (`wait`): its
    /// status is then 128 + the signal's number.
    pub(crate) fn take_signal_status(&mut self, sig: &str) -> FlowResult<i32> {
        self.take_signal(sig)?;
        Ok(128 + signal_number(sig).unwrap_or(15) as i32)
    }

    /// The signals subshells sent this shell while it waited, in the order they came.
    pub(crate) fn take_pending_signals(&mut self) -> FlowResult<()> {
        if self.trap_running(crate::interp::TrapKind::Signal) {
            return Ok(());
        }
        let me = self.shell_pid();
        loop {
            let next = {
                let mut q = self.rt.pending_signals.lock();
                q.iter()
                    .position(|(pid, _)| *pid == me)
                    .map(|i| q.remove(i).1)
            };
            match next {
                Some(sig) => self.take_signal(&sig)?,
                None => return Ok(()),
            }
        }
    }
}

/// The number of a signal by its canonical name (`SIGINT`).
fn signal_number(sig: &str) -> Option<u32> {
    let bare = sig.strip_prefix("SIG").unwrap_or(sig);
    signals()
        .into_iter()
        .find(|(_, s)| s == bare)
        .map(|(n, _)| n)
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

/// What `compgen -A signal` offers, in bash's order: the pseudo-signal `EXIT`, the
/// numbered signals (bash names the two glibc keeps for itself `SIGJUNK(32)` and
/// `SIGJUNK(33)`), then `DEBUG`, `ERR` and `RETURN`.
pub(super) fn completion_names() -> Vec<String> {
    let mut out = vec!["EXIT".to_string()];
    for (n, name) in signals() {
        if n == 34 {
            out.push("SIGJUNK(32)".into());
            out.push("SIGJUNK(33)".into());
        }
        out.push(format!("SIG{name}"));
    }
    out.extend(["DEBUG", "ERR", "RETURN"].map(String::from));
    out
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
