//! `process.*`: background processes over JSON-RPC (docs/protocol.md, "Background
//! processes"). Their notifications outlive the request that started them, so they go to the
//! dispatcher's persistent notifier when the transport set one, else to the `notify` of the
//! `process.start` request (which the process then keeps).

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{Value, json};
use wasmsand::{Process, SpawnOptions};

use crate::params::Params;
use crate::text::Utf8Stream;
use crate::{Dispatcher, Notify, RpcError};

impl Dispatcher {
    pub(crate) fn process_call(
        &self,
        method: &str,
        p: Params,
        notify: &Notify,
    ) -> Result<Value, RpcError> {
        match method {
            "process.start" => self.process_start(p, notify),
            "process.list" => self.on(p, |sb| {
                let list: Vec<Value> = sb
                    .processes()?
                    .into_iter()
                    .map(|i| {
                        json!({"pid": i.pid, "command": i.command, "running": i.running,
                               "exitCode": i.exit_code, "startedAtMs": i.started_at_ms})
                    })
                    .collect();
                Ok(json!({"processes": list}))
            }),
            "process.wait" => {
                let timeout = p.opt_u64("timeoutMs")?.map(Duration::from_millis);
                let proc = self.find_process(p)?;
                let result = proc.wait(timeout).map_err(RpcError::process)?;
                serde_json::to_value(result).map_err(RpcError::internal)
            }
            "process.kill" => Ok(json!({"killed": self.find_process(p)?.kill()})),
            "process.write" => {
                let mut data = match p.0.get("data") {
                    None | Some(Value::Null) => Vec::new(),
                    Some(Value::String(s)) => s.as_bytes().to_vec(),
                    Some(_) => {
                        return Err(RpcError::invalid_params(
                            "Invalid param: data must be a string",
                        ));
                    }
                };
                data.extend(p.opt_base64("dataBase64")?.unwrap_or_default());
                let eof = p.opt_bool("eof")?.unwrap_or(false);
                let proc = self.find_process(p)?;
                let written = if data.is_empty() {
                    0
                } else {
                    proc.write_stdin(&data).map_err(RpcError::process)?
                };
                if eof {
                    proc.close_stdin().map_err(RpcError::process)?;
                }
                Ok(json!({"written": written}))
            }
            "process.output" => {
                let out_off = p.opt_u64("stdoutOffset")?.unwrap_or(0);
                let err_off = p.opt_u64("stderrOffset")?.unwrap_or(0);
                let proc = self.find_process(p)?;
                // Read before the state: a process seen ended has all its output in the rings.
                let running = proc.is_running();
                let [out, err] = proc.output(out_off, err_off);
                Ok(json!({
                    "stdout": String::from_utf8_lossy(&out.data),
                    "stderr": String::from_utf8_lossy(&err.data),
                    "stdoutOffset": out.next_offset,
                    "stderrOffset": err.next_offset,
                    "droppedStdout": out.dropped,
                    "droppedStderr": err.dropped,
                    "running": running,
                }))
            }
            other => Err(RpcError::method_not_found(other)),
        }
    }

    fn find_process(&self, p: Params) -> Result<Process, RpcError> {
        let pid = pid_param(p)?;
        let (sb, fork) = self.resolve(p)?;
        sb.process(pid)
            .map_err(|e| RpcError::from_sandbox(e, fork.as_deref()))
    }

