//! `policy_hash` (docs/service.md, "policy_hash"): SHA-256 of a versioned prefix and the
//! canonical JSON of the effective server policy, in lowercase hex.

use serde_json::{Value, json};

use crate::config::Config;
use crate::util::{canonical_json, sha256_hex};

pub const POLICY_PREFIX: &str = "tldw.sandbox.policy:v1\n";

/// The canonical input set with its effective values. The Docker keys are the docker
/// runtime's isolation (a seccomp profile by its SHA-256; `null` when unset); secrets (API keys, the JWT
/// secret, `SANDBOX_WS_SIGNING_SECRET`) and test toggles are not part of it, nor are who may
/// call and how often (credentials, quotas, signed URLs): they do not change what a run does.
pub fn effective_policy(c: &Config) -> Value {
    json!({
        "SANDBOX_DEFAULT_RUNTIME": c.default_runtime,
        "SANDBOX_NETWORK_DEFAULT": c.network_default,
        "SANDBOX_EGRESS_ALLOWLIST": c.egress_allowlist.to_allowlist(),
        "SANDBOX_EGRESS_RESOLVE": c.egress_resolve,
        "SANDBOX_EGRESS_CA_FILE": c.egress_ca_pem.as_ref().map(|p| sha256_hex(p.as_bytes())),
        "SANDBOX_MAX_UPLOAD_MB": c.max_upload_mb,
        "SANDBOX_MAX_LOG_BYTES": c.max_log_bytes,
        "SANDBOX_WORKSPACE_CAP_MB": c.workspace_cap_mb,
        "SANDBOX_ARTIFACT_TTL_HOURS": c.artifact_ttl_hours,
        "SANDBOX_MAX_ARTIFACT_BYTES_PER_RUN_MB": c.max_artifact_bytes_per_run_mb,
        "SANDBOX_MAX_ARTIFACT_BYTES_PER_USER_MB": c.max_artifact_bytes_per_user_mb,
        "SANDBOX_MAX_CPU": c.max_cpu,
        "SANDBOX_MAX_MEM_MB": c.max_mem_mb,
        "SANDBOX_MAX_TIMEOUT_SEC": c.max_timeout_sec,
        "SANDBOX_REDACT_PATHS": c.redact_paths,
        "SANDBOX_PIDS_LIMIT": c.pids_limit,
        "SANDBOX_ULIMIT_NOFILE": c.ulimit_nofile,
        "SANDBOX_ULIMIT_NPROC": c.ulimit_nproc,
        "SANDBOX_DEFAULT_STARTUP_TIMEOUT_SEC": c.default_startup_timeout_sec,
        "SANDBOX_DEFAULT_EXEC_TIMEOUT_SEC": c.default_exec_timeout_sec,
        "SANDBOX_CANCEL_GRACE_SECONDS": c.cancel_grace_seconds,
        "SANDBOX_ENABLE_EXECUTION": c.enable_execution,
        "SANDBOX_BACKGROUND_EXECUTION": c.background_execution,
        "SANDBOX_INTERACTIVE_ENABLED": c.interactive_enabled,
        "SANDBOX_INTERACTIVE_SHELLS": c.interactive_shells,
        "SANDBOX_INTERACTIVE_MAX_BYTES": c.interactive_max_bytes,
        "SANDBOX_INTERACTIVE_MAX_FRAME_BYTES": c.interactive_max_frame_bytes,
        "SANDBOX_INTERACTIVE_INPUT_BPS": c.interactive_input_bps,
        "SANDBOX_INTERACTIVE_IDLE_TIMEOUT_SEC": c.interactive_idle_timeout_sec,
        "SANDBOX_DOCKER_SECCOMP": c.docker.seccomp_profile.as_ref().map(|p| sha256_hex(p.as_bytes())),
        "SANDBOX_DOCKER_APPARMOR_PROFILE": c.docker.apparmor_profile,
        "SANDBOX_DOCKER_RUNTIME": c.docker.oci_runtime,
        "SANDBOX_DOCKER_EGRESS_RUNTIME": c.docker.egress_oci_runtime,
        "SANDBOX_DOCKER_TMPFS_NOEXEC": c.docker.tmpfs_noexec,
        "SANDBOX_DOCKER_EXEC_SCRATCH_MB": c.docker.exec_scratch_mb,
        "SANDBOX_SUPPORTED_SPEC_VERSIONS": c.supported_spec_versions,
    })
}

pub fn policy_hash(c: &Config) -> String {
    let mut input = String::from(POLICY_PREFIX);
    input.push_str(&canonical_json(&effective_policy(c)));
    sha256_hex(input.as_bytes())
}

/// The policy keys `PUT /admin/policies` may change while the server runs: those read when a
/// session or run is made (not those the runtimes are built with at start-up, such as the
/// Docker isolation or the CPU and memory maxima, which need a restart). Each is in
/// [`effective_policy`], so changing one moves the hash.
pub const LIVE_POLICY_KEYS: &[&str] = &[
    "SANDBOX_NETWORK_DEFAULT",
    "SANDBOX_EGRESS_ALLOWLIST",
    "SANDBOX_ENABLE_EXECUTION",
    "SANDBOX_DEFAULT_STARTUP_TIMEOUT_SEC",
    "SANDBOX_DEFAULT_EXEC_TIMEOUT_SEC",
    "SANDBOX_MAX_TIMEOUT_SEC",
    "SANDBOX_MAX_LOG_BYTES",
    "SANDBOX_INTERACTIVE_ENABLED",
    "SANDBOX_INTERACTIVE_SHELLS",
    "SANDBOX_REDACT_PATHS",
];

