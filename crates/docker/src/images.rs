//! The images this runtime runs, built here from Debian's packages (there is no registry to
//! pull from): a root filesystem made by `mmdebstrap`, imported into the engine and tagged
//! `wasmsand/<name>:<version>` and `wasmsand/<name>:current`. Each image carries the hash of
//! its recipe as a label, so a second build of an unchanged recipe does nothing, and the
//! tarball is kept in a cache directory, so a fresh engine only re-imports it.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};

use bollard::query_parameters::{
    CreateImageOptionsBuilder, ListImagesOptionsBuilder, TagImageOptionsBuilder,
};
use futures::StreamExt;
use sha2::{Digest, Sha256};

use crate::engine::{Engine, EngineError};

/// Bumped when the build itself changes in a way the recipe does not show.
const FORMAT: u32 = 1;

/// Label with the recipe's hash.
pub const RECIPE_LABEL: &str = "org.wasmsand.recipe";
/// Label with the versions of the image's main packages (JSON).
pub const VERSIONS_LABEL: &str = "org.wasmsand.versions";
/// Label set on images whose toolchain must run what it builds (see
/// [`crate::spec::EXEC_SCRATCH`]).
pub const EXEC_SCRATCH_LABEL: &str = "org.wasmsand.exec-scratch";

/// The Debian release and archives every image is built from.
const SUITE: &str = "bookworm";
const SOURCES: [&str; 3] = [
    "deb http://deb.debian.org/debian bookworm main",
    "deb http://deb.debian.org/debian bookworm-updates main",
    "deb http://deb.debian.org/debian-security bookworm-security main",
];
/// Paths dpkg leaves out of every image (documentation and translations nobody reads in a
/// sandbox). Not the manual pages: OpenJDK's postinst links into /usr/share/man/man1.
const DPKG_EXCLUDES: [&str; 2] = ["/usr/share/doc/*", "/usr/share/locale/*"];

/// Preloaded into every process of every image (`shim/statx_compat.c` says why), built by
/// this crate's build script.
const STATX_SHIM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/statx_compat.so"));
/// Its source, whose hash is in every recipe's (the compiled bytes vary with the compiler).
const STATX_SHIM_SOURCE: &str = include_str!("../shim/statx_compat.c");
/// Where images have it.
const STATX_SHIM_PATH: &str = "/usr/lib/wasmsand/statx_compat.so";

/// In every image besides minbase (which has bash, tar, find and setsid): `ps`, `top` and `kill`.
const BASE_PACKAGES: [&str; 1] = ["procps"];

/// What one image is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recipe {
    /// Short name (`python`); the image is `wasmsand/<name>`.
    pub name: &'static str,
    /// Debian packages installed (without recommends).
    pub packages: &'static [&'static str],
    /// The package whose version tags the image, `None` for the Debian release's.
    pub version_of: Option<&'static str>,
    /// Environment of the image.
    pub env: &'static [(&'static str, &'static str)],
    /// Whether the toolchain needs an exec-allowed scratch directory.
    pub exec_scratch: bool,
    /// Shell commands run on the finished root filesystem (`$1`), for what a package gets
    /// wrong in a sandbox.
    pub fixes: &'static [&'static str],
    /// What a user should know (shown by `/runtimes`).
    pub note: &'static str,
}

