//! Service configuration: every knob has the code-interpreter API's default (docs/service.md,
//! "Configuration") and its `SANDBOX_*` environment key.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

mod keys;
pub(crate) use keys::apply_key;
pub use keys::{KEYS, Key, PROCESS_KEYS, Shown};

/// Where runs, artifacts metadata and idempotency entries are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreConfig {
    /// In this process only: lost on restart (the library's default).
    Memory,
    /// A SQLite database at this path: survives restarts of one process (`serve`'s default).
    Sqlite(PathBuf),
    /// A `postgres://` URL: the store shared by replicas (see docs/deploy.md).
    Postgres(String),
}

impl StoreConfig {
    /// `memory`, `sqlite:PATH` (a bare `sqlite` means `<data_dir>/meta/sandbox_store.db`) or
    /// a `postgres://` / `postgresql://` URL.
    pub fn parse(s: &str, data_dir: &std::path::Path) -> Result<StoreConfig, String> {
        if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            return Ok(StoreConfig::Postgres(s.to_string()));
        }
        match s {
            "memory" => Ok(StoreConfig::Memory),
            "sqlite" => Ok(StoreConfig::Sqlite(
                data_dir.join("meta").join("sandbox_store.db"),
            )),
            _ => match s.strip_prefix("sqlite:") {
                Some(p) if !p.is_empty() => Ok(StoreConfig::Sqlite(PathBuf::from(p))),
                _ => Err(format!(
                    "unknown store {s:?}: expected `memory`, `sqlite`, `sqlite:PATH` or a postgres:// URL"
                )),
            },
        }
    }

    /// `memory`, `sqlite` or `postgres`, as `/runtimes` reports the store.
    pub fn mode(&self) -> &'static str {
        match self {
            StoreConfig::Memory => "memory",
            StoreConfig::Sqlite(_) => "sqlite",
            StoreConfig::Postgres(_) => "postgres",
        }
    }
}

