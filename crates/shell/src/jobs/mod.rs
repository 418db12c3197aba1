//! Background jobs: the job table (`cmd &`), `jobs`, `wait`, `kill` and `disown` on job specs
//! (`%1`, `%+`, `%-`, `%%`, `%name`, `%?text`), `nohup`/`setsid`, and jobs that outlive their
//! run.
//!
//! A job of the run is a thread with its own cancel token, a child of the run's: `kill %1`
//! ends that job alone, and the run's deadline or cancellation still ends every job. A job
//! the script asks to keep after the run (`nohup cmd &`, `setsid cmd &`, `cmd & disown`) is
//! handed to the host instead when it has a [`crate::DetachFn`] (the sandbox does: it becomes
//! a background process with its own pid and deadline); without one it stays a job of the run.

pub(crate) mod coproc;
pub(crate) mod table;

use std::time::Duration;

use crate::interp::{FlowResult, Interp};
pub use table::{DetachFn, DetachedJob};
pub(crate) use table::{Job, JobKind, JobView, disowned_next, wants_detach};

/// Ended jobs whose pid `wait PID` still answers for.
const REMEMBERED_PIDS: usize = 256;

/// `arg` (a job spec or a pid) among `views`, by index.
fn resolve_in(views: &[JobView], arg: &str) -> Spec {
    if let Some(spec) = arg.strip_prefix('%') {
        let (cur, prev) = current_of(views);
        let num = match spec {
            "" | "%" | "+" => cur,
            "-" => prev.or(cur),
            s if s.bytes().all(|b| b.is_ascii_digit()) => s.parse().ok(),
            s => {
                let hit = |v: &&JobView| match s.strip_prefix('?') {
                    Some(t) => v.text.contains(t),
                    None => v.text.starts_with(s),
                };
                views.iter().filter(hit).map(|v| v.num).next_back()
            }
        };
        return match num.and_then(|n| views.iter().position(|v| v.num == n)) {
            Some(i) => Spec::Job(i),
            None => Spec::NoSuchJob,
        };
    }
    match arg.parse::<u32>() {
        Ok(pid) => match views.iter().position(|v| v.pid == pid) {
            Some(i) => Spec::Job(i),
            None => Spec::NotChild,
        },
        Err(_) => Spec::Invalid,
    }
}

/// The current (`+`) and previous (`-`) jobs: the two most recent.
fn current_of(views: &[JobView]) -> (Option<usize>, Option<usize>) {
    let mut nums: Vec<usize> = views.iter().map(|v| v.num).collect();
    nums.sort_unstable();
    (nums.last().copied(), nums.iter().rev().nth(1).copied())
}

/// A job spec or pid operand resolved to an index in the table.
enum Spec {
    Job(usize),
    /// A pid of a job that ended and left the table: `wait PID` still gives its status.
    Reaped(usize),
    NoSuchJob,
    /// A number that is no job's pid.
    NotChild,
    Invalid,
}

impl Interp {
    /// The number the next job gets: one more than the highest in the table.
    pub(crate) fn next_job_number(&self) -> usize {
        self.jobs.iter().map(|j| j.num).max().unwrap_or(0) + 1
    }

    fn resolve(&self, arg: &str) -> Spec {
        let views: Vec<JobView> = self.jobs.iter().map(Job::view).collect();
        match resolve_in(&views, arg) {
            Spec::NotChild => match arg.parse::<u32>() {
                Ok(pid) => match self.reaped.iter().rposition(|j| j.pid == pid) {
                    Some(i) => Spec::Reaped(i),
                    None => Spec::NotChild,
                },
                Err(_) => Spec::Invalid,
            },
            spec => spec,
        }
    }

    /// Moves the jobs that have ended out of the table, reporting those a signal ended. They
    /// stay known, ended and unreported, to `jobs` and `wait -n` until one of those reports
    /// or collects them, as bash keeps them.
    fn reap_jobs(&mut self) {
        let (running, ended): (Vec<Job>, Vec<Job>) = std::mem::take(&mut self.jobs)
            .into_iter()
            .partition(Job::is_running);
        self.jobs = running;
        for j in &ended {
            self.report_signaled(j);
        }
        self.reaped.extend(ended);
        self.forget_oldest();
    }

