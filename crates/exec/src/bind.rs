//! What an instance learns only when its run begins.
//!
//! An instance, with its wasix environment and the host functions around it, is made before
//! the run it serves is known (`prepared.rs`): ahead of time on a background thread, or just
//! before the run. What the run brings (its filesystem, streams, argv and environment,
//! descriptor caps, the deterministic clock) reaches the host functions and files through one
//! [`Late`], set when the run takes the instance. No guest code runs before that.

use std::sync::{Arc, LazyLock};

use parking_lot::Mutex;
use wasmsand_vfs::{SharedDet, Vfs};

use crate::wasi::fds::FdTracker;
use crate::wasi::file::{ErrnoSlot, SharedVfs};
use crate::wasi::stdio::{Output, OutputFile, PipeBreak, StdinFile};

/// One run's side of an instance.
pub(crate) struct Bound {
    pub(crate) vfs: SharedVfs,
    /// The run's working directory, for the `wasmsand` calls that take relative paths.
    pub(crate) cwd: String,
    pub(crate) stdio: Stdio,
    pub(crate) fds: Option<Arc<FdTracker>>,
    /// The virtual clock and entropy, when the sandbox is deterministic.
    pub(crate) det: Option<SharedDet>,
    pub(crate) args: Strings,
    pub(crate) env: Strings,
}

/// The streams of one run (descriptors 0-2, and what `/dev/stdin`, `/dev/stdout` and
/// `/dev/stderr` lead to).
#[derive(Clone)]
pub(crate) struct Stdio {
    pub(crate) stdin: Arc<Mutex<StdinFile>>,
    pub(crate) stdout: Output,
    pub(crate) stderr: Output,
    pub(crate) errno: Arc<ErrnoSlot>,
    /// Set when a write met a pipe whose reader is gone (see `Exit::status`).
    pub(crate) broken_pipe: Arc<PipeBreak>,
}

impl Stdio {
    /// A writer for descriptor 1 or 2.
    pub(crate) fn output(&self, fd: u32) -> OutputFile {
        let out = if fd == 1 { &self.stdout } else { &self.stderr };
        OutputFile::new(out, fd, &self.errno, &self.broken_pipe)
    }
}

/// The run an instance serves, set by the run and cleared after it: an instance kept for
/// another run (`kept.rs`) serves them one after the other.
#[derive(Clone, Default)]
pub(crate) struct Late(Arc<Mutex<Option<Arc<Bound>>>>);

impl Late {
    /// Binds the instance to its run. An instance serves one run at a time, so binding one
    /// that is bound is a bug in the runner.
    pub(crate) fn bind(&self, bound: Bound) {
        let mut slot = self.0.lock();
        assert!(slot.is_none(), "an instance serves one run at a time");
        *slot = Some(Arc::new(bound));
    }

    /// Ends the binding, once the run is over: what it held (its tree, streams, argv) goes
    /// with it.
    pub(crate) fn clear(&self) {
        self.0.lock().take();
    }

    pub(crate) fn get(&self) -> Option<Arc<Bound>> {
        self.0.lock().clone()
    }

    /// The run's filesystem; before the binding (where only wasix's setup looks), an empty
    /// tree.
    pub(crate) fn vfs(&self) -> SharedVfs {
        match self.get() {
            Some(b) => b.vfs.clone(),
            None => empty_tree().clone(),
        }
    }
}

/// A tree that holds only `/`, for an instance made ahead: wasix's setup checks that its
/// preopened root is a directory, and reads nothing else.
pub(crate) fn empty_tree() -> &'static SharedVfs {
    static EMPTY: LazyLock<SharedVfs> = LazyLock::new(|| Arc::new(Mutex::new(Vfs::default())));
    &EMPTY
}

/// argv or the environment as WASI hands them out: each string with its NUL, end to end.
pub(crate) struct Strings {
    pub(crate) blob: Vec<u8>,
    /// Where each string starts in `blob`.
    pub(crate) starts: Vec<u32>,
}

impl Strings {
    /// The strings, or what is wrong with one of them (a NUL inside cannot be handed out).
    pub(crate) fn new(items: impl IntoIterator<Item = impl AsRef<[u8]>>) -> Result<Self, String> {
        let mut blob = Vec::new();
        let mut starts = Vec::new();
        for item in items {
            let item = item.as_ref();
            if item.contains(&0) {
                return Err(format!(
                    "found a NUL byte in \"{}\"",
                    String::from_utf8_lossy(item).replace('\0', "\\0")
                ));
            }
            starts.push(u32::try_from(blob.len()).map_err(|_| "argv and environment too large")?);
            blob.extend_from_slice(item);
            blob.push(0);
        }
        u32::try_from(blob.len()).map_err(|_| "argv and environment too large")?;
        Ok(Self { blob, starts })
    }

    /// The environment as `KEY=VALUE` strings; a key holding `=` or a NUL is refused, as the
    /// kernel's `execve` cannot pass it either.
    pub(crate) fn environment(env: &[(String, String)]) -> Result<Self, String> {
        if let Some((key, _)) = env.iter().find(|(k, _)| k.contains(['=', '\0'])) {
            return Err(format!(
                "bad environment variable name \"{}\"",
                key.replace('\0', "\\0")
            ));
        }
        let joined: Vec<Vec<u8>> = env
            .iter()
            .map(|(k, v)| [&*crate::raw::encode(k), b"=", &crate::raw::encode(v)].concat())
            .collect();
        Self::new(joined)
    }
}