/// Everything a service instance is configured with; [`Config::default`] holds the
/// code-interpreter API's defaults (docs/service.md), [`Config::from_env`] reads the
/// `SANDBOX_*` variables over them.
#[derive(Debug, Clone)]
pub struct Config {
    /// Root of the on-disk layout (`<data_dir>/<user_id>/runs/<run_id>/artifacts/...`).
    pub data_dir: PathBuf,
    /// Where runs, artifact lists, idempotency entries and audit events are kept
    /// (`SANDBOX_STORE_BACKEND`, `SANDBOX_STORE_DB_PATH`, `SANDBOX_STORE_URL`).
    pub store: StoreConfig,
    /// The base URL other replicas reach this one at (`SANDBOX_ADVERTISE_URL`), recorded in
    /// a shared store so they can forward requests for its sessions and runs. Default:
    /// `http://<listen address>` when that is a specific address.
    pub advertise_url: Option<String>,
    /// How often a replica refreshes its heartbeat in a shared store.
    pub replica_heartbeat_sec: u64,
    /// Heartbeats missed for this long make a replica dead: its unfinished runs fail with
    /// `replica_lost` and its sessions answer 410.
    pub replica_ttl_sec: u64,
    /// The node recorded on the runs this process executes (`SANDBOX_NODE_ID`; default the
    /// host name), for the admin list's `node_id` filter.
    pub node_id: Option<String>,
    /// Compiled-module cache of the sandboxes (default: wasmsand's own default).
    pub cache_dir: Option<PathBuf>,
    /// `SANDBOX_DEFAULT_RUNTIME` (`wasm`): the runtime a request gets when it names none; only `wasm` exists.
    pub default_runtime: String,
    /// `SANDBOX_NETWORK_DEFAULT` (`deny_all`): the network policy of a request that names none
    /// (`allowlist`: the server's `SANDBOX_EGRESS_ALLOWLIST`, on runtimes that support it).
    pub network_default: String,
    /// `SANDBOX_EGRESS_ALLOWLIST` (empty): the server's egress policy, today what server-side
    /// git clones may reach (docs/service.md, "Git inputs").
    pub egress_allowlist: wasmsand::egress::EgressPolicy,
    /// `SANDBOX_EGRESS_RESOLVE` (none): host names answered with these addresses instead of
    /// DNS (`host=ip;ip,host2=ip`), like curl's `--resolve`.
    pub egress_resolve: BTreeMap<String, Vec<std::net::IpAddr>>,
    /// `SANDBOX_EGRESS_CA_FILE` (none): certificate authorities (PEM) the network door
    /// trusts for `https://` besides the system's.
    pub egress_ca_pem: Option<String>,
    /// `SANDBOX_GIT_TIMEOUT_SEC` (120): the longest a server-side git clone may take.
    pub git_timeout_sec: u64,
    /// `SANDBOX_MAX_CONCURRENT_RUNS` (8): runs executing at once; more wait in the queue.
    pub max_concurrent_runs: usize,
    /// `SANDBOX_QUEUE_MAX_LENGTH` (100): runs waiting at once; past it a new run is refused (429).
    pub queue_max_length: usize,
    /// `SANDBOX_QUEUE_TTL_SEC` (120): a run queued longer fails with `queue_ttl_expired`.
    pub queue_ttl_sec: u64,
    /// `SANDBOX_MAX_CPU` (4.0): largest `resources.cpu` a request may ask for (a program uses one thread whatever it asks).
    pub max_cpu: f64,
    /// `SANDBOX_MAX_MEM_MB` (8192): largest `resources.memory_mb`; see [`Config::effective_max_mem_mb`].
    pub max_mem_mb: u64,
    /// `SANDBOX_MAX_LOG_BYTES` (10 MiB): output a run streams before one `truncated` frame and silence.
    pub max_log_bytes: u64,
    /// `SANDBOX_MAX_UPLOAD_MB` (64): largest upload body.
    pub max_upload_mb: u64,
    /// `SANDBOX_MAX_UPLOAD_FILES` (1000): most files one upload may create.
    pub max_upload_files: u64,
    /// `SANDBOX_MAX_UPLOAD_DEPTH` (10): deepest path an upload may create.
    pub max_upload_depth: usize,
    /// Largest expansion of a compressed upload (uncompressed / compressed bytes).
    pub max_upload_ratio: u64,
    /// `SANDBOX_WORKSPACE_CAP_MB` (256): bytes of files a session's sandbox may hold.
    pub workspace_cap_mb: u64,
    /// `SANDBOX_WORKSPACE_FILE_COUNT` (10 000): files a session's sandbox may hold.
    pub workspace_file_count: u64,
    /// `SANDBOX_ARTIFACT_TTL_HOURS` (24): how long a finished run's artifacts are kept (see [`Config::artifact_ttl`]).
    pub artifact_ttl_hours: u64,
    /// A finer artifact TTL in seconds that wins over `artifact_ttl_hours` (tests, small
    /// disks).
    pub artifact_ttl_sec: Option<u64>,
    /// `SANDBOX_MAX_ARTIFACT_BYTES_PER_RUN_MB` (32): artifact bytes captured per run; past it files are left out and the run marked `artifacts_capped`.
    pub max_artifact_bytes_per_run_mb: u64,
    /// `SANDBOX_MAX_ARTIFACT_BYTES_PER_USER_MB` (128): unexpired artifact bytes one user may hold.
    pub max_artifact_bytes_per_user_mb: u64,
    /// `SANDBOX_SUPPORTED_SPEC_VERSIONS` (`1.0`): the `spec_version`s requests may carry; others get `invalid_spec_version`.
    pub supported_spec_versions: Vec<String>,
    /// `SANDBOX_IDEMPOTENCY_TTL_SEC` (600): how long an `Idempotency-Key` replays its first answer.
    pub idempotency_ttl_sec: u64,
    /// `SANDBOX_DEFAULT_STARTUP_TIMEOUT_SEC` (20): a run's `startup_timeout_sec` when it gives none.
    pub default_startup_timeout_sec: u64,
    /// `SANDBOX_DEFAULT_EXEC_TIMEOUT_SEC` (60): a run's `timeout_sec` when it gives none.
    pub default_exec_timeout_sec: u64,
    /// Longest `timeout_sec` / `startup_timeout_sec` a request may ask for; larger ones are
    /// clamped (the status reports the clamped value).
    pub max_timeout_sec: u64,
    /// `SANDBOX_CANCEL_GRACE_SECONDS` (5): how long a cancelled run's TERM trap may run before KILL.
    pub cancel_grace_seconds: u64,
    /// `SANDBOX_WS_HEARTBEAT_SEC` (10): interval of heartbeat frames on a quiet stream.
    pub ws_heartbeat_sec: u64,
    /// Background processes a session may have running at once
    /// (`SANDBOX_MAX_PROCESSES_PER_SESSION`); 0 turns them off.
    pub max_processes_per_session: u64,
    /// Bytes of WebSocket frames each run keeps for late and reconnecting clients.
    pub ws_ring_bytes: usize,
    /// How long a finished run's frames stay in memory for late clients.
    pub log_retention_sec: u64,
    /// Most finished runs whose frames stay in memory (the oldest go first); older ones
    /// stream their `end` frame rebuilt from the store.
    pub max_retained_runs: usize,
    /// Most bytes of frames the finished runs keep in memory together (the oldest runs go
    /// first): without it, `max_retained_runs` runs of up to `ws_ring_bytes` each could hold
    /// tens of GB.
    pub max_retained_log_bytes: u64,
    /// `SANDBOX_SESSION_TTL_SEC` (3600): a session's `ttl_sec` when it gives none.
    pub session_default_ttl_sec: u64,
    /// `SANDBOX_SESSION_MAX_TTL_SEC` (86 400): larger `ttl_sec`s are clamped.
    pub session_max_ttl_sec: u64,
    /// `SANDBOX_MAX_SESSIONS` (1000): live sessions (MCP's included); then 429 `quota_exceeded`.
    pub max_sessions: usize,
    /// `SANDBOX_HIBERNATE_AFTER_SEC` (60): a wasm session idle this long is written to the
    /// store and dropped from memory; its next request wakes it (0: never).
    pub hibernate_after_sec: u64,
    /// `SANDBOX_SWEEP_INTERVAL_SEC` (900): how often expired artifacts are deleted and old audit events purged.
    pub sweep_interval_sec: u64,
    /// `SANDBOX_PIDS_LIMIT` (256): processes and jobs alive at once in a session; a wasm
    /// sandbox's `pids` limit (with `ulimit_nproc`, the smaller), Docker's `--pids-limit`.
    pub pids_limit: u64,
    /// `SANDBOX_ULIMIT_NOFILE` (1024): open descriptors per program; a wasm sandbox's
    /// `open_files`, and 4 times it its `session_open_files`; Docker's `--ulimit nofile`.
    pub ulimit_nofile: u64,
    /// `SANDBOX_ULIMIT_NPROC` (512): in a wasm sandbox the same processes as `pids_limit`
    /// (one user, no host processes: the smaller wins); Docker's `--ulimit nproc`.
    pub ulimit_nproc: u64,
    /// `SANDBOX_ENABLE_EXECUTION` (true): false makes every run 403 `forbidden`.
    pub enable_execution: bool,
    /// `SANDBOX_BACKGROUND_EXECUTION` (true): reported in the policy hash; runs always execute in the background.
    pub background_execution: bool,
    /// Extra names for templates, e.g. `python:3.11-slim` → `wasmsand/default`.
    pub image_aliases: BTreeMap<String, String>,
    /// The one user of a server without authentication (runs, sessions and the on-disk
    /// layout are recorded under it).
    pub user_id: String,
    /// Whether MCP is served over streamable HTTP at `/mcp` (`SANDBOX_MCP_ENABLED`).
    pub mcp_enabled: bool,
    /// `SANDBOX_MCP_SANDBOX_RUN` (or seed 003's `MCP_ENABLE_SANDBOX_MODULE`), default false:
    /// `/mcp` also lists seed 003's `sandbox.run` tool (off by default: a dot in a tool name
    /// breaks clients that hand tool names to model APIs).
    pub mcp_sandbox_run: bool,
    /// `Host` values `/mcp` accepts (`SANDBOX_MCP_ALLOWED_HOSTS`; default loopback only): a
    /// browser on another origin must not reach a local server through DNS rebinding.
    pub mcp_allowed_hosts: Vec<String>,
    /// `Origin` values `/mcp` accepts (`SANDBOX_MCP_ALLOWED_ORIGINS`; default loopback).
    pub mcp_allowed_origins: Vec<String>,
    /// API keys, stored as SHA-256 digests (`SANDBOX_API_KEYS`, `SANDBOX_API_KEYS_FILE`).
    pub api_keys: Vec<crate::auth::ApiKey>,
    /// HS256 secret of bearer JWTs (`SANDBOX_JWT_SECRET`, `SANDBOX_JWT_SECRET_FILE`). A secret:
    /// never in `policy_hash` or any answer.
    pub jwt_secret: Option<String>,
    /// Claim that names a user's role in JWTs (`SANDBOX_JWT_ROLE_CLAIM`, default `role`).
    pub jwt_role_claim: String,
    /// Serve without authentication on a non-loopback address (`SANDBOX_ALLOW_ANONYMOUS`).
    pub allow_anonymous: bool,
    /// `SANDBOX_TRUSTED_PROXIES` (none): the direct peers whose `Forwarded` /
    /// `X-Forwarded-Proto` / `X-Forwarded-Host` say how clients reached the service. Anyone
    /// else could write those headers, so by default nobody is believed.
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// Pre-signed `log_stream_url`s (`SANDBOX_WS_SIGNED_URLS`).
    pub ws_signed_urls: bool,
    /// `SANDBOX_WS_SIGNED_URL_TTL_SEC` (60): how long a signed stream URL stays valid.
    pub ws_signed_url_ttl_sec: u64,
    /// HMAC key of signed WebSocket URLs (`SANDBOX_WS_SIGNING_SECRET`): a secret, outside
    /// `policy_hash`. A random per-process key when unset.
    pub ws_signing_secret: Option<String>,
    /// Per-user quotas; 0 turns one off. `SANDBOX_USER_MAX_CONCURRENT_RUNS`: runs of one
    /// user not finished yet.
    pub user_max_concurrent_runs: u64,
    /// `SANDBOX_USER_RUNS_PER_MINUTE`: runs one user may create in any minute.
    pub user_runs_per_minute: u64,
    /// `SANDBOX_USER_CPU_SECONDS_PER_DAY`: CPU seconds one user's runs may use in a rolling
    /// 24 h (`SANDBOX_USER_EXEC_SECONDS_PER_DAY` is its deprecated name).
    pub user_cpu_seconds_per_day: u64,
    /// `SANDBOX_USER_ARTIFACT_MB_PER_DAY`: MiB of artifacts one user's runs may capture in a
    /// rolling 24 h.
    pub user_artifact_mb_per_day: u64,
    /// Requests one user may make in a minute (burst, then evenly); 0 turns one off.
    /// `SANDBOX_USER_SESSIONS_PER_MINUTE`: new sessions (created or forked).
    pub user_sessions_per_minute: u64,
    /// `SANDBOX_USER_UPLOADS_PER_MINUTE`: uploads and file writes.
    pub user_uploads_per_minute: u64,
    /// `SANDBOX_USER_DOWNLOADS_PER_MINUTE`: file reads and artifact downloads.
    pub user_downloads_per_minute: u64,
    /// `SANDBOX_ADMIN_REQUESTS_PER_MINUTE`: requests to `/admin/*`, per admin.
    pub admin_requests_per_minute: u64,
    /// Audit events also go, one JSON object a line, to this file (`SANDBOX_AUDIT_LOG_PATH`).
    pub audit_log_path: Option<PathBuf>,
    /// `SANDBOX_AUDIT_RETENTION_DAYS` (30): how long audit events stay in the store.
    pub audit_retention_days: u64,
    /// `SANDBOX_RUN_RETENTION_DAYS` (30): how long a finished run's record stays in the
    /// store, with its artifacts and directory; 0 keeps runs for ever.
    pub run_retention_days: u64,
    /// `SANDBOX_AUDIT_STDIN_CONTENT` (false): the `sandbox.run.stdin_closed` audit event of
    /// an interactive run carries the input itself (base64), not only its SHA-256 and size.
    pub audit_stdin_content: bool,
    /// `SANDBOX_REDACT_PATHS` (false): file paths in audit events and the admin run views are
    /// replaced by a digest of them (seed 003: "redact or hash file names/paths when policy
    /// requires"); part of the policy, so `PUT /admin/policies` can turn it on.
    pub redact_paths: bool,
    /// `SANDBOX_INTERACTIVE_ENABLED` (true): runs may ask for `interactive: true` (stdin
    /// frames on their stream); false: 403 and `interactive_supported: false`.
    pub interactive_enabled: bool,
    /// `SANDBOX_INTERACTIVE_SHELLS` (false): an interactive run may be a shell reading its
    /// commands from stdin (`bash`, `sh -i`); seed 003 permits none unless policy says so.
    pub interactive_shells: bool,
    /// `SANDBOX_INTERACTIVE_MAX_BYTES` (1 MiB): stdin bytes an interactive run may receive.
    pub interactive_max_bytes: u64,
    /// `SANDBOX_INTERACTIVE_MAX_FRAME_BYTES` (64 KiB): largest decoded payload of a `stdin` frame.
    pub interactive_max_frame_bytes: u64,
    /// `SANDBOX_INTERACTIVE_INPUT_BPS` (64 KiB): stdin bytes per second of an interactive run.
    pub interactive_input_bps: u64,
    /// `SANDBOX_INTERACTIVE_IDLE_TIMEOUT_SEC` (30): stdin is closed after this long without input.
    pub interactive_idle_timeout_sec: u64,
    /// `json` (default) or `text` (`SANDBOX_LOG_FORMAT`).
    pub log_format: String,
    /// `SANDBOX_OTLP_ENDPOINT`: the OTLP/HTTP collector traces go to; empty: no traces.
    pub otlp_endpoint: String,
    /// `SANDBOX_OTEL_SERVICE_NAME`: the `service.name` of the traces.
    pub otel_service_name: String,
    /// The Docker runtime (`SANDBOX_DOCKER_*`).
    pub docker: DockerConfig,
    /// The `vm` runtime's settings (`SANDBOX_VM_*`).
    pub vm: VmConfig,
}

