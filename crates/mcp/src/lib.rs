//! `wasmsand-mcp`: wasmsand as a Model Context Protocol server, on the official Rust SDK
//! (`rmcp`).
//!
//! Tools (snake_case: several MCP clients reject dots in tool names, so a group and its
//! operation are joined by `_`: `sandbox_run`, `session_create`, ...; see docs/mcp.md):
//!
//! - `sandbox_run(command, session_id?, files?, timeout_ms?, env?, cwd?, stdin?, runtime?,
//!   base_image?)`: without `session_id`, a fresh sandbox for that call only. The result is
//!   `structuredContent` `{exit_code, stdout, stderr, truncated, error_class, timed_out,
//!   duration_ms, session_id, runtime, base_image, run_id}` and one readable text block. A
//!   `runtime`/`base_image` other than this server's wasm sandbox is run by the embedding
//!   server's [`RunHost`] (the HTTP service's Docker containers). With a `progressToken`, output chunks go out as progress
//!   notifications while the command runs; a cancellation notification stops the run
//!   (`CANCELLED`) and leaves the session usable.
//! - `session_create`, `session_fork`, `session_list`, `session_destroy`; `files_read`,
//!   `files_write`, `files_list`; `snapshot_create`, `snapshot_restore`.
//!
//! Session ids are minted by the server (128 random bits) and belong to the client that made
//! them; an unknown, foreign, destroyed or expired id is a tool error (`isError: true`), never
//! a protocol error. Live sessions are capped per client and in total, and reaped when idle.
//! An embedding server may keep the sessions itself instead ([`McpConfig::sessions`], a
//! [`SessionHost`]): the HTTP service does, so MCP sessions are its sessions.
//!
//! Transports: [`Mcp::serve_stdio`] (what `sandboxd mcp` runs) and [`Mcp::http_router`], an
//! axum `Router` serving streamable HTTP at `/mcp` that checks the `Host` header against
//! [`HttpOptions::allowed_hosts`] (loopback only by default), for `sandboxd mcp --http ADDR`
//! and for the HTTP service to mount. See `docs/mcp.md`.

#![forbid(unsafe_code)]

mod bridge;
#[cfg(test)]
#[path = "../../../tests/support/doc_block.rs"]
mod doc_block;
mod host;
mod run;
mod server;
mod store;
mod tools;
mod types;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rmcp::ServiceExt as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use wasmsand::Limits;

pub use bridge::{BridgeOptions, serve_stdio_bridge};
pub use host::{
    Caller, DiffBase, HostCaps, HostFuture, Merged, SessionHost, SessionLease, SessionSummary,
    merge_conflict, no_parent, not_a_fork, parent_gone, unknown_snapshot,
};
pub use server::McpHandler;
use server::{ClientKind, Shared};
use store::{Caps, Store};

/// What an MCP server offers and how far its clients may go.
#[derive(Debug, Clone)]
pub struct McpConfig {
    /// Limits of every sandbox, and the most a session may ask for (`timeout_ms` aside).
    pub limits: Limits,
    /// Environment variables added to every sandbox.
    pub env: Vec<(String, String)>,
    /// Where compiled modules are cached (default: wasmsand's).
    pub cache_dir: Option<PathBuf>,
    /// The longest `timeout_ms` a run or session may have; longer requests are clamped.
    pub max_timeout_ms: u64,
    /// Live sessions the server holds in total.
    pub max_sessions: usize,
    /// Live sessions one client may hold.
    pub max_sessions_per_client: usize,
    /// A session unused for this long is destroyed.
    pub session_idle_ttl: Duration,
    /// The largest file `files_read` returns.
    pub max_read_bytes: u64,
    /// Checks and records each `sandbox_run` (an embedding server's quotas); none: every run
    /// goes ahead.
    pub gate: Option<Arc<dyn RunGate>>,
    /// What the server's sandboxes may reach on the network (`curl`, `wget`; docs/network.md);
    /// none: nothing.
    pub network: Option<wasmsand::Network>,
    /// Runs the `sandbox_run` calls that name a runtime or image other than this server's own
    /// wasm sandbox (an embedding service's Docker containers); none: such calls are refused
    /// with `runtime_unavailable`.
    pub host: Option<Arc<dyn RunHost>>,
    /// Lists seed 003's `sandbox.run` beside `sandbox_run`. Off by default: a dot in a tool
    /// name breaks clients that hand the tool names to a model API (whose names match
    /// `^[a-zA-Z0-9_-]{1,64}$`), so a server offers it when its clients are known to take it.
    pub sandbox_dot_run: bool,
    /// Keeps the sessions (an embedding server's own); none: this server's table, capped by
    /// `max_sessions`, `max_sessions_per_client` and `session_idle_ttl`.
    pub sessions: Option<Arc<dyn SessionHost>>,
    /// Host folders the operator mounts in every sandbox of this server (read lazily, never
    /// written; `sandbox_diff` shows what a session changed in them). Clients cannot mount
    /// folders of their own.
    pub mounts: Vec<wasmsand::HostMount>,
    /// The most attempts one `sandbox_best_of` call may make.
    pub max_best_of: usize,
}

