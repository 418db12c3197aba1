//! The disk image of the VM runtime, built from Debian's packages (`sandboxd images build
//! vm`): a root file system made by `mmdebstrap` (minbase with bash, coreutils, python3 and
//! whatever else is asked for), the agent and its init, Debian's cloud kernel
//! (`linux-image-cloud-amd64`) and an initramfs of busybox and the kernel's virtio modules,
//! all in one raw ext4 image made by `mke2fs -d`. The image is named by the hash of its
//! recipe, so a second build of an unchanged recipe does nothing.
//!
//! Building needs root (mmdebstrap's directory output and `mke2fs -d` keep files' owners only
//! as root), `mmdebstrap`, `dpkg-deb` and `mke2fs`.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use sha2::{Digest, Sha256};

use crate::cpio;
use crate::image::{INITRD_PATH, KERNEL_PATH};

/// Bumped when the build changes in a way the recipe does not show.
const FORMAT: u32 = 2;
/// The Debian release and archives the image is built from (those of the Docker images).
pub const SUITE: &str = "bookworm";
const SOURCES: [&str; 3] = [
    "deb http://deb.debian.org/debian bookworm main",
    "deb http://deb.debian.org/debian bookworm-updates main",
    "deb http://deb.debian.org/debian-security bookworm-security main",
];
const DPKG_EXCLUDES: [&str; 2] = ["/usr/share/doc/*", "/usr/share/locale/*"];

/// In every image: the shell and tools a command expects, the agent's Python, and the static
/// busybox the initramfs is made of.
pub const BASE_PACKAGES: [&str; 5] = ["bash", "coreutils", "python3", "procps", "busybox-static"];
/// The kernel: Debian's build for virtual machines (its virtio drivers are modules, which the
/// initramfs loads).
pub const KERNEL_PACKAGE: &str = "linux-image-cloud-amd64";
/// The modules the initramfs loads (their dependencies come along, in order).
const MODULES: [&str; 4] = ["virtio_pci", "virtio_blk", "virtio_console", "virtio-rng"];
/// Free space in the guest's file system when none is asked for, in MiB: what a machine may
/// write (the host's copy-on-write layer grows by as much at most).
pub const DEFAULT_FREE_MB: u64 = 512;

const AGENT: &str = include_str!("../guest/agent.py");
const INIT: &str = include_str!("../guest/init");
const INITRAMFS_INIT: &str = include_str!("../guest/initramfs-init");

/// What an image is made of.
#[derive(Debug, Clone, Default)]
pub struct Recipe {
    /// Debian packages besides [`BASE_PACKAGES`].
    pub packages: Vec<String>,
    /// Free space in the guest's file system, in MiB (0: [`DEFAULT_FREE_MB`]).
    pub free_mb: u64,
}

impl Recipe {
    fn packages(&self) -> Vec<String> {
        let mut all: BTreeSet<String> = BASE_PACKAGES.iter().map(|s| s.to_string()).collect();
        all.extend(self.packages.iter().map(|p| p.trim().to_string()));
        all.remove("");
        all.into_iter().collect()
    }

    fn free_mb(&self) -> u64 {
        if self.free_mb == 0 {
            DEFAULT_FREE_MB
        } else {
            self.free_mb
        }
    }

    /// SHA-256 of everything that decides the image's contents.
    pub fn hash(&self) -> String {
        let canonical = serde_json::json!({
            "format": FORMAT,
            "suite": SUITE,
            "sources": SOURCES,
            "variant": "minbase",
            "dpkg_excludes": DPKG_EXCLUDES,
            "packages": self.packages(),
            "kernel": KERNEL_PACKAGE,
            "modules": MODULES,
            "free_mb": self.free_mb(),
            "agent": hex::encode(Sha256::digest(AGENT.as_bytes())),
            "init": hex::encode(Sha256::digest(INIT.as_bytes())),
            "initramfs_init": hex::encode(Sha256::digest(INITRAMFS_INIT.as_bytes())),
        });
        hex::encode(Sha256::digest(canonical.to_string().as_bytes()))
    }

