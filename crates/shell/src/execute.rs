//! Running the tree: lists, and-or lists, pipelines, commands, redirections, functions.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use wasmsand_exec::{OpenFile, Output, pipe};

use crate::error::ShellError;
use crate::error::strerror;
use crate::expand::AssignedValue;
use crate::interp::{
    Fd, Flow, FlowResult, InSrc, Interp, Invocation, MAX_FD, PIPE_BYTES, Saved, THREAD_STACK,
    TrapKind,
};
use crate::jobs::{Job, JobKind};
use crate::syntax::ast::*;
use crate::vars::{ATTR_EXPORT, Var};

impl Interp {
    pub(crate) fn run_script(&mut self, s: &Script) -> FlowResult {
        let mut status = self.st.status;
        for (idx, item) in s.items.iter().enumerate() {
            self.check()?;
            if self.st.opts.noexec {
                return Ok(status);
            }
            status = if item.background {
                let detach = crate::jobs::wants_detach(&item.and_or)
                    || crate::jobs::disowned_next(s, idx)
                    || std::mem::take(&mut self.disown_follows);
                self.spawn_background(&item.and_or, detach)?;
                0
            } else {
                self.run_and_or(&item.and_or)?
            };
            self.st.status = status;
            if self.is_shell_itself() {
                self.take_pending_signals()?;
            }
        }
        Ok(status)
    }

    fn run_and_or(&mut self, ao: &AndOr) -> FlowResult {
        let mut last_ran = 0usize;
        let mut status = if ao.rest.is_empty() {
            self.run_pipeline(&ao.first)?
        } else {
            self.cond += 1;
            let r = self.run_pipeline(&ao.first);
            self.cond -= 1;
            r?
        };
        for (i, (op, p)) in ao.rest.iter().enumerate() {
            self.st.status = status;
            let go = match op {
                AndOrOp::And => status == 0,
                AndOrOp::Or => status != 0,
            };
            if !go {
                continue;
            }
            let is_last = i + 1 == ao.rest.len();
            if is_last {
                status = self.run_pipeline(p)?;
                last_ran = i + 1;
            } else {
                self.cond += 1;
                let r = self.run_pipeline(p);
                self.cond -= 1;
                status = r?;
            }
        }
        let final_negated = if ao.rest.is_empty() {
            ao.first.negated
        } else {
            ao.rest.last().is_some_and(|(_, p)| p.negated)
        };
        if status != 0 && self.cond == 0 && last_ran == ao.rest.len() && !final_negated {
            self.st.status = status;
            let last = ao.rest.last().map_or(&ao.first, |(_, p)| p);
            // bash traps ERR for the failing command itself, not again for the compound
            // command (`if`, loop, group) whose status it became.
            // A pipeline of several commands runs its last one in a subshell, whose failures
            // do not trap in the shell itself: then the pipeline's status traps.
            let compound = last.commands.len() == 1
                && matches!(last.commands.last(), Some(Command::Compound(c, _)) if c.runs_lists());
            // Nor does `set -e` exit for it: a failure inside that could end the shell has
            // already done so, and one that could not (`{ false && x; }`) does not make its
            // group, `if`, loop or `case` fail in errexit's sense.
            if !compound {
                self.run_err_trap()?;
                if self.st.opts.errexit {
                    return Err(Flow::Exit(status));
                }
            }
        }
        Ok(status)
    }

    fn run_err_trap(&mut self) -> FlowResult<()> {
        // Without `set -E` functions do not inherit the ERR trap.
        if self.trap_running(TrapKind::Err)
            || (!self.funcnames.is_empty() && !self.st.opts.errtrace)
        {
            return Ok(());
        }
        if let Some(action) = self.st.traps.get("ERR").cloned() {
            self.run_trap_action(&action, TrapKind::Err)?;
        }
        Ok(())
    }

    pub(crate) fn run_trap_action(&mut self, action: &str, kind: TrapKind) -> FlowResult<()> {
        self.run_trap_status(action, kind).map(|_| ())
    }

    /// Runs a trap's action and gives the status it ended with; `$?` after it is what it
    /// was before.
    fn run_trap_status(&mut self, action: &str, kind: TrapKind) -> FlowResult {
        let saved = self.st.status;
        let (was_in_trap, was_running) = (self.in_trap, self.running_traps);
        self.in_trap = true;
        self.running_traps |= kind as u8;
        // `$LINENO` in a DEBUG, ERR or RETURN trap is the line where it fired; a signal's
        // trap is read as a text of its own, counted from 1 (as bash reads it).
        let (line, offset) = (self.line, self.line_offset);
        self.line_offset = match kind {
            TrapKind::Signal => 0,
            _ => line.saturating_sub(1),
        };
        let r = self.eval_text(action);
        self.line_offset = offset;
        self.line = line;
        self.in_trap = was_in_trap;
        self.running_traps = was_running;
        match r {
            // An error that abandons a line (bad arithmetic) ends only the trap's action, as
            // in bash: the command it ran before or after goes on.
            Ok(s) | Err(Flow::Fatal(s)) => {
                self.st.status = saved;
                Ok(s)
            }
            Err(e) => Err(e),
        }
    }

    /// The DEBUG trap's action. Whether the command it fired for runs: under `extdebug` a
    /// status other than 0 skips it, and 2 in a function or sourced file returns from that,
    /// as bash's debugger support does.
    fn run_debug_trap(&mut self, action: &str) -> FlowResult<bool> {
        let status = self.run_trap_status(action, TrapKind::Debug)?;
        if status == 0 || !self.st.opts.extdebug {
            return Ok(true);
        }
        if status == 2 && (self.st.vars.in_function() || self.sourcing > 0) {
            return Err(Flow::Return(2));
        }
        Ok(false)
    }

    /// The RETURN trap at the end of a `source`: at the top level, under `set -T`, or in a
    /// function that set the trap itself.
    pub(crate) fn source_return_trap(&mut self) -> FlowResult<()> {
        if self.in_trap {
            return Ok(());
        }
        let Some(action) = self.st.traps.get("RETURN").cloned() else {
            return Ok(());
        };
        let applies = match self.return_traps.last() {
            None => true,
            Some(at_entry) => self.st.opts.functrace || at_entry.as_ref() != Some(&action),
        };
        if applies {
            self.run_trap_action(&action, TrapKind::Return)?;
        }
        Ok(())
    }

    /// `BASH_COMMAND` for the traps, and the DEBUG trap, before a simple command runs;
    /// whether the command runs (see [`Self::run_debug_trap`]).
    fn before_command(&mut self, cmd: &SimpleCommand) -> FlowResult<bool> {
        let debug = self.st.traps.get("DEBUG").cloned();
        // Every trap may read it (an EXIT trap under `set -e` shows the command that failed).
        // Inside a trap's action `$BASH_COMMAND` stays the command the trap fired at.
        if !self.in_trap {
            let text = crate::printer::simple_command_text(cmd);
            self.st.vars.put("BASH_COMMAND", Var::scalar(text));
        }
        if let Some(action) = debug
            && !self.trap_running(TrapKind::Debug)
            && (self.funcnames.is_empty() || self.st.opts.functrace)
        {
            return self.run_debug_trap(&action);
        }
        Ok(true)
    }

    /// The DEBUG trap before a step that is no simple command (a `for` header, a pipeline
    /// stage run in a subshell), with `$LINENO` at `line`; whether the step runs.
    fn debug_trap_at(&mut self, line: usize) -> FlowResult<bool> {
        if self.trap_running(TrapKind::Debug)
            || !(self.funcnames.is_empty() || self.st.opts.functrace)
        {
            return Ok(true);
        }
        match self.st.traps.get("DEBUG").cloned() {
            Some(action) => {
                self.line = line;
                self.run_debug_trap(&action)
            }
            None => Ok(true),
        }
    }

    /// `eval`: the text's first line is the line the `eval` command ends on, as bash has
    /// read the whole command when it runs it.
    pub(crate) fn eval_command_text(&mut self, src: &str) -> FlowResult {
        let offset = self.line_offset;
        self.line_offset = self.end_line.max(self.line).saturating_sub(1);
        let r = self.eval_text(src);
        self.line_offset = offset;
        r
    }

    /// Text run in the shell (a prompt command, a `mapfile` callback): its lines count on
    /// from the line it runs at.
    pub(crate) fn eval_string(&mut self, src: &str) -> FlowResult {
        let (line, offset) = (self.line, self.line_offset);
        self.line_offset = line;
        let r = self.eval_text(src);
        self.line_offset = offset;
        r
    }

    /// Parses and runs text (`eval`, traps, `bash -c` in the same state).
    pub(crate) fn eval_text(&mut self, src: &str) -> FlowResult {
        if crate::needs_line_reading(self, src) {
            self.enter()?;
            let r = self.eval_by_lines(src);
            self.depth -= 1;
            return r;
        }
        match crate::parse_opts(src, &self.parse_options()) {
            Ok(script) => {
                self.enter()?;
                let r = self.run_script(&script);
                self.depth -= 1;
                r
            }
            // Read a command at a time: bash drops only that line and reads on.
            Err(e) if e.drops_line() => {
                self.enter()?;
                let r = self.eval_by_lines(src);
                self.depth -= 1;
                r
            }
            Err(e) => {
                self.err_raw(&e.render_in(src, crate::SourceKind::Eval));
                Ok(2)
            }
        }
    }

    /// `eval` text read a complete command at a time, so an alias it defines applies to the
    /// lines after it. A bad compound array assignment drops its line, and the text reads on
    /// with `$?` 1.
    fn eval_by_lines(&mut self, src: &str) -> FlowResult {
        let lines: Vec<&str> = src.split_inclusive('\n').collect();
        let mut status = 0;
        let mut start = 0;
        while start < lines.len() {
            match crate::next_chunk(self, &lines, start) {
                Ok((script, end)) => {
                    status = self.run_script(&script)?;
                    start = end;
                }
                Err(e) if e.drops_line() => {
                    self.err_raw(&e.render_in(src, crate::SourceKind::Eval));
                    status = 1;
                    self.st.status = 1;
                    start = e.line;
                }
                Err(e) => {
                    self.err_raw(&e.render_in(src, crate::SourceKind::Eval));
                    return Ok(2);
                }
            }
        }
        Ok(status)
    }

    /// One more level of nesting (function, eval, source, substitution), bounded.
    pub(crate) fn enter(&mut self) -> FlowResult<()> {
        if self.depth >= self.st.limits.max_depth {
            let name = self
                .funcnames
                .last()
                .cloned()
                .unwrap_or_else(|| "eval".into());
            return Err(self.limit(format!(
                "{name}: maximum nesting level exceeded ({})",
                self.st.limits.max_depth
            )));
        }
        self.depth += 1;
        Ok(())
    }

    fn run_pipeline(&mut self, p: &Pipeline) -> FlowResult {
        let mark = self.procsubs.len();
        let r = self.run_pipeline_inner(p);
        // Each command of a pipeline is a child bash waits for.
        if p.commands.len() > 1 {
            self.forget_ended_jobs();
        }
        let finished = self.finish_process_substs(mark);
        let status = r?;
        finished?;
        Ok(status)
    }

