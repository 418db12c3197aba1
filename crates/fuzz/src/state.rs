//! `state_import`: portable state (`Sandbox::export_state` / `import_state`). Any blob opens
//! or is refused with a typed error; a payload that opens exports again to a blob that opens
//! to the same state; and a sandbox built by a sequence of operations survives the round
//! trip unchanged.

use arbitrary::{Arbitrary, Unstructured};
use wasmsand::{ImportOptions, Limits, STATE_VERSION, Sandbox, SandboxOptions};

fn options() -> SandboxOptions {
    SandboxOptions {
        limits: Limits {
            timeout_ms: 1_000,
            file_count: 200,
            fs_bytes: 4 << 20,
            ..Limits::default()
        },
        ..SandboxOptions::default()
    }
}

fn import(blob: &[u8]) -> wasmsand::Result<Sandbox> {
    Sandbox::import_state(
        blob,
        ImportOptions {
            max_bytes: Some(16 << 20),
            ..ImportOptions::default()
        },
    )
}

/// Exports `sb`, imports the blob and exports that again: the two blobs must be equal, the
/// state the format carries unchanged by a trip through it.
fn round_trip(sb: &Sandbox, what: &str) {
    let blob = sb
        .export_state(None)
        .unwrap_or_else(|e| panic!("{what} does not export: {e}"));
    let back =
        import(&blob).unwrap_or_else(|e| panic!("what {what} exported does not import: {e}"));
    let again = back
        .export_state(None)
        .unwrap_or_else(|e| panic!("the imported copy of {what} does not export: {e}"));
    back.destroy();
    assert!(
        blob == again,
        "{what}: export -> import -> export changed the state ({} bytes, then {})",
        blob.len(),
        again.len()
    );
}

#[derive(Debug, Arbitrary)]
enum Op {
    Write(String, Vec<u8>),
    Mkdir(String),
    Remove(String, bool),
    Env(String, String),
    Run(String),
}

/// The target: the first byte picks a raw blob, a bare payload or a sequence of operations.
pub fn run(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 3 {
        0 => {
            if let Ok(sb) = import(rest) {
                round_trip(&sb, "an imported blob");
                sb.destroy();
            }
        }
        1 => {
            // Past the checksum: the payload's own decoder, which a fuzzer cannot reach
            // through a blob's SHA-256.
            let mut payload = b"WSNDPAYL".to_vec();
            payload.extend_from_slice(&STATE_VERSION.to_le_bytes());
            payload.extend_from_slice(rest);
            if let Ok(sb) = Sandbox::from_payload(&payload, options()) {
                round_trip(&sb, "a sandbox opened from a payload");
                sb.destroy();
            }
        }
        _ => {
            let mut u = Unstructured::new(rest);
            let Ok(ops) = u
                .arbitrary_iter::<Op>()
                .and_then(|it| it.take(24).collect::<arbitrary::Result<Vec<Op>>>())
            else {
                return;
            };
            let sb = Sandbox::new(options());
            for op in &ops {
                let _ = match op {
                    Op::Write(p, d) => sb.write_file(p, d),
                    Op::Mkdir(p) => sb.mkdir(p),
                    Op::Remove(p, r) => sb.remove(p, *r),
                    Op::Env(k, v) => sb.set_env(k, v),
                    Op::Run(s) => sb.run(s).map(|_| ()),
                };
            }
            round_trip(&sb, "a sandbox built by operations");
            sb.destroy();
        }
    }
}
