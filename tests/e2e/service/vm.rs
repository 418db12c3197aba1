//! The service's `vm` runtime against real QEMU, through the real HTTP and WebSocket API on
//! loopback: sessions whose runs are commands in a whole Linux machine, uploads, the file
//! API, artifacts, time limits, cancel, one-shot runs and hostile programs. The `vm` stage of
//! scripts/test.sh builds the image and names it in `WASMSAND_TEST_VM_IMAGE` (its saved
//! machine in `WASMSAND_TEST_VM_STATE`); without it these print "skipped". What needs no
//! machine (the runtime listed unavailable, `firecracker`'s suggestion) is in `api.rs`.

use std::time::Duration;

use futures::StreamExt;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use super::common::*;

async fn vm_server(f: impl FnOnce(&mut wasmsand_server::Config)) -> Option<TestServer> {
    let Some(image) = std::env::var_os("WASMSAND_TEST_VM_IMAGE") else {
        eprintln!("skipped: WASMSAND_TEST_VM_IMAGE is not set (scripts/test.sh --only vm)");
        return None;
    };
    let state = std::env::var_os("WASMSAND_TEST_VM_STATE");
    Some(
        TestServer::with(move |c| {
            c.vm.enabled = true;
            c.vm.image = Some(image.into());
            c.vm.state_dir = state.map(Into::into);
            f(c);
        })
        .await,
    )
}

fn in_vm(session: &str, argv: &[&str], extra: Value) -> Value {
    let mut body = json!({ "spec_version": "1.0", "session_id": session, "command": argv });
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            b.insert(k.clone(), v.clone());
        }
    }
    body
}

async fn vm_session(srv: &TestServer, extra: Value) -> String {
    let mut body = json!({ "runtime": "vm" });
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            b.insert(k.clone(), v.clone());
        }
    }
    srv.session(body).await
}

