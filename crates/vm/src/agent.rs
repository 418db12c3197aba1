//! The host's end of the agent's port: JSON lines over the Unix socket QEMU joins to the
//! guest's virtio-serial port. One reader thread routes every frame to the request that
//! carries its `id`; a request sees the frames of its own `id` only.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

/// The longest frame the host accepts: a read chunk or an output chunk is at most 1 MiB of
/// data, 1.4 MiB as base64. A longer line is a guest that does not follow the protocol.
const MAX_FRAME: usize = 4 << 20;

type Pending = Arc<Mutex<HashMap<u64, Sender<Value>>>>;

/// Why the agent gave no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AgentError {
    /// The connection is gone (QEMU exited, the guest powered off, a bad frame).
    Gone(String),
    /// No answer in time.
    Timeout,
    /// The agent answered `ok: false`.
    Failed {
        message: String,
        errno: Option<String>,
    },
}

pub(crate) struct AgentConn {
    writer: Mutex<UnixStream>,
    pending: Pending,
    next_id: AtomicU64,
    dead: Arc<Mutex<Option<String>>>,
    closed: Arc<AtomicBool>,
    stream: UnixStream,
}

/// One request's frames as they arrive.
pub(crate) struct Call {
    pub(crate) id: u64,
    rx: Receiver<Value>,
    dead: Arc<Mutex<Option<String>>>,
}

impl Call {
    /// The next frame of this request, within `timeout`.
    pub(crate) fn next(&self, timeout: Duration) -> Result<Value, AgentError> {
        match self.rx.recv_timeout(timeout) {
            Ok(v) => Ok(v),
            Err(RecvTimeoutError::Timeout) => Err(AgentError::Timeout),
            Err(RecvTimeoutError::Disconnected) => Err(AgentError::Gone(
                self.dead
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone()
                    .unwrap_or_else(|| "the agent's connection closed".into()),
            )),
        }
    }
}

impl AgentConn {
    /// Connects to QEMU's end of the port (retried while QEMU creates it, until `deadline`).
    pub(crate) fn connect(
        path: &Path,
        deadline: Instant,
        alive: &mut dyn FnMut() -> bool,
    ) -> Result<AgentConn, String> {
        let stream = loop {
            match UnixStream::connect(path) {
                Ok(s) => break s,
                Err(e) => {
                    if !alive() {
                        return Err("QEMU exited".into());
                    }
                    if Instant::now() >= deadline {
                        return Err(format!("no agent socket: {e}"));
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        };
        let reader = stream.try_clone().map_err(|e| e.to_string())?;
        let writer = stream.try_clone().map_err(|e| e.to_string())?;
        let pending: Pending = Arc::default();
        let dead: Arc<Mutex<Option<String>>> = Arc::default();
        let closed = Arc::new(AtomicBool::new(false));
        {
            let pending = pending.clone();
            let dead = dead.clone();
            let closed = closed.clone();
            std::thread::Builder::new()
                .name("vm-agent-reader".into())
                .spawn(move || read_frames(reader, pending, dead, closed))
                .map_err(|e| e.to_string())?;
        }
        Ok(AgentConn {
            writer: Mutex::new(writer),
            pending,
            next_id: AtomicU64::new(1),
            dead,
            closed,
            stream,
        })
    }

    /// Why the connection ended, if it did.
    pub(crate) fn gone(&self) -> Option<String> {
        self.dead.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Sends a request (`op` and its fields); its frames come through the returned [`Call`].
    pub(crate) fn start(
        &self,
        op: &str,
        mut fields: Map<String, Value>,
    ) -> Result<Call, AgentError> {
        if let Some(why) = self.gone() {
            return Err(AgentError::Gone(why));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        fields.insert("id".into(), id.into());
        fields.insert("op".into(), op.into());
        let (tx, rx) = channel();
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, tx);
        let mut line = serde_json::to_vec(&Value::Object(fields)).expect("JSON serializes");
        line.push(b'\n');
        let written = self
            .writer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .write_all(&line);
        if let Err(e) = written {
            self.pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id);
            return Err(AgentError::Gone(format!("cannot write to the agent: {e}")));
        }
        Ok(Call {
            id,
            rx,
            dead: self.dead.clone(),
        })
    }

    /// Forgets a request whose answer is no longer wanted.
    pub(crate) fn forget(&self, call: &Call) {
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&call.id);
    }

    /// One request, one answer: the answer's fields when it says `ok`.
    pub(crate) fn call(
        &self,
        op: &str,
        fields: Map<String, Value>,
        timeout: Duration,
    ) -> Result<Value, AgentError> {
        let call = self.start(op, fields)?;
        let deadline = Instant::now() + timeout;
        let answer = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match call.next(left) {
                Ok(v) if v.get("ev").is_some() => continue,
                Ok(v) => break Ok(v),
                Err(e) => break Err(e),
            }
        };
        self.forget(&call);
        answer.and_then(ok_or_failed)
    }

    /// Closes the connection: every request waiting gets [`AgentError::Gone`].
    pub(crate) fn close(&self) {
        if !self.closed.swap(true, Ordering::SeqCst) {
            let _ = self.stream.shutdown(std::net::Shutdown::Both);
        }
    }
}

impl Drop for AgentConn {
    fn drop(&mut self) {
        self.close();
    }
}

/// An answer with `ok: true`, else its error.
pub(crate) fn ok_or_failed(v: Value) -> Result<Value, AgentError> {
    if v.get("ok").and_then(Value::as_bool) == Some(true) {
        return Ok(v);
    }
    Err(AgentError::Failed {
        message: v
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("the agent failed without a reason")
            .to_string(),
        errno: v.get("errno").and_then(Value::as_str).map(String::from),
    })
}

fn read_frames(
    mut stream: UnixStream,
    pending: Pending,
    dead: Arc<Mutex<Option<String>>>,
    closed: Arc<AtomicBool>,
) {
    let mut buf: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut chunk = vec![0u8; 64 * 1024];
    let why = loop {
        let n = match stream.read(&mut chunk) {
            Ok(0) => break "the machine closed the agent's port".to_string(),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => break format!("reading from the agent: {e}"),
        };
        let mut start = buf.len();
        buf.extend_from_slice(&chunk[..n]);
        let mut consumed = 0;
        while let Some(pos) = buf[start..].iter().position(|&b| b == b'\n') {
            let end = start + pos;
            let line = &buf[consumed..end];
            if !line.is_empty() {
                route(line, &pending);
            }
            consumed = end + 1;
            start = consumed;
        }
        buf.drain(..consumed);
        if buf.len() > MAX_FRAME {
            break format!("the agent sent a frame over {MAX_FRAME} bytes");
        }
    };
    let why = if closed.load(Ordering::SeqCst) {
        "the machine was stopped".to_string()
    } else {
        why
    };
    *dead.lock().unwrap_or_else(|p| p.into_inner()) = Some(why);
    // Dropping the senders wakes every waiting request with `Gone`.
    pending.lock().unwrap_or_else(|p| p.into_inner()).clear();
}

fn route(line: &[u8], pending: &Pending) {
    let Ok(v) = serde_json::from_slice::<Value>(line) else {
        return;
    };
    let Some(id) = v.get("id").and_then(Value::as_u64) else {
        return;
    };
    let final_frame = v.get("ev").is_none();
    let mut map = pending.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(tx) = map.get(&id) {
        let _ = tx.send(v);
        if final_frame {
            map.remove(&id);
        }
    }
}