/// Settings of the Docker runtime.
#[derive(Debug, Clone, PartialEq)]
pub struct DockerConfig {
    /// `SANDBOX_DOCKER_ENABLED` (true): false reports the runtime unavailable without asking
    /// the engine.
    pub enabled: bool,
    /// `SANDBOX_DOCKER_HOST`: the engine's Unix socket.
    pub host: String,
    /// `SANDBOX_DOCKER_RUNTIME` (`runc`): the OCI runtime of the containers; `runsc` is
    /// gVisor, which must be registered with the engine.
    pub oci_runtime: String,
    /// `SANDBOX_DOCKER_EGRESS_RUNTIME`: under `runsc`, the OCI runtime of the containers with
    /// an egress allowlist (a runsc registered with `--network=host`), `None`: no allowlist
    /// under gVisor.
    pub egress_oci_runtime: Option<String>,
    /// `SANDBOX_DOCKER_INSTANCE`: this instance's label on the engine (default: an id kept in
    /// the data directory). Replicas sharing an engine need distinct ones.
    pub instance: Option<String>,
    /// `SANDBOX_DOCKER_DEFAULT_MEM_MB` (512): `memory_mb` of a docker run that gives none.
    pub default_mem_mb: u64,
    /// `SANDBOX_DOCKER_MAX_CONTAINERS` (64): containers at once (sessions and one-shot runs).
    pub max_containers: usize,
    /// `SANDBOX_DOCKER_TMP_MB` (64): size of each container's `/tmp`.
    pub tmp_mb: u64,
    /// `SANDBOX_DOCKER_TMPFS_NOEXEC` (true): `/workspace` and `/tmp` are `noexec`.
    pub tmpfs_noexec: bool,
    /// `SANDBOX_DOCKER_EXEC_SCRATCH_MB` (256): the exec-allowed `/opt/exec` of images whose
    /// toolchain runs what it builds (go); 0 turns it off.
    pub exec_scratch_mb: u64,
    /// `SANDBOX_DOCKER_SECCOMP`: a seccomp profile's JSON (read from the file named);
    /// the engine's default profile when unset.
    pub seccomp_profile: Option<String>,
    /// `SANDBOX_DOCKER_APPARMOR_PROFILE`: refused on a kernel without AppArmor.
    pub apparmor_profile: Option<String>,
    /// `SANDBOX_DOCKER_POOL_SIZE` (1): started containers kept waiting per image once that
    /// image ran a one-shot run; 0 turns the warm pool off.
    pub pool_size: usize,
}