    /// A job `wait` collected: gone for `jobs` and `wait -n`, while `wait PID` still answers
    /// with its status.
    fn collected(&mut self, mut j: Job) {
        j.notified = true;
        self.reaped.push(j);
        self.forget_oldest();
    }

    /// bash too remembers a bounded number of ended pids.
    fn forget_oldest(&mut self) {
        if self.reaped.len() > REMEMBERED_PIDS {
            let extra = self.reaped.len() - REMEMBERED_PIDS;
            for mut j in self.reaped.drain(..extra) {
                j.join();
            }
        }
    }

    /// bash's note on a job a signal ended, when the shell learns of it: `bash: 812 Hangup
    /// <padding> sleep 1` (a script's name and line instead of `bash` when it runs a file).
    /// Interrupts, broken pipes and SIGTERM go unreported, as in Debian's bash.
    fn report_signaled(&mut self, j: &Job) {
        let Some(sig) = j.killed_by() else { return };
        if matches!(sig, 2 | 13 | 15) {
            return;
        }
        let Some(desc) = signal_description(sig) else {
            return;
        };
        let text = j.text.strip_suffix(" &").unwrap_or(&j.text);
        let msg = format!("{} {desc:<24}{text}", j.pid);
        if self.invocation == crate::interp::Invocation::File {
            self.err(&msg);
        } else {
            self.err_raw(&format!("bash: {msg}\n"));
        }
    }

    pub(crate) fn b_jobs(&mut self, args: &[String]) -> i32 {
        let mut long = false;
        let mut pids_only = false;
        let mut running_only = false;
        let mut stopped_only = false;
        let mut changed_only = false;
        let mut operands: Vec<&String> = Vec::new();
        let mut opts_done = false;
        for a in args {
            match a.strip_prefix('-') {
                Some("-") if !opts_done => opts_done = true,
                Some(flags) if !opts_done && !flags.is_empty() => {
                    for c in flags.chars() {
                        match c {
                            'l' => long = true,
                            'p' => pids_only = true,
                            'r' => running_only = true,
                            // No job is ever stopped in the sandbox.
                            's' => stopped_only = true,
                            'n' => changed_only = true,
                            _ => {
                                self.err(&format!("jobs: -{c}: invalid option"));
                                self.err_raw("jobs: usage: jobs [-lnprs] [jobspec ...] or jobs -x command [args]\n");
                                return 2;
                            }
                        }
                    }
                }
                _ => operands.push(a),
            }
        }
        self.reap_jobs();
        if self.jobs.is_empty() && !self.parent_jobs.is_empty() {
            let views: Vec<JobView> = self
                .parent_jobs
                .iter()
                .filter(|v| v.is_running())
                .cloned()
                .collect();
            let states = vec![None; views.len()];
            return self
                .print_jobs(&views, &states, &operands, long, pids_only)
                .0;
        }
        // Jobs that ended and were not reported yet are listed with how they ended, once.
        let mut rows: Vec<(JobView, Option<String>, Option<usize>)> =
            self.jobs.iter().map(|j| (j.view(), None, None)).collect();
        for i in 0..self.reaped.len() {
            if !self.reaped[i].notified {
                let state = ended_state(&mut self.reaped[i]);
                let mut view = self.reaped[i].view();
                view.text = view.text.strip_suffix(" &").unwrap_or(&view.text).into();
                rows.push((view, Some(state), Some(i)));
            }
        }
        rows.sort_by_key(|r| r.0.num);
        if stopped_only {
            rows.clear();
        } else if running_only {
            rows.retain(|r| r.1.is_none());
        } else if changed_only {
            rows.retain(|r| r.1.is_some());
        }
        let views: Vec<JobView> = rows.iter().map(|r| r.0.clone()).collect();
        let states: Vec<Option<String>> = rows.iter().map(|r| r.1.clone()).collect();
        let (status, listed) = self.print_jobs(&views, &states, &operands, long, pids_only);
        for k in listed {
            if let Some(i) = rows[k].2 {
                self.reaped[i].notified = true;
            }
        }
        status
    }

