//! `sandboxd mcp --service URL`: a stdio MCP server whose tools are those of a service's
//! streamable HTTP endpoint (`sandboxd serve`'s `/mcp`). A desktop client that only speaks
//! stdio then uses the service's sessions (listed by its REST API, hibernated, kept across
//! its restarts), its quotas and its runtimes; nothing runs in this process.
//!
//! Every call is forwarded with its arguments and `_meta`. The client library gives each
//! forwarded request a progress token of its own, so the bridge maps the service's progress
//! notifications back to the stdio client's token ([`Tokens`]); a call the stdio client
//! cancels is cancelled at the service (`notifications/cancelled`).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, CancelledNotificationParam,
    ClientConfig, ClientRequest, ErrorCode, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ProgressToken, ServerCapabilities, ServerConfig, ServerPeerInfo,
    ServerResult,
};
use rmcp::service::{
    NotificationContext, Peer, PeerRequestOptions, RequestContext, RunningService, ServiceError,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ErrorData, RoleClient, RoleServer, ServerHandler, ServiceExt as _};

/// Where the bridge forwards to.
#[derive(Debug, Clone)]
pub struct BridgeOptions {
    /// The service's MCP endpoint (`http://HOST:PORT/mcp`).
    pub url: String,
    /// An API key of the service, sent as `Authorization: Bearer`.
    pub api_key: Option<String>,
}

/// Where the progress of one forwarded request goes.
enum Route {
    /// Notifications that came before the request's token was known to the bridge (the
    /// service may answer before `send` returns): kept until it is.
    Early(Vec<ProgressNotificationParam>),
    /// To the stdio client, under its own token (none: it asked for no progress).
    To(Option<ProgressToken>),
}

/// Held notifications are bounded: a notification for a request that already ended (the
/// service sent it late) would otherwise wait forever.
const MAX_EARLY: usize = 256;

/// The notification under another token.
fn retoken(mut p: ProgressNotificationParam, to: &ProgressToken) -> ProgressNotificationParam {
    p.progress_token = to.clone();
    p
}

/// The forwarded requests' progress tokens and the stdio client's tokens they stand for.
#[derive(Default)]
struct Tokens(Mutex<HashMap<ProgressToken, Route>>);

impl Tokens {
    /// What to forward now for one notification of the service.
    fn arrived(&self, p: ProgressNotificationParam) -> Option<ProgressNotificationParam> {
        let mut map = self.0.lock();
        if map.len() > MAX_EARLY {
            map.retain(|_, r| matches!(r, Route::To(_)));
        }
        match map
            .entry(p.progress_token.clone())
            .or_insert_with(|| Route::Early(Vec::new()))
        {
            Route::To(Some(to)) => Some(retoken(p, to)),
            Route::To(None) => None,
            Route::Early(held) => {
                held.push(p);
                None
            }
        }
    }

    /// Routes `ours` to the stdio client's `theirs`; what arrived before, to forward now.
    fn route(
        &self,
        ours: ProgressToken,
        theirs: Option<ProgressToken>,
    ) -> Vec<ProgressNotificationParam> {
        let held = match self.0.lock().insert(ours, Route::To(theirs.clone())) {
            Some(Route::Early(held)) => held,
            _ => Vec::new(),
        };
        match theirs {
            Some(to) => held.into_iter().map(|p| retoken(p, &to)).collect(),
            None => Vec::new(),
        }
    }

    fn done(&self, ours: &ProgressToken) {
        self.0.lock().remove(ours);
    }
}

/// The client side: hands the service's progress notifications to the stdio client.
#[derive(Clone, Default)]
struct Forwarder {
    stdio: Arc<OnceLock<Peer<RoleServer>>>,
    tokens: Arc<Tokens>,
}

impl Forwarder {
    async fn forward(&self, p: ProgressNotificationParam) {
        if let Some(peer) = self.stdio.get() {
            let _ = peer.notify_progress(p).await;
        }
    }
}