    fn process_start(&self, p: Params, notify: &Notify) -> Result<Value, RpcError> {
        let command = p.str("command")?.to_string();
        let stream = p.opt_bool("stream")?.unwrap_or(true);
        let env = match p.0.get("env") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Object(m)) => m
                .iter()
                .map(|(k, v)| match v {
                    Value::String(s) => Ok((k.clone(), s.clone())),
                    _ => Err(RpcError::invalid_params(format!(
                        "Invalid param: env.{k} must be a string"
                    ))),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => {
                return Err(RpcError::invalid_params(
                    "Invalid param: env must be an object of strings",
                ));
            }
        };
        let cwd = match p.0.get("cwd") {
            None | Some(Value::Null) => None,
            Some(_) => Some(p.str("cwd")?.to_string()),
        };
        let stdin = match p.0.get("stdin") {
            None | Some(Value::Null) => None,
            Some(_) => Some(p.str("stdin")?.as_bytes().to_vec().into()),
        };
        let mut opts = SpawnOptions {
            env,
            cwd,
            timeout_ms: p.opt_u64("timeoutMs")?,
            stdin,
            close_stdin: p.opt_bool("closeStdin")?.unwrap_or(false),
            ..SpawnOptions::default()
        };
        let (sb, fork) = self.resolve(p)?;
        if !stream {
            let proc = sb
                .spawn(&command, opts)
                .map_err(|e| RpcError::from_sandbox(e, fork.as_deref()))?;
            return Ok(json!({"pid": proc.pid()}));
        }
        let sink = self
            .notifier
            .lock()
            .clone()
            .unwrap_or_else(|| notify.clone());
        let tag = Arc::new(Mutex::new(Tag {
            pid: None,
            sandbox_id: fork.clone(),
            sink,
            decoders: Default::default(),
            early: Vec::new(),
            exit: None,
        }));
        for (i, name) in ["stdout", "stderr"].into_iter().enumerate() {
            let tag = tag.clone();
            let cb: crate::text::ChunkCallback = Arc::new(move |chunk: &[u8]| {
                // Under the tag's lock: chunks keep their order and never pass the exit.
                let mut t = tag.lock();
                let text = t.decoders[i].push(chunk);
                t.output(name, text);
            });
            if i == 0 {
                opts.on_stdout = Some(cb);
            } else {
                opts.on_stderr = Some(cb);
            }
        }
        let exit_tag = tag.clone();
        opts.on_exit = Some(Arc::new(move |result: &wasmsand::RunResult| {
            let mut t = exit_tag.lock();
            t.exit = Some(result.clone());
            t.flush_exit();
        }));
        let proc = sb
            .spawn(&command, opts)
            .map_err(|e| RpcError::from_sandbox(e, fork.as_deref()))?;
        let mut t = tag.lock();
        t.pid = Some(proc.pid());
        // What came before the pid was known goes out now, first.
        for (name, text) in std::mem::take(&mut t.early) {
            t.output(name, text);
        }
        t.flush_exit();
        Ok(json!({"pid": proc.pid()}))
    }
}

fn pid_param(p: Params) -> Result<u32, RpcError> {
    match p.0.get("pid") {
        None | Some(Value::Null) => Err(RpcError::invalid_params("Missing required param: pid")),
        Some(v) => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| {
                RpcError::invalid_params("Invalid param: pid must be a positive integer")
            }),
    }
}

/// Where a process's notifications go and what they say they come from. The pid is known
/// only once `spawn` returned, and output (even the exit) can come before that: it waits here.
struct Tag {
    pid: Option<u32>,
    sandbox_id: Option<String>,
    sink: Notify,
    decoders: [Utf8Stream; 2],
    early: Vec<(&'static str, String)>,
    exit: Option<wasmsand::RunResult>,
}

impl Tag {
    fn output(&mut self, stream: &'static str, data: String) {
        if data.is_empty() {
            return;
        }
        let Some(pid) = self.pid else {
            self.early.push((stream, data));
            return;
        };
        let mut params = json!({"pid": pid, "stream": stream, "data": data});
        if let Some(id) = &self.sandbox_id {
            params["sandboxId"] = json!(id);
        }
        (self.sink)(json!({"jsonrpc": "2.0", "method": "process.output", "params": params}));
    }

    /// Sends `process.exit` once both the pid and the result are known.
    fn flush_exit(&mut self) {
        let Some(pid) = self.pid else { return };
        let Some(result) = self.exit.take() else {
            return;
        };
        for (i, name) in ["stdout", "stderr"].into_iter().enumerate() {
            let rest = self.decoders[i].finish();
            self.output(name, rest);
        }
        let mut params = json!({"pid": pid, "result": result});
        if let Some(id) = &self.sandbox_id {
            params["sandboxId"] = json!(id);
        }
        (self.sink)(json!({"jsonrpc": "2.0", "method": "process.exit", "params": params}));
    }
}
