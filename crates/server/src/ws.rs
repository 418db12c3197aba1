//! `WS /runs/{id}/stream`: the run's frames from a cursor, then live ones until `end`.
//! Each connection reads the run's ring at its own pace, so a slow client only delays
//! itself; one that falls out of the ring is told how many frames it lost.
//!
//! The client's messages on a run's stream are its stdin (`crate::interactive`): `stdin`
//! and `stdin_close` frames go to an interactive run's stdin, in the order each connection
//! sends them. A connection whose stdin frame finds stdin closed (or the run not
//! interactive) is told so once, by a `stdin_closed` event of its own: not one of the run's
//! frames, it carries the run's latest seq, as the `resume` note shares its seq.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use serde_json::json;

use crate::interactive::{
    CLIENT_CLOSED, ClientFrame, INVALID_FRAME, Interactive, Refused, parse_client_frame,
};
use crate::logs::RunLog;

/// What a connection does with its client's messages.
pub enum ClientInput {
    /// Nothing: a background process's stream (its stdin is `POST .../stdin`).
    Ignored,
    /// A run's stream: an interactive run's stdin while it is in memory; else why stdin
    /// frames go nowhere (`not_interactive`, or `run_ended` for an interactive run that
    /// finished).
    Run {
        stdin: Option<Arc<Interactive>>,
        otherwise: &'static str,
    },
}

/// Streams `log` from seq `from` until its end, then closes; counted in `metrics`.
pub async fn serve(
    socket: WebSocket,
    log: Arc<RunLog>,
    from: u64,
    metrics: Arc<crate::observe::Metrics>,
    input: ClientInput,
) {
    crate::observe::ws_opened(&metrics);
    let mut counted = Disconnect {
        metrics: &metrics,
        counted: false,
    };
    let mut client = Client { input, told: false };
    stream(socket, log, from, &mut counted, &mut client).await;
}

/// One connection's side of the run's stdin.
pub(crate) struct Client {
    pub(crate) input: ClientInput,
    /// Whether it was told that stdin is closed (once is enough).
    pub(crate) told: bool,
}

impl Client {
    /// Takes a client message; returns the reason to tell this connection stdin is closed,
    /// when it should be told.
    pub(crate) fn take(&mut self, msg: &Message) -> Option<&'static str> {
        let ClientInput::Run { stdin, otherwise } = &self.input else {
            return None;
        };
        let frame = match msg {
            Message::Text(t) => parse_client_frame(t.as_str()),
            // Seed 003: text frames only.
            Message::Binary(_) => ClientFrame::Invalid(INVALID_FRAME),
            // Pings are answered by the library; pongs and closes are not input.
            _ => return None,
        };
        let closed = match (stdin, frame) {
            // A run that is not interactive reads nothing else, as before stdin frames.
            (None, ClientFrame::Invalid(_)) => return None,
            (None, _) => *otherwise,
            (Some(input), ClientFrame::Stdin(data)) => match input.write(&data) {
                Ok(()) | Err(Refused::Broke(_)) => return None,
                Err(Refused::Closed(reason)) => reason,
            },
            (Some(input), ClientFrame::Close) => {
                if input.close(CLIENT_CLOSED) {
                    return None;
                }
                input.closed_reason().unwrap_or(CLIENT_CLOSED)
            }
            (Some(input), ClientFrame::Invalid(why)) => {
                if input.close(why) {
                    return None;
                }
                input.closed_reason().unwrap_or(why)
            }
        };
        (!std::mem::replace(&mut self.told, true)).then_some(closed)
    }
}

/// Counts a connection's end once: before the server's close frame goes out (a client that
/// got it and reads the metrics finds it counted), or when the stream stops for any other
/// reason.
struct Disconnect<'a> {
    metrics: &'a crate::observe::Metrics,
    counted: bool,
}

impl Disconnect<'_> {
    fn count(&mut self) {
        if !std::mem::replace(&mut self.counted, true) {
            crate::observe::ws_closed(self.metrics);
        }
    }
}

impl Drop for Disconnect<'_> {
    fn drop(&mut self) {
        self.count();
    }
}

async fn stream(
    mut socket: WebSocket,
    log: Arc<RunLog>,
    from: u64,
    conn: &mut Disconnect<'_>,
    client: &mut Client,
) {
    let metrics = conn.metrics;
    let mut rx = log.subscribe();
    let mut cursor = from.max(1);
    loop {
        let slice = log.read_from(cursor);
        if slice.first_retained > cursor && (slice.first_retained <= slice.last_seq || slice.ended)
        {
            let delivered = slice.first_retained;
            let lost = delivered - cursor;
            crate::observe::ws_dropped(metrics, lost);
            // Seed 003 gives the note the seq of the first frame delivered (`m`): the one
            // frame that shares its seq with another, so a client deduplicating by seq must
            // not count a `resume` note as that frame (docs/service.md says so).
            let note = json!({
                "type": "event",
                "event": "resume",
                "data": {
                    "requested_from_seq": cursor,
                    "delivered_from_seq": delivered,
                    "lost_count": lost,
                },
                "seq": delivered,
            });
            if socket
                .send(Message::Text(note.to_string().into()))
                .await
                .is_err()
            {
                return;
            }
            cursor = delivered;
        }
        let mut ended_sent = false;
        for f in &slice.frames {
            if f.seq < cursor {
                continue;
            }
            if socket
                .send(Message::Text(f.text.to_string().into()))
                .await
                .is_err()
            {
                return;
            }
            cursor = f.seq + 1;
            if slice.ended && f.seq == slice.last_seq {
                ended_sent = true;
            }
        }
        if slice.ended && (ended_sent || cursor > slice.last_seq) {
            conn.count();
            let _ = socket
                .send(Message::Close(Some(CloseFrame {
                    code: 1000,
                    reason: "end".into(),
                })))
                .await;
            // Give the client a moment to answer the close handshake.
            let _ = tokio::time::timeout(Duration::from_secs(2), async {
                while let Some(Ok(m)) = socket.recv().await {
                    if matches!(m, Message::Close(_)) {
                        break;
                    }
                }
            })
            .await;
            return;
        }
        tokio::select! {
            changed = rx.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            msg = socket.recv() => match msg {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return,
                Some(Ok(m)) => {
                    if let Some(reason) = client.take(&m) {
                        let note = json!({
                            "type": "event",
                            "event": "stdin_closed",
                            "data": { "reason": reason },
                            "seq": *rx.borrow(),
                        });
                        if socket
                            .send(Message::Text(note.to_string().into()))
                            .await
                            .is_err()
                        {
                            return;
                        }
                    }
                }
            },
        }
    }
}
