//! The line protocol (docs/protocol.md, "The line protocol"): objects with a `type` member
//! (`shell`, `write_file`, `read_file`, `reset`, `status`), answered in that protocol's own
//! shapes: snake_case fields, errors as an `error` string, and the request's `id` echoed on
//! every answer. The requests are read and the answers shaped here, once, for every
//! [`LineTarget`]: the root sandbox (the dispatcher, simple mode) or a virtual machine
//! (`sandboxd --mode v86`).

use base64::Engine as _;
use serde_json::{Map, Value};
use wasmsand::RunOptions;

use crate::{Dispatcher, RpcError};

/// `time_limit_ms` when a `shell` request gives none.
pub const DEFAULT_TIME_LIMIT_MS: u64 = 5000;
/// `mode` when a `write_file` request gives none; also what the filesystem gives a new file.
pub const DEFAULT_MODE: u32 = 0o644;

type Fields = Map<String, Value>;

/// What a `shell` request did.
#[derive(Debug, Clone, Default)]
pub struct ShellAnswer {
    /// Its standard output (invalid UTF-8 replaced).
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
    /// Its exit status; `None` when it did not end by itself.
    pub exit_code: Option<i64>,
    /// Whether it ran past `time_limit_ms`.
    pub timed_out: bool,
    /// What went wrong besides a timeout (the timeout's own text is added here).
    pub error: Option<String>,
}

/// What a `status` request answers.
#[derive(Debug, Clone, Default)]
pub struct LineStatus {
    /// Since the server started.
    pub uptime_ms: u64,
    /// Memory in use.
    pub memory_used_bytes: u64,
    /// The memory limit.
    pub memory_limit_bytes: u64,
    /// Whether requests can be served.
    pub ready: bool,
    /// Members a target adds (the machine's `accel`).
    pub extra: Map<String, Value>,
}

/// What the line protocol's requests run against.
pub trait LineTarget {
    /// Runs `command` with a time limit.
    fn shell(&self, command: &str, time_limit_ms: u64) -> Result<ShellAnswer, String>;
    /// Writes a file with permission bits `mode` ([`DEFAULT_MODE`] when the request gave none).
    fn write_file(&self, path: &str, data: &[u8], mode: u32) -> Result<(), String>;
    /// Reads a file.
    fn read_file(&self, path: &str) -> Result<Vec<u8>, String>;
    /// Back to the initial state.
    fn reset(&self) -> Result<(), String>;
    /// Uptime, memory and readiness.
    fn status(&self) -> LineStatus;
}

/// Answers one request object of the line protocol against `target`.
pub fn answer_line_request(target: &dyn LineTarget, req: &Fields) -> Value {
    let id = req.get("id").cloned().unwrap_or(Value::Null);
    let ty = req.get("type").cloned().unwrap_or(Value::Null);
    let mut answer = Map::new();
    answer.insert("type".into(), ty.clone());
    answer.insert("id".into(), id.clone());
    let outcome = match (&ty, &id) {
        (Value::String(_), Value::String(_) | Value::Number(_)) => {
            match ty.as_str().unwrap_or_default() {
                "shell" => line_shell(target, req, &mut answer),
                "write_file" => line_write_file(target, req, &mut answer),
                "read_file" => line_read_file(target, req, &mut answer),
                "reset" => line_reset(target, &mut answer),
                "status" => {
                    line_status(target, &mut answer);
                    Ok(())
                }
                other => Err(format!("unknown request type: {other}")),
            }
        }
        (Value::String(_), Value::Null) => Err("missing required field: id".into()),
        (Value::String(_), _) => Err("id must be a string".into()),
        _ => Err("type must be a string".into()),
    };
    if let Err(message) = outcome {
        fill_failure(ty.as_str().unwrap_or_default(), &mut answer);
        answer.insert("error".into(), Value::String(message));
    }
    Value::Object(answer)
}

/// The answer to a line that is not JSON: the line protocol's shape when it looks like one
/// of its requests, else JSON-RPC's parse error.
pub fn answer_unparsed_line(line: &[u8], error: &str) -> Value {
    if looks_like_line_request(line) {
        malformed_line(line, error)
    } else {
        RpcError::parse_error().response(None)
    }
}

/// The answer to a line the transport did not read whole (over the line cap).
pub fn answer_too_large() -> Value {
    RpcError::too_large().response(None)
}

