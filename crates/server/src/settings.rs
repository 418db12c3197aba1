//! Where the configuration comes from: a file (TOML or JSON), the `SANDBOX_*` environment,
//! and `--set KEY=VALUE` flags, later ones winning. Every source names the same keys (a file
//! may also write them in lower case without the `SANDBOX_` prefix), so one parser
//! ([`Config::from_lookup`]) checks them all; a key no source understands is an error, not
//! ignored.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

use crate::Config;

/// Every key [`Config::from_lookup`] reads.
pub fn known_keys() -> BTreeSet<String> {
    crate::config::KEYS
        .iter()
        .map(|k| k.name.to_string())
        .collect()
}

fn canonical_key(k: &str) -> String {
    if k.starts_with("SANDBOX_") {
        k.to_string()
    } else {
        format!("SANDBOX_{}", k.to_ascii_uppercase())
    }
}

fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Reads a configuration file: `.toml`, else JSON. Values become the text an environment
/// variable would hold (lists and tables as JSON).
pub fn read_file(path: &Path) -> Result<BTreeMap<String, String>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let is_toml = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("toml"));
    let table: serde_json::Map<String, Value> = if is_toml {
        let t: toml::Table =
            toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        serde_json::to_value(t)
            .ok()
            .and_then(|v| v.as_object().cloned())
            .unwrap_or_default()
    } else {
        serde_json::from_str(&text)
            .map_err(|e| format!("{}: not a JSON object of settings: {e}", path.display()))?
    };
    let known = known_keys();
    let mut out = BTreeMap::new();
    for (k, v) in table {
        let key = canonical_key(&k);
        if !known.contains(&key) {
            return Err(format!("{}: unknown setting {k:?}", path.display()));
        }
        out.insert(key, value_text(&v));
    }
    Ok(out)
}

/// `KEY=VALUE` flags into a map, keys checked like a file's.
pub fn parse_overrides(items: &[String]) -> Result<BTreeMap<String, String>, String> {
    let known = known_keys();
    let mut out = BTreeMap::new();
    for item in items {
        let (k, v) = item
            .split_once('=')
            .ok_or_else(|| format!("--set {item:?}: expected KEY=VALUE"))?;
        let key = canonical_key(k.trim());
        if !known.contains(&key) {
            return Err(format!("--set: unknown setting {k:?}"));
        }
        out.insert(key, v.to_string());
    }
    Ok(out)
}

/// The configuration from defaults < `file` < environment (`env`) < `overrides`.
pub fn load(
    file: Option<&Path>,
    env: impl Fn(&str) -> Option<String>,
    overrides: &BTreeMap<String, String>,
) -> Result<Config, String> {
    let from_file = match file {
        Some(p) => read_file(p)?,
        None => BTreeMap::new(),
    };
    Config::from_lookup(|k| {
        overrides
            .get(k)
            .cloned()
            .or_else(|| env(k))
            .or_else(|| from_file.get(k).cloned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_env_and_flags_layer_in_order() {
        let dir = tempfile_dir();
        let toml_path = dir.join("s.toml");
        std::fs::write(
            &toml_path,
            "max_log_bytes = 1000\nSANDBOX_QUEUE_MAX_LENGTH = 7\nsupported_spec_versions = [\"1.0\", \"1.1\"]\nws_signed_urls = true\nuser_runs_per_minute = 5\n",
        )
        .unwrap();
        let env = |k: &str| (k == "SANDBOX_QUEUE_MAX_LENGTH").then(|| "9".to_string());
        let flags = parse_overrides(&["user_runs_per_minute=6".into()]).unwrap();
        let c = load(Some(&toml_path), env, &flags).unwrap();
        assert_eq!(c.max_log_bytes, 1000);
        assert_eq!(c.queue_max_length, 9, "the environment wins over the file");
        assert_eq!(c.user_runs_per_minute, 6, "a flag wins over the file");
        assert_eq!(c.supported_spec_versions, vec!["1.0", "1.1"]);
        assert!(c.ws_signed_urls);

        let json_path = dir.join("s.json");
        std::fs::write(&json_path, r#"{"max_sessions": 3, "mcp_enabled": false}"#).unwrap();
        let c = load(Some(&json_path), |_| None, &BTreeMap::new()).unwrap();
        assert_eq!(c.max_sessions, 3);
        assert!(!c.mcp_enabled);

        std::fs::write(&json_path, r#"{"max_sesions": 3}"#).unwrap();
        let e = load(Some(&json_path), |_| None, &BTreeMap::new()).unwrap_err();
        assert!(
            e.contains("unknown setting") && e.contains("max_sesions"),
            "{e}"
        );
        std::fs::write(&json_path, r#"{"max_sessions": "many"}"#).unwrap();
        let e = load(Some(&json_path), |_| None, &BTreeMap::new()).unwrap_err();
        assert!(e.contains("SANDBOX_MAX_SESSIONS"), "{e}");
        assert!(parse_overrides(&["nope".into()]).is_err());
        assert!(parse_overrides(&["SANDBOX_NOPE=1".into()]).is_err());
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn known_keys_cover_the_prds() {
        let k = known_keys();
        for key in [
            "SANDBOX_MAX_CONCURRENT_RUNS",
            "SANDBOX_WS_SIGNED_URLS",
            "SANDBOX_WS_SIGNING_SECRET",
            "SANDBOX_API_KEYS_FILE",
            "SANDBOX_USER_CPU_SECONDS_PER_DAY",
            "SANDBOX_USER_EXEC_SECONDS_PER_DAY",
            "SANDBOX_USER_ARTIFACT_MB_PER_DAY",
        ] {
            assert!(k.contains(key), "{key}");
        }
    }

    fn tempfile_dir() -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("wasmsand-settings-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}
