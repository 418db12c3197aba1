//! Saved machines in the state directory: one per image (as it is now: path, size, change
//! time, inode), QEMU build, acceleration and hardware, named by the hash of all of them.
//!
//! ```text
//! <state>/boot/<image-id>/{vmlinuz,initrd.img}     the image's kernel and initramfs
//! <state>/machines/<key>/ram                       guest RAM when it was saved
//! <state>/machines/<key>/devices                   QEMU's device state (migration stream)
//! <state>/machines/<key>/meta.json                 written last: the machine is complete
//! <state>/machines/<key>.lock                      held while one process boots and saves
//! ```

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// Bumped when what is saved, or how it is restored, changes in a way the key does not show.
const FORMAT: u32 = 1;

/// An image as it is now: a saved machine is valid only for exactly this file.
pub(crate) fn image_identity(image: &Path) -> std::io::Result<String> {
    let canonical = std::fs::canonicalize(image)?;
    let m = std::fs::metadata(&canonical)?;
    let id = format!(
        "{}|{}|{}|{}|{}.{}",
        canonical.display(),
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec()
    );
    Ok(hex::encode(&Sha256::digest(id.as_bytes())[..12]))
}

pub(crate) struct Boot {
    pub(crate) kernel: PathBuf,
    pub(crate) initrd: PathBuf,
}

impl Boot {
    pub(crate) fn at(state_dir: &Path, image_id: &str) -> Boot {
        let dir = state_dir.join("boot").join(image_id);
        Boot {
            kernel: dir.join("vmlinuz"),
            initrd: dir.join("initrd.img"),
        }
    }

    pub(crate) fn present(&self) -> bool {
        [&self.kernel, &self.initrd]
            .iter()
            .all(|p| std::fs::metadata(p).is_ok_and(|m| m.len() > 0))
    }
}

pub(crate) struct Saved {
    pub(crate) dir: PathBuf,
    lock_path: PathBuf,
}

impl Saved {
    /// The saved machine for this image, QEMU and hardware.
    pub(crate) fn at(state_dir: &Path, image_id: &str, qemu_version: &str, hw: &str) -> Saved {
        let key = format!("format={FORMAT}|image={image_id}|qemu={qemu_version}|{hw}");
        let key = hex::encode(&Sha256::digest(key.as_bytes())[..16]);
        let machines = state_dir.join("machines");
        Saved {
            dir: machines.join(&key),
            lock_path: machines.join(format!("{key}.lock")),
        }
    }

    pub(crate) fn ram(&self) -> PathBuf {
        self.dir.join("ram")
    }

    pub(crate) fn devices(&self) -> PathBuf {
        self.dir.join("devices")
    }

    fn meta(&self) -> PathBuf {
        self.dir.join("meta.json")
    }

    pub(crate) fn complete(&self) -> bool {
        self.meta().is_file() && self.ram().is_file() && self.devices().is_file()
    }

    /// Holds the machine's lock (blocking) until the returned file is dropped.
    pub(crate) fn lock(&self) -> std::io::Result<File> {
        if let Some(parent) = self.lock_path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let f = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&self.lock_path)?;
        f.lock()?;
        Ok(f)
    }

    /// Marks the machine complete, after its files are on disk.
    pub(crate) fn commit(&self, meta: &serde_json::Value) -> std::io::Result<()> {
        for p in [self.ram(), self.devices()] {
            File::open(&p)?.sync_all()?;
        }
        let tmp = self.dir.join("meta.json.tmp");
        std::fs::write(&tmp, meta.to_string())?;
        std::fs::rename(tmp, self.meta())
    }

    /// Forgets the machine (a restore of it failed).
    pub(crate) fn remove(&self) {
        let _ = std::fs::remove_file(self.meta());
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Removes the saved machines and boot files of earlier versions of this image file, and of
/// image files that are gone (each saved machine holds up to its RAM size on disk); machines
/// of the current version with other hardware stay.
pub(crate) fn forget_older(state_dir: &Path, image: &Path, image_id: &str) {
    let canonical = std::fs::canonicalize(image).unwrap_or_else(|_| image.to_path_buf());
    let canonical = canonical.display().to_string();
    let Ok(entries) = std::fs::read_dir(state_dir.join("machines")) else {
        return;
    };
    for e in entries.flatten() {
        let dir = e.path();
        let Ok(text) = std::fs::read_to_string(dir.join("meta.json")) else {
            continue;
        };
        let Ok(meta) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        let field = |k: &str| {
            meta.get(k)
                .and_then(serde_json::Value::as_str)
                .map(String::from)
        };
        let (Some(old_image), Some(old_id)) = (field("image"), field("image_id")) else {
            continue;
        };
        if old_id.contains(['/', '.']) {
            continue;
        }
        let gone = !Path::new(&old_image).exists();
        if !gone && (old_image != canonical || old_id == image_id) {
            continue;
        }
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_dir_all(state_dir.join("boot").join(old_id));
    }
}
