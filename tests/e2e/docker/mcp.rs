//! The service's `/mcp` runs `sandbox_run` calls that name a Docker image in a container, with
//! rmcp's own client: files, variables and stdin reach the program, its output streams as
//! progress notifications, the run is the service's (its record, `source: mcp`), a timeout and
//! a cancellation end it as MCP says, output is cut at the MCP server's cap, and nothing is
//! left behind.

use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequest, ClientRequest, ProgressNotificationParam};
use rmcp::service::{PeerRequestOptions, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Value, json};

use super::DockerServer;
use crate::service::mcp::{Recorder, tool};

const PATIENCE: Duration = Duration::from_secs(300);

type Client = RunningService<rmcp::RoleClient, Recorder>;

async fn connect(
    d: &DockerServer,
) -> (
    Client,
    tokio::sync::mpsc::UnboundedReceiver<ProgressNotificationParam>,
) {
    let (tx, progress) = tokio::sync::mpsc::unbounded_channel();
    let url = format!("http://{}/mcp", d.srv.addr);
    let client = tokio::time::timeout(
        PATIENCE,
        Recorder { tx }.serve(StreamableHttpClientTransport::from_uri(url)),
    )
    .await
    .expect("handshake in time")
    .expect("handshake");
    (client, progress)
}

/// A call's structured result; panics with the text of a tool error.
async fn run(client: &Client, args: Value) -> Value {
    let r = tokio::time::timeout(PATIENCE, client.call_tool(tool("sandbox_run", args)))
        .await
        .expect("the call ends in time")
        .expect("the call is answered");
    assert_ne!(r.is_error, Some(true), "tool error: {:?}", r.content);
    r.structured_content.expect("a structured result")
}