async fn vm_entry(srv: &TestServer) -> Value {
    let (s, v) = srv.get("/runtimes").await;
    assert_eq!(s, StatusCode::OK, "{v}");
    v["runtimes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "vm")
        .unwrap()
        .clone()
}

/// The QEMUs this test process has started and that still run.
fn machines() -> usize {
    let me = std::process::id().to_string();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    dir.flatten()
        .filter(|e| {
            let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            // pid (comm) state ppid ...
            let Some((comm, rest)) = stat.split_once(") ") else {
                return false;
            };
            comm.contains("qemu-system") && rest.split(' ').nth(1) == Some(me.as_str())
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vm_session_keeps_files_streams_runs_and_captures_artifacts() {
    let Some(srv) = vm_server(|_| {}).await else {
        return;
    };
    let vm = vm_entry(&srv).await;
    assert_eq!(vm["available"], true, "{vm}");
    assert_eq!(vm["images"][0]["name"], "wasmsand/vm:current", "{vm}");
    let digest = vm["images"][0]["digest"].as_str().unwrap().to_string();
    assert!(digest.starts_with("sha256:"), "{vm}");
    assert_eq!(vm["max_cpu"], 1.0);

    let sid = vm_session(&srv, json!({ "env": { "GREETING": "hi" } })).await;
    let (s, v) = srv.get(&format!("/sessions/{sid}")).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["runtime"], "vm");
    assert_eq!(v["image_digest"], digest.as_str());
    assert_eq!(machines(), 1);
    let vm = vm_entry(&srv).await;
    assert!(
        matches!(vm["acceleration"].as_str(), Some("tcg" | "kvm")),
        "{vm}"
    );

    let resp = srv
        .client
        .post(srv.url(&format!("/sessions/{sid}/files")))
        .header("content-type", "application/x-tar")
        .body(tar_of(&[
            ("pkg/data.csv", b"a,b\n1,2\n"),
            (
                "make.py",
                b"import csv, os\nos.makedirs('out', exist_ok=True)\n\
                  open('out/rows.txt', 'w').write(repr(list(csv.reader(open('pkg/data.csv')))))\n\
                  open('out/bytes.bin', 'wb').write(bytes(range(256)))\n",
            ),
        ]))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);

    // The session's env and the run's, the workspace as the cwd, a real kernel.
    let (_, frames, status) = srv
        .run(in_vm(
            &sid,
            &[
                "bash",
                "-c",
                "echo $GREETING $EXTRA; pwd; uname -s; cat pkg/data.csv; echo oops >&2; exit 3",
            ],
            json!({ "env": { "EXTRA": "there" } }),
        ))
        .await;
    check_stream_rules(&frames);
    assert_eq!(status["phase"], "failed", "{status}");
    assert_eq!(status["exit_code"], 3, "{status}");
    assert_eq!(
        stdout(&frames),
        "hi there\n/workspace\nLinux\na,b\n1,2\n",
        "{frames:?}"
    );
    assert_eq!(
        String::from_utf8(output(&frames, "stderr")).unwrap(),
        "oops\n"
    );

    // What a run writes is captured by its patterns.
    let (id, _, status) = srv
        .run(in_vm(
            &sid,
            &["python3", "make.py"],
            json!({ "capture_patterns": ["out/*"] }),
        ))
        .await;
    assert_eq!(status["phase"], "completed", "{status}");
    let (s, v) = srv.get(&format!("/runs/{id}/artifacts")).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let mut paths: Vec<&str> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["path"].as_str().unwrap())
        .collect();
    paths.sort();
    assert_eq!(paths, ["out/bytes.bin", "out/rows.txt"], "{v}");
    let bytes = srv
        .client
        .get(srv.url(&format!("/runs/{id}/artifacts/out/bytes.bin")))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(bytes.to_vec(), (0..=255u8).collect::<Vec<u8>>());

    // A cwd that is not there fails before the command runs.
    let (_, _, status) = srv
        .run(in_vm(&sid, &["true"], json!({ "cwd": "no/such/dir" })))
        .await;
    assert_eq!(status["reason_code"], "provision_failed", "{status}");

    let resp = srv
        .client
        .delete(srv.url(&format!("/sessions/{sid}")))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    assert_eq!(machines(), 0, "the session's machine is gone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_file_api_works_in_a_machine() {
    let Some(srv) = vm_server(|_| {}).await else {
        return;
    };
    let sid = vm_session(&srv, json!({})).await;
    let s2 = sid.clone();
    super::files::exercise_files(&srv, &sid, true, move |line| {
        in_vm(&s2, &["bash", "-c", line], json!({}))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_limits_and_cancels_end_runs_and_leave_the_machine_usable() {
    let Some(srv) = vm_server(|_| {}).await else {
        return;
    };
    let sid = vm_session(&srv, json!({})).await;
    let (_, _, status) = srv
        .run(in_vm(
            &sid,
            &["bash", "-c", "echo start; sleep 60"],
            json!({ "timeout_sec": 2 }),
        ))
        .await;
    assert_eq!(status["phase"], "timed_out", "{status}");

    // A cancel sends TERM first: the run's trap gets to say so.
    let v = srv
        .start_run(in_vm(
            &sid,
            &[
                "bash",
                "-c",
                "trap 'echo got TERM; exit 0' TERM; echo ready; sleep 60 & wait",
            ],
            json!({}),
        ))
        .await;
    let id = v["run_id"].as_str().unwrap().to_string();
    let mut ws = srv.connect(&id).await;
    let mut frames = Vec::new();
    read_until(&mut ws, &mut frames, |f| stdout(f).contains("ready")).await;
    let (s, _, v) = srv.post(&format!("/runs/{id}/cancel"), json!({})).await;
    assert!(s.is_success(), "{s}: {v}");
    let collect = async {
        while let Some(Ok(m)) = ws.next().await {
            match m {
                Message::Text(t) => frames.push(serde_json::from_str::<Value>(&t).unwrap()),
                Message::Close(_) => break,
                _ => {}
            }
        }
    };
    tokio::time::timeout(GUARD, collect).await.unwrap();
    assert_eq!(stdout(&frames), "ready\ngot TERM\n", "{frames:?}");
    let status = srv.wait_done(&id).await;
    assert_eq!(status["phase"], "killed", "{status}");

    let (_, frames, status) = srv
        .run(in_vm(&sid, &["echo", "still", "here"], json!({})))
        .await;
    assert_eq!(status["phase"], "completed", "{status}");
    assert_eq!(stdout(&frames), "still here\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_shot_runs_and_hostile_programs_get_clear_ends() {
    let Some(srv) = vm_server(|c| c.max_log_bytes = 1 << 20).await else {
        return;
    };
    // A one-shot run: its own machine, gone when it ends.
    let (_, frames, status) = srv
        .run(json!({
            "spec_version": "1.0", "runtime": "vm", "base_image": "vm",
            "command": ["python3", "-c", "print(6 * 7)"],
        }))
        .await;
    assert_eq!(status["phase"], "completed", "{status}");
    assert_eq!(stdout(&frames), "42\n");
    assert_eq!(status["runtime"], "vm", "{status}");
    for _ in 0..100 {
        if machines() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(machines(), 0, "the one-shot run's machine is gone");

    let sid = vm_session(&srv, json!({})).await;
    // Hundreds of megabytes of output: the log keeps its cap, the run ends by itself.
    let (_, frames, status) = srv
        .run(in_vm(
            &sid,
            &["bash", "-c", "head -c 300000000 /dev/zero; echo done >&2"],
            json!({ "timeout_sec": 600 }),
        ))
        .await;
    assert_eq!(status["phase"], "completed", "{status}");
    let out = output(&frames, "stdout").len() as u64;
    assert!(out <= 1 << 20, "{out} bytes of output kept");
    // A machine that powers itself off: the run fails saying so, and the session goes on in
    // a machine restored to its pristine state.
    let (_, _, status) = srv
        .run(in_vm(
            &sid,
            &["bash", "-c", "echo o > /proc/sysrq-trigger; sleep 60"],
            json!({}),
        ))
        .await;
    assert_eq!(status["phase"], "failed", "{status}");
    let why = status.to_string();
    assert!(why.contains("pristine"), "{status}");
    let (_, frames, status) = srv.run(in_vm(&sid, &["echo", "back"], json!({}))).await;
    assert_eq!(status["phase"], "completed", "{status}");
    assert_eq!(stdout(&frames), "back\n");
    // Memory beyond the guest's: 400.
    let (s, _, v) = srv
        .post(
            "/sessions",
            json!({ "spec_version": "1.0", "runtime": "vm", "resources": { "memory_mb": 16 } }),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    let (s, _, v) = srv
        .post(
            "/sessions",
            json!({ "spec_version": "1.0", "runtime": "vm", "resources": { "cpu": 2 } }),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
}