impl Default for DockerConfig {
    fn default() -> Self {
        DockerConfig {
            enabled: true,
            host: "unix:///var/run/docker.sock".into(),
            oci_runtime: "runc".into(),
            egress_oci_runtime: None,
            instance: None,
            default_mem_mb: 512,
            max_containers: 64,
            tmp_mb: 64,
            tmpfs_noexec: true,
            exec_scratch_mb: 256,
            seccomp_profile: None,
            apparmor_profile: None,
            pool_size: 1,
        }
    }
}

/// The `vm` runtime: whole Linux machines under QEMU (wasmsand-vm), restored from a saved
/// machine of one disk image.
#[derive(Debug, Clone, PartialEq)]
pub struct VmConfig {
    /// `SANDBOX_VM_ENABLED` (true): false reports the runtime unavailable.
    pub enabled: bool,
    /// `SANDBOX_VM_IMAGE`: the disk image; `None`: the one `sandboxd images build vm` made
    /// in its default cache, when there is one.
    pub image: Option<PathBuf>,
    /// `SANDBOX_VM_STATE_DIR`: where saved machines are kept; `None`: wasmsand-vm's default
    /// (`~/.cache/wasmsand/vm`).
    pub state_dir: Option<PathBuf>,
    /// `SANDBOX_VM_ACCEL` (`auto`): `kvm`, `tcg`, or KVM when its probe boot works.
    pub accel: String,
    /// `SANDBOX_VM_QEMU` (`qemu-system-x86_64`): the QEMU binary.
    pub qemu: String,
    /// `SANDBOX_VM_DEFAULT_MEM_MB` (128): `memory_mb` of a vm session or run that gives none.
    pub default_mem_mb: u64,
    /// `SANDBOX_VM_MAX_MACHINES` (8): machines at once (sessions and one-shot runs).
    pub max_machines: usize,
}