    fn run_pipeline_inner(&mut self, p: &Pipeline) -> FlowResult {
        self.line = self.abs_line(p.line);
        let started = p.timed.then(std::time::Instant::now);
        // bash ignores errexit inside `! pipeline` only when it is on as the pipeline starts:
        // a `set -e` run inside `! f` with errexit off takes effect there.
        let ignoring = p.negated && (self.st.opts.errexit || self.cond > 0);
        if ignoring {
            self.cond += 1;
        }
        let r = if p.commands.len() == 1 {
            self.run_command(&p.commands[0]).map(|s| (s, vec![s]))
        } else {
            self.run_stages(&p.commands)
        };
        if ignoring {
            self.cond -= 1;
        }
        let (status, statuses) = r?;
        // A lone compound command that runs lists (`{ }`, `if`, loops, `case`) leaves
        // PIPESTATUS to the pipelines inside it, as bash does: `case x in x) ;; esac` changes
        // nothing.
        let runs_lists = p.commands.len() == 1
            && match &p.commands[0] {
                Command::FunctionDef(_) => true,
                Command::Compound(c, _) => {
                    c.runs_lists() || matches!(c, CompoundCommand::Coproc { .. })
                }
                Command::Simple(_) => false,
            };
        if !runs_lists {
            let arr = statuses
                .iter()
                .enumerate()
                .map(|(i, s)| (i as i64, s.to_string()))
                .collect();
            self.st.vars.put(
                "PIPESTATUS",
                Var {
                    value: crate::vars::Value::Indexed(arr),
                    attrs: 0,
                },
            );
        }
        if let Some(t) = started {
            let secs = t.elapsed().as_secs_f64();
            let text = format!(
                "\nreal\t{}m{:.3}s\nuser\t0m0.000s\nsys\t0m0.000s\n",
                (secs / 60.0) as u64,
                secs % 60.0
            );
            self.err_raw(&text);
        }
        let status = if p.negated {
            (status == 0) as i32
        } else {
            status
        };
        self.st.status = status;
        Ok(status)
    }

    /// Runs a multi-stage pipeline: every stage a subshell on its own thread except the last,
    /// which runs on this thread (in a subshell too, as bash without `lastpipe`).
    fn run_stages(&mut self, cmds: &[Command]) -> FlowResult<(i32, Vec<i32>)> {
        let n = cmds.len();
        let mut handles = Vec::new();
        let mut next_in: Option<wasmsand_exec::PipeReader> = None;
        let mut last_status = 0;
        let mut spawn_error = None;
        for (i, cmd) in cmds.iter().enumerate() {
            // bash runs the DEBUG trap for a stage that is a simple command in the shell
            // itself, before the stage's subshell starts (which has no DEBUG trap). A stage
            // the trap skips (`extdebug`) ends at once with status 0.
            let skip = match cmd {
                Command::Simple(s) => !self.debug_trap_at(self.abs_line(s.line))?,
                _ => false,
            };
            let mut child = self.fork();
            // A simple command of a pipeline runs in a child bash does not count as a
            // subshell environment.
            if matches!(cmd, Command::Simple(_)) {
                child.subshell_depth = self.subshell_depth;
            }
            if let Some(r) = next_in.take() {
                child.fds.set(0, Some(Fd::In(InSrc::Pipe(r))));
            }
            if i + 1 < n {
                let (w, r) = pipe(PIPE_BYTES, &self.cancel_token());
                child.fds.set(1, Some(Fd::Out(Output::from(w))));
                next_in = Some(r);
                if let Err(e) = self.reserve_job() {
                    spawn_error = Some(e);
                    break;
                }
                let cmd = cmd.clone();
                // The slot goes back when the pipeline reaps the stage (below), not when the
                // stage ends: a stage that ended early must not lend its slot to a later stage
                // of the same pipeline, or whether a pipeline fits the limit would depend on
                // how the threads were scheduled.
                let h = wasmsand_exec::threads::spawn(THREAD_STACK, move || {
                    if skip {
                        return 0;
                    }
                    child.run_as_subshell(|c| c.run_command(&cmd))
                });
                match h {
                    Ok(h) => handles.push(h),
                    Err(e) => {
                        self.rt.pids.release();
                        spawn_error = Some(self.limit(format!("fork: {e}")));
                        break;
                    }
                }
            } else if skip {
                last_status = 0;
            } else if self.st.opts.lastpipe {
                let saved = std::mem::replace(&mut self.fds, child.fds.clone());
                drop(child);
                let r = self.run_command(cmd);
                self.fds = saved;
                last_status = r?;
            } else {
                last_status = child.run_as_subshell(|c| c.run_command(cmd));
            }
        }
        drop(next_in);
        // bash runs a last stage that is a `( )` from the shell itself, and when it fails the
        // shell's ERR trap runs for it there, before the pipeline's status traps again
        // (earlier stages run in processes of their own, which have no ERR trap).
        if spawn_error.is_none()
            && last_status != 0
            && matches!(
                cmds.last(),
                Some(Command::Compound(CompoundCommand::Subshell(_), _))
            )
            && self.cond == 0
        {
            self.st.status = last_status;
            self.run_err_trap()?;
        }
        let mut statuses: Vec<i32> = handles
            .into_iter()
            .map(|h| {
                let s = h.join().unwrap_or(1);
                self.rt.pids.release();
                s
            })
            .collect();
        self.reap_coprocs();
        if let Some(e) = spawn_error {
            return Err(e);
        }
        self.check()?;
        statuses.push(last_status);
        let status = if self.st.opts.pipefail {
            statuses
                .iter()
                .rev()
                .find(|s| **s != 0)
                .copied()
                .unwrap_or(0)
        } else {
            last_status
        };
        Ok((status, statuses))
    }

    /// Takes one of the sandbox's process slots for a subshell thread. With none free the
    /// run stops as a non-interactive bash stops when `fork` fails: no retry (the slots may
    /// be held by background processes that live on), the rest of the script abandoned,
    /// status 126.
    pub(crate) fn reserve_job(&mut self) -> FlowResult<()> {
        if !self.rt.pids.acquire() {
            self.usage.pids_exhausted.store(true, Ordering::Relaxed);
            let msg = self.rt.pids.refusal();
            self.err(&msg);
            self.rt.set_abort(crate::Abort::Fork(msg.clone()));
            return Err(Flow::Abort(crate::Abort::Fork(msg)));
        }
        if let Err(e) = self.count_process() {
            self.rt.pids.release();
            return Err(e);
        }
        Ok(())
    }

    /// Runs `f` as a subshell body: `exit` ends only it, its EXIT trap runs at its end.
    pub(crate) fn run_as_subshell(&mut self, f: impl FnOnce(&mut Interp) -> FlowResult) -> i32 {
        let parent = std::mem::take(&mut self.st.traps);
        for (sig, action) in parent.iter() {
            // Ignored signals stay ignored; `set -E`/`set -T` carry ERR and DEBUG/RETURN.
            let keep = (action.is_empty() && sig.starts_with("SIG"))
                || (sig == "ERR" && self.st.opts.errtrace)
                || ((sig == "DEBUG" || sig == "RETURN") && self.st.opts.functrace);
            if keep {
                self.st.traps.insert(sig.clone(), action.clone());
            }
        }
        // A job started without job control ignores SIGINT and SIGQUIT. As in bash, it may
        // trap SIGINT again only when the shell that started it has trapped it before; a
        // bash it starts can do neither.
        let async_job = std::mem::take(&mut self.async_ignores);
        if async_job {
            self.st.traps.insert("SIGINT".into(), String::new());
            if !self.int_trapped {
                self.st.untrappable.insert("SIGINT".into());
            }
            self.st.untrappable.insert("SIGQUIT".into());
        }
        // `trap -p` lists the parent's traps; in a job that is a list or a compound command
        // SIGINT shows as ignored, as bash's child has set up its signals by then (one
        // simple command still shows the parent's).
        if !parent.is_empty() && !self.in_procsub {
            let mut shown = parent;
            if async_job && !self.job_exec {
                shown.insert("SIGINT".into(), String::new());
            }
            self.inherited_traps = Some(shown);
        }
        let r = f(self);
        // A pipeline stage is run as a command, not a pipeline: its `<( )` files end here.
        let _ = self.finish_process_substs(0);
        let status = match r {
            Ok(s) => s,
            Err(Flow::Exit(s)) | Err(Flow::Return(s)) | Err(Flow::Fatal(s)) => s,
            Err(Flow::Unbound) => 1,
            Err(Flow::Break(_)) | Err(Flow::Continue(_)) => self.st.status,
            Err(Flow::Abort(_)) => return 1,
        };
        self.st.status = status;
        self.finish_shell(status)
    }

    /// End of a (sub)shell: its EXIT trap, then its background jobs are waited for.
    pub(crate) fn finish_shell(&mut self, status: i32) -> i32 {
        let mut status = status;
        if let Some(action) = self.st.traps.get("EXIT").cloned() {
            self.st.traps.remove("EXIT");
            self.st.status = status;
            self.in_trap = true;
            match self.eval_string(&action) {
                Err(Flow::Exit(s)) => status = s,
                Err(Flow::Abort(_)) => status = 1,
                _ => {}
            }
            self.in_trap = false;
        }
        // A run (or subshell) ends when what it started has ended, as a caller reading its
        // output would wait for the pipe to close; the run's deadline bounds the wait. Its
        // own descriptors close first, as at a process's exit: a coprocess reading what the
        // shell writes sees the end of its input.
        self.fds.close_from(3);
        self.join_run_jobs();
        status
    }

    /// `cmd &`. With `detach` and a host that keeps jobs, the job starts on the host's side
    /// and outlives the run; otherwise it is a thread of the run.
    fn spawn_background(&mut self, ao: &AndOr, detach: bool) -> FlowResult<()> {
        let text = format!("{} &", crate::printer::and_or_text(ao));
        if detach && let Some(host) = self.rt.detach.clone() {
            let source = crate::printer::and_or_text(ao);
            match host(&source, self.st.clone()) {
                Ok(d) => {
                    let pid = d.pid();
                    let num = self.next_job_number();
                    let monitored = self.st.opts.extra.contains("monitor");
                    self.jobs.push(Job {
                        num,
                        pid,
                        text,
                        kind: JobKind::Detached(d),
                        monitored,
                        notified: false,
                        started: None,
                    });
                    self.last_bg = Some(pid);
                }
                Err(e) => self.err(&e),
            }
            return Ok(());
        }
        self.reserve_job()?;
        let mut child = self.fork();
        // Non-interactive bash gives background jobs /dev/null as stdin, and without job
        // control they ignore SIGINT and SIGQUIT for good.
        child.fds.set(0, Some(Fd::In(InSrc::Empty)));
        child.async_ignores = !self.st.opts.extra.contains("monitor");
        let ao = ao.clone();
        // bash's child for `cmd &` runs the one simple command and exits without the ERR
        // trap; a list or compound command runs as in a subshell, where failures trap.
        let bare =
            ao.rest.is_empty() && matches!(ao.first.commands.as_slice(), [Command::Simple(_)]);
        child.job_exec = bare;
        self.start_job_thread(child, text, move |c| {
            if bare {
                c.run_pipeline(&ao.first)
            } else {
                c.run_and_or(&ao)
            }
        })?;
        Ok(())
    }