    /// Lists `views` (`states` holds how each ended, `None` while it runs); the status and
    /// which rows it listed.
    fn print_jobs(
        &mut self,
        views: &[JobView],
        states: &[Option<String>],
        operands: &[&String],
        long: bool,
        pids_only: bool,
    ) -> (i32, Vec<usize>) {
        let (cur, prev) = current_of(views);
        let mut picked: Vec<usize> = Vec::new();
        let mut status = 0;
        if operands.is_empty() {
            picked = (0..views.len()).collect();
        } else {
            for a in operands {
                match resolve_in(views, a) {
                    Spec::Job(i) => picked.push(i),
                    _ => {
                        self.err(&format!("jobs: {a}: no such job"));
                        status = 1;
                    }
                }
            }
        }
        let mut text = String::new();
        for &i in &picked {
            let j = &views[i];
            let state = states[i].as_deref().unwrap_or("Running");
            if pids_only {
                text.push_str(&format!("{}\n", j.pid));
                continue;
            }
            let mark = if Some(j.num) == cur {
                '+'
            } else if Some(j.num) == prev {
                '-'
            } else {
                ' '
            };
            if long {
                text.push_str(&format!(
                    "[{}]{mark} {} {:<24}{}\n",
                    j.num, j.pid, state, j.text
                ));
            } else {
                text.push_str(&format!("[{}]{mark}  {:<24}{}\n", j.num, state, j.text));
            }
        }
        let s = self.out_str(&text);
        (if s != 0 { s } else { status }, picked)
    }

    pub(crate) fn b_disown(&mut self, args: &[String]) -> i32 {
        let mut all = false;
        let mut running = false;
        // `-h` (no SIGHUP for this job) keeps it in the table: nothing hangs up here.
        let mut keep = false;
        let mut operands: Vec<&String> = Vec::new();
        for a in args {
            match a.strip_prefix('-') {
                Some(flags) if !flags.is_empty() && operands.is_empty() => {
                    for c in flags.chars() {
                        match c {
                            'a' => all = true,
                            'r' => running = true,
                            'h' => keep = true,
                            _ => {
                                self.err(&format!("disown: -{c}: invalid option"));
                                self.err_raw(
                                    "disown: usage: disown [-h] [-ar] [jobspec ... | pid ...]\n",
                                );
                                return 2;
                            }
                        }
                    }
                }
                _ => operands.push(a),
            }
        }
        let mut picked: Vec<usize> = Vec::new();
        let mut status = 0;
        if operands.is_empty() {
            if all || running {
                picked = (0..self.jobs.len())
                    .filter(|&i| !running || self.jobs[i].is_running())
                    .collect();
            } else {
                match self.resolve("%+") {
                    Spec::Job(i) => picked.push(i),
                    _ => {
                        self.err("disown: current: no such job");
                        return 1;
                    }
                }
            }
        } else {
            for a in operands {
                match self.resolve(a) {
                    Spec::Job(i) => picked.push(i),
                    _ => {
                        self.err(&format!("disown: {a}: no such job"));
                        status = 1;
                    }
                }
            }
        }
        picked.sort_unstable();
        picked.dedup();
        for i in picked.into_iter().rev() {
            if !keep {
                let job = self.jobs.remove(i);
                self.disowned.push(job);
            }
        }
        status
    }