/// What [`RunGate::begin`] answers: an admitted run's ticket, or why it is refused.
pub type Admission =
    std::pin::Pin<Box<dyn Future<Output = Result<Box<dyn RunTicket>, String>> + Send>>;

/// What an embedding server checks and records around each execution of code through MCP,
/// so that its per-user quotas count MCP runs as well as its own.
pub trait RunGate: Send + Sync + std::fmt::Debug {
    /// Before a run of `principal` (the [`Principal`] of an HTTP request; `None` for an
    /// anonymous or stdio client) starts: `Err(message)` refuses it, and the tool answers
    /// that message as its error. `session` is the session it runs in (`None`: a throw-away
    /// sandbox).
    fn begin(&self, principal: Option<&str>, command: &str, session: Option<&str>) -> Admission;
}

/// An admitted run, told how it ended.
pub trait RunTicket: Send {
    /// `exit_code` is the command's (-1 when it could not run), `duration_ms` how long it
    /// executed. The tool answers once this is done.
    fn finish(
        self: Box<Self>,
        exit_code: i32,
        timed_out: bool,
        duration_ms: u64,
    ) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;

    /// The gate's record of the run, reported as the result's `run_id`.
    fn run_id(&self) -> Option<String> {
        None
    }

    /// What the gate's record says of the run beside its id (`sandbox.run` reports it).
    fn facts(&self) -> RunFacts {
        RunFacts::default()
    }

    /// Where the run's egress decisions go (the embedding server's audit trail), when the
    /// sandbox has a network; `None` keeps the configured [`wasmsand::Network::on_event`].
    fn egress_sink(&self) -> Option<wasmsand::EgressSink> {
        None
    }
}

/// A `sandbox_run` without `session_id` for a runtime other than this server's wasm sandbox.
#[derive(Debug, Clone)]
pub struct HostedRun {
    /// The runtime asked for (`None`: the one the image belongs to).
    pub runtime: Option<String>,
    /// The image asked for (`None`: the runtime's default).
    pub base_image: Option<String>,
    /// One bash command line.
    pub command: String,
    /// Files written before the command runs: their paths as the client gave them, and bytes.
    pub files: Vec<(String, Vec<u8>)>,
    /// Variables of the command's environment.
    pub env: BTreeMap<String, String>,
    /// Directory the command runs in (must exist).
    pub cwd: Option<String>,
    /// The command's standard input (none: empty).
    pub stdin: Option<Vec<u8>>,
    /// Wall-clock limit of the command.
    pub timeout_ms: u64,
    /// The stdout this server keeps: the host need not send more than one byte past it
    /// (that byte says the stream was cut).
    pub stdout_cap: u64,
    /// The same for stderr.
    pub stderr_cap: u64,
}

