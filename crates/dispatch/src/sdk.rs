//! What the SDKs' shape needs beyond the basic methods: files moved in chunks (so neither
//! side holds a whole large file as one base64 line), `files.rename`, and `run`'s per-run
//! `env` and `cwd`.

use std::borrow::Cow;

use base64::Engine as _;
use serde_json::{Value, json};

use crate::params::Params;
use crate::{Dispatcher, RpcError};

impl Dispatcher {
    /// `files.write {path, data, append?}`: with `append: true` the bytes go at the end of
    /// the file (created if missing), so a client uploads a large file chunk by chunk.
    pub(crate) fn files_write(&self, p: Params) -> Result<Value, RpcError> {
        let data = p.base64("data")?;
        let append = p.opt_bool("append")?.unwrap_or(false);
        self.on(p, |sb| {
            let path = p.str("path")?;
            if append {
                Ok(sb.append_file(path, &data)?)
            } else {
                Ok(sb.write_file(path, &data)?)
            }
        })
    }

    /// `files.read {path, offset?, length?}`: the whole file as `{data}`, or with `offset`
    /// or `length` the bytes in that range (cut at the end of the file) as `{data, size}`,
    /// `size` being the whole file's, so a client reads a large file chunk by chunk.
    pub(crate) fn files_read(&self, p: Params) -> Result<Value, RpcError> {
        let offset = p.opt_u64("offset")?;
        let length = p.opt_u64("length")?;
        self.on(p, |sb| {
            // Zero-copy: the file's bytes are shared with the reply until it is encoded.
            let data = sb.read_file(p.str("path")?)?;
            let b64 = &base64::engine::general_purpose::STANDARD;
            if offset.is_none() && length.is_none() {
                return Ok(json!({"data": b64.encode(&data)}));
            }
            let size = data.len();
            let start = usize::try_from(offset.unwrap_or(0))
                .unwrap_or(usize::MAX)
                .min(size);
            let end = match length {
                Some(n) => start.saturating_add(usize::try_from(n).unwrap_or(usize::MAX)),
                None => size,
            }
            .min(size);
            Ok(json!({"data": b64.encode(&data[start..end]), "size": size}))
        })
    }

    /// `files.rename {from, to}`: POSIX `rename(2)` rules (a file replaces a file, a
    /// directory only an empty directory).
    pub(crate) fn files_rename(&self, p: Params) -> Result<Value, RpcError> {
        self.on(p, |sb| Ok(sb.rename(p.str("from")?, p.str("to")?)?))
    }
}

/// The command line a `run` with `env` (an object of strings) or `cwd` executes: the
/// command in a subshell that first changes directory and exports the variables, so they
/// hold for this run only and the session's cwd and variables are as before afterwards.
/// The prefix shares the command's first line, so line numbers in its error messages stay
/// the command's own.
pub(crate) fn scoped_command(p: Params<'_>) -> Result<Cow<'_, str>, RpcError> {
    let command = p.str("command")?;
    let cwd = match p.0.get("cwd") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if !s.is_empty() => Some(s.as_str()),
        Some(_) => {
            return Err(RpcError::invalid_params(
                "Invalid param: cwd must be a non-empty string",
            ));
        }
    };
    let env = match p.0.get("env") {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) => Some(m),
        Some(_) => {
            return Err(RpcError::invalid_params(
                "Invalid param: env must be an object of strings",
            ));
        }
    };
    if cwd.is_none() && env.is_none_or(|m| m.is_empty()) {
        return Ok(Cow::Borrowed(command));
    }
    let mut line = String::from("( ");
    if let Some(dir) = cwd {
        line.push_str(&format!("cd -- {} || exit 1; ", quote(dir)));
    }
    for (name, value) in env.into_iter().flatten() {
        if !valid_name(name) {
            return Err(RpcError::invalid_params(format!(
                "Invalid param: env: {name:?} is not a variable name"
            )));
        }
        let Some(value) = value.as_str() else {
            return Err(RpcError::invalid_params(format!(
                "Invalid param: env: the value of {name} must be a string"
            )));
        };
        line.push_str(&format!("export {name}={}; ", quote(value)));
    }
    line.push_str(command);
    line.push_str("\n)");
    Ok(Cow::Owned(line))
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// `run`'s standard input: `stdin` (UTF-8 text) or `stdinBase64` (bytes), not both.
pub(crate) fn run_stdin(p: Params<'_>) -> Result<Option<Vec<u8>>, RpcError> {
    let text = match p.0.get("stdin") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.as_bytes().to_vec()),
        Some(_) => {
            return Err(RpcError::invalid_params(
                "Invalid param: stdin must be a string",
            ));
        }
    };
    let bytes = p.opt_base64("stdinBase64")?;
    match (text, bytes) {
        (Some(_), Some(_)) => Err(RpcError::invalid_params(
            "Invalid param: give stdin or stdinBase64, not both",
        )),
        (t, b) => Ok(t.or(b)),
    }
}