    /// What the user chose (beside the image, so that a later build of the same choice
    /// knows which images it replaces).
    fn describe(&self) -> serde_json::Value {
        serde_json::json!({ "packages": self.packages(), "free_mb": self.free_mb() })
    }

    /// The image's file in `cache_dir`.
    pub fn image_path(&self, cache_dir: &Path) -> PathBuf {
        cache_dir.join(format!("vm-{}.img", &self.hash()[..16]))
    }
}

/// Why an image could not be built.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BuildError(String);

fn err(s: impl Into<String>) -> BuildError {
    BuildError(s.into())
}

/// Where images are kept by default: `$XDG_CACHE_HOME/wasmsand/images`, else
/// `~/.cache/wasmsand/images` (beside the Docker images' root file systems, sharing their
/// downloaded packages).
pub fn default_cache_dir() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from("/var/cache"))
        .join("wasmsand")
        .join("images")
}

fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

/// Builds the image of `recipe` in `cache_dir` (nothing when it is there, unless `rebuild`)
/// and returns its path. `progress` hears each step and mmdebstrap's own lines.
pub fn build(
    recipe: &Recipe,
    cache_dir: &Path,
    rebuild: bool,
    progress: &mut dyn FnMut(&str),
) -> Result<PathBuf, BuildError> {
    let out = recipe.image_path(cache_dir);
    if !rebuild && out.is_file() {
        progress(&format!("vm: up to date ({})", out.display()));
        return Ok(out);
    }
    if effective_uid() != Some(0) {
        return Err(err(
            "building the VM image needs root: mmdebstrap's directory output and mke2fs -d keep \
             the files' owners only when run as root",
        ));
    }
    std::fs::create_dir_all(cache_dir)
        .map_err(|e| err(format!("cannot create {}: {e}", cache_dir.display())))?;
    let work = out.with_extension("work");
    let _ = std::fs::remove_dir_all(&work);
    let root = work.join("root");
    std::fs::create_dir_all(&root).map_err(|e| err(format!("{}: {e}", root.display())))?;
    let result = build_in(recipe, cache_dir, &work, &root, &out, progress);
    let _ = std::fs::remove_dir_all(&work);
    result.map(|()| out)
}

fn build_in(
    recipe: &Recipe,
    cache_dir: &Path,
    work: &Path,
    root: &Path,
    out: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<(), BuildError> {
    progress("vm: building the root file system from Debian's packages (mmdebstrap)");
    mmdebstrap(recipe, cache_dir, work, root, progress)?;

    progress("vm: the kernel and its initramfs");
    let kernel_dir = work.join("kernel");
    let deb = std::fs::read_dir(root.join("var/tmp/wasmsand-kernel"))
        .map_err(|e| err(format!("the kernel package was not downloaded: {e}")))?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "deb"))
        .ok_or_else(|| err("the kernel package was not downloaded"))?;
    run(Command::new("dpkg-deb")
        .arg("-x")
        .arg(&deb)
        .arg(&kernel_dir))?;
    let vmlinuz = std::fs::read_dir(kernel_dir.join("boot"))
        .map_err(|e| err(format!("no /boot in {}: {e}", deb.display())))?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("vmlinuz-"))
        })
        .ok_or_else(|| err(format!("no vmlinuz in {}", deb.display())))?;
    let modules = modules_in_order(&kernel_dir.join("lib/modules"), &MODULES)?;
    progress(&format!(
        "vm: kernel {}, modules {}",
        vmlinuz
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        modules
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    ));
    let busybox = std::fs::read(root.join("bin/busybox"))
        .map_err(|e| err(format!("no static busybox in the root file system: {e}")))?;
    let initrd = initramfs(&busybox, &modules)?;
    let boot = root.join(KERNEL_PATH.trim_start_matches('/'));
    std::fs::create_dir_all(boot.parent().expect("a parent")).map_err(|e| err(e.to_string()))?;
    std::fs::copy(&vmlinuz, &boot).map_err(|e| err(format!("{}: {e}", boot.display())))?;
    std::fs::write(root.join(INITRD_PATH.trim_start_matches('/')), initrd)
        .map_err(|e| err(e.to_string()))?;
    let _ = std::fs::remove_dir_all(root.join("var/tmp/wasmsand-kernel"));

    progress("vm: the agent");
    let lib = root.join("usr/lib/wasmsand");
    std::fs::create_dir_all(&lib).map_err(|e| err(e.to_string()))?;
    write_mode(&lib.join("init"), INIT.as_bytes(), 0o755)?;
    write_mode(&lib.join("agent.py"), AGENT.as_bytes(), 0o644)?;

    let used_mb = du(root) / (1024 * 1024);
    // ext4's own metadata (inode tables, journal) takes about a tenth more.
    let size_mb = used_mb + used_mb / 8 + recipe.free_mb() + 64;
    progress(&format!(
        "vm: the ext4 image ({used_mb} MiB of files, {size_mb} MiB in all)"
    ));
    let partial = out.with_extension("partial");
    let _ = std::fs::remove_file(&partial);
    run(Command::new("mke2fs")
        .args(["-q", "-F", "-t", "ext4", "-L", "wasmsand", "-m", "0"])
        // No journal (the disk is thrown away with the machine, so there is nothing to
        // recover) and inode tables written now: otherwise every restore's read-write remount
        // would start a journal and the background zeroing of the tables.
        .args(["-O", "^has_journal", "-E", "lazy_itable_init=0", "-d"])
        .arg(root)
        .arg(&partial)
        .arg(format!("{size_mb}M")))?;
    std::fs::rename(&partial, out).map_err(|e| err(format!("{}: {e}", out.display())))?;
    let recipe_file = out.with_extension("recipe.json");
    std::fs::write(&recipe_file, recipe.describe().to_string())
        .map_err(|e| err(format!("{}: {e}", recipe_file.display())))?;
    forget_older(cache_dir, recipe, out);
    progress(&format!("vm: built {}", out.display()));
    Ok(())
}

