//! Interactive runs (seed 003, spec 1.1): a run created with `interactive: true` reads its
//! standard input from `stdin` frames its owner sends on the run's stream, within four limits
//! (`stdin_max_bytes`, `stdin_max_frame_bytes`, `stdin_bps`, `stdin_idle_timeout_sec`).
//!
//! Stdin is a non-TTY pipe. It closes once, for one reason: the client's `stdin_close`, a
//! limit broken, a frame that is not a stdin frame, or the run's end. That closing is one
//! `stdin_closed` event in the run's frames (so every reader, and a late one, sees it) and one
//! `sandbox.run.stdin_closed` audit event with the input's SHA-256 and size (the input itself
//! only under `SANDBOX_AUDIT_STDIN_CONTENT`). The program then reads end of file and goes on.

use std::sync::{Arc, Weak};
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use parking_lot::Mutex;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, watch};

use crate::App;
use crate::clock::Clock;
use crate::config::Config;
use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::logs::RunLog;
use crate::runtime::StdinFeed;
use crate::store::StdinLimits;

/// Reasons of `stdin_closed` besides the four limits' names.
pub const CLIENT_CLOSED: &str = "client_closed";
pub const INVALID_FRAME: &str = "invalid_frame";
pub const INVALID_ENCODING: &str = "invalid_encoding";
pub const RUN_ENDED: &str = "run_ended";
/// Told to a connection whose stdin frame went to a run that is not interactive.
pub const NOT_INTERACTIVE: &str = "not_interactive";

/// The server's limits: what a run gets when it asks for none, and the most it may ask for.
pub fn server_limits(c: &Config) -> StdinLimits {
    StdinLimits {
        stdin_max_bytes: c.interactive_max_bytes,
        stdin_max_frame_bytes: c.interactive_max_frame_bytes,
        stdin_bps: c.interactive_input_bps,
        stdin_idle_timeout_sec: c.interactive_idle_timeout_sec,
    }
}

/// Largest WebSocket message a run's stream takes from a client: a `stdin` frame whose
/// payload is at the server's frame cap, JSON-escaped at the worst (`\u0001` is six bytes for
/// one), with room for the envelope. A larger message fails the connection (close 1009); one
/// between the run's frame cap and this is refused as `stdin_max_frame_bytes`.
pub fn ws_message_limit(c: &Config) -> usize {
    (c.interactive_max_frame_bytes as usize).saturating_mul(6) + 4096
}

/// What a run request asked for, as `crate::api::runs` read it.
pub struct Asked<'a> {
    pub interactive: Option<bool>,
    pub stdin_max_bytes: Option<u64>,
    pub stdin_max_frame_bytes: Option<u64>,
    pub stdin_bps: Option<u64>,
    pub stdin_idle_timeout_sec: Option<u64>,
    /// The request's inline `stdin` was given.
    pub inline_stdin: bool,
    pub command: &'a [String],
}

/// The run's stdin limits when it is interactive and allowed to be, `None` when it is not
/// interactive; else the answer that refuses it.
pub fn check(
    c: &Config,
    runtime: &dyn crate::runtime::Runtime,
    a: &Asked<'_>,
) -> ApiResult<Option<StdinLimits>> {
    let limits = [
        (
            "stdin_max_bytes",
            a.stdin_max_bytes,
            c.interactive_max_bytes,
        ),
        (
            "stdin_max_frame_bytes",
            a.stdin_max_frame_bytes,
            c.interactive_max_frame_bytes,
        ),
        ("stdin_bps", a.stdin_bps, c.interactive_input_bps),
        (
            "stdin_idle_timeout_sec",
            a.stdin_idle_timeout_sec,
            c.interactive_idle_timeout_sec,
        ),
    ];
    if a.interactive != Some(true) {
        if let Some((field, _, _)) = limits.iter().find(|(_, v, _)| v.is_some()) {
            return Err(ApiError::invalid(format!(
                "{field} applies to interactive runs only (interactive: true)"
            ))
            .with_details(json!({ "field": field })));
        }
        return Ok(None);
    }
    if !c.interactive_enabled {
        return Err(ApiError::new(
            axum::http::StatusCode::FORBIDDEN,
            ErrorCode::Forbidden,
            "interactive runs are disabled on this server (SANDBOX_INTERACTIVE_ENABLED=false)",
        )
        .with_details(
            json!({ "reason": "interactive_disabled", "interactive_supported": false }),
        ));
    }
    if !runtime.interactive_supported() {
        return Err(ApiError::invalid(format!(
            "runtime '{}' does not run interactive runs",
            runtime.name()
        ))
        .with_details(json!({ "runtime": runtime.name(), "interactive_supported": false })));
    }
    if a.inline_stdin {
        return Err(ApiError::invalid(
            "stdin and interactive: true do not go together: send the first input as a stdin frame",
        )
        .with_details(json!({ "field": "stdin" })));
    }
    if !c.interactive_shells && reads_commands_from_stdin(a.command) {
        return Err(ApiError::new(
            axum::http::StatusCode::FORBIDDEN,
            ErrorCode::Forbidden,
            "an interactive run may not be a shell reading its commands from stdin on this \
             server (SANDBOX_INTERACTIVE_SHELLS=false); give the shell a script (`bash -c ...`)",
        )
        .with_details(
            json!({ "reason": "interactive_shell", "policy": "SANDBOX_INTERACTIVE_SHELLS" }),
        ));
    }
    let mut out = server_limits(c);
    for (field, asked, max) in limits {
        let Some(v) = asked else { continue };
        if v == 0 || v > max {
            return Err(ApiError::invalid(format!(
                "{field} must be in [1, {max}] (the server's limit; a run may only lower it)"
            ))
            .with_details(json!({ "field": field, "max": max, "provided": v })));
        }
        match field {
            "stdin_max_bytes" => out.stdin_max_bytes = v,
            "stdin_max_frame_bytes" => out.stdin_max_frame_bytes = v,
            "stdin_bps" => out.stdin_bps = v,
            _ => out.stdin_idle_timeout_sec = v,
        }
    }
    Ok(Some(out))
}