    /// `fg` and `bg` in a shell without a terminal, where no job is ever stopped: `fg` says
    /// the job's command, waits for it and gives its status (a job a signal ended is
    /// reported as bash reports a foreground one); `bg` finds the job already running. Both
    /// need job control (`set -m`) and a job started under it. A bare number is a job
    /// number, as in bash.
    pub(crate) fn b_fg_bg(&mut self, name: &str, args: &[String]) -> FlowResult {
        let args = match args.first().map(String::as_str) {
            Some("--") => &args[1..],
            _ => args,
        };
        if let Some(a) = args.first().filter(|a| a.len() > 1 && a.starts_with('-')) {
            self.err(&format!("{name}: {a}: invalid option"));
            self.usage(name);
            return Ok(2);
        }
        if !self.st.opts.extra.contains("monitor") {
            self.err(&format!("{name}: no job control"));
            return Ok(1);
        }
        let specs: Vec<String> = if args.is_empty() {
            vec![String::new()]
        } else if name == "fg" {
            args[..1].to_vec()
        } else {
            args.to_vec()
        };
        let mut status = 0;
        for spec in specs {
            let lookup = if spec.is_empty() {
                "%%".to_string()
            } else if spec.bytes().all(|b| b.is_ascii_digit()) {
                format!("%{spec}")
            } else {
                spec.clone()
            };
            let i = match self.resolve(&lookup) {
                Spec::Job(i) if lookup.starts_with('%') => i,
                _ => {
                    let shown = if spec.is_empty() { "current" } else { &spec };
                    self.err(&format!("{name}: {shown}: no such job"));
                    status = 1;
                    continue;
                }
            };
            let num = self.jobs[i].num;
            if !self.jobs[i].monitored {
                self.err(&format!("{name}: job {num} started without job control"));
                status = 1;
                continue;
            }
            if name == "bg" {
                if self.jobs[i].is_running() {
                    self.err(&format!("bg: job {num} already in background"));
                } else {
                    self.err("bg: job has terminated");
                    status = 1;
                }
                continue;
            }
            let mut j = self.jobs.remove(i);
            let text = j.text.strip_suffix(" &").unwrap_or(&j.text).to_string();
            if let Err(code) = self.out(&wasmsand_exec::raw::encode(&format!("{text}\n"))) {
                self.jobs.insert(i, j);
                return Ok(code);
            }
            let waited = self.wait_job(&mut j);
            match j.killed_by() {
                Some(15) => self.err_raw("Terminated\n"),
                Some(_) => self.report_signaled(&j),
                None => {}
            }
            self.reaped.push(j);
            status = waited?;
        }
        Ok(status)
    }

    /// `wait` on job specs and pids; `wait -n` for the next job to end. Afterwards the jobs
    /// that have ended leave the table, as bash cleans it up after a wait.
    pub(crate) fn b_wait(&mut self, args: &[String]) -> FlowResult {
        let r = self.wait_builtin(args);
        self.reap_jobs();
        self.reap_coprocs();
        self.forget_ended_jobs();
        r
    }

    /// `bash -c` text forgets the jobs that have ended whenever it waits for a child (a
    /// program in the foreground, `wait`): they are then gone for `jobs` and `wait -n`, though
    /// `wait PID` still answers. A script file or standard input keeps them until `jobs`
    /// reports them, as POSIX asks of a shell that is not interactive.
    pub(crate) fn forget_ended_jobs(&mut self) {
        if self.invocation != crate::interp::Invocation::DashC {
            return;
        }
        for j in self.jobs.iter_mut().chain(self.reaped.iter_mut()) {
            if !j.notified && !j.is_running() {
                j.notified = true;
            }
        }
    }

    fn wait_builtin(&mut self, args: &[String]) -> FlowResult {
        let mut next = false;
        let mut var: Option<String> = None;
        let mut i = 0;
        while let Some(a) = args.get(i) {
            match a.as_str() {
                "-n" => next = true,
                "-f" => {}
                "-p" => {
                    i += 1;
                    var = args.get(i).cloned();
                }
                "--" => {
                    i += 1;
                    break;
                }
                _ => break,
            }
            i += 1;
        }
        let operands = &args[i.min(args.len())..];
        if next {
            return self.wait_next(operands, var.as_deref());
        }
        if operands.is_empty() {
            // `wait` without operands waits for every job and returns 0. The jobs stay known
            // as ended but unreported: `jobs` lists them once, `wait -n` still returns them.
            // A trapped signal interrupts the wait while the jobs are still in the table.
            for i in 0..self.jobs.len() {
                let running = |me: &Interp| me.jobs.get(i).is_some_and(Job::is_running);
                if let Some(status) = self.trapped_signal_during(&running)? {
                    return Ok(status);
                }
            }
            let mut jobs = std::mem::take(&mut self.jobs);
            for j in jobs.iter_mut() {
                self.wait_job(j)?;
                self.report_signaled(j);
            }
            self.reaped.extend(jobs);
            self.forget_oldest();
            return Ok(0);
        }
        let mut status = 0;
        for a in operands {
            status = match self.resolve(a) {
                Spec::Job(i) => {
                    let running = |me: &Interp| me.jobs.get(i).is_some_and(Job::is_running);
                    if let Some(status) = self.trapped_signal_during(&running)? {
                        return Ok(status);
                    }
                    let mut j = self.jobs.remove(i);
                    let s = self.wait_job(&mut j)?;
                    self.report_signaled(&j);
                    if let Some(v) = &var {
                        let _ = self.set_var(v, j.pid.to_string());
                    }
                    self.collected(j);
                    s
                }
                Spec::Reaped(i) => {
                    self.reaped[i].notified = true;
                    self.reaped[i].join()
                }
                Spec::NoSuchJob => {
                    self.err(&format!("wait: {a}: no such job"));
                    127
                }
                Spec::NotChild => {
                    self.err(&format!("wait: pid {a} is not a child of this shell"));
                    127
                }
                Spec::Invalid => {
                    self.err(&format!("wait: `{a}': not a pid or valid job spec"));
                    1
                }
            };
        }
        Ok(status)
    }

