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

use parking_lot::Mutex;
use serde_json::{Value, json};
use wasmsand_exec::{ToolCallFault, ToolCallHandler, ToolChannel, stdio::CancelToken};

use crate::interp::{Interp, THREAD_STACK};
use crate::vars::{ATTR_EXPORT, Var};

/// Answers spawn frames; every other frame goes to the channel the run had, if any.
pub(crate) struct SpawnDoor {
    /// The shell as it was when the guest started; each command runs in a fork of it.
    template: Mutex<Interp>,
    inner: Option<Arc<dyn ToolCallHandler>>,
}

/// A program's tool-call channel with the spawn door in front of `inner`. Spawned commands
/// are processes, counted against the run's process limit, not its host-call budget.
pub(crate) fn channel(template: Interp, inner: Option<ToolChannel>) -> ToolChannel {
    let door = |inner| {
        Arc::new(SpawnDoor {
            template: Mutex::new(template),
            inner,
        })
    };
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
        let mut child = self.template.lock().fork();
        if let Some(dir) = frame["cwd"].as_str() {
            let dir = if dir.starts_with('/') {
                dir.to_string()
            } else {
                format!("{}/{dir}", child.st.cwd.trim_end_matches('/'))
            };
            let is_dir = {
                let vfs = child.rt.vfs.lock();
                vfs.stat(&dir)
                    .is_ok_and(|m| m.file_type == wasmsand_vfs::FileType::Dir)
            };
            if !is_dir {
                return refuse("cwd", format!("{dir}: No such file or directory"));
            }
            child.st.cwd = dir.clone();
            child.st.vars.put(
                "PWD",
                Var {
                    value: crate::vars::Value::Str(dir),
                    attrs: ATTR_EXPORT,
                },
            );
        }
        // As a failed execvp: nothing runs, and the caller reports it in its own words.
        let name = &argv[0];
        let found = if name.contains('/') {
            let path = wasmsand_vfs::path::join(&child.st.cwd, name);
            child.rt.vfs.lock().stat(&path).is_ok()
        } else {
            child.st.functions.contains_key(name)
                || child.builtin_enabled(name)
                || child.find_in_path(name).is_some()
        };
        if !found {
            return refuse("noent", "No such file or directory".into());
        }
        // Its own thread: the guest that asked is mid-call on this one, inside its store, and
        // a second instance must not run nested in that store's frames.
        let ran = std::thread::Builder::new()
            .name("wasmsand-spawn".into())
            .stack_size(THREAD_STACK)
            .spawn(move || child.run_as_subshell(|c| c.run_argv(argv)))
            .map(|h| h.join());
        match ran {
            Ok(Ok(status)) => json!({"v": 1, "id": id, "ok": true, "status": status}),
            Ok(Err(_)) => refuse("crashed", "spawn: the command's thread panicked".into()),
            Err(e) => refuse("limit", format!("fork: {e}")),
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
