//! `base_image` names a sandbox template. This runtime has one, the standard sandbox (shell,
//! tools, `python3`); operators add aliases for it in configuration. Its digest is a SHA-256
//! over the template's files (path, kind, content), computed once per process.

use std::collections::BTreeMap;
use std::sync::Arc;

use sha2::{Digest, Sha256};
use tokio::sync::OnceCell;
use wasmsand::{FileKind, Sandbox, SandboxOptions};

pub const DEFAULT_IMAGE: &str = "wasmsand/default";

pub struct Images {
    aliases: BTreeMap<String, String>,
    cache_dir: Option<std::path::PathBuf>,
}

/// The template is the same for every instance in a process: its digest is computed once.
static DIGEST: OnceCell<String> = OnceCell::const_new();

impl Images {
    pub fn new(aliases: BTreeMap<String, String>, cache_dir: Option<std::path::PathBuf>) -> Images {
        Images { aliases, cache_dir }
    }

    /// The template names, without aliases.
    pub fn templates(&self) -> Vec<String> {
        vec![DEFAULT_IMAGE.to_string()]
    }

    /// Every name a request may use: templates and aliases.
    pub fn known(&self) -> Vec<String> {
        let mut v = self.templates();
        v.extend(self.aliases.keys().cloned());
        v
    }

    /// The aliases of the template.
    pub fn aliases(&self) -> Vec<String> {
        self.aliases
            .iter()
            .filter(|(_, t)| t.as_str() == DEFAULT_IMAGE)
            .map(|(a, _)| a.clone())
            .collect()
    }

    /// The template a name means, or `None` for an unknown name.
    pub fn resolve(&self, name: &str) -> Option<&'static str> {
        let target = self.aliases.get(name).map(String::as_str).unwrap_or(name);
        (target == DEFAULT_IMAGE).then_some(DEFAULT_IMAGE)
    }

    pub async fn digest(self: &Arc<Self>) -> String {
        let me = self.clone();
        DIGEST
            .get_or_init(|| async move {
                let cache_dir = me.cache_dir.clone();
                tokio::task::spawn_blocking(move || template_digest(cache_dir))
                    .await
                    .unwrap_or_else(|e| format!("unavailable: {e}"))
            })
            .await
            .clone()
    }
}

fn template_digest(cache_dir: Option<std::path::PathBuf>) -> String {
    let sb = Sandbox::new(SandboxOptions {
        cache_dir,
        ..Default::default()
    });
    let mut h = Sha256::new();
    let mut stack = vec!["/".to_string()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = sb.list(&dir) else { continue };
        for e in entries {
            let path = if dir == "/" {
                format!("/{}", e.name)
            } else {
                format!("{dir}/{}", e.name)
            };
            // Devices have no content to speak of; the workspace and /tmp are the user's.
            if matches!(path.as_str(), "/dev" | "/tmp" | "/home") {
                continue;
            }
            h.update(path.as_bytes());
            h.update([0]);
            match e.kind {
                FileKind::Dir => {
                    h.update(b"d");
                    stack.push(path);
                }
                FileKind::Symlink => h.update(b"l"),
                FileKind::File => {
                    h.update(b"f");
                    if let Ok(data) = sb.read_file(&path) {
                        h.update((data.len() as u64).to_le_bytes());
                        h.update(Sha256::digest(&data));
                    }
                }
            }
        }
    }
    sb.destroy();
    format!("sha256:{}", hex::encode(h.finalize()))
}
