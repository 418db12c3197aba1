//! The WebSocket stream: envelope, order, splitting, caps, heartbeats, resume.

use futures::StreamExt;
use reqwest::StatusCode;
use tokio_tungstenite::tungstenite::Message;

use super::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_are_ordered_unique_and_end_once() {
    let srv = TestServer::start().await;
    let (_, frames, st) = srv
        .run(TestServer::script(
            "for i in $(seq 1 200); do echo line $i; echo err $i >&2; done",
        ))
        .await;
    assert_eq!(st["phase"], "completed");
    check_stream_rules(&frames);
    assert_eq!(frames[0]["seq"], 1);
    for f in &frames {
        match f["type"].as_str().unwrap() {
            "stdout" | "stderr" => {
                assert_eq!(f["encoding"], "utf8");
                assert!(f["data"].is_string());
            }
            "event" => assert!(f["event"].is_string() && f["data"].is_object(), "{f}"),
            "heartbeat" => assert!(f["ts"].is_string()),
            t => panic!("unexpected frame type {t}"),
        }
    }
    let events: Vec<String> = frames
        .iter()
        .filter(|f| f["type"] == "event")
        .map(|f| match f["event"].as_str().unwrap() {
            "phase" => format!("phase:{}", f["data"]["phase"].as_str().unwrap()),
            e => e.to_string(),
        })
        .collect();
    assert_eq!(
        events,
        [
            "phase:starting",
            "phase:running",
            "start",
            "phase:completed",
            "end"
        ]
    );
    let expected: String = (1..=200).map(|i| format!("line {i}\n")).collect();
    assert_eq!(stdout(&frames), expected);
    let err: String = (1..=200).map(|i| format!("err {i}\n")).collect();
    assert_eq!(String::from_utf8(output(&frames, "stderr")).unwrap(), err);
    assert_eq!(st["last_seq"], frames.last().unwrap()["seq"]);
    assert_eq!(frames.last().unwrap()["data"]["exit_code"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn big_output_is_split_under_64k_on_utf8_boundaries_and_binary_is_base64() {
    let srv = TestServer::start().await;
    let script = "python3 -c \"import sys; sys.stdout.write('é€😀' * 30000); sys.stdout.flush()\"";
    let (_, frames, st) = srv.run(TestServer::script(script)).await;
    assert_eq!(st["phase"], "completed", "{st}");
    let out: Vec<_> = frames.iter().filter(|f| f["type"] == "stdout").collect();
    assert!(out.len() >= 5, "{} frames", out.len());
    assert!(out.iter().all(|f| f["encoding"] == "utf8"));
    assert_eq!(stdout(&frames), "é€😀".repeat(30000));

    let (_, frames, _) = srv
        .run(TestServer::script("printf 'ok\\377\\376\\000z'"))
        .await;
    let bytes = output(&frames, "stdout");
    assert_eq!(bytes, b"ok\xff\xfe\x00z");
    assert!(
        frames
            .iter()
            .any(|f| f["type"] == "stdout" && f["encoding"] == "base64")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_cap_sends_one_truncated_frame() {
    let srv = TestServer::with(|c| c.max_log_bytes = 1000).await;
    let (_, frames, st) = srv
        .run(TestServer::script(
            "for i in $(seq 1 1000); do echo 0123456789; done; echo done",
        ))
        .await;
    check_stream_rules(&frames);
    let truncated: Vec<_> = frames.iter().filter(|f| f["type"] == "truncated").collect();
    assert_eq!(truncated.len(), 1);
    assert_eq!(truncated[0]["reason"], "log_cap");
    assert_eq!(output(&frames, "stdout").len(), 1000);
    assert_eq!(st["phase"], "completed");
    assert_eq!(st["resource_usage"]["log_bytes"], 1000);
    assert_eq!(st["log_truncated"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_come_at_the_configured_interval() {
    let srv = TestServer::with(|c| c.ws_heartbeat_sec = 1).await;
    let (_, frames, _) = srv.run(TestServer::script("sleep 3.5; echo ok")).await;
    check_stream_rules(&frames);
    let beats: Vec<_> = frames.iter().filter(|f| f["type"] == "heartbeat").collect();
    assert!(beats.len() >= 2, "{frames:?}");
    for b in beats {
        assert!(b["ts"].as_str().unwrap().ends_with('Z'));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_clients_and_resume_from_seq() {
    let srv = TestServer::start().await;
    let (id, all, _) = srv.run(TestServer::script("seq 1 50")).await;
    // A late client gets everything; a resuming one from the seq it asks for.
    assert_eq!(srv.frames(&id, "").await, all);
    let from5 = srv.frames(&id, "?from_seq=5").await;
    assert_eq!(from5[0]["seq"], 5);
    assert_eq!(from5.as_slice(), &all[4..]);
    let past = srv.frames(&id, "?from_seq=100000").await;
    assert!(past.is_empty(), "{past:?}");
    for bad in ["?from_seq=0", "?from_seq=x", "?from_seq=-1"] {
        let resp = srv
            .client
            .get(srv.url(&format!("/runs/{id}/stream{bad}")))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST, "{bad}");
    }
    // A plain GET is told to upgrade.
    let resp = srv
        .client
        .get(srv.url(&format!("/runs/{id}/stream")))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UPGRADE_REQUIRED);
    let resp = srv
        .client
        .get(srv.url("/runs/nope/stream"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_dropped_from_the_ring_are_announced_with_resume() {
    let srv = TestServer::with(|c| c.ws_ring_bytes = 2000).await;
    let v = srv
        .start_run(TestServer::script(
            "for i in $(seq 1 300); do echo $i; done",
        ))
        .await;
    let id = v["run_id"].as_str().unwrap().to_string();
    let st = srv.wait_done(&id).await;
    assert!(st["frames_dropped"].as_u64().unwrap() > 0, "{st}");
    // A client connecting now is late: the ring has dropped the start.
    let frames = srv.frames(&id, "").await;
    let note = &frames[0];
    assert_eq!(note["event"], "resume");
    let delivered = note["data"]["delivered_from_seq"].as_u64().unwrap();
    assert_eq!(note["data"]["requested_from_seq"], 1);
    assert_eq!(note["data"]["lost_count"], delivered - 1);
    // Seed 003: the note carries `seq: m`, the seq of the first frame delivered.
    assert_eq!(note["seq"], delivered);
    assert_eq!(frames[1]["seq"], delivered);
    check_stream_rules(&frames);
    let again = srv.frames(&id, "?from_seq=3").await;
    assert_eq!(again[0]["data"]["requested_from_seq"], 3);
    assert_eq!(again[0]["data"]["lost_count"], delivered - 3);
    assert_eq!(again[1..], frames[1..]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_client_does_not_slow_the_run() {
    let srv = TestServer::with(|c| c.ws_ring_bytes = 64 * 1024).await;
    // 9 MB: more than loopback socket buffers hold, so a producer that waited for this
    // client would never finish.
    let v = srv
        .start_run(TestServer::one_shot(&[
            "python3",
            "-c",
            "import sys\nfor _ in range(9000): sys.stdout.write('x' * 999 + '\\n')",
        ]))
        .await;
    let id = v["run_id"].as_str().unwrap().to_string();
    // Connected, never read until the run is over.
    let (mut stalled, _) =
        tokio_tungstenite::connect_async(srv.ws_url(&format!("/runs/{id}/stream")))
            .await
            .unwrap();
    let st = srv.wait_done(&id).await;
    assert_eq!(st["phase"], "completed", "{st}");
    assert_eq!(st["resource_usage"]["log_bytes"], 9000 * 1000);
    let mut got = Vec::new();
    tokio::time::timeout(GUARD, async {
        while let Some(Ok(m)) = stalled.next().await {
            if let Message::Text(t) = m {
                got.push(serde_json::from_str::<serde_json::Value>(&t).unwrap());
            }
        }
    })
    .await
    .unwrap();
    check_stream_rules(&got);
    // Whatever the client lost was announced, and what it got is the end of the output.
    let lost: u64 = got
        .iter()
        .filter(|f| f["event"] == "resume")
        .map(|f| f["data"]["lost_count"].as_u64().unwrap())
        .sum();
    let data = output(&got, "stdout");
    if lost == 0 {
        assert_eq!(data.len(), 9000 * 1000);
    }
    assert!(data.iter().all(|&b| b == b'x' || b == b'\n'));
}