/// Every image the project builds.
pub const RECIPES: &[Recipe] = &[
    Recipe {
        name: "python",
        packages: &[
            "python3",
            "python3-pip",
            "python3-venv",
            "python-is-python3",
        ],
        version_of: Some("python3"),
        env: &[("PYTHONUNBUFFERED", "1"), ("PIP_NO_CACHE_DIR", "1")],
        exec_scratch: false,
        fixes: &[],
        note: "Debian's CPython 3.11 with pip and venv",
    },
    Recipe {
        name: "node",
        packages: &["nodejs", "npm"],
        version_of: Some("nodejs"),
        env: &[
            ("NPM_CONFIG_CACHE", "/tmp/npm-cache"),
            ("NPM_CONFIG_UPDATE_NOTIFIER", "false"),
        ],
        exec_scratch: false,
        fixes: &[],
        note: "Debian's Node.js 18 (Debian 12 has no Node.js 20) with npm",
    },
    Recipe {
        name: "go",
        packages: &["golang-go"],
        version_of: Some("golang-1.19-go"),
        env: &[
            ("GOCACHE", "/tmp/go-cache"),
            ("GOPATH", "/tmp/go"),
            ("GOTMPDIR", crate::spec::EXEC_SCRATCH),
            ("GOPROXY", "off"),
            ("GOFLAGS", "-mod=mod"),
            ("CGO_ENABLED", "0"),
        ],
        exec_scratch: true,
        fixes: &[],
        note: "Debian's Go 1.19 (Debian 12 has no Go 1.22); `go run` and `go test` build in /opt/exec",
    },
    Recipe {
        name: "java",
        packages: &["openjdk-17-jdk-headless", "maven"],
        version_of: Some("openjdk-17-jdk-headless"),
        // Maven's downloads are a cache, like Go's and npm's: out of the workspace.
        env: &[("MAVEN_OPTS", "-Dmaven.repo.local=/tmp/m2/repository")],
        exec_scratch: false,
        fixes: &[
            // Debian's Maven 3.8.7 with its jansi 2 writes raw ANSI resets even in batch mode
            // and into pipes; runs never have a terminal, and without jansi Maven prints
            // plain text.
            "rm -f \"$1/usr/share/maven/lib/jansi.jar\"",
            // `mvn` finds its home by parsing `ls -ld` of the symlink it was run through,
            // which depends on the statx shim under gVisor: run through a script instead of a
            // symlink, it has nothing to resolve.
            "rm \"$1/usr/bin/mvn\" && printf '#!/bin/sh\\nexec /usr/share/maven/bin/mvn \"$@\"\\n' >\"$1/usr/bin/mvn\" && chmod 755 \"$1/usr/bin/mvn\"",
        ],
        note: "Debian's OpenJDK 17 JDK (javac and java) with Maven 3.8",
    },
    Recipe {
        name: "generic",
        packages: &["bash", "coreutils", "git", "make"],
        version_of: None,
        env: &[],
        exec_scratch: false,
        fixes: &[],
        note: "Debian with bash, coreutils, git and make",
    },
];

/// The recipe of an image name (`python`, or `wasmsand/python[:tag]`).
pub fn recipe(name: &str) -> Option<&'static Recipe> {
    let short = name.strip_prefix("wasmsand/").unwrap_or(name);
    let short = short.split(':').next().unwrap_or(short);
    RECIPES.iter().find(|r| r.name == short)
}

impl Recipe {
    /// The repository the image is tagged in.
    pub fn repository(&self) -> String {
        format!("wasmsand/{}", self.name)
    }

    /// SHA-256 of everything that decides the image's contents.
    pub fn hash(&self) -> String {
        let mut packages: Vec<&str> = self
            .packages
            .iter()
            .chain(BASE_PACKAGES.iter())
            .copied()
            .collect();
        packages.sort();
        let mut canonical = serde_json::json!({
            "format": FORMAT,
            "suite": SUITE,
            "sources": SOURCES,
            "variant": "minbase",
            "dpkg_excludes": DPKG_EXCLUDES,
            "packages": packages,
            "env": self.env,
            "exec_scratch": self.exec_scratch,
            "preload": hex::encode(Sha256::digest(STATX_SHIM_SOURCE.as_bytes())),
        });
        // Only where there are any, so that images without fixes keep their hashes.
        if !self.fixes.is_empty() {
            canonical["fixes"] = serde_json::json!(self.fixes);
        }
        hex::encode(Sha256::digest(canonical.to_string().as_bytes()))
    }
}