/// Shells, by program name.
const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "ash", "zsh", "ksh", "mksh", "fish", "csh", "tcsh",
];

/// Whether `argv` starts a shell that reads its commands from stdin: one given neither `-c`
/// nor a script file, or given `-s` or `-i`. Through `env` (its options and `NAME=value`
/// words) and `busybox sh` too. It reads the argv only: a script that starts such a shell
/// itself (`bash -c 'exec bash'`) is not seen, which the docs say; the sandbox is the same
/// either way, so this states the policy for clients rather than enforcing a boundary.
pub fn reads_commands_from_stdin(argv: &[String]) -> bool {
    let name = |w: &str| w.rsplit('/').next().unwrap_or("").to_string();
    let mut words = argv.iter().map(String::as_str).peekable();
    if words.peek().map(|w| name(w)) == Some("env".into()) {
        words.next();
        while words
            .peek()
            .is_some_and(|w| w.starts_with('-') || w.contains('='))
        {
            words.next();
        }
    }
    let Some(prog) = words.next() else {
        return false;
    };
    let mut prog = name(prog);
    if prog == "busybox" {
        match words.next() {
            Some(w) => prog = name(w),
            None => return false,
        }
    }
    if !SHELLS.contains(&prog.as_str()) {
        return false;
    }
    while let Some(w) = words.next() {
        if w == "--" {
            // `bash -- file` runs the file; `bash --` alone reads stdin.
            return words.next().is_none();
        }
        // Long options (`--norc`, `--login`) take no operand that matters here.
        if w.starts_with("--") {
            continue;
        }
        if let Some(flags) = w.strip_prefix('-').or_else(|| w.strip_prefix('+')) {
            if flags.contains('c') {
                return flags.contains('i') || flags.contains('s');
            }
            if flags.contains('i') || flags.contains('s') {
                return true;
            }
            continue;
        }
        // The first operand is a script file.
        return false;
    }
    true
}

/// One interactive run's stdin: the limits, the sender its feed reads from, and what went
/// through it. Shared by the run (closes it at its end, arms the idle timer when it starts)
/// and by every connection of its stream.
pub struct Interactive {
    pub limits: StdinLimits,
    run_id: String,
    log: Arc<RunLog>,
    clock: Clock,
    app: Weak<App>,
    audit_content: bool,
    state: Mutex<State>,
    /// True once closed: ends the idle timer.
    closed: watch::Sender<bool>,
}

struct State {
    /// Dropped to close: the feed then ends (end of file).
    tx: Option<mpsc::UnboundedSender<Bytes>>,
    /// Why it closed, once it did.
    reason: Option<&'static str>,
    bytes: u64,
    frames: u64,
    sha256: Sha256,
    /// The input itself, kept only when the audit asks for it.
    content: Vec<u8>,
    /// The `stdin_bps` bucket: bytes that may come now, refilled at `stdin_bps` a second up
    /// to one second's worth.
    tokens: f64,
    refilled_ms: i64,
    /// When input last came (or the command started, before any did): the idle timer's
    /// starting point.
    last_input_ms: i64,
}

