//! `wasmsand-server`: an HTTP + WebSocket code-interpreter service over [`wasmsand::Sandbox`].
//!
//! REST under `/api/v1/sandbox` for sessions (sandboxes kept between runs), runs (commands
//! executed in the background through a bounded queue, with a state machine, timeouts and
//! cancel), uploads into a session's workspace and artifacts captured after a run; a
//! WebSocket per run streams its output and events as numbered JSON frames. Runs, artifact
//! lists and idempotency entries live in a [`store::Store`] (memory, SQLite or PostgreSQL);
//! sessions live in memory only. See `docs/service.md`.

#![forbid(unsafe_code)]

mod admin;
mod admin_ops;
mod admin_policy;
mod api;
mod artifacts;
mod audit;
pub mod auth;
pub mod clock;
pub mod config;
#[cfg(test)]
#[path = "../../../tests/support/doc_block.rs"]
mod doc_block;
mod egress_proxy;
mod error;
mod fair;
#[doc(hidden)]
pub mod fuzzing;
mod gitclone;
pub mod hibernate;
mod http;
mod idempotency;
mod images;
mod interactive;
mod logs;
mod mcp_gate;
mod mcp_sessions;
mod observe;
mod openapi;
mod otel;
mod panel;
mod policy;
mod process_table;
mod processes;
mod quotas;
mod ratelimit;
mod redact;
mod replica;
mod retention;
mod runs;
mod runtime;
mod sessions;
pub mod settings;
pub mod store;
mod upload;
mod util;
mod validate;
mod views;
mod ws;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

pub use config::{Config, StoreConfig};
use images::Images;
use runs::{LiveRun, Queue};
use sessions::Session;
use store::{MemoryStore, PostgresStore, SqliteStore, Store};

/// The version reported as `runtime_version`: this crate's, which is the workspace's.
pub const RUNTIME_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Reason code of runs that were in flight when a previous process stopped.
pub const REASON_SERVER_RESTART: &str = "server_restart";

/// Shared state of one service instance.
pub struct App {
    /// The configuration as started; the keys `/admin/policies` and `/admin/quotas` change
    /// are read from [`App::policy`] instead.
    pub(crate) config: Config,
    /// The policy new sessions and runs get, with its `policy_hash` (SHA-256, in hex, of its
    /// effective policy; the same settings give the same hash). Replaced whole by the admin
    /// endpoints; whoever took it keeps the one it took.
    policy: parking_lot::RwLock<Arc<policy::Policy>>,
    pub(crate) store: Arc<dyn Store>,
    images: Arc<Images>,
    /// What executes sessions and runs (`crate::runtime`).
    pub(crate) runtimes: runtime::Runtimes,
    /// Sandboxes being destroyed (expired or removed sessions): a clean shutdown waits.
    pub(crate) destroys: tokio_util::task::TaskTracker,
    runs: Mutex<HashMap<String, Arc<LiveRun>>>,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    /// Sessions being woken from the store, one wake each (`crate::hibernate`).
    waking: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    queue: Queue,
    idem_locks: Mutex<HashMap<String, std::sync::Weak<tokio::sync::Mutex<()>>>>,
    shutting_down: AtomicBool,
    /// Credentials and signed stream URLs.
    pub(crate) auth: auth::Auth,
    /// This app's own metrics recorder.
    pub(crate) metrics: Arc<observe::Metrics>,
    /// This app's OpenTelemetry traces, when `SANDBOX_OTLP_ENDPOINT` is set.
    pub(crate) otel: Option<otel::Tracing>,
    pub(crate) audit: audit::AuditSink,
    pub(crate) quotas: quotas::Quotas,
    pub(crate) rate_limits: ratelimit::RateLimits,
    /// The MCP server of `/mcp`, once mounted: its sessions count against `max_sessions`.
    pub(crate) mcp: std::sync::OnceLock<wasmsand_mcp::Mcp>,
    /// Forwarding to the owner of a session or run when replicas share the store.
    replica: replica::Replica,
    /// Recorded on the runs this process executes, for the admin list's `node_id` and
    /// `worker_id`: the machine or pod, and this process (its replica id with a shared store).
    pub(crate) node_id: String,
    pub(crate) worker_id: String,
    /// What every expiry and record time reads (see [`clock`]).
    pub clock: clock::Clock,
}

