//! Preview, then commit or discard; and best-of-N. A preview is a run made in a fork of the
//! sandbox (O(1)), returned with what it changed; committing it is a merge of that fork (the
//! three-way rules of [`Sandbox::merge`], conflicts reported), discarding it drops the fork.
//! Best-of-N makes N previews at once, on threads of their own, so an agent tries several
//! attempts and keeps the one it picks.

use std::sync::atomic::{AtomicUsize, Ordering};

use wasmsand_model::RunResult;

use crate::changes::{Changes, ChangesOptions, ChangesSince};
use crate::{MergeOptions, MergeResult, Result, RunOptions, Sandbox};

/// A run made in a fork: its result, what it changed, and the fork, to commit
/// ([`Sandbox::commit`]) or discard ([`Sandbox::discard`]). The sandbox it was made from is
/// untouched until a commit.
pub struct Preview {
    /// The run's result, as [`Sandbox::run_with`] gives it.
    pub result: RunResult,
    /// What the run changed, against the sandbox at the preview's start
    /// ([`ChangesSince::Parent`]; paths relative to the mount point when one folder is
    /// mounted, else to the home directory).
    pub changes: Changes,
    fork: Sandbox,
}

impl std::fmt::Debug for Preview {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Preview")
            .field("exit_code", &self.result.exit_code)
            .field("changes", &self.changes.files.len())
            .finish()
    }
}

impl Preview {
    /// The fork the run was made in, to look further (read files, run more) before choosing.
    pub fn sandbox(&self) -> &Sandbox {
        &self.fork
    }

    /// The fork itself, for a caller that keeps forks of its own (the RPC server names it
    /// with a `sandboxId`); [`Sandbox::merge`] of it into the sandbox it came from commits.
    pub fn into_sandbox(self) -> Sandbox {
        self.fork
    }
}

/// One attempt of [`Sandbox::best_of`]: a command and the variables it runs with.
#[derive(Debug, Clone, Default)]
pub struct Attempt {
    /// The command line.
    pub command: String,
    /// Exported in the attempt's fork before it runs.
    pub env: Vec<(String, String)>,
}

/// Options of [`Sandbox::best_of`].
#[derive(Clone, Default)]
pub struct BestOfOptions {
    /// Attempts running at once (0: as many as the machine has cores, at least 1). Each
    /// runs in its own fork under the sandbox's limits, so memory in use is at most this
    /// many times the per-program cap.
    pub concurrency: usize,
    /// The options of every attempt's run.
    pub run: RunOptions,
}

impl Sandbox {
    /// Runs `command` in a fork of this sandbox and returns its result with what it changed;
    /// this sandbox is not touched. [`Self::commit`] brings the changes here, [`Self::discard`]
    /// drops them.
    pub fn preview(&self, command: &str, opts: RunOptions) -> Result<Preview> {
        let fork = self.fork()?;
        preview_in(fork, command, opts)
    }

    /// Brings a preview's changes into this sandbox: a merge of its fork (three-way against
    /// the preview's start, so paths this sandbox changed since are kept and a path both
    /// changed differently is a conflict, [`crate::SandboxError::MergeConflict`], with
    /// nothing applied). `opts` can carry the preview's variables and working directory too.
    pub fn commit(&self, preview: &Preview, opts: MergeOptions) -> Result<MergeResult> {
        self.merge(&preview.fork, opts)
    }

    /// Drops a preview and what it changed.
    pub fn discard(&self, preview: Preview) {
        preview.fork.destroy();
    }

    /// Runs every attempt in a fork of its own, `opts.concurrency` at a time, and returns
    /// their previews in the attempts' order (an attempt whose fork or run failed is its
    /// error). Nothing here changes until one is committed.
    pub fn best_of(&self, attempts: &[Attempt], opts: BestOfOptions) -> Vec<Result<Preview>> {
        let forks: Vec<Result<Sandbox>> = attempts.iter().map(|_| self.fork()).collect();
        let workers = match opts.concurrency {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        }
        .min(attempts.len().max(1));
        let slots: Vec<parking_lot::Mutex<Option<Result<Preview>>>> = attempts
            .iter()
            .map(|_| parking_lot::Mutex::new(None))
            .collect();
        let forks: Vec<parking_lot::Mutex<Option<Result<Sandbox>>>> = forks
            .into_iter()
            .map(|f| parking_lot::Mutex::new(Some(f)))
            .collect();
        let next = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(attempt) = attempts.get(i) else {
                            break;
                        };
                        let fork = forks[i].lock().take().expect("each attempt is taken once");
                        let out = fork.and_then(|fork| {
                            for (k, v) in &attempt.env {
                                fork.set_env(k, v)?;
                            }
                            preview_in(fork, &attempt.command, opts.run.clone())
                        });
                        *slots[i].lock() = Some(out);
                    }
                });
            }
        });
        slots
            .into_iter()
            .map(|s| s.into_inner().expect("every attempt ran"))
            .collect()
    }
}

fn preview_in(fork: Sandbox, command: &str, opts: RunOptions) -> Result<Preview> {
    let result = fork.run_with(command, opts)?;
    let changes = fork.changes(&ChangesOptions {
        since: ChangesSince::Parent,
        path: None,
    })?;
    Ok(Preview {
        result,
        changes,
        fork,
    })
}