    /// Runs `body` in `child` (a fork, counted by `reserve_job`) on a thread of its own, as a
    /// job in the table that `$!` names; returns its pid.
    pub(crate) fn start_job_thread(
        &mut self,
        mut child: Interp,
        text: String,
        body: impl FnOnce(&mut Interp) -> FlowResult + Send + 'static,
    ) -> FlowResult<u32> {
        let cancel = self.cancel_token().child();
        child.job_cancel = Some(cancel.clone());
        let rt = self.rt.clone();
        let pid = self.next_pid();
        // The job's `$BASHPID` is its `$!`, as a background process's pid is.
        child.subshell_pid = Some(std::cell::OnceCell::from(pid));
        let alive = Arc::new(AtomicBool::new(true));
        let alive2 = alive.clone();
        // As forks happen one after the other: a job is under way before the next one
        // starts, so `a & b &` begins with a, as in bash, rather than with whichever thread
        // the scheduler runs first. The shell itself goes on at once (`a & b` runs b while a
        // starts).
        for j in &mut self.jobs {
            if let Some(rx) = j.started.take() {
                let _ = rx.recv();
            }
        }
        let (started, on_start) = std::sync::mpsc::sync_channel::<()>(1);
        let h = std::thread::Builder::new()
            .stack_size(THREAD_STACK)
            .spawn(move || {
                let _ = started.send(());
                let s = child.run_as_subshell(body);
                // Ended before its descriptors close: whoever reads the end of its output
                // finds it no longer running (a coprocess is then reaped at once).
                alive2.store(false, Ordering::SeqCst);
                drop(child);
                rt.pids.release();
                s
            });
        match h {
            Ok(handle) => {
                let num = self.next_job_number();
                let monitored = self.st.opts.extra.contains("monitor");
                self.jobs.push(Job {
                    num,
                    pid,
                    text,
                    monitored,
                    notified: false,
                    started: Some(on_start),
                    kind: JobKind::Thread {
                        handle: Some(handle),
                        alive,
                        cancel,
                        killed: None,
                        status: None,
                    },
                });
                self.last_bg = Some(pid);
                Ok(pid)
            }
            Err(e) => {
                self.rt.pids.release();
                Err(self.limit(format!("fork: {e}")))
            }
        }
    }

    pub(crate) fn run_command(&mut self, cmd: &Command) -> FlowResult {
        self.check()?;
        match cmd {
            Command::Simple(s) => self.run_simple(s),
            Command::Compound(c, redirs) => {
                if redirs.is_empty() {
                    return self.run_compound(c);
                }
                match self.apply_redirects(redirs)? {
                    Ok(saved) => {
                        let r = self.run_compound(c);
                        self.restore_fds(saved);
                        r
                    }
                    Err(status) => {
                        // Nothing inside ran to trap the failure: a compound command whose
                        // redirection fails traps ERR itself.
                        if status != 0 && self.cond == 0 {
                            self.st.status = status;
                            self.run_err_trap()?;
                            if self.st.opts.errexit {
                                return Err(Flow::Exit(status));
                            }
                        }
                        Ok(status)
                    }
                }
            }
            Command::FunctionDef(f) => {
                // A name with an expansion in it (`$foo-bar() {`) is refused when the
                // definition runs, as bash does.
                if f.name.contains(['$', '`']) {
                    self.err(&format!("`{}': not a valid identifier", f.name));
                    return Ok(1);
                }
                // Posix mode wants a function's name to be a name (bash calls `ns/f` and
                // `f-x` otherwise), and ends the shell over one that is not.
                if self.st.opts.extra.contains("posix") && !crate::vars::is_valid_name(&f.name) {
                    self.err_fatal(&format!("`{}': not a valid identifier", f.name));
                    return Err(Flow::Exit(2));
                }
                // POSIX mode keeps the special builtins from being redefined; bash ends the
                // shell over it.
                if self.st.opts.extra.contains("posix") && self.is_special_builtin(&f.name) {
                    self.err_fatal(&format!("`{}': is a special builtin", f.name));
                    return Err(Flow::Exit(2));
                }
                if self.st.readonly_functions.contains(&f.name) {
                    self.err(&format!("{}: readonly function", f.name));
                    return Ok(1);
                }
                // The file this definition runs in, for BASH_SOURCE in its calls: outside any
                // file, bash names `-c` text `environment` and a script on stdin `main`.
                let mut def = f.clone();
                def.line = self.line;
                def.line_offset = self.line_offset;
                def.source = self.frames.last().map(|fr| fr.file.clone());
                if def.source.is_none() && matches!(self.invocation, Invocation::Stdin { .. }) {
                    def.source = Some(Arc::from("main"));
                }
                self.st.functions.insert(f.name.clone(), Arc::new(def));
                Ok(0)
            }
        }
    }

    fn run_compound(&mut self, c: &CompoundCommand) -> FlowResult {
        match c {
            CompoundCommand::Group(s) => self.run_script(s),
            CompoundCommand::Subshell(s) => {
                self.count_process()?;
                let mut child = self.fork();
                let status = child.run_as_subshell(|c| c.run_script(s));
                drop(child);
                self.reap_coprocs();
                self.check()?;
                Ok(status)
            }
            CompoundCommand::If {
                branches,
                else_body,
            } => {
                for (cond, body) in branches {
                    self.cond += 1;
                    let r = self.run_script(cond);
                    self.cond -= 1;
                    if r? == 0 {
                        return self.run_script(body);
                    }
                }
                match else_body {
                    Some(b) => self.run_script(b),
                    None => Ok(0),
                }
            }
            CompoundCommand::While { cond, body } => self.run_while(cond, body, false),
            CompoundCommand::Until { cond, body } => self.run_while(cond, body, true),
            CompoundCommand::For { var, words, body } => {
                let Some(items) = self.loop_words(var, words.as_deref())? else {
                    return Ok(1);
                };
                // The DEBUG trap sees the header as written (`for i in 1 2`).
                let header = (self.st.traps.contains_key("DEBUG") && !self.in_trap).then(|| {
                    let mut header = format!("for {var}");
                    if let Some(ws) = words {
                        header.push_str(" in");
                        for w in ws.iter() {
                            header.push(' ');
                            header.push_str(&crate::expand::source_text(w));
                        }
                    }
                    header
                });
                self.loops += 1;
                let r = self.run_for(var, items, body, header.as_deref());
                self.loops -= 1;
                r
            }
            CompoundCommand::Coproc { name, body } => self.start_coproc(name, body),
            CompoundCommand::Select { var, words, body } => {
                let Some(items) = self.loop_words(var, words.as_deref())? else {
                    return Ok(1);
                };
                if items.is_empty() {
                    return Ok(0);
                }
                self.loops += 1;
                let r = self.run_select(var, &items, body);
                self.loops -= 1;
                r
            }
            CompoundCommand::ArithFor {
                init,
                cond,
                step,
                body,
            } => {
                self.loops += 1;
                let r = self.run_arith_for(init, cond, step, body);
                self.loops -= 1;
                r
            }
            // bash runs the DEBUG trap before these three as before a simple command.
            CompoundCommand::Case { .. } | CompoundCommand::Arith(_) | CompoundCommand::Cond(_)
                if !self.debug_trap_at(self.line)? =>
            {
                Ok(0)
            }
            CompoundCommand::Case { word, items } => self.run_case(word, items),
            CompoundCommand::Arith(a) => match self.arith(a)? {
                Ok(v) => Ok((v == 0) as i32),
                Err(msg) => {
                    self.err(&format!("((: {msg}"));
                    Ok(1)
                }
            },
            CompoundCommand::Cond(c) => {
                if self.st.opts.xtrace {
                    self.trace(&["[[ ... ]]".to_string()]);
                }
                match self.eval_cond(c)? {
                    Ok(true) => Ok(0),
                    Ok(false) => Ok(1),
                    // A bad regex is status 2 without a word on stderr, as bash.
                    Err(ShellError::BadRegex) => Ok(2),
                    // An arithmetic operand that does not evaluate fails the test (status
                    // 1), and bash names `[[` in front of the expression's message.
                    Err(ShellError::Arith(m)) => {
                        self.err(&format!("[[: {m}"));
                        Ok(1)
                    }
                    Err(msg) => {
                        self.err(&msg.to_string());
                        Ok(2)
                    }
                }
            }
        }
    }

    /// Runs a loop body; `Some(flow)` when the loop must stop (break) or propagate.
    fn loop_body(&mut self, body: &Script) -> FlowResult<LoopStep> {
        match self.run_script(body) {
            Ok(s) => Ok(LoopStep::Next(s)),
            Err(Flow::Break(n)) => {
                if n > 1 {
                    Err(Flow::Break(n - 1))
                } else {
                    Ok(LoopStep::Stop)
                }
            }
            Err(Flow::Continue(n)) => {
                if n > 1 {
                    Err(Flow::Continue(n - 1))
                } else {
                    Ok(LoopStep::Next(self.st.status))
                }
            }
            Err(e) => Err(e),
        }
    }

    fn run_while(&mut self, cond: &Script, body: &Script, until: bool) -> FlowResult {
        self.loops += 1;
        let r = (|| {
            let mut status = 0;
            loop {
                self.check()?;
                self.cond += 1;
                let c = self.run_script(cond);
                self.cond -= 1;
                // `break N`/`continue N` in the condition act on the loops around as from
                // the body. A plain `continue` there succeeds, so it ends `until`; `while`
                // skips its body and tests again, as bash's pending continue does.
                let c = match c {
                    Ok(c) => c,
                    Err(Flow::Break(n)) if n > 1 => return Err(Flow::Break(n - 1)),
                    Err(Flow::Break(_)) => break,
                    Err(Flow::Continue(n)) if n > 1 => return Err(Flow::Continue(n - 1)),
                    Err(Flow::Continue(_)) if until => break,
                    Err(Flow::Continue(_)) => continue,
                    Err(e) => return Err(e),
                };
                if (c == 0) == until {
                    break;
                }
                match self.loop_body(body)? {
                    LoopStep::Next(s) => status = s,
                    LoopStep::Stop => {
                        status = self.st.status;
                        break;
                    }
                }
            }
            Ok(status)
        })();
        self.loops -= 1;
        r
    }

    fn run_for(
        &mut self,
        var: &str,
        items: Vec<String>,
        body: &Script,
        header: Option<&str>,
    ) -> FlowResult {
        let mut status = 0;
        let is_ref = self
            .st
            .vars
            .get(var)
            .is_some_and(|v| v.has(crate::vars::ATTR_NAMEREF));
        let header_line = self.line;
        for item in items {
            self.check()?;
            if let Some(h) = header {
                self.st.vars.put("BASH_COMMAND", Var::scalar(h.to_string()));
            }
            // Under `extdebug` a DEBUG trap that fails skips the iteration.
            if !self.debug_trap_at(header_line)? {
                continue;
            }
            // A nameref loop variable is pointed at each word in turn.
            if is_ref && let Some(v) = self.st.vars.get_mut(var) {
                v.value = crate::vars::Value::Str(item);
            } else if let Err(msg) = self.set_var(var, item) {
                self.err(&msg.to_string());
                return Err(Flow::Exit(1));
            }
            match self.loop_body(body)? {
                LoopStep::Next(s) => status = s,
                LoopStep::Stop => {
                    status = self.st.status;
                    break;
                }
            }
        }
        Ok(status)
    }