fn line_shell(target: &dyn LineTarget, req: &Fields, answer: &mut Fields) -> Result<(), String> {
    let command = field_str(req, "command")?;
    let limit = match req.get("time_limit_ms") {
        None | Some(Value::Null) => DEFAULT_TIME_LIMIT_MS,
        Some(v) => v
            .as_u64()
            .or_else(|| v.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
            .ok_or("time_limit_ms must be a non-negative number")?,
    };
    let r = target.shell(command, limit)?;
    answer.insert("stdout".into(), r.stdout.into());
    answer.insert("stderr".into(), r.stderr.into());
    answer.insert(
        "exit_code".into(),
        r.exit_code.map_or(Value::Null, Value::from),
    );
    answer.insert("timed_out".into(), r.timed_out.into());
    if r.timed_out {
        // The protocol's documented answer to a run past its limit: no exit code, an
        // error, and whatever output was produced before the deadline.
        answer.insert("exit_code".into(), Value::Null);
        let mut error = "Command execution failed: timeout exceeded".to_string();
        if let Some(more) = r.error {
            error = format!("{error} ({more})");
        }
        answer.insert("error".into(), error.into());
    } else if let Some(error) = r.error {
        answer.insert("error".into(), error.into());
    }
    Ok(())
}

fn line_write_file(
    target: &dyn LineTarget,
    req: &Fields,
    answer: &mut Fields,
) -> Result<(), String> {
    let path = field_str(req, "path")?;
    let content = field_str(req, "content")?;
    let data = match encoding(req)? {
        Encoding::Text => content.as_bytes().to_vec(),
        Encoding::Base64 => base64::engine::general_purpose::STANDARD
            .decode(content)
            .map_err(|e| format!("content is not valid base64: {e}"))?,
    };
    let mode = match req.get("mode") {
        None | Some(Value::Null) => DEFAULT_MODE,
        Some(Value::String(s)) => parse_mode(s)?,
        Some(_) => return Err("mode must be an octal string such as \"0644\"".into()),
    };
    target.write_file(path, &data, mode)?;
    answer.insert("success".into(), true.into());
    answer.insert("error".into(), Value::Null);
    Ok(())
}

fn line_read_file(
    target: &dyn LineTarget,
    req: &Fields,
    answer: &mut Fields,
) -> Result<(), String> {
    let path = field_str(req, "path")?;
    let enc = encoding(req)?;
    let data = target.read_file(path)?;
    let content = match enc {
        Encoding::Base64 => base64::engine::general_purpose::STANDARD.encode(&data),
        Encoding::Text => String::from_utf8(data)
            .map_err(|_| "file is not valid UTF-8 text; read it with encoding base64")?,
    };
    answer.insert("content".into(), content.into());
    answer.insert("success".into(), true.into());
    answer.insert("error".into(), Value::Null);
    Ok(())
}

fn line_reset(target: &dyn LineTarget, answer: &mut Fields) -> Result<(), String> {
    target.reset()?;
    answer.insert("success".into(), true.into());
    Ok(())
}

fn line_status(target: &dyn LineTarget, answer: &mut Fields) {
    let st = target.status();
    answer.insert("uptime_ms".into(), st.uptime_ms.into());
    answer.insert("memory_used_bytes".into(), st.memory_used_bytes.into());
    answer.insert("memory_limit_bytes".into(), st.memory_limit_bytes.into());
    answer.insert("ready".into(), st.ready.into());
    for (k, v) in st.extra {
        answer.entry(k).or_insert(v);
    }
}

impl Dispatcher {
    /// Answers one request object of the line protocol against the root sandbox.
    pub fn handle_line_request(&self, req: &Fields) -> Value {
        answer_line_request(self, req)
    }
}

impl LineTarget for Dispatcher {
    fn shell(&self, command: &str, time_limit_ms: u64) -> Result<ShellAnswer, String> {
        let sb = self.root().map_err(|e| e.message)?;
        let r = sb
            .run_with(
                command,
                RunOptions {
                    timeout_ms: Some(time_limit_ms),
                    ..Default::default()
                },
            )
            .map_err(|e| e.to_string())?;
        Ok(ShellAnswer {
            timed_out: crate::is_timeout(&r),
            exit_code: Some(r.exit_code.into()),
            stdout: r.stdout,
            stderr: r.stderr,
            error: None,
        })
    }

    fn write_file(&self, path: &str, data: &[u8], mode: u32) -> Result<(), String> {
        let sb = self.root().map_err(|e| e.message)?;
        sb.write_file(path, data).map_err(|e| e.to_string())?;
        if mode != DEFAULT_MODE {
            // The sandbox API has no chmod yet; the sandbox's own chmod applies the mode.
            let r = sb
                .run(&format!("chmod {mode:04o} -- {}", shell_quote(path)))
                .map_err(|e| e.to_string())?;
            if r.exit_code != 0 {
                return Err(format!("chmod failed: {}", r.stderr.trim_end()));
            }
        }
        Ok(())
    }

    fn read_file(&self, path: &str) -> Result<Vec<u8>, String> {
        let sb = self.root().map_err(|e| e.message)?;
        sb.read_file(path)
            .map(|d| d.to_vec())
            .map_err(|e| e.to_string())
    }

    fn reset(&self) -> Result<(), String> {
        self.reset_root().map_err(|e: RpcError| e.message)
    }

    fn status(&self) -> LineStatus {
        let mut limit = self.config.limits.memory_bytes;
        let (used, ready) = match self.root() {
            Ok(sb) => {
                limit = sb.limits().memory_bytes;
                match sb.usage() {
                    Ok(u) => (u.bytes_used, true),
                    Err(_) => (0, false),
                }
            }
            Err(_) => (0, false),
        };
        LineStatus {
            uptime_ms: self.uptime_ms(),
            memory_used_bytes: used,
            memory_limit_bytes: limit,
            ready,
            extra: Map::new(),
        }
    }
}

/// The members a failed request of each type still carries, so a client reading them does
/// not find them missing.
fn fill_failure(ty: &str, answer: &mut Fields) {
    match ty {
        "shell" => {
            for k in ["stdout", "stderr"] {
                answer.entry(k).or_insert_with(|| "".into());
            }
            answer.insert("exit_code".into(), Value::Null);
            answer.entry("timed_out").or_insert(false.into());
        }
        "read_file" => {
            answer.insert("content".into(), Value::Null);
            answer.insert("success".into(), false.into());
        }
        "write_file" | "reset" => {
            answer.insert("success".into(), false.into());
        }
        _ => {}
    }
}

enum Encoding {
    Text,
    Base64,
}

fn encoding(req: &Fields) -> Result<Encoding, String> {
    match req.get("encoding") {
        None | Some(Value::Null) => Ok(Encoding::Text),
        Some(Value::String(s)) if s == "text" => Ok(Encoding::Text),
        Some(Value::String(s)) if s == "base64" => Ok(Encoding::Base64),
        Some(_) => Err("encoding must be \"text\" or \"base64\"".into()),
    }
}

fn field_str<'a>(req: &'a Fields, name: &str) -> Result<&'a str, String> {
    match req.get(name) {
        None | Some(Value::Null) => Err(format!("missing required field: {name}")),
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(format!("{name} must be a string")),
    }
}