/// Why a frame's payload was not written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// It broke this limit, and stdin is now closed (the `stdin_closed` event says so to
    /// every reader).
    Broke(&'static str),
    /// Stdin had closed before, for this reason.
    Closed(&'static str),
}

impl Interactive {
    pub fn new(
        app: &Arc<App>,
        run_id: &str,
        limits: StdinLimits,
        log: Arc<RunLog>,
    ) -> (Arc<Interactive>, StdinFeed) {
        let (tx, rx) = mpsc::unbounded_channel();
        let now = app.clock.now_ms();
        let input = Arc::new(Interactive {
            limits,
            run_id: run_id.to_string(),
            log,
            clock: app.clock.clone(),
            app: Arc::downgrade(app),
            audit_content: app.config.audit_stdin_content,
            state: Mutex::new(State {
                tx: Some(tx),
                reason: None,
                bytes: 0,
                frames: 0,
                sha256: Sha256::new(),
                content: Vec::new(),
                tokens: limits.stdin_bps as f64,
                refilled_ms: now,
                last_input_ms: now,
            }),
            closed: watch::channel(false).0,
        });
        (input, rx)
    }

    /// Why stdin closed, once it did.
    pub fn closed_reason(&self) -> Option<&'static str> {
        self.state.lock().reason
    }

    /// Writes one frame's payload, or closes stdin when it breaks a limit (the frame is then
    /// not written).
    pub fn write(&self, data: &[u8]) -> Result<(), Refused> {
        let mut st = self.state.lock();
        if let Some(r) = st.reason {
            return Err(Refused::Closed(r));
        }
        let len = data.len() as u64;
        let l = &self.limits;
        let broken = if len > l.stdin_max_frame_bytes {
            Some(("stdin_max_frame_bytes", l.stdin_max_frame_bytes))
        } else if st.bytes + len > l.stdin_max_bytes {
            Some(("stdin_max_bytes", l.stdin_max_bytes))
        } else {
            let now = self.clock.now_ms();
            let elapsed = (now - st.refilled_ms).max(0) as f64 / 1000.0;
            st.tokens = (st.tokens + elapsed * l.stdin_bps as f64).min(l.stdin_bps as f64);
            st.refilled_ms = now;
            if len as f64 > st.tokens {
                Some(("stdin_bps", l.stdin_bps))
            } else {
                None
            }
        };
        if let Some((reason, limit)) = broken {
            drop(st);
            self.close_with(reason, Some(limit));
            return Err(Refused::Broke(reason));
        }
        // An empty payload is no input: it neither counts nor keeps stdin from idling.
        if data.is_empty() {
            return Ok(());
        }
        st.tokens -= len as f64;
        st.bytes += len;
        st.frames += 1;
        st.sha256.update(data);
        if self.audit_content {
            st.content.extend_from_slice(data);
        }
        st.last_input_ms = self.clock.now_ms();
        if let Some(tx) = &st.tx {
            // The feed is gone only once the run's command ended: what comes after is
            // dropped, as a pipe nobody reads would.
            let _ = tx.send(Bytes::copy_from_slice(data));
        }
        Ok(())
    }

    /// Closes stdin for `reason` (the program reads end of file once it drained what came
    /// before); a no-op once closed. Returns whether this call closed it.
    pub fn close(&self, reason: &'static str) -> bool {
        self.close_with(reason, None)
    }

    fn close_with(&self, reason: &'static str, limit: Option<u64>) -> bool {
        let (tx, bytes, frames, sha256, content) = {
            let mut st = self.state.lock();
            if st.reason.is_some() {
                return false;
            }
            st.reason = Some(reason);
            (
                st.tx.take(),
                st.bytes,
                st.frames,
                hex::encode(st.sha256.clone().finalize()),
                std::mem::take(&mut st.content),
            )
        };
        self.closed.send_replace(true);
        let mut data = json!({ "reason": reason, "bytes_received": bytes });
        if let Some(limit) = limit {
            data["limit"] = json!(limit);
        }
        self.log.event("stdin_closed", data);
        // The audit event is written before the program can see end of file too: a program
        // that ends on it would otherwise complete its run, and write `completed`, first.
        if let Some(app) = self.app.upgrade()
            && let Some(run) = app.live_run(&self.run_id)
        {
            let mut body = json!({
                "reason": reason,
                "stdin_bytes": bytes,
                "stdin_frames": frames,
                "stdin_sha256": sha256,
            });
            if self.audit_content {
                body["stdin_base64"] =
                    json!(base64::engine::general_purpose::STANDARD.encode(&content));
            }
            crate::audit::run_stdin_closed(&app, &run.snapshot(), body);
        }
        // Only now the program can see end of file: whatever it prints about it comes after
        // the event in the run's frames.
        drop(tx);
        true
    }

    /// Starts the idle timer (the command starts now): stdin closes after
    /// `stdin_idle_timeout_sec` without input, counted from the last input or from now.
    pub fn arm_idle(self: &Arc<Self>) {
        let me = self.clone();
        let idle_ms = self.limits.stdin_idle_timeout_sec.saturating_mul(1000) as i64;
        {
            let mut st = self.state.lock();
            st.last_input_ms = st.last_input_ms.max(self.clock.now_ms());
        }
        let mut closed = self.closed.subscribe();
        tokio::spawn(async move {
            loop {
                let due = {
                    let st = me.state.lock();
                    if st.reason.is_some() {
                        return;
                    }
                    st.last_input_ms.saturating_add(idle_ms)
                };
                let left = due - me.clock.now_ms();
                if left <= 0 {
                    me.close_with(
                        "stdin_idle_timeout_sec",
                        Some(me.limits.stdin_idle_timeout_sec),
                    );
                    return;
                }
                tokio::select! {
                    _ = me.clock.sleep(Duration::from_millis(left as u64)) => {}
                    _ = closed.wait_for(|c| *c) => return,
                }
            }
        });
    }
}

