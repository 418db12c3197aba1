//! Host folders and what a sandbox changed over JSON-RPC (docs/protocol.md, "Host folders and
//! changes"): `sandbox.mount`, `sandbox.mounts`, `sandbox.diff`, `sandbox.exportChanges`, and
//! `create`'s `mounts`. The RPC client is the process that started this server (or the Python
//! program that carries it in-process): it names host folders it can read itself.

use std::path::PathBuf;

use serde_json::{Value, json};
use wasmsand::{ChangesOptions, ChangesSince, HostMount, MountInfo, MountOptions};

use crate::params::Params;
use crate::{Dispatcher, RpcError};

fn bad(m: String) -> RpcError {
    RpcError::invalid_params(format!("Invalid param: {m}"))
}

/// A mount as a request carries it: `{host, path, readOnly?, gitignore?, exclude?,
/// allowSecrets?, maxHostBytes?}`.
/// `prefix` names where it is in the request (`mounts[0].`, or nothing for the params).
pub(crate) fn mount_param(v: &Value, prefix: &str) -> Result<HostMount, RpcError> {
    let Some(o) = v.as_object() else {
        return Err(bad(format!(
            "{} must be an object {{host, path, ...}}",
            prefix.trim_end_matches('.')
        )));
    };
    for key in o.keys() {
        if !matches!(
            key.as_str(),
            "host"
                | "path"
                | "readOnly"
                | "gitignore"
                | "exclude"
                | "allowSecrets"
                | "maxHostBytes"
        ) {
            return Err(bad(format!(
                "{prefix}{key} is not a mount field (host, path, readOnly, gitignore, exclude, allowSecrets, maxHostBytes)"
            )));
        }
    }
    let p = Params(o);
    let strings = |key: &str| -> Result<Vec<String>, RpcError> {
        match o.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(a)) => a
                .iter()
                .map(|s| {
                    s.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| bad(format!("{prefix}{key} must be an array of strings")))
                })
                .collect(),
            Some(_) => Err(bad(format!("{prefix}{key} must be an array of strings"))),
        }
    };
    Ok(HostMount {
        host: PathBuf::from(p.str("host")?),
        at: p.str("path")?.to_string(),
        options: MountOptions {
            read_only: p.opt_bool("readOnly")?.unwrap_or(false),
            gitignore: p.opt_bool("gitignore")?.unwrap_or(false),
            exclude: strings("exclude")?,
            allow_secrets: strings("allowSecrets")?,
            max_host_bytes: p.opt_u64("maxHostBytes")?,
        },
    })
}

/// `create`'s `mounts`: an array of mounts (absent or null: none).
pub(crate) fn mounts_param(p: Params) -> Result<Vec<HostMount>, RpcError> {
    match p.0.get("mounts") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .enumerate()
            .map(|(i, v)| mount_param(v, &format!("mounts[{i}].")))
            .collect(),
        Some(_) => Err(bad("mounts must be an array".into())),
    }
}

pub(crate) fn mount_json(m: &MountInfo) -> Value {
    json!({
        "path": m.path,
        "host": m.host.display().to_string(),
        "readOnly": m.read_only,
        "hostBytesRead": m.host_bytes_read,
        "maxHostBytes": m.max_host_bytes,
        "dirsListed": m.dirs_listed,
        "filesRead": m.files_read,
    })
}

/// `since` (`"mount"`, the default; `"parent"`; `"snapshot"` with `snapshotId`) and `path`.
fn changes_options(p: Params) -> Result<ChangesOptions, RpcError> {
    let since = match p.0.get("since") {
        None | Some(Value::Null) => ChangesSince::Mount,
        Some(Value::String(s)) => match s.as_str() {
            "mount" => ChangesSince::Mount,
            "parent" => ChangesSince::Parent,
            "snapshot" => ChangesSince::Snapshot(p.snapshot_id("snapshotId")?),
            other => {
                return Err(bad(format!(
                    "since must be \"mount\", \"parent\" or \"snapshot\", not {other:?}"
                )));
            }
        },
        Some(_) => return Err(bad("since must be a string".into())),
    };
    let path = match p.0.get("path") {
        None | Some(Value::Null) => None,
        Some(_) => Some(p.str("path")?.to_string()),
    };
    Ok(ChangesOptions { since, path })
}

impl Dispatcher {
    pub(crate) fn mounts_call(&self, method: &str, p: Params) -> Result<Value, RpcError> {
        match method {
            "sandbox.mount" => {
                let mut fields = p.0.clone();
                fields.remove("sandboxId");
                let m = mount_param(&Value::Object(fields), "")?;
                self.on(p, |sb| {
                    let info = sb.mount_all(std::slice::from_ref(&m))?;
                    Ok(mount_json(&info[0]))
                })
            }
            "sandbox.mounts" => self.on(p, |sb| {
                let list: Vec<Value> = sb.mounts()?.iter().map(mount_json).collect();
                Ok(json!({"mounts": list}))
            }),
            "sandbox.diff" => {
                let opts = changes_options(p)?;
                self.on(p, |sb| Ok(sb.changes(&opts)?.to_json()))
            }
            "sandbox.exportChanges" => {
                let opts = changes_options(p)?;
                let dir = PathBuf::from(p.str("dir")?);
                self.on(p, |sb| {
                    let changes = sb.changes(&opts)?;
                    let r = sb.export_changes(&changes, &dir)?;
                    Ok(json!({"written": r.written, "removed": r.removed, "dirs": r.dirs}))
                })
            }
            other => Err(RpcError::method_not_found(other)),
        }
    }
}
