/// Holds at most `cap` bytes of a stream while a program runs. Bytes past the cap are counted
/// and dropped at once, so memory stays bounded however much a program writes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CappedBuffer {
    data: Vec<u8>,
    cap: usize,
    dropped: u64,
}

/// Text decoded from a [`CappedBuffer`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LossyText {
    pub text: String,
    /// How many invalid UTF-8 sequences were replaced by U+FFFD. Zero means the text is
    /// exactly the bytes that were kept.
    pub replaced: usize,
}

impl CappedBuffer {
    /// A buffer that keeps at most `cap` bytes. The capacity is not reserved up front: a
    /// 1 MiB cap costs nothing for a program that prints one line.
    pub fn new(cap: u64) -> Self {
        Self {
            data: Vec::new(),
            cap: usize::try_from(cap).unwrap_or(usize::MAX),
            dropped: 0,
        }
    }

    /// Stores what fits and drops the rest. Returns how many bytes were stored.
    pub fn write(&mut self, bytes: &[u8]) -> usize {
        let room = self.cap - self.data.len();
        let kept = room.min(bytes.len());
        self.data.extend_from_slice(&bytes[..kept]);
        self.dropped += (bytes.len() - kept) as u64;
        kept
    }

    /// The bytes kept so far.
    pub fn as_bytes(&self) -> &[u8] {
        &self.data
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.data
    }

    pub fn len(&self) -> usize {
        self.data.len()
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    pub fn cap(&self) -> u64 {
        self.cap as u64
    }

    /// Bytes written past the cap and dropped.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Everything the program wrote, kept or not.
    pub fn total_written(&self) -> u64 {
        self.data.len() as u64 + self.dropped
    }

    /// Whether any byte was dropped.
    pub fn truncated(&self) -> bool {
        self.dropped > 0
    }

    /// Whether another write would be dropped entirely.
    pub fn is_full(&self) -> bool {
        self.data.len() >= self.cap
    }

    /// Forgets everything, keeping the cap.
    pub fn clear(&mut self) {
        self.data.clear();
        self.dropped = 0;
    }

    /// Decodes the kept bytes as UTF-8. When the cap cut a multi-byte character in half, the
    /// partial character is left out (it is an artefact of the cut, not bad output); any other
    /// invalid sequence becomes U+FFFD and is counted in [`LossyText::replaced`].
    pub fn to_text(&self) -> LossyText {
        let mut bytes = &self.data[..];
        if self.truncated() {
            bytes = &bytes[..complete_prefix_len(bytes)];
        }
        decode_lossy(bytes)
    }
}

/// Length of `bytes` without a trailing, incomplete (but so far valid) UTF-8 sequence.
fn complete_prefix_len(bytes: &[u8]) -> usize {
    // A UTF-8 character is at most 4 bytes, so only the last 3 can start an incomplete one.
    let tail = bytes.len().saturating_sub(3);
    for start in (tail..bytes.len()).rev() {
        if bytes[start] & 0b1100_0000 != 0b1000_0000 {
            return match std::str::from_utf8(&bytes[start..]) {
                // `error_len() == None` means "valid so far, input ended early".
                Err(e) if e.valid_up_to() == 0 && e.error_len().is_none() => start,
                _ => bytes.len(),
            };
        }
    }
    bytes.len()
}

fn decode_lossy(mut bytes: &[u8]) -> LossyText {
    let mut text = String::with_capacity(bytes.len());
    let mut replaced = 0;
    loop {
        match std::str::from_utf8(bytes) {
            Ok(s) => {
                text.push_str(s);
                return LossyText { text, replaced };
            }
            Err(e) => {
                let (valid, rest) = bytes.split_at(e.valid_up_to());
                text.push_str(std::str::from_utf8(valid).unwrap_or_default());
                text.push(char::REPLACEMENT_CHARACTER);
                replaced += 1;
                let skip = e.error_len().unwrap_or(rest.len());
                bytes = &rest[skip..];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn keeps_up_to_cap_and_counts_the_rest() {
        let mut b = CappedBuffer::new(10);
        assert_eq!(b.write(b"0123456"), 7);
        assert!(!b.truncated());
        assert_eq!(b.write(b"789abc"), 3);
        assert_eq!(b.as_bytes(), b"0123456789");
        assert!(b.truncated());
        assert_eq!(b.dropped(), 3);
        assert_eq!(b.total_written(), 13);
        assert_eq!(b.write(b"more"), 0);
        assert_eq!(b.dropped(), 7);
        assert!(b.is_full());
    }

    #[test]
    fn gigabytes_in_do_not_grow_memory() {
        let mut b = CappedBuffer::new(1024);
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..1024 {
            b.write(&chunk);
        }
        assert_eq!(b.len(), 1024);
        assert_eq!(b.total_written(), 1 << 30);
        assert!(b.data.capacity() < 4096);
    }

    #[test]
    fn zero_cap_keeps_nothing() {
        let mut b = CappedBuffer::new(0);
        b.write(b"x");
        assert!(b.is_empty());
        assert!(b.truncated());
        assert_eq!(b.to_text().text, "");
    }

    #[test]
    fn cut_inside_a_character_leaves_it_out() {
        // "é" is two bytes; a cap of 2 after "a" splits it.
        let mut b = CappedBuffer::new(2);
        b.write("aé".as_bytes());
        assert_eq!(b.as_bytes().len(), 2);
        let t = b.to_text();
        assert_eq!(t.text, "a");
        assert_eq!(t.replaced, 0);

        let mut b = CappedBuffer::new(3);
        b.write("x€".as_bytes()); // € is 3 bytes
        assert_eq!(b.to_text().text, "x");
        let mut b = CappedBuffer::new(4);
        b.write("x🎉".as_bytes()); // 🎉 is 4 bytes
        assert_eq!(b.to_text().text, "x");
    }

    #[test]
    fn invalid_bytes_are_replaced_and_counted() {
        let mut b = CappedBuffer::new(100);
        b.write(b"ok\xffthen\xc3");
        let t = b.to_text();
        assert_eq!(t.text, "ok\u{FFFD}then\u{FFFD}");
        assert_eq!(t.replaced, 2);
    }

    #[test]
    fn untruncated_incomplete_tail_is_reported_not_hidden() {
        let mut b = CappedBuffer::new(100);
        b.write(b"a\xc3");
        assert_eq!(b.to_text().replaced, 1);
    }

    #[test]
    fn clear_keeps_the_cap() {
        let mut b = CappedBuffer::new(3);
        b.write(b"abcdef");
        b.clear();
        assert!(!b.truncated());
        b.write(b"xyzw");
        assert_eq!(b.as_bytes(), b"xyz");
    }

    proptest! {
        #[test]
        fn text_never_exceeds_cap_and_is_a_prefix(
            s in "\\PC{0,40}", cap in 0u64..64, split in 0usize..40
        ) {
            let bytes = s.as_bytes();
            let mut b = CappedBuffer::new(cap);
            let split = split.min(bytes.len());
            b.write(&bytes[..split]);
            b.write(&bytes[split..]);
            let t = b.to_text();
            prop_assert!(t.text.len() as u64 <= cap);
            prop_assert!(s.starts_with(&t.text));
            prop_assert_eq!(t.replaced, 0);
            prop_assert_eq!(b.truncated(), bytes.len() as u64 > cap);
            // Only a partial trailing character may be left out.
            prop_assert!(b.len() - t.text.len() < 4);
        }
    }
}