/// How a [`HostedRun`] that ran ended.
#[derive(Debug, Clone)]
pub struct HostedEnd {
    /// The host's record of the run (e.g. `GET /v1/runs/{run_id}` of the service).
    pub run_id: String,
    /// The runtime that ran it (`docker`, `vm`).
    pub runtime: String,
    /// The image it ran on, as the client named it (or the runtime's default).
    pub base_image: String,
    /// The command's exit status (124 after a timeout, 130 when cancelled).
    pub exit_code: i32,
    /// Set when the run ended by a limit, a timeout or a cancellation rather than by itself.
    pub error_class: Option<wasmsand::ErrorClass>,
    /// Why it ended, when not by the command's own exit; shown after its stderr.
    pub message: Option<String>,
    /// How long the command ran.
    pub duration_ms: u64,
    /// What the host's record says of the run beside its id.
    pub facts: RunFacts,
}

/// What an embedding server's record of a run says beside its id, for seed 003's
/// `sandbox.run` answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunFacts {
    /// The `policy_hash` of the configuration it ran under.
    pub policy_hash: Option<String>,
    /// The digest of the image it ran on.
    pub image_digest: Option<String>,
    /// The path of its log stream (a WebSocket), e.g. `/api/v1/sandbox/runs/{id}/stream`;
    /// the MCP server makes it a URL with the host the client called.
    pub log_stream_path: Option<String>,
}

/// Which output stream a chunk belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputStream {
    /// The command's standard output.
    Stdout,
    /// Its standard error.
    Stderr,
}

/// Where a host sends a hosted run's output, chunk by chunk, as it comes.
pub type OutputSender = tokio::sync::mpsc::UnboundedSender<(OutputStream, bytes::Bytes)>;

/// What [`RunHost::run`] answers: the run's end, or why it did not run (a message for the
/// model: unknown image, runtime unavailable, a quota).
pub type HostedFuture = std::pin::Pin<Box<dyn Future<Output = Result<HostedEnd, String>> + Send>>;

/// An embedding server's other runtimes, for `sandbox_run` calls that name one. The host
/// admits, records and limits these runs itself ([`RunGate`] is not asked).
pub trait RunHost: Send + Sync + std::fmt::Debug {
    /// One sentence for the tool's description: what it offers (runtimes and images); none
    /// when nothing is enabled besides this server's own sandbox.
    fn offer(&self) -> Option<String>;

    /// Runs `run` for `principal` (as in [`RunGate::begin`]) in a fresh box destroyed
    /// afterwards, sending its output to `output` while it runs; stops it (as a cancelled
    /// run) when `cancel` fires.
    fn run(
        &self,
        principal: Option<&str>,
        run: HostedRun,
        output: OutputSender,
        cancel: tokio_util::sync::CancellationToken,
    ) -> HostedFuture;
}

impl McpConfig {
    /// Default of [`McpConfig::max_timeout_ms`]: 5 minutes.
    pub const DEFAULT_MAX_TIMEOUT_MS: u64 = 300_000;
    /// Default of [`McpConfig::max_sessions`].
    pub const DEFAULT_MAX_SESSIONS: usize = 256;
    /// Default of [`McpConfig::max_sessions_per_client`].
    pub const DEFAULT_MAX_SESSIONS_PER_CLIENT: usize = 16;
    /// Default of [`McpConfig::session_idle_ttl`]: 30 minutes.
    pub const DEFAULT_SESSION_IDLE_TTL: Duration = Duration::from_secs(30 * 60);
    /// Default of [`McpConfig::max_read_bytes`]: 4 MiB.
    pub const DEFAULT_MAX_READ_BYTES: u64 = 4 * 1024 * 1024;
    /// Default of [`McpConfig::max_best_of`].
    pub const DEFAULT_MAX_BEST_OF: usize = 8;
}

