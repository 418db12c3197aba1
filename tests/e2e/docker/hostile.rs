//! Hostile programs against the real engine (docs/security.md, T-CONTAINER-*): each ends with
//! a clear reason, the service keeps serving, nothing leaves the container, and no container
//! is left over.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;

use super::{DockerServer, gvisor, in_session, one_shot};
use crate::service::common::{TestServer, check_stream_rules, output, stdout};

/// The service still answers, and a wasm run still runs.
async fn still_serving(d: &DockerServer) {
    let (s, _) = d.srv.get("/runtimes").await;
    assert_eq!(s, StatusCode::OK);
    let (_, frames, status) = d.srv.run(TestServer::one_shot(&["echo", "alive"])).await;
    assert_eq!(status["phase"], "completed", "{status}");
    assert_eq!(stdout(&frames), "alive\n");
}

// Threat: T-CONTAINER-EXHAUST
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_bomb_hits_the_pids_limit_and_the_service_stays_up() {
    let Some(d) = DockerServer::with("forkbomb", |c| c.pids_limit = 64).await else {
        return;
    };
    let (_, frames, status) = d
        .srv
        .run(one_shot(
            "debian",
            &[
                "bash",
                "-c",
                "bomb() { bomb | bomb & }; bomb; sleep 3; exit 0",
            ],
            json!({ "timeout_sec": 20 }),
        ))
        .await;
    check_stream_rules(&frames);
    if gvisor() {
        // gVisor emulates processes inside its sentry: a guest fork is not a host task, so the
        // host's pids limit may never refuse one; the run's deadline bounds the bomb.
        assert!(
            matches!(
                status["reason_code"].as_str(),
                Some("pids_limit_exceeded" | "execution_timeout")
            ),
            "{status}"
        );
    } else {
        assert_eq!(status["reason_code"], "pids_limit_exceeded", "{status}");
    }
    assert_eq!(status["resource_usage"]["limits"]["pids"], 64);
    still_serving(&d).await;
    d.finish().await;
}

// Threat: T-CONTAINER-EXHAUST
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_hog_is_oom_killed() {
    let Some(d) = DockerServer::start("oom").await else {
        return;
    };
    let (_, _, status) = d
        .srv
        .run(one_shot(
            "python:3.11-slim",
            &["python", "-c", "x = bytearray(512 << 20); print(len(x))"],
            json!({ "resources": { "memory_mb": 64 }, "timeout_sec": 10 }),
        ))
        .await;
    if gvisor() {
        // Under gVisor either the host's OOM killer reaches the sandbox (`oom_killed`), or the
        // sentry stalls at the cap and the run's deadline ends it (docs/service.md): bounded
        // both ways, and the service goes on.
        let ending = (status["phase"].as_str(), status["reason_code"].as_str());
        assert!(
            matches!(
                ending,
                (Some("failed"), Some("oom_killed"))
                    | (Some("timed_out"), Some("execution_timeout"))
            ),
            "{status}"
        );
    } else {
        assert_eq!(status["phase"], "failed", "{status}");
        assert_eq!(status["reason_code"], "oom_killed", "{status}");
        assert_eq!(status["exit_code"], 137);
    }
    still_serving(&d).await;
    d.finish().await;
}

// Threat: T-CONTAINER-EXHAUST
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_descriptors_stop_at_nofile() {
    let Some(d) = DockerServer::with("nofile", |c| c.ulimit_nofile = 128).await else {
        return;
    };
    let script = "import os\nfds = []\ntry:\n    while True:\n        fds.append(os.open('/dev/null', os.O_RDONLY))\nexcept OSError as e:\n    print(len(fds) < 128, e.strerror)\n";
    let (_, frames, status) = d
        .srv
        .run(one_shot(
            "python:3.11-slim",
            &["python", "-c", script],
            json!({}),
        ))
        .await;
    assert_eq!(status["phase"], "completed", "{status}");
    assert_eq!(stdout(&frames), "True Too many open files\n");
    d.finish().await;
}

