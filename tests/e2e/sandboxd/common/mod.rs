//! A `sandboxd` child process spoken to over real pipes, one JSON value per line.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Long enough for a cold module compile on a busy 2-core machine; a healthy answer takes
/// milliseconds.
pub const PATIENCE: Duration = Duration::from_secs(120);

/// `sandboxd ARGS` run to its end with no input: its status and output.
pub fn sandboxd(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_e2e-sandboxd"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("sandboxd runs")
}

/// Output bytes as text (invalid UTF-8 replaced).
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

pub struct Daemon {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    /// Messages read while waiting for another one.
    backlog: Vec<Value>,
    next_id: u64,
}

impl Daemon {
    pub fn start(args: &[&str]) -> Daemon {
        let mut child = Command::new(env!("CARGO_BIN_EXE_e2e-sandboxd"))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("sandboxd starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Daemon {
            stdin: child.stdin.take(),
            child,
            lines: rx,
            backlog: Vec::new(),
            next_id: 1000,
        }
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    pub fn send(&mut self, v: &Value) {
        let mut line = serde_json::to_vec(v).unwrap();
        line.push(b'\n');
        self.send_raw(&line);
    }

    /// Sends a JSON-RPC request and returns its id.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = json!(self.next_id);
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// The next line the server writes, parsed; each line must be one whole JSON value.
    pub fn next_raw(&mut self) -> Value {
        if !self.backlog.is_empty() {
            return self.backlog.remove(0);
        }
        self.read_line().expect("sandboxd answered")
    }

    fn read_line(&mut self) -> Option<Value> {
        match self.lines.recv_timeout(PATIENCE) {
            Ok(line) => Some(
                serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("not one JSON value per line ({e}): {line:?}")),
            ),
            Err(RecvTimeoutError::Timeout) => panic!("no answer within {PATIENCE:?}"),
            Err(RecvTimeoutError::Disconnected) => None,
        }
    }

    /// Waits for the answer with this id, keeping other messages for later.
    pub fn answer(&mut self, id: &Value) -> Value {
        if let Some(i) = self.backlog.iter().position(|v| is_answer_to(v, id)) {
            return self.backlog.remove(i);
        }
        loop {
            let v = self.read_line().expect("sandboxd answered");
            if is_answer_to(&v, id) {
                return v;
            }
            self.backlog.push(v);
        }
    }

    /// A request's `result`; panics on an error answer.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params);
        let a = self.answer(&id);
        assert!(a.get("error").is_none(), "{method} failed: {a}");
        a["result"].clone()
    }

    /// A request's `error`; panics on a result.
    pub fn call_err(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params);
        let a = self.answer(&id);
        assert!(a.get("result").is_none(), "{method} should fail: {a}");
        a["error"].clone()
    }

    /// Messages still unread (notifications, stray answers).
    pub fn take_backlog(&mut self) -> Vec<Value> {
        std::mem::take(&mut self.backlog)
    }

    /// Closes stdin (end of input).
    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// Every line until stdout closes.
    pub fn drain(&mut self) -> Vec<Value> {
        let mut out = self.take_backlog();
        while let Some(v) = self.read_line() {
            out.push(v);
        }
        out
    }

    pub fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let until = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < until,
                "sandboxd did not exit within {within:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn is_answer_to(v: &Value, id: &Value) -> bool {
    v.get("id") == Some(id) && v.get("method").is_none()
}