/// An image on the engine.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageInfo {
    /// The image id (`sha256:...`): imported images have no registry digest, so this is
    /// what identifies exactly what ran.
    pub id: String,
    /// Its `repo:tag` names.
    pub tags: Vec<String>,
    /// Its labels.
    pub labels: HashMap<String, String>,
}

impl ImageInfo {
    /// The versioned tag (`wasmsand/python:3.11.2`), else the first.
    pub fn versioned_tag(&self) -> Option<&str> {
        self.tags
            .iter()
            .find(|t| !t.ends_with(":current"))
            .or(self.tags.first())
            .map(String::as_str)
    }
}

impl Engine {
    /// The image a reference names, `None` when the engine does not have it.
    pub async fn image(&self, reference: &str) -> Result<Option<ImageInfo>, EngineError> {
        self.retrying(|| self.image_once(reference)).await
    }

    async fn image_once(&self, reference: &str) -> Result<Option<ImageInfo>, EngineError> {
        let docker = self.client().await?;
        match docker.inspect_image(reference).await {
            Ok(i) => Ok(Some(ImageInfo {
                id: i.id.unwrap_or_default(),
                tags: i.repo_tags.unwrap_or_default(),
                labels: i.config.and_then(|c| c.labels).unwrap_or_default(),
            })),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => Ok(None),
            Err(e) => Err(self.error(e)),
        }
    }

    /// The image built from exactly this recipe, if the engine has it.
    pub async fn built(&self, recipe: &Recipe) -> Result<Option<ImageInfo>, EngineError> {
        let docker = self.client().await?;
        let filters = HashMap::from([(
            "label".to_string(),
            vec![format!("{RECIPE_LABEL}={}", recipe.hash())],
        )]);
        let list = docker
            .list_images(Some(
                ListImagesOptionsBuilder::default()
                    .filters(&filters)
                    .build(),
            ))
            .await
            .map_err(|e| self.error(e))?;
        Ok(list.into_iter().next().map(|i| ImageInfo {
            id: i.id,
            tags: i.repo_tags,
            labels: i.labels,
        }))
    }
}

/// What `sandboxd images build` reports as it goes.
pub type Progress<'a> = &'a mut (dyn FnMut(&str) + Send);

/// Why an image could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The engine failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// `mmdebstrap` is missing, failed, or the files could not be written.
    #[error("{0}")]
    Build(String),
}

