//! `WS /runs/{id}/stream`: the run's frames from a cursor, then live ones until `end`.
//! Each connection reads the run's ring at its own pace, so a slow client only delays
//! itself; one that falls out of the ring is told how many frames it lost.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use serde_json::json;

use crate::logs::RunLog;

/// Streams `log` from seq `from` until its end, then closes; counted in `metrics`.
pub async fn serve(
    socket: WebSocket,
    log: Arc<RunLog>,
    from: u64,
    metrics: Arc<crate::observe::Metrics>,
) {
    crate::observe::ws_opened(&metrics);
    let mut counted = Disconnect {
        metrics: &metrics,
        counted: false,
    };
    stream(socket, log, from, &mut counted).await;
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

async fn stream(mut socket: WebSocket, log: Arc<RunLog>, from: u64, conn: &mut Disconnect<'_>) {
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
                // Client frames (pings are answered by the library) carry nothing this
                // server reads: runs are not interactive.
                Some(Ok(_)) => {}
            },
        }
    }
}
