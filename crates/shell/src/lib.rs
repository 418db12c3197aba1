//! The bash-subset shell of wasmsand.
//!
//! [`parse`] turns a script into an [`ast::Script`] without any I/O or global state, never
//! panics, and bounds its own recursion, so it can be fed untrusted input (and fuzzed).
//! [`run`] interprets a script against a [`ShellState`] (one bash session: variables,
//! functions, cwd, options) with builtins in the host and every other command run as a WASI
//! program through `wasmsand-exec`, under the run's deadline and the shell's own limits.

#![forbid(unsafe_code)]

mod builtins;
mod completion;
mod error;
mod eval;
mod execute;
mod expand;
mod input;
mod interactive;
mod interp;
mod jobs;
mod options;
pub mod pattern;
mod pids;
mod portable;
mod printer;
pub mod printf;
mod prompt;
mod reactor;
mod readline;
mod spawn;
pub mod syntax;
mod timeout;
pub mod vars;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize};
use std::time::Instant;

use parking_lot::Mutex;
use wasmsand_exec::{CancelToken, Exec, Input, Output, SharedVfs, ToolChannel};

pub use builtins::{Builtin, builtin_table};
pub use error::{ParseError, ParseErrorKind, ShellError, SourceKind, StateError};
pub use interp::{Abort, Options, ShellLimits, ShellState};
pub use jobs::{DetachFn, DetachedJob};
pub use pids::Pids;
pub use printer::script_text;
pub use syntax::parser::{
    MAX_DEPTH, ParseOptions, parse, parse_arith, parse_chunk, parse_opts, parse_with,
};
pub use syntax::{arith, ast, parser};
pub use vars::{ATTR_EXPORT, ATTR_INTEGER, ATTR_READONLY, Value, Var, Vars};

/// The contents of `/bin/bash` and `/bin/sh` in a sandbox: the shell is built in, and running
/// a file that starts with this runs it.
pub const SHELL_MARKER: &[u8] = b"#!/bin/bash\n# wasmsand: the shell is built into the sandbox\n";

/// Commands that are programs on a Debian system but are built into this shell: the shell's
/// stand-ins for programs (`hostname`, `whoami`, ...) and the builtins coreutils also ships as
/// files (`echo`, `printf`, `test`, `[`, `kill`). A sandbox puts [`program_file`] at
/// `/usr/bin/NAME` and `/bin/NAME` for each, in place of any guest of that name, so that
/// `/bin/echo`, `env echo`, `ls /usr/bin` and `hash` find them where scripts expect them.
pub fn builtin_programs() -> impl Iterator<Item = &'static str> {
    builtins::program_names().chain(["echo", "printf", "test", "[", "kill"])
}

/// The file that stands for builtin `name` in `/usr/bin`: a real script, so that whatever runs
/// it (a path, `env`, `xargs`, a `#!` line) gets the builtin with the arguments, in a shell of
/// its own as a program would.
pub fn program_file(name: &str) -> Vec<u8> {
    format!(
        "#!/bin/bash\n# wasmsand: {name} is built into the sandbox's shell\nbuiltin '{name}' \"$@\"\n"
    )
    .into_bytes()
}

use interp::{Fd, Fds, Flow, FlowResult, InSrc, Interp, Invocation, Runtime, THREAD_STACK};

