//! A run's WebSocket frames: numbered from 1, kept in a bounded ring for late and
//! reconnecting clients, announced through a watch channel. Producers (the run's output
//! callbacks, on the guest's thread) never wait for consumers: a client that falls behind
//! the ring loses the oldest frames and is told so with a `resume` event.

use std::collections::VecDeque;
use std::sync::Arc;

use base64::Engine;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::util::{iso, now_ms};

/// Largest WebSocket message the service sends.
pub const MAX_FRAME_BYTES: usize = 64 * 1024;
/// Room for the envelope around `data` (type, encoding, a 20-digit seq).
const ENVELOPE_BYTES: usize = 128;
const DATA_BUDGET: usize = MAX_FRAME_BYTES - ENVELOPE_BYTES;

/// Length of the text of an `event` frame with `data`, counting the longest seq.
fn event_frame_len(event: &str, data: &Value) -> usize {
    json!({ "type": "event", "event": event, "data": data, "seq": u64::MAX })
        .to_string()
        .len()
}

/// The `start` event's data: the run, when its command started, and the command's argv.
/// An argv that would take the frame past [`MAX_FRAME_BYTES`] (one within the command cap
/// can, once JSON escapes its quotes and control characters) is cut: whole words while
/// they fit, then the first that does not, cut on a character boundary and ending in `…`;
/// `command_truncated: true` and `command_bytes` (the whole argv's bytes) then say so.
pub fn start_event_data(run_id: &str, started_at: &str, argv: &[String]) -> Value {
    let whole = json!({ "run_id": run_id, "started_at": started_at, "command": argv });
    if event_frame_len("start", &whole) <= MAX_FRAME_BYTES {
        return whole;
    }
    let total: usize = argv.iter().map(String::len).sum();
    let mut data = json!({
        "run_id": run_id,
        "started_at": started_at,
        "command": [],
        "command_truncated": true,
        "command_bytes": total,
    });
    let mut room = MAX_FRAME_BYTES.saturating_sub(event_frame_len("start", &data));
    let mut kept: Vec<String> = Vec::new();
    for word in argv {
        // Its quotes, and the comma before every word but the first.
        let frame = 2 + usize::from(!kept.is_empty());
        let escaped: usize = word.chars().map(escaped_len).sum();
        if frame + escaped <= room {
            room -= frame + escaped;
            kept.push(word.clone());
            continue;
        }
        let marker = '…'.len_utf8();
        if frame + marker <= room {
            let mut budget = room - frame - marker;
            let mut end = 0;
            for (i, c) in word.char_indices() {
                let n = escaped_len(c);
                if n > budget {
                    break;
                }
                budget -= n;
                end = i + c.len_utf8();
            }
            kept.push(format!("{}…", &word[..end]));
        }
        break;
    }
    data["command"] = json!(kept);
    data
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    fn name(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
    fn index(self) -> usize {
        match self {
            Stream::Stdout => 0,
            Stream::Stderr => 1,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Frame {
    pub seq: u64,
    pub text: Arc<str>,
}

struct Inner {
    frames: VecDeque<Frame>,
    ring_bytes: usize,
    ring_cap: usize,
    next_seq: u64,
    ended: bool,
    log_bytes: u64,
    log_cap: u64,
    truncated: bool,
    /// An incomplete UTF-8 sequence at the end of the last chunk of each stream.
    carry: [Vec<u8>; 2],
    /// Frames evicted from the ring.
    evicted: u64,
    /// Set by `seal`: output and heartbeats are dropped until `end_with_phase`.
    sealed: bool,
}

pub struct RunLog {
    inner: Mutex<Inner>,
    latest: watch::Sender<u64>,
}

/// What a reader gets: the retained frames from its cursor on.
pub struct Slice {
    pub frames: Vec<Frame>,
    /// Seq of the oldest frame still retained (or the next one, when none is).
    pub first_retained: u64,
    pub ended: bool,
    /// Seq of the newest frame so far (0 before any).
    pub last_seq: u64,
}

fn escaped_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if (c as u32) < 0x20 => 6,
        c => c.len_utf8(),
    }
}

impl RunLog {
    /// Bytes of the frames it holds (what keeping it in memory costs).
    pub fn retained_bytes(&self) -> usize {
        self.inner.lock().ring_bytes
    }

    pub fn new(ring_cap: usize, log_cap: u64) -> Arc<RunLog> {
        Self::starting_at(ring_cap, log_cap, 1)
    }

    /// A log whose next frame is `next_seq` (a finished run rebuilt from the store).
    pub fn starting_at(ring_cap: usize, log_cap: u64, next_seq: u64) -> Arc<RunLog> {
        let (latest, _) = watch::channel(next_seq.saturating_sub(1));
        Arc::new(RunLog {
            inner: Mutex::new(Inner {
                frames: VecDeque::new(),
                ring_bytes: 0,
                ring_cap,
                next_seq,
                ended: false,
                log_bytes: 0,
                log_cap,
                truncated: false,
                carry: [Vec::new(), Vec::new()],
                evicted: 0,
                sealed: false,
            }),
            latest,
        })
    }

    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.latest.subscribe()
    }

    fn push(&self, g: &mut Inner, mut body: serde_json::Map<String, Value>) {
        if g.ended {
            return;
        }
        let seq = g.next_seq;
        g.next_seq += 1;
        body.insert("seq".into(), json!(seq));
        let text: Arc<str> = Value::Object(body).to_string().into();
        g.ring_bytes += text.len();
        g.frames.push_back(Frame { seq, text });
        while g.ring_bytes > g.ring_cap && g.frames.len() > 1 {
            if let Some(f) = g.frames.pop_front() {
                g.ring_bytes -= f.text.len();
                g.evicted += 1;
            }
        }
        self.latest.send_replace(seq);
    }

    pub fn event(&self, event: &str, data: Value) {
        let mut g = self.inner.lock();
        if !g.sealed {
            self.push_event(&mut g, event, data);
        }
    }

    fn push_event(&self, g: &mut Inner, event: &str, data: Value) {
        let mut m = serde_json::Map::new();
        m.insert("type".into(), json!("event"));
        m.insert("event".into(), json!(event));
        m.insert("data".into(), data);
        self.push(g, m);
    }

    pub fn heartbeat(&self) {
        let mut g = self.inner.lock();
        if g.sealed {
            return;
        }
        let mut m = serde_json::Map::new();
        m.insert("type".into(), json!("heartbeat"));
        m.insert("ts".into(), json!(iso(now_ms())));
        self.push(&mut g, m);
    }

    fn data_frame(&self, g: &mut Inner, stream: Stream, encoding: &str, data: String) {
        let mut m = serde_json::Map::new();
        m.insert("type".into(), json!(stream.name()));
        m.insert("encoding".into(), json!(encoding));
        m.insert("data".into(), json!(data));
        self.push(g, m);
    }

    fn text_frames(&self, g: &mut Inner, stream: Stream, text: &str) {
        let mut start = 0;
        let mut size = 0;
        for (i, c) in text.char_indices() {
            let n = escaped_len(c);
            if size + n > DATA_BUDGET {
                self.data_frame(g, stream, "utf8", text[start..i].to_string());
                start = i;
                size = 0;
            }
            size += n;
        }
        if start < text.len() {
            self.data_frame(g, stream, "utf8", text[start..].to_string());
        }
    }

    fn binary_frames(&self, g: &mut Inner, stream: Stream, bytes: &[u8]) {
        let b64 = base64::engine::general_purpose::STANDARD;
        for chunk in bytes.chunks(DATA_BUDGET / 4 * 3) {
            self.data_frame(g, stream, "base64", b64.encode(chunk));
        }
    }

    /// Output of the run. Valid UTF-8 goes as `utf8` frames (a character split between two
    /// writes is held back until its end arrives); a write with invalid UTF-8 goes whole as
    /// `base64`. Past the log cap one `truncated` frame is sent and the rest is dropped.
    pub fn output(&self, stream: Stream, bytes: &[u8]) {
        let mut g = self.inner.lock();
        if g.ended || g.truncated || g.sealed {
            return;
        }
        let room = g.log_cap.saturating_sub(g.log_bytes);
        let take = (bytes.len() as u64).min(room) as usize;
        g.log_bytes += take as u64;
        let mut buf = std::mem::take(&mut g.carry[stream.index()]);
        buf.extend_from_slice(&bytes[..take]);
        match std::str::from_utf8(&buf) {
            Ok(text) => self.text_frames(&mut g, stream, text),
            Err(e) if e.error_len().is_none() => {
                let (ok, tail) = buf.split_at(e.valid_up_to());
                // Only valid UTF-8 reached this arm.
                let text = std::str::from_utf8(ok).unwrap_or_default();
                self.text_frames(&mut g, stream, text);
                g.carry[stream.index()] = tail.to_vec();
            }
            Err(_) => self.binary_frames(&mut g, stream, &buf),
        }
        if take < bytes.len() {
            g.truncated = true;
            g.carry = [Vec::new(), Vec::new()];
            let mut m = serde_json::Map::new();
            m.insert("type".into(), json!("truncated"));
            m.insert("reason".into(), json!("log_cap"));
            self.push(&mut g, m);
        }
    }

    /// Sends what is held back (an incomplete character at the very end) as `base64`.
    pub fn flush(&self) {
        let mut g = self.inner.lock();
        for stream in [Stream::Stdout, Stream::Stderr] {
            let rest = std::mem::take(&mut g.carry[stream.index()]);
            if !rest.is_empty() {
                self.binary_frames(&mut g, stream, &rest);
            }
        }
    }

    /// The last frame: `event: end`. Later pushes are ignored. Returns its seq.
    pub fn end(&self, data: Value) -> u64 {
        self.flush();
        let mut g = self.inner.lock();
        self.push_end(&mut g, data)
    }

    /// Takes no more output or heartbeats and returns the seq the end frame of
    /// `end_with_phase` will have. A run's final record is stored with that seq before any
    /// reader can see the run end, so that a client who saw it end finds the store agreeing
    /// (its quota place given back, another replica answering the same).
    pub fn seal(&self) -> u64 {
        self.flush();
        let mut g = self.inner.lock();
        g.sealed = true;
        if g.ended {
            g.next_seq - 1
        } else {
            g.next_seq + 1
        }
    }

    /// The last two frames of a run: its final `phase` event, then `end`. Returns the end
    /// frame's seq, which `seal` announced when it came first.
    pub fn end_with_phase(&self, phase: Value, end: Value) -> u64 {
        self.flush();
        let mut g = self.inner.lock();
        if !g.ended {
            self.push_event(&mut g, "phase", phase);
        }
        self.push_end(&mut g, end)
    }

    fn push_end(&self, g: &mut Inner, data: Value) -> u64 {
        if g.ended {
            return g.next_seq - 1;
        }
        let mut m = serde_json::Map::new();
        m.insert("type".into(), json!("event"));
        m.insert("event".into(), json!("end"));
        m.insert("data".into(), data);
        self.push(g, m);
        g.ended = true;
        let seq = g.next_seq - 1;
        // Wake readers even if they had seen this seq (they now see `ended`).
        self.latest.send_replace(seq);
        seq
    }

    pub fn read_from(&self, from: u64) -> Slice {
        let g = self.inner.lock();
        let first_retained = g.frames.front().map_or(g.next_seq, |f| f.seq);
        let frames = g
            .frames
            .iter()
            .skip_while(|f| f.seq < from)
            .cloned()
            .collect();
        Slice {
            frames,
            first_retained,
            ended: g.ended,
            last_seq: g.next_seq - 1,
        }
    }

    pub fn log_bytes(&self) -> u64 {
        self.inner.lock().log_bytes
    }

    pub fn truncated(&self) -> bool {
        self.inner.lock().truncated
    }

    pub fn ended(&self) -> bool {
        self.inner.lock().ended
    }

    pub fn evicted(&self) -> u64 {
        self.inner.lock().evicted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(f: &Frame) -> Value {
        serde_json::from_str(&f.text).unwrap()
    }

    #[test]
    fn frames_are_numbered_and_split_under_64k_on_char_boundaries() {
        let log = RunLog::new(usize::MAX, u64::MAX);
        let text = "é\"\n".repeat(40_000);
        log.output(Stream::Stdout, text.as_bytes());
        let s = log.read_from(1);
        assert!(s.frames.len() > 2);
        let mut joined = String::new();
        for (i, f) in s.frames.iter().enumerate() {
            assert!(f.text.len() <= MAX_FRAME_BYTES, "{}", f.text.len());
            assert_eq!(f.seq, i as u64 + 1);
            let v = parse(f);
            assert_eq!(v["encoding"], "utf8");
            joined.push_str(v["data"].as_str().unwrap());
        }
        assert_eq!(joined, text);
    }

    #[test]
    fn split_characters_are_joined_and_binary_is_base64() {
        let log = RunLog::new(usize::MAX, u64::MAX);
        let e = "é".as_bytes();
        log.output(Stream::Stdout, &e[..1]);
        log.output(Stream::Stdout, &e[1..]);
        log.output(Stream::Stderr, &[0xff, 0x00, b'a']);
        log.output(Stream::Stdout, &e[..1]);
        log.end(json!({}));
        let s = log.read_from(1);
        let v: Vec<Value> = s.frames.iter().map(parse).collect();
        assert_eq!(v[0]["data"], "é");
        assert_eq!(v[1]["type"], "stderr");
        assert_eq!(v[1]["encoding"], "base64");
        assert_eq!(v[1]["data"], "/wBh");
        assert_eq!(v[2]["encoding"], "base64");
        assert_eq!(v[2]["data"], "ww==");
        assert_eq!(v[3]["event"], "end");
        assert!(s.ended);
    }

    #[test]
    fn a_sealed_log_announces_its_end_seq_and_takes_nothing_else_before_it() {
        let log = RunLog::new(usize::MAX, u64::MAX);
        log.output(Stream::Stdout, b"out");
        // A character cut at the end is flushed by the seal, before the seq is counted.
        log.output(Stream::Stdout, &"é".as_bytes()[..1]);
        let end = log.seal();
        log.output(Stream::Stdout, b"late");
        log.heartbeat();
        log.event("phase", json!({"phase": "running"}));
        assert_eq!(log.read_from(1).frames.len(), 2);
        assert!(!log.ended());
        assert_eq!(
            log.end_with_phase(json!({"phase": "completed"}), json!({"exit_code": 0})),
            end
        );
        let v: Vec<Value> = log.read_from(1).frames.iter().map(parse).collect();
        assert_eq!(v.len(), 4);
        assert_eq!(v[2]["data"], json!({"phase": "completed"}));
        assert_eq!(v[3]["event"], "end");
        assert_eq!(v[3]["seq"], end);
        assert_eq!((log.seal(), log.end(json!({}))), (end, end));
    }

    #[test]
    fn log_cap_sends_one_truncated_frame() {
        let log = RunLog::new(usize::MAX, 10);
        log.output(Stream::Stdout, b"12345678");
        log.output(Stream::Stdout, b"abcdef");
        log.output(Stream::Stdout, b"more");
        let v: Vec<Value> = log.read_from(1).frames.iter().map(parse).collect();
        assert_eq!(v.len(), 3);
        assert_eq!(v[1]["data"], "ab");
        assert_eq!(
            v[2],
            json!({"type": "truncated", "reason": "log_cap", "seq": 3})
        );
        assert_eq!(log.log_bytes(), 10);
    }

    #[test]
    fn the_start_event_fits_a_frame_whatever_the_argv() {
        let short = vec!["echo".to_string(), "hi".to_string()];
        let d = start_event_data("r", "t", &short);
        assert_eq!(d["command"], json!(short));
        assert!(d.get("command_truncated").is_none());
        // Quotes and control characters escape to 2 and 6 bytes: 60 KiB of them would be
        // far past the frame cap.
        for word in [
            "\"".repeat(60 * 1024),
            "\u{1}".repeat(60 * 1024),
            "é".repeat(40 * 1024),
        ] {
            let argv = vec![
                "bash".to_string(),
                "-c".to_string(),
                word.clone(),
                "x".into(),
            ];
            let d = start_event_data("run-1", "2026-01-01T00:00:00.000Z", &argv);
            let log = RunLog::new(usize::MAX, u64::MAX);
            log.event("start", d.clone());
            let f = &log.read_from(1).frames[0];
            assert!(f.text.len() <= MAX_FRAME_BYTES, "{}", f.text.len());
            // Within a few bytes of the cap: as much of the command as fits is kept.
            assert!(f.text.len() > MAX_FRAME_BYTES - 64, "{}", f.text.len());
            assert_eq!(d["command_truncated"], true);
            assert_eq!(d["command_bytes"], 4 + 2 + word.len() + 1);
            let cmd = d["command"].as_array().unwrap();
            assert_eq!(cmd.len(), 3, "the words after the cut one are left out");
            assert_eq!(cmd[0], "bash");
            let cut = cmd[2].as_str().unwrap();
            assert!(cut.ends_with('…') && word.starts_with(cut.trim_end_matches('…')));
        }
    }

    #[test]
    fn ring_evicts_oldest_but_keeps_the_last_frame() {
        let log = RunLog::new(200, u64::MAX);
        for i in 0..50 {
            log.output(Stream::Stdout, format!("line {i}\n").as_bytes());
        }
        let s = log.read_from(1);
        assert!(s.first_retained > 1);
        assert_eq!(s.frames.first().unwrap().seq, s.first_retained);
        assert_eq!(s.last_seq, 50);
        assert!(log.evicted() > 0);
        assert_eq!(log.end(json!({})), 51);
        assert_eq!(log.read_from(51).frames.len(), 1);
    }
}
