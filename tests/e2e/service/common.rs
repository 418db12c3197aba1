use std::time::Duration;

use futures::StreamExt;
use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use wasmsand_server::{Config, Server};

pub const BASE: &str = "/api/v1/sandbox";

pub type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Reads frames into `frames` until `done` holds for them (or the stream ends).
pub async fn read_until(ws: &mut Ws, frames: &mut Vec<Value>, done: impl Fn(&[Value]) -> bool) {
    let read = async {
        while !done(frames) {
            match ws.next().await {
                Some(Ok(Message::Text(t))) => frames.push(serde_json::from_str(&t).unwrap()),
                Some(Ok(Message::Close(_))) | None => break,
                Some(Ok(_)) => {}
                Some(Err(e)) => panic!("websocket error: {e}"),
            }
        }
    };
    tokio::time::timeout(GUARD, read)
        .await
        .expect("stream stuck");
}

/// A hang guard for loops that wait on the server: generous (a first `python3` on a fresh
/// machine compiles CPython for minutes), so it only fires when something is broken, never
/// as a performance assertion.
pub const GUARD: Duration = Duration::from_secs(900);

pub struct TestServer {
    pub addr: std::net::SocketAddr,
    pub client: reqwest::Client,
    pub dir: tempfile::TempDir,
    pub app: std::sync::Arc<wasmsand_server::App>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    handle: Option<tokio::task::JoinHandle<()>>,
}

/// The service's defaults in `dir`, with the docker and vm runtimes off: whether an engine
/// runs, or a disk image was built, on the machine must not change what these tests see (the
/// `docker` and `service::vm` modules turn them on).
pub fn test_config(dir: &std::path::Path) -> Config {
    let mut config = Config {
        data_dir: dir.to_path_buf(),
        ..Config::default()
    };
    config.docker.enabled = false;
    config.vm.enabled = false;
    config
}

impl TestServer {
    pub async fn start() -> TestServer {
        Self::with(|_| {}).await
    }

