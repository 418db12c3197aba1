//! `wasmsand-docker`: the Docker runtime of wasmsand's service, over the Docker Engine API
//! (bollard, on the engine's Unix socket).
//!
//! - [`Engine`]: the connection (API version negotiated; Debian's engine speaks 1.41),
//!   status, container creation and the orphan reaper, which removes what an earlier life of
//!   the same service instance left behind;
//! - [`BoxConfig`]: the one container shape, with seed 003's isolation flags (non-root,
//!   read-only root, `noexec` tmpfs workspace, no network, no capabilities, pids, memory
//!   without swap, CPUs and ulimits);
//! - [`Container`]: runs as execs (streamed; TERM, grace, KILL of the run's process group),
//!   files in and out through `tar`, single file operations (`fs`), usage from the
//!   container's cgroup;
//! - [`images`]: the images built from Debian's packages and their cache.
//!
//! No server code lives here: the service adapts it to its runtime trait, and
//! `sandboxd images build` calls [`images::build`] directly.

#![forbid(unsafe_code)]

mod cgroup;
mod container;
mod engine;
mod fs;
pub mod images;
mod spec;

pub use cgroup::{Cgroup, Sample};
pub use container::{
    Container, Entry, FilesError, RunEnd, RunOutcome, RunRequest, Sink, Stream, build_tar,
    parse_listing,
};
pub use engine::{Engine, EngineError, EngineInfo, EngineSettings};
pub use fs::{FsEntry, FsError, errno_of};
pub use spec::{BoxConfig, EXEC_SCRATCH, WORKSPACE, labels};