impl Default for VmConfig {
    fn default() -> Self {
        VmConfig {
            enabled: true,
            image: None,
            state_dir: None,
            accel: "auto".into(),
            qemu: "qemu-system-x86_64".into(),
            default_mem_mb: wasmsand_vm::DEFAULT_MEMORY_MB,
            max_machines: 8,
        }
    }
}

pub(crate) const MIB: u64 = 1024 * 1024;

/// Largest `SANDBOX_INTERACTIVE_MAX_FRAME_BYTES`.
pub const MAX_INTERACTIVE_FRAME_BYTES: u64 = MIB;

impl Default for Config {
    fn default() -> Self {
        Config {
            data_dir: std::env::temp_dir().join("wasmsand-service"),
            store: StoreConfig::Memory,
            advertise_url: None,
            replica_heartbeat_sec: 2,
            replica_ttl_sec: 10,
            node_id: None,
            cache_dir: None,
            default_runtime: "wasm".into(),
            network_default: "deny_all".into(),
            egress_allowlist: Default::default(),
            egress_resolve: BTreeMap::new(),
            egress_ca_pem: None,
            git_timeout_sec: 120,
            max_concurrent_runs: 8,
            queue_max_length: 100,
            queue_ttl_sec: 120,
            max_cpu: 4.0,
            max_mem_mb: 8192,
            max_log_bytes: 10 * MIB,
            max_upload_mb: 64,
            max_upload_files: 1000,
            max_upload_depth: 10,
            max_upload_ratio: 100,
            workspace_cap_mb: 256,
            workspace_file_count: 10_000,
            artifact_ttl_hours: 24,
            artifact_ttl_sec: None,
            max_artifact_bytes_per_run_mb: 32,
            max_artifact_bytes_per_user_mb: 128,
            supported_spec_versions: vec!["1.0".into()],
            idempotency_ttl_sec: 600,
            default_startup_timeout_sec: 20,
            default_exec_timeout_sec: 60,
            max_timeout_sec: 3600,
            cancel_grace_seconds: 5,
            ws_heartbeat_sec: 10,
            max_processes_per_session: 8,
            ws_ring_bytes: 4 * MIB as usize,
            log_retention_sec: 3600,
            max_retained_runs: 10_000,
            max_retained_log_bytes: 256 * MIB,
            session_default_ttl_sec: 3600,
            session_max_ttl_sec: 24 * 3600,
            max_sessions: 1000,
            hibernate_after_sec: 60,
            sweep_interval_sec: 900,
            pids_limit: 256,
            ulimit_nofile: 1024,
            ulimit_nproc: 512,
            enable_execution: true,
            background_execution: true,
            image_aliases: BTreeMap::new(),
            user_id: "default".into(),
            mcp_enabled: true,
            mcp_sandbox_run: false,
            mcp_allowed_hosts: wasmsand_mcp::HttpOptions::default().allowed_hosts,
            mcp_allowed_origins: wasmsand_mcp::HttpOptions::default().allowed_origins,
            api_keys: Vec::new(),
            jwt_secret: None,
            jwt_role_claim: "role".into(),
            allow_anonymous: false,
            trusted_proxies: Vec::new(),
            ws_signed_urls: false,
            ws_signed_url_ttl_sec: 60,
            ws_signing_secret: None,
            user_max_concurrent_runs: 32,
            user_runs_per_minute: 0,
            user_cpu_seconds_per_day: 0,
            user_artifact_mb_per_day: 0,
            user_sessions_per_minute: 300,
            user_uploads_per_minute: 300,
            user_downloads_per_minute: 1200,
            admin_requests_per_minute: 600,
            audit_log_path: None,
            audit_retention_days: 30,
            run_retention_days: 30,
            audit_stdin_content: false,
            redact_paths: false,
            interactive_enabled: true,
            interactive_shells: false,
            interactive_max_bytes: MIB,
            interactive_max_frame_bytes: 64 * 1024,
            interactive_input_bps: 64 * 1024,
            interactive_idle_timeout_sec: 30,
            log_format: "json".into(),
            otlp_endpoint: String::new(),
            otel_service_name: "wasmsand".into(),
            docker: DockerConfig::default(),
            vm: VmConfig::default(),
        }
    }
}

