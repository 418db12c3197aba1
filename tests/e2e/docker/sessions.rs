//! Docker sessions: one container for the session's life, uploads into its workspace, runs
//! as execs in it, and no container left after DELETE, a one-shot run or a shutdown. Also
//! what `/runtimes` says, and the refusals (a missing image, .NET).

use reqwest::StatusCode;
use serde_json::json;

use super::{DockerServer, check_docker_record, in_session, oci_runtime, one_shot};
use crate::service::common::{check_stream_rules, stdout, tar_of};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_one_container_that_keeps_its_files_between_runs() {
    let Some(d) = DockerServer::start("session").await else {
        return;
    };
    let sid = d
        .session(
            "python:3.11-slim",
            json!({ "env": { "GREETING": "hi" }, "resources": { "memory_mb": 256, "cpu": 1.5 } }),
        )
        .await;
    assert_eq!(d.containers().await, 1);
    let (s, v) = d.srv.get(&format!("/sessions/{sid}")).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["runtime"], "docker");
    assert!(
        v["image_digest"].as_str().unwrap().starts_with("sha256:"),
        "{v}"
    );
    assert_eq!(v["resources"]["memory_mb"], 256);
    assert_eq!(v["resources"]["cpu"], 1.5);

    // A tar upload lands in /workspace.
    let resp = d
        .srv
        .client
        .post(d.srv.url(&format!("/sessions/{sid}/files")))
        .header("content-type", "application/x-tar")
        .body(tar_of(&[
            ("pkg/data.csv", b"a,b\n1,2\n"),
            (
                "run.py",
                b"import csv\nprint(list(csv.reader(open('pkg/data.csv'))))\n",
            ),
        ]))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);

    let (_, frames, status) = d
        .srv
        .run(in_session(&sid, &["python", "run.py"], json!({})))
        .await;
    check_stream_rules(&frames);
    assert_eq!(status["phase"], "completed", "{status}");
    assert_eq!(stdout(&frames), "[['a', 'b'], ['1', '2']]\n");
    check_docker_record(&status);

    // A run writes, the next one reads; the session's env and the run's own, the cwd.
    let (_, _, status) = d
        .srv
        .run(in_session(
            &sid,
            &["sh", "-c", "echo $GREETING $EXTRA > note.txt"],
            json!({ "env": { "EXTRA": "there" } }),
        ))
        .await;
    assert_eq!(status["phase"], "completed", "{status}");
    let (_, frames, _) = d
        .srv
        .run(in_session(
            &sid,
            &["sh", "-c", "cat ../note.txt; pwd; echo ${EXTRA:-unset}"],
            json!({ "cwd": "pkg" }),
        ))
        .await;
    assert_eq!(stdout(&frames), "hi there\n/workspace/pkg\nunset\n");

    // A cwd that is not there fails before the command runs.
    let (_, _, status) = d
        .srv
        .run(in_session(&sid, &["true"], json!({ "cwd": "nope" })))
        .await;
    assert_eq!(status["reason_code"], "provision_failed", "{status}");

    // Background processes are wasm's only.
    let (s, _, v) = d
        .srv
        .post(
            &format!("/sessions/{sid}/processes"),
            json!({ "command": "sleep 1" }),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");

    let resp = d
        .srv
        .client
        .delete(d.srv.url(&format!("/sessions/{sid}")))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    // The removal is the engine's: wait for it, bounded by the hang guard.
    for _ in 0..600 {
        if d.containers().await == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(d.containers().await, 0);
    d.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtimes_reports_the_engine_and_its_images() {
    let Some(d) = DockerServer::start("runtimes").await else {
        return;
    };
    let docker = d.docker_entry().await;
    assert_eq!(docker["available"], true, "{docker}");
    assert!(!docker["runtime_version"].as_str().unwrap().is_empty());
    assert_eq!(docker["oci_runtime"], oci_runtime());
    let images: Vec<&str> = docker["images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    for repo in [
        "wasmsand/python:3.11",
        "wasmsand/node:18",
        "wasmsand/go:1.19",
        "wasmsand/java:17",
        "wasmsand/generic:debian12",
    ] {
        assert!(
            images.iter().any(|i| i.starts_with(repo)),
            "{repo} in {images:?}"
        );
    }
    assert!(
        docker["default_images"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i.as_str().unwrap().starts_with("python:3.11-slim@sha256:")),
        "{docker}"
    );
    d.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_images_and_dotnet_are_refused_clearly() {
    let Some(d) = DockerServer::with("refusals", |c| {
        c.image_aliases
            .insert("custom:1".into(), "wasmsand/generic:not-built".into());
    })
    .await
    else {
        return;
    };
    // A run on an image that is not built fails, naming the command that builds it.
    let (_, frames, status) = d.srv.run(one_shot("custom:1", &["true"], json!({}))).await;
    check_stream_rules(&frames);
    assert_eq!(status["phase"], "failed");
    assert_eq!(status["reason_code"], "image_pull_failed");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("sandboxd images build generic"),
        "{status}"
    );
    // A session on it is refused at once.
    let (s, _, v) = d
        .srv
        .post(
            "/sessions",
            json!({ "spec_version": "1.0", "runtime": "docker", "base_image": "custom:1" }),
        )
        .await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{v}");
    assert_eq!(v["error"]["code"], "image_pull_failed");
    assert_eq!(
        v["error"]["details"]["build_command"],
        "sandboxd images build generic"
    );
    // .NET has no Debian package.
    for image in ["mcr.microsoft.com/dotnet/sdk:8.0", "dotnet:8"] {
        let (s, _, v) = d
            .srv
            .post("/runs", one_shot(image, &["dotnet", "--info"], json!({})))
            .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
        assert_eq!(v["error"]["details"]["reason"], "no_debian_package", "{v}");
    }
    // An image of the other runtime.
    let (s, _, v) = d
        .srv
        .post("/runs", one_shot("wasmsand/default", &["true"], json!({})))
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    d.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_prd_examples_run_with_docker_names() {
    let Some(d) = DockerServer::start("prd").await else {
        return;
    };
    // Seed 003's own request: no runtime named, the PRD's image name.
    let (_, frames, status) = d
        .srv
        .run(json!({
            "spec_version": "1.0",
            "base_image": "python:3.11-slim",
            "command": ["python", "-c", "print('hello')"],
            "timeout_sec": 30,
            "resources": { "cpu": 1, "memory_mb": 512 },
        }))
        .await;
    assert_eq!(status["phase"], "completed", "{status}");
    assert_eq!(status["runtime"], "docker");
    assert_eq!(stdout(&frames), "hello\n");
    assert_eq!(status["resource_usage"]["limits"]["memory_mb"], 512);
    d.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gvisor_runs_or_is_refused_with_the_reason() {
    let Some(runc) =
        DockerServer::with("runc-hash", |c| c.docker.oci_runtime = "runc".into()).await
    else {
        return;
    };
    let (_, _, runc_run) = runc.srv.run(one_shot("debian", &["true"], json!({}))).await;
    runc.finish().await;
    let Some(d) = DockerServer::with("gvisor", |c| c.docker.oci_runtime = "runsc".into()).await
    else {
        return;
    };
    let (s, _, v) = d
        .srv
        .post("/runs", one_shot("debian", &["echo", "hi"], json!({})))
        .await;
    let docker = d.docker_entry().await;
    assert_eq!(docker["oci_runtime"], "runsc", "{docker}");
    if s == StatusCode::SERVICE_UNAVAILABLE {
        // Debian 12's runsc (2022-12-19): the reason is the probe's, word for word.
        assert_eq!(v["error"]["code"], "runtime_unavailable", "{v}");
        let reason = v["error"]["details"]["reason"].as_str().unwrap();
        assert!(reason.contains("runsc"), "{reason}");
        assert_eq!(docker["available"], false);
        assert_eq!(docker["notes"], reason);
        eprintln!("gVisor refused: {reason}");
    } else {
        assert_eq!(s, StatusCode::OK, "{v}");
        let id = v["run_id"].as_str().unwrap();
        let frames = d.srv.frames(id, "").await;
        let status = d.srv.wait_done(id).await;
        assert_eq!(status["phase"], "completed", "{status}");
        assert_eq!(stdout(&frames), "hi\n");
        assert_eq!(docker["available"], true);
        assert_ne!(status["policy_hash"], runc_run["policy_hash"]);
    }
    // Either way the policy hash says which runtime the policy is.
    let (_, _, wasm_run) = d
        .srv
        .run(crate::service::common::TestServer::one_shot(&["true"]))
        .await;
    assert_ne!(wasm_run["policy_hash"], runc_run["policy_hash"]);
    d.finish().await;
}

/// A `git` input lands in a container's workspace as it does in wasm: the patched tree and its
/// history, before the first command; a session starts with it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_inputs_land_in_the_container_workspace() {
    use crate::service::git::{GitHost, PATCH};
    let host = GitHost::start().await;
    let Some(d) = DockerServer::with("git", |c| {
        c.egress_allowlist =
            wasmsand::egress::EgressPolicy::parse(&wasmsand::egress::EgressAllowlist {
                ips: vec!["127.0.0.1".into()],
                ..Default::default()
            })
            .unwrap();
    })
    .await
    else {
        return;
    };
    let url = format!("http://127.0.0.1:{}/repo.git", host.addr.port());
    let (_, frames, status) = d
        .srv
        .run(one_shot(
            "python:3.11-slim",
            &[
                "sh",
                "-c",
                "cat README.md src/app.py; test -f .git/HEAD && cat .git/shallow",
            ],
            json!({ "git": { "url": url, "patch": PATCH } }),
        ))
        .await;
    super::assert_completed(&status, &frames);
    assert_eq!(
        stdout(&frames),
        format!("hello\npatched\nprint('v2')\n{}\n", host.head)
    );
    let sid = d
        .session(
            "python:3.11-slim",
            json!({ "git": { "url": url, "dir": "repo" } }),
        )
        .await;
    let (_, frames, status) = d
        .srv
        .run(in_session(&sid, &["cat", "repo/src/app.py"], json!({})))
        .await;
    super::assert_completed(&status, &frames);
    assert_eq!(stdout(&frames), "print('v2')\n");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_file_api_works_in_a_container_as_its_run_user() {
    let Some(d) = DockerServer::start("files").await else {
        return;
    };
    let sid = d.session("python:3.11-slim", json!({})).await;
    let s2 = sid.clone();
    crate::service::files::exercise_files(&d.srv, &sid, false, move |line| {
        in_session(&s2, &["bash", "-c", line], json!({}))
    })
    .await;
    // What the API wrote belongs to the run's user, like what a run writes; stdin reaches
    // the container's command.
    use base64::Engine as _;
    let (s, _, _) = d
        .srv
        .post(
            &format!("/sessions/{sid}/files/mkdir"),
            json!({ "path": "mine" }),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    let stdin = base64::engine::general_purpose::STANDARD.encode("from stdin\n");
    let (_, frames, status) = d
        .srv
        .run(in_session(
            &sid,
            &["bash", "-c", "stat -c %u mine; id -u; cat"],
            json!({ "stdin": stdin }),
        ))
        .await;
    assert_eq!(status["phase"], "completed", "{status}");
    let out = stdout(&frames);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert_eq!(lines[0], lines[1], "{out}");
    assert_eq!(lines[2], "from stdin");
    d.finish().await;
}

/// Interactive runs in a container: the exec's stdin (a pipe, no TTY) is fed from the
/// socket's `stdin` frames, so a `read` loop and Python's own `-i` answer line by line, and
/// `stdin_close` is their end of file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interactive_run_in_a_container_reads_its_stdin_from_the_socket() {
    use futures::SinkExt;
    use serde_json::Value;
    use tokio_tungstenite::tungstenite::Message;

    use crate::service::common::read_until;

    let Some(d) = DockerServer::with("interactive", |c| {
        c.interactive_idle_timeout_sec = crate::service::common::GUARD.as_secs();
    })
    .await
    else {
        return;
    };
    let entry = d.docker_entry().await;
    assert_eq!(entry["interactive_supported"], true, "{entry}");
    let sid = d.session("python:3.11-slim", json!({})).await;
    let text = |f: &[Value]| {
        String::from_utf8_lossy(&crate::service::common::output(f, "stdout")).into_owned()
    };
    let line = |t: &str| json!({ "type": "stdin", "encoding": "utf8", "data": t }).to_string();
    for (argv, lines, answers, expected) in [
        (
            &[
                "bash",
                "-c",
                "while read -r l; do echo \"got $l\"; done; echo bye",
            ][..],
            &["one\n", "two\n"][..],
            &["got one\n", "got two\n"][..],
            "got one\ngot two\nbye\n",
        ),
        (
            &["python3", "-q", "-u", "-i"][..],
            &["x = 6 * 7\n", "print(x + 1)\n"][..],
            &["", "43\n"][..],
            "43\n",
        ),
    ] {
        let run = d
            .srv
            .start_run(in_session(&sid, argv, json!({ "interactive": true })))
            .await;
        let id = run["run_id"].as_str().unwrap();
        let mut ws = d.srv.connect(id).await;
        let mut frames = Vec::new();
        for (l, a) in lines.iter().zip(answers) {
            ws.send(Message::Text(line(l).into())).await.unwrap();
            // Each answer comes while stdin is still open.
            read_until(&mut ws, &mut frames, |f| text(f).ends_with(a)).await;
        }
        let close = json!({ "type": "stdin_close" }).to_string();
        ws.send(Message::Text(close.into())).await.unwrap();
        read_until(&mut ws, &mut frames, |f| {
            f.iter().any(|x| x["event"] == "end")
        })
        .await;
        check_stream_rules(&frames);
        assert_eq!(stdout(&frames), expected, "{argv:?}: {frames:?}");
        let closed: Vec<&Value> = frames
            .iter()
            .filter(|f| f["event"] == "stdin_closed")
            .collect();
        assert_eq!(closed.len(), 1, "{frames:?}");
        assert_eq!(closed[0]["data"]["reason"], "client_closed");
        let status = d.srv.wait_done(id).await;
        assert_eq!(status["phase"], "completed", "{argv:?}: {status}");
    }
    d.finish().await;
}