    /// The words a `for` or `select` loop goes over (`in` words expanded, else the positional
    /// parameters); `None`, with bash's message, when `var` cannot be a variable's name.
    fn loop_words(&mut self, var: &str, words: Option<&[Word]>) -> FlowResult<Option<Vec<String>>> {
        if !crate::vars::is_valid_name(var) {
            self.err(&format!("`{var}': not a valid identifier"));
            return Ok(None);
        }
        Ok(Some(match words {
            Some(w) => self.expand_words(w)?,
            None => self.st.positional.clone(),
        }))
    }

    /// `select`: the numbered menu and `PS3` on standard error, a line read from standard
    /// input into `REPLY`, the chosen word (or nothing) in `var`, the body; an empty line shows
    /// the menu again, and the end of input ends the loop (a newline on standard output,
    /// status 1), as in bash.
    fn run_select(&mut self, var: &str, items: &[String], body: &Script) -> FlowResult {
        let mut menu = true;
        loop {
            self.check()?;
            if menu {
                let columns = self
                    .get_var("COLUMNS")
                    .and_then(|c| c.trim().parse::<usize>().ok())
                    .filter(|c| *c > 0)
                    .unwrap_or(80);
                let text = select_menu(items, columns);
                self.err_raw(&text);
            }
            let ps3 = self.get_var("PS3").unwrap_or_else(|| "#? ".into());
            self.err_raw(&ps3);
            let Some(reply) = self.read_reply()? else {
                let _ = self.write_fd(1, b"\n");
                return Ok(1);
            };
            if let Err(msg) = self.set_var("REPLY", reply.clone()) {
                self.err(&msg.to_string());
                return Ok(1);
            }
            if reply.is_empty() {
                menu = true;
                continue;
            }
            menu = false;
            let chosen = reply
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=items.len()).contains(n))
                .map_or(String::new(), |n| items[n - 1].clone());
            if let Err(msg) = self.set_var(var, chosen) {
                self.err(&msg.to_string());
                return Err(Flow::Exit(1));
            }
            if let LoopStep::Stop = self.loop_body(body)? {
                return Ok(self.st.status);
            }
        }
    }

    fn run_arith_for(
        &mut self,
        init: &Option<Box<Arith>>,
        cond: &Option<Box<Arith>>,
        step: &Option<Box<Arith>>,
        body: &Script,
    ) -> FlowResult {
        let mut status = 0;
        // The DEBUG trap runs before each of the header's expressions, at the header's line.
        let header_line = self.line;
        // Under `extdebug` an expression whose DEBUG trap fails is not evaluated, and a
        // condition skipped so counts as 0, as in bash.
        if self.debug_trap_at(header_line)?
            && let Some(a) = init
            && let Err(m) = self.arith(a)?
        {
            self.err(&format!("((: {m}"));
            return Ok(1);
        }
        // The header's `$LINENO` stays the header's line after the body moved it.
        let header_line = self.line;
        loop {
            self.check()?;
            self.line = header_line;
            if !self.debug_trap_at(header_line)? {
                break;
            }
            if let Some(a) = cond {
                match self.arith(a)? {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(m) => {
                        self.err(&format!("((: {m}"));
                        return Ok(1);
                    }
                }
            }
            match self.loop_body(body)? {
                LoopStep::Next(s) => status = s,
                LoopStep::Stop => {
                    status = self.st.status;
                    break;
                }
            }
            self.line = header_line;
            if self.debug_trap_at(header_line)?
                && let Some(a) = step
                && let Err(m) = self.arith(a)?
            {
                self.err(&format!("((: {m}"));
                return Ok(1);
            }
        }
        Ok(status)
    }

    fn run_case(&mut self, word: &Word, items: &[CaseItem]) -> FlowResult {
        let subject = self.expand_string(word)?;
        let mut status = 0;
        let mut i = 0;
        let mut fall = false;
        while i < items.len() {
            let item = &items[i];
            let mut hit = fall;
            if !hit {
                for p in &item.patterns {
                    let pat = self.expand_pattern(p)?;
                    if self.pattern_matches(&pat, &subject) {
                        hit = true;
                        break;
                    }
                }
            }
            if hit {
                status = self.run_script(&item.body)?;
                match item.terminator {
                    CaseTerminator::Break => return Ok(status),
                    CaseTerminator::FallThrough => fall = true,
                    CaseTerminator::Continue => fall = false,
                }
            }
            i += 1;
        }
        Ok(status)
    }

    pub(crate) fn pattern_matches(&self, pat: &str, text: &str) -> bool {
        if self.byte_locale() {
            let (pat, text) = (
                crate::interp::bytes_as_chars(pat),
                crate::interp::bytes_as_chars(text),
            );
            return crate::pattern::matches_opts(&pat, &text, self.st.opts.nocasematch);
        }
        if self.st.opts.nocasematch {
            crate::pattern::matches(&pat.to_lowercase(), &text.to_lowercase())
        } else {
            crate::pattern::matches(pat, text)
        }
    }

    // ---- simple commands ----

    fn run_simple(&mut self, cmd: &SimpleCommand) -> FlowResult {
        self.line = self.abs_line(cmd.line);
        self.end_line = self.abs_line(cmd.end_line);
        self.subst_status = None;
        if !self.st.traps.is_empty() && !self.before_command(cmd)? {
            return Ok(0);
        }
        let mut argv: Vec<String> = Vec::new();
        let mut decl_args: Vec<DeclArg> = Vec::new();
        let mut last_decl_word: Option<String> = None;
        let is_decl = cmd.words.iter().any(|a| matches!(a, Arg::Assignment(_)));
        for a in &cmd.words {
            match a {
                Arg::Word(w) => {
                    let fields = self.expand_word_fields(w)?;
                    if is_decl {
                        decl_args.extend(fields.iter().cloned().map(DeclArg::Plain));
                    }
                    argv.extend(fields);
                }
                Arg::Assignment(asg) => {
                    // `declare -A a=(...)`: the literal is an associative array's, though
                    // `a` is not one yet.
                    self.assoc_literal = argv
                        .iter()
                        .skip(1)
                        .any(|w| w.starts_with('-') && w.contains('A'));
                    let v = self.eval_assignment(asg);
                    self.assoc_literal = false;
                    let v = v?;
                    argv.push(format!("{}=", asg.name));
                    // `$_` is the word as expanded: `s=bar`, and for an array just its name.
                    last_decl_word = Some(match &v {
                        AssignedValue::Scalar(s) => format!("{}={s}", asg.name),
                        AssignedValue::Elem(k, s) => format!("{}[{k}]={s}", asg.name),
                        AssignedValue::Array(_) => asg.name.clone(),
                    });
                    decl_args.push(DeclArg::Assign(asg.clone(), v));
                }
            }
        }
        if argv.is_empty() {
            let r = self.run_assignments_only(cmd);
            self.set_last_arg(String::new());
            return r;
        }
        if self.st.opts.xtrace {
            let mut t: Vec<String> = Vec::new();
            for a in &cmd.assignments {
                t.push(format!("{}=...", a.name));
            }
            t.extend(argv.iter().cloned());
            self.trace(&t);
        }
        let last = match (last_decl_word, cmd.words.last()) {
            (Some(w), Some(Arg::Assignment(_))) => w,
            _ => argv.last().cloned().unwrap_or_default(),
        };
        let mut saved = Vec::new();
        let r = match self.apply_redirects(&cmd.redirects) {
            Ok(Ok(s)) => {
                saved = s;
                // A function of the name, or `enable -n`, takes the words as plain arguments.
                let declaration = is_decl
                    && self.is_declaration_builtin(&argv[0])
                    && self.builtin_enabled(&argv[0])
                    && !self.st.functions.contains_key(&argv[0]);
                if is_decl && !declaration {
                    let argv = decl_args.iter().map(DeclArg::text).collect();
                    self.dispatch(cmd, argv)
                } else if declaration {
                    // The command word itself is no operand: `export X=1` must not declare
                    // a variable named `export`.
                    let mut decl_args = decl_args;
                    if matches!(decl_args.first(), Some(DeclArg::Plain(w)) if *w == argv[0]) {
                        decl_args.remove(0);
                    }
                    let name = argv[0].clone();
                    self.with_builtin_bindings(&name, &cmd.assignments, |me| {
                        me.run_declaration(&name, decl_args)
                    })
                } else {
                    self.dispatch(cmd, argv)
                }
            }
            Ok(Err(status)) => Ok(status),
            Err(e) => Err(e),
        };
        self.set_last_arg(last);
        if std::mem::take(&mut self.keep_redirs) {
            return r;
        }
        self.restore_fds(saved);
        r
    }

    /// `$_` after a simple command: its last word. A readonly `_` keeps its value (bash
    /// complains each time); a `_` the script set (`export _=x`) gives way to it and loses its
    /// attributes, as bash rebinds it.
    fn set_last_arg(&mut self, last: String) {
        if let Some(v) = self.st.vars.get("_") {
            if v.has(crate::vars::ATTR_READONLY) {
                self.err("_: readonly variable");
                return;
            }
            self.st.vars.remove("_");
        }
        self.last_arg = last;
    }

    fn run_assignments_only(&mut self, cmd: &SimpleCommand) -> FlowResult {
        for a in &cmd.assignments {
            let v = self.eval_assignment(a)?;
            if self.st.opts.xtrace {
                match &v {
                    AssignedValue::Scalar(s) => self.trace_assignment(&a.name, s),
                    AssignedValue::Elem(k, s) => {
                        self.trace_assignment(&format!("{}[{k}]", a.name), s)
                    }
                    AssignedValue::Array(items) => {
                        let body: Vec<String> = items
                            .iter()
                            .map(|(_, _, v)| crate::expand::quote_for_trace(v))
                            .collect();
                        let ps4 = self.get_var("PS4").unwrap_or_else(|| "+ ".into());
                        let line = format!("{ps4}{}=({})\n", a.name, body.join(" "));
                        self.trace_raw(&line);
                    }
                }
            }
            if let Err(msg) = self.store_assignment(a, v) {
                self.err(&msg.to_string());
                // An arithmetic error assigning to an integer variable or in a subscript ends
                // `bash -c` text; a script abandons the line and goes on.
                let integer = self
                    .st
                    .vars
                    .get(&a.name)
                    .is_some_and(|v| v.has(crate::vars::ATTR_INTEGER));
                if (integer && !matches!(msg, ShellError::Readonly(_)))
                    || matches!(msg, ShellError::SubscriptArith(_))
                {
                    return Err(self.line_error());
                }
                // POSIX makes a failed assignment fatal to a non-interactive shell (bash's
                // `-c` text then ends with 127).
                if self.st.opts.extra.contains("posix") {
                    return Err(Flow::Exit(if self.invocation == Invocation::DashC {
                        127
                    } else {
                        1
                    }));
                }
                if self.st.opts.errexit && self.cond == 0 {
                    return Err(Flow::Exit(1));
                }
                return Err(Flow::Fatal(1));
            }
        }
        match self.apply_redirects(&cmd.redirects)? {
            Ok(saved) => {
                self.restore_fds(saved);
                Ok(self.subst_status.unwrap_or(0))
            }
            Err(s) => Ok(s),
        }
    }

    /// Runs builtin `name` with the bindings in front of it: for its duration, or for good
    /// (and exported) when it is a special builtin in POSIX mode, as POSIX specifies.
    fn with_builtin_bindings(
        &mut self,
        name: &str,
        assigns: &[Assignment],
        f: impl FnOnce(&mut Interp) -> FlowResult,
    ) -> FlowResult {
        let persist = self.st.opts.extra.contains("posix") && self.is_special_builtin(name);
        self.prefix_bindings(assigns, false, persist, f)
    }

    /// Runs `f` with `A=1 B=2` set for its duration (builtins and functions see them).
    fn with_prefix_assignments(
        &mut self,
        assigns: &[Assignment],
        for_function: bool,
        f: impl FnOnce(&mut Interp) -> FlowResult,
    ) -> FlowResult {
        self.prefix_bindings(assigns, for_function, false, f)
    }

    /// As [`Self::with_prefix_assignments`]; with `persist`, a binding still set when the
    /// command ends stays (POSIX mode's special builtins: `x=1 :` sets x, `x=1 unset x`
    /// leaves x as it was).
    fn prefix_bindings(
        &mut self,
        assigns: &[Assignment],
        for_function: bool,
        persist: bool,
        f: impl FnOnce(&mut Interp) -> FlowResult,
    ) -> FlowResult {
        if assigns.is_empty() {
            return f(self);
        }
        let mut saved = Vec::new();
        for a in assigns {
            let mut a = prefix_binding(a);
            // Through a reference the binding is the named variable's, put back after.
            let target = self.reference_target(&a.name);
            if target != a.name {
                a.to_mut().name = target;
            }
            let a = &a;
            let v = self.eval_assignment(a)?;
            let before = self.st.vars.get(&a.name).cloned();
            // bash reports a binding it cannot make (a readonly name) and runs the command
            // without it.
            if let Err(msg) = self.store_assignment(a, v) {
                self.err(&msg.to_string());
                continue;
            }
            saved.push((a.name.clone(), before));
            if let Some(var) = self.st.vars.get_mut(&a.name) {
                var.attrs |= ATTR_EXPORT;
            }
        }
        let hidden_len = self.temp_hidden.len();
        let depth = self.st.vars.frame_count();
        self.temp_hidden.extend(
            saved
                .iter()
                .map(|(name, hidden)| crate::interp::TempBinding {
                    name: name.clone(),
                    hidden: hidden.clone(),
                    depth,
                    for_function,
                    claimed: false,
                    unset: false,
                }),
        );
        let r = f(self);
        // A binding `unset` removed has shown what it hid, and what runs after it sees the
        // variable as the unsets left it: bash ends such a scope without restoring anything.
        let unset: Vec<bool> = self.temp_hidden[hidden_len.min(self.temp_hidden.len())..]
            .iter()
            .map(|t| t.unset)
            .collect();
        self.temp_hidden.truncate(hidden_len);
        for (k, (name, old)) in saved.into_iter().enumerate().rev() {
            if (persist && self.st.vars.scalar(&name).is_some())
                || unset.get(k).copied().unwrap_or(false)
            {
                continue;
            }
            match old {
                Some(v) => self.st.vars.put(&name, v),
                None => {
                    self.st.vars.remove(&name);
                }
            }
        }
        r
    }

    /// Finds what `argv[0]` names and runs it.
    fn dispatch(&mut self, cmd: &SimpleCommand, argv: Vec<String>) -> FlowResult {
        let name = argv[0].clone();
        // POSIX finds special builtins before functions (`eval() {...}` then runs only
        // outside posix mode).
        let special_first = self.st.opts.extra.contains("posix")
            && self.is_special_builtin(&name)
            && self.builtin_enabled(&name);
        // bash looks functions up before it treats a slash as a path: `ns/f() {...}` is
        // called by `ns/f` (only posix mode refuses to define such a name).
        if let Some(f) = self
            .st
            .functions
            .get(&name)
            .filter(|_| !special_first)
            .cloned()
        {
            return self
                .with_prefix_assignments(&cmd.assignments, true, |me| me.call_function(&f, argv));
        }
        if !name.contains('/') && self.builtin_enabled(&name) {
            let program = self.is_program_builtin(&name);
            if program {
                self.count_hash_hit(&name);
            }
            let r = self
                .with_builtin_bindings(&name, &cmd.assignments, |me| me.run_builtin(&name, &argv));
            // A program in bash: the shell waited for a child.
            if program {
                self.forget_ended_jobs();
            }
            return r;
        }
        // The bindings are made one after the other, as bash does: each sees those before it
        // (`A=1 B=$A cmd`), `+=` appends to the shell's value, and the program's environment
        // is the shell's with them.
        let r = self.prefix_bindings(&cmd.assignments, false, false, |me| {
            let env = me.st.vars.environ();
            me.run_external(argv, env)
        });
        self.forget_ended_jobs();
        r
    }

    /// A builtin that is a program in bash is looked up as bash looks up the program, so
    /// that `hash` shows it with its hits; it runs as the builtin either way.
    fn count_hash_hit(&mut self, name: &str) {
        if let Some(h) = self.st.hashed.get_mut(name) {
            h.hits += 1;
            return;
        }
        if let Some(p) = self.find_in(name, None) {
            self.remember_path(name, &p, 1);
        }
    }

    /// Runs a command found through `$PATH` or given by path: a wasm program or a script.
    pub(crate) fn run_external(
        &mut self,
        argv: Vec<String>,
        env: Vec<(String, String)>,
    ) -> FlowResult {
        let r = self.run_external_in(argv, env, None);
        self.reap_coprocs();
        r
    }

    /// As [`Self::run_external`], looking the name up along `search` instead of the
    /// environment's `PATH` when given (`command -p`).
    pub(crate) fn run_external_in(
        &mut self,
        argv: Vec<String>,
        env: Vec<(String, String)>,
        search: Option<&str>,
    ) -> FlowResult {
        let name = argv[0].clone();
        let path = if name.contains('/') {
            wasmsand_vfs::path::join(&self.st.cwd, &name)
        } else {
            let path_var = search.or_else(|| {
                env.iter()
                    .find(|(k, _)| k == "PATH")
                    .map(|(_, v)| v.as_str())
            });
            // The remembered path serves only a lookup along the shell's own PATH (not
            // `PATH=... cmd` or `command -p`), as bash's table does.
            let own_path = search.is_none() && path_var.map(str::to_string) == self.get_var("PATH");
            match self.st.hashed.get_mut(&name).filter(|_| own_path) {
                Some(h) => {
                    h.hits += 1;
                    h.path.clone()
                }
                None => match self.find_in(&name, path_var) {
                    Some(p) => {
                        if own_path {
                            self.remember_path(&name, &p, 1);
                        }
                        p
                    }
                    None => {
                        self.err(&format!("{name}: command not found"));
                        return Ok(127);
                    }
                },
            }
        };
        let (meta, data) = {
            let vfs = self.rt.vfs.lock();
            let meta = vfs.stat(&path);
            let data = match &meta {
                Ok(m) if m.file_type == wasmsand_vfs::FileType::File => vfs.read(&path).ok(),
                _ => None,
            };
            (meta, data)
        };
        let meta = match meta {
            Ok(m) => m,
            Err(e) => {
                self.err(&format!("{name}: {}", strerror(e.errno)));
                // bash's "not found" is only a missing file; any other failure to reach it
                // (a name too long, a file as a directory) is "cannot execute".
                return Ok(if e.errno == wasmsand_vfs::Errno::ENOENT {
                    127
                } else {
                    126
                });
            }
        };
        if meta.file_type == wasmsand_vfs::FileType::Dir {
            self.err(&format!("{name}: Is a directory"));
            return Ok(126);
        }
        if meta.mode & 0o111 == 0 {
            // A file found along PATH is named by its path, as bash does.
            let shown = if name.contains('/') { &name } else { &path };
            self.err(&format!("{shown}: Permission denied"));
            return Ok(126);
        }
        let data = data.unwrap_or_default();
        if data.as_ref() == crate::SHELL_MARKER {
            let mut args = argv;
            args[0] = "bash".into();
            return self.run_builtin("bash", &args);
        }
        if data.starts_with(b"\0asm") {
            let program = match self.program_for(&data) {
                Ok(p) => p,
                Err(e) => {
                    self.err(&format!("{name}: cannot execute: {e}"));
                    return Ok(126);
                }
            };
            // A guest module serves several commands and picks one by argv[0]: run through
            // a link (`ln -s /bin/ls myls`) or a remembered path (`hash -p /bin/true t`), it
            // is told the name of the file it really is.
            let mut argv = argv;
            // bash gives a program it runs `_` as the path it ran (not through `exec`, nor
            // `env`, whose environment is exactly what they were given).
            let mut env = env;
            if !self.exact_env {
                env.retain(|(k, _)| k != "_");
                let ran = if name.contains('/') { &name } else { &path };
                env.push(("_".into(), ran.clone()));
            }
            let real = self.rt.vfs.lock().realpath(&path).unwrap_or(path);
            let real_name = real.rsplit('/').next().unwrap_or(&real);
            if argv[0].rsplit('/').next() != Some(real_name) {
                argv[0] = real_name.to_string();
            }
            return self.run_program(&program, argv, env);
        }
        self.run_script_file(&path, &data, argv, env)
    }

    /// Runs an executable text file: its `#!` line picks the interpreter; without one it is
    /// a shell script (as bash does on ENOEXEC).
    fn run_script_file(
        &mut self,
        path: &str,
        data: &[u8],
        argv: Vec<String>,
        env: Vec<(String, String)>,
    ) -> FlowResult {
        let text = wasmsand_exec::raw::decode(data);
        let mut interp_argv: Vec<String> = Vec::new();
        if let Some(rest) = text.strip_prefix("#!") {
            let line = rest.lines().next().unwrap_or("").trim();
            let mut parts = line.split_whitespace();
            let prog = parts.next().unwrap_or("");
            let base = prog.rsplit('/').next().unwrap_or(prog);
            if base == "env" {
                interp_argv.extend(parts.map(str::to_string));
            } else {
                interp_argv.push(base.to_string());
                if let Some(arg) = line[prog.len()..].split_whitespace().next() {
                    interp_argv.push(arg.to_string());
                }
            }
        }
        if interp_argv.is_empty() && looks_binary(data) {
            self.err(&format!(
                "{path}: cannot execute binary file: Exec format error"
            ));
            return Ok(126);
        }
        let is_shell =
            interp_argv.is_empty() || matches!(interp_argv[0].as_str(), "bash" | "sh" | "dash");
        if is_shell {
            return self.run_shell_script(
                &text,
                argv[0].clone(),
                argv[1..].to_vec(),
                env,
                Invocation::File,
                &[],
            );
        }
        let mut full = interp_argv;
        full.push(path.to_string());
        full.extend(argv.into_iter().skip(1));
        let name = full[0].clone();
        if self.builtin_enabled(&name) {
            return self.run_builtin(&name, &full);
        }
        self.run_external(full, env)
    }

    /// A shell script in a child shell: exported variables and functions carry over (as
    /// `bash script` would see the environment), nothing flows back.
    pub(crate) fn run_shell_script(
        &mut self,
        text: &str,
        arg0: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
        invocation: Invocation,
        set_opts: &[StartOption],
    ) -> FlowResult {
        let from_dash_c = invocation == Invocation::DashC;
        self.count_process()?;
        // bash drops NUL bytes from what it reads as script text.
        let text = &text.replace('\0', "");
        let exec_pid = std::mem::take(&mut self.job_exec).then(|| self.bashpid());
        let mut child = self.fork();
        // A new bash process: `$$` is its own pid from here on (the job's, when it is what a
        // background job runs).
        child.outer_shells.push(self.shell_pid());
        if let Some(pid) = exec_pid {
            child.subshell_pid = Some(std::cell::OnceCell::from(pid));
        }
        child.nested_shell_pid = Some(child.bashpid());
        child.subshell_depth = 0;
        let shell_pid = child.bashpid();
        // What this shell ignores, the new one starts ignoring and cannot trap.
        let ignored: Vec<String> = child
            .st
            .traps
            .iter()
            .filter(|(k, v)| k.starts_with("SIG") && v.is_empty())
            .map(|(k, _)| k.clone())
            .chain(child.st.untrappable.iter().cloned())
            .collect();
        child.st.traps = im::OrdMap::new();
        for sig in ignored {
            child.st.traps.insert(sig.clone(), String::new());
            child.st.untrappable.insert(sig);
        }
        child.publish_traps();
        child.st.vars = crate::vars::Vars::default();
        // A new bash process remembers no program paths yet, and starts with every builtin
        // enabled, readline's and completion's defaults and no directory stack.
        child.st.hashed = im::HashMap::new();
        child.st.disabled_builtins = im::OrdSet::new();
        child.st.readline = None;
        child.st.completions = im::HashMap::new();
        child.st.dirstack = Vec::new();
        for (k, v) in env {
            child.st.vars.put(
                &k,
                Var {
                    value: crate::vars::Value::Str(v),
                    attrs: ATTR_EXPORT,
                },
            );
        }
        for (k, v) in [("IFS", " \t\n"), ("PS4", "+ ")] {
            child.st.vars.put(k, Var::scalar(v));
        }
        // A bash started without PATH in its environment sets its built-in default (not
        // exported).
        if child.st.vars.get("PATH").is_none() {
            child
                .st
                .vars
                .put("PATH", Var::scalar(crate::interp::DEFAULT_PATH));
        }
        crate::interp::bash_variables(&mut child.st.vars);
        if let Some(path) = set_opts
            .iter()
            .find_map(|o| match o {
                StartOption::Name(n) => Some(n),
                _ => None,
            })
            .and_then(|n| child.find_in_path(n))
        {
            child.st.vars.put("BASH", Var::scalar(path));
        }
        // An OLDPWD from the environment that names no directory is kept exported, with
        // no value, as bash does.
        if let Some(old) = child.get_var("OLDPWD")
            && !child.is_dir(&old)
        {
            child.st.vars.put(
                "OLDPWD",
                Var {
                    value: crate::vars::Value::Unset,
                    attrs: ATTR_EXPORT,
                },
            );
        }
        if from_dash_c {
            child
                .st
                .vars
                .put("BASH_EXECUTION_STRING", Var::scalar(text));
        }
        // Only `export -f` functions reach a child shell, as through bash's environment.
        let exported = std::mem::take(&mut child.st.exported_functions);
        child.st.functions = child
            .st
            .functions
            .iter()
            .filter(|(k, _)| exported.contains(*k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        child.st.exported_functions = exported;
        child.st.readonly_functions = im::HashSet::new();
        child.st.opts = crate::interp::Options {
            expand_aliases: false,
            ..Default::default()
        };
        child.st.aliases = im::OrdMap::new();
        // A new bash has its own call stack: a script file is its `main` frame, `-c` text
        // and a script read from stdin none.
        child.funcnames.clear();
        child.invocation = invocation;
        child.frames = if invocation != Invocation::File {
            Vec::new()
        } else {
            vec![crate::interp::SourceFrame {
                file: Arc::from(arg0.as_str()),
                kind: "main".into(),
                line: 0,
            }]
        };
        child.sync_bash_source();
        child.set_funcname();
        child.st.arg0 = arg0;
        child.st.positional = args;
        child.st.status = 0;
        child.line = 1;
        // As bash starting up: the options an exported SHELLOPTS/BASHOPTS lists are on, and
        // SHELL is set when the environment has none.
        for (var, shopt) in [("SHELLOPTS", false), ("BASHOPTS", true)] {
            if let Some(list) = child.st.vars.scalar(var).map(str::to_string) {
                for name in list.split(':').filter(|n| !n.is_empty()) {
                    if shopt {
                        child.set_shopt(name, true);
                    } else {
                        child.set_option(name, true);
                    }
                }
            }
        }
        if child.st.vars.get("SHELL").is_none() {
            child.st.vars.put("SHELL", Var::scalar("/bin/bash"));
        }
        // Without an inherited PWD, bash starts from the physical directory.
        if child.st.vars.get("PWD").is_none() {
            if let Ok(real) = self.rt.vfs.lock().realpath(&child.st.cwd) {
                child.st.cwd = real;
            }
            child.st.vars.put(
                "PWD",
                Var {
                    value: crate::vars::Value::Str(child.st.cwd.clone()),
                    attrs: ATTR_EXPORT,
                },
            );
        }
        let mut interactive = false;
        let mut startup = crate::interactive::Startup::default();
        for o in set_opts {
            match o {
                StartOption::Set(name, on) => {
                    if !child.set_option(name, *on) {
                        self.err_raw(&format!("bash: {name}: invalid option name\n"));
                        return Ok(2);
                    }
                }
                StartOption::Shopt(name, on) => {
                    if !child.set_shopt(name, *on) {
                        self.err_raw(&format!("bash: {name}: invalid shell option name\n"));
                        return Ok(2);
                    }
                }
                StartOption::Interactive => interactive = true,
                StartOption::RcFile(f) => startup.rcfile = Some(f.clone()),
                StartOption::NoRc => startup.norc = true,
                StartOption::Name(_) => {}
            }
        }
        child.sync_option_vars();
        // A shell that is not interactive drops the prompts it was given, as bash does. `$_`
        // starts as the environment's `_` (the path the parent shell ran it by), else as the
        // name bash was run by.
        if !interactive {
            child.st.vars.remove("PS1");
            child.st.vars.remove("PS2");
        }
        child.last_arg = child
            .st
            .vars
            .remove("_")
            .and_then(|v| v.scalar_value().map(str::to_string))
            .unwrap_or_else(|| "bash".into());
        let name = child.st.arg0.clone();
        let kind = match invocation {
            Invocation::DashC => crate::SourceKind::DashC,
            // bash names no line for a syntax error in a script it reads from a pipe.
            Invocation::Stdin { seekable: false } => crate::SourceKind::Eval,
            Invocation::Stdin { seekable: true } => crate::SourceKind::Script("bash"),
            Invocation::File => crate::SourceKind::Script(&name),
        };
        // A new bash keeps a history of its own, and counts the commands it reads from a
        // script or its input.
        child.st.history = im::Vector::new();
        child.st.history_base = 1;
        child.st.history_new = 0;
        child.st.history_offset = 0;
        child.st.history_lines_read = 0;
        child.st.history_last_added = false;
        child.st.command_number = usize::from(!from_dash_c);
        child.counts_commands = !from_dash_c && !interactive;
        let reads_input = matches!(invocation, Invocation::Stdin { .. });
        let status = child.run_as_subshell(|c| {
            c.enter()?;
            let s = if interactive {
                match c.start_interactive(&startup, reads_input) {
                    Err(f) => crate::flow_status(c, f),
                    Ok(()) if reads_input => c.run_interactive(),
                    Ok(()) => crate::run_top(c, text, kind),
                }
            } else if reads_input {
                crate::run_input(c, kind)
            } else {
                crate::run_top(c, text, kind)
            };
            c.save_history();
            c.depth -= 1;
            Ok(s)
        });
        self.rt.trapping_shells.lock().remove(&shell_pid);
        drop(child);
        self.check()?;
        Ok(status)
    }

    pub(crate) fn call_function(&mut self, f: &Arc<FunctionDef>, argv: Vec<String>) -> FlowResult {
        self.enter()?;
        self.job_exec = false;
        let saved_pos = std::mem::replace(&mut self.st.positional, argv[1..].to_vec());
        let saved_loops = std::mem::replace(&mut self.loops, 0);
        self.st.vars.push_frame();
        self.funcnames.push(f.name.clone());
        self.frames.push(crate::interp::SourceFrame {
            file: f.source.clone().unwrap_or_else(|| Arc::from("environment")),
            kind: f.name.clone(),
            line: self.line,
        });
        self.sync_bash_source();
        self.set_funcname();
        let return_trap_before = self.st.traps.get("RETURN").cloned();
        self.saved_opts.push(None);
        self.return_traps.push(return_trap_before.clone());
        let call_line = self.line;
        // The body's lines are those of the text that defined it, whatever `eval` or trap
        // text the call comes from.
        // An interactive bash counts them from the definition's line, as 1.
        let body_offset = if self.st.opts.interactive {
            f.line_offset.wrapping_add(1).wrapping_sub(f.line)
        } else {
            f.line_offset
        };
        let caller_offset = std::mem::replace(&mut self.line_offset, body_offset);
        // Under `set -T` the DEBUG trap runs once more as the function starts, still for the
        // call (`$BASH_COMMAND` is the call's text), as bash runs it.
        // Under `extdebug` the call's arguments join `BASH_ARGV`, and a DEBUG trap that
        // fails there skips the body.
        let pushed_args = self.st.opts.extdebug;
        if pushed_args {
            self.push_bash_args(&argv[1..]);
        }
        let entry = match self.st.traps.get("DEBUG").cloned() {
            Some(action) if self.st.opts.functrace && !self.trap_running(TrapKind::Debug) => {
                self.run_debug_trap(&action)
            }
            _ => Ok(true),
        };
        let mut r = match entry {
            Ok(true) => self.run_command(&f.body),
            Ok(false) => Ok(0),
            Err(e) => Err(e),
        };
        self.line_offset = caller_offset;
        // Back in the caller, `$LINENO` (in an ERR trap for the call, say) is the call's line.
        self.line = call_line;
        self.return_traps.pop();
        if let Some(Some(opts)) = self.saved_opts.pop() {
            self.st.opts = opts;
        }
        // A RETURN trap fires for a function that set it, or for every one under `set -T`.
        if !self.in_trap
            && let Some(action) = self.st.traps.get("RETURN").cloned()
            && (self.st.opts.functrace || return_trap_before.as_ref() != Some(&action))
        {
            // `$?` there is the status before `return` ran (the last command's), as in bash;
            // the call still returns what `return` said.
            if let Ok(s) = &r {
                self.st.status = *s;
            }
            if let Err(e) = self.run_trap_action(&action, TrapKind::Return) {
                r = Err(e);
            }
        }
        self.funcnames.pop();
        self.frames.pop();
        self.st.vars.pop_frame();
        if pushed_args {
            self.pop_bash_args();
        }
        self.sync_bash_source();
        self.set_funcname();
        self.loops = saved_loops;
        self.st.positional = saved_pos;
        self.depth -= 1;
        match r {
            Err(Flow::Return(s)) => Ok(s),
            Err(Flow::Break(_)) | Err(Flow::Continue(_)) => Ok(self.st.status),
            other => other,
        }
    }

    /// The line a command parsed at `line` of its text runs on. The offset wraps below zero
    /// for an interactive shell's function bodies, which count from their definition.
    pub(crate) fn abs_line(&self, line: usize) -> usize {
        line.wrapping_add(self.line_offset)
    }

    /// `BASH_SOURCE` (the file of each frame) and `BASH_LINENO` (the line each was entered
    /// from), innermost first; empty arrays when no file runs and no function is called.
    pub(crate) fn sync_bash_source(&mut self) {
        let files = self.frames_array(|f| f.file.to_string());
        let lines = self.frames_array(|f| f.line.to_string());
        for (name, value) in [("BASH_SOURCE", files), ("BASH_LINENO", lines)] {
            self.st.vars.put(name, Var { value, attrs: 0 });
        }
    }

    fn frames_array(
        &self,
        field: impl Fn(&crate::interp::SourceFrame) -> String,
    ) -> crate::vars::Value {
        crate::vars::Value::Indexed(
            self.frames
                .iter()
                .rev()
                .enumerate()
                .map(|(i, f)| (i as i64, field(f)))
                .collect(),
        )
    }

    /// `BASH_ARGV`/`BASH_ARGC` set up as bash does on first need: the positional parameters
    /// of that moment become their outermost frame, which later `set --` does not change.
    pub(crate) fn init_bash_argv(&mut self) {
        if self.bash_argv.is_none() {
            self.bash_argv = Some(vec![self.st.positional.clone()]);
            self.sync_bash_argv();
        }
    }

    /// A use of `BASH_ARGV`/`BASH_ARGC` outside any function sets them up (bash's dynamic
    /// variables do so at the top level only).
    pub(crate) fn touch_bash_argv(&mut self, name: &str) {
        if self.bash_argv.is_none()
            && matches!(name, "BASH_ARGV" | "BASH_ARGC")
            && self.funcnames.is_empty()
        {
            self.init_bash_argv();
        }
    }

    pub(crate) fn push_bash_args(&mut self, args: &[String]) {
        self.init_bash_argv();
        if let Some(frames) = &mut self.bash_argv {
            frames.push(args.to_vec());
        }
        self.sync_bash_argv();
    }

    pub(crate) fn pop_bash_args(&mut self) {
        if let Some(frames) = &mut self.bash_argv
            && frames.len() > 1
        {
            frames.pop();
            self.sync_bash_argv();
        }
    }

    /// `BASH_ARGV` holds every frame's arguments, the innermost frame's last one first;
    /// `BASH_ARGC` how many each frame has, innermost first.
    fn sync_bash_argv(&mut self) {
        let Some(frames) = &self.bash_argv else {
            return;
        };
        let argv = frames.iter().rev().flat_map(|f| f.iter().rev().cloned());
        let argc = frames.iter().rev().map(|f| f.len().to_string());
        for (name, values) in [
            ("BASH_ARGV", argv.collect::<Vec<_>>()),
            ("BASH_ARGC", argc.collect()),
        ] {
            let value = crate::vars::Value::Indexed((0..).zip(values).collect());
            self.st.vars.put(name, Var { value, attrs: 0 });
        }
    }

    /// `FUNCNAME`: what each frame is, innermost first (`main` for a script, `source` for a
    /// sourced file); set only while a function runs, as in bash.
    pub(crate) fn set_funcname(&mut self) {
        if self.funcnames.is_empty() {
            // Outside functions bash keeps it declared without a value.
            let none = Var {
                value: crate::vars::Value::Indexed(Default::default()),
                attrs: crate::vars::ATTR_NOVALUE,
            };
            self.st.vars.put("FUNCNAME", none);
            return;
        }
        let value = self.frames_array(|f| f.kind.clone());
        self.st.vars.put("FUNCNAME", Var { value, attrs: 0 });
    }

    /// `set -x` for an assignment: `+ name=value` with the value quoted as needed.
    fn trace_assignment(&mut self, name: &str, value: &str) {
        let ps4 = self.get_var("PS4").unwrap_or_else(|| "+ ".into());
        let line = format!("{ps4}{name}={}\n", crate::expand::quote_for_trace(value));
        self.trace_raw(&line);
    }

    /// `set -x`: the command on stderr after `PS4`.
    pub(crate) fn trace(&mut self, words: &[String]) {
        let ps4 = self.get_var("PS4").unwrap_or_else(|| "+ ".into());
        let mut line = String::new();
        line.push_str(&ps4);
        for (i, w) in words.iter().enumerate() {
            if i > 0 {
                line.push(' ');
            }
            line.push_str(&crate::expand::quote_for_trace(w));
        }
        line.push('\n');
        self.trace_raw(&line);
    }

    // ---- redirections ----

    /// Applies redirections to the descriptor table. On success, what they replaced, for
    /// [`Interp::restore_fds`]; `Ok(Err(status))` when one failed (the message was printed, the
    /// table is as before, the command does not run).
    pub(crate) fn apply_redirects(
        &mut self,
        redirs: &[Redirect],
    ) -> FlowResult<Result<Vec<Saved>, i32>> {
        let mut saved = Vec::new();
        for r in redirs {
            match self.redirect(r, &mut saved) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    if !matches!(e, ShellError::Reported) {
                        self.err(&e.to_string());
                    }
                    self.restore_fds(saved);
                    return Ok(Err(1));
                }
                Err(e) => {
                    self.restore_fds(saved);
                    return Err(e);
                }
            }
        }
        Ok(Ok(saved))
    }

    /// Puts back the descriptors a command's redirections replaced. Only those: what the
    /// command itself did to others (`exec 3>f` in a redirected group, `{name}>f`) stays, as in
    /// bash.
    pub(crate) fn restore_fds(&mut self, saved: Vec<Saved>) {
        for s in saved.into_iter().rev() {
            self.fds.restore(s);
        }
    }

    fn redirect(
        &mut self,
        r: &Redirect,
        saved: &mut Vec<Saved>,
    ) -> FlowResult<Result<(), ShellError>> {
        let default_fd = match r.op {
            RedirOp::Read
            | RedirOp::ReadWrite
            | RedirOp::DupRead
            | RedirOp::HereDoc
            | RedirOp::HereString => 0,
            _ => 1,
        };
        if let Some(name) = &r.fd_var {
            return self.redirect_named(r, name);
        }
        let fd = r.fd.unwrap_or(default_fd);
        if fd > MAX_FD {
            // bash names what it failed to copy, or the descriptor it failed to open.
            let what = match (&r.op, &r.target) {
                (RedirOp::DupRead | RedirOp::DupWrite, RedirTarget::Word(w)) => {
                    crate::expand::source_text(w)
                }
                _ => fd.to_string(),
            };
            return Ok(Err(ShellError::BadFdNamed(what)));
        }
        saved.push(self.fds.take_snapshot(fd));
        if matches!(r.op, RedirOp::WriteAll | RedirOp::AppendAll)
            || (r.op == RedirOp::DupWrite && r.fd.is_none())
        {
            saved.push(self.fds.take_snapshot(2));
        }
        self.redirect_to(r, fd)
    }

    /// `{name}>file`: the file opens on the lowest free descriptor from 10, whose number goes
    /// into `name`; `{name}>&-` closes the descriptor `name` holds. Neither is undone after
    /// the command.
    fn redirect_named(&mut self, r: &Redirect, name: &str) -> FlowResult<Result<(), ShellError>> {
        let closing = matches!(r.op, RedirOp::DupRead | RedirOp::DupWrite)
            && matches!(&r.target, RedirTarget::Word(w) if crate::expand::source_text(w) == "-");
        if closing {
            let n = self
                .value_of_named(name)
                .and_then(|v| v.trim().parse::<u32>().ok());
            let Some(n) = n.filter(|n| *n <= MAX_FD) else {
                return Ok(Err(ShellError::AmbiguousRedirect(name.to_string())));
            };
            self.fds.set(n, None);
            return Ok(Ok(()));
        }
        let Some(fd) = self.fds.free_from_10() else {
            return Ok(Err(ShellError::TooManyFiles(name.to_string())));
        };
        if let Err(m) = self.redirect_to(r, fd)? {
            return Ok(Err(m));
        }
        if let Err(m) = self.assign_named(name, fd.to_string()) {
            self.fds.set(fd, None);
            self.err(&m.to_string());
            return Ok(Err(ShellError::FdVariable(name.to_string())));
        }
        Ok(Ok(()))
    }

    fn redirect_to(&mut self, r: &Redirect, fd: u32) -> FlowResult<Result<(), ShellError>> {
        let word = match &r.target {
            RedirTarget::HereDoc(h) => {
                let body = if h.quoted {
                    crate::expand::literal_text(&h.body)
                } else {
                    // An unset variable under `set -u` fails the command only (bash reads on).
                    match self.expand_heredoc(&h.body) {
                        Err(Flow::Unbound) => return Ok(Err(ShellError::Reported)),
                        other => other?,
                    }
                };
                self.check_size(body.len(), "here-document")?;
                self.fds.set(
                    fd,
                    Some(Fd::In(bytes_input(wasmsand_exec::raw::encode_string(body)))),
                );
                return Ok(Ok(()));
            }
            RedirTarget::Word(w) => w,
        };
        if r.op == RedirOp::HereString {
            let mut s = self.expand_string(word)?;
            s.push('\n');
            self.check_size(s.len(), "here-string")?;
            self.fds.set(
                fd,
                Some(Fd::In(bytes_input(wasmsand_exec::raw::encode_string(s)))),
            );
            return Ok(Ok(()));
        }
        let fields = self.expand_word_fields(word)?;
        let target = match fields.as_slice() {
            [one] => one.clone(),
            _ => {
                let raw = crate::expand::source_text(word);
                return Ok(Err(ShellError::AmbiguousRedirect(raw)));
            }
        };
        // bash opens the file on a free descriptor before moving it: `ulimit -n` bounds that.
        let opens_file = match r.op {
            RedirOp::DupRead | RedirOp::DupWrite => {
                target != "-" && target.trim_end_matches('-').parse::<u32>().is_err()
            }
            _ => true,
        };
        if opens_file
            && self
                .ulimit_value('n', false)
                .is_some_and(|n| u64::from(self.fds.lowest_free()) >= n)
        {
            return Ok(Err(ShellError::TooManyFiles(target)));
        }
        match r.op {
            RedirOp::DupRead | RedirOp::DupWrite => {
                if target == "-" {
                    self.fds.set(fd, None);
                    return Ok(Ok(()));
                }
                let src = target.trim_end_matches('-');
                if let Ok(n) = src.parse::<u32>() {
                    if !self.fds.dup(n, fd, r.op == RedirOp::DupWrite) {
                        return Ok(Err(ShellError::BadFdNamed(n.to_string())));
                    }
                    // bash does not reopen a moved descriptor after the command
                    // (`echo a 3>&1-` leaves stdout closed).
                    if target.ends_with('-') && n != fd {
                        self.fds.set(n, None);
                    }
                    return Ok(Ok(()));
                }
                // A file name after `>&` is only bash's `&>` when no descriptor other than 1
                // was given.
                if r.op == RedirOp::DupRead || r.fd.is_some_and(|n| n != 1) {
                    return Ok(Err(ShellError::AmbiguousRedirect(target)));
                }
                // `>& file` is `&> file` when no descriptor was given.
                let out = match self.open_output(&target, false, true)? {
                    Ok(o) => o,
                    Err(m) => return Ok(Err(m)),
                };
                if r.fd.is_none() {
                    self.fds.set(2, Some(Fd::Out(out.clone())));
                }
                self.fds.set(fd, Some(Fd::Out(out)));
                Ok(Ok(()))
            }
            RedirOp::Read => {
                let src = match self.open_input(&target) {
                    Ok(s) => s,
                    Err(m) => return Ok(Err(m)),
                };
                self.fds.set(fd, Some(Fd::In(src)));
                Ok(Ok(()))
            }
            RedirOp::ReadWrite => {
                let abs = wasmsand_vfs::path::join(&self.st.cwd, &target);
                let created = self.rt.vfs.lock().create(&abs, false);
                if let Err(e) = created {
                    return Ok(Err(ShellError::Path {
                        path: target,
                        errno: e.errno,
                    }));
                }
                let f = OpenFile::new(self.rt.vfs.clone(), abs, false);
                self.fds.set_rw(fd, f);
                Ok(Ok(()))
            }
            RedirOp::Write | RedirOp::Clobber | RedirOp::Append => {
                let append = r.op == RedirOp::Append;
                let clobber = r.op == RedirOp::Clobber;
                match self.open_output(&target, append, clobber)? {
                    Ok(o) => {
                        self.fds.set(fd, Some(Fd::Out(o)));
                        Ok(Ok(()))
                    }
                    Err(m) => Ok(Err(m)),
                }
            }
            RedirOp::WriteAll | RedirOp::AppendAll => {
                match self.open_output(&target, r.op == RedirOp::AppendAll, false)? {
                    Ok(o) => {
                        self.fds.set(1, Some(Fd::Out(o.clone())));
                        self.fds.set(2, Some(Fd::Out(o)));
                        Ok(Ok(()))
                    }
                    Err(m) => Ok(Err(m)),
                }
            }
            RedirOp::HereDoc | RedirOp::HereString => unreachable!("handled above"),
        }
    }

    pub(crate) fn check_size(&mut self, len: usize, what: &str) -> FlowResult<()> {
        if len > self.st.limits.max_word_bytes {
            return Err(self.limit(format!(
                "{what}: too large ({len} bytes, limit: {})",
                self.st.limits.max_word_bytes
            )));
        }
        Ok(())
    }

    pub(crate) fn open_input(&mut self, target: &str) -> Result<InSrc, ShellError> {
        match target {
            "/dev/stdin" => {
                return Ok(match self.fds.get(0) {
                    Some(Fd::In(s)) => s.clone(),
                    _ => InSrc::Empty,
                });
            }
            "/dev/null" => return Ok(InSrc::Empty),
            _ => {}
        }
        let abs = wasmsand_vfs::path::join(&self.st.cwd, target);
        let vfs = self.rt.vfs.lock();
        // A `<( )` of this command is read from what it wrote: its file goes when the
        // command ends, and `exec 3< <(...)` keeps reading after that.
        if self
            .procsubs
            .iter()
            .any(|(p, reader)| *p == abs && reader.is_none())
            && let Ok(data) = vfs.read(&abs)
        {
            return Ok(InSrc::Bytes(Arc::new(Mutex::new((data, 0)))));
        }
        match vfs.stat(&abs) {
            Ok(_) => {}
            Err(e) => {
                return Err(ShellError::Path {
                    path: target.to_string(),
                    errno: e.errno,
                });
            }
        }
        drop(vfs);
        Ok(InSrc::File(OpenFile::new(self.rt.vfs.clone(), abs, false)))
    }

    /// Opens (creating, truncating unless `append`) a file for output.
    pub(crate) fn open_output(
        &mut self,
        target: &str,
        append: bool,
        clobber: bool,
    ) -> FlowResult<Result<Output, ShellError>> {
        match target {
            "/dev/null" => return Ok(Ok(Output::Null)),
            "/dev/stdout" => return Ok(Ok(self.fds.output(1).unwrap_or(Output::Null))),
            "/dev/stderr" => return Ok(Ok(self.fds.output(2).unwrap_or(Output::Null))),
            _ => {}
        }
        if target.is_empty() {
            return Ok(Err(ShellError::Path {
                path: String::new(),
                errno: wasmsand_vfs::Errno::ENOENT,
            }));
        }
        let abs = wasmsand_vfs::path::join(&self.st.cwd, target);
        let mut vfs = self.rt.vfs.lock();
        let existing = vfs.stat(&abs);
        if let Ok(m) = &existing {
            if m.file_type == wasmsand_vfs::FileType::Dir {
                return Ok(Err(ShellError::Path {
                    path: target.to_string(),
                    errno: wasmsand_vfs::Errno::EISDIR,
                }));
            }
            if m.file_type == wasmsand_vfs::FileType::CharDevice {
                drop(vfs);
                return Ok(Ok(Output::File(OpenFile::new(
                    self.rt.vfs.clone(),
                    abs,
                    append,
                ))));
            }
            if self.st.opts.noclobber && !append && !clobber {
                return Ok(Err(ShellError::Clobber(target.to_string())));
            }
        }
        let r = if append {
            vfs.create(&abs, false).map(|_| ())
        } else if existing.is_ok() {
            vfs.truncate(&abs, 0)
        } else {
            vfs.create(&abs, false).map(|_| ())
        };
        if let Err(e) = r {
            return Ok(Err(ShellError::Path {
                path: target.to_string(),
                errno: e.errno,
            }));
        }
        drop(vfs);
        Ok(Ok(Output::File(OpenFile::new(
            self.rt.vfs.clone(),
            abs,
            append,
        ))))
    }
}

