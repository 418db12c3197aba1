//! The end-of-central-directory record, read as Info-ZIP's unzip reads it before any member:
//! where the directory should start, which disk the archive claims to be, how many bytes
//! stand before the archive proper (a self-extractor's stub) or are missing, and the comment.

/// The end-of-central-directory record's signature.
const SIG: &[u8; 4] = b"PK\x05\x06";
/// The record's size without its comment.
const LEN: usize = 22;

/// What the last end-of-central-directory record of a file says.
#[derive(Debug, PartialEq, Eq, Clone)]
pub struct Record {
    /// Where the record starts.
    pub at: u64,
    pub this_disk: u16,
    pub cd_disk: u16,
    pub entries: u64,
    pub cd_size: u64,
    pub cd_offset: u64,
    /// The archive comment, up to its first NUL (unzip shows it as a C string).
    pub comment: Vec<u8>,
    /// A Zip64 archive keeps the real counts and offsets in records the zip crate reads.
    pub zip64: bool,
}

impl Record {
    /// Bytes before the archive proper (positive) or missing from it (negative).
    pub fn extra(&self) -> i64 {
        if self.zip64 {
            return 0;
        }
        self.at as i64 - (self.cd_offset + self.cd_size) as i64
    }

    /// Info-ZIP's test for an archive without members: a directory that is empty and would
    /// have started at offset 0.
    pub fn is_empty(&self) -> bool {
        !self.zip64 && self.cd_offset + self.cd_size == 0
    }
}

/// Reads the last end-of-central-directory record of `bytes` (its comment may follow it).
pub fn find(bytes: &[u8]) -> Option<Record> {
    let lowest = bytes.len().saturating_sub(LEN + u16::MAX as usize);
    let at = (lowest..=bytes.len().saturating_sub(LEN))
        .rev()
        .find(|&i| bytes[i..].starts_with(SIG))?;
    let u16_at = |o: usize| u16::from_le_bytes([bytes[at + o], bytes[at + o + 1]]);
    let u32_at = |o: usize| {
        u64::from(u32::from_le_bytes([
            bytes[at + o],
            bytes[at + o + 1],
            bytes[at + o + 2],
            bytes[at + o + 3],
        ]))
    };
    let entries = u64::from(u16_at(10));
    let (cd_size, cd_offset) = (u32_at(12), u32_at(16));
    let comment_start = at + LEN;
    let comment_end = (comment_start + usize::from(u16_at(20))).min(bytes.len());
    let comment = &bytes[comment_start..comment_end];
    let comment = &comment[..comment
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(comment.len())];
    Some(Record {
        at: at as u64,
        this_disk: u16_at(4),
        cd_disk: u16_at(6),
        entries,
        cd_size,
        cd_offset,
        comment: comment.to_vec(),
        zip64: entries == 0xFFFF || cd_offset == 0xFFFF_FFFF || cd_size == 0xFFFF_FFFF,
    })
}

/// Info-ZIP's paragraph for a file without the record.
pub const NOT_FOUND: &str =
    "  End-of-central-directory signature not found.  Either this file is not
  a zipfile, or it constitutes one disk of a multi-part archive.  In the
  latter case the central directory and zipfile comment will be found on
  the last disk(s) of this archive.";

#[cfg(test)]
mod tests {
    use super::*;

    fn empty_archive() -> Vec<u8> {
        let mut v = SIG.to_vec();
        v.extend_from_slice(&[0; 18]);
        v
    }

    #[test]
    fn records_are_found_and_read() {
        assert_eq!(find(b"hello\n"), None);
        assert_eq!(find(b""), None);
        let r = find(&empty_archive()).unwrap();
        assert!(r.is_empty());
        assert_eq!(r.extra(), 0);
        let mut prefixed = vec![b'X'; 95];
        prefixed.extend(empty_archive());
        let r = find(&prefixed).unwrap();
        assert!(r.is_empty());
        assert_eq!(r.extra(), 95);
        // A comment after the record; unzip stops it at a NUL.
        let mut commented = empty_archive();
        commented[20] = 4;
        commented.extend_from_slice(b"ab\0c");
        assert_eq!(find(&commented).unwrap().comment, b"ab");
        // A comment longer than what the file holds is cut at its end.
        let mut cut = empty_archive();
        cut[20] = 9;
        cut.extend_from_slice(b"xyz");
        assert_eq!(find(&cut).unwrap().comment, b"xyz");
        // One member whose directory (10 bytes at offset 0) ends where the record starts.
        let mut one = vec![0u8; 10];
        let mut rec = empty_archive();
        rec[10] = 1;
        rec[12] = 10;
        one.extend(rec);
        let r = find(&one).unwrap();
        assert!(!r.is_empty());
        assert_eq!((r.entries, r.extra()), (1, 0));
        // A directory said to end past the record: bytes are missing.
        let mut short = empty_archive();
        short[12] = 7;
        short[16] = 3;
        assert_eq!(find(&short).unwrap().extra(), -10);
    }
}