fn parse_mode(s: &str) -> Result<u32, String> {
    let bad = || format!("mode must be an octal string such as \"0644\", not {s:?}");
    if s.is_empty() || s.len() > 4 || !s.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
        return Err(bad());
    }
    u32::from_str_radix(s, 8).map_err(|_| bad())
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The answer to a line that is not JSON but looks like a `type` request: its `type` and `id`
/// are read from the text when they can be, so the client can still match the answer.
pub fn malformed_line(line: &[u8], error: &str) -> Value {
    let text = String::from_utf8_lossy(line);
    let ty = scrape(&text, "type").unwrap_or(Value::Null);
    let id = scrape(&text, "id").unwrap_or(Value::Null);
    let mut answer = Map::new();
    answer.insert("type".into(), ty.clone());
    answer.insert("id".into(), id);
    fill_failure(ty.as_str().unwrap_or_default(), &mut answer);
    answer.insert("error".into(), format!("invalid JSON: {error}").into());
    Value::Object(answer)
}

/// Whether an unparseable line was meant for the line protocol rather than JSON-RPC.
pub fn looks_like_line_request(line: &[u8]) -> bool {
    let text = String::from_utf8_lossy(line);
    scrape(&text, "type").is_some() && !text.contains("\"jsonrpc\"")
}

/// The string or number value of `"key": ...` in possibly broken JSON text.
fn scrape(text: &str, key: &str) -> Option<Value> {
    let needle = format!("\"{key}\"");
    let mut from = 0;
    while let Some(at) = text[from..].find(&needle) {
        let after = from + at + needle.len();
        from = after;
        let rest = text[after..].trim_start();
        let Some(rest) = rest.strip_prefix(':') else {
            continue;
        };
        let rest = rest.trim_start();
        if rest.starts_with('"') {
            let bytes = rest.as_bytes();
            let mut i = 1;
            while i < bytes.len() {
                match bytes[i] {
                    b'\\' => i += 2,
                    b'"' => {
                        if let Ok(v) = serde_json::from_str::<Value>(&rest[..=i]) {
                            return Some(v);
                        }
                        break;
                    }
                    _ => i += 1,
                }
            }
        } else {
            let end = rest
                .find(|c: char| !(c.is_ascii_digit() || matches!(c, '-' | '.' | 'e' | 'E' | '+')))
                .unwrap_or(rest.len());
            if let Ok(v @ Value::Number(_)) = serde_json::from_str::<Value>(&rest[..end]) {
                return Some(v);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scrape_reads_ids_from_broken_json() {
        assert_eq!(
            scrape(r#"{"type":"shell","id":"a\"b","command": }"#, "id"),
            Some(json!("a\"b"))
        );
        assert_eq!(scrape(r#"{"id": 42, "type"#, "id"), Some(json!(42)));
        assert_eq!(scrape(r#"{"id": oops}"#, "id"), None);
        assert_eq!(
            scrape(r#"{"type":"shell","id":"7","#, "type"),
            Some(json!("shell"))
        );
    }

    #[test]
    fn modes_are_octal_strings() {
        assert_eq!(parse_mode("0644"), Ok(0o644));
        assert_eq!(parse_mode("755"), Ok(0o755));
        assert!(parse_mode("0999").is_err());
        assert!(parse_mode("").is_err());
        assert!(parse_mode("rwx").is_err());
    }

    #[test]
    fn quoting_survives_single_quotes() {
        assert_eq!(shell_quote("/tmp/it's"), r"'/tmp/it'\''s'");
    }
}
