//! The service's side of a session's background processes, by pid: their stream frames, the
//! signal async waiters watch, and the bookkeeping of their end. The handlers are in
//! `crate::processes`; this table is a leaf so a `Session` can hold it without the session
//! module depending on the handlers that use sessions.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::watch;
use wasmsand::RunResult;

use crate::logs::RunLog;

/// What the service keeps next to the engine's handle of one process.
pub(crate) struct Tracked {
    pub(crate) log: Arc<RunLog>,
    pub(crate) ended: watch::Sender<bool>,
    /// Held by the end's bookkeeping, and by a kill while it records itself: a kill's audit
    /// event always comes before the end it causes.
    pub(crate) ending: Arc<Mutex<Ending>>,
}

/// The end of a process is recorded once both its pid and its result are known, whichever
/// comes last.
pub(crate) struct Ending {
    pub(crate) pid: Option<u32>,
    pub(crate) result: Option<RunResult>,
}

/// The service side of a session's processes, by pid.
#[derive(Default)]
pub struct ProcessTable(pub(crate) Mutex<HashMap<u32, Arc<Tracked>>>);

impl ProcessTable {
    pub(crate) fn get(&self, pid: u32) -> Option<Arc<Tracked>> {
        self.0.lock().get(&pid).cloned()
    }
}

/// The signing scope of a process stream's URL: never a run id (those have no `/`), so a
/// run's token cannot open a process stream or the other way round.
pub(crate) fn stream_scope(session_id: &str, pid: &str) -> String {
    format!("{session_id}/processes/{pid}")
}