    pub async fn with(f: impl FnOnce(&mut Config)) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        let mut config = test_config(dir.path());
        f(&mut config);
        Self::start_in(dir, config).await
    }

    pub async fn start_in(dir: tempfile::TempDir, config: Config) -> TestServer {
        let server = Server::bind(config, "127.0.0.1:0").await.unwrap();
        let addr = server.local_addr();
        let app = server.app.clone();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let handle = tokio::spawn(async move {
            server
                .serve(async move {
                    let _ = rx.await;
                })
                .await
                .unwrap();
        });
        TestServer {
            addr,
            client: reqwest::Client::new(),
            dir,
            app,
            stop: Some(tx),
            handle: Some(handle),
        }
    }

    /// Graceful shutdown, waiting for the server to finish.
    pub async fn stop(mut self) -> tempfile::TempDir {
        self.shut_down().await;
        let dir = tempfile::tempdir().unwrap();
        std::mem::replace(&mut self.dir, dir)
    }

    /// Graceful shutdown in place (for a holder that cannot give the server up).
    pub async fn shut_down(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(h) = self.handle.take() {
            let _ = tokio::time::timeout(GUARD, h).await;
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{BASE}{path}", self.addr)
    }

    pub fn ws_url(&self, path: &str) -> String {
        format!("ws://{}{BASE}{path}", self.addr)
    }

    pub async fn post(&self, path: &str, body: Value) -> (StatusCode, HeaderMap, Value) {
        self.post_with(path, body, &[]).await
    }

    pub async fn post_with(
        &self,
        path: &str,
        body: Value,
        headers: &[(&str, &str)],
    ) -> (StatusCode, HeaderMap, Value) {
        let mut req = self.client.post(self.url(path)).json(&body);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status();
        let headers = resp.headers().clone();
        let text = resp.text().await.unwrap();
        let v = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        (status, headers, v)
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        let resp = self.client.get(self.url(path)).send().await.unwrap();
        let status = resp.status();
        let text = resp.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    pub async fn session(&self, extra: Value) -> String {
        let mut body = json!({ "spec_version": "1.0" });
        if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                b.insert(k.clone(), v.clone());
            }
        }
        let (s, _, v) = self.post("/sessions", body).await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
        v["session_id"].as_str().unwrap().to_string()
    }

    /// POST /runs; panics unless it was accepted.
    pub async fn start_run(&self, body: Value) -> Value {
        let (s, _, v) = self.post("/runs", body).await;
        assert!(s == StatusCode::OK || s == StatusCode::ACCEPTED, "{s}: {v}");
        v
    }

    /// A one-shot run of argv in the default image.
    pub fn one_shot(argv: &[&str]) -> Value {
        json!({ "spec_version": "1.0", "base_image": "wasmsand/default", "command": argv })
    }

    pub fn script(script: &str) -> Value {
        Self::one_shot(&["bash", "-c", script])
    }

    /// Polls the status until the run is in a terminal phase.
    pub async fn wait_done(&self, run_id: &str) -> Value {
        self.wait_phase(run_id, |p| {
            matches!(p, "completed" | "failed" | "timed_out" | "killed")
        })
        .await
    }

    pub async fn wait_phase(&self, run_id: &str, want: impl Fn(&str) -> bool) -> Value {
        let started = std::time::Instant::now();
        loop {
            let (s, v) = self.get(&format!("/runs/{run_id}")).await;
            assert_eq!(s, StatusCode::OK, "{v}");
            if want(v["phase"].as_str().unwrap_or("")) {
                return v;
            }
            assert!(started.elapsed() < GUARD, "run {run_id} stuck: {v}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Every frame of a run's stream from `query` on, until the server closes it.
    pub async fn frames(&self, run_id: &str, query: &str) -> Vec<Value> {
        let url = self.ws_url(&format!("/runs/{run_id}/stream{query}"));
        let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
        let mut frames = Vec::new();
        let collect = async {
            while let Some(msg) = ws.next().await {
                match msg.unwrap() {
                    Message::Text(t) => {
                        assert!(t.len() <= 64 * 1024, "frame of {} bytes", t.len());
                        frames.push(serde_json::from_str::<Value>(&t).unwrap());
                    }
                    Message::Close(_) => break,
                    Message::Binary(_) => panic!("binary frames are never sent"),
                    _ => {}
                }
            }
        };
        tokio::time::timeout(GUARD, collect)
            .await
            .expect("stream never ended");
        frames
    }

    /// A WebSocket on a run's stream.
    pub async fn connect(&self, run_id: &str) -> Ws {
        let url = self.ws_url(&format!("/runs/{run_id}/stream"));
        tokio_tungstenite::connect_async(url).await.unwrap().0
    }

    /// Runs to the end; returns the run id, its frames and its final status.
    pub async fn run(&self, body: Value) -> (String, Vec<Value>, Value) {
        let v = self.start_run(body).await;
        let id = v["run_id"].as_str().unwrap().to_string();
        let frames = self.frames(&id, "").await;
        let status = self.wait_done(&id).await;
        (id, frames, status)
    }
}

/// A tar of regular files (mode 0644), as an upload body.
pub fn tar_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (path, data) in entries {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_entry_type(tar::EntryType::Regular);
        h.set_path(path).unwrap();
        h.set_cksum();
        b.append(&h, *data).unwrap();
    }
    b.into_inner().unwrap()
}

/// The concatenated utf8 (or decoded base64) data of one stream's frames.
pub fn output(frames: &[Value], stream: &str) -> Vec<u8> {
    use base64::Engine;
    let mut out = Vec::new();
    for f in frames.iter().filter(|f| f["type"] == stream) {
        let data = f["data"].as_str().unwrap();
        match f["encoding"].as_str().unwrap() {
            "utf8" => out.extend_from_slice(data.as_bytes()),
            "base64" => out.extend(
                base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .unwrap(),
            ),
            e => panic!("unknown encoding {e}"),
        }
    }
    out
}

pub fn stdout(frames: &[Value]) -> String {
    String::from_utf8(output(frames, "stdout")).unwrap()
}

/// The frames obey the stream rules: seq strictly increasing, exactly one `end`, last; a
/// `resume` note has the seq of the frame after it (seed 003: `seq: delivered_from_seq`).
pub fn check_stream_rules(frames: &[Value]) {
    let mut last = 0;
    for (i, f) in frames.iter().enumerate() {
        let seq = f["seq"].as_u64().expect("every frame has a seq");
        if f["event"] == "resume" {
            assert_eq!(f["data"]["delivered_from_seq"], seq, "{f}");
            let next = frames.get(i + 1).expect("a frame after a resume note");
            assert_eq!(next["seq"], seq, "{frames:?}");
            assert!(seq > last, "resume note {seq} after {last}: {frames:?}");
            continue;
        }
        assert!(seq > last, "seq {seq} after {last}: {frames:?}");
        last = seq;
    }
    let ends = frames.iter().filter(|f| f["event"] == "end").count();
    assert_eq!(ends, 1, "{frames:?}");
    assert_eq!(frames.last().unwrap()["event"], "end");
}
