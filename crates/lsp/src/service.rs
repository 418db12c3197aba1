//! The sandbox service as the language server sees it: the seed 003 REST API and a run's
//! WebSocket log, either of a service given by URL (and API key) or of one this process
//! starts on a loopback port ([`Embedded`]), so both ways behave the same.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::{self, client::IntoClientRequest};

/// Longest wait for one answer (an upload of the whole workspace included).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(300);

/// The API's path under a service's origin.
pub const BASE: &str = "/api/v1/sandbox";

/// Why a call to the service failed.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// Nothing answered at the URL (down, wrong port, DNS).
    #[error("cannot reach the sandbox service at {url}: {message}")]
    Unreachable {
        /// The service's base URL.
        url: String,
        /// The transport's error.
        message: String,
    },
    /// The service answered with an error envelope.
    #[error("the sandbox service refused {what}: {message} ({code}, HTTP {status})")]
    Api {
        /// What was asked (`POST /runs`).
        what: String,
        /// The HTTP status.
        status: u16,
        /// The envelope's `error.code`.
        code: String,
        /// The envelope's `error.message`.
        message: String,
    },
    /// An answer that is not what the API promises.
    #[error("unexpected answer from the sandbox service to {what}: {message}")]
    Protocol {
        /// What was asked.
        what: String,
        /// What was wrong.
        message: String,
    },
    /// The embedded service could not start.
    #[error("the embedded sandbox service did not start: {0}")]
    Embedded(String),
}

impl ServiceError {
    /// Whether the error says the session is gone (expired, deleted, reaped).
    pub fn is_not_found(&self) -> bool {
        matches!(
            self,
            ServiceError::Api {
                status: 404 | 410,
                ..
            }
        )
    }
}

type Body = http_body_util::Full<bytes::Bytes>;
type Http = hyper_util::client::legacy::Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    Body,
>;

/// A client of one service.
#[derive(Clone)]
pub struct Service {
    origin: String,
    api_key: Option<String>,
    http: Http,
    tls: Arc<rustls::ClientConfig>,
}

/// TLS for `https://` and `wss://` services: the system's roots, ring (the provider the
/// sandbox crate already builds). Given explicitly, never as the process default, which
/// would change every other client in the process.
fn tls_config() -> Result<Arc<rustls::ClientConfig>, ServiceError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_native_certs::load_native_certs().certs {
        let _ = roots.add(cert);
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| ServiceError::Embedded(format!("TLS: {e}")))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(Arc::new(config))
}

impl Service {
    /// A client of the service at `url` (its origin, or its origin with `/api/v1/sandbox`).
    pub fn new(url: &str, api_key: Option<String>) -> Result<Service, ServiceError> {
        Service::build(url, api_key, true)
    }