/// Removes the tarballs of earlier recipes of image `name` (several hundred MB each, and
/// never imported again once the recipe changed).
fn forget_older(cache_dir: &Path, name: &str, current: &Path) {
    let Ok(entries) = std::fs::read_dir(cache_dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let file = entry.file_name();
        let Some(hash) = file.to_str().and_then(|f| {
            f.strip_prefix(name)?
                .strip_prefix('-')?
                .strip_suffix(".tar")
        }) else {
            continue;
        };
        if path != current && hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// Builds (or finds) the image of `recipe`: a no-op when the engine has an image of this
/// recipe, an import when the cache holds its tarball, else a full `mmdebstrap` build.
/// Returns the image.
pub async fn build(
    engine: &Engine,
    recipe: &Recipe,
    cache_dir: &Path,
    rebuild: bool,
    progress: Progress<'_>,
) -> Result<ImageInfo, BuildError> {
    let name = recipe.name;
    if !rebuild && let Some(found) = engine.built(recipe).await? {
        progress(&format!(
            "{name}: up to date ({}, {})",
            found.versioned_tag().unwrap_or("untagged"),
            found.id
        ));
        return Ok(found);
    }
    let hash = recipe.hash();
    std::fs::create_dir_all(cache_dir)
        .map_err(|e| BuildError::Build(format!("cannot create {}: {e}", cache_dir.display())))?;
    let tarball = cache_dir.join(format!("{name}-{}.tar", &hash[..16]));
    if rebuild || !tarball.is_file() {
        progress(&format!(
            "{name}: building the root filesystem from Debian's packages"
        ));
        mmdebstrap(recipe, cache_dir, &tarball, progress).await?;
    } else {
        progress(&format!(
            "{name}: importing the cached root filesystem {}",
            tarball.display()
        ));
    }
    let versions = versions(&tarball, recipe)
        .map_err(|e| BuildError::Build(format!("cannot read the package versions: {e}")))?;
    let tag = versions
        .get("tag")
        .cloned()
        .unwrap_or_else(|| "latest".into());
    let image = import(engine, recipe, &tarball, &tag, &versions).await?;
    forget_older(cache_dir, name, &tarball);
    progress(&format!(
        "{name}: built {}:{tag} ({})",
        recipe.repository(),
        image.id
    ));
    Ok(image)
}

async fn mmdebstrap(
    recipe: &Recipe,
    cache_dir: &Path,
    tarball: &Path,
    progress: Progress<'_>,
) -> Result<(), BuildError> {
    let debs = cache_dir.join("debs");
    std::fs::create_dir_all(&debs)
        .map_err(|e| BuildError::Build(format!("cannot create {}: {e}", debs.display())))?;
    // mmdebstrap picks its output format by the file's extension: keep `.tar` last.
    let partial = tarball.with_extension("partial.tar");
    let packages: Vec<&str> = recipe
        .packages
        .iter()
        .chain(BASE_PACKAGES.iter())
        .copied()
        .collect();
    let debs_q = debs.display().to_string();
    let shim = cache_dir.join("statx_compat.so");
    std::fs::write(&shim, STATX_SHIM)
        .map_err(|e| BuildError::Build(format!("cannot write {}: {e}", shim.display())))?;
    let shim_q = shim.display().to_string();
    let mut cmd = tokio::process::Command::new("mmdebstrap");
    cmd.arg("--variant=minbase")
        .arg(format!("--include={}", packages.join(",")))
        .arg("--aptopt=APT::Install-Recommends \"false\"")
        .args(DPKG_EXCLUDES.iter().map(|p| format!("--dpkgopt=path-exclude={p}")))
        // The downloaded packages are shared between builds and kept across runs.
        .arg(format!(
            "--setup-hook=mkdir -p \"$1/var/cache/apt/archives\" && find '{debs_q}' -name '*.deb' -exec cp -t \"$1/var/cache/apt/archives\" {{}} +"
        ))
        // The engine copies a mount point's mode onto the tmpfs mounted there: these must
        // be writable by the runs' user.
        .arg(format!(
            "--customize-hook=mkdir -p -m 1777 \"$1/workspace\" \"$1{}\" && chmod 1777 \"$1/workspace\" \"$1{}\"",
            crate::spec::EXEC_SCRATCH,
            crate::spec::EXEC_SCRATCH
        ))
        .arg(format!(
            "--customize-hook=install -D -m 0644 '{shim_q}' \"$1{STATX_SHIM_PATH}\" && echo {STATX_SHIM_PATH} >\"$1/etc/ld.so.preload\""
        ))
        .args(recipe.fixes.iter().map(|f| format!("--customize-hook={f}")))
        .arg(format!(
            "--customize-hook=find \"$1/var/cache/apt/archives\" -name '*.deb' -exec cp -n -t '{debs_q}' {{}} +"
        ))
        .arg(SUITE)
        .arg(&partial)
        .args(SOURCES)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|e| {
        BuildError::Build(format!(
            "cannot run mmdebstrap ({e}); install Debian's mmdebstrap package (apt-get install mmdebstrap)"
        ))
    })?;
    let stderr = child.stderr.take().expect("piped");
    let stdout = child.stdout.take().expect("piped");
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stderr));
    let drain_out = tokio::spawn(async move {
        let mut out = tokio::io::BufReader::new(stdout);
        let _ = tokio::io::copy(&mut out, &mut tokio::io::sink()).await;
    });
    let mut tail: Vec<String> = Vec::new();
    while let Ok(Some(line)) = lines.next_line().await {
        progress(&format!("{}: {line}", recipe.name));
        tail.push(line);
        if tail.len() > 20 {
            tail.remove(0);
        }
    }
    let _ = drain_out.await;
    let status = child
        .wait()
        .await
        .map_err(|e| BuildError::Build(format!("mmdebstrap: {e}")))?;
    if !status.success() {
        let _ = std::fs::remove_file(&partial);
        return Err(BuildError::Build(format!(
            "mmdebstrap failed for {} ({status}):\n{}",
            recipe.name,
            tail.join("\n")
        )));
    }
    std::fs::rename(&partial, tarball)
        .map_err(|e| BuildError::Build(format!("cannot keep {}: {e}", tarball.display())))
}

