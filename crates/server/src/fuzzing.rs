//! The service's decoders of what clients send, opened to the fuzz targets of `crates/fuzz`
//! (and to the replay of their corpora in the ordinary tests): the upload expanders, the
//! artifact `Range` header and a run stream's client frames. Each entry point runs the same
//! code a request runs, without a listening socket, so a fuzzer reaches it thousands of
//! times a second. Not an API: nothing here is stable.

use std::sync::{Arc, OnceLock};

use axum::body::Body;
use axum::extract::Request;
use axum::extract::ws::Message;
use axum::http::{HeaderValue, header};

use crate::App;
use crate::interactive::Interactive;
use crate::logs::RunLog;
use crate::store::StdinLimits;
pub use crate::upload::Caps;
use crate::ws::{Client, ClientInput};

/// Why a decoder refused its input: the HTTP status and the error code the client gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The response's status.
    pub status: u16,
    /// The envelope's `error.code`.
    pub code: String,
    /// The envelope's message.
    pub message: String,
    /// `details.reason` when the error has one (`absolute_path`, `too_large`, ...).
    pub reason: Option<String>,
    /// The `Content-Range` header sent with it, if any.
    pub content_range: Option<String>,
}

fn refusal(e: crate::error::ApiError) -> Refusal {
    Refusal {
        status: e.status.as_u16(),
        code: e.code.as_str().to_string(),
        reason: e
            .details
            .get("reason")
            .and_then(|r| r.as_str())
            .map(str::to_string),
        content_range: e
            .headers
            .iter()
            .find(|(k, _)| *k == header::CONTENT_RANGE)
            .map(|(_, v)| v.clone()),
        message: e.message,
    }
}

/// An upload as `POST /sessions/{id}/files` would stage it before writing anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Staged {
    /// `multipart`, `tar`, `tar.gz` or `zip`.
    pub kind: &'static str,
    /// Directories to create, relative to the workspace.
    pub dirs: Vec<String>,
    /// Files to write, relative to the workspace.
    pub files: Vec<(String, Vec<u8>)>,
    /// The bytes counted against the caps.
    pub bytes: u64,
    /// Members left out by the filter.
    pub excluded_count: u64,
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a tokio runtime for the fuzz entry points")
    })
}

/// Stages `body` sent with `content_type`, with the query's `exclude` rules and
/// `default_excludes`, under `caps`.
pub fn upload(
    content_type: &str,
    excludes: &[String],
    default_excludes: bool,
    body: Vec<u8>,
    caps: Caps,
) -> Result<Staged, Refusal> {
    let mut query = url::form_urlencoded::Serializer::new(String::new());
    for rule in excludes {
        query.append_pair("exclude", rule);
    }
    query.append_pair(
        "default_excludes",
        if default_excludes { "true" } else { "false" },
    );
    let uri = format!("/sessions/s/files?{}", query.finish());
    let mut req = Request::builder().method("POST").uri(uri.as_str());
    if let Ok(ct) = HeaderValue::from_str(content_type) {
        req = req.header(header::CONTENT_TYPE, ct);
    }
    let req = req
        .body(Body::from(body))
        .expect("an encoded query and a checked header make a request");
    runtime().block_on(async move {
        let filter = crate::api::uploads::upload_filter(req.uri().query()).map_err(refusal)?;
        let (staged, kind) = crate::api::uploads::stage(req, caps, filter)
            .await
            .map_err(refusal)?;
        Ok(Staged {
            kind,
            dirs: staged.dirs,
            files: staged.files,
            bytes: staged.bytes,
            excluded_count: staged.excluded_count,
        })
    })
}

/// What an artifact download answers for a `Range` header of `len` bytes: `Ok(None)` the
/// whole file, `Ok(Some((first, last)))` one inclusive range.
pub fn range(header_value: &[u8], len: u64) -> Result<Option<(u64, u64)>, Refusal> {
    let value = HeaderValue::from_bytes(header_value).ok();
    match crate::http::parse_range(value.as_ref(), len) {
        Ok(crate::http::RangeReq::Full) => Ok(None),
        Ok(crate::http::RangeReq::Part(a, b)) => Ok(Some((a, b))),
        Err(e) => Err(refusal(e)),
    }
}

/// A client's message on a run's stream.
#[derive(Debug, Clone)]
pub enum Frame {
    /// A text message.
    Text(String),
    /// A binary message.
    Binary(Vec<u8>),
}

/// What a run's stdin made of a connection's messages.
#[derive(Debug, Clone, Default)]
pub struct StdinOutcome {
    /// The payloads that reached the program, in order.
    pub delivered: Vec<Vec<u8>>,
    /// After each message: the reason the connection was told stdin is closed, if it was.
    pub told: Vec<Option<&'static str>>,
    /// Why stdin closed, if it did.
    pub reason: Option<&'static str>,
}

fn app() -> &'static Arc<App> {
    static APP: OnceLock<(Arc<App>, tempfile::TempDir)> = OnceLock::new();
    &APP.get_or_init(|| {
        let data = tempfile::Builder::new()
            .prefix("wasmsand-fuzz-")
            .tempdir()
            .expect("a data directory");
        let mut overrides = std::collections::BTreeMap::new();
        overrides.insert("SANDBOX_STORE_BACKEND".to_string(), "memory".to_string());
        let mut config =
            crate::settings::load(None, |_| None, &overrides).expect("the default settings load");
        config.store = crate::StoreConfig::Memory;
        config.data_dir = data.path().to_path_buf();
        let app = runtime()
            .block_on(async { App::new(config) })
            .expect("an app on the memory store");
        (app, data)
    })
    .0
}

/// Sends `frames` on one connection of a run's stream: an interactive run's (with `limits`
/// on its stdin) when `interactive`, else a run that reads no stdin.
pub fn ws_stdin(frames: &[Frame], limits: StdinLimits, interactive: bool) -> StdinOutcome {
    let app = app();
    runtime().block_on(async move {
        let log = RunLog::new(64, 1 << 20);
        let (input, mut feed) = Interactive::new(app, "run-fuzz", limits, log);
        let mut client = Client {
            input: ClientInput::Run {
                stdin: interactive.then(|| input.clone()),
                otherwise: "not_interactive",
            },
            told: false,
        };
        let mut out = StdinOutcome::default();
        for f in frames {
            let msg = match f {
                Frame::Text(t) => Message::Text(t.as_str().into()),
                Frame::Binary(b) => Message::Binary(b.clone().into()),
            };
            out.told.push(client.take(&msg));
        }
        out.reason = input.closed_reason();
        drop(client);
        if out.reason.is_none() {
            input.close("fuzz_done");
        }
        while let Some(chunk) = feed.recv().await {
            out.delivered.push(chunk.to_vec());
        }
        out
    })
}
