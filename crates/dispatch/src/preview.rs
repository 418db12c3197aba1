//! Preview, commit, discard and best-of-N over JSON-RPC (docs/protocol.md, "Previews"). A
//! preview is a fork the server names with a `sandboxId` like any other (so the client can read
//! its files or run more in it); `sandbox.commit` merges it into the sandbox it came from and
//! drops it, `sandbox.discard` drops it.

use std::sync::Arc;

use serde_json::{Value, json};
use wasmsand::{Attempt, BestOfOptions, MergeOptions, Preview, RunOptions};

use crate::params::Params;
use crate::{Dispatcher, RpcError};

/// Attempts one `sandbox.bestOf` may ask for.
const MAX_ATTEMPTS: usize = 64;

impl Dispatcher {
    /// A run result with `preview: {sandboxId, changes}`, the preview's fork kept under that id.
    pub(crate) fn preview_answer(
        &self,
        preview: Preview,
        parent: Option<String>,
    ) -> Result<Value, RpcError> {
        let changes = preview.changes.to_json();
        let mut result = serde_json::to_value(&preview.result).map_err(RpcError::internal)?;
        let id = self.register_fork(preview.into_sandbox(), parent)?;
        result["preview"] = json!({"sandboxId": id, "changes": changes});
        Ok(result)
    }

    /// `sandbox.commit {preview, env?, cwd?}`: the preview's changes merged into the sandbox
    /// it was made from (three-way); the preview is then gone. A conflict applies nothing and
    /// keeps the preview, to discard or look at.
    pub(crate) fn commit_preview(&self, p: Params) -> Result<Value, RpcError> {
        let id = p.str("preview")?;
        let opts = MergeOptions {
            env: p.opt_bool("env")?.unwrap_or(false),
            cwd: p.opt_bool("cwd")?.unwrap_or(false),
        };
        let (fork, parent_id) = {
            let state = self.state.lock();
            let f = state
                .forks
                .get(id)
                .ok_or_else(|| RpcError::unknown_sandbox(id))?;
            (f.sandbox.clone(), f.parent.clone())
        };
        let (parent, _) = self.sandbox(parent_id.as_deref())?;
        let merged = parent
            .merge(&fork, opts)
            .map_err(|e| RpcError::from_sandbox(e, parent_id.as_deref()))?;
        if let Some(f) = self.state.lock().forks.remove(id) {
            f.sandbox.destroy();
        }
        Ok(json!({
            "applied": merged.applied.iter().map(|a| json!({"path": a.path, "change": a.change.as_str()})).collect::<Vec<_>>(),
            "env": merged.env,
            "cwd": merged.cwd,
        }))
    }

    /// `sandbox.discard {preview}`: the preview and what it changed are dropped.
    pub(crate) fn discard_preview(&self, p: Params) -> Result<Value, RpcError> {
        let id = p.str("preview")?;
        match self.state.lock().forks.remove(id) {
            Some(f) => {
                f.sandbox.destroy();
                Ok(json!({"ok": true}))
            }
            None => Err(RpcError::unknown_sandbox(id)),
        }
    }

    /// `sandbox.bestOf {attempts: [{command, env?}], concurrency?, timeoutMs?}`: each attempt
    /// a preview of its own, run `concurrency` at a time; answers `{attempts: [a run result
    /// with preview, or {error}]}` in the attempts' order.
    pub(crate) fn best_of(&self, p: Params) -> Result<Value, RpcError> {
        let bad = |m: String| RpcError::invalid_params(format!("Invalid param: {m}"));
        let Some(list) = p.0.get("attempts").and_then(Value::as_array) else {
            return Err(bad("attempts must be an array of {command, env?}".into()));
        };
        if list.is_empty() || list.len() > MAX_ATTEMPTS {
            return Err(bad(format!(
                "attempts must hold 1 to {MAX_ATTEMPTS} attempts, not {}",
                list.len()
            )));
        }
        let mut attempts = Vec::with_capacity(list.len());
        for (i, a) in list.iter().enumerate() {
            let Some(o) = a.as_object() else {
                return Err(bad(format!("attempts[{i}] must be an object")));
            };
            let command = Params(o).str("command")?.to_string();
            let env = match o.get("env") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Object(m)) => m
                    .iter()
                    .map(|(k, v)| {
                        v.as_str()
                            .map(|v| (k.clone(), v.to_string()))
                            .ok_or_else(|| bad(format!("attempts[{i}].env.{k} must be a string")))
                    })
                    .collect::<Result<_, _>>()?,
                Some(_) => return Err(bad(format!("attempts[{i}].env must be an object"))),
            };
            attempts.push(Attempt { command, env });
        }
        let concurrency = p.opt_u64("concurrency")?.unwrap_or(0) as usize;
        let run = RunOptions {
            timeout_ms: p.opt_u64("timeoutMs")?,
            ..RunOptions::default()
        };
        let (sb, parent) = self.resolve(p)?;
        let sb: Arc<wasmsand::Sandbox> = sb;
        let out = sb.best_of(&attempts, BestOfOptions { concurrency, run });
        let mut answers = Vec::with_capacity(out.len());
        for r in out {
            answers.push(match r {
                Ok(preview) => self.preview_answer(preview, parent.clone())?,
                Err(e) => {
                    let e = RpcError::from_sandbox(e, parent.as_deref());
                    json!({"error": {"code": e.code, "message": e.message, "data": e.data}})
                }
            });
        }
        Ok(json!({"attempts": answers}))
    }
}
