//! A disk image before anything boots from it: is it a file system image at all, is it whole,
//! and the kernel and initramfs it carries (read with `debugfs`, which needs no mount and
//! never writes without `-w`).

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where an image keeps the kernel the machine boots.
pub const KERNEL_PATH: &str = "/boot/wasmsand/vmlinuz";
/// Where an image keeps its initramfs.
pub const INITRD_PATH: &str = "/boot/wasmsand/initrd.img";

const SUPERBLOCK: u64 = 1024;
const EXT_MAGIC: u16 = 0xEF53;
const INCOMPAT_64BIT: u32 = 0x80;

/// Why a file is not an image a machine can boot from.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// The file cannot be opened or read.
    #[error("{path}: {source}")]
    Unreadable {
        /// The image's path.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The file is something else.
    #[error("{path}: not a disk image this runtime boots ({why})")]
    NotAnImage {
        /// The image's path.
        path: PathBuf,
        /// What was found instead.
        why: String,
    },
    /// The file is shorter than its file system says.
    #[error(
        "{path}: truncated disk image: the file has {have} bytes, its file system needs {need}"
    )]
    Truncated {
        /// The image's path.
        path: PathBuf,
        /// The file's size.
        have: u64,
        /// The size its superblock implies.
        need: u64,
    },
    /// The kernel or initramfs could not be read out of it.
    #[error("{path}: {why}")]
    Contents {
        /// The image's path.
        path: PathBuf,
        /// What is missing or failed.
        why: String,
    },
}

/// Checks that `path` is a raw ext2/3/4 file system image, whole. Cheap: reads the
/// superblock only.
pub fn check_image(path: &Path) -> Result<u64, ImageError> {
    let unreadable = |source| ImageError::Unreadable {
        path: path.to_path_buf(),
        source,
    };
    let not_image = |why: &str| ImageError::NotAnImage {
        path: path.to_path_buf(),
        why: why.to_string(),
    };
    let mut f = std::fs::File::open(path).map_err(unreadable)?;
    let meta = f.metadata().map_err(unreadable)?;
    if meta.is_dir() {
        return Err(not_image("a directory"));
    }
    let have = meta.len();
    let mut head = [0u8; 4];
    let n = f.read(&mut head).map_err(unreadable)?;
    if n == 4 && &head == b"QFI\xfb" {
        return Err(not_image(
            "a qcow2 image; give a raw one: qemu-img convert -O raw IMAGE IMAGE.raw",
        ));
    }
    if have < SUPERBLOCK + 1024 {
        return Err(not_image(&format!(
            "{have} bytes, too short for a file system"
        )));
    }
    let mut sb = [0u8; 1024];
    f.seek(SeekFrom::Start(SUPERBLOCK)).map_err(unreadable)?;
    f.read_exact(&mut sb).map_err(unreadable)?;
    let u16_at = |o: usize| u16::from_le_bytes([sb[o], sb[o + 1]]);
    let u32_at = |o: usize| u32::from_le_bytes([sb[o], sb[o + 1], sb[o + 2], sb[o + 3]]);
    if u16_at(56) != EXT_MAGIC {
        return Err(not_image("no ext2/3/4 file system at its start"));
    }
    let log_block = u32_at(24);
    if log_block > 6 {
        return Err(not_image("a damaged superblock (block size)"));
    }
    let block_size = 1024u64 << log_block;
    let mut blocks = u64::from(u32_at(4));
    if u32_at(96) & INCOMPAT_64BIT != 0 {
        blocks |= u64::from(u32_at(0x150)) << 32;
    }
    let need = blocks.saturating_mul(block_size);
    if have < need {
        return Err(ImageError::Truncated {
            path: path.to_path_buf(),
            have,
            need,
        });
    }
    Ok(need)
}

/// Copies the image's kernel and initramfs to `kernel` and `initrd`.
pub(crate) fn extract_boot_files(
    image: &Path,
    kernel: &Path,
    initrd: &Path,
) -> Result<(), ImageError> {
    for (inside, out) in [(KERNEL_PATH, kernel), (INITRD_PATH, initrd)] {
        let _ = std::fs::remove_file(out);
        let request = format!("dump {inside} \"{}\"", out.display());
        let result = Command::new("debugfs")
            .arg("-R")
            .arg(&request)
            .arg(image)
            .output()
            .map_err(|e| ImageError::Contents {
                path: image.to_path_buf(),
                why: format!(
                    "cannot run debugfs ({e}); install Debian's e2fsprogs package to read images"
                ),
            })?;
        // debugfs reports a missing file on stderr and still exits 0: the file is the answer.
        let size = std::fs::metadata(out).map(|m| m.len()).unwrap_or(0);
        if size == 0 {
            let _ = std::fs::remove_file(out);
            let said = String::from_utf8_lossy(&result.stderr);
            let said = said
                .lines()
                .filter(|l| !l.starts_with("debugfs "))
                .collect::<Vec<_>>()
                .join("; ");
            return Err(ImageError::Contents {
                path: image.to_path_buf(),
                why: format!("the image has no {inside} ({})", said.trim()),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn superblock(blocks: u32, log_block: u32) -> Vec<u8> {
        let mut f = vec![0u8; 2048];
        let sb = &mut f[1024..];
        sb[4..8].copy_from_slice(&blocks.to_le_bytes());
        sb[24..28].copy_from_slice(&log_block.to_le_bytes());
        sb[56..58].copy_from_slice(&EXT_MAGIC.to_le_bytes());
        f
    }

    #[test]
    fn garbage_truncated_and_whole_images() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("img");

        std::fs::write(&p, vec![0x5a; 1 << 16]).unwrap();
        assert!(matches!(
            check_image(&p),
            Err(ImageError::NotAnImage { .. })
        ));

        std::fs::write(&p, b"QFI\xfb\0\0\0\x03").unwrap();
        let e = check_image(&p).unwrap_err().to_string();
        assert!(e.contains("qcow2"), "{e}");

        std::fs::write(&p, b"tiny").unwrap();
        assert!(matches!(
            check_image(&p),
            Err(ImageError::NotAnImage { .. })
        ));

        // 16 blocks of 4 KiB: 64 KiB promised, 2 KiB present.
        std::fs::write(&p, superblock(16, 2)).unwrap();
        match check_image(&p) {
            Err(ImageError::Truncated { have, need, .. }) => {
                assert_eq!((have, need), (2048, 65536));
            }
            other => panic!("{other:?}"),
        }

        let mut whole = superblock(16, 2);
        whole.resize(65536, 0);
        std::fs::write(&p, whole).unwrap();
        assert_eq!(check_image(&p).unwrap(), 65536);

        assert!(matches!(
            check_image(&dir.path().join("missing")),
            Err(ImageError::Unreadable { .. })
        ));
        assert!(matches!(
            check_image(dir.path()),
            Err(ImageError::NotAnImage { .. })
        ));
    }
}