/// What one run of a script may use.
pub struct RunConfig {
    /// The WASI runtime every program of the run is started with.
    pub exec: &'static Exec,
    /// The sandbox's filesystem: redirections, globbing, `cd` and programs all use it.
    pub vfs: SharedVfs,
    /// When the run must stop (the outcome is then [`Abort::Timeout`]); `None` for no limit.
    pub deadline: Option<Instant>,
    /// Cancels the run from another thread (every program and wait of the run wakes up).
    pub cancel: CancelToken,
    /// Per-program memory cap.
    pub memory_limit: Option<u64>,
    /// The tool-call channel for programs that import `host.call`, shared by the whole run.
    pub tool_channel: Option<ToolChannel>,
    /// The script's standard input (descriptor 0).
    pub stdin: Input,
    /// Where the script's descriptor 1 goes.
    pub stdout: Output,
    /// Where the script's descriptor 2 goes (shell error messages too).
    pub stderr: Output,
    /// Keeps jobs after the run (`nohup cmd &`, `cmd & disown`); without it they are jobs
    /// of the run like any other.
    pub detach: Option<DetachFn>,
    /// The process slots of the sandbox the run belongs to (shared with its other runs and
    /// background processes): a subshell, stage or job that finds none free stops the run
    /// with [`Abort::Fork`].
    pub pids: Arc<Pids>,
    /// The descriptor caps of every program of the run (`EMFILE` past them).
    pub open_files: Option<wasmsand_exec::OpenFiles>,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutcome {
    /// `$?` after the script (what `bash -c` would exit with).
    pub status: i32,
    /// Set when the run was stopped early: deadline, cancellation, or a shell limit.
    pub abort: Option<Abort>,
    /// What the run's programs used.
    pub stats: RunStats,
}

/// What one run's programs used, summed over every program it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Guest CPU time (thread CPU clock across each program's entry point).
    pub cpu_time: std::time::Duration,
    /// The largest linear memory any program of the run had at its exit.
    pub peak_memory: u64,
    /// Programs, subshells, pipeline stages and background jobs started.
    pub processes: u64,
    /// WASI programs run.
    pub programs: u64,
    /// Calls made through the tool-call channel.
    pub tool_calls: u64,
    /// Whether a program was stopped at its memory cap.
    pub out_of_memory: bool,
    /// Whether a program was refused a descriptor at its own cap (it got `EMFILE`).
    pub open_files_capped: bool,
    /// Whether a program was refused a descriptor because the sandbox's pool was all held.
    pub session_open_files_capped: bool,
    /// Whether a process could not be started for want of a `pids` slot.
    pub pids_exhausted: bool,
}

impl RunStats {
    /// The receipt of two runs one after the other (a run and its TERM trap).
    pub fn then(self, next: RunStats) -> RunStats {
        RunStats {
            cpu_time: self.cpu_time + next.cpu_time,
            peak_memory: self.peak_memory.max(next.peak_memory),
            processes: self.processes + next.processes,
            programs: self.programs + next.programs,
            tool_calls: self.tool_calls + next.tool_calls,
            out_of_memory: self.out_of_memory || next.out_of_memory,
            open_files_capped: self.open_files_capped || next.open_files_capped,
            session_open_files_capped: self.session_open_files_capped
                || next.session_open_files_capped,
            pids_exhausted: self.pids_exhausted || next.pids_exhausted,
        }
    }
}

