//! Deterministic mode: a fixed clock, seeded randomness, a fixed `$$` and time zone, so the
//! same commands on the same state give byte-identical results in any process and any fork.

use wasmsand_vfs::Determinism;

use crate::{Result, Sandbox};

/// `$$` of a deterministic sandbox (otherwise drawn at random per session).
pub const DETERMINISTIC_PID: u32 = 4242;

impl Sandbox {
    /// Puts the sandbox in deterministic mode (`Some`) or back to the host's clock and
    /// randomness (`None`). In deterministic mode the guests' clocks (WASI `clock_time_get`:
    /// `date`, Python's `time.time()`) start at `config.start_ns` and move by `config.step_ns`
    /// at each reading, never with the host's time; every random byte (WASI `random_get`:
    /// `mktemp`, Python's `random`, `os.urandom`, `uuid4`; `/dev/urandom`; `$RANDOM`) comes
    /// from one stream seeded by `config.seed`; `$$` is [`DETERMINISTIC_PID`] and `TZ` is
    /// `UTC`. A fork carries the stream and clock where they stand and goes on independently.
    pub fn set_deterministic(&self, config: Option<Determinism>) -> Result<()> {
        self.with_inner(|i| {
            i.vfs.lock().set_deterministic(config);
            if config.is_some() {
                i.shell.pid = DETERMINISTIC_PID;
                i.shell.vars.put(
                    "TZ",
                    wasmsand_shell::Var {
                        value: wasmsand_shell::Value::Str("UTC".into()),
                        attrs: wasmsand_shell::ATTR_EXPORT,
                    },
                );
            }
            Ok(())
        })
    }

    /// Whether the sandbox is in deterministic mode.
    pub fn is_deterministic(&self) -> Result<bool> {
        self.with_inner(|i| Ok(i.vfs.lock().deterministic().is_some()))
    }
}