impl Default for McpConfig {
    fn default() -> Self {
        McpConfig {
            limits: Limits::default(),
            env: Vec::new(),
            cache_dir: None,
            max_timeout_ms: Self::DEFAULT_MAX_TIMEOUT_MS,
            max_sessions: Self::DEFAULT_MAX_SESSIONS,
            max_sessions_per_client: Self::DEFAULT_MAX_SESSIONS_PER_CLIENT,
            session_idle_ttl: Self::DEFAULT_SESSION_IDLE_TTL,
            max_read_bytes: Self::DEFAULT_MAX_READ_BYTES,
            gate: None,
            network: None,
            host: None,
            sandbox_dot_run: false,
            sessions: None,
            mounts: Vec::new(),
            max_best_of: Self::DEFAULT_MAX_BEST_OF,
        }
    }
}

/// Names the authenticated client of an HTTP request. A server that mounts
/// [`Mcp::http_router`] behind its own authentication inserts one into the request's
/// extensions; the sessions of a principal are visible only to it and count against its cap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal(pub String);

/// Where clients reach the server that mounts [`Mcp::http_router`], as `ws://host` or
/// `wss://host`: the start of the stream URLs answers carry (`sandbox.run`'s
/// `log_stream_url`). A server behind a TLS-terminating proxy knows this better than the
/// request's `Host` does, and inserts one into the request's extensions; without it the
/// URL is `ws://` and the `Host`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamBase(pub String);

/// The streamable HTTP endpoint's checks against DNS rebinding and cross-site requests.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Accepted `Host` header values: a host name (any port) or `host:port`. `*` accepts any
    /// host. Default: loopback only.
    pub allowed_hosts: Vec<String>,
    /// Accepted `Origin` header values (requests without one pass), e.g.
    /// `https://app.example.com:443` or `http://localhost:*`. `*` accepts any origin. Default:
    /// loopback origins.
    pub allowed_origins: Vec<String>,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            allowed_hosts: ["localhost", "127.0.0.1", "::1"].map(String::from).to_vec(),
            allowed_origins: ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"]
                .map(String::from)
                .to_vec(),
        }
    }
}

/// One MCP server: the sessions and settings its connections share. Cheap to clone.
#[derive(Clone)]
pub struct Mcp {
    shared: Arc<Shared>,
    /// The server's own session table, when it keeps its sessions.
    local: Option<Arc<Store>>,
}

impl Mcp {
    /// A server with no session yet. A background thread reaps idle sessions; it ends when the
    /// last clone of this server is dropped.
    pub fn new(config: McpConfig) -> Mcp {
        let (sessions, local): (Arc<dyn SessionHost>, _) = match &config.sessions {
            Some(host) => (host.clone(), None),
            None => {
                let store = Store::new(Caps {
                    global: config.max_sessions,
                    per_owner: config.max_sessions_per_client,
                    idle_ttl: config.session_idle_ttl,
                });
                let c = config.clone();
                let local = host::LocalHost {
                    store: store.clone(),
                    factory: Arc::new(move |limits| server::new_sandbox(&c, limits)),
                };
                (Arc::new(local), Some(store))
            }
        };
        Mcp {
            shared: Arc::new(Shared::new(config, sessions)),
            local,
        }
    }

    /// The settings it was made with.
    pub fn config(&self) -> &McpConfig {
        &self.shared.config
    }

    /// Live sessions of all clients in this server's own table (0 when a
    /// [`SessionHost`] keeps them).
    pub fn session_count(&self) -> usize {
        self.local.as_ref().map_or(0, |s| s.len())
    }

    /// A handler for one connection whose client is `client` throughout (stdio, a test's
    /// in-memory transport).
    pub fn handler(&self, client: &str) -> McpHandler {
        McpHandler::new(self.shared.clone(), ClientKind::Fixed(client.into()))
    }

    /// Serves MCP on this process's stdin and stdout until the client closes stdin. Nothing
    /// else may write to stdout meanwhile.
    pub async fn serve_stdio(&self) -> std::io::Result<()> {
        let service = self
            .handler("stdio")
            .serve(rmcp::transport::io::stdio_pipes())
            .await
            .map_err(std::io::Error::other)?;
        service.waiting().await.map_err(std::io::Error::other)?;
        Ok(())
    }