/// A client's message on a run's stream, read.
#[derive(Debug, PartialEq)]
pub enum ClientFrame {
    /// A `stdin` frame's payload, decoded.
    Stdin(Vec<u8>),
    /// `{"type": "stdin_close"}`.
    Close,
    /// Not a frame of this protocol, or one with a bad `encoding` or payload: the reason.
    Invalid(&'static str),
}

/// Reads `{"type":"stdin","encoding":"utf8"|"base64","data":...}` or
/// `{"type":"stdin_close"}`. Other members are ignored; `encoding` defaults to `utf8`.
pub fn parse_client_frame(text: &str) -> ClientFrame {
    let Ok(v) = serde_json::from_str::<Value>(text) else {
        return ClientFrame::Invalid(INVALID_FRAME);
    };
    match v.get("type").and_then(Value::as_str) {
        Some("stdin_close") => ClientFrame::Close,
        Some("stdin") => {
            let Some(data) = v.get("data").and_then(Value::as_str) else {
                return ClientFrame::Invalid(INVALID_FRAME);
            };
            match v.get("encoding") {
                None => ClientFrame::Stdin(data.as_bytes().to_vec()),
                Some(Value::String(e)) if e == "utf8" => {
                    ClientFrame::Stdin(data.as_bytes().to_vec())
                }
                Some(Value::String(e)) if e == "base64" => {
                    match base64::engine::general_purpose::STANDARD.decode(data.as_bytes()) {
                        Ok(b) => ClientFrame::Stdin(b),
                        Err(_) => ClientFrame::Invalid(INVALID_ENCODING),
                    }
                }
                Some(_) => ClientFrame::Invalid(INVALID_ENCODING),
            }
        }
        _ => ClientFrame::Invalid(INVALID_FRAME),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &str) -> Vec<String> {
        words.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn shells_reading_stdin_are_told_from_scripts_and_programs() {
        for yes in [
            "bash",
            "/bin/sh",
            "sh -i",
            "bash -s",
            "bash --norc",
            "bash -x",
            "bash -ic true",
            "env FOO=1 bash",
            "/usr/bin/env -i zsh",
            "busybox sh",
            "bash --",
        ] {
            assert!(reads_commands_from_stdin(&argv(yes)), "{yes}");
        }
        for no in [
            "bash -c true",
            "sh -c read",
            "bash script.sh",
            "bash -x script.sh",
            "bash -- script.sh",
            "python3 -i",
            "cat",
            "env python3",
            "busybox cat",
            "bashful",
        ] {
            assert!(!reads_commands_from_stdin(&argv(no)), "{no}");
        }
    }

    #[test]
    fn client_frames_are_read_strictly_by_type_and_encoding() {
        assert_eq!(
            parse_client_frame(r#"{"type":"stdin","encoding":"utf8","data":"hi\n"}"#),
            ClientFrame::Stdin(b"hi\n".to_vec())
        );
        assert_eq!(
            parse_client_frame(r#"{"type":"stdin","encoding":"base64","data":"AP8="}"#),
            ClientFrame::Stdin(vec![0, 255])
        );
        assert_eq!(
            parse_client_frame(r#"{"type":"stdin","data":"x","seq":3}"#),
            ClientFrame::Stdin(b"x".to_vec())
        );
        assert_eq!(
            parse_client_frame(r#"{"type":"stdin_close"}"#),
            ClientFrame::Close
        );
        for (text, why) in [
            ("not json", INVALID_FRAME),
            (r#"{"type":"ping"}"#, INVALID_FRAME),
            (r#"{"type":"stdin"}"#, INVALID_FRAME),
            (r#"{"type":"stdin","data":7}"#, INVALID_FRAME),
            (
                r#"{"type":"stdin","encoding":"hex","data":"00"}"#,
                INVALID_ENCODING,
            ),
            (
                r#"{"type":"stdin","encoding":"base64","data":"%%"}"#,
                INVALID_ENCODING,
            ),
        ] {
            assert_eq!(
                parse_client_frame(text),
                ClientFrame::Invalid(why),
                "{text}"
            );
        }
    }
}