/// Removes the images of earlier builds of the same packages (the project's own files, the
/// kernel's modules or the format changed since): several hundred MB each, never booted
/// again. Images of other package sets stay.
fn forget_older(cache_dir: &Path, recipe: &Recipe, current: &Path) {
    let Ok(entries) = std::fs::read_dir(cache_dir) else {
        return;
    };
    let wanted = recipe.describe();
    for e in entries.flatten() {
        let path = e.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let Some(hash) = name
            .strip_prefix("vm-")
            .and_then(|n| n.strip_suffix(".recipe.json"))
        else {
            continue;
        };
        let image = cache_dir.join(format!("vm-{hash}.img"));
        if image == current || hash.len() != 16 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            continue;
        }
        let same = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .is_some_and(|v| v == wanted);
        if same {
            let _ = std::fs::remove_file(&image);
            let _ = std::fs::remove_file(&path);
        }
    }
}

fn write_mode(path: &Path, data: &[u8], mode: u32) -> Result<(), BuildError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, data).map_err(|e| err(format!("{}: {e}", path.display())))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| err(format!("{}: {e}", path.display())))
}

fn run(cmd: &mut Command) -> Result<(), BuildError> {
    let name = cmd.get_program().to_string_lossy().into_owned();
    let out = cmd.stdin(Stdio::null()).output().map_err(|e| {
        err(format!(
            "cannot run {name} ({e}); install Debian's package that provides it"
        ))
    })?;
    if !out.status.success() {
        return Err(err(format!(
            "{name} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// Bytes of regular files under `dir` (symlinks not followed).
fn du(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(m) = e.path().symlink_metadata() else {
                continue;
            };
            if m.is_dir() {
                stack.push(e.path());
            } else {
                // Rounded up to 4 KiB blocks, as the file system will store them.
                total += m.len().div_ceil(4096) * 4096;
            }
        }
    }
    total
}

fn mmdebstrap(
    recipe: &Recipe,
    cache_dir: &Path,
    work: &Path,
    root: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<(), BuildError> {
    let debs = cache_dir.join("debs");
    std::fs::create_dir_all(&debs).map_err(|e| err(format!("{}: {e}", debs.display())))?;
    let debs_q = debs.display().to_string();
    // Run on the host with the chroot's apt (mmdebstrap sets APT_CONFIG for hooks): the
    // kernel package is downloaded, not installed, so no initramfs-tools run in the chroot.
    let kernel_hook = work.join("kernel-hook.sh");
    std::fs::write(
        &kernel_hook,
        format!(
            r#"#!/bin/sh
set -e
pkg=$(apt-cache depends {KERNEL_PACKAGE} | sed -n 's/^ *Depends: \(linux-image-[^ ]*\).*/\1/p' | head -n 1)
[ -n "$pkg" ] || {{ echo "no kernel package behind {KERNEL_PACKAGE}" >&2; exit 1; }}
mkdir -p "$1/var/tmp/wasmsand-kernel"
cd "$1/var/tmp/wasmsand-kernel"
apt-get download -q "$pkg"
"#
        ),
    )
    .map_err(|e| err(e.to_string()))?;
    let mut cmd = Command::new("mmdebstrap");
    cmd.arg("--variant=minbase")
        .arg("--mode=root")
        .arg(format!("--include={}", recipe.packages().join(",")))
        .arg("--aptopt=APT::Install-Recommends \"false\"")
        .args(
            DPKG_EXCLUDES
                .iter()
                .map(|p| format!("--dpkgopt=path-exclude={p}")),
        )
        // The downloaded packages are shared between builds (and with the Docker images').
        .arg(format!(
            "--setup-hook=mkdir -p \"$1/var/cache/apt/archives\" && find '{debs_q}' -name '*.deb' -exec cp -t \"$1/var/cache/apt/archives\" {{}} +"
        ))
        .arg(format!(
            "--customize-hook=find \"$1/var/cache/apt/archives\" -name '*.deb' -exec cp -n -t '{debs_q}' {{}} +"
        ))
        .arg(format!("--customize-hook=sh '{}' \"$1\"", kernel_hook.display()))
        .arg(SUITE)
        .arg(root)
        .args(SOURCES)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| {
        err(format!(
            "cannot run mmdebstrap ({e}); install Debian's mmdebstrap package"
        ))
    })?;
    let mut tail: Vec<String> = Vec::new();
    if let Some(stderr) = child.stderr.take() {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            progress(&format!("vm: {line}"));
            tail.push(line);
            if tail.len() > 20 {
                tail.remove(0);
            }
        }
    }
    let status = child.wait().map_err(|e| err(format!("mmdebstrap: {e}")))?;
    if !status.success() {
        return Err(err(format!(
            "mmdebstrap failed ({status}):\n{}",
            tail.join("\n")
        )));
    }
    Ok(())
}

/// The `depends=` of a module's `.modinfo`.
fn module_depends(ko: &[u8]) -> Vec<String> {
    let needle = b"depends=";
    let Some(at) = ko.windows(needle.len()).position(|w| w == needle) else {
        return Vec::new();
    };
    let rest = &ko[at + needle.len()..];
    let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
    String::from_utf8_lossy(&rest[..end])
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

/// `wanted` and their dependencies, each after what it depends on, found under a kernel
/// package's `lib/modules`.
fn modules_in_order(
    modules_dir: &Path,
    wanted: &[&str],
) -> Result<Vec<(String, Vec<u8>)>, BuildError> {
    let mut by_name: BTreeMap<String, PathBuf> = BTreeMap::new();
    let mut stack = vec![modules_dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Some(name) = p
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".ko"))
            {
                by_name.insert(name.to_string(), p.clone());
                // modules.dep and depends= write dashes as underscores.
                by_name.insert(name.replace('-', "_"), p);
            }
        }
    }
    let mut order: Vec<(String, Vec<u8>)> = Vec::new();
    let mut seen = BTreeSet::new();
    fn visit(
        name: &str,
        by_name: &BTreeMap<String, PathBuf>,
        seen: &mut BTreeSet<String>,
        order: &mut Vec<(String, Vec<u8>)>,
        depth: usize,
    ) -> Result<(), BuildError> {
        let key = name.replace('-', "_");
        if seen.contains(&key) {
            return Ok(());
        }
        if depth > 32 {
            return Err(err(format!("module dependencies loop at {name}")));
        }
        let path = by_name
            .get(name)
            .or_else(|| by_name.get(&key))
            .ok_or_else(|| err(format!("the kernel package has no module {name}")))?;
        let data = std::fs::read(path).map_err(|e| err(format!("{}: {e}", path.display())))?;
        for dep in module_depends(&data) {
            visit(&dep, by_name, seen, order, depth + 1)?;
        }
        seen.insert(key);
        order.push((name.to_string(), data));
        Ok(())
    }
    for w in wanted {
        visit(w, &by_name, &mut seen, &mut order, 0)?;
    }
    Ok(order)
}