impl ClientHandler for Forwarder {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        if let Some(p) = self.tokens.arrived(params) {
            self.forward(p).await;
        }
    }

    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        info.client_info.name = "wasmsand-mcp-bridge".into();
        info.client_info.version = env!("CARGO_PKG_VERSION").into();
        info
    }
}

/// The server side: the service's tools, as the service describes them.
#[derive(Clone)]
struct Bridge {
    remote: Peer<RoleClient>,
    forwarder: Forwarder,
    info: Option<Arc<ServerPeerInfo>>,
    url: String,
}

impl Bridge {
    fn failed(&self, e: ServiceError) -> ErrorData {
        match e {
            ServiceError::McpError(e) => e,
            other => ErrorData::new(
                ErrorCode::INTERNAL_ERROR,
                format!("the service at {} did not answer: {other}", self.url),
                None,
            ),
        }
    }
}

impl ServerHandler for Bridge {
    fn get_info(&self) -> ServerConfig {
        let mut config = ServerConfig::new(ServerCapabilities::builder().enable_tools().build());
        if let Some(info) = &self.info {
            if let Some(server) = &info.server_info {
                config = config.with_server_info(server.clone());
            }
            if let Some(text) = &info.instructions {
                config = config.with_instructions(text.clone());
            }
        }
        config
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.remote
            .list_tools(request)
            .await
            .map_err(|e| self.failed(e))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let theirs = context.meta.get_progress_token();
        let handle = self
            .remote
            .send_cancellable_request(
                ClientRequest::CallToolRequest(CallToolRequest::new(request)),
                PeerRequestOptions::no_options(),
            )
            .await
            .map_err(|e| self.failed(e))?;
        let (id, ours) = (handle.id.clone(), handle.progress_token.clone());
        for p in self.forwarder.tokens.route(ours.clone(), theirs) {
            self.forwarder.forward(p).await;
        }
        let answer = tokio::select! {
            r = handle.await_response() => r.map_err(|e| self.failed(e)),
            _ = context.ct.cancelled() => {
                let reason = Some("cancelled by the client".to_string());
                let _ = self
                    .remote
                    .notify_cancelled(CancelledNotificationParam::new(Some(id), reason))
                    .await;
                Err(ErrorData::new(ErrorCode::INTERNAL_ERROR, "cancelled by the client", None))
            }
        };
        self.forwarder.tokens.done(&ours);
        match answer? {
            ServerResult::CallToolResult(r) => Ok(CallToolResponse::Complete(r)),
            ServerResult::InputRequiredResult(r) => Ok(CallToolResponse::InputRequired(r)),
            ServerResult::CreateTaskResult(r) => Ok(CallToolResponse::Task(r)),
            other => Err(ErrorData::new(
                ErrorCode::INTERNAL_ERROR,
                format!(
                    "the service at {} answered a tool call with {other:?}",
                    self.url
                ),
                None,
            )),
        }
    }
}

/// Connects to the service, then serves its tools on stdin/stdout until the stdio client
/// closes stdin. A service that does not answer is an error before anything is served.
pub async fn serve_stdio_bridge(options: BridgeOptions) -> std::io::Result<()> {
    let forwarder = Forwarder::default();
    let stdio = forwarder.stdio.clone();
    let kept = forwarder.clone();
    let mut config = StreamableHttpClientTransportConfig::with_uri(options.url.clone());
    if let Some(key) = &options.api_key {
        config = config.auth_header(key.clone());
    }
    let transport = StreamableHttpClientTransport::from_config(config);
    let client: RunningService<RoleClient, Forwarder> =
        forwarder.serve(transport).await.map_err(|e| {
            std::io::Error::other(format!("cannot reach the service at {}: {e}", options.url))
        })?;
    let bridge = Bridge {
        remote: client.peer().clone(),
        forwarder: kept,
        info: client.peer().peer_info(),
        url: options.url.clone(),
    };
    let server = bridge
        .serve(rmcp::transport::io::stdio_pipes())
        .await
        .map_err(std::io::Error::other)?;
    let _ = stdio.set(server.peer().clone());
    let ended = server.waiting().await.map_err(std::io::Error::other);
    let _ = client.cancel().await;
    ended.map(|_| ())
}
