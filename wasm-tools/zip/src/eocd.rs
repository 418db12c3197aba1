//! What Info-ZIP's unzip checks at the end of an archive before it reads any member, with its
//! words: a file with no end-of-central-directory record, an archive with no members, and
//! bytes before the archive (a self-extractor's stub, a prefix) that shift every offset.

/// The end-of-central-directory record's signature.
const SIG: &[u8; 4] = b"PK\x05\x06";
/// The record's size without its comment.
const LEN: usize = 22;

/// What the end of an archive says.
#[derive(Debug, PartialEq, Eq)]
pub enum Survey {
    /// No end-of-central-directory record: not a zip file, or one disk of several.
    NotFound,
    /// The record says there are no members.
    Empty { extra: u64 },
    /// Members to read; `extra` bytes stand before the archive proper.
    Members { extra: u64 },
}

/// Reads the last end-of-central-directory record of `bytes` (its comment may follow it).
pub fn survey(bytes: &[u8]) -> Survey {
    let lowest = bytes.len().saturating_sub(LEN + u16::MAX as usize);
    let Some(at) = (lowest..=bytes.len().saturating_sub(LEN))
        .rev()
        .find(|&i| bytes[i..].starts_with(SIG))
    else {
        return Survey::NotFound;
    };
    let u16_at = |o: usize| u64::from(u16::from_le_bytes([bytes[at + o], bytes[at + o + 1]]));
    let u32_at = |o: usize| {
        u64::from(u32::from_le_bytes([
            bytes[at + o],
            bytes[at + o + 1],
            bytes[at + o + 2],
            bytes[at + o + 3],
        ]))
    };
    let (entries, cd_size, cd_offset) = (u16_at(10), u32_at(12), u32_at(16));
    // A Zip64 archive keeps the real values in its own records; the zip crate reads them.
    if entries == 0xFFFF || cd_offset == 0xFFFF_FFFF || cd_size == 0xFFFF_FFFF {
        return Survey::Members { extra: 0 };
    }
    let extra = (at as u64)
        .saturating_sub(cd_size)
        .saturating_sub(cd_offset);
    if entries == 0 && cd_size == 0 {
        Survey::Empty { extra }
    } else {
        Survey::Members { extra }
    }
}

/// Info-ZIP's paragraph for a file without the record.
pub const NOT_FOUND: &str =
    "  End-of-central-directory signature not found.  Either this file is not
  a zipfile, or it constitutes one disk of a multi-part archive.  In the
  latter case the central directory and zipfile comment will be found on
  the last disk(s) of this archive.";

/// The warning for bytes before the archive.
pub fn extra_warning(path: &str, extra: u64) -> String {
    format!(
        "warning [{path}]:  {extra} extra bytes at beginning or within zipfile\n  (attempting to process anyway)"
    )
}

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
        assert_eq!(survey(b"hello\n"), Survey::NotFound);
        assert_eq!(survey(b""), Survey::NotFound);
        assert_eq!(survey(&empty_archive()), Survey::Empty { extra: 0 });
        let mut prefixed = vec![b'X'; 95];
        prefixed.extend(empty_archive());
        assert_eq!(survey(&prefixed), Survey::Empty { extra: 95 });
        // A comment after the record.
        let mut commented = empty_archive();
        commented[20] = 3;
        commented.extend_from_slice(b"abc");
        assert_eq!(survey(&commented), Survey::Empty { extra: 0 });
        // One member whose directory (10 bytes at offset 0) ends where the record starts.
        let mut one = vec![0u8; 10];
        let mut rec = empty_archive();
        rec[10] = 1;
        rec[12] = 10;
        one.extend(rec);
        assert_eq!(survey(&one), Survey::Members { extra: 0 });
    }
}