/// Versions of the recipe's packages from the root filesystem's dpkg database; `tag` is the
/// image's tag (the upstream version of the main package, or the Debian release).
fn versions(tarball: &Path, recipe: &Recipe) -> std::io::Result<BTreeMap<String, String>> {
    let mut status = String::new();
    let mut debian_version = String::new();
    let mut archive = tar::Archive::new(std::fs::File::open(tarball)?);
    for entry in archive.entries()? {
        let mut entry = entry?;
        let path = entry.path()?.to_string_lossy().into_owned();
        match path.trim_start_matches("./") {
            "var/lib/dpkg/status" => {
                entry.read_to_string(&mut status)?;
            }
            "etc/debian_version" => {
                entry.read_to_string(&mut debian_version)?;
            }
            _ => {}
        }
        if !status.is_empty() && !debian_version.is_empty() {
            break;
        }
    }
    let installed = parse_dpkg_status(&status);
    let mut out = BTreeMap::new();
    for p in recipe.packages.iter().chain(recipe.version_of.iter()) {
        if let Some(v) = installed.get(*p) {
            out.insert(p.to_string(), v.clone());
        }
    }
    let tag = match recipe.version_of {
        Some(p) => installed.get(p).map(|v| upstream_version(v)),
        None => None,
    }
    .unwrap_or_else(|| format!("debian{}", debian_version.trim()));
    out.insert("debian".into(), debian_version.trim().to_string());
    out.insert("tag".into(), tag);
    Ok(out)
}

/// Installed packages and their versions from dpkg's status file.
pub fn parse_dpkg_status(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for stanza in text.split("\n\n") {
        let mut name = None;
        let mut version = None;
        let mut installed = false;
        for line in stanza.lines() {
            if let Some(v) = line.strip_prefix("Package: ") {
                name = Some(v.trim());
            } else if let Some(v) = line.strip_prefix("Version: ") {
                version = Some(v.trim());
            } else if let Some(v) = line.strip_prefix("Status: ") {
                installed = v.trim().ends_with(" installed");
            }
        }
        if let (Some(n), Some(v), true) = (name, version, installed) {
            out.insert(n.to_string(), v.to_string());
        }
    }
    out
}

/// The upstream part of a Debian version, as a tag: `2:1.19~1` → `1.19`,
/// `18.20.4+dfsg-1~deb12u3` → `18.20.4`, `17.0.21.1+2-1~deb12u1` → `17.0.21.1`.
pub fn upstream_version(debian: &str) -> String {
    let no_epoch = debian.split_once(':').map_or(debian, |(_, v)| v);
    let v: String = no_epoch
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let v = v.trim_end_matches('.');
    if v.is_empty() {
        "unknown".into()
    } else {
        v.to_string()
    }
}