    fn build(
        url: &str,
        api_key: Option<String>,
        keep_alive: bool,
    ) -> Result<Service, ServiceError> {
        let trimmed = url.trim_end_matches('/');
        let origin = trimmed.strip_suffix(BASE).unwrap_or(trimmed).to_string();
        let parsed = url::Url::parse(&origin).map_err(|e| ServiceError::Unreachable {
            url: url.to_string(),
            message: format!("not a URL: {e}"),
        })?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(ServiceError::Unreachable {
                url: url.to_string(),
                message: "the URL must be http://HOST[:PORT] or https://HOST[:PORT]".into(),
            });
        }
        let tls = tls_config()?;
        let mut connector = hyper_util::client::legacy::connect::HttpConnector::new();
        connector.enforce_http(false);
        connector.set_connect_timeout(Some(Duration::from_secs(10)));
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config((*tls).clone())
            .https_or_http()
            .enable_http1()
            .wrap_connector(connector);
        let mut builder =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new());
        if !keep_alive {
            builder.pool_max_idle_per_host(0);
        }
        Ok(Service {
            origin,
            api_key: api_key.filter(|k| !k.is_empty()),
            http: builder.build(https),
            tls,
        })
    }

    /// The service's origin (`http://127.0.0.1:8787`).
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// An absolute URL of an API path (`/runs/x`).
    pub fn url(&self, path: &str) -> String {
        format!("{}{BASE}{path}", self.origin)
    }

    async fn send(
        &self,
        what: &str,
        method: hyper::Method,
        path: &str,
        body: Option<(&str, Vec<u8>)>,
    ) -> Result<Value, ServiceError> {
        use http_body_util::BodyExt as _;
        let unreachable = |e: &dyn std::error::Error| ServiceError::Unreachable {
            url: self.url(""),
            message: source_chain(e),
        };
        let mut req = hyper::Request::builder()
            .method(method)
            .uri(self.url(path))
            .header("accept", "application/json");
        if let Some(k) = &self.api_key {
            req = req.header("x-api-key", k);
        }
        let data = match body {
            Some((content_type, data)) => {
                req = req.header("content-type", content_type);
                data
            }
            None => Vec::new(),
        };
        let req = req
            .body(Body::new(data.into()))
            .map_err(|e| ServiceError::Protocol {
                what: what.to_string(),
                message: e.to_string(),
            })?;
        let exchange = async {
            let resp = self.http.request(req).await.map_err(|e| unreachable(&e))?;
            let status = resp.status().as_u16();
            let bytes = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| unreachable(&e))?
                .to_bytes();
            Ok::<_, ServiceError>((status, bytes))
        };
        let (status, bytes) = tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .map_err(|_| ServiceError::Unreachable {
                url: self.url(""),
                message: format!("no answer to {what} within {} s", REQUEST_TIMEOUT.as_secs()),
            })??;
        let body: Value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).map_err(|e| ServiceError::Protocol {
                what: what.to_string(),
                message: format!("HTTP {status}, not JSON: {e}"),
            })?
        };
        if status >= 400 {
            let err = &body["error"];
            return Err(ServiceError::Api {
                what: what.to_string(),
                status,
                code: err["code"].as_str().unwrap_or("error").to_string(),
                message: err["message"]
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("HTTP {status}")),
            });
        }
        Ok(body)
    }

    /// `GET /runtimes`.
    pub async fn runtimes(&self) -> Result<Value, ServiceError> {
        self.send("GET /runtimes", hyper::Method::GET, "/runtimes", None)
            .await
    }

    /// `POST /sessions`; answers the session id.
    pub async fn create_session(&self, body: Value) -> Result<String, ServiceError> {
        let v = self
            .send(
                "POST /sessions",
                hyper::Method::POST,
                "/sessions",
                json_body(&body),
            )
            .await?;
        v["session_id"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| ServiceError::Protocol {
                what: "POST /sessions".into(),
                message: "no session_id".into(),
            })
    }

    /// `POST /sessions/{id}/files` with a tar archive.
    pub async fn upload_tar(&self, session: &str, tar: Vec<u8>) -> Result<Value, ServiceError> {
        self.send(
            "the workspace upload",
            hyper::Method::POST,
            &format!("/sessions/{session}/files"),
            Some(("application/x-tar", tar)),
        )
        .await
    }

    /// `DELETE /sessions/{id}/files?path=...` (a file deleted in the workspace).
    pub async fn remove_file(&self, session: &str, rel: &str) -> Result<(), ServiceError> {
        let path = format!(
            "/sessions/{session}/files?path={}",
            url::form_urlencoded::byte_serialize(rel.as_bytes()).collect::<String>()
        );
        match self
            .send("a file's removal", hyper::Method::DELETE, &path, None)
            .await
        {
            Ok(_) => Ok(()),
            // Already gone in the sandbox (the run removed it): what was wanted.
            Err(ServiceError::Api {
                status: 404, code, ..
            }) if code != "not_found_session" => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// `DELETE /sessions/{id}`.
    pub async fn delete_session(&self, session: &str) -> Result<(), ServiceError> {
        self.send(
            "DELETE /sessions/{id}",
            hyper::Method::DELETE,
            &format!("/sessions/{session}"),
            None,
        )
        .await
        .map(|_| ())
    }

    /// `POST /runs`.
    pub async fn create_run(&self, body: &Value) -> Result<Value, ServiceError> {
        self.send("POST /runs", hyper::Method::POST, "/runs", json_body(body))
            .await
    }

    /// `GET /runs/{id}`.
    pub async fn get_run(&self, id: &str) -> Result<Value, ServiceError> {
        self.send(
            "GET /runs/{id}",
            hyper::Method::GET,
            &format!("/runs/{id}"),
            None,
        )
        .await
    }

    /// `POST /runs/{id}/cancel`.
    pub async fn cancel_run(&self, id: &str) -> Result<Value, ServiceError> {
        self.send(
            "POST /runs/{id}/cancel",
            hyper::Method::POST,
            &format!("/runs/{id}/cancel"),
            json_body(&json!({})),
        )
        .await
    }

    /// `GET /runs/{id}/artifacts`.
    pub async fn artifacts(&self, id: &str) -> Result<Value, ServiceError> {
        self.send(
            "GET /runs/{id}/artifacts",
            hyper::Method::GET,
            &format!("/runs/{id}/artifacts"),
            None,
        )
        .await
    }

    /// The run's WebSocket log, each frame handed to `frame` until the `end` event, the
    /// socket's close, or `idle` without any frame (heartbeats come every ~10 s, so a longer
    /// silence is a dead connection). Answers whether the end event was seen.
    pub async fn stream(
        &self,
        run_id: &str,
        idle: Duration,
        mut frame: impl FnMut(&Value),
    ) -> Result<bool, ServiceError> {
        let ws_url = format!(
            "{}{BASE}/runs/{run_id}/stream",
            self.origin
                .replacen("https://", "wss://", 1)
                .replacen("http://", "ws://", 1)
        );
        let mut req =
            ws_url
                .as_str()
                .into_client_request()
                .map_err(|e| ServiceError::Protocol {
                    what: "the log stream".into(),
                    message: e.to_string(),
                })?;
        if let Some(k) = &self.api_key
            && let Ok(v) = k.parse()
        {
            req.headers_mut().insert("x-api-key", v);
        }
        let connector = tokio_tungstenite::Connector::Rustls(self.tls.clone());
        let (mut ws, _) =
            tokio_tungstenite::connect_async_tls_with_config(req, None, false, Some(connector))
                .await
                .map_err(|e| match e {
                    tungstenite::Error::Http(resp) => ServiceError::Api {
                        what: "the log stream".into(),
                        status: resp.status().as_u16(),
                        code: "stream_refused".into(),
                        message: String::from_utf8_lossy(
                            resp.body().as_deref().unwrap_or_default(),
                        )
                        .into_owned(),
                    },
                    e => ServiceError::Unreachable {
                        url: ws_url.clone(),
                        message: e.to_string(),
                    },
                })?;
        loop {
            let next = match tokio::time::timeout(idle, ws.next()).await {
                Err(_) => return Ok(false),
                Ok(None) => return Ok(false),
                Ok(Some(Err(_))) => return Ok(false),
                Ok(Some(Ok(m))) => m,
            };
            let tungstenite::Message::Text(text) = next else {
                continue;
            };
            let Ok(v) = serde_json::from_str::<Value>(text.as_str()) else {
                continue;
            };
            frame(&v);
            if v["type"] == "event" && v["event"] == "end" {
                let _ = ws.close(None).await;
                return Ok(true);
            }
        }
    }
}

fn source_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = c.source();
    }
    s
}

