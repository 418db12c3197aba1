use serde_json::{Value, json};
use wasmsand::SandboxError;

/// JSON-RPC 2.0 error codes used on the wire.
pub mod code {
    /// The line is not JSON, or is over the line cap (then `data.kind` is
    /// `request_too_large`).
    pub const PARSE_ERROR: i64 = -32700;
    /// JSON, but not a JSON-RPC 2.0 request object.
    pub const INVALID_REQUEST: i64 = -32600;
    /// No method of that name.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// A parameter is missing, of the wrong type or out of range, or the `sandboxId` is
    /// unknown (`data.kind` tells which).
    pub const INVALID_PARAMS: i64 = -32602;
    /// A failure of the server itself, never of the request.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// A sandbox operation failed (a filesystem errno, a destroyed sandbox). An
    /// application code, outside the range JSON-RPC 2.0 reserves, that clients of the
    /// protocol expect (docs/protocol.md, "JSON-RPC: errors"); the errno name travels in
    /// `data.errno`.
    pub const SANDBOX_ERROR: i64 = 1;
}

/// The stable names sent as `error.data.kind`, one per kind of failure, so that clients branch
/// on them instead of on message text (messages may be reworded; kinds may not).
pub mod kind {
    /// With [`code::PARSE_ERROR`](super::code::PARSE_ERROR): the line is not JSON.
    pub const PARSE_ERROR: &str = "parse_error";
    /// With [`code::PARSE_ERROR`](super::code::PARSE_ERROR): the line passed the line cap
    /// (`limits.rpcBytes`) and was dropped unread.
    pub const REQUEST_TOO_LARGE: &str = "request_too_large";
    /// With [`code::INVALID_REQUEST`](super::code::INVALID_REQUEST).
    pub const INVALID_REQUEST: &str = "invalid_request";
    /// With [`code::METHOD_NOT_FOUND`](super::code::METHOD_NOT_FOUND).
    pub const METHOD_NOT_FOUND: &str = "method_not_found";
    /// With [`code::INVALID_PARAMS`](super::code::INVALID_PARAMS): a bad parameter.
    pub const INVALID_PARAMS: &str = "invalid_params";
    /// With [`code::INTERNAL_ERROR`](super::code::INTERNAL_ERROR).
    pub const INTERNAL: &str = "internal";
    /// The `sandboxId` names no live fork (never made, destroyed, or its root killed);
    /// `data.sandboxId` repeats it.
    pub const UNKNOWN_SANDBOX: &str = "unknown_sandbox";
    /// `snapshot.restore` named a snapshot id this sandbox does not hold.
    pub const UNKNOWN_SNAPSHOT: &str = "unknown_snapshot";
    /// The root sandbox was destroyed by `kill`; every later request gets this.
    pub const SANDBOX_DESTROYED: &str = "sandbox_destroyed";
    /// A filesystem call failed; `data.errno` names the errno, `data.path` the path.
    pub const FILESYSTEM: &str = "filesystem";
    /// The sandbox refused the request for a reason of its own (a bad state blob, ...).
    pub const REFUSED: &str = "refused";
    /// `sandbox.merge` found paths both sandboxes changed; nothing was applied.
    /// `data.conflicts` lists them: `[{path, ours, theirs}]`, each side `"added"`,
    /// `"changed"` or `"deleted"`.
    pub const MERGE_CONFLICT: &str = "merge_conflict";
}

/// A JSON-RPC error object: what a request gets instead of a result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message} ({code})")]
pub struct RpcError {
    /// One of [`code`]'s values (or a peer's own, for errors relayed from a client).
    pub code: i64,
    /// Human-readable; may be reworded, so clients branch on `data.kind`, never on this.
    pub message: String,
    /// `{"kind": ...}` from [`kind`] plus what that kind adds (`errno`, `path`, `sandboxId`,
    /// `conflicts`); `None` only for errors relayed from a peer without one.
    pub data: Option<Value>,
}

