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

use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use wasmsand_exec::{Preinit, RunSpec};
use wasmsand_vfs::{Vfs, VfsOptions};

/// Registers every guest's pre-initialization, once per process, before any module is loaded
/// (a module loaded before its registration keeps the plain start for the life of the
/// process).
pub(crate) fn register() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if let Some(wasm) = wasmsand_guests::wasm_for_command("jq") {
            wasmsand_exec::register_preinit(
                Sha256::digest(wasm).into(),
                Preinit {
                    spec: Box::new(|| spec("jq")),
                    alloc: "wasmsand_alloc".into(),
                    entry: "wasmsand_jq_preinit".into(),
                    input: Vec::new(),
                    run: Some("wasmsand_jq_main".into()),
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