/// Runs `source` as `bash -c` would, in the session `state`, which it updates (variables,
/// functions, cwd, options and `$?` persist to the next run).
pub fn run(state: &mut ShellState, source: &str, cfg: RunConfig) -> RunOutcome {
    let stdin = match cfg.stdin {
        Input::Empty => InSrc::Empty,
        Input::Bytes(b) => InSrc::Bytes(Arc::new(Mutex::new((b, 0)))),
        Input::Cursor(c) => InSrc::Bytes(c),
        Input::Pipe(p) => InSrc::Pipe(p),
        Input::File(f) => InSrc::File(f),
    };
    let mut fds = Fds::default();
    fds.set(0, Some(Fd::In(stdin)));
    fds.set(1, Some(Fd::Out(cfg.stdout)));
    fds.set(2, Some(Fd::Out(cfg.stderr)));
    let rt = Arc::new(Runtime {
        exec: cfg.exec,
        vfs: cfg.vfs,
        base_deadline: cfg.deadline,
        compile_nanos: std::sync::atomic::AtomicU64::new(0),
        cancel: cfg.cancel,
        memory_limit: cfg.memory_limit,
        tool_channel: cfg.tool_channel,
        pids: cfg.pids,
        open_files: cfg.open_files,
        processes: AtomicUsize::new(0),
        next_pid: AtomicU32::new(state.pid + 1),
        detach: cfg.detach,
        abort: Mutex::new(None),
        aborted: AtomicBool::new(false),
        started: Instant::now(),
        shell_pid: state.pid,
        pending_signals: Arc::default(),
        trapping_shells: Arc::default(),
    });
    let usage: Arc<interp::UsageCounters> = Arc::default();
    let usage2 = usage.clone();
    rt.vfs.lock().set_umask(state.umask);
    let taken = std::mem::replace(state, ShellState::new(&[], "/"));
    let source = source.to_string();
    let rt2 = rt.clone();
    // The tree walk recurses with the script's nesting: give it a stack sized for the
    // depth limits rather than whatever the caller's thread has.
    let result = wasmsand_exec::threads::spawn(THREAD_STACK, move || {
        let mut it = Interp::new(taken, rt2, fds);
        it.usage = usage2;
        it.sync_option_vars();
        // Each run is a `bash -c` of its script.
        it.st
            .vars
            .put("BASH_EXECUTION_STRING", Var::scalar(source.as_str()));
        let status = run_top(&mut it, &source, SourceKind::DashC);
        let status = it.finish_shell(status);
        it.st.status = status;
        // `set -n` stops this script; a session that never ran anything again would be
        // stuck, so (as an interactive bash ignores -n) it does not outlive the run.
        it.st.opts.noexec = false;
        (it.st, status)
    })
    .map_err(|e| e.to_string())
    .and_then(|h| {
        h.join()
            .map_err(|_| "the shell thread panicked".to_string())
    });
    match result {
        Ok((st, status)) => {
            *state = st;
            let abort = rt.abort.lock().clone();
            let stats = usage.stats();
            RunOutcome {
                status,
                abort,
                stats,
            }
        }
        Err(e) => {
            // The state went down with the thread: start the session afresh rather than
            // leave it unusable.
            *state = ShellState::new(&[], "/");
            RunOutcome {
                status: 1,
                abort: Some(Abort::Limit(format!("internal error: {e}"))),
                stats: usage.stats(),
            }
        }
    }
}

/// Parses and runs the script. A syntax error on line N still runs what comes before it,
/// as bash reads `-c` text command by command.
pub(crate) fn run_top(it: &mut Interp, source: &str, kind: SourceKind<'_>) -> i32 {
    if needs_line_reading(it, source) {
        return run_by_lines(it, source, kind);
    }
    let extglob = it.extglob();
    match parse_with(source, extglob) {
        Ok(script) => match run_items(it, &script) {
            Ok(s) => s,
            Err(f) => flow_status(it, f),
        },
        // Read a command at a time: bash drops only that line and reads on.
        Err(e) if e.drops_line() => run_by_lines(it, source, kind),
        Err(e) => {
            // bash runs the complete commands before the error: the longest prefix of whole
            // lines that parses (an unfinished `if` at the end fails only at end of file).
            let lines: Vec<&str> = source.split_inclusive('\n').collect();
            let last = e.line.saturating_sub(1).min(lines.len());
            for k in (1..=last).rev().take(64) {
                let prefix: String = lines[..k].concat();
                if prefix.trim().is_empty() {
                    break;
                }
                // A line that a continuation joins to the next is not whole.
                if ends_in_continuation(&prefix) {
                    continue;
                }
                if let Ok(script) = parse_with(&prefix, extglob) {
                    match run_items(it, &script) {
                        Ok(_) => {}
                        Err(f) => return flow_status(it, f),
                    }
                    break;
                }
            }
            it.err_raw(&e.render_in(source, kind));
            if e.keeps_status() { it.st.status } else { 2 }
        }
    }
}

