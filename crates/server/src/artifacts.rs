//! Artifacts: workspace files matching a run's `capture_patterns`, copied after the run to
//! `<data_dir>/<user_id>/runs/<run_id>/artifacts/`, within per-run and per-user byte caps;
//! symlinks are listed as zero-length entries and never followed.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use globset::{Glob, GlobSet, GlobSetBuilder};

use crate::App;
use crate::config::MIB;
use crate::runtime::SandboxBox;
use crate::store::{self, ArtifactEntry};

pub fn compile_patterns(patterns: &[String]) -> Result<GlobSet, String> {
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        let norm = p.trim_start_matches("./");
        if norm.is_empty() || norm.starts_with('/') || norm.split('/').any(|s| s == "..") {
            return Err(format!(
                "capture pattern '{p}' must be relative to the workspace, without '..'"
            ));
        }
        let g = globset::GlobBuilder::new(norm)
            .literal_separator(true)
            .build()
            .or_else(|_| Glob::new(norm))
            .map_err(|e| format!("capture pattern '{p}': {e}"))?;
        b.add(g);
    }
    b.build().map_err(|e| e.to_string())
}

pub fn run_dir(data_dir: &Path, user: &str, run_id: &str) -> PathBuf {
    data_dir
        .join(safe_segment(user))
        .join("runs")
        .join(safe_segment(run_id))
}

pub fn artifacts_dir(data_dir: &Path, user: &str, run_id: &str) -> PathBuf {
    run_dir(data_dir, user, run_id).join("artifacts")
}

/// A directory name that cannot climb out of its parent.
fn safe_segment(s: &str) -> String {
    let cleaned: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if cleaned.is_empty() || cleaned.chars().all(|c| c == '.') {
        "_".into()
    } else {
        cleaned
    }
}

/// Normalizes a requested artifact path: relative, `/`-separated, no empty, `.` or `..`
/// segments, no backslashes or NULs. `None` means the path is refused.
pub fn normalize(path: &str) -> Option<String> {
    if path.is_empty() || path.starts_with('/') || path.contains('\\') || path.contains('\0') {
        return None;
    }
    let mut parts = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => continue,
            ".." => return None,
            s => parts.push(s),
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// Copies matching files out of a run's box (a wasm sandbox or a container) to the run's
/// artifact directory. Returns the entries, their bytes, and whether a cap (per run, per
/// user, or the walk's) left some out.
pub async fn capture(
    app: &Arc<App>,
    boxed: &dyn SandboxBox,
    set: &GlobSet,
    user: &str,
    run_id: &str,
) -> (Vec<ArtifactEntry>, u64, bool) {
    let run_cap = app.config.max_artifact_bytes_per_run_mb.saturating_mul(MIB);
    let user_cap = app
        .config
        .max_artifact_bytes_per_user_mb
        .saturating_mul(MIB);
    let user_used = app.store.user_artifact_bytes(user).unwrap_or(0);
    let budget = run_cap.min(user_cap.saturating_sub(user_used));
    let (mut found, mut capped) = boxed.candidates(set).await;
    found.sort_by(|a, b| a.path.cmp(&b.path));
    let mut entries = Vec::new();
    let mut wanted = Vec::new();
    let mut planned = 0u64;
    for c in found {
        if c.symlink {
            entries.push(ArtifactEntry {
                path: c.path,
                size: 0,
                kind: "symlink".into(),
                content_type: "inode/symlink".into(),
            });
        } else if planned + c.size > budget {
            capped = true;
        } else {
            planned += c.size;
            wanted.push(c.path);
        }
    }
    let dir = artifacts_dir(&app.config.data_dir, user, run_id);
    let mut total = 0u64;
    for (path, data) in boxed.read(wanted, budget).await {
        // A file may have grown since it was listed.
        if total + data.len() as u64 > budget {
            capped = true;
            continue;
        }
        let target = dir.join(&path);
        let written = tokio::task::spawn_blocking({
            let data = data.clone();
            move || -> std::io::Result<()> {
                if let Some(parent) = target.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                std::fs::write(&target, &data)
            }
        })
        .await;
        if !matches!(written, Ok(Ok(()))) {
            continue;
        }
        total += data.len() as u64;
        entries.push(ArtifactEntry {
            content_type: content_type(&path, &data).to_string(),
            path,
            size: data.len() as u64,
            kind: "file".into(),
        });
    }
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    (entries, total, capped)
}

/// The media type of an artifact: from its first bytes when they say, else its extension,
/// else text or binary by content.
pub fn content_type(path: &str, data: &[u8]) -> &'static str {
    const MAGIC: &[(&[u8], &str)] = &[
        (b"\x89PNG\r\n\x1a\n", "image/png"),
        (b"\xff\xd8\xff", "image/jpeg"),
        (b"GIF87a", "image/gif"),
        (b"GIF89a", "image/gif"),
        (b"%PDF-", "application/pdf"),
        (b"PK\x03\x04", "application/zip"),
        (b"\x1f\x8b", "application/gzip"),
        (b"\0asm", "application/wasm"),
    ];
    for (magic, t) in MAGIC {
        if data.starts_with(magic) {
            return t;
        }
    }
    let ext = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    let by_ext = match ext.as_deref() {
        Some("json") => Some("application/json"),
        Some("html" | "htm") => Some("text/html; charset=utf-8"),
        Some("css") => Some("text/css; charset=utf-8"),
        Some("js" | "mjs") => Some("text/javascript; charset=utf-8"),
        Some("csv") => Some("text/csv; charset=utf-8"),
        Some("md") => Some("text/markdown; charset=utf-8"),
        Some("xml") => Some("application/xml"),
        Some("svg") => Some("image/svg+xml"),
        Some("txt" | "log" | "py" | "sh" | "rs" | "toml" | "yaml" | "yml") => {
            Some("text/plain; charset=utf-8")
        }
        Some("tar") => Some("application/x-tar"),
        _ => None,
    };
    if let Some(t) = by_ext {
        return t;
    }
    let head = &data[..data.len().min(8192)];
    let text = match std::str::from_utf8(head) {
        Ok(_) => true,
        // A character cut by the 8 KiB window is still text.
        Err(e) => e.error_len().is_none() && !head.contains(&0),
    };
    if text && !head.contains(&0) {
        "text/plain; charset=utf-8"
    } else {
        "application/octet-stream"
    }
}

