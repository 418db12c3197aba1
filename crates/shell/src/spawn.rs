//! The spawn door: a guest program asks the shell to run a command, as a process on a real
//! machine would fork and exec one. WASI has no processes, so `find -exec`, `-execdir` and
//! `-ok` come through here: the command runs in a subshell forked from the shell that started
//! the guest, with the guest's descriptors (its output lands in the same stream, in order, since
//! the guest waits), and the answer is its exit status.
//!
//! Frame: `{"v":1,"id":N,"op":"spawn","argv":[...],"cwd":"/abs/dir"}` (`cwd` optional, the
//! guest's own when absent). Answer: `{"v":1,"id":N,"ok":true,"status":S}`, or `ok: false`
//! with `error: {kind, message}` when the command could not be started at all.

use std::sync::Arc;

use serde_json::{Value, json};
use wasmsand_exec::{ToolCallFault, ToolCallHandler, ToolChannel, stdio::CancelToken};

/// Why a command was not started: a class (`noent`, `cwd`, `limit`, ...) and words.
pub(crate) struct Refusal {
    pub kind: &'static str,
    pub message: String,
}

/// What runs a spawned command (the shell, forking itself): its exit status.
pub(crate) trait Spawner: Send + Sync {
    fn spawn(&self, argv: Vec<String>, cwd: Option<&str>) -> Result<i32, Refusal>;
}

/// Answers spawn frames; every other frame goes to the channel the run had, if any.
pub(crate) struct SpawnDoor {
    spawner: Box<dyn Spawner>,
    inner: Option<Arc<dyn ToolCallHandler>>,
}

/// A program's tool-call channel with the spawn door in front of `inner`. Spawned commands
/// are processes, counted against the run's process limit, not its host-call budget.
pub(crate) fn channel(spawner: Box<dyn Spawner>, inner: Option<ToolChannel>) -> ToolChannel {
    let door = |inner| Arc::new(SpawnDoor { spawner, inner });
    match inner {
        Some(c) => {
            let handler = door(Some(c.handler.clone()));
            c.with_handler(handler)
        }
        None => ToolChannel::new(door(None), u64::MAX),
    }
}

fn is_spawn(request: &[u8]) -> Option<Value> {
    // Cheap test first: most frames of a tool-heavy run are not spawns.
    if !request.windows(7).any(|w| w == b"\"spawn\"") {
        return None;
    }
    let v: Value = serde_json::from_slice(request).ok()?;
    (v["op"] == "spawn").then_some(v)
}

impl SpawnDoor {
    fn spawn(&self, frame: &Value, cancel: &CancelToken) -> Value {
        let id = frame["id"].clone();
        let refuse = |kind: &str, message: String| json!({"v": 1, "id": id, "ok": false, "error": {"kind": kind, "message": message}});
        let argv: Option<Vec<String>> = frame["argv"]
            .as_array()
            .and_then(|a| a.iter().map(|w| w.as_str().map(str::to_string)).collect());
        let Some(argv) = argv.filter(|a| !a.is_empty()) else {
            return refuse(
                "invalid",
                "spawn: argv must be a non-empty list of strings".into(),
            );
        };
        if cancel.is_cancelled() {
            return refuse("cancelled", "spawn: the run is being stopped".into());
        }
        match self.spawner.spawn(argv, frame["cwd"].as_str()) {
            Ok(status) => json!({"v": 1, "id": id, "ok": true, "status": status}),
            Err(Refusal { kind, message }) => refuse(kind, message),
        }
    }
}

impl ToolCallHandler for SpawnDoor {
    fn call(
        &self,
        request: &[u8],
        index: u64,
        cancel: &CancelToken,
    ) -> Result<Vec<u8>, ToolCallFault> {
        match (is_spawn(request), &self.inner) {
            (Some(v), _) => serde_json::to_vec(&self.spawn(&v, cancel))
                .map_err(|e| ToolCallFault(e.to_string())),
            (None, Some(inner)) => inner.call(request, index, cancel),
            (None, None) => Err(ToolCallFault("no channel".into())),
        }
    }

    fn over_budget(&self, request: &[u8], max_calls: u64) -> Result<Vec<u8>, ToolCallFault> {
        match &self.inner {
            Some(inner) => inner.over_budget(request, max_calls),
            None => Err(ToolCallFault("no channel".into())),
        }
    }

    fn counts(&self, request: &[u8]) -> bool {
        match (is_spawn(request), &self.inner) {
            (Some(_), _) => false,
            (None, Some(inner)) => inner.counts(request),
            (None, None) => false,
        }
    }

    fn answers(&self, request: &[u8]) -> bool {
        self.inner.as_ref().is_some_and(|i| i.answers(request)) || is_spawn(request).is_some()
    }
}