/// `select`'s menu as bash lays it out: numbered items in columns filled top to bottom, as
/// many as `columns` allows, a list that fits on one line shown one item per line.
fn select_menu(items: &[String], columns: usize) -> String {
    let digits = |n: usize| n.to_string().len();
    let n = items.len();
    let indices = digits(n);
    let width = items.iter().map(|i| i.chars().count()).max().unwrap_or(0) + indices + 4;
    let mut cols = (columns / width).max(1);
    let mut rows = n.div_ceil(cols);
    cols = n.div_ceil(rows);
    if rows == 1 {
        rows = cols;
    }
    let first_indices = digits(rows);
    let mut out = String::new();
    for row in 0..rows {
        let (mut at, mut pos) = (row, 0);
        loop {
            let w = if pos == 0 { first_indices } else { indices };
            let item = &items[at];
            out.push_str(&format!("{:>w$}) {item}", at + 1));
            let len = w + 2 + item.chars().count();
            at += rows;
            if at >= n {
                break;
            }
            // To the next column with tabs where they fit, then spaces, as bash indents.
            let (mut from, to) = (pos + len, pos + width);
            while to / 8 > from / 8 {
                out.push('\t');
                from += 8 - from % 8;
            }
            out.extend(std::iter::repeat_n(' ', to.saturating_sub(from)));
            pos += width;
        }
        out.push('\n');
    }
    out
}

