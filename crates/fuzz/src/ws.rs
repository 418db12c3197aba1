//! `ws_stdin`: a client's messages on a run's WebSocket stream, as the service reads them
//! into the run's stdin. A model of seed 003's stdin frames says what each message must do:
//! the program receives exactly the payloads of the valid `stdin` frames sent before stdin
//! closed, in order, within the frame and total caps; a connection is told at most once that
//! stdin is closed; a run that reads no stdin receives nothing.

use arbitrary::{Arbitrary, Unstructured};
use base64::Engine as _;
use serde_json::Value;
use wasmsand_server::fuzzing::{self, Frame};
use wasmsand_server::store::StdinLimits;

#[derive(Debug, Arbitrary)]
enum Msg {
    /// A text message as is.
    Text(String),
    Binary(Vec<u8>),
    /// A well-formed `stdin` frame.
    Stdin {
        data: String,
        base64: Option<bool>,
    },
    /// `stdin` with base64 of these bytes.
    Bytes(Vec<u8>),
    Close,
}

#[derive(Debug, Arbitrary)]
struct Input {
    interactive: bool,
    max_frame: u8,
    max_total: u16,
    msgs: Vec<Msg>,
}

/// What a message asks of stdin.
enum Asks {
    Write(Vec<u8>),
    Close,
    Invalid(&'static str),
}

fn asks(f: &Frame) -> Asks {
    const FRAME: &str = "invalid_frame";
    const ENCODING: &str = "invalid_encoding";
    let Frame::Text(t) = f else {
        return Asks::Invalid(FRAME);
    };
    let Ok(v) = serde_json::from_str::<Value>(t) else {
        return Asks::Invalid(FRAME);
    };
    match v.get("type").and_then(Value::as_str) {
        Some("stdin_close") => Asks::Close,
        Some("stdin") => {
            let Some(data) = v.get("data").and_then(Value::as_str) else {
                return Asks::Invalid(FRAME);
            };
            match v.get("encoding").map(|e| e.as_str()) {
                None | Some(Some("utf8")) => Asks::Write(data.as_bytes().to_vec()),
                Some(Some("base64")) => base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .map_or(Asks::Invalid(ENCODING), Asks::Write),
                Some(_) => Asks::Invalid(ENCODING),
            }
        }
        _ => Asks::Invalid(FRAME),
    }
}

/// The target.
pub fn run(data: &[u8]) {
    let Ok(input) = Input::arbitrary_take_rest(Unstructured::new(data)) else {
        return;
    };
    let frames: Vec<Frame> = input
        .msgs
        .iter()
        .take(64)
        .map(|m| match m {
            Msg::Text(t) => Frame::Text(t.clone()),
            Msg::Binary(b) => Frame::Binary(b.clone()),
            Msg::Stdin { data, base64 } => {
                let mut v = serde_json::json!({"type": "stdin", "data": data});
                if let Some(b) = base64 {
                    v["encoding"] = (if *b { "base64" } else { "utf8" }).into();
                }
                Frame::Text(v.to_string())
            }
            Msg::Bytes(b) => Frame::Text(
                serde_json::json!({
                    "type": "stdin",
                    "encoding": "base64",
                    "data": base64::engine::general_purpose::STANDARD.encode(b),
                })
                .to_string(),
            ),
            Msg::Close => Frame::Text(r#"{"type":"stdin_close"}"#.to_string()),
        })
        .collect();
    let limits = StdinLimits {
        stdin_max_bytes: u64::from(input.max_total),
        stdin_max_frame_bytes: u64::from(input.max_frame),
        // Rate and idleness depend on the clock, which a replayed input does not control.
        stdin_bps: u64::MAX / 4,
        stdin_idle_timeout_sec: 3600,
    };
    let got = fuzzing::ws_stdin(&frames, limits, input.interactive);

    // The model.
    let mut delivered: Vec<Vec<u8>> = Vec::new();
    let mut told: Vec<Option<&str>> = Vec::new();
    let mut reason: Option<&str> = None;
    let mut was_told = false;
    let mut total = 0u64;
    for f in &frames {
        let a = asks(f);
        let tell: Option<&str> = if !input.interactive {
            match a {
                Asks::Invalid(_) => None,
                _ => Some("not_interactive"),
            }
        } else if let Some(r) = reason {
            // Closed already: a frame that would write or close is told why.
            Some(r)
        } else {
            match a {
                Asks::Write(d) => {
                    let len = d.len() as u64;
                    if len > limits.stdin_max_frame_bytes {
                        reason = Some("stdin_max_frame_bytes");
                    } else if total + len > limits.stdin_max_bytes {
                        reason = Some("stdin_max_bytes");
                    } else if !d.is_empty() {
                        total += len;
                        delivered.push(d);
                    }
                    // A frame that broke a limit is answered by the `stdin_closed` event
                    // every reader gets, not told to this connection alone.
                    None
                }
                Asks::Close => {
                    reason = Some("client_closed");
                    None
                }
                Asks::Invalid(why) => {
                    reason = Some(why);
                    None
                }
            }
        };
        let tell = match tell {
            Some(r) if !was_told => {
                was_told = true;
                Some(r)
            }
            _ => None,
        };
        told.push(tell);
    }
    assert_eq!(
        got.delivered, delivered,
        "payloads that reached the program"
    );
    assert_eq!(
        got.reason.filter(|_| input.interactive),
        reason,
        "why stdin closed"
    );
    assert_eq!(got.told, told, "what the connection was told");
}