    /// The streamable HTTP transport as a tower service, for routers other than axum's.
    pub fn http_service(
        &self,
        options: &HttpOptions,
    ) -> StreamableHttpService<McpHandler, LocalSessionManager> {
        let shared = self.shared.clone();
        let mut config = StreamableHttpServerConfig::default();
        config = if options.allowed_hosts.iter().any(|h| h == "*") {
            config.disable_allowed_hosts()
        } else if options.allowed_hosts.is_empty() {
            config.with_allowed_hosts(HttpOptions::default().allowed_hosts)
        } else {
            config.with_allowed_hosts(options.allowed_hosts.clone())
        };
        config = if options.allowed_origins.iter().any(|o| o == "*") {
            config.disable_allowed_origins()
        } else {
            config
                .with_allowed_origins(options.allowed_origins.clone())
                .enforce_origin_validation()
        };
        StreamableHttpService::new(
            move || Ok(McpHandler::new(shared.clone(), ClientKind::Http)),
            Arc::new(LocalSessionManager::default()),
            config,
        )
    }

    /// An axum `Router` serving streamable HTTP at `/mcp`, to serve alone or merge into a
    /// larger router.
    pub fn http_router(&self, options: &HttpOptions) -> axum::Router {
        axum::Router::new().route_service("/mcp", self.http_service(options))
    }

    /// Serves [`Mcp::http_router`] on `listener` until `shutdown` completes.
    pub async fn serve_http(
        &self,
        listener: tokio::net::TcpListener,
        options: &HttpOptions,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        axum::serve(listener, self.http_router(options))
            .with_graceful_shutdown(shutdown)
            .await
    }

    /// Destroys every session of its own table (running commands end as cancelled); a
    /// [`SessionHost`]'s sessions are its own to end.
    pub fn shutdown(&self) {
        if let Some(s) = &self.local {
            s.clear();
        }
    }
}

/// Where `sandboxd mcp` serves.
#[derive(Debug, Clone)]
pub enum Listen {
    /// One client on stdin/stdout (line-delimited JSON-RPC, as MCP's stdio transport).
    Stdio,
    /// Streamable HTTP at `http://ADDR/mcp`. The bound address (port 0 picks one) is printed
    /// on stdout as `http://HOST:PORT/mcp`, one line, once the server accepts connections.
    Http(SocketAddr, HttpOptions),
}

/// Runs a server to its end in a runtime of its own: until stdin closes (stdio), or until
/// SIGINT or SIGTERM (HTTP).
pub fn serve_blocking(config: McpConfig, listen: Listen) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("wasmsand-mcp")
        .build()?;
    let mcp = Mcp::new(config);
    let result = rt.block_on(async {
        match listen {
            Listen::Stdio => mcp.serve_stdio().await,
            Listen::Http(addr, options) => {
                let listener = tokio::net::TcpListener::bind(addr).await?;
                let bound = listener.local_addr()?;
                let stop = shutdown_signal();
                {
                    use std::io::Write as _;
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "http://{bound}/mcp")?;
                    out.flush()?;
                }
                mcp.serve_http(listener, &options, stop).await
            }
        }
    });
    mcp.shutdown();
    // A command still running in a one-off sandbox must not hold the process up.
    rt.shutdown_background();
    result
}

/// Completes on SIGINT or SIGTERM: how a served process is asked to stop (the HTTP service
/// uses it too). The handlers are installed when this is called (inside a runtime), not when
/// the future is first polled: a server calls it before it prints its address, so a stop
/// sent as soon as the address is read is never lost (an embedder such as Node may have
/// its own handler in place that would otherwise swallow it).
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    let (term, int) = {
        use tokio::signal::unix::{SignalKind, signal};
        (
            signal(SignalKind::terminate()).ok(),
            signal(SignalKind::interrupt()).ok(),
        )
    };
    async move {
        #[cfg(unix)]
        {
            async fn recv(s: Option<tokio::signal::unix::Signal>) {
                match s {
                    Some(mut s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            }
            tokio::select! {
                _ = recv(term) => {}
                _ = recv(int) => {}
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