enum LoopStep {
    Next(i32),
    Stop,
}

pub(crate) fn bytes_input(data: Vec<u8>) -> InSrc {
    InSrc::Bytes(Arc::new(Mutex::new((bytes::Bytes::from(data), 0))))
}

/// An argument of a declaration builtin: a plain word or an assignment (already evaluated).
#[derive(Debug, Clone)]
pub(crate) enum DeclArg {
    Plain(String),
    Assign(Assignment, AssignedValue),
}

impl DeclArg {
    /// The argument as one word, for a command that is no declaration after all.
    pub(crate) fn text(&self) -> String {
        match self {
            DeclArg::Plain(s) => s.clone(),
            DeclArg::Assign(a, v) => {
                let op = if a.append { "+=" } else { "=" };
                match v {
                    AssignedValue::Scalar(s) => format!("{}{op}{s}", a.name),
                    AssignedValue::Elem(k, s) => format!("{}[{k}]{op}{s}", a.name),
                    AssignedValue::Array(items) => {
                        let items: Vec<&str> = items.iter().map(|(_, _, v)| v.as_str()).collect();
                        format!("{}{op}({})", a.name, items.join(" "))
                    }
                }
            }
        }
    }
}

// Subshells move interpreters to other threads.
const _: fn() = || {
    fn is_send<T: Send>() {}
    is_send::<Interp>();
};