/// A bad compound array assignment (`a=( x=() )`): bash reports it, drops the rest of its line
/// and reads on from the next with `$?` 1, where a shell under `set -e` says only the first
/// line of the report and exits 2.
fn drop_line_and_read_on(
    it: &mut Interp,
    source: &str,
    kind: SourceKind<'_>,
    e: &ParseError,
) -> Option<i32> {
    let report = e.render_in(source, kind);
    if it.st.opts.errexit {
        let first = report.split_inclusive('\n').next().unwrap_or_default();
        it.err_raw(first);
        return Some(2);
    }
    it.err_raw(&report);
    it.st.status = 1;
    None
}

/// Reads and runs the script one complete command (one or more whole lines) at a time, as bash
/// does: what a line defines (aliases, `shopt`) changes how the next lines parse. Used when
/// aliases may be in play; otherwise the whole script is parsed at once, which is cheaper.
fn run_by_lines(it: &mut Interp, source: &str, kind: SourceKind<'_>) -> i32 {
    run_lines(it, input::InputLines::from_text(source), kind)
}

/// Runs the commands the shell reads from its standard input, one complete command at a time
/// (see [`input::InputLines`]), as [`run_by_lines`] runs text it has whole.
pub(crate) fn run_input(it: &mut Interp, kind: SourceKind<'_>) -> i32 {
    run_lines(it, input::InputLines::stdin(), kind)
}

/// A complete command at a time from `input`: each goes into the history (when kept) and runs.
/// A bad compound array assignment drops its line; any other syntax error ends the script.
fn run_lines(it: &mut Interp, mut input: input::InputLines, kind: SourceKind<'_>) -> i32 {
    let mut status = it.st.status;
    let mut start = 0;
    loop {
        let chunk = match input.next_chunk(it, start) {
            Ok(Some(chunk)) => chunk,
            Ok(None) => return status,
            Err(f) => return flow_status(it, f),
        };
        match chunk {
            Ok((script, end)) => {
                it.st.history_offset = it.st.history.len();
                let lines: Vec<&str> = input.lines[start..end].iter().map(String::as_str).collect();
                it.remember(&lines);
                match run_items(it, &script) {
                    Ok(s) => status = s,
                    Err(f) => return flow_status(it, f),
                }
                // `set -t`: one command read and run, then the shell exits.
                if it.st.opts.extra.contains("onecmd") {
                    return status;
                }
                start = end;
            }
            Err(e) if e.drops_line() => {
                if let Some(exit) = drop_line_and_read_on(it, &input.text(), kind, &e) {
                    return exit;
                }
                status = 1;
                start = e.line;
            }
            Err(e) => {
                it.err_raw(&e.render_in(&input.text(), kind));
                return if e.keeps_status() { it.st.status } else { 2 };
            }
        }
    }
}

/// Whether text must be read a complete command at a time (see [`run_by_lines`]): aliases
/// may be in play, or the history list keeps each command read (`set -o history`,
/// `shopt -so history`, `shopt -o -s history` may turn it on).
pub(crate) fn needs_line_reading(it: &Interp, source: &str) -> bool {
    it.st.opts.expand_aliases
        || source.contains("expand_aliases")
        || it.keeps_history()
        || source.contains("o history")
        || source.contains("s history")
}

/// Parses the next complete command of `lines` from line `start` in the shell's current
/// state: as few whole lines as make it complete. Returns it and the line after it.
pub(crate) fn next_chunk(
    it: &Interp,
    lines: &[&str],
    start: usize,
) -> Result<(ast::Script, usize), ParseError> {
    let mut end = start + 1;
    loop {
        let text: String = lines[start..end].concat();
        let mut opts = it.parse_options();
        opts.line_base = start + 1;
        if ends_in_continuation(&text) && end < lines.len() {
            end += 1;
            continue;
        }
        match parse_chunk(&text, &opts) {
            Ok((_, true)) if end < lines.len() => end += 1,
            Ok((script, _)) => return Ok((script, end)),
            Err(e) if end < lines.len() && e.is_incomplete() => end += 1,
            Err(e) => return Err(e),
        }
    }
}

