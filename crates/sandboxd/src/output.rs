//! The one writer of stdout: every message is a whole line, written and flushed under a lock,
//! so answers and notifications from concurrent requests never interleave.

use std::io::{self, BufWriter, Write};
use std::sync::Mutex;

use serde_json::Value;

pub struct Output {
    /// `None` once closed (after `kill`, or when the reader of stdout went away).
    out: Mutex<Option<BufWriter<io::Stdout>>>,
}

impl Output {
    pub fn stdout() -> Output {
        Output {
            out: Mutex::new(Some(BufWriter::with_capacity(64 * 1024, io::stdout()))),
        }
    }

    pub fn send(&self, v: &Value) {
        let mut line = serde_json::to_vec(v).expect("a JSON value serializes");
        line.push(b'\n');
        let mut guard = self.out.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(w) = guard.as_mut()
            && w.write_all(&line).and_then(|()| w.flush()).is_err()
        {
            // Nobody reads our answers any more; requests still run to their end.
            *guard = None;
        }
    }

    /// Writes nothing more after this.
    pub fn close(&self) {
        let mut guard = self.out.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(mut w) = guard.take() {
            let _ = w.flush();
        }
    }
}