/// bash's test before it runs a file as a script: a NUL byte in its first line (within the
/// first 80 bytes) makes it a binary file it will not read.
pub(crate) fn looks_binary(data: &[u8]) -> bool {
    data.iter()
        .take(80)
        .take_while(|&&b| b != b'\n')
        .any(|&b| b == 0)
}

/// An option a child shell starts with (`bash -o pipefail`, `bash -O nullglob`, `bash -e`).
#[derive(Debug, Clone)]
pub(crate) enum StartOption {
    /// A `set -o` option, on or off.
    Set(String, bool),
    /// A `shopt` option, on or off.
    Shopt(String, bool),
    /// `bash -i`.
    Interactive,
    /// `bash --rcfile FILE` (`--init-file FILE`): the file an interactive shell sources.
    RcFile(String),
    /// `bash --norc`: an interactive shell sources no start-up file.
    NoRc,
    /// The name the shell was started by (`bash`, `sh`), which bash finds in `PATH` for
    /// `$BASH`.
    Name(String),
}

/// A binding in front of a command is a string: `B=(b b) cmd` gives `cmd` the text `(b b)`,
/// as bash does (an environment holds no arrays).
fn prefix_binding(a: &Assignment) -> std::borrow::Cow<'_, Assignment> {
    match &a.value {
        AssignValue::Scalar(_) => std::borrow::Cow::Borrowed(a),
        AssignValue::Array(elems) => std::borrow::Cow::Owned(Assignment {
            value: AssignValue::Scalar(Word {
                parts: vec![WordPart::Quoted(crate::printer::array_literal_text(elems))],
            }),
            ..a.clone()
        }),
    }
}