/// Whether `text`'s last line ends in a line continuation (an odd run of backslashes before
/// its newline): that line goes on in the next one, so the text ends inside a line.
fn ends_in_continuation(text: &str) -> bool {
    text.ends_with("\\\n")
        && text[..text.len() - 1]
            .bytes()
            .rev()
            .take_while(|&b| b == b'\\')
            .count()
            % 2
            == 1
}

fn flow_status(it: &mut Interp, f: Flow) -> i32 {
    match f {
        Flow::Exit(s) | Flow::Fatal(s) | Flow::Return(s) => s,
        // Under `set -e` the unbound-variable error is a failing command, status 1; a
        // script (a file or stdin) exits 1 too, only `-c` text 127.
        Flow::Unbound if it.st.opts.errexit => 1,
        Flow::Unbound if it.invocation != Invocation::DashC => 1,
        Flow::Unbound => 127,
        Flow::Break(_) | Flow::Continue(_) => it.st.status,
        Flow::Abort(a) => match a {
            Abort::Timeout => 124,
            Abort::Cancelled => 130,
            Abort::Limit(_) => 1,
            // bash's status when fork fails (EX_NOEXEC).
            Abort::Fork(_) => 126,
        },
    }
}

/// The top-level list: a fatal error skips the rest of its line, then the script goes on.
fn run_items(it: &mut Interp, script: &ast::Script) -> FlowResult {
    let mut status = it.st.status;
    let mut skip_through: Option<usize> = None;
    for (idx, item) in script.items.iter().enumerate() {
        let line = item_line(item);
        // bash counts the commands it reads from a script or its input (`\#`): the items of
        // one line are one command.
        if it.counts_commands {
            if let Some(prev) = it.counted_line
                && (line.is_none() || line != prev)
            {
                it.st.command_number += 1;
            }
            it.counted_line = Some(line);
        }
        if let (Some(limit), Some(l)) = (skip_through, line)
            && l <= limit
        {
            continue;
        }
        skip_through = None;
        let one = ast::Script {
            items: vec![item.clone()],
        };
        // Run one at a time, the item cannot see that a `disown` follows it.
        it.disown_follows = item.background && jobs::disowned_next(script, idx);
        it.arith_fatal = false;
        match it.run_script(&one) {
            Ok(s) => status = s,
            // Under `set -e` the abandoned line's failure ends the shell, as in bash, unless
            // an arithmetic error abandoned it.
            Err(Flow::Fatal(s)) if it.st.opts.errexit && !it.arith_fatal => {
                return Err(Flow::Exit(s));
            }
            Err(Flow::Fatal(s)) => {
                status = s;
                it.st.status = s;
                skip_through = Some(it.line.max(line.unwrap_or(0)));
            }
            // An interactive shell reports an unset variable and reads on.
            Err(Flow::Unbound) if it.st.opts.interactive => {
                status = 1;
                it.st.status = 1;
                skip_through = Some(it.line.max(line.unwrap_or(0)));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(status)
}

pub(crate) fn item_line(item: &ast::ListItem) -> Option<usize> {
    fn cmd_line(c: &ast::Command) -> Option<usize> {
        match c {
            ast::Command::Simple(s) => Some(s.line),
            ast::Command::FunctionDef(f) => cmd_line(&f.body),
            ast::Command::Compound(c, _) => match c {
                ast::CompoundCommand::Group(s) | ast::CompoundCommand::Subshell(s) => {
                    s.items.first().and_then(item_line)
                }
                ast::CompoundCommand::If { branches, .. } => branches
                    .first()
                    .and_then(|(c, _)| c.items.first())
                    .and_then(item_line),
                ast::CompoundCommand::While { cond, .. }
                | ast::CompoundCommand::Until { cond, .. } => {
                    cond.items.first().and_then(item_line)
                }
                _ => None,
            },
        }
    }
    item.and_or.first.commands.first().and_then(cmd_line)
}