    fn wait_next(&mut self, operands: &[String], var: Option<&str>) -> FlowResult {
        let mut wanted: Vec<u32> = Vec::new();
        for a in operands {
            match self.resolve(a) {
                Spec::Job(i) => wanted.push(self.jobs[i].pid),
                Spec::Reaped(i) if !self.reaped[i].notified => wanted.push(self.reaped[i].pid),
                // `wait -n` takes any word for a job name, and knows no job it has collected.
                Spec::Invalid | Spec::NoSuchJob | Spec::NotChild | Spec::Reaped(_) => {
                    self.err(&format!("wait: {a}: no such job"))
                }
            }
        }
        let wants = |pid: u32| wanted.is_empty() || wanted.contains(&pid);
        // A job that ended before and was neither reported nor collected is the next to
        // end, the earliest first, as bash keeps such jobs until then.
        if let Some(i) = self.reaped.iter().position(|j| !j.notified && wants(j.pid)) {
            let j = &mut self.reaped[i];
            j.notified = true;
            let (s, pid) = (j.join(), j.pid);
            if let Some(v) = var {
                let _ = self.set_var(v, pid.to_string());
            }
            return Ok(s);
        }
        loop {
            let candidates: Vec<usize> = (0..self.jobs.len())
                .filter(|&i| !self.jobs[i].notified && wants(self.jobs[i].pid))
                .collect();
            if candidates.is_empty() {
                return Ok(127);
            }
            if let Some(&i) = candidates.iter().find(|&&i| !self.jobs[i].is_running()) {
                let mut j = self.jobs.remove(i);
                let s = self.wait_job(&mut j)?;
                self.report_signaled(&j);
                if let Some(v) = var {
                    let _ = self.set_var(v, j.pid.to_string());
                }
                self.collected(j);
                return Ok(s);
            }
            self.check()?;
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// bash's `wait` returns as soon as a signal this shell traps arrives, with 128 + its
    /// number, and the trap runs. Only a shell with such a trap waits in slices to see one
    /// come; `None` when `running` ended first.
    fn trapped_signal_during(
        &mut self,
        running: &dyn Fn(&Interp) -> bool,
    ) -> FlowResult<Option<i32>> {
        let trapped = |me: &Interp, sig: &str| me.st.traps.get(sig).is_some_and(|a| !a.is_empty());
        if !self.is_shell_itself()
            || !self
                .st
                .traps
                .keys()
                .any(|k| k.starts_with("SIG") && trapped(self, k))
        {
            return Ok(None);
        }
        let me = self.shell_pid();
        while running(self) {
            let sig = {
                let mut q = self.rt.pending_signals.lock();
                q.iter()
                    .position(|(pid, sig)| *pid == me && trapped(self, sig))
                    .map(|i| q.remove(i).1)
            };
            if let Some(sig) = sig {
                return self.take_signal_status(&sig).map(Some);
            }
            self.check()?;
            std::thread::sleep(Duration::from_millis(2));
        }
        Ok(None)
    }

    /// Waits for one job; a job on the host's side is waited for in slices so that the run's
    /// deadline and cancellation still apply to the waiting shell.
    pub(crate) fn wait_job(&mut self, j: &mut Job) -> FlowResult {
        if let JobKind::Detached(d) = &j.kind {
            loop {
                if let Some(s) = d.wait(Duration::from_millis(20)) {
                    return Ok(s);
                }
                self.check()?;
            }
        }
        Ok(j.join())
    }

    /// The pid of the job `arg` (a job spec or a pid) names, if it names one in the table.
    pub(crate) fn job_pid(&self, arg: &str) -> Option<u32> {
        match self.resolve(arg) {
            Spec::Job(i) => Some(self.jobs[i].pid),
            _ => None,
        }
    }

    /// `kill` on a job spec or a job's pid; `None` when `arg` names neither.
    pub(crate) fn kill_job(&mut self, arg: &str, signal: u32) -> Option<i32> {
        match self.resolve(arg) {
            // A job started without job control ignores SIGINT and SIGQUIT.
            Spec::Job(i) if !self.jobs[i].monitored && matches!(signal, 2 | 3) => Some(0),
            Spec::Job(i) => {
                if signal != 0 && !matches!(signal, 17 | 23 | 28 | 18) {
                    self.jobs[i].kill(128 + signal as i32);
                }
                Some(0)
            }
            Spec::NoSuchJob if arg.starts_with('%') => {
                self.err(&format!("kill: {arg}: no such job"));
                Some(1)
            }
            _ => None,
        }
    }

    /// At the end of a (sub)shell: thread jobs are waited for; jobs on the host's side and
    /// disowned ones are left to go on.
    pub(crate) fn join_run_jobs(&mut self) {
        let jobs = self.jobs.drain(..);
        for mut j in jobs
            .chain(self.disowned.drain(..))
            .chain(self.reaped.drain(..))
        {
            if matches!(j.kind, JobKind::Thread { .. }) {
                j.join();
            }
        }
    }

    /// `nohup cmd` / `setsid cmd` run as part of a job (or in the foreground): the command
    /// itself, as a program (never a function), since no terminal hangs up in the sandbox.
    pub(crate) fn b_nohup(&mut self, name: &str, args: &[String]) -> FlowResult {
        let args: &[String] = match args.first().map(String::as_str) {
            Some("--") => &args[1..],
            _ => args,
        };
        let Some(cmd) = args.first() else {
            let (what, status) = match name {
                "nohup" => ("missing operand", 125),
                _ => ("no command specified", 1),
            };
            self.err_raw(&format!(
                "{name}: {what}\nTry '{name} --help' for more information.\n"
            ));
            return Ok(status);
        };
        if cmd == "--help" {
            let text = format!(
                "Usage: {name} COMMAND [ARG]...\nRun COMMAND, kept after the run when started in \
                 the background (`{name} COMMAND &`).\n"
            );
            return Ok(self.out_str(&text));
        }
        self.run_plain_argv(args.to_vec())
    }
}

/// What glibc's `strsignal` calls signal `n`, which bash prints for a job a signal ended.
/// How `jobs` shows a job that ended: `Done`, `Exit N`, or what ended it (`Killed`).
fn ended_state(j: &mut Job) -> String {
    let status = j.join();
    match j.killed_by() {
        Some(sig) => signal_description(sig).map_or_else(|| format!("Signal {sig}"), Into::into),
        None if status == 0 => "Done".into(),
        None => format!("Exit {status}"),
    }
}

fn signal_description(n: i32) -> Option<&'static str> {
    const DESCRIPTIONS: [&str; 31] = [
        "Hangup",
        "Interrupt",
        "Quit",
        "Illegal instruction",
        "Trace/breakpoint trap",
        "Aborted",
        "Bus error",
        "Floating point exception",
        "Killed",
        "User defined signal 1",
        "Segmentation fault",
        "User defined signal 2",
        "Broken pipe",
        "Alarm clock",
        "Terminated",
        "Stack fault",
        "Child exited",
        "Continued",
        "Stopped (signal)",
        "Stopped",
        "Stopped (tty input)",
        "Stopped (tty output)",
        "Urgent I/O condition",
        "CPU time limit exceeded",
        "File size limit exceeded",
        "Virtual timer expired",
        "Profiling timer expired",
        "Window changed",
        "I/O possible",
        "Power failure",
        "Bad system call",
    ];
    DESCRIPTIONS
        .get(usize::try_from(n).ok()?.checked_sub(1)?)
        .copied()
}
