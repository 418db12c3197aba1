use base64::Engine as _;
use serde_json::{Map, Value};
use wasmsand::SnapshotId;

use crate::RpcError;

/// Typed access to a request's named params, with the -32602 messages clients see.
#[derive(Clone, Copy)]
pub(crate) struct Params<'a>(pub &'a Map<String, Value>);

fn missing(name: &str) -> RpcError {
    RpcError::invalid_params(format!("Missing required param: {name}"))
}

fn wrong(name: &str, what: &str) -> RpcError {
    RpcError::invalid_params(format!("Invalid param: {name} must be {what}"))
}

impl<'a> Params<'a> {
    pub fn str(self, name: &str) -> Result<&'a str, RpcError> {
        match self.0.get(name) {
            None | Some(Value::Null) => Err(missing(name)),
            Some(Value::String(s)) => Ok(s),
            Some(_) => Err(wrong(name, "a string")),
        }
    }

    pub fn opt_bool(self, name: &str) -> Result<Option<bool>, RpcError> {
        match self.0.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(wrong(name, "a boolean")),
        }
    }

    pub fn opt_u64(self, name: &str) -> Result<Option<u64>, RpcError> {
        match self.0.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| wrong(name, "a non-negative integer")),
        }
    }

    pub fn base64(self, name: &str) -> Result<Vec<u8>, RpcError> {
        let s = self.str(name)?;
        base64::engine::general_purpose::STANDARD
            .decode(s)
            .map_err(|_| wrong(name, "base64"))
    }

    /// An optional base64 param (absent or null: `None`).
    pub fn opt_base64(self, name: &str) -> Result<Option<Vec<u8>>, RpcError> {
        match self.0.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(_) => self.base64(name).map(Some),
        }
    }

    /// `truncation`: `"headTail"` (the default) or `"plain"`.
    pub fn truncation(self) -> Result<wasmsand::Truncation, RpcError> {
        match self.0.get("truncation") {
            None | Some(Value::Null) => Ok(wasmsand::Truncation::default()),
            Some(v) => serde_json::from_value(v.clone())
                .map_err(|_| wrong("truncation", "\"headTail\" or \"plain\"")),
        }
    }

    /// `deterministic`: absent, null or `false` for off; `true` or `{seed?, startTimeMs?,
    /// stepUs?}` for on (defaults: seed 0, 2024-01-01T00:00:00Z, 1000 µs per clock reading).
    /// `network`: `{allowlist: {hosts, cidrs, ips}, resolve?: {host: [ip, ...]}, caPem?:
    /// [pem, ...], limits?: {maxRequests?, maxBytes?, requestTimeoutMs?}}`, the sandbox's egress
    /// policy (docs/network.md); absent or null: no network.
    pub fn network(self) -> Result<Option<wasmsand::Network>, RpcError> {
        let Some(v) = self.0.get("network").filter(|v| !v.is_null()) else {
            return Ok(None);
        };
        let bad = |m: String| RpcError::invalid_params(format!("Invalid param: network{m}"));
        let Some(obj) = v.as_object() else {
            return Err(bad(" must be an object".into()));
        };
        if let Some(k) = obj
            .keys()
            .find(|k| !["allowlist", "resolve", "caPem", "limits"].contains(&k.as_str()))
        {
            return Err(bad(format!(
                ": unknown field `{k}`, expected one of `allowlist`, `resolve`, `caPem`, `limits`"
            )));
        }
        let list: wasmsand::egress::EgressAllowlist =
            serde_json::from_value(obj.get("allowlist").cloned().unwrap_or(Value::Null))
                .map_err(|e| bad(format!(".allowlist: {e}")))?;
        let allowlist = wasmsand::egress::EgressPolicy::parse(&list)
            .map_err(|e| bad(format!(".allowlist.{e}")))?;
        let mut net = wasmsand::Network::allow(allowlist);
        if let Some(r) = obj.get("resolve").filter(|v| !v.is_null()) {
            let map: std::collections::BTreeMap<String, Vec<std::net::IpAddr>> =
                serde_json::from_value(r.clone()).map_err(|e| {
                    bad(format!(
                        ".resolve must map host names to address lists: {e}"
                    ))
                })?;
            net.resolve = map
                .into_iter()
                .map(|(h, ips)| (wasmsand::egress::normalize_host(&h), ips))
                .collect();
        }
        if let Some(c) = obj.get("caPem").filter(|v| !v.is_null()) {
            net.ca_pem = serde_json::from_value(c.clone())
                .map_err(|e| bad(format!(".caPem must be a list of PEM strings: {e}")))?;
        }
        if let Some(l) = obj.get("limits").filter(|v| !v.is_null()) {
            let Some(l) = l.as_object() else {
                return Err(bad(".limits must be an object".into()));
            };
            for (k, v) in l {
                let n = v
                    .as_u64()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| bad(format!(".limits.{k} must be a positive integer")))?;
                match k.as_str() {
                    "maxRequests" => net.limits.max_requests = n,
                    "maxBytes" => net.limits.max_bytes = n,
                    "requestTimeoutMs" => net.limits.request_timeout_ms = n,
                    other => {
                        return Err(bad(format!(
                            ".limits: unknown field `{other}`, expected one of `maxRequests`, \
                             `maxBytes`, `requestTimeoutMs`"
                        )));
                    }
                }
            }
        }
        Ok(Some(net))
    }

    pub fn determinism(self) -> Result<Option<wasmsand::Determinism>, RpcError> {
        let what = "a boolean or {seed?, startTimeMs?, stepUs?} with non-negative integers";
        let obj = match self.0.get("deterministic") {
            None | Some(Value::Null) | Some(Value::Bool(false)) => return Ok(None),
            Some(Value::Bool(true)) => return Ok(Some(wasmsand::Determinism::default())),
            Some(Value::Object(o)) => o,
            Some(_) => return Err(wrong("deterministic", what)),
        };
        if let Some(k) = obj
            .keys()
            .find(|k| !matches!(k.as_str(), "seed" | "startTimeMs" | "stepUs"))
        {
            return Err(RpcError::invalid_params(format!(
                "Invalid param: deterministic has no member {k:?}"
            )));
        }
        let inner = Params(obj);
        let mut d = wasmsand::Determinism::default();
        let num = |name: &str| {
            inner
                .opt_u64(name)
                .map_err(|_| wrong("deterministic", what))
        };
        if let Some(seed) = num("seed")? {
            d.seed = seed;
        }
        if let Some(ms) = num("startTimeMs")? {
            d.start_ns = ms.saturating_mul(1_000_000);
        }
        if let Some(us) = num("stepUs")? {
            d.step_ns = us.saturating_mul(1000);
        }
        Ok(Some(d))
    }

    /// Snapshot ids are strings on the wire; a number is accepted too since it is what the
    /// string spells.
    pub fn snapshot_id(self, name: &str) -> Result<SnapshotId, RpcError> {
        match self.0.get(name) {
            None | Some(Value::Null) => Err(missing(name)),
            Some(Value::String(s)) => crate::parse_snapshot_id(s),
            Some(Value::Number(n)) => crate::parse_snapshot_id(&n.to_string()),
            Some(_) => Err(wrong(name, "a string")),
        }
    }
}