fn parse_bool(s: &str) -> Option<bool> {
    match s.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// `1.0,1.1` or `["1.0","1.1"]`.
fn parse_list(s: &str) -> Option<Vec<String>> {
    let t = s.trim();
    if t.starts_with('[') {
        return serde_json::from_str::<Vec<String>>(t).ok();
    }
    let v: Vec<String> = t
        .split(',')
        .map(|x| x.trim().to_string())
        .filter(|x| !x.is_empty())
        .collect();
    (!v.is_empty()).then_some(v)
}

/// `10.0.0.1, 10.1.0.0/16, ::1` (or a JSON array): addresses and CIDR blocks; empty is none.
fn parse_nets(s: &str) -> Result<Vec<ipnet::IpNet>, String> {
    if s.trim().is_empty() {
        return Ok(Vec::new());
    }
    let items = parse_list(s).ok_or_else(|| format!("not a list of addresses: {s:?}"))?;
    items
        .iter()
        .map(|item| {
            item.parse::<ipnet::IpNet>()
                .or_else(|_| item.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
                .map(|n| n.trunc())
                .map_err(|_| format!("not an IP address or CIDR block: {item:?}"))
        })
        .collect()
}

/// `alias=template,alias2=template` or a JSON object.
fn parse_aliases(s: &str) -> Option<BTreeMap<String, String>> {
    let t = s.trim();
    if t.starts_with('{') {
        return serde_json::from_str(t).ok();
    }
    let mut map = BTreeMap::new();
    for pair in t.split(',').filter(|p| !p.trim().is_empty()) {
        let (k, v) = pair.split_once('=')?;
        map.insert(k.trim().to_string(), v.trim().to_string());
    }
    Some(map)
}

impl Config {
    /// The defaults with the process's `SANDBOX_*` variables applied, validated.
    pub fn from_env() -> Result<Config, String> {
        Config::from_lookup(|k| {
            std::env::var(k).ok().or_else(|| {
                // Seed 003's name for turning its `sandbox.run` tool on.
                (k == "SANDBOX_MCP_SANDBOX_RUN")
                    .then(|| std::env::var("MCP_ENABLE_SANDBOX_MODULE").ok())
                    .flatten()
            })
        })
    }

    /// Refuses settings that cannot work together, naming the variable to change.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_concurrent_runs == 0 {
            return Err("SANDBOX_MAX_CONCURRENT_RUNS must be at least 1".into());
        }
        for (name, v) in [
            ("SANDBOX_INTERACTIVE_MAX_BYTES", self.interactive_max_bytes),
            ("SANDBOX_INTERACTIVE_INPUT_BPS", self.interactive_input_bps),
            (
                "SANDBOX_INTERACTIVE_IDLE_TIMEOUT_SEC",
                self.interactive_idle_timeout_sec,
            ),
        ] {
            if v == 0 {
                return Err(format!("{name} must be at least 1"));
            }
        }
        // The stream's message cap is derived from it (`crate::interactive`): bounded so that
        // one client message cannot make the server buffer more than a few MiB.
        if !(1..=MAX_INTERACTIVE_FRAME_BYTES).contains(&self.interactive_max_frame_bytes) {
            return Err(format!(
                "SANDBOX_INTERACTIVE_MAX_FRAME_BYTES must be in [1, {MAX_INTERACTIVE_FRAME_BYTES}]"
            ));
        }
        if self.supported_spec_versions.is_empty() {
            return Err("SANDBOX_SUPPORTED_SPEC_VERSIONS must name at least one version".into());
        }
        if !matches!(self.default_runtime.as_str(), "wasm" | "docker" | "vm") {
            return Err(format!(
                "SANDBOX_DEFAULT_RUNTIME: `wasm`, `docker` or `vm`, not {:?}",
                self.default_runtime
            ));
        }
        if self.vm.default_mem_mb < wasmsand_vm::MIN_MEMORY_MB {
            return Err(format!(
                "SANDBOX_VM_DEFAULT_MEM_MB must be at least {} (the least a guest kernel boots in)",
                wasmsand_vm::MIN_MEMORY_MB
            ));
        }
        if !matches!(self.docker.oci_runtime.as_str(), "runc" | "runsc") {
            return Err(format!(
                "SANDBOX_DOCKER_RUNTIME: `runc` or `runsc` (gVisor), not {:?}",
                self.docker.oci_runtime
            ));
        }
        if let Some(r) = &self.docker.egress_oci_runtime
            && self.docker.oci_runtime != "runsc"
        {
            return Err(format!(
                "SANDBOX_DOCKER_EGRESS_RUNTIME ({r:?}) applies only under SANDBOX_DOCKER_RUNTIME=runsc: \
                 runc's containers reach the egress proxy as they are"
            ));
        }
        if self.docker.apparmor_profile.is_some()
            && !std::path::Path::new("/sys/kernel/security/apparmor").exists()
        {
            return Err(
                "SANDBOX_DOCKER_APPARMOR_PROFILE: this kernel has no AppArmor \
                 (/sys/kernel/security/apparmor is missing), so no profile can be applied; \
                 unset it"
                    .into(),
            );
        }
        match self.network_default.as_str() {
            "deny_all" => {}
            "allowlist" if self.egress_allowlist.is_empty() => {
                return Err(
                    "SANDBOX_NETWORK_DEFAULT=allowlist needs SANDBOX_EGRESS_ALLOWLIST \
                            (an empty allowlist allows nothing)"
                        .into(),
                );
            }
            "allowlist" => {}
            other => {
                return Err(format!(
                    "SANDBOX_NETWORK_DEFAULT: `deny_all` or `allowlist`, not {other:?}"
                ));
            }
        }
        if self.git_timeout_sec == 0 {
            return Err("SANDBOX_GIT_TIMEOUT_SEC must be at least 1".into());
        }
        if self.ws_heartbeat_sec == 0 {
            return Err("SANDBOX_WS_HEARTBEAT_SEC must be at least 1".into());
        }
        if self.max_cpu.is_nan() || self.max_cpu <= 0.0 {
            return Err("SANDBOX_MAX_CPU must be positive".into());
        }
        if self.jwt_secret.as_ref().is_some_and(|s| s.len() < 16) {
            return Err("SANDBOX_JWT_SECRET must be at least 16 bytes".into());
        }
        if self
            .ws_signing_secret
            .as_ref()
            .is_some_and(|s| s.len() < 16)
        {
            return Err("SANDBOX_WS_SIGNING_SECRET must be at least 16 bytes".into());
        }
        if self.ws_signed_url_ttl_sec == 0 {
            return Err("SANDBOX_WS_SIGNED_URL_TTL_SEC must be at least 1".into());
        }
        if !matches!(self.log_format.as_str(), "json" | "text") {
            return Err(format!(
                "SANDBOX_LOG_FORMAT: `json` or `text`, not {:?}",
                self.log_format
            ));
        }
        if self.replica_heartbeat_sec == 0 || self.replica_ttl_sec <= self.replica_heartbeat_sec {
            return Err(
                "SANDBOX_REPLICA_TTL_SEC must be longer than SANDBOX_REPLICA_HEARTBEAT_SEC (at least 1)"
                    .into(),
            );
        }
        if let Some(u) = &self.advertise_url
            && !(u.starts_with("http://") || u.starts_with("https://"))
        {
            return Err(format!(
                "SANDBOX_ADVERTISE_URL must be an http:// or https:// URL, not {u:?}"
            ));
        }
        Ok(())
    }

    /// How long artifacts are kept: `artifact_ttl_sec` when set, else the hours.
    pub fn artifact_ttl(&self) -> Duration {
        Duration::from_secs(
            self.artifact_ttl_sec
                .unwrap_or(self.artifact_ttl_hours.saturating_mul(3600)),
        )
    }

    /// [`Config::cancel_grace_seconds`] as a duration.
    pub fn grace(&self) -> Duration {
        Duration::from_secs(self.cancel_grace_seconds)
    }

    /// Linear memory is 32-bit: a program cannot use more than 4 GiB whatever the policy says.
    pub fn effective_max_mem_mb(&self) -> u64 {
        self.max_mem_mb.min(4096)
    }
}

