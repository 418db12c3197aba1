//! The guests whose start-up is done once per process instead of in every run
//! (`wasmsand_exec::Preinit`): the module's memory after that work is where each later run
//! starts, copy-on-write.
//!
//! - `jq` makes its ~250 builtins (parsing `builtin.jq` and binding them) before it compiles
//!   any program, which was 17 of the 18 ms of `jq -n 1`. Its `wasmsand_jq_preinit` export
//!   makes them once; `wasmsand_jq_main` then runs a command from that memory.
//!
//! What is captured holds nothing of a user: the capture runs in a sandbox-less filesystem with
//! no environment, and jq's preparation reads neither (the builtins are jq's own text).

use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use wasmsand_exec::{Preinit, RunSpec};
use wasmsand_vfs::{Vfs, VfsOptions};

/// Registers every guest's pre-initialization, once per process, before any module is loaded
/// (a module loaded before its registration keeps the plain start for the life of the
/// process). Also vouches for every guest module's digest, computed when the guests were
/// built, so that no process hashes them again to find them in the module cache.
pub(crate) fn register() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for (file, wasm) in wasmsand_guests::FILES {
            if let Some(digest) = wasmsand_guests::sha256(file) {
                wasmsand_exec::vouch_digest(&Bytes::from_static(wasm), digest, file);
            }
        }
        let jq = wasmsand_guests::file_for_command("jq");
        if let Some(digest) = jq.and_then(wasmsand_guests::sha256) {
            wasmsand_exec::register_preinit(
                digest,
                Preinit {
                    spec: Box::new(|| spec("jq")),
                    // guest-rt's, which every guest exports for the tool-call channel.
                    alloc: "host_alloc".into(),
                    entry: "wasmsand_jq_preinit".into(),
                    input: Vec::new(),
                    run: Some("wasmsand_jq_main".into()),
                    // The builtins are jq's own text: the capture reads nothing of `spec`.
                    depends: Some(Vec::new()),
                },
            );
        }
    });
}

/// An empty filesystem and environment: the capture must depend on nothing of a sandbox's.
fn spec(argv0: &str) -> RunSpec {
    let vfs = Vfs::with_standard_layout(VfsOptions::default());
    let mut spec = RunSpec::new(Arc::new(Mutex::new(vfs)), [argv0]);
    spec.deadline = Some(Instant::now() + Duration::from_secs(60));
    spec
}