async fn import(
    engine: &Engine,
    recipe: &Recipe,
    tarball: &Path,
    tag: &str,
    versions: &BTreeMap<String, String>,
) -> Result<ImageInfo, BuildError> {
    let docker = engine.client().await?;
    let mut changes: Vec<String> = vec![
        "CMD [\"sleep\", \"infinity\"]".into(),
        format!("LABEL {RECIPE_LABEL}={}", recipe.hash()),
        format!(
            "LABEL {VERSIONS_LABEL}={}",
            serde_json::to_string(&serde_json::to_string(versions).unwrap_or_default())
                .unwrap_or_default()
        ),
    ];
    if recipe.exec_scratch {
        changes.push(format!("LABEL {EXEC_SCRATCH_LABEL}=1"));
    }
    for (k, v) in recipe.env {
        changes.push(format!("ENV {k}={v}"));
    }
    let repo = recipe.repository();
    let options = CreateImageOptionsBuilder::default()
        .from_src("-")
        .repo(&repo)
        .tag(tag)
        .changes(changes)
        .build();
    let file = tokio::fs::File::open(tarball)
        .await
        .map_err(|e| BuildError::Build(format!("cannot open {}: {e}", tarball.display())))?;
    let body = bollard::body_try_stream(tokio_util::io::ReaderStream::new(file));
    let mut stream = docker.create_image(Some(options), Some(body), None);
    while let Some(item) = stream.next().await {
        let info = item.map_err(|e| engine.error(e))?;
        if let Some(err) = info.error_detail.and_then(|d| d.message) {
            return Err(BuildError::Build(format!(
                "the engine refused the import: {err}"
            )));
        }
    }
    docker
        .tag_image(
            &format!("{repo}:{tag}"),
            Some(
                TagImageOptionsBuilder::default()
                    .repo(&repo)
                    .tag("current")
                    .build(),
            ),
        )
        .await
        .map_err(|e| engine.error(e))?;
    engine
        .image(&format!("{repo}:{tag}"))
        .await?
        .ok_or_else(|| BuildError::Build(format!("{repo}:{tag} is missing after its import")))
}

/// Where tarballs are kept by default: `$XDG_CACHE_HOME/wasmsand/images`, else
/// `~/.cache/wasmsand/images`.
pub fn default_cache_dir() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from("/var/cache"))
        .join("wasmsand")
        .join("images")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recipe_hashes_are_stable_and_distinct() {
        let hashes: Vec<String> = RECIPES.iter().map(Recipe::hash).collect();
        assert_eq!(hashes, RECIPES.iter().map(Recipe::hash).collect::<Vec<_>>());
        let mut unique = hashes.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), RECIPES.len());
        assert_eq!(recipe("wasmsand/go:current").unwrap().name, "go");
        assert_eq!(recipe("python").unwrap().name, "python");
        assert!(recipe("dotnet").is_none());
    }

    #[test]
    fn a_new_recipe_removes_only_its_own_older_tarballs() {
        let dir = tempfile::tempdir().unwrap();
        let names = [
            "java-11499f435856fcda.tar",
            "java-a8b75c803234d60a.tar",
            "javascript-11499f435856fcda.tar",
            "python-5a5cbf8447059476.tar",
            "java-notes.tar",
            "java-a8b75c803234d60a.partial.tar",
        ];
        for n in names {
            std::fs::write(dir.path().join(n), b"x").unwrap();
        }
        forget_older(
            dir.path(),
            "java",
            &dir.path().join("java-a8b75c803234d60a.tar"),
        );
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(
            left,
            names[1..]
                .iter()
                .copied()
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .map(String::from)
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn versions_come_from_dpkg_status() {
        let status = "Package: python3\nStatus: install ok installed\nVersion: 3.11.2-1+b1\n\n\
                      Package: gone\nStatus: deinstall ok config-files\nVersion: 1.0\n\n\
                      Package: golang-go\nStatus: install ok installed\nVersion: 2:1.19~1\n";
        let got = parse_dpkg_status(status);
        assert_eq!(got.get("python3").map(String::as_str), Some("3.11.2-1+b1"));
        assert!(!got.contains_key("gone"));
        assert_eq!(upstream_version("3.11.2-1+b1"), "3.11.2");
        assert_eq!(upstream_version("2:1.19~1"), "1.19");
        assert_eq!(upstream_version("18.20.4+dfsg-1~deb12u3"), "18.20.4");
        assert_eq!(upstream_version("17.0.21.1+2-1~deb12u1"), "17.0.21.1");
        assert_eq!(upstream_version("~x"), "unknown");
    }
}
