//! `sandboxd mcp` spoken to by a real MCP client (rmcp's): the binary as a stdio child
//! process, and `sandboxd mcp --http` over streamable HTTP.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest,
    ProgressNotificationParam,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RunningService};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// Long enough for a cold module compile on a busy 2-core machine; a healthy answer takes
/// milliseconds.
const PATIENCE: Duration = Duration::from_secs(180);

/// Records every progress notification.
#[derive(Clone)]
struct Recorder {
    tx: mpsc::UnboundedSender<ProgressNotificationParam>,
}

impl ClientHandler for Recorder {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.tx.send(params);
    }
}

struct Client {
    service: RunningService<RoleClient, Recorder>,
    progress: mpsc::UnboundedReceiver<ProgressNotificationParam>,
    /// The `--http` server, killed with the client.
    http_child: Option<Child>,
}

impl Drop for Client {
    fn drop(&mut self) {
        if let Some(c) = self.http_child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn recorder() -> (Recorder, mpsc::UnboundedReceiver<ProgressNotificationParam>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (Recorder { tx }, rx)
}

/// `sandboxd mcp ARGS` as a stdio child process.
async fn stdio(args: &[&str]) -> Client {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_e2e-sandboxd"));
    cmd.arg("mcp").args(args);
    let transport = TokioChildProcess::new(cmd).expect("sandboxd starts");
    let (handler, progress) = recorder();
    let service = within(handler.serve(transport))
        .await
        .expect("MCP handshake over stdio");
    Client {
        service,
        progress,
        http_child: None,
    }
}

/// `sandboxd mcp --http 127.0.0.1:0 ARGS`, and the URL it printed.
fn http_server(args: &[&str]) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_e2e-sandboxd"))
        .args(["mcp", "--http", "127.0.0.1:0"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("sandboxd starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .expect("sandboxd prints its URL");
    let url = line.trim().to_string();
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
        "{url:?}"
    );
    (child, url)
}

async fn http(args: &[&str]) -> Client {
    let (child, url) = http_server(args);
    let (handler, progress) = recorder();
    let transport = StreamableHttpClientTransport::from_uri(url);
    let service = within(handler.serve(transport))
        .await
        .expect("MCP handshake over HTTP");
    Client {
        service,
        progress,
        http_child: Some(child),
    }
}

async fn within<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(PATIENCE, f)
        .await
        .expect("the server answers")
}

impl Client {
    async fn call_result(&self, tool: &str, args: Value) -> CallToolResult {
        let params = CallToolRequestParams::new(tool.to_string())
            .with_arguments(args.as_object().expect("arguments are an object").clone());
        within(self.service.call_tool(params))
            .await
            .unwrap_or_else(|e| panic!("{tool}: {e}"))
    }

    /// A successful call's structured content.
    async fn call(&self, tool: &str, args: Value) -> Value {
        let r = self.call_result(tool, args.clone()).await;
        assert_ne!(r.is_error, Some(true), "{tool}({args}): {r:?}");
        r.structured_content
            .unwrap_or_else(|| panic!("{tool} gave no structured content"))
    }

    /// A failed call's message.
    async fn call_err(&self, tool: &str, args: Value) -> String {
        let r = self.call_result(tool, args.clone()).await;
        assert_eq!(r.is_error, Some(true), "{tool}({args}) should fail: {r:?}");
        text_of(&r)
    }

    async fn run(&self, args: Value) -> Value {
        self.call("sandbox_run", args).await
    }

    async fn new_session(&self) -> String {
        let s = self.call("session_create", json!({})).await;
        s["session_id"].as_str().unwrap().to_string()
    }

    /// The progress notifications of a run whose output was `bytes` long, in `progress` order.
    /// The server sends them all before the result, but rmcp's client hands notifications to
    /// the handler on tasks of their own, so they may still be arriving after the result.
    async fn progress_of(&mut self, bytes: usize) -> Vec<ProgressNotificationParam> {
        let mut all: Vec<ProgressNotificationParam> = Vec::new();
        let mut seen = 0;
        while seen < bytes {
            let p = within(self.progress.recv()).await.expect("a notification");
            seen += p.message.as_deref().map_or(0, str::len);
            all.push(p);
        }
        all.sort_by(|a, b| a.progress.total_cmp(&b.progress));
        all
    }
}

fn text_of(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_are_listed_with_input_and_output_schemas() {
    let c = stdio(&[]).await;
    let info = c.service.peer_info().expect("server info");
    assert!(
        info.instructions
            .as_deref()
            .unwrap_or("")
            .contains("no network")
    );
    let tools = within(c.service.list_all_tools()).await.unwrap();
    let names: BTreeSet<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    let expected: BTreeSet<&str> = [
        "sandbox_run",
        "session_create",
        "session_fork",
        "session_list",
        "session_destroy",
        "files_read",
        "files_write",
        "files_list",
        "snapshot_create",
        "snapshot_restore",
        "sandbox_diff",
        "sandbox_commit",
        "sandbox_discard",
        "sandbox_best_of",
    ]
    .into();
    assert_eq!(names, expected);
    for t in &tools {
        assert_eq!(t.input_schema["type"], "object", "{}", t.name);
        let out = t
            .output_schema
            .as_ref()
            .unwrap_or_else(|| panic!("{}", t.name));
        assert_eq!(out["type"], "object", "{}", t.name);
        assert!(!t.description.as_deref().unwrap_or("").is_empty());
    }
    let run = tools.iter().find(|t| t.name == "sandbox_run").unwrap();
    let props: BTreeSet<&str> = run.input_schema["properties"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        props,
        [
            "command",
            "session_id",
            "files",
            "timeout_ms",
            "env",
            "cwd",
            "stdin",
            "runtime",
            "base_image",
            "preview"
        ]
        .into()
    );
    assert_eq!(run.input_schema["required"], json!(["command"]));
    let d = run.description.as_deref().unwrap();
    for fact in [
        "jq",
        "python3",
        "numpy",
        "pandas",
        "no network",
        "subprocesses",
    ] {
        assert!(d.contains(fact), "{fact} in {d}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_off_runs_get_a_fresh_sandbox_each() {
    let c = stdio(&[]).await;
    let r = c
        .call_result("sandbox_run", json!({"command": "echo hi"}))
        .await;
    let s = r.structured_content.clone().unwrap();
    assert_eq!(s["exit_code"], 0);
    assert_eq!(s["stdout"], "hi\n");
    assert_eq!(s["stderr"], "");
    assert_eq!(s["truncated"], json!({"stdout": false, "stderr": false}));
    assert_eq!(s["error_class"], Value::Null);
    assert_eq!(s["timed_out"], false);
    assert_eq!(s["session_id"], Value::Null);
    assert!(s["duration_ms"].is_u64());
    assert_eq!(s["runtime"], "wasm");
    assert_eq!(s["base_image"], "wasmsand/default");
    // A standalone server keeps no record of its runs.
    assert_eq!(s["run_id"], Value::Null);
    let text = text_of(&r);
    assert!(text.starts_with("hi\n[exit code 0"), "{text}");
    // Naming the wasm sandbox itself is the same run.
    let s = c
        .run(json!({"command": "echo same", "runtime": "wasm", "base_image": "wasmsand/default"}))
        .await;
    assert_eq!(
        (s["stdout"].as_str(), s["runtime"].as_str()),
        (Some("same\n"), Some("wasm"))
    );

    let s = c
        .run(json!({
            "command": "tr a-z A-Z; cat ~/data/in.txt; echo \"$GREETING\"; pwd; exit 3",
            "files": [
                {"path": "data/in.txt", "content": "from a file\n"},
                {"path": "/tmp/bin.dat", "content": "AAEC", "encoding": "base64"}
            ],
            "env": {"GREETING": "hello"},
            "stdin": "shout\n",
            "cwd": "/tmp"
        }))
        .await;
    assert_eq!(s["stdout"], "SHOUT\nfrom a file\nhello\n/tmp\n");
    assert_eq!(s["exit_code"], 3);

    // Nothing of the last sandbox is left.
    let s = c
        .run(json!({"command": "cat data/in.txt; echo ${GREETING:-unset}"}))
        .await;
    assert_eq!(s["exit_code"], 0);
    assert_eq!(s["stdout"], "unset\n");
    assert!(s["stderr"].as_str().unwrap().contains("data/in.txt"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_files_forks_and_snapshots() {
    let c = stdio(&[]).await;
    let created = c
        .call(
            "session_create",
            json!({"files": [{"path": "notes.txt", "content": "v1\n"}],
                   "limits": {"stdout_bytes": 5}}),
        )
        .await;
    let sid = created["session_id"].as_str().unwrap().to_string();
    assert_eq!(created["limits"]["stdout_bytes"], 5);
    assert_eq!(created["limits"]["timeout_ms"], 30_000);

    // State persists between runs; the session's stdout cap applies.
    c.run(json!({"session_id": sid, "command": "X=42; mkdir -p work; cd work"}))
        .await;
    let s = c
        .run(json!({"session_id": sid, "command": "echo $X; pwd; cat ../notes.txt"}))
        .await;
    assert_eq!(s["session_id"], sid.as_str());
    assert_eq!(s["stdout"], "42\n/h");
    assert_eq!(s["truncated"]["stdout"], true);

    // Files: text, binary, listing; relative paths are from the working directory.
    let w = c
        .call(
            "files_write",
            json!({"session_id": sid, "path": "bin.dat", "content": "AP8=", "encoding": "base64"}),
        )
        .await;
    assert_eq!(w["bytes_written"], 2);
    let r = c
        .call("files_read", json!({"session_id": sid, "path": "bin.dat"}))
        .await;
    assert_eq!(r["encoding"], "base64");
    assert_eq!(r["content"], "AP8=");
    c.call(
        "files_write",
        json!({"session_id": sid, "path": "/home/user/work/é.txt", "content": "ünïcode"}),
    )
    .await;
    let r = c
        .call("files_read", json!({"session_id": sid, "path": "é.txt"}))
        .await;
    assert_eq!(r["content"], "ünïcode");
    assert_eq!(r["encoding"], "utf8");
    let l = c
        .call(
            "files_list",
            json!({"session_id": sid, "path": "/home/user"}),
        )
        .await;
    assert_eq!(
        l["entries"],
        json!([
            {"name": "notes.txt", "type": "file", "size": 3},
            {"name": "work", "type": "dir", "size": 0}
        ])
    );

    // Snapshot, change, restore.
    let snap = c.call("snapshot_create", json!({"session_id": sid})).await;
    let snap_id = snap["snapshot_id"].as_str().unwrap().to_string();
    c.run(json!({"session_id": sid, "command": "echo v2 > ../notes.txt; X=changed; cd /"}))
        .await;
    c.call(
        "snapshot_restore",
        json!({"session_id": sid, "snapshot_id": snap_id}),
    )
    .await;
    let s = c
        .run(json!({"session_id": sid, "command": "cat ../notes.txt; echo $X; pwd"}))
        .await;
    assert_eq!(s["stdout"], "v1\n42");

    // A fork is independent of its parent.
    let f = c.call("session_fork", json!({"session_id": sid})).await;
    let fid = f["session_id"].as_str().unwrap().to_string();
    assert_eq!(f["parent_session_id"], sid.as_str());
    assert_ne!(fid, sid);
    c.run(json!({"session_id": fid, "command": "echo fork > /tmp/f; X=fork"}))
        .await;
    let s = c
        .run(json!({"session_id": sid, "command": "cat /tmp/f; echo $X"}))
        .await;
    assert_eq!(s["stdout"], "42\n");
    let s = c
        .run(json!({"session_id": fid, "command": "cat /tmp/f; echo $X"}))
        .await;
    assert_eq!(s["stdout"], "fork\n");

    let list = c.call("session_list", json!({})).await;
    let sessions = list["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 2);
    assert_eq!(sessions[0]["session_id"], sid.as_str());
    assert_eq!(sessions[0]["parent_session_id"], Value::Null);
    assert_eq!(sessions[1]["session_id"], fid.as_str());
    assert_eq!(sessions[1]["parent_session_id"], sid.as_str());

    // Destroyed ids are tool errors, for every tool that takes one.
    c.call("session_destroy", json!({"session_id": sid})).await;
    for (tool, args) in [
        ("sandbox_run", json!({"session_id": sid, "command": "true"})),
        ("files_read", json!({"session_id": sid, "path": "x"})),
        ("files_list", json!({"session_id": sid})),
        ("snapshot_create", json!({"session_id": sid})),
        ("session_fork", json!({"session_id": sid})),
        ("session_destroy", json!({"session_id": sid})),
    ] {
        let e = c.call_err(tool, args).await;
        assert!(e.contains("unknown session_id"), "{tool}: {e}");
    }
    // The fork outlives its parent.
    let s = c
        .run(json!({"session_id": fid, "command": "echo ok"}))
        .await;
    assert_eq!(s["stdout"], "ok\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_a_clear_tool_error_and_the_server_goes_on() {
    let c = stdio(&[]).await;
    let sid = c.new_session().await;
    let cases = [
        ("sandbox_run", json!({}), "missing field `command`"),
        (
            "sandbox_run",
            json!({"command": "true", "timeout": 5}),
            "unknown field `timeout`",
        ),
        (
            "sandbox_run",
            json!({"command": "true", "session_id": "s-nope"}),
            "unknown session_id \"s-nope\"",
        ),
        (
            "sandbox_run",
            json!({"command": "true", "cwd": "/no/such/dir"}),
            "cwd \"/no/such/dir\"",
        ),
        (
            "sandbox_run",
            json!({"command": "true", "env": {"1BAD": "x"}}),
            "invalid variable name",
        ),
        // A standalone server has only its wasm sandbox.
        (
            "sandbox_run",
            json!({"command": "true", "runtime": "docker"}),
            "runtime_unavailable: this MCP server runs commands only in its own wasm sandbox",
        ),
        (
            "sandbox_run",
            json!({"command": "true", "base_image": "python:3.11-slim"}),
            "base_image python:3.11-slim is served by the HTTP service",
        ),
        (
            "sandbox_run",
            json!({"command": "true", "session_id": sid, "runtime": "docker"}),
            "invalid_request: a session runs in this server's wasm sandbox",
        ),
        (
            "files_write",
            json!({"session_id": sid, "path": "a", "content": "%%%", "encoding": "base64"}),
            "not valid base64",
        ),
        (
            "files_write",
            json!({"session_id": sid, "path": "/etc/passwd", "content": "x"}),
            "/etc/passwd",
        ),
        (
            "files_read",
            json!({"session_id": sid, "path": "missing.txt"}),
            "missing.txt",
        ),
        (
            "files_read",
            json!({"session_id": sid, "path": "/home"}),
            "is a directory",
        ),
        (
            "snapshot_restore",
            json!({"session_id": sid, "snapshot_id": "77"}),
            "unknown snapshot_id \"77\"",
        ),
        (
            "session_create",
            json!({"limits": {"memory": 1}}),
            "unknown field `memory`",
        ),
    ];
    for (tool, args, want) in cases {
        let e = c.call_err(tool, args.clone()).await;
        assert!(
            e.contains(want),
            "{tool}({args}): {e:?} should mention {want:?}"
        );
    }
    // An unknown tool is a protocol error (there is no tool to report it).
    let params = CallToolRequestParams::new("sandbox.run")
        .with_arguments(json!({"command": "true"}).as_object().unwrap().clone());
    let e = within(c.service.call_tool(params)).await.unwrap_err();
    assert!(e.to_string().contains("sandbox_run"), "{e}");

    let s = c
        .run(json!({"session_id": sid, "command": "echo fine"}))
        .await;
    assert_eq!(s["stdout"], "fine\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_are_clamped_to_the_server_maximum() {
    let c = stdio(&["--max-timeout-ms", "300"]).await;
    // Asking for ten minutes gets the 300 ms maximum: the sleep cannot finish.
    let s = c
        .run(json!({"command": "echo before; sleep 600; echo after", "timeout_ms": 600_000}))
        .await;
    assert_eq!(s["exit_code"], 124);
    assert_eq!(s["error_class"], "TIMEOUT");
    assert_eq!(s["timed_out"], true);
    assert_eq!(s["stdout"], "before\n");
    let tools = within(c.service.list_all_tools()).await.unwrap();
    let run = tools.iter().find(|t| t.name == "sandbox_run").unwrap();
    assert!(run.description.as_deref().unwrap().contains("up to 300 ms"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_streams_as_progress_and_cancel_stops_the_run() {
    let mut c = stdio(&[]).await;
    let sid = c.new_session().await;

    // Every chunk is streamed; `progress` (bytes so far) orders them, as rmcp's client may
    // hand notifications to the handler out of order. (It also drops their `_meta`: the
    // stream tags, and that every notification precedes the result, are checked on the raw
    // wire in `stdio_server_answers_raw_lines_and_exits_at_end_of_input`.)
    let s = c
        .run(json!({"session_id": sid, "command": "echo out; echo err >&2; echo more"}))
        .await;
    assert_eq!(s["stdout"], "out\nmore\n");
    let progress = c.progress_of("out\nerr\nmore\n".len()).await;
    let mut streamed = String::new();
    for (i, p) in progress.iter().enumerate() {
        streamed.push_str(p.message.as_deref().unwrap());
        assert_eq!(p.progress, streamed.len() as f64, "{progress:?}");
        assert!(i == 0 || progress[i - 1].progress < p.progress);
    }
    assert_eq!(streamed, "out\nerr\nmore\n");

    // A run that would last ten minutes: its first line streams while it runs, then the
    // client cancels it.
    let params = CallToolRequestParams::new("sandbox_run").with_arguments(
        json!({"session_id": sid, "command": "echo started; sleep 600; echo never"})
            .as_object()
            .unwrap()
            .clone(),
    );
    let handle = within(c.service.send_cancellable_request(
        ClientRequest::CallToolRequest(CallToolRequest::new(params)),
        PeerRequestOptions::no_options(),
    ))
    .await
    .expect("request sent");
    let token = handle.progress_token.clone();
    let first = within(c.progress.recv())
        .await
        .expect("a progress notification");
    assert_eq!(first.progress_token, token);
    assert_eq!(first.message.as_deref(), Some("started\n"));
    within(handle.cancel(Some("test".into())))
        .await
        .expect("cancel sent");

    // The session is usable, and its last status is the cancelled run's.
    let s = c
        .run(json!({"session_id": sid, "command": "echo $?; echo alive"}))
        .await;
    assert_eq!(s["stdout"], "130\nalive\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_caps_and_idle_expiry() {
    let c = stdio(&["--max-sessions-per-client", "2"]).await;
    let a = c.new_session().await;
    c.new_session().await;
    let e = c.call_err("session_create", json!({})).await;
    assert!(e.contains("maximum of 2 live sessions"), "{e}");
    // A forked session counts as well.
    let e = c.call_err("session_fork", json!({"session_id": a})).await;
    assert!(e.contains("maximum of 2"), "{e}");
    c.call("session_destroy", json!({"session_id": a})).await;
    c.new_session().await;

    // Idle sessions go away on their own; the reaper's pace is not part of the contract, so
    // this waits (up to PATIENCE) instead of asserting a moment.
    let c = stdio(&["--session-idle-ms", "200"]).await;
    let a = c.new_session().await;
    let deadline = Instant::now() + PATIENCE;
    loop {
        let list = c.call("session_list", json!({})).await;
        if list["sessions"].as_array().unwrap().is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "sessions never expired: {list}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let e = c
        .call_err("sandbox_run", json!({"session_id": a, "command": "true"}))
        .await;
    assert!(e.contains("unknown session_id"), "{e}");
    assert!(e.contains("expired after 0.2 s idle"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamable_http_end_to_end() {
    let mut c = http(&[]).await;
    let tools = within(c.service.list_all_tools()).await.unwrap();
    assert_eq!(tools.len(), 14);

    let s = c.run(json!({"command": "echo hi"})).await;
    assert_eq!(s["stdout"], "hi\n");
    c.progress_of(3).await;

    let sid = c.new_session().await;
    c.call(
        "files_write",
        json!({"session_id": sid, "path": "f.txt", "content": "over http"}),
    )
    .await;
    let s = c
        .run(json!({"session_id": sid, "command": "cat f.txt; echo; echo e >&2"}))
        .await;
    assert_eq!(s["stdout"], "over http\n");
    let progress = c.progress_of("over http\ne\n".len()).await;
    let streamed: String = progress.iter().filter_map(|p| p.message.clone()).collect();
    assert_eq!(streamed, "over http\ne\n", "{progress:?}");

    let e = c
        .call_err("files_read", json!({"session_id": "s-0", "path": "f.txt"}))
        .await;
    assert!(e.contains("unknown session_id"), "{e}");
    c.call("session_destroy", json!({"session_id": sid})).await;
    let list = c.call("session_list", json!({})).await;
    assert_eq!(list["sessions"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_cancel_stops_the_run() {
    let mut c = http(&[]).await;
    let sid = c.new_session().await;
    let params = CallToolRequestParams::new("sandbox_run").with_arguments(
        json!({"session_id": sid, "command": "echo started; sleep 600"})
            .as_object()
            .unwrap()
            .clone(),
    );
    let handle = within(c.service.send_cancellable_request(
        ClientRequest::CallToolRequest(CallToolRequest::new(params)),
        PeerRequestOptions::no_options(),
    ))
    .await
    .expect("request sent");
    let first = within(c.progress.recv()).await.expect("progress");
    assert_eq!(first.message.as_deref(), Some("started\n"));
    within(handle.cancel(None)).await.expect("cancel sent");
    let s = c
        .run(json!({"session_id": sid, "command": "echo $?"}))
        .await;
    assert_eq!(s["stdout"], "130\n");
}

/// One raw HTTP/1.1 POST of an `initialize` request; the status code.
fn post_initialize(port: u16, host: &str, origin: Option<&str>) -> u16 {
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "0"}}
    })
    .to_string();
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let origin = origin
        .map(|o| format!("Origin: {o}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\n{origin}Content-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut head = [0u8; 12];
    s.read_exact(&mut head).unwrap();
    let status = String::from_utf8_lossy(&head[9..12]).to_string();
    status.parse().unwrap()
}

// Threat: T-BROWSER-REBIND (docs/security.md)
#[test]
fn http_accepts_only_allowed_hosts_and_origins() {
    let (mut child, url) = http_server(&[]);
    let port: u16 = url
        .trim_start_matches("http://127.0.0.1:")
        .trim_end_matches("/mcp")
        .parse()
        .unwrap();
    let here = format!("127.0.0.1:{port}");
    assert_eq!(post_initialize(port, &here, None), 200);
    assert_eq!(
        post_initialize(port, &format!("localhost:{port}"), None),
        200
    );
    assert_eq!(post_initialize(port, "evil.example", None), 403);
    assert_eq!(
        post_initialize(port, &here, Some("https://evil.example")),
        403
    );
    assert_eq!(
        post_initialize(port, &here, Some(&format!("http://localhost:{port}"))),
        200
    );
    let _ = child.kill();
    let _ = child.wait();

    let (mut child, url) = http_server(&["--allowed-host", "sandbox.internal"]);
    let port: u16 = url
        .trim_start_matches("http://127.0.0.1:")
        .trim_end_matches("/mcp")
        .parse()
        .unwrap();
    assert_eq!(post_initialize(port, "sandbox.internal", None), 200);
    assert_eq!(
        post_initialize(port, &format!("127.0.0.1:{port}"), None),
        403
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// The operator's `--mount`: every session sees the folder (secrets hidden), a preview is
/// committed, best-of-N keeps one attempt, and the diff is a patch real `git apply` takes;
/// the folder itself is never written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_mount_with_previews_best_of_and_a_diff() {
    let host = tempfile::tempdir().unwrap();
    std::fs::write(host.path().join("app.sh"), "echo v1\n").unwrap();
    std::fs::write(host.path().join(".env"), "TOKEN=x\n").unwrap();
    let spec = format!("{}:proj", host.path().display());
    let c = stdio(&["--mount", &spec, "--max-best-of", "3"]).await;
    let info = c.service.peer_info().expect("server info");
    let instructions = info.instructions.as_deref().unwrap_or("");
    assert!(instructions.contains("/home/user/proj"), "{instructions}");

    let sid = c.new_session().await;
    let ls = c
        .run(json!({"session_id": sid, "command": "ls -A proj"}))
        .await;
    assert_eq!(ls["stdout"], "app.sh\n");
    let preview = c
        .run(json!({"session_id": sid, "preview": true, "command": "echo 'echo v2' > proj/app.sh"}))
        .await;
    let pid = preview["preview"]["preview_id"].as_str().unwrap();
    c.call("sandbox_commit", json!({"preview_id": pid})).await;

    let best = c
        .call(
            "sandbox_best_of",
            json!({"session_id": sid, "attempts": [
                {"command": "echo \"echo $V\" > proj/app.sh && bash proj/app.sh", "env": {"V": "v3"}},
                {"command": "echo \"echo $V\" > proj/app.sh && bash proj/app.sh", "env": {"V": "v4"}},
            ]}),
        )
        .await;
    let attempts = best["attempts"].as_array().unwrap();
    assert_eq!(attempts[0]["stdout"], "v3\n");
    assert_eq!(attempts[1]["stdout"], "v4\n");
    let keep = attempts[1]["preview_id"].as_str().unwrap();
    let drop = attempts[0]["preview_id"].as_str().unwrap();
    c.call("sandbox_commit", json!({"preview_id": keep})).await;
    c.call("sandbox_discard", json!({"preview_ids": [drop]}))
        .await;

    let diff = c.call("sandbox_diff", json!({"session_id": sid})).await;
    let patch = diff["patch"].as_str().unwrap();
    assert!(patch.contains("-echo v1\n+echo v4\n"), "{patch}");
    let copy = tempfile::tempdir().unwrap();
    std::fs::copy(host.path().join("app.sh"), copy.path().join("app.sh")).unwrap();
    let mut git = Command::new("git")
        .args(["apply", "-"])
        .current_dir(copy.path())
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    git.stdin
        .take()
        .unwrap()
        .write_all(patch.as_bytes())
        .unwrap();
    assert!(git.wait().unwrap().success());
    assert_eq!(
        std::fs::read_to_string(copy.path().join("app.sh")).unwrap(),
        "echo v4\n"
    );
    assert_eq!(
        std::fs::read_to_string(host.path().join("app.sh")).unwrap(),
        "echo v1\n"
    );
}

#[test]
fn mounts_are_refused_with_a_service_and_a_missing_folder_stops_the_server() {
    for (args, expect) in [
        (
            vec![
                "mcp",
                "--mount",
                "/tmp:x",
                "--service",
                "http://127.0.0.1:9/mcp",
            ],
            "does not apply with --service",
        ),
        (
            vec!["mcp", "--mount", "/nonexistent-wasmsand-folder:x"],
            "/nonexistent-wasmsand-folder",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_e2e-sandboxd"))
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(expect), "{args:?}: {stderr}");
    }
}

#[test]
fn allowed_hosts_need_http() {
    let out = Command::new(env!("CARGO_BIN_EXE_e2e-sandboxd"))
        .args(["mcp", "--allowed-host", "x"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("only with --http"));
}

#[test]
fn stdio_server_answers_raw_lines_and_exits_at_end_of_input() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_e2e-sandboxd"))
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let send = |stdin: &mut std::process::ChildStdin, v: Value| {
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    };
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}}),
    );
    let init: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(init["id"], 1);
    assert_eq!(init["result"]["serverInfo"]["name"], "wasmsand");
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "sandbox_run", "arguments": {"command": "echo raw; echo oops >&2"},
            "_meta": {"progressToken": "tok"}}}),
    );
    let mut read = || -> Value { serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap() };
    for (stream, text, progress) in [("stdout", "raw\n", 4.0), ("stderr", "oops\n", 9.0)] {
        let n = read();
        assert_eq!(n["method"], "notifications/progress", "{n}");
        assert_eq!(n["params"]["progressToken"], "tok");
        assert_eq!(n["params"]["message"], text);
        assert_eq!(n["params"]["progress"], progress);
        assert_eq!(n["params"]["_meta"]["wasmsand/stream"], stream);
    }
    let answer = read();
    assert_eq!(answer["id"], 2);
    assert_eq!(answer["result"]["structuredContent"]["stdout"], "raw\n");
    assert_eq!(answer["result"]["isError"], false);
    drop(stdin);
    assert!(lines.next().is_none(), "nothing after the answers");
    assert!(child.wait().unwrap().success());
}

/// `sandboxd mcp --egress-allowlist`: the sandboxes reach what it allows with curl (a real HTTP
/// server on loopback) and nothing else; the tool description says what is allowed; a bad list
/// stops the server at start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_egress_allowlist_opens_the_network_that_far() {
    let app = axum::Router::new().route(
        "/hello",
        axum::routing::get(|| async { "hello from loopback\n" }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await });

    let c = stdio(&["--egress-allowlist", r#"{"ips": ["127.0.0.1"]}"#]).await;
    let tools = within(c.service.list_all_tools()).await.unwrap();
    let run = tools.iter().find(|t| t.name == "sandbox_run").unwrap();
    let d = run.description.as_deref().unwrap();
    assert!(
        d.contains("egress allowlist allows: addresses 127.0.0.1"),
        "{d}"
    );
    let s = c
        .run(json!({"command": format!("curl -s http://127.0.0.1:{port}/hello")}))
        .await;
    assert_eq!(s["stdout"], "hello from loopback\n", "{s}");
    let s = c
        .run(json!({"command": "curl -sS http://other.test/"}))
        .await;
    assert_eq!(s["exit_code"], 7, "{s}");
    assert!(
        s["stderr"]
            .as_str()
            .unwrap()
            .contains("host other.test not in allowlist (allowlist: ips 127.0.0.1)"),
        "{s}"
    );

    let out = Command::new(env!("CARGO_BIN_EXE_e2e-sandboxd"))
        .args(["mcp", "--egress-allowlist", r#"{"hosts": ["*.com"]}"#])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--egress-allowlist: hosts: '*.com'"),
        "{out:?}"
    );
}

/// `sandboxd mcp --sandbox-run-tool`: seed 003's `sandbox.run` over stdio, where no service
/// keeps a record (run_id, log_stream_url, policy_hash and image_digest are null).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_tool_runs_over_stdio_when_turned_on() {
    let c = stdio(&["--sandbox-run-tool"]).await;
    let out = c
        .call(
            "sandbox.run",
            json!({ "base_image": "wasmsand/default", "command": ["printf", "%s|", "a b", "$c"] }),
        )
        .await;
    assert_eq!(out["stdout"], "a b|$c|", "{out}");
    for k in ["run_id", "log_stream_url", "policy_hash", "image_digest"] {
        assert!(out[k].is_null(), "{k}: {out}");
    }
    let err = c
        .call_err("sandbox.run", json!({ "command": "true" }))
        .await;
    assert!(err.contains("base_image is required"), "{err}");
}