/// Why a service instance could not start; nothing is served.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The configuration is inconsistent or unsafe (e.g. no authentication on a public
    /// address); the text says which setting to change.
    #[error("{0}")]
    Config(String),
    /// The store could not be opened or migrated.
    #[error(transparent)]
    Store(#[from] store::StoreError),
    /// The listening address could not be bound.
    #[error("cannot listen on {addr}: {err}")]
    Bind {
        /// The address as configured.
        addr: String,
        /// What the operating system answered.
        err: std::io::Error,
    },
    /// Another I/O failure while starting.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl App {
    /// Opens the store (failing unfinished runs of a previous process) and prepares the
    /// state. Must be called inside a tokio runtime.
    pub fn new(config: Config) -> Result<Arc<App>, StartError> {
        config.validate().map_err(StartError::Config)?;
        std::fs::create_dir_all(&config.data_dir)?;
        let store: Arc<dyn Store> = match &config.store {
            StoreConfig::Memory => Arc::new(MemoryStore::new()),
            StoreConfig::Sqlite(path) => Arc::new(SqliteStore::open(path)?),
            // Each process is a new replica: runs of its previous life belong to a dead one.
            StoreConfig::Postgres(url) => Arc::new(PostgresStore::connect(
                url,
                &util::new_id(),
                Duration::from_secs(config.replica_ttl_sec),
            )?),
        };
        let failed = store.fail_unfinished(
            REASON_SERVER_RESTART,
            "the server stopped while this run was in flight",
            util::now_ms(),
        )?;
        if failed > 0 {
            tracing::warn!(
                failed,
                "runs left unfinished by a previous process marked failed"
            );
        }
        let worker_id = store
            .cluster()
            .map(|c| c.replica_id().to_string())
            .unwrap_or_else(util::new_id);
        let node_id = config.node_id.clone().unwrap_or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_string())
                .filter(|h| !h.is_empty())
                .unwrap_or_else(|| "local".into())
        });
        let clock = clock::Clock::default();
        let images = Arc::new(Images::new(
            config.image_aliases.clone(),
            config.cache_dir.clone(),
        ));
        let runtimes = runtime::Runtimes {
            wasm: Arc::new(runtime::wasm::WasmRuntime::new(&config, images.clone())),
            docker: Arc::new(runtime::docker::DockerRuntime::new(
                &config,
                runtime::docker::instance_id(&config)?,
            )),
            vm: Arc::new(runtime::vm::VmRuntime::new(&config)),
        };
        let audit_sink =
            audit::AuditSink::start(store.clone(), config.audit_log_path.clone(), clock.clone());
        let app = Arc::new(App {
            policy: parking_lot::RwLock::new(Arc::new(policy::Policy::new(config.clone()))),
            images,
            runtimes,
            destroys: tokio_util::task::TaskTracker::new(),
            queue: Queue::new(config.max_concurrent_runs),
            store,
            runs: Mutex::new(HashMap::new()),
            sessions: Mutex::new(HashMap::new()),
            waking: Mutex::new(HashMap::new()),
            idem_locks: Mutex::new(HashMap::new()),
            shutting_down: AtomicBool::new(false),
            auth: auth::Auth::new(&config),
            metrics: Arc::new(observe::Metrics::new()),
            otel: otel::Tracing::new(&config).map_err(StartError::Config)?,
            audit: audit_sink,
            quotas: quotas::Quotas::default(),
            rate_limits: ratelimit::RateLimits::new(&config, clock.clone()),
            mcp: std::sync::OnceLock::new(),
            replica: replica::Replica::default(),
            node_id,
            worker_id,
            clock,
            config,
        });
        // The template digest walks every file of the template: do it before the first run
        // needs it.
        let images = app.images.clone();
        tokio::spawn(async move {
            images.digest().await;
        });
        // Containers an earlier life of this instance left behind go before anything new
        // is made.
        let docker = app.runtimes.docker.clone();
        tokio::spawn(async move { docker.reap().await });
        let vm = app.runtimes.vm.clone();
        tokio::spawn(async move { vm.prepare().await });
        observe::init_series(&app);
        runs::spawn_sweeper(&app);
        Ok(app)
    }

    /// The policy (and quotas) in force now: what a new session or run gets.
    pub(crate) fn policy(&self) -> Arc<policy::Policy> {
        self.policy.read().clone()
    }

    /// The `policy_hash` of the policy in force now.
    pub fn policy_hash(&self) -> String {
        self.policy.read().hash.clone()
    }

    /// Replaces the policy in force by what `change` makes of it, atomically (two admins
    /// changing it at once each see the other's change); returns the old and the new one.
    pub(crate) fn update_policy(
        &self,
        change: impl FnOnce(&policy::Policy) -> Result<policy::Policy, String>,
    ) -> Result<(Arc<policy::Policy>, Arc<policy::Policy>), String> {
        let mut current = self.policy.write();
        let new = Arc::new(change(&current)?);
        let old = std::mem::replace(&mut *current, new.clone());
        Ok((old, new))
    }

    /// Whether [`App::shutdown`] has begun: new runs and processes are refused from then on.
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }

    /// Stops taking runs, cancels queued and running ones (they end `failed` with reason
    /// `server_shutdown`, recorded in the store), hibernates the sessions that can (the
    /// others are destroyed) and leaves the replica set.
    pub async fn shutdown(self: &Arc<Self>) {
        self.shutting_down.store(true, Ordering::SeqCst);
        runs::shutdown(self).await;
        let n = self.hibernate_all().await;
        if n > 0 {
            tracing::info!(sessions = n, "sessions hibernated for the shutdown");
        }
        replica::leave(self).await;
        let sessions: Vec<_> = self.sessions.lock().drain().map(|(_, s)| s).collect();
        futures::future::join_all(sessions.iter().map(|s| s.boxed.destroy())).await;
        self.destroys.close();
        self.destroys.wait().await;
        for rt in self.runtimes.all() {
            rt.shutdown().await;
            rt.reap().await;
        }
        // Last, so that the runs ended above have their spans sent.
        if let Some(t) = &self.otel {
            t.shutdown().await;
        }
    }
}