/// `host=ip;ip,host2=ip`: fixed answers for host names.
fn parse_resolve(v: &str) -> Result<BTreeMap<String, Vec<std::net::IpAddr>>, String> {
    let mut out = BTreeMap::new();
    for entry in v.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (host, addrs) = entry
            .split_once('=')
            .ok_or_else(|| format!("{entry:?} is not host=ip[;ip...]"))?;
        let ips = addrs
            .split(';')
            .map(|a| {
                a.trim()
                    .parse()
                    .map_err(|_| format!("{entry:?}: {a:?} is not an IP address"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        out.insert(wasmsand::egress::normalize_host(host.trim()), ips);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn defaults_are_the_prds() {
        let c = Config::from_lookup(|_| None).unwrap();
        assert_eq!(c.queue_max_length, 100);
        assert_eq!(c.queue_ttl_sec, 120);
        assert_eq!(c.max_concurrent_runs, 8);
        assert_eq!(c.max_log_bytes, 10 * MIB);
        assert_eq!(c.idempotency_ttl_sec, 600);
        assert_eq!(c.supported_spec_versions, vec!["1.0".to_string()]);
        assert_eq!(c.cancel_grace_seconds, 5);
        assert_eq!(c.store, StoreConfig::Memory);
    }

    #[test]
    fn keys_override_and_bad_values_name_the_key() {
        let c = Config::from_lookup(lookup(&[
            ("SANDBOX_SUPPORTED_SPEC_VERSIONS", r#"["1.0","1.1"]"#),
            ("SANDBOX_IMAGE_ALIASES", "python:3.11-slim=wasmsand/default"),
            ("SANDBOX_STORE_BACKEND", "sqlite:/tmp/x.db"),
            ("SANDBOX_QUEUE_MAX_LENGTH", "3"),
        ]))
        .unwrap();
        assert_eq!(c.supported_spec_versions, vec!["1.0", "1.1"]);
        assert_eq!(c.image_aliases["python:3.11-slim"], "wasmsand/default");
        assert_eq!(c.store, StoreConfig::Sqlite("/tmp/x.db".into()));
        assert_eq!(c.queue_max_length, 3);
        let e = Config::from_lookup(lookup(&[("SANDBOX_QUEUE_TTL_SEC", "soon")])).unwrap_err();
        assert!(e.contains("SANDBOX_QUEUE_TTL_SEC"), "{e}");
        let e = Config::from_lookup(lookup(&[("SANDBOX_DEFAULT_RUNTIME", "qemu")])).unwrap_err();
        assert!(e.contains("wasm") && e.contains("docker"), "{e}");
        let e = Config::from_lookup(lookup(&[("SANDBOX_DOCKER_RUNTIME", "kata")])).unwrap_err();
        assert!(e.contains("runsc"), "{e}");
    }

    #[test]
    fn the_egress_policy_and_fixed_answers_are_read_and_checked() {
        let c = Config::from_lookup(lookup(&[
            (
                "SANDBOX_EGRESS_ALLOWLIST",
                r#"{"hosts": ["GitHub.com", "*.example.com"], "ips": ["127.0.0.1"]}"#,
            ),
            (
                "SANDBOX_EGRESS_RESOLVE",
                "git.test=127.0.0.1;::1, Other.test=10.0.0.2",
            ),
        ]))
        .unwrap();
        let list = c.egress_allowlist.to_allowlist();
        assert_eq!(list.hosts, ["github.com", "*.example.com"]);
        assert_eq!(list.ips, ["127.0.0.1"]);
        assert_eq!(c.egress_resolve["git.test"].len(), 2);
        assert_eq!(
            c.egress_resolve["other.test"],
            ["10.0.0.2".parse::<std::net::IpAddr>().unwrap()]
        );
        for (key, value, want) in [
            (
                "SANDBOX_EGRESS_ALLOWLIST",
                r#"{"hosts": ["*.com"]}"#,
                "two labels",
            ),
            (
                "SANDBOX_EGRESS_ALLOWLIST",
                r#"{"domains": []}"#,
                "unknown field",
            ),
            ("SANDBOX_EGRESS_ALLOWLIST", "github.com", "not an allowlist"),
            ("SANDBOX_EGRESS_RESOLVE", "git.test", "is not host=ip"),
            (
                "SANDBOX_EGRESS_RESOLVE",
                "git.test=localhost",
                "is not an IP address",
            ),
            ("SANDBOX_GIT_TIMEOUT_SEC", "0", "at least 1"),
        ] {
            let e = Config::from_lookup(lookup(&[(key, value)])).unwrap_err();
            assert!(e.contains(key) && e.contains(want), "{key}={value}: {e}");
        }
    }

    #[test]
    fn trusted_proxies_are_addresses_and_blocks() {
        assert!(Config::default().trusted_proxies.is_empty());
        let c = Config::from_lookup(lookup(&[(
            "SANDBOX_TRUSTED_PROXIES",
            " 10.0.0.5, 127.0.0.0/8 ,::1,10.1.2.3/16",
        )]))
        .unwrap();
        let shown: Vec<String> = c.trusted_proxies.iter().map(|n| n.to_string()).collect();
        // A bare address is its own block; a block is cut to its network.
        assert_eq!(
            shown,
            ["10.0.0.5/32", "127.0.0.0/8", "::1/128", "10.1.0.0/16"]
        );
        let c = Config::from_lookup(lookup(&[("SANDBOX_TRUSTED_PROXIES", r#"["::/0"]"#)])).unwrap();
        assert_eq!(c.trusted_proxies.len(), 1);
        let c = Config::from_lookup(lookup(&[("SANDBOX_TRUSTED_PROXIES", " ")])).unwrap();
        assert!(c.trusted_proxies.is_empty());
        for bad in ["proxy.local", "10.0.0.0/33", "10.0.0.5;10.0.0.6"] {
            let e = Config::from_lookup(lookup(&[("SANDBOX_TRUSTED_PROXIES", bad)])).unwrap_err();
            assert!(
                e.contains("SANDBOX_TRUSTED_PROXIES") && e.contains("not an IP address"),
                "{bad}: {e}"
            );
        }
    }
}
