//! The job table's entries and what decides how a job starts, apart from the interpreter
//! that runs them: the interpreter's state holds these, and the job builtins above it act on
//! them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use wasmsand_exec::CancelToken;

use crate::syntax::ast::{AndOr, Arg, Command, Script};

/// A job started by the run and handed to the host, which runs it on after the run ends.
pub trait DetachedJob: Send + Sync {
    /// Its pid in the host's process table (`$!`).
    fn pid(&self) -> u32;
    /// Whether it has not ended yet.
    fn is_running(&self) -> bool;
    /// Its exit status once it has ended, waiting at most `timeout`.
    fn wait(&self, timeout: Duration) -> Option<i32>;
    /// Stops it (`kill` on its pid); nothing happens when it has already ended.
    fn kill(&self);
}

/// Starts `command` (shell source) with a copy of the session `state` as a job the host keeps
/// after the run; the error is the message the shell prints when the host refuses (its limit
/// on background processes, a destroyed sandbox). It stays a `String`: the text is the data,
/// the host's own wording, which the shell prints and never inspects.
pub type DetachFn =
    Arc<dyn Fn(&str, crate::ShellState) -> Result<Arc<dyn DetachedJob>, String> + Send + Sync>;

pub(crate) struct Job {
    /// The job number (`%N`).
    pub num: usize,
    pub pid: u32,
    /// The command as `jobs` shows it (`sleep 1 &`).
    pub text: String,
    pub kind: JobKind,
    /// Started under `set -m`: only such a job can be brought back (`fg`, `bg`).
    pub monitored: bool,
    /// Its end was reported (`jobs` listed it as done) or collected (`wait` named it, `wait
    /// -n` returned it): bash then forgets it for `jobs` and `wait -n`.
    pub notified: bool,
    /// Answers once the job's thread runs; the next job waits for it (see
    /// `start_job_thread`).
    pub started: Option<std::sync::mpsc::Receiver<()>>,
}

/// What a subshell sees of its parent's jobs: `jobs` in `$(jobs -p)` or `jobs | wc -l` lists
/// them, as in bash, though they are not the subshell's to wait for.
#[derive(Clone)]
pub(crate) struct JobView {
    pub num: usize,
    pub pid: u32,
    pub text: String,
    running: Running,
}

#[derive(Clone)]
enum Running {
    /// Cleared by the job's thread when it ends.
    Flag(Arc<AtomicBool>),
    Detached(Arc<dyn DetachedJob>),
}

impl JobView {
    pub(crate) fn is_running(&self) -> bool {
        match &self.running {
            Running::Flag(f) => f.load(Ordering::SeqCst),
            Running::Detached(d) => d.is_running(),
        }
    }
}

pub(crate) enum JobKind {
    Thread {
        handle: Option<std::thread::JoinHandle<i32>>,
        /// True while the thread runs (see [`JobView`]).
        alive: Arc<AtomicBool>,
        cancel: CancelToken,
        /// The status a `kill` gave it (128 + signal), reported instead of its own.
        killed: Option<i32>,
        status: Option<i32>,
    },
    Detached(Arc<dyn DetachedJob>),
}

impl Job {
    pub fn view(&self) -> JobView {
        JobView {
            num: self.num,
            pid: self.pid,
            text: self.text.clone(),
            running: match &self.kind {
                JobKind::Thread { alive, .. } => Running::Flag(alive.clone()),
                JobKind::Detached(d) => Running::Detached(d.clone()),
            },
        }
    }

    /// The signal a thread job was killed with (`kill -HUP %1`), if it was.
    pub fn killed_by(&self) -> Option<i32> {
        match &self.kind {
            JobKind::Thread {
                killed: Some(s), ..
            } if *s > 128 => Some(s - 128),
            _ => None,
        }
    }

    pub fn is_running(&self) -> bool {
        match &self.kind {
            JobKind::Thread { handle, .. } => handle.as_ref().is_some_and(|h| !h.is_finished()),
            JobKind::Detached(d) => d.is_running(),
        }
    }

    /// Whether its commands still run: a thread job's flag drops when its commands end, before
    /// its descriptors close and its thread returns.
    pub fn commands_running(&self) -> bool {
        match &self.kind {
            JobKind::Thread { alive, .. } => alive.load(Ordering::SeqCst),
            JobKind::Detached(d) => d.is_running(),
        }
    }

    /// Joins a thread job (bounded: the run's deadline and cancellation reach it).
    pub fn join(&mut self) -> i32 {
        match &mut self.kind {
            JobKind::Thread {
                handle,
                killed,
                status,
                ..
            } => {
                if let Some(h) = handle.take() {
                    let s = h.join().unwrap_or(1);
                    *status = Some(killed.unwrap_or(s));
                }
                status.unwrap_or(0)
            }
            JobKind::Detached(d) => d.wait(Duration::ZERO).unwrap_or(0),
        }
    }

    pub(crate) fn kill(&mut self, status: i32) {
        match &mut self.kind {
            JobKind::Thread {
                handle,
                cancel,
                killed,
                ..
            } => {
                if handle.as_ref().is_some_and(|h| !h.is_finished()) {
                    *killed = Some(status);
                    cancel.cancel();
                }
            }
            JobKind::Detached(d) => d.kill(),
        }
    }
}

/// Whether `ao` asks to be kept after the run by its first word: `nohup cmd`, `setsid cmd`.
pub(crate) fn wants_detach(ao: &AndOr) -> bool {
    if !ao.rest.is_empty() || ao.first.commands.len() != 1 {
        return false;
    }
    match &ao.first.commands[0] {
        Command::Simple(s) => matches!(
            s.words.first(),
            Some(Arg::Word(w)) if matches!(w.as_literal(), Some("nohup" | "setsid"))
        ),
        _ => false,
    }
}

/// Whether the item after a background job in `script` disowns it at once (`cmd & disown`,
/// `disown %%`, `disown $!`, `disown -h`): the job can then start on the host's side.
pub(crate) fn disowned_next(script: &Script, idx: usize) -> bool {
    let Some(next) = script.items.get(idx + 1) else {
        return false;
    };
    if !next.and_or.rest.is_empty() || next.and_or.first.commands.len() != 1 {
        return false;
    }
    let Command::Simple(s) = &next.and_or.first.commands[0] else {
        return false;
    };
    if !s.assignments.is_empty() || !s.redirects.is_empty() {
        return false;
    }
    let mut words = s.words.iter().map(|a| match a {
        Arg::Word(w) => w.as_literal().map(str::to_string),
        Arg::Assignment(_) => None,
    });
    if words.next() != Some(Some("disown".to_string())) {
        return false;
    }
    words.all(|w| matches!(w.as_deref(), Some("-h" | "%%" | "%+" | "-a" | "-r")))
        || s.words.len() == 2
            && matches!(&s.words[1], Arg::Word(w) if crate::printer::word_source(w) == "$!")
}

/// A coprocess the shell started and has not reaped yet.
pub(crate) struct Coproc {
    pub name: String,
    pub pid: u32,
    /// The shell's read and write ends.
    pub fds: [u32; 2],
}