/// Deletes artifacts whose TTL passed and marks their runs; returns how many runs' went.
pub async fn sweep(app: &Arc<App>) -> u64 {
    let cutoff = app.clock.now_ms() - app.config.artifact_ttl().as_millis() as i64;
    let Ok(runs) = store::call(&app.store, move |s| s.runs_with_artifacts_before(cutoff)).await
    else {
        return 0;
    };
    let mut swept = 0;
    for mut r in runs {
        let dir = artifacts_dir(&app.config.data_dir, &r.user_id, &r.id);
        let removed = tokio::task::spawn_blocking(move || match std::fs::remove_dir_all(&dir) {
            Ok(()) => true,
            Err(e) => e.kind() == std::io::ErrorKind::NotFound,
        })
        .await
        .unwrap_or(false);
        if !removed {
            continue;
        }
        r.artifacts_expired = true;
        if let Some(live) = app.live_run(&r.id) {
            live.record.lock().artifacts_expired = true;
        }
        let _ = store::call(&app.store, move |s| s.put_run(&r)).await;
        swept += 1;
    }
    swept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_refuses_escapes() {
        assert_eq!(normalize("a/./b//c").as_deref(), Some("a/b/c"));
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../../x",
            "a\\b",
            "a/..",
            ".",
            "a\0b",
        ] {
            assert_eq!(normalize(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn patterns_match_relative_paths() {
        let set = compile_patterns(&["dist/**".into(), "*.json".into()]).unwrap();
        assert!(set.is_match("dist/a/b.js"));
        assert!(set.is_match("results.json"));
        assert!(!set.is_match("sub/results.json"));
        assert!(compile_patterns(&["../x".into()]).is_err());
        assert!(compile_patterns(&["/abs".into()]).is_err());
    }

    #[test]
    fn content_types() {
        assert_eq!(content_type("a.bin", b"\x89PNG\r\n\x1a\nxx"), "image/png");
        assert_eq!(content_type("r.json", b"{}"), "application/json");
        assert_eq!(content_type("noext", b"hello"), "text/plain; charset=utf-8");
        assert_eq!(
            content_type("noext", b"\x00\x01"),
            "application/octet-stream"
        );
    }

    #[test]
    fn segments_stay_inside() {
        assert_eq!(safe_segment("../.."), ".._..");
        assert_eq!(safe_segment(".."), "_");
        assert_eq!(safe_segment(""), "_");
        assert_eq!(safe_segment("user-1"), "user-1");
    }
}