fn json_body(v: &Value) -> Option<(&'static str, Vec<u8>)> {
    Some((
        "application/json",
        serde_json::to_vec(v).unwrap_or_default(),
    ))
}

/// A service this process runs for itself on a loopback port, as `sandboxd serve` runs by
/// default: without authentication (loopback only), so the editor can open its log and
/// artifact links as they are; the memory store and a temporary data directory. `SANDBOX_*`
/// variables of the environment configure it as they do `sandboxd serve` (so
/// `SANDBOX_DOCKER_ENABLED=true` brings the Docker runtime).
pub struct Embedded {
    /// Its client.
    pub service: Service,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    done: Option<tokio::task::JoinHandle<()>>,
    _data: tempfile::TempDir,
}

impl Embedded {
    /// Starts the service on `rt`.
    pub fn start(
        rt: &tokio::runtime::Runtime,
        cache_dir: Option<std::path::PathBuf>,
    ) -> Result<Embedded, ServiceError> {
        let data = tempfile::Builder::new()
            .prefix("wasmsand-lsp-")
            .tempdir()
            .map_err(|e| ServiceError::Embedded(format!("a data directory: {e}")))?;
        let mut overrides = std::collections::BTreeMap::new();
        overrides.insert("SANDBOX_STORE_BACKEND".to_string(), "memory".to_string());
        overrides.insert(
            "SANDBOX_DATA_DIR".to_string(),
            data.path().to_string_lossy().into_owned(),
        );
        let mut config =
            wasmsand_server::settings::load(None, |k| std::env::var(k).ok(), &overrides)
                .map_err(ServiceError::Embedded)?;
        config.store = wasmsand_server::StoreConfig::Memory;
        // Keys meant for another service in the same environment would lock the editor out.
        config.api_keys.clear();
        config.jwt_secret = None;
        config.data_dir = data.path().to_path_buf();
        if cache_dir.is_some() {
            config.cache_dir = cache_dir;
        }
        let server = rt
            .block_on(wasmsand_server::Server::bind(config, "127.0.0.1:0"))
            .map_err(|e| ServiceError::Embedded(e.to_string()))?;
        let addr = server.local_addr();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let done = rt.spawn(async move {
            let _ = server
                .serve(async move {
                    let _ = stopped.await;
                })
                .await;
        });
        Ok(Embedded {
            // No idle keep-alive connections: they would hold the service's graceful
            // shutdown open when the editor stops the server.
            service: Service::build(&format!("http://{addr}"), None, false)?,
            stop: Some(stop),
            done: Some(done),
            _data: data,
        })
    }

    /// Ends its runs and sessions and stops it.
    pub fn shutdown(mut self, rt: &tokio::runtime::Runtime) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(d) = self.done.take() {
            let _ = rt.block_on(async { tokio::time::timeout(Duration::from_secs(10), d).await });
        }
    }
}