/// The quota keys `PUT /admin/quotas` may change: read at each admission. Not in the hash
/// (who may run how much does not change what a run does).
pub const LIVE_QUOTA_KEYS: &[&str] = &[
    "SANDBOX_USER_MAX_CONCURRENT_RUNS",
    "SANDBOX_USER_RUNS_PER_MINUTE",
    "SANDBOX_USER_CPU_SECONDS_PER_DAY",
    "SANDBOX_USER_ARTIFACT_MB_PER_DAY",
    "SANDBOX_MAX_SESSIONS",
];

/// The configuration new sessions and runs get: the start-up one with what the admin
/// endpoints changed since. A session keeps the one it was made with (`Session::policy`).
#[derive(Debug)]
pub struct Policy {
    pub config: Config,
    /// [`policy_hash`] of `config`.
    pub hash: String,
}

impl Policy {
    pub fn new(config: Config) -> Policy {
        Policy {
            hash: policy_hash(&config),
            config,
        }
    }

    /// The live policy keys with their values, as `GET /admin/policies` shows them and a
    /// session's checkpoint keeps them.
    pub fn values(&self) -> serde_json::Map<String, Value> {
        let all = effective_policy(&self.config);
        LIVE_POLICY_KEYS
            .iter()
            .map(|k| (k.to_string(), all[*k].clone()))
            .collect()
    }

    /// The live quota keys with their values.
    pub fn quota_values(&self) -> serde_json::Map<String, Value> {
        let c = &self.config;
        LIVE_QUOTA_KEYS
            .iter()
            .map(|k| {
                let v = match *k {
                    "SANDBOX_USER_MAX_CONCURRENT_RUNS" => json!(c.user_max_concurrent_runs),
                    "SANDBOX_USER_RUNS_PER_MINUTE" => json!(c.user_runs_per_minute),
                    "SANDBOX_USER_CPU_SECONDS_PER_DAY" => json!(c.user_cpu_seconds_per_day),
                    "SANDBOX_USER_ARTIFACT_MB_PER_DAY" => json!(c.user_artifact_mb_per_day),
                    "SANDBOX_MAX_SESSIONS" => json!(c.max_sessions),
                    other => unreachable!("{other} is not a quota key"),
                };
                (k.to_string(), v)
            })
            .collect()
    }

    /// This policy with `changes` (key → JSON value) applied, each read as the key is read at
    /// start-up and the whole validated as at start-up; `allowed` are the keys that may
    /// change. The error names the key and what is wrong; nothing is changed then.
    pub fn with(
        &self,
        changes: &serde_json::Map<String, Value>,
        allowed: &[&str],
    ) -> Result<Policy, String> {
        let mut config = self.config.clone();
        for (k, v) in changes {
            if !allowed.contains(&k.as_str()) {
                return Err(if crate::config::KEYS.iter().any(|key| key.name == k) {
                    format!(
                        "{k} cannot be changed here (one of {} can; others need a restart)",
                        allowed.join(", ")
                    )
                } else {
                    format!(
                        "{k} is not a key that can be changed here (one of {})",
                        allowed.join(", ")
                    )
                });
            }
            let text = match v {
                Value::String(s) => s.clone(),
                Value::Bool(b) => b.to_string(),
                Value::Number(n) => n.to_string(),
                // The allowlist is JSON text in a configuration, an object here.
                Value::Object(_) | Value::Array(_) => v.to_string(),
                Value::Null => return Err(format!("{k}: a value is required, not null")),
            };
            crate::config::apply_key(&mut config, k, &text)?;
        }
        config.validate()?;
        Ok(Policy::new(config))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_sha256_of_prefix_and_sorted_compact_json() {
        let c = Config::default();
        let text = format!("{POLICY_PREFIX}{}", canonical_json(&effective_policy(&c)));
        assert!(text.starts_with(
            "tldw.sandbox.policy:v1\n{\"SANDBOX_ARTIFACT_TTL_HOURS\":24,\"SANDBOX_BACKGROUND_EXECUTION\":true,"
        ));
        assert!(text.contains("\"SANDBOX_MAX_CPU\":4.0,"));
        assert!(text.ends_with("\"SANDBOX_SUPPORTED_SPEC_VERSIONS\":[\"1.0\"],\"SANDBOX_ULIMIT_NOFILE\":1024,\"SANDBOX_ULIMIT_NPROC\":512,\"SANDBOX_WORKSPACE_CAP_MB\":256}"));
        let h = policy_hash(&c);
        assert_eq!(h.len(), 64);
        assert!(
            h.chars()
                .all(|ch| ch.is_ascii_hexdigit() && !ch.is_ascii_uppercase())
        );
        assert_eq!(h, sha256_hex(text.as_bytes()));
    }

    #[test]
    fn hash_changes_with_policy_only() {
        let a = Config::default();
        let mut b = Config::default();
        assert_eq!(policy_hash(&a), policy_hash(&b));
        b.max_log_bytes += 1;
        assert_ne!(policy_hash(&a), policy_hash(&b));
        let c = Config {
            ws_heartbeat_sec: 3,
            ..Config::default()
        };
        assert_eq!(policy_hash(&a), policy_hash(&c));
        // Secrets and the signed-URL switch never move the hash.
        let d = Config {
            ws_signing_secret: Some("0123456789abcdef-secret".into()),
            jwt_secret: Some("another-secret-of-16+".into()),
            ws_signed_urls: true,
            ..Config::default()
        };
        assert_eq!(policy_hash(&a), policy_hash(&d));
        assert!(!canonical_json(&effective_policy(&d)).contains("secret"));
    }
}