impl RpcError {
    /// An error whose `data.kind` is the one its code implies.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        let kind = match code {
            code::PARSE_ERROR => kind::PARSE_ERROR,
            code::INVALID_REQUEST => kind::INVALID_REQUEST,
            code::METHOD_NOT_FOUND => kind::METHOD_NOT_FOUND,
            code::INVALID_PARAMS => kind::INVALID_PARAMS,
            code::INTERNAL_ERROR => kind::INTERNAL,
            _ => kind::REFUSED,
        };
        Self::with_kind(code, message, kind)
    }

    /// An error with an explicit `data.kind`, for kinds that share a code.
    pub(crate) fn with_kind(code: i64, message: impl Into<String>, kind: &str) -> Self {
        Self {
            code,
            message: message.into(),
            data: Some(json!({ "kind": kind })),
        }
    }

    /// The `data.kind` this error carries, if any (errors relayed from a peer may have none).
    pub fn kind(&self) -> Option<&str> {
        self.data.as_ref()?.get("kind")?.as_str()
    }

    /// The line is not JSON.
    pub(crate) fn parse_error() -> Self {
        Self::new(code::PARSE_ERROR, "Parse error")
    }

    /// The line passed the line cap.
    pub(crate) fn too_large() -> Self {
        Self::with_kind(
            code::PARSE_ERROR,
            "Request too large",
            kind::REQUEST_TOO_LARGE,
        )
    }

    /// The root (and with it every fork) has been destroyed by `kill`.
    pub fn destroyed() -> Self {
        Self::with_kind(
            code::SANDBOX_ERROR,
            "sandbox has been destroyed",
            kind::SANDBOX_DESTROYED,
        )
    }

    /// Not a JSON-RPC request object; `message` says what is wrong with it.
    pub(crate) fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(code::INVALID_REQUEST, message)
    }

    /// No method named `method`.
    pub(crate) fn method_not_found(method: &str) -> Self {
        Self::new(
            code::METHOD_NOT_FOUND,
            format!("Method not found: {method}"),
        )
    }

    /// A bad parameter; `message` names it and what was expected.
    pub(crate) fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(code::INVALID_PARAMS, message)
    }

    /// A failure of the server itself.
    pub(crate) fn internal(message: impl std::fmt::Display) -> Self {
        Self::new(code::INTERNAL_ERROR, format!("Internal error: {message}"))
    }

    /// `id` names no live fork.
    pub(crate) fn unknown_sandbox(id: &str) -> Self {
        Self {
            code: code::INVALID_PARAMS,
            message: format!("Unknown sandboxId: {id}"),
            data: Some(json!({"kind": kind::UNKNOWN_SANDBOX, "sandboxId": id})),
        }
    }

    /// Maps a sandbox failure; `fork` names the fork the request addressed (None: the root),
    /// so that a fork destroyed under a queued request reads as the unknown id it now is.
    pub fn from_sandbox(err: SandboxError, fork: Option<&str>) -> Self {
        match err {
            SandboxError::Destroyed => match fork {
                Some(id) => Self::unknown_sandbox(id),
                None => Self::destroyed(),
            },
            SandboxError::Fs(e) => Self {
                code: code::SANDBOX_ERROR,
                message: e.to_string(),
                data: Some(
                    json!({"kind": kind::FILESYSTEM, "errno": e.errno.name(), "path": e.path}),
                ),
            },
            SandboxError::UnknownSnapshot(id) => Self::with_kind(
                code::INVALID_PARAMS,
                format!("Unknown snapshot: {id}"),
                kind::UNKNOWN_SNAPSHOT,
            ),
            SandboxError::Invalid(message) => Self::invalid_params(message),
            SandboxError::Process(e) => Self::process(e),
            SandboxError::MergeConflict(ref conflicts) => {
                let list: Vec<Value> = conflicts
                    .iter()
                    .map(|c| {
                        json!({"path": c.path, "ours": c.ours.as_str(), "theirs": c.theirs.as_str()})
                    })
                    .collect();
                Self {
                    code: code::SANDBOX_ERROR,
                    message: err.to_string(),
                    data: Some(json!({"kind": kind::MERGE_CONFLICT, "conflicts": list})),
                }
            }
        }
    }

    /// A background process call that failed: code 1 with `data.kind` (`no_such_process`,
    /// `limit_exceeded`, `wait_timeout`, `stdin_closed`, `not_running`).
    pub fn process(err: wasmsand::ProcessError) -> Self {
        let mut data = json!({"kind": err.kind()});
        match err {
            wasmsand::ProcessError::LimitExceeded(n) => {
                data["limit"] = json!("backgroundProcesses");
                data["value"] = json!(n);
            }
            wasmsand::ProcessError::PidsExhausted(n) => {
                data["limit"] = json!("pids");
                data["value"] = json!(n);
            }
            wasmsand::ProcessError::NoSuchProcess(pid)
            | wasmsand::ProcessError::WaitTimeout(pid)
            | wasmsand::ProcessError::StdinClosed(pid)
            | wasmsand::ProcessError::NotRunning(pid) => data["pid"] = json!(pid),
        }
        Self {
            code: code::SANDBOX_ERROR,
            message: err.to_string(),
            data: Some(data),
        }
    }

    /// The `error` member of a response.
    pub fn to_json(&self) -> Value {
        let mut v = json!({"code": self.code, "message": self.message});
        if let Some(data) = &self.data {
            v["data"] = data.clone();
        }
        v
    }

    /// A whole error response line for `id` (null when the request's id could not be read).
    pub fn response(&self, id: Option<&Value>) -> Value {
        json!({"jsonrpc": "2.0", "id": id.cloned().unwrap_or(Value::Null), "error": self.to_json()})
    }
}
