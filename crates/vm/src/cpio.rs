//! The `newc` cpio format, the one the kernel unpacks as an initramfs: enough of it to write
//! directories, regular files and symlinks (no device nodes: the initramfs mounts devtmpfs).

use std::io::{self, Write};

pub(crate) struct Writer<W: Write> {
    out: W,
    ino: u32,
}

impl<W: Write> Writer<W> {
    pub(crate) fn new(out: W) -> Writer<W> {
        Writer { out, ino: 1 }
    }

    fn entry(&mut self, name: &str, mode: u32, data: &[u8]) -> io::Result<()> {
        let size = u32::try_from(data.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file over 4 GiB"))?;
        let namesize = name.len() + 1;
        let header = format!(
            "070701{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}",
            self.ino,
            mode,
            0, // uid
            0, // gid
            if mode & 0o170000 == 0o040000 { 2 } else { 1 },
            0, // mtime: fixed, so that one recipe gives one initramfs
            size,
            0,
            0,
            0,
            0,
            namesize,
            0, // check
        );
        self.ino += 1;
        self.out.write_all(header.as_bytes())?;
        self.out.write_all(name.as_bytes())?;
        self.out.write_all(&[0])?;
        self.pad(header.len() + namesize)?;
        self.out.write_all(data)?;
        self.pad(data.len())
    }

    fn pad(&mut self, len: usize) -> io::Result<()> {
        let n = (4 - len % 4) % 4;
        self.out.write_all(&[0u8; 3][..n])
    }

    pub(crate) fn dir(&mut self, name: &str) -> io::Result<()> {
        self.entry(name, 0o040755, &[])
    }

    pub(crate) fn file(&mut self, name: &str, mode: u32, data: &[u8]) -> io::Result<()> {
        self.entry(name, 0o100000 | (mode & 0o7777), data)
    }

    pub(crate) fn finish(mut self) -> io::Result<W> {
        self.entry("TRAILER!!!", 0, &[])?;
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_aligned_and_end_with_a_trailer() {
        let mut w = Writer::new(Vec::new());
        w.dir("bin").unwrap();
        w.file("init", 0o755, b"#!/bin/sh\n").unwrap();
        let out = w.finish().unwrap();
        // Header (110) + "bin\0" (4) = 114, padded to 116.
        assert_eq!(&out[..6], b"070701");
        assert_eq!(&out[110..114], b"bin\0");
        assert_eq!(&out[116..122], b"070701");
        // The file's mode and size fields.
        assert_eq!(&out[116 + 14..116 + 22], b"000081ED");
        assert_eq!(&out[116 + 54..116 + 62], b"0000000A");
        let tail = String::from_utf8_lossy(&out[out.len() - 16..]).into_owned();
        assert!(tail.contains("TRAILER!!!"), "{tail:?}");
        assert_eq!(out.len() % 4, 0);
    }
}