// Threat: T-CONTAINER-ESCAPE
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_root_is_read_only_and_privileged_calls_are_denied() {
    let Some(d) = DockerServer::start("escape").await else {
        return;
    };
    let sid = d.session("debian", json!({})).await;
    // gVisor answers EACCES where Linux says EROFS.
    let read_only = if gvisor() {
        "Permission denied"
    } else {
        "Read-only file system"
    };
    for (argv, expect) in [
        (vec!["touch", "/etc/owned"], read_only),
        (
            vec!["mount", "-t", "tmpfs", "x", "/mnt"],
            "must be superuser",
        ),
        (vec!["chroot", "/", "true"], "Operation not permitted"),
        (
            vec!["sh", "-c", "cp /bin/true /workspace/t && /workspace/t"],
            "Permission denied",
        ),
    ] {
        let (_, frames, status) = d.srv.run(in_session(&sid, &argv, json!({}))).await;
        assert_eq!(status["phase"], "failed", "{argv:?}: {status}");
        let err = String::from_utf8_lossy(&output(&frames, "stderr")).to_string();
        assert!(err.contains(expect), "{argv:?}: {err}");
    }
    // No user, no capability, no setuid way up.
    let (_, frames, _) = d
        .srv
        .run(in_session(
            &sid,
            &[
                "sh",
                "-c",
                "id -u; grep CapEff /proc/self/status; grep NoNewPrivs /proc/self/status",
            ],
            json!({}),
        ))
        .await;
    // gVisor writes the status fields without the tab.
    let out = stdout(&frames).replace(":\t", ":");
    let mut lines = out.lines();
    assert_ne!(lines.next(), Some("0"), "{out}");
    assert_eq!(lines.next(), Some("CapEff:0000000000000000"), "{out}");
    // gVisor's /proc has no NoNewPrivs line (the flag is set on the sandbox all the same).
    if !gvisor() {
        assert_eq!(lines.next(), Some("NoNewPrivs:1"), "{out}");
    }
    d.finish().await;
}

// Threat: T-CONTAINER-NET
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn there_is_no_network_and_no_raw_socket() {
    let Some(d) = DockerServer::start("net").await else {
        return;
    };
    // 192.0.2.1 is TEST-NET-1 (documentation only): nothing could answer, and with no route
    // out of the container no packet is sent anywhere.
    let script = r#"
import socket
for f in (lambda: socket.create_connection(('192.0.2.1', 80), timeout=2),
          lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)):
    try:
        f()
        print('allowed')
    except OSError as e:
        print(e.errno, e.strerror)
print(sorted(n for _, n in socket.if_nameindex()))
"#;
    let (_, frames, status) = d
        .srv
        .run(one_shot(
            "python:3.11-slim",
            &["python", "-c", script],
            json!({}),
        ))
        .await;
    assert_eq!(status["phase"], "completed", "{status}");
    // No route either way; gVisor's netstack names it EHOSTUNREACH.
    let unreachable = if gvisor() {
        "113 No route to host"
    } else {
        "101 Network is unreachable"
    };
    assert_eq!(
        stdout(&frames),
        format!("{unreachable}\n1 Operation not permitted\n['lo']\n")
    );
    d.finish().await;
}