/// A call's tool error, as text.
async fn refused(client: &Client, args: Value) -> String {
    let r = client.call_tool(tool("sandbox_run", args)).await.unwrap();
    assert_eq!(r.is_error, Some(true), "{r:?}");
    format!("{:?}", r.content)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_runs_a_python_program_in_a_container() {
    let Some(d) = DockerServer::start("mcp-python").await else {
        return;
    };
    let (client, _progress) = connect(&d).await;
    let tools = client.list_all_tools().await.unwrap();
    let run_tool = tools.iter().find(|t| t.name == "sandbox_run").unwrap();
    let props = &run_tool.input_schema["properties"];
    assert!(props.get("runtime").is_some() && props.get("base_image").is_some());
    let described = run_tool.description.as_deref().unwrap_or("");
    assert!(
        described.contains("runtime docker") && described.contains("python:3.11-slim"),
        "{described}"
    );

    let program = "import os, sys\n\
                   data = sys.stdin.read()\n\
                   print(data.upper(), flush=True)\n\
                   print(os.environ['GREETING'], os.getcwd(), sys.version_info[:2] >= (3, 11))\n\
                   raise ValueError('bad ' + data)\n";
    let out = run(
        &client,
        json!({
            "base_image": "python:3.11-slim",
            "command": "python3 main.py",
            "files": [{"path": "main.py", "content": program}],
            "env": {"GREETING": "hello"},
            "stdin": "abc",
        }),
    )
    .await;
    assert_eq!(out["exit_code"], 1, "{out}");
    assert_eq!(out["stdout"], "ABC\nhello /workspace True\n", "{out}");
    let stderr = out["stderr"].as_str().unwrap();
    assert!(
        stderr.contains("Traceback") && stderr.contains("ValueError: bad abc"),
        "{out}"
    );
    assert_eq!(out["runtime"], "docker");
    assert_eq!(out["base_image"], "python:3.11-slim");
    assert_eq!(out["error_class"], Value::Null);
    assert_eq!(out["timed_out"], false);
    assert!(out["duration_ms"].as_u64().unwrap() > 0, "{out}");

    // The run is the service's, with the record a REST run has.
    let run_id = out["run_id"].as_str().expect("run_id").to_string();
    let (s, status) = d.srv.get(&format!("/runs/{run_id}")).await;
    assert_eq!(s, reqwest::StatusCode::OK, "{status}");
    super::check_docker_record(&status);
    assert_eq!(status["phase"], "failed", "{status}");
    assert_eq!(status["reason_code"], "nonzero_exit", "{status}");
    assert_eq!(status["base_image"], "python:3.11-slim", "{status}");
    assert_eq!(status["command"], json!(["bash", "-c", "python3 main.py"]));

    // Asking by runtime alone takes that runtime's default image.
    let out = run(
        &client,
        json!({"runtime": "docker", "command": "cat /etc/debian_version >/dev/null && echo $HOME:$(id -u)"}),
    )
    .await;
    assert_eq!(out["exit_code"], 0, "{out}");
    assert!(out["stdout"].as_str().unwrap().ends_with('\n'), "{out}");
    assert_ne!(out["base_image"], "", "{out}");

    // What cannot run is a tool error naming the reason, and the client goes on.
    let e = refused(
        &client,
        json!({"runtime": "docker", "base_image": "mcr.microsoft.com/dotnet/sdk:8.0", "command": "dotnet --info"}),
    )
    .await;
    assert!(e.contains("invalid_request:") && e.contains(".NET"), "{e}");
    let e = refused(
        &client,
        json!({"runtime": "docker", "base_image": "python:3.11-slim", "command": "true", "cwd": "nowhere"}),
    )
    .await;
    assert!(e.contains("cwd 'nowhere' is not a directory"), "{e}");
    let e = refused(
        &client,
        json!({"base_image": "python:3.11-slim", "command": "true", "files": [{"path": "../x", "content": "x"}]}),
    )
    .await;
    assert!(e.contains("invalid_request: files:"), "{e}");

    client.cancel().await.unwrap();
    d.finish().await;
}

/// Output streams while the command runs; a cancelled run ends at once and removes its
/// container; a timeout is `TIMEOUT` with exit code 124; output past the MCP server's cap is
/// cut and flagged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_container_runs_stream_stop_and_cap() {
    // No warm pool: the containers on the engine are exactly the runs'.
    let Some(d) = DockerServer::with("mcp-stream", |c| c.docker.pool_size = 0).await else {
        return;
    };
    let (client, mut progress) = connect(&d).await;

    let handle = client
        .send_cancellable_request(
            ClientRequest::CallToolRequest(CallToolRequest::new(tool(
                "sandbox_run",
                json!({
                    "base_image": "node:20",
                    "command": "node -e \"console.log('started'); setTimeout(() => console.log('never'), 600000)\"",
                }),
            ))),
            PeerRequestOptions::no_options(),
        )
        .await
        .expect("request sent");
    let first = tokio::time::timeout(PATIENCE, progress.recv())
        .await
        .expect("progress in time")
        .expect("a progress notification");
    assert_eq!(first.progress_token, handle.progress_token);
    assert_eq!(first.message.as_deref(), Some("started\n"));
    assert_eq!(d.containers().await, 1);
    handle
        .cancel(Some("test".into()))
        .await
        .expect("cancel sent");
    // The service's record says so, and the container goes.
    let t0 = std::time::Instant::now();
    loop {
        let (_, list) = d.srv.get("/admin/runs?limit=1&sort=started_at:desc").await;
        let newest = &list["items"][0];
        if newest["phase"] == "killed" && d.containers().await == 0 {
            assert_eq!(newest["runtime"], "docker", "{newest}");
            break;
        }
        assert!(
            t0.elapsed() < PATIENCE,
            "the cancelled run goes on: {newest}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let out = run(
        &client,
        json!({
            "base_image": "python:3.11-slim",
            "command": "echo first; sleep 60; echo never",
            "timeout_ms": 1500,
        }),
    )
    .await;
    assert_eq!(out["exit_code"], 124, "{out}");
    assert_eq!(out["error_class"], "TIMEOUT", "{out}");
    assert_eq!(out["timed_out"], true, "{out}");
    assert_eq!(out["stdout"], "first\n", "{out}");
    assert!(
        out["stderr"].as_str().unwrap().contains("timeout_sec (2s)"),
        "{out}"
    );

    // 8 MiB written, the MCP server's cap kept.
    let out = run(
        &client,
        json!({"base_image": "debian", "command": "head -c 8388608 /dev/zero | tr '\\0' x; echo done >&2"}),
    )
    .await;
    assert_eq!(out["exit_code"], 0, "{out:.200}");
    // The MCP server's stdout cap: the default limits' 1 MiB.
    let cap = 1 << 20;
    let stdout = out["stdout"].as_str().unwrap();
    assert_eq!(stdout.len(), cap);
    assert!(stdout.bytes().all(|b| b == b'x'));
    assert_eq!(out["truncated"], json!({"stdout": true, "stderr": false}));
    assert_eq!(out["stderr"], "done\n");

    client.cancel().await.unwrap();
    d.finish().await;
}