/// A bound, not yet serving, instance.
pub struct Server {
    /// The instance's state, shared with every handler.
    pub app: Arc<App>,
    listener: tokio::net::TcpListener,
}

impl Server {
    /// Validates `config`, opens the store and binds `addr` (port 0 picks a free one); refuses
    /// to listen beyond loopback without authentication unless `allow_anonymous` is set.
    pub async fn bind(config: Config, addr: &str) -> Result<Server, StartError> {
        let app = App::new(config)?;
        let listener =
            tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|err| StartError::Bind {
                    addr: addr.to_string(),
                    err,
                })?;
        let local = listener.local_addr()?;
        if !app.auth.enabled() {
            if !local.ip().is_loopback() && !app.config.allow_anonymous {
                return Err(StartError::Config(format!(
                    "refusing to serve {local} without authentication: configure \
                     SANDBOX_API_KEYS(_FILE) or SANDBOX_JWT_SECRET, listen on loopback, or set \
                     SANDBOX_ALLOW_ANONYMOUS=true"
                )));
            }
            tracing::warn!(
                user_id = %app.config.user_id,
                "authentication is off: every request is user {:?} with admin rights",
                app.config.user_id
            );
        }
        replica::start(&app, local).await?;
        Ok(Server { app, listener })
    }

    /// The address actually bound (with the port chosen when asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    /// Serves until `shutdown` resolves, then stops accepting, ends runs and sessions, and
    /// lets open connections finish (WebSocket streams end with their runs).
    pub async fn serve(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let app = self.app.clone();
        // The forwarding layer's own errors (an owner that does not answer, a lost
        // session, ...) get the envelope and its negotiation as the handlers' do.
        let mut router = api::router(app.clone())
            .layer(axum::middleware::from_fn_with_state(
                app.clone(),
                replica::forward,
            ))
            .layer(axum::middleware::from_fn(error::negotiate));
        if app.config.mcp_enabled {
            router = router.merge(
                mcp_router(&app)
                    .layer(axum::middleware::from_fn_with_state(
                        app.clone(),
                        auth::authenticate_mcp,
                    ))
                    .layer(axum::middleware::from_fn_with_state(
                        app.clone(),
                        http::mcp_stream_base,
                    )),
            );
        }
        router = router.merge(
            axum::Router::new()
                .route("/metrics", axum::routing::get(observe::metrics_endpoint))
                .layer(axum::middleware::from_fn_with_state(
                    app.clone(),
                    auth::require_admin,
                ))
                .with_state(app.clone()),
        );
        let router = router.layer(axum::middleware::from_fn_with_state(
            app.clone(),
            observe::trace,
        ));
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let app2 = app.clone();
        tokio::spawn(async move {
            shutdown.await;
            app2.shutdown().await;
            let _ = stop_tx.send(());
        });
        let served = axum::serve(
            self.listener,
            router.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .with_graceful_shutdown(async move {
            let _ = stop_rx.await;
        });
        // Idle keep-alive connections would hold graceful shutdown open forever.
        tokio::select! {
            r = served => r,
            _ = async {
                while !app.is_shutting_down() {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                tokio::time::sleep(Duration::from_secs(30)).await;
            } => Ok(()),
        }
    }
}

/// MCP over streamable HTTP at `/mcp` (see docs/mcp.md): the same tools as `sandboxd mcp`,
/// whose sessions are the service's own ([`mcp_sessions`]: listed, capped, checkpointed and
/// hibernated like any), the module cache of the service, and the `Host`/`Origin`
/// allowlists of the configuration. With authentication on, each session belongs to the
/// authenticated user ([`auth::authenticate_mcp`]), and runs count against that user's quotas
/// and are recorded as runs ([`mcp_gate`]).
fn mcp_router(app: &Arc<App>) -> axum::Router {
    let config = &app.config;
    let gate = Arc::new(mcp_gate::McpGate::new(app));
    let mcp = wasmsand_mcp::Mcp::new(wasmsand_mcp::McpConfig {
        cache_dir: config.cache_dir.clone(),
        gate: Some(gate.clone()),
        host: Some(gate),
        // MCP's own sandboxes get the server's allowlist when it is the default policy.
        network: (config.network_default == "allowlist").then(|| wasmsand::Network {
            allowlist: config.egress_allowlist.clone(),
            resolve: config.egress_resolve.clone(),
            resolver: None,
            limits: wasmsand::NetLimits::default(),
            ca_pem: config.egress_ca_pem.iter().cloned().collect(),
            on_event: None,
        }),
        sandbox_dot_run: config.mcp_sandbox_run,
        sessions: Some(Arc::new(mcp_sessions::McpSessions::new(app))),
        ..wasmsand_mcp::McpConfig::default()
    });
    let _ = app.mcp.set(mcp.clone());
    mcp.http_router(&wasmsand_mcp::HttpOptions {
        allowed_hosts: config.mcp_allowed_hosts.clone(),
        allowed_origins: config.mcp_allowed_origins.clone(),
    })
}

pub use wasmsand_mcp::shutdown_signal;

/// `sandboxd serve`: binds, prints the address, serves until SIGINT/SIGTERM.
pub fn run_blocking(config: Config, listen: &str) -> Result<(), StartError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("wasmsand-server")
        .build()?;
    observe::init_logging(&config.log_format);
    rt.block_on(async {
        let server = Server::bind(config, listen).await?;
        let stop = shutdown_signal();
        let addr = server.local_addr();
        println!(
            "wasmsand service listening on http://{addr}{} (store: {})",
            http::BASE,
            server.app.store.mode()
        );
        use std::io::Write;
        let _ = std::io::stdout().flush();
        server.serve(stop).await?;
        Ok(())
    })
}
