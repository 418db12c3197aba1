use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::{Value, json};

/// Turns a byte stream into UTF-8 text chunk by chunk. A character split across two chunks is
/// held back until its last byte arrives; bytes that can never form a character become U+FFFD.
#[derive(Default)]
pub(crate) struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    pub fn push(&mut self, chunk: &[u8]) -> String {
        self.pending.extend_from_slice(chunk);
        let mut out = String::new();
        let mut rest: &[u8] = &self.pending;
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    out.push_str(s);
                    rest = &[];
                    break;
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    out.push_str(std::str::from_utf8(valid).expect("checked"));
                    match e.error_len() {
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            rest = &after[bad..];
                        }
                        // An incomplete character at the end: wait for the next chunk.
                        None => {
                            rest = after;
                            break;
                        }
                    }
                }
            }
        }
        self.pending = rest.to_vec();
        out
    }

    /// What is left when the stream ends: an unfinished character is replaced.
    pub fn finish(&mut self) -> String {
        let out = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        out
    }
}

/// What `RunOptions` takes to see output while a command runs.
pub(crate) type ChunkCallback = Arc<dyn Fn(&[u8]) + Send + Sync>;

/// Sends one stream of a running command as `output` notifications.
pub(crate) struct StreamSender {
    inner: Arc<SenderInner>,
}

struct SenderInner {
    request_id: Value,
    stream: &'static str,
    notify: crate::Notify,
    decoder: Mutex<Utf8Stream>,
}

impl SenderInner {
    fn send(&self, data: String) {
        if data.is_empty() {
            return;
        }
        (self.notify)(json!({
            "jsonrpc": "2.0",
            "method": "output",
            "params": {"requestId": self.request_id, "stream": self.stream, "data": data},
        }));
    }
}

impl StreamSender {
    pub fn new(request_id: Value, stream: &'static str, notify: crate::Notify) -> Self {
        Self {
            inner: Arc::new(SenderInner {
                request_id,
                stream,
                notify,
                decoder: Mutex::new(Utf8Stream::default()),
            }),
        }
    }

    pub fn callback(&self) -> ChunkCallback {
        let inner = self.inner.clone();
        Arc::new(move |chunk: &[u8]| {
            // The decoder lock is held while sending so chunks of one stream keep their order
            // even when pipeline stages write from several threads.
            let mut dec = inner.decoder.lock();
            let text = dec.push(chunk);
            inner.send(text);
        })
    }

    pub fn finish(&self) {
        let mut dec = self.inner.decoder.lock();
        let text = dec.finish();
        self.inner.send(text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_character_is_held_until_complete() {
        let mut s = Utf8Stream::default();
        let bytes = "é€".as_bytes();
        assert_eq!(s.push(&bytes[..1]), "");
        assert_eq!(s.push(&bytes[1..3]), "é");
        assert_eq!(s.push(&bytes[3..]), "€");
        assert_eq!(s.finish(), "");
    }

    #[test]
    fn invalid_bytes_become_replacement_characters() {
        let mut s = Utf8Stream::default();
        assert_eq!(s.push(b"a\xffb"), "a\u{fffd}b");
        assert_eq!(s.push(b"\xe2\x82"), "");
        assert_eq!(s.finish(), "\u{fffd}");
    }
}
