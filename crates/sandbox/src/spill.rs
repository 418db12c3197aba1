//! Head + tail output with the rest kept: a stream that passes its cap shows its first and
//! last part in the result, and the whole of it (up to `spill_bytes`) goes to a file in the
//! sandbox the agent can `grep` or `tail` next.

use wasmsand_model::{CappedBuffer, Limits, RunResult, Spilled, Truncation};
use wasmsand_vfs::Vfs;

/// Where spill files go: `/tmp/wasmsand-<n>.stdout` / `.stderr`, `n` the first number free
/// for both, so names do not depend on time or chance (and repeat in deterministic mode).
const SPILL_PREFIX: &str = "/tmp/wasmsand-";

/// The buffer of one stream of a run, in the run's truncation mode.
pub(crate) fn buffer(cap: u64, limits: &Limits, truncation: Truncation) -> CappedBuffer {
    match truncation {
        Truncation::Plain => CappedBuffer::new(cap),
        Truncation::HeadTail if limits.spill_bytes > 0 => {
            CappedBuffer::head_tail(cap).with_spill(limits.spill_bytes)
        }
        Truncation::HeadTail => CappedBuffer::head_tail(cap),
    }
}

/// Writes the spill file of each stream that passed its cap, and shows its path in the
/// stream's marker line and in `result.spilled`. A spill file counts against the sandbox's
/// `fsBytes` and `fileCount` like any file: one that does not fit is not written (the
/// receipt then lists the limit) and the marker names no file.
pub(crate) fn finish(
    vfs: &mut Vfs,
    stdout: &CappedBuffer,
    stderr: &CappedBuffer,
    r: &mut RunResult,
) {
    let wants = |b: &CappedBuffer| b.truncated() && b.spill_bytes().is_some();
    if !wants(stdout) && !wants(stderr) {
        return;
    }
    let n = (1u64..)
        .find(|n| {
            !vfs.exists(&format!("{SPILL_PREFIX}{n}.stdout"))
                && !vfs.exists(&format!("{SPILL_PREFIX}{n}.stderr"))
        })
        .unwrap_or(0);
    let mut spilled = Spilled::default();
    for (name, buf, text, slot) in [
        ("stdout", stdout, &mut r.stdout, &mut spilled.stdout),
        ("stderr", stderr, &mut r.stderr, &mut spilled.stderr),
    ] {
        let Some(bytes) = buf.spill_bytes().filter(|_| buf.truncated()) else {
            continue;
        };
        let path = format!("{SPILL_PREFIX}{n}.{name}");
        if vfs.write(&path, bytes).is_ok() {
            *text = buf.render(Some(&path)).text;
            *slot = Some(path);
        }
    }
    if spilled.stdout.is_some() || spilled.stderr.is_some() {
        r.spilled = Some(spilled);
    }
}