/// The initramfs: busybox, the modules in load order, and `/init`.
fn initramfs(busybox: &[u8], modules: &[(String, Vec<u8>)]) -> Result<Vec<u8>, BuildError> {
    let mut w = cpio::Writer::new(Vec::new());
    let io = |e: std::io::Error| err(format!("initramfs: {e}"));
    for d in ["bin", "dev", "proc", "sys", "newroot", "modules"] {
        w.dir(d).map_err(io)?;
    }
    w.file("bin/busybox", 0o755, busybox).map_err(io)?;
    w.file("init", 0o755, INITRAMFS_INIT.as_bytes())
        .map_err(io)?;
    let order: String = modules.iter().map(|(n, _)| format!("{n}\n")).collect();
    w.file("modules.order", 0o644, order.as_bytes())
        .map_err(io)?;
    for (name, data) in modules {
        w.file(&format!("modules/{name}.ko"), 0o644, data)
            .map_err(io)?;
    }
    w.finish().map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recipes_differ_by_packages_and_name_their_image() {
        let base = Recipe::default();
        let more = Recipe {
            packages: vec!["git".into()],
            ..Recipe::default()
        };
        assert_eq!(base.hash(), Recipe::default().hash());
        assert_ne!(base.hash(), more.hash());
        // A base package named again changes nothing.
        let same = Recipe {
            packages: vec!["bash".into(), " ".into()],
            ..Recipe::default()
        };
        assert_eq!(base.hash(), same.hash());
        let p = base.image_path(Path::new("/c"));
        assert!(p.starts_with("/c"));
        assert!(p.to_string_lossy().ends_with(".img"));
    }

    #[test]
    fn a_new_build_removes_older_images_of_the_same_packages_only() {
        let dir = tempfile::tempdir().unwrap();
        let base = Recipe::default();
        let more = Recipe {
            packages: vec!["git".into()],
            ..Recipe::default()
        };
        let put = |hash: &str, r: &Recipe| {
            std::fs::write(dir.path().join(format!("vm-{hash}.img")), b"x").unwrap();
            std::fs::write(
                dir.path().join(format!("vm-{hash}.recipe.json")),
                r.describe().to_string(),
            )
            .unwrap();
        };
        put("00000000000000aa", &base);
        put("00000000000000bb", &more);
        put("00000000000000cc", &base);
        forget_older(
            dir.path(),
            &base,
            &dir.path().join("vm-00000000000000cc.img"),
        );
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".img"))
            .collect();
        left.sort();
        assert_eq!(left, ["vm-00000000000000bb.img", "vm-00000000000000cc.img"]);
    }

    #[test]
    fn modules_come_after_their_dependencies() {
        let dir = tempfile::tempdir().unwrap();
        let k = dir.path().join("6.1.0/kernel/drivers");
        std::fs::create_dir_all(&k).unwrap();
        let ko = |deps: &str| format!("\x7fELF....license=GPL\0depends={deps}\0vermagic=6.1\0");
        std::fs::write(k.join("virtio_ring.ko"), ko("")).unwrap();
        std::fs::write(k.join("virtio.ko"), ko("virtio_ring")).unwrap();
        std::fs::write(k.join("virtio-rng.ko"), ko("virtio,virtio_ring")).unwrap();
        std::fs::write(k.join("virtio_blk.ko"), ko("virtio,virtio_ring")).unwrap();
        let got = modules_in_order(dir.path(), &["virtio-rng", "virtio_blk"]).unwrap();
        let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["virtio_ring", "virtio", "virtio-rng", "virtio_blk"]);
        assert!(modules_in_order(dir.path(), &["nope"]).is_err());
    }
}
