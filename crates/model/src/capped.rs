/// Holds at most `cap` bytes of a stream while a program runs. Bytes past the cap are counted
/// and dropped at once, so memory stays bounded however much a program writes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CappedBuffer {
    data: Vec<u8>,
    cap: usize,
    dropped: u64,
    /// Head + tail mode (see [`CappedBuffer::head_tail`]): once the stream passes the cap,
    /// `data` holds the head and this the last bytes written.
    tail: Option<Tail>,
    /// The whole stream, up to its own cap, for the spill file.
    spill: Option<Spill>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Tail {
    head_cap: usize,
    tail_cap: usize,
    bytes: std::collections::VecDeque<u8>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Spill {
    cap: usize,
    bytes: Vec<u8>,
}

/// Room kept in a head + tail rendering for the marker line, so head, marker and tail stay
/// within the cap.
pub const MARKER_ROOM: u64 = 160;
/// Below this cap a head + tail buffer truncates plainly: a head and a tail of a few bytes
/// each say less than one prefix.
pub const HEAD_TAIL_MIN_CAP: u64 = 2 * MARKER_ROOM;

/// Text decoded from a [`CappedBuffer`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LossyText {
    /// The kept bytes as UTF-8, each invalid sequence replaced by U+FFFD.
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
            tail: None,
            spill: None,
        }
    }

    /// A buffer that, once the stream passes `cap`, keeps its first and its last part: the
    /// rendering ([`Self::render`]) is the head, one marker line counting the bytes left out,
    /// and the tail, within `cap` bytes in all. Caps under [`HEAD_TAIL_MIN_CAP`] truncate
    /// plainly.
    pub fn head_tail(cap: u64) -> Self {
        let mut b = Self::new(cap);
        if cap >= HEAD_TAIL_MIN_CAP {
            let room = b.cap - MARKER_ROOM as usize;
            let head_cap = room / 2;
            b.tail = Some(Tail {
                head_cap,
                tail_cap: room - head_cap,
                bytes: Default::default(),
            });
        }
        b
    }

    /// Also keeps the whole stream, up to `spill_cap` bytes, for [`Self::spill_bytes`].
    pub fn with_spill(mut self, spill_cap: u64) -> Self {
        self.spill = Some(Spill {
            cap: usize::try_from(spill_cap).unwrap_or(usize::MAX),
            bytes: Vec::new(),
        });
        self
    }

    /// The stream as kept for the spill file (its first `spill_cap` bytes), when the buffer
    /// keeps one.
    pub fn spill_bytes(&self) -> Option<&[u8]> {
        self.spill.as_ref().map(|s| &s.bytes[..])
    }

    /// Whether the spill copy holds the whole stream.
    pub fn spill_complete(&self) -> bool {
        self.spill
            .as_ref()
            .is_some_and(|s| s.bytes.len() as u64 == self.total_written())
    }

    /// Stores what fits and drops the rest. Returns how many bytes were stored.
    /// In head + tail mode, "stored" means within the first `cap` bytes of the stream (what
    /// a streaming callback may see); later bytes may still reach the tail.
    pub fn write(&mut self, bytes: &[u8]) -> usize {
        if let Some(spill) = &mut self.spill {
            let n = (spill.cap - spill.bytes.len()).min(bytes.len());
            spill.bytes.extend_from_slice(&bytes[..n]);
        }
        let written_before = self.total_written();
        let room = self.cap.saturating_sub(self.data.len());
        let kept = if self.dropped > 0 {
            0
        } else {
            room.min(bytes.len())
        };
        let Some(tail) = &mut self.tail else {
            self.data.extend_from_slice(&bytes[..kept]);
            self.dropped += (bytes.len() - kept) as u64;
            return kept;
        };
        if self.dropped == 0 && kept == bytes.len() {
            self.data.extend_from_slice(bytes);
            return kept;
        }
        // The stream passes the cap now or did before: what lies past the head moves to
        // the tail, which keeps only its last `tail_cap` bytes.
        self.data.extend_from_slice(&bytes[..kept]);
        if self.data.len() > tail.head_cap {
            tail.bytes.extend(self.data.drain(tail.head_cap..));
        }
        tail.bytes.extend(&bytes[kept..]);
        let excess = tail.bytes.len().saturating_sub(tail.tail_cap);
        tail.bytes.drain(..excess);
        self.dropped =
            written_before + bytes.len() as u64 - self.data.len() as u64 - tail.bytes.len() as u64;
        kept
    }

    /// The bytes kept so far.
    pub fn as_bytes(&self) -> &[u8] {
        &self.data
    }

    /// The bytes kept so far, without copying (in head + tail mode: the head only).
    pub fn into_bytes(self) -> Vec<u8> {
        self.data
    }

    /// Bytes kept so far (never more than the cap).
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether nothing has been kept yet.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The most bytes this buffer keeps.
    pub fn cap(&self) -> u64 {
        self.cap as u64
    }

    /// Bytes written past the cap and dropped (in head + tail mode: left out between head and
    /// tail).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Everything the program wrote, kept or not.
    pub fn total_written(&self) -> u64 {
        self.data.len() as u64 + self.dropped + self.tail_len() as u64
    }

    fn tail_len(&self) -> usize {
        self.tail.as_ref().map_or(0, |t| t.bytes.len())
    }

    /// Whether any byte was dropped.
    pub fn truncated(&self) -> bool {
        self.dropped > 0
    }

    /// Whether another write would be dropped entirely.
    pub fn is_full(&self) -> bool {
        self.data.len() >= self.cap
    }

    /// Forgets everything, keeping the cap and the mode.
    pub fn clear(&mut self) {
        self.data.clear();
        self.dropped = 0;
        if let Some(t) = &mut self.tail {
            t.bytes.clear();
        }
        if let Some(s) = &mut self.spill {
            s.bytes.clear();
        }
    }

    /// An empty buffer with the same cap and mode.
    pub fn emptied(&self) -> Self {
        let mut b = self.clone_shape();
        b.clear();
        b
    }

    fn clone_shape(&self) -> Self {
        Self {
            data: Vec::new(),
            cap: self.cap,
            dropped: 0,
            tail: self.tail.as_ref().map(|t| Tail {
                head_cap: t.head_cap,
                tail_cap: t.tail_cap,
                bytes: Default::default(),
            }),
            spill: self.spill.as_ref().map(|s| Spill {
                cap: s.cap,
                bytes: Vec::new(),
            }),
        }
    }

    /// The text a result shows: [`Self::to_text`] in plain mode; in head + tail mode past the
    /// cap, the head (cut after its last complete character), one marker line saying how many
    /// bytes were left out (and, given `spilled_to`, where the whole stream is), and the tail
    /// (from its first complete character).
    pub fn render(&self, spilled_to: Option<&str>) -> LossyText {
        let Some(tail) = &self.tail else {
            return self.plain_text();
        };
        if self.dropped == 0 && tail.bytes.is_empty() {
            return self.plain_text();
        }
        let head = &self.data[..complete_prefix_len(&self.data)];
        let (a, b) = tail.bytes.as_slices();
        let tail_bytes = [a, b].concat();
        let skip = tail_bytes
            .iter()
            .take(3)
            .take_while(|&&c| c & 0b1100_0000 == 0b1000_0000)
            .count();
        let tail_bytes = &tail_bytes[skip..];
        let left_out = self.total_written() - head.len() as u64 - tail_bytes.len() as u64;
        let mut h = decode_lossy(head);
        let t = decode_lossy(tail_bytes);
        if !h.text.is_empty() && !h.text.ends_with('\n') {
            h.text.push('\n');
        }
        let marker = match spilled_to {
            Some(path) => {
                format!("[... {left_out} bytes left out; the whole stream is in {path} ...]\n")
            }
            None => format!("[... {left_out} bytes left out ...]\n"),
        };
        h.text.push_str(&marker);
        h.text.push_str(&t.text);
        LossyText {
            text: h.text,
            replaced: h.replaced + t.replaced,
        }
    }

    /// Decodes the kept bytes as UTF-8. When the cap cut a multi-byte character in half, the
    /// partial character is left out (it is an artefact of the cut, not bad output); any other
    /// invalid sequence becomes U+FFFD and is counted in [`LossyText::replaced`].
    /// In head + tail mode this is [`Self::render`] without a spill path.
    pub fn to_text(&self) -> LossyText {
        self.render(None)
    }

    fn plain_text(&self) -> LossyText {
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

    #[test]
    fn head_tail_keeps_both_ends_and_counts_the_middle() {
        let mut b = CappedBuffer::head_tail(1000).with_spill(1 << 20);
        let lines: String = (1..=10_000).map(|i| format!("line {i}\n")).collect();
        for chunk in lines.as_bytes().chunks(777) {
            b.write(chunk);
        }
        assert!(b.truncated());
        assert_eq!(b.total_written(), lines.len() as u64);
        let t = b.render(Some("/tmp/x.stdout"));
        assert!(t.text.len() <= 1000, "{}", t.text.len());
        assert!(t.text.starts_with("line 1\nline 2\n"));
        assert!(t.text.ends_with("line 9999\nline 10000\n"));
        let marker = t.text.lines().find(|l| l.starts_with("[... ")).unwrap();
        let left_out: u64 = marker[5..].split(' ').next().unwrap().parse().unwrap();
        // Head + marker + tail: every byte of the stream is either shown or counted (the head
        // was cut inside a line here, so a newline was added before the marker).
        assert_eq!(
            t.text.len() as u64 - marker.len() as u64 - 2 + left_out,
            lines.len() as u64
        );
        assert!(marker.ends_with("the whole stream is in /tmp/x.stdout ...]"));
        assert_eq!(b.spill_bytes().unwrap(), lines.as_bytes());
        assert!(b.spill_complete());
    }

    #[test]
    fn head_tail_within_the_cap_is_untouched() {
        let mut b = CappedBuffer::head_tail(1000);
        b.write(&[b'a'; 1000]);
        assert!(!b.truncated());
        assert_eq!(b.render(None).text, "a".repeat(1000));
        b.write(b"b");
        assert!(b.truncated());
        let t = b.to_text().text;
        assert!(t.ends_with("ab"), "{t}");
        assert!(t.contains("bytes left out"));
    }

    #[test]
    fn small_caps_truncate_plainly_and_spill_stops_at_its_cap() {
        let mut b = CappedBuffer::head_tail(10).with_spill(4);
        b.write(b"hello world");
        assert_eq!(b.to_text().text, "hello worl");
        assert_eq!(b.spill_bytes().unwrap(), b"hell");
        assert!(!b.spill_complete());
        let e = b.emptied();
        assert_eq!((e.cap(), e.spill_bytes().unwrap().len()), (10, 0));
    }

    proptest! {
        #[test]
        fn head_tail_is_a_prefix_a_marker_and_a_suffix(
            s in "[a-z\n\u{e9}\u{20ac}]{0,1500}", cap in 0u64..700, chunk in 1usize..2000
        ) {
            let bytes = s.as_bytes();
            let mut b = CappedBuffer::head_tail(cap).with_spill(u64::MAX);
            for c in bytes.chunks(chunk) {
                b.write(c);
            }
            prop_assert_eq!(b.total_written(), bytes.len() as u64);
            prop_assert_eq!(b.spill_bytes().unwrap(), bytes);
            prop_assert_eq!(b.truncated(), bytes.len() as u64 > cap);
            let t = b.render(None).text;
            prop_assert!(t.len() as u64 <= cap);
            if !b.truncated() {
                prop_assert_eq!(&t, &s);
            } else if cap >= HEAD_TAIL_MIN_CAP {
                let start = t.find("[... ").unwrap();
                let end = start + t[start..].find(" ...]\n").unwrap() + 6;
                let left_out: usize = t[start + 5..].split(' ').next().unwrap().parse().unwrap();
                let head = &t[..start];
                let tail = &t[end..];
                prop_assert!(s.ends_with(tail));
                // The head may have gained a newline before the marker.
                let fits = |h: &str| s.starts_with(h) && h.len() + left_out + tail.len() == s.len();
                prop_assert!(fits(head) || (head.ends_with('\n') && fits(&head[..head.len() - 1])));
            }
        }

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