// Threat: T-CONTAINER-EXHAUST
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_output_is_cut_at_the_log_cap() {
    let Some(d) = DockerServer::start("flood").await else {
        return;
    };
    let (_, frames, status) = d
        .srv
        .run(one_shot(
            "debian",
            &[
                "sh",
                "-c",
                "yes 0123456789abcdef | head -c 1073741824; echo done >&2",
            ],
            json!({ "timeout_sec": 300 }),
        ))
        .await;
    check_stream_rules(&frames);
    assert_eq!(status["phase"], "completed", "{status}");
    assert_eq!(status["log_truncated"], true);
    assert_eq!(status["resource_usage"]["log_bytes"], 10 * 1024 * 1024);
    let truncated: Vec<_> = frames.iter().filter(|f| f["type"] == "truncated").collect();
    assert_eq!(truncated.len(), 1, "{truncated:?}");
    assert_eq!(truncated[0]["reason"], "log_cap");
    d.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_ignores_term_is_killed_after_the_grace() {
    let Some(d) = DockerServer::with("term", |c| c.cancel_grace_seconds = 1).await else {
        return;
    };
    let sid = d.session("debian", json!({})).await;
    let v = d
        .srv
        .start_run(in_session(
            &sid,
            &[
                "bash",
                "-c",
                "trap 'echo got TERM' TERM; echo ready; while :; do sleep 0.1; done",
            ],
            json!({}),
        ))
        .await;
    let id = v["run_id"].as_str().unwrap().to_string();
    let mut ws = d.srv.connect(&id).await;
    let mut frames = Vec::new();
    crate::service::common::read_until(&mut ws, &mut frames, |f| {
        f.iter().any(|x| x["type"] == "stdout")
    })
    .await;
    let (s, _, _) = d.srv.post(&format!("/runs/{id}/cancel"), json!({})).await;
    assert_eq!(s, StatusCode::ACCEPTED);
    let status = d.srv.wait_done(&id).await;
    assert_eq!(status["phase"], "killed", "{status}");
    assert_eq!(status["message"], "canceled_by_user");
    assert_eq!(status["exit_code"], 137);
    let frames = d.srv.frames(&id, "?from_seq=1").await;
    assert_eq!(stdout(&frames), "ready\ngot TERM\n");
    // The session lives on, with nothing of the run left in it.
    let (_, frames, _) = d
        .srv
        .run(in_session(
            &sid,
            &[
                "sh",
                "-c",
                "ps -u \"$(id -u)\" -o comm= | grep -c sleep || true",
            ],
            json!({}),
        ))
        .await;
    // (The container's own idle `sleep` runs as another user.)
    assert_eq!(stdout(&frames), "0\n");
    d.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_concurrent_runs_across_five_sessions() {
    let Some(d) = DockerServer::start("concurrent").await else {
        return;
    };
    let mut sessions = Vec::new();
    for _ in 0..5 {
        sessions.push(d.session("debian", json!({})).await);
    }
    let mut ids = Vec::new();
    for i in 0..20 {
        let sid = &sessions[i % 5];
        let v = d
            .srv
            .start_run(in_session(
                sid,
                &[
                    "sh",
                    "-c",
                    &format!("echo {i} >> runs.txt; sleep 0.2; echo run {i}"),
                ],
                json!({}),
            ))
            .await;
        ids.push((i, v["run_id"].as_str().unwrap().to_string()));
    }
    for (i, id) in &ids {
        let frames = d.srv.frames(id, "").await;
        let status = d.srv.wait_done(id).await;
        assert_eq!(status["phase"], "completed", "{status}");
        assert_eq!(stdout(&frames), format!("run {i}\n"));
    }
    for (k, sid) in sessions.iter().enumerate() {
        let (_, frames, _) = d
            .srv
            .run(in_session(sid, &["cat", "runs.txt"], json!({})))
            .await;
        let want: String = (0..20)
            .filter(|i| i % 5 == k)
            .map(|i| format!("{i}\n"))
            .collect();
        assert_eq!(stdout(&frames), want, "session {k} ran its runs in order");
    }
    d.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_restart_during_a_run_fails_it_clearly_and_the_service_recovers() {
    let Some(ctl) = std::env::var_os("WASMSAND_TEST_DOCKERD_CTL") else {
        eprintln!(
            "skipped: the engine was not started by scripts/dockerd.sh, so it is not restarted"
        );
        return;
    };
    let Some(d) = DockerServer::start("restart").await else {
        return;
    };
    let sid = d.session("debian", json!({})).await;
    let v = d
        .srv
        .start_run(in_session(
            &sid,
            &["sh", "-c", "echo started; sleep 600"],
            json!({}),
        ))
        .await;
    let id = v["run_id"].as_str().unwrap().to_string();
    let mut ws = d.srv.connect(&id).await;
    let mut frames = Vec::new();
    crate::service::common::read_until(&mut ws, &mut frames, |f| {
        f.iter().any(|x| x["type"] == "stdout")
    })
    .await;
    let restarted = tokio::process::Command::new(&ctl)
        .arg("restart")
        .status()
        .await
        .unwrap();
    assert!(restarted.success());
    let status = d.srv.wait_done(&id).await;
    assert_eq!(status["phase"], "failed", "{status}");
    assert_eq!(status["reason_code"], "exec_failed", "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("Docker engine"),
        "{status}"
    );
    // The session's container died with the engine: its next run says so.
    let (_, _, status) = d.srv.run(in_session(&sid, &["true"], json!({}))).await;
    assert_eq!(status["reason_code"], "provision_failed", "{status}");
    // New work runs once the engine is back.
    let mut ok = false;
    for _ in 0..100 {
        let (_, frames, status) = d
            .srv
            .run(one_shot("debian", &["echo", "back"], json!({})))
            .await;
        if status["phase"] == "completed" {
            assert_eq!(stdout(&frames), "back\n");
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        ok,
        "the docker runtime did not recover after the engine restart"
    );
    let resp = d
        .srv
        .client
        .delete(d.srv.url(&format!("/sessions/{sid}")))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    d.finish().await;
}
