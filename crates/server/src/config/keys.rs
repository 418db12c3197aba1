//! Every `SANDBOX_*` key, once: its name, how its value is read into [`Config`], its default
//! and what it is for. Parsing ([`Config::from_lookup`]), the keys a configuration file or
//! `--set` may name (`crate::settings`) and the table in docs/service.md all come from
//! [`KEYS`]; `key_table_in_the_docs_is_the_registry` fails when the docs are edited by hand.

use std::path::PathBuf;

use super::{Config, StoreConfig, parse_aliases, parse_bool, parse_list, parse_nets};

/// A key's value as read so far: the configuration, and the store keys, which only mean
/// something together and are resolved after every key is read.
#[derive(Default)]
pub(super) struct Reading {
    pub config: Config,
    store_backend: Option<String>,
    store_url: Option<String>,
    store_db_path: Option<String>,
}

/// How a key's default is told in the docs.
pub enum Shown {
    /// Rendered from [`Config::default`], so the docs cannot state another default.
    FromDefault(fn(&Config) -> String),
    /// Said in words: the default depends on the machine or on the caller.
    Text(&'static str),
}

/// One configuration key.
pub struct Key {
    /// `SANDBOX_...`; a file may also write it in lower case without the prefix.
    pub name: &'static str,
    /// Reads a value into the configuration; the error names what is wrong, not the key.
    apply: fn(&mut Reading, &str) -> Result<(), String>,
    /// The default, for the docs.
    pub default: Shown,
    /// What it is for (Markdown), for the docs.
    pub doc: &'static str,
}

fn number<T: std::str::FromStr>(v: &str) -> Result<T, String> {
    v.trim()
        .parse()
        .map_err(|_| format!("not a valid number: {v:?}"))
}

fn flag(v: &str) -> Result<bool, String> {
    parse_bool(v).ok_or_else(|| format!("not a boolean: {v:?}"))
}

fn list(v: &str, of: &str) -> Result<Vec<String>, String> {
    parse_list(v).ok_or_else(|| format!("not a list of {of}: {v:?}"))
}

fn read_file(path: &str) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))
}

/// A key whose value parses into a field by `FromStr` (numbers) and whose default is the
/// field's default.
macro_rules! num {
    ($name:literal, $field:ident, $doc:literal) => {
        Key {
            name: $name,
            apply: |r, v| {
                r.config.$field = number(v)?;
                Ok(())
            },
            default: Shown::FromDefault(|c| c.$field.to_string()),
            doc: $doc,
        }
    };
}

/// A boolean key (`true/false`, `1/0`, `yes/no`, `on/off`).
macro_rules! boolean {
    ($name:literal, $field:ident, $doc:literal) => {
        Key {
            name: $name,
            apply: |r, v| {
                r.config.$field = flag(v)?;
                Ok(())
            },
            default: Shown::FromDefault(|c| c.$field.to_string()),
            doc: $doc,
        }
    };
}

/// A key taken as written.
macro_rules! text {
    ($name:literal, $field:ident, $doc:literal) => {
        Key {
            name: $name,
            apply: |r, v| {
                r.config.$field = v.to_string();
                Ok(())
            },
            default: Shown::FromDefault(|c| format!("`{}`", c.$field)),
            doc: $doc,
        }
    };
}

/// Every key, in the order they are read (a later key of a pair, such as a `_FILE` variant,
/// wins over the earlier) and listed in the docs.
pub static KEYS: &[Key] = &[
    Key {
        name: "SANDBOX_DATA_DIR",
        apply: |r, v| {
            r.config.data_dir = PathBuf::from(v);
            Ok(())
        },
        default: Shown::Text(
            "`$XDG_DATA_HOME/wasmsand/service` or `~/.local/share/wasmsand/service` (`--data-dir`)",
        ),
        doc: "",
    },
    Key {
        name: "SANDBOX_STORE_BACKEND",
        apply: |r, v| {
            r.store_backend = Some(v.to_string());
            Ok(())
        },
        default: Shown::Text("`sqlite` for `serve` (`--store`), `memory` for the library"),
        doc: "`memory`, `sqlite`, `sqlite:PATH`, `postgres` (with `SANDBOX_STORE_URL`) or a `postgres://` URL",
    },
    Key {
        name: "SANDBOX_STORE_DB_PATH",
        apply: |r, v| {
            r.store_db_path = Some(v.to_string());
            Ok(())
        },
        default: Shown::Text("`<data_dir>/meta/sandbox_store.db`"),
        doc: "",
    },
    Key {
        name: "SANDBOX_STORE_URL",
        apply: |r, v| {
            r.store_url = Some(v.to_string());
            Ok(())
        },
        default: Shown::Text(""),
        doc: "`postgres://USER:PASSWORD@HOST:PORT/DB`; implies the postgres backend (kept apart from the backend key so a password can come from a secret of its own)",
    },
    Key {
        name: "SANDBOX_ADVERTISE_URL",
        apply: |r, v| {
            r.config.advertise_url = Some(v.trim().trim_end_matches('/').to_string());
            Ok(())
        },
        default: Shown::Text(
            "`http://<listen address>` (required when listening on all interfaces with PostgreSQL)",
        ),
        doc: "where other replicas forward this one's sessions and runs",
    },
    num!("SANDBOX_REPLICA_HEARTBEAT_SEC", replica_heartbeat_sec, ""),
    num!(
        "SANDBOX_REPLICA_TTL_SEC",
        replica_ttl_sec,
        "heartbeats missed this long: the replica is dead"
    ),
    Key {
        name: "SANDBOX_NODE_ID",
        apply: |r, v| {
            let v = v.trim();
            r.config.node_id = (!v.is_empty()).then(|| v.to_string());
            Ok(())
        },
        default: Shown::Text("the host name (`/proc/sys/kernel/hostname`), else `local`"),
        doc: "recorded as `node_id` on the runs this process executes (with `worker_id`, the process's own id), the admin list's `node_id` filter",
    },
    text!(
        "SANDBOX_DEFAULT_RUNTIME",
        default_runtime,
        "`wasm`, `docker` or `vm`: the runtime of a request that names neither a runtime nor an image of one"
    ),
    text!(
        "SANDBOX_NETWORK_DEFAULT",
        network_default,
        "`deny_all` or `allowlist`: the network policy of a session or run that names none; `allowlist` gives it `SANDBOX_EGRESS_ALLOWLIST` on a runtime that supports it (wasm; docker: `deny_all`)"
    ),
    Key {
        name: "SANDBOX_EGRESS_ALLOWLIST",
        apply: |r, v| {
            let list: wasmsand::egress::EgressAllowlist = if v.trim().is_empty() {
                Default::default()
            } else {
                serde_json::from_str(v).map_err(|e| {
                    format!("not an allowlist ({{\"hosts\": [...], \"cidrs\": [...], \"ips\": [...]}}): {e}")
                })?
            };
            r.config.egress_allowlist =
                wasmsand::egress::EgressPolicy::parse(&list).map_err(|e| e.to_string())?;
            Ok(())
        },
        default: Shown::Text("empty (nothing)"),
        doc: "the server's egress policy as JSON `{\"hosts\": [\"github.com\", \"*.example.com\"], \"cidrs\": [\"203.0.113.0/24\"], \"ips\": [\"198.51.100.7\"]}`: what sessions and runs with `network_policy: allowlist` may reach (their `egress_allowlist` can only narrow it) and server-side git clones (`git` of sessions and runs) too; loopback, private, link-local and metadata addresses only through an `ips`/`cidrs` entry inside them; in the policy hash",
    },
    Key {
        name: "SANDBOX_EGRESS_RESOLVE",
        apply: |r, v| {
            r.config.egress_resolve = super::parse_resolve(v)?;
            Ok(())
        },
        default: Shown::Text("none"),
        doc: "host names answered with fixed addresses instead of DNS, `host=ip;ip,host2=ip` (as curl's `--resolve`); in the policy hash",
    },
    Key {
        name: "SANDBOX_EGRESS_CA_FILE",
        apply: |r, v| {
            let pem = read_file(v)?;
            if !pem.contains("-----BEGIN CERTIFICATE-----") {
                return Err(format!("{v}: no PEM certificate in it"));
            }
            r.config.egress_ca_pem = Some(pem);
            Ok(())
        },
        default: Shown::Text("none"),
        doc: "a PEM file of certificate authorities that sandboxes' `https://` requests trust besides the system's (`/etc/ssl/certs`); its SHA-256 is in the policy hash",
    },
    num!(
        "SANDBOX_GIT_TIMEOUT_SEC",
        git_timeout_sec,
        "the longest a server-side git clone (fetch, checkout, patch) may take; then 504 `git_clone_failed`"
    ),
    num!("SANDBOX_MAX_CONCURRENT_RUNS", max_concurrent_runs, ""),
    num!("SANDBOX_QUEUE_MAX_LENGTH", queue_max_length, ""),
    num!("SANDBOX_QUEUE_TTL_SEC", queue_ttl_sec, ""),
    Key {
        name: "SANDBOX_MAX_CPU",
        apply: |r, v| {
            r.config.max_cpu = number(v)?;
            Ok(())
        },
        default: Shown::FromDefault(|c| format!("{:?}", c.max_cpu)),
        doc: "",
    },
    num!(
        "SANDBOX_MAX_MEM_MB",
        max_mem_mb,
        "effective 4096 for wasm32"
    ),
    num!("SANDBOX_MAX_LOG_BYTES", max_log_bytes, ""),
    num!("SANDBOX_MAX_UPLOAD_MB", max_upload_mb, ""),
    num!("SANDBOX_MAX_UPLOAD_FILES", max_upload_files, ""),
    num!("SANDBOX_MAX_UPLOAD_DEPTH", max_upload_depth, ""),
    num!("SANDBOX_MAX_UPLOAD_RATIO", max_upload_ratio, ""),
    num!(
        "SANDBOX_WORKSPACE_CAP_MB",
        workspace_cap_mb,
        "bytes of files in a sandbox"
    ),
    num!("SANDBOX_WORKSPACE_FILE_COUNT", workspace_file_count, ""),
    num!("SANDBOX_ARTIFACT_TTL_HOURS", artifact_ttl_hours, ""),
    Key {
        name: "SANDBOX_ARTIFACT_TTL_SEC",
        apply: |r, v| {
            r.config.artifact_ttl_sec = Some(number(v)?);
            Ok(())
        },
        default: Shown::Text("unset"),
        doc: "finer TTL, wins over hours",
    },
    num!(
        "SANDBOX_MAX_ARTIFACT_BYTES_PER_RUN_MB",
        max_artifact_bytes_per_run_mb,
        ""
    ),
    num!(
        "SANDBOX_MAX_ARTIFACT_BYTES_PER_USER_MB",
        max_artifact_bytes_per_user_mb,
        ""
    ),
    Key {
        name: "SANDBOX_SUPPORTED_SPEC_VERSIONS",
        apply: |r, v| {
            r.config.supported_spec_versions = list(v, "versions")?;
            Ok(())
        },
        default: Shown::FromDefault(|c| format!("`{}`", c.supported_spec_versions.join(","))),
        doc: "comma list or JSON array",
    },
    num!("SANDBOX_IDEMPOTENCY_TTL_SEC", idempotency_ttl_sec, ""),
    num!(
        "SANDBOX_DEFAULT_STARTUP_TIMEOUT_SEC",
        default_startup_timeout_sec,
        ""
    ),
    num!(
        "SANDBOX_DEFAULT_EXEC_TIMEOUT_SEC",
        default_exec_timeout_sec,
        ""
    ),
    num!(
        "SANDBOX_MAX_TIMEOUT_SEC",
        max_timeout_sec,
        "larger requests are clamped"
    ),
    num!(
        "SANDBOX_CANCEL_GRACE_SECONDS",
        cancel_grace_seconds,
        "a cancelled run's TERM → KILL grace"
    ),
    num!("SANDBOX_WS_HEARTBEAT_SEC", ws_heartbeat_sec, ""),
    num!(
        "SANDBOX_MAX_PROCESSES_PER_SESSION",
        max_processes_per_session,
        "background processes running at once in a session (0: none)"
    ),
    num!("SANDBOX_WS_RING_BYTES", ws_ring_bytes, "per run"),
    boolean!(
        "SANDBOX_INTERACTIVE_ENABLED",
        interactive_enabled,
        "runs may be `interactive: true` (stdin frames on their stream); false: 403 and `interactive_supported: false`; in the policy hash"
    ),
    boolean!(
        "SANDBOX_INTERACTIVE_SHELLS",
        interactive_shells,
        "an interactive run may be a shell reading its commands from stdin (`bash`, `sh -i`); false: 403 `forbidden`; in the policy hash"
    ),
    num!(
        "SANDBOX_INTERACTIVE_MAX_BYTES",
        interactive_max_bytes,
        "stdin bytes an interactive run may receive (`stdin_max_bytes` may only lower it); in the policy hash"
    ),
    num!(
        "SANDBOX_INTERACTIVE_MAX_FRAME_BYTES",
        interactive_max_frame_bytes,
        "largest decoded payload of one `stdin` frame (`stdin_max_frame_bytes`), at most 1 MiB; in the policy hash"
    ),
    num!(
        "SANDBOX_INTERACTIVE_INPUT_BPS",
        interactive_input_bps,
        "stdin bytes per second of an interactive run (`stdin_bps`); in the policy hash"
    ),
    num!(
        "SANDBOX_INTERACTIVE_IDLE_TIMEOUT_SEC",
        interactive_idle_timeout_sec,
        "stdin is closed after this long without input (`stdin_idle_timeout_sec`); in the policy hash"
    ),
    num!(
        "SANDBOX_LOG_RETENTION_SEC",
        log_retention_sec,
        "finished runs' frames in memory"
    ),
    num!(
        "SANDBOX_MAX_RETAINED_RUNS",
        max_retained_runs,
        "finished runs whose frames stay in memory, newest kept"
    ),
    num!(
        "SANDBOX_MAX_RETAINED_LOG_BYTES",
        max_retained_log_bytes,
        "bytes of frames all finished runs keep in memory together, newest runs kept"
    ),
    num!(
        "SANDBOX_SESSION_TTL_SEC",
        session_default_ttl_sec,
        "default `ttl_sec`"
    ),
    num!(
        "SANDBOX_SESSION_MAX_TTL_SEC",
        session_max_ttl_sec,
        "larger `ttl_sec` is clamped"
    ),
    num!(
        "SANDBOX_MAX_SESSIONS",
        max_sessions,
        "then 429 `quota_exceeded`"
    ),
    num!(
        "SANDBOX_HIBERNATE_AFTER_SEC",
        hibernate_after_sec,
        "idle wasm sessions go to the store; 0: never"
    ),
    num!(
        "SANDBOX_SWEEP_INTERVAL_SEC",
        sweep_interval_sec,
        "how often expired artifacts, audit events, run records and idempotency entries are deleted"
    ),
    num!(
        "SANDBOX_PIDS_LIMIT",
        pids_limit,
        "processes and jobs alive at once in a session (pipeline stages, subshells, `&` jobs, background processes); past it the run fails as a refused fork, `pids_limit_exceeded` (wasm: the sandbox's `pids`, the smaller of this and `SANDBOX_ULIMIT_NPROC`; Docker: `--pids-limit`)"
    ),
    num!(
        "SANDBOX_ULIMIT_NOFILE",
        ulimit_nofile,
        "open descriptors per program, `EMFILE` past it (wasm: the sandbox's `openFiles`, and 4 times it for a session's programs together, `sessionOpenFiles`; Docker: `--ulimit nofile`)"
    ),
    num!(
        "SANDBOX_ULIMIT_NPROC",
        ulimit_nproc,
        "wasm: bounds the same processes as `SANDBOX_PIDS_LIMIT` (one user, no host processes), the smaller wins; Docker: `--ulimit nproc`"
    ),
    boolean!(
        "SANDBOX_ENABLE_EXECUTION",
        enable_execution,
        "false: runs are 403 (on by default: running code is what this service is for)"
    ),
    boolean!(
        "SANDBOX_BACKGROUND_EXECUTION",
        background_execution,
        "runs always execute in the background"
    ),
    Key {
        name: "SANDBOX_IMAGE_ALIASES",
        apply: |r, v| {
            r.config.image_aliases =
                parse_aliases(v).ok_or_else(|| format!("expected alias=template,...: {v:?}"))?;
            Ok(())
        },
        default: Shown::Text("none"),
        doc: "`alias=template,...` or a JSON object",
    },
    text!(
        "SANDBOX_USER_ID",
        user_id,
        "owner of runs and the artifact directory"
    ),
    boolean!(
        "SANDBOX_MCP_ENABLED",
        mcp_enabled,
        "serve MCP over streamable HTTP at `/mcp` (docs/mcp.md)"
    ),
    boolean!(
        "SANDBOX_MCP_SANDBOX_RUN",
        mcp_sandbox_run,
        "`/mcp` also lists seed 003's `sandbox.run` (or `MCP_ENABLE_SANDBOX_MODULE=1`)"
    ),
    Key {
        name: "SANDBOX_MCP_ALLOWED_HOSTS",
        apply: |r, v| {
            r.config.mcp_allowed_hosts = list(v, "hosts")?;
            Ok(())
        },
        default: Shown::FromDefault(|c| format!("`{}`", c.mcp_allowed_hosts.join(","))),
        doc: "`Host` values `/mcp` accepts (`*`: any)",
    },
    Key {
        name: "SANDBOX_MCP_ALLOWED_ORIGINS",
        apply: |r, v| {
            r.config.mcp_allowed_origins = list(v, "origins")?;
            Ok(())
        },
        default: Shown::Text("loopback origins"),
        doc: "`Origin` values `/mcp` accepts (`*`: any)",
    },
    Key {
        name: "SANDBOX_API_KEYS",
        apply: |r, v| {
            r.config.api_keys = crate::auth::parse_api_keys(v)?;
            Ok(())
        },
        default: Shown::Text("none"),
        doc: "`SHA256HEX:USER[:ROLE],...`",
    },
    Key {
        name: "SANDBOX_API_KEYS_FILE",
        apply: |r, path| {
            let more = crate::auth::parse_api_keys(&read_file(path)?)
                .map_err(|e| format!("{path}: {e}"))?;
            r.config.api_keys.extend(more);
            Ok(())
        },
        default: Shown::Text("none"),
        doc: "one `SHA256HEX USER [ROLE]` a line (`--api-keys-file`), added to `SANDBOX_API_KEYS`",
    },
    Key {
        name: "SANDBOX_JWT_SECRET",
        apply: |r, v| {
            r.config.jwt_secret = Some(v.to_string());
            Ok(())
        },
        default: Shown::Text("none"),
        doc: "HS256 secret, at least 16 bytes (secret: not in `policy_hash`)",
    },
    Key {
        name: "SANDBOX_JWT_SECRET_FILE",
        apply: |r, path| {
            r.config.jwt_secret = Some(read_file(path)?.trim_end_matches(['\r', '\n']).to_string());
            Ok(())
        },
        default: Shown::Text("none"),
        doc: "the same secret read from a file; wins over `SANDBOX_JWT_SECRET`",
    },
    text!(
        "SANDBOX_JWT_ROLE_CLAIM",
        jwt_role_claim,
        "claim naming the role"
    ),
    boolean!(
        "SANDBOX_ALLOW_ANONYMOUS",
        allow_anonymous,
        "serve without credentials on a non-loopback address"
    ),
    Key {
        name: "SANDBOX_TRUSTED_PROXIES",
        apply: |r, v| {
            r.config.trusted_proxies = parse_nets(v)?;
            Ok(())
        },
        default: Shown::Text("empty (trust none)"),
        doc: "addresses or CIDR blocks, comma-separated (`10.0.0.5,10.1.0.0/16,::1`): when the direct peer is one of them, its `Forwarded` (`proto=`, `host=`) or `X-Forwarded-Proto` / `X-Forwarded-Host` decide the scheme (`wss://` for `https`) and host of `log_stream_url` and `stream_url`; from any other peer they are ignored (with replicas, list the replicas too: they forward requests to each other)",
    },
    boolean!(
        "SANDBOX_WS_SIGNED_URLS",
        ws_signed_urls,
        "signed `log_stream_url`s"
    ),
    num!("SANDBOX_WS_SIGNED_URL_TTL_SEC", ws_signed_url_ttl_sec, ""),
    Key {
        name: "SANDBOX_WS_SIGNING_SECRET",
        apply: |r, v| {
            r.config.ws_signing_secret = Some(v.to_string());
            Ok(())
        },
        default: Shown::Text("random per process"),
        doc: "HMAC key, at least 16 bytes (secret: not in `policy_hash`)",
    },
    num!(
        "SANDBOX_USER_MAX_CONCURRENT_RUNS",
        user_max_concurrent_runs,
        "runs of one user queued or running at once (0: off); over it a 429 `quota_exceeded`, so no user fills the queue (the slots themselves go round robin between waiting users)"
    ),
    num!(
        "SANDBOX_USER_RUNS_PER_MINUTE",
        user_runs_per_minute,
        "per user (0: off)"
    ),
    num!(
        "SANDBOX_USER_CPU_SECONDS_PER_DAY",
        user_cpu_seconds_per_day,
        "CPU seconds of one user's runs in a rolling 24 h, as measured when each ends (a run in flight counts its running time so far); 0: off"
    ),
    Key {
        name: "SANDBOX_USER_EXEC_SECONDS_PER_DAY",
        apply: |r, v| {
            r.config.user_cpu_seconds_per_day = number(v)?;
            Ok(())
        },
        default: Shown::Text("—"),
        doc: "deprecated name of `SANDBOX_USER_CPU_SECONDS_PER_DAY` (kept for one release)",
    },
    num!(
        "SANDBOX_USER_ARTIFACT_MB_PER_DAY",
        user_artifact_mb_per_day,
        "MiB of artifacts one user's runs may capture in a rolling 24 h; over it runs that capture artifacts get a 429 `quota_exceeded` (0: off)"
    ),
    num!(
        "SANDBOX_USER_SESSIONS_PER_MINUTE",
        user_sessions_per_minute,
        "sessions one user may create or fork per minute, as a burst then evenly (0: off); over it a 429 `rate_limited` with `Retry-After`"
    ),
    num!(
        "SANDBOX_USER_UPLOADS_PER_MINUTE",
        user_uploads_per_minute,
        "uploads and file writes per user per minute (0: off)"
    ),
    num!(
        "SANDBOX_USER_DOWNLOADS_PER_MINUTE",
        user_downloads_per_minute,
        "file reads and artifact downloads per user per minute (0: off)"
    ),
    num!(
        "SANDBOX_ADMIN_REQUESTS_PER_MINUTE",
        admin_requests_per_minute,
        "requests to `/admin/*` per admin per minute (0: off)"
    ),
    Key {
        name: "SANDBOX_AUDIT_LOG_PATH",
        apply: |r, v| {
            r.config.audit_log_path = Some(PathBuf::from(v));
            Ok(())
        },
        default: Shown::Text("none"),
        doc: "audit events as JSON lines",
    },
    num!("SANDBOX_AUDIT_RETENTION_DAYS", audit_retention_days, ""),
    num!(
        "SANDBOX_RUN_RETENTION_DAYS",
        run_retention_days,
        "finished runs older than this leave the store with their artifacts (swept every `SANDBOX_SWEEP_INTERVAL_SEC` and by `POST /admin/gc`); 0 keeps them"
    ),
    boolean!(
        "SANDBOX_AUDIT_STDIN_CONTENT",
        audit_stdin_content,
        "an interactive run's `sandbox.run.stdin_closed` event carries the input itself (base64); by default only its SHA-256 and size"
    ),
    boolean!(
        "SANDBOX_REDACT_PATHS",
        redact_paths,
        "file paths in audit events (`artifacts`, `message`) and the admin run views become `redacted:` and a digest of the path; in the policy hash, changeable by `PUT /admin/policies`"
    ),
    text!("SANDBOX_LOG_FORMAT", log_format, "or `text`"),
    Key {
        name: "SANDBOX_OTLP_ENDPOINT",
        apply: |r, v| {
            let v = v.trim();
            if !v.is_empty() && !v.starts_with("http://") && !v.starts_with("https://") {
                return Err(format!("not an http(s) URL: {v:?}"));
            }
            r.config.otlp_endpoint = v.to_string();
            Ok(())
        },
        default: Shown::Text("empty"),
        doc: "OpenTelemetry traces over OTLP/HTTP (protobuf) to this collector (`http://HOST:4318`; `/v1/traces` is added unless the URL ends with it): a span per request and per run; empty: no traces",
    },
    text!(
        "SANDBOX_OTEL_SERVICE_NAME",
        otel_service_name,
        "the `service.name` of the traces"
    ),
    Key {
        name: "SANDBOX_DOCKER_ENABLED",
        apply: |r, v| {
            r.config.docker.enabled = flag(v)?;
            Ok(())
        },
        default: Shown::FromDefault(|c| c.docker.enabled.to_string()),
        doc: "false: the docker runtime is reported unavailable without asking the engine",
    },
    Key {
        name: "SANDBOX_DOCKER_HOST",
        apply: |r, v| {
            r.config.docker.host = v.trim().to_string();
            Ok(())
        },
        default: Shown::FromDefault(|c| format!("`{}`", c.docker.host)),
        doc: "the Docker engine's Unix socket",
    },
    Key {
        name: "SANDBOX_DOCKER_RUNTIME",
        apply: |r, v| {
            r.config.docker.oci_runtime = v.trim().to_string();
            Ok(())
        },
        default: Shown::FromDefault(|c| format!("`{}`", c.docker.oci_runtime)),
        doc: "OCI runtime of the containers: `runc`, or `runsc` (gVisor, registered with dockerd); in the policy hash",
    },
    Key {
        name: "SANDBOX_DOCKER_EGRESS_RUNTIME",
        apply: |r, v| {
            let v = v.trim();
            r.config.docker.egress_oci_runtime = (!v.is_empty()).then(|| v.to_string());
            Ok(())
        },
        default: Shown::Text("unset"),
        doc: "under `runsc`: the OCI runtime of containers with an egress allowlist, a runsc registered with `--network=host` (Debian's runsc cannot start its own network stack on Linux 6.11 and later); unset: no egress allowlist under gVisor; in the policy hash",
    },
    Key {
        name: "SANDBOX_DOCKER_INSTANCE",
        apply: |r, v| {
            let v = v.trim();
            r.config.docker.instance = (!v.is_empty()).then(|| v.to_string());
            Ok(())
        },
        default: Shown::Text("an id kept in `<data_dir>/docker-instance`"),
        doc: "this instance's label on the engine: the reaper removes that instance's leftovers only (replicas sharing an engine need distinct ones)",
    },
    Key {
        name: "SANDBOX_DOCKER_DEFAULT_MEM_MB",
        apply: |r, v| {
            r.config.docker.default_mem_mb = number(v)?;
            Ok(())
        },
        default: Shown::FromDefault(|c| c.docker.default_mem_mb.to_string()),
        doc: "`memory_mb` of a docker session or run that gives none",
    },
    Key {
        name: "SANDBOX_DOCKER_MAX_CONTAINERS",
        apply: |r, v| {
            r.config.docker.max_containers = number(v)?;
            Ok(())
        },
        default: Shown::FromDefault(|c| c.docker.max_containers.to_string()),
        doc: "containers at once (sessions and one-shot runs); then 503",
    },
    Key {
        name: "SANDBOX_DOCKER_POOL_SIZE",
        apply: |r, v| {
            r.config.docker.pool_size = number(v)?;
            Ok(())
        },
        default: Shown::FromDefault(|c| c.docker.pool_size.to_string()),
        doc: "warm pool: started containers kept per image (once it ran a one-shot run) so a one-shot run skips creating one; 0 turns it off",
    },
    Key {
        name: "SANDBOX_DOCKER_TMP_MB",
        apply: |r, v| {
            r.config.docker.tmp_mb = number(v)?;
            Ok(())
        },
        default: Shown::FromDefault(|c| c.docker.tmp_mb.to_string()),
        doc: "size of each container's `/tmp` tmpfs",
    },
    Key {
        name: "SANDBOX_DOCKER_TMPFS_NOEXEC",
        apply: |r, v| {
            r.config.docker.tmpfs_noexec = flag(v)?;
            Ok(())
        },
        default: Shown::FromDefault(|c| c.docker.tmpfs_noexec.to_string()),
        doc: "mount `/workspace` and `/tmp` `noexec` (nothing there can be executed); in the policy hash",
    },
    Key {
        name: "SANDBOX_DOCKER_EXEC_SCRATCH_MB",
        apply: |r, v| {
            r.config.docker.exec_scratch_mb = number(v)?;
            Ok(())
        },
        default: Shown::FromDefault(|c| c.docker.exec_scratch_mb.to_string()),
        doc: "the exec-allowed `/opt/exec` tmpfs of images whose toolchain runs what it builds (`go run`, `go test`); 0 turns it off; in the policy hash",
    },
    Key {
        name: "SANDBOX_DOCKER_SECCOMP",
        apply: |r, v| {
            let v = v.trim();
            r.config.docker.seccomp_profile = if v.is_empty() {
                None
            } else {
                let text = read_file(v)?;
                serde_json::from_str::<serde_json::Value>(&text)
                    .map_err(|e| format!("{v}: not a JSON seccomp profile: {e}"))?;
                Some(text)
            };
            Ok(())
        },
        default: Shown::Text("Docker's default profile"),
        doc: "a seccomp profile (JSON file) for the containers; its SHA-256 is in the policy hash",
    },
    Key {
        name: "SANDBOX_DOCKER_APPARMOR_PROFILE",
        apply: |r, v| {
            let v = v.trim();
            r.config.docker.apparmor_profile = (!v.is_empty()).then(|| v.to_string());
            Ok(())
        },
        default: Shown::Text("none"),
        doc: "an AppArmor profile; refused at start on a kernel without AppArmor",
    },
    Key {
        name: "SANDBOX_VM_ENABLED",
        apply: |r, v| {
            r.config.vm.enabled = flag(v)?;
            Ok(())
        },
        default: Shown::FromDefault(|c| c.vm.enabled.to_string()),
        doc: "false: the vm runtime is reported unavailable",
    },
    Key {
        name: "SANDBOX_VM_IMAGE",
        apply: |r, v| {
            let v = v.trim();
            r.config.vm.image = (!v.is_empty()).then(|| PathBuf::from(v));
            Ok(())
        },
        default: Shown::Text(
            "the image `sandboxd images build vm` made in its default cache, if any",
        ),
        doc: "the vm runtime's disk image (see docs/vm.md); without one the runtime is unavailable",
    },
    Key {
        name: "SANDBOX_VM_STATE_DIR",
        apply: |r, v| {
            let v = v.trim();
            r.config.vm.state_dir = (!v.is_empty()).then(|| PathBuf::from(v));
            Ok(())
        },
        default: Shown::Text("`$XDG_CACHE_HOME/wasmsand/vm` or `~/.cache/wasmsand/vm`"),
        doc: "where saved machines are kept (one per image, memory size and acceleration; the first start of each boots and saves it)",
    },
    Key {
        name: "SANDBOX_VM_ACCEL",
        apply: |r, v| {
            let v = v.trim().to_ascii_lowercase();
            if !matches!(v.as_str(), "auto" | "kvm" | "tcg") {
                return Err(format!("not one of auto, kvm, tcg: {v:?}"));
            }
            r.config.vm.accel = v;
            Ok(())
        },
        default: Shown::FromDefault(|c| format!("`{}`", c.vm.accel)),
        doc: "`kvm`, `tcg` (software emulation), or `auto`: KVM when a short probe boot works",
    },
    Key {
        name: "SANDBOX_VM_QEMU",
        apply: |r, v| {
            r.config.vm.qemu = v.trim().to_string();
            Ok(())
        },
        default: Shown::FromDefault(|c| format!("`{}`", c.vm.qemu)),
        doc: "the QEMU binary of the vm runtime",
    },
    Key {
        name: "SANDBOX_VM_DEFAULT_MEM_MB",
        apply: |r, v| {
            r.config.vm.default_mem_mb = number(v)?;
            Ok(())
        },
        default: Shown::FromDefault(|c| c.vm.default_mem_mb.to_string()),
        doc: "`memory_mb` of a vm session or run that gives none: the guest's memory (each size is booted and saved once)",
    },
    Key {
        name: "SANDBOX_VM_MAX_MACHINES",
        apply: |r, v| {
            r.config.vm.max_machines = number(v)?;
            Ok(())
        },
        default: Shown::FromDefault(|c| c.vm.max_machines.to_string()),
        doc: "machines at once (sessions and one-shot runs); then 503",
    },
];

/// Read by `sandboxd` before any configuration exists, so not settable in a file or by
/// `--set`; listed with the others in the docs.
pub static PROCESS_KEYS: &[(&str, &str, &str)] = &[
    (
        "SANDBOX_LOG",
        "`info`",
        "log filter (tracing `EnvFilter` syntax)",
    ),
    (
        "SANDBOX_CONFIG_FILE",
        "none",
        "the configuration file (`--config`)",
    ),
];

impl Config {
    /// The defaults overridden by the `SANDBOX_*` keys `lookup` has (the process environment
    /// in `from_env`), validated. A value that does not parse is an error naming the key.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Config, String> {
        let mut r = Reading::default();
        for key in KEYS {
            if let Some(v) = lookup(key.name) {
                (key.apply)(&mut r, &v).map_err(|e| format!("{}: {e}", key.name))?;
            }
        }
        r.resolve_store()?;
        r.config.validate()?;
        Ok(r.config)
    }
}

/// Sets one key of an existing configuration as if it had been configured so, without
/// validating the whole (the caller does, once every key is set): `PUT /admin/policies` and
/// `/admin/quotas` read their values exactly as start-up does. Only for keys that are not the
/// store's (those are resolved together, at start-up only).
pub(crate) fn apply_key(config: &mut Config, name: &str, value: &str) -> Result<(), String> {
    let key = KEYS
        .iter()
        .find(|k| k.name == name)
        .ok_or_else(|| format!("{name}: no such key"))?;
    let mut r = Reading {
        config: std::mem::take(config),
        ..Reading::default()
    };
    let applied = (key.apply)(&mut r, value).map_err(|e| format!("{name}: {e}"));
    *config = r.config;
    applied
}

impl Reading {
    fn resolve_store(&mut self) -> Result<(), String> {
        let backend = match (self.store_backend.take(), self.store_url.take()) {
            (Some(b), Some(u)) if b == "postgres" => Some(u),
            (None, Some(u)) => Some(u),
            (Some(b), Some(_)) => {
                return Err(format!(
                    "SANDBOX_STORE_URL is only meaningful with SANDBOX_STORE_BACKEND=postgres, not {b:?}"
                ));
            }
            (Some(b), None) if b == "postgres" => {
                return Err(
                    "SANDBOX_STORE_BACKEND=postgres needs SANDBOX_STORE_URL (postgres://...)"
                        .into(),
                );
            }
            (b, None) => b,
        };
        match (backend.as_deref(), self.store_db_path.take()) {
            (None | Some("memory"), None) => {}
            (None | Some("sqlite"), Some(p)) => {
                self.config.store = StoreConfig::Sqlite(PathBuf::from(p))
            }
            (Some(b), None) => self.config.store = StoreConfig::parse(b, &self.config.data_dir)?,
            (Some(b), Some(_)) => {
                return Err(format!(
                    "SANDBOX_STORE_DB_PATH is only meaningful with the sqlite store, not {b:?}"
                ));
            }
        }
        Ok(())
    }
}

/// The docs' table of keys, rendered from the registry.
#[cfg(test)]
fn markdown_table() -> String {
    let defaults = Config::default();
    let mut out = String::from("| key | default | |\n|---|---|---|\n");
    let rows = KEYS
        .iter()
        .map(|k| {
            let default = match &k.default {
                Shown::FromDefault(show) => show(&defaults),
                Shown::Text(t) => t.to_string(),
            };
            (k.name, default, k.doc.to_string())
        })
        .chain(
            PROCESS_KEYS
                .iter()
                .map(|(n, d, doc)| (*n, d.to_string(), doc.to_string())),
        );
    for (name, default, doc) in rows {
        let cell = |t: &str| {
            if t.is_empty() {
                " ".into()
            } else {
                format!(" {t} ")
            }
        };
        out.push_str(&format!("| `{name}` |{}|{}|\n", cell(&default), cell(&doc)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_table_in_the_docs_is_the_registry() {
        let page = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/service.md");
        crate::doc_block::check(&page, "config-keys", &markdown_table());
    }

    #[test]
    fn every_key_once_and_every_key_read() {
        let mut seen = std::collections::BTreeSet::new();
        for k in KEYS {
            assert!(k.name.starts_with("SANDBOX_"), "{}", k.name);
            assert!(seen.insert(k.name), "{} twice", k.name);
        }
        for (n, _, _) in PROCESS_KEYS {
            assert!(seen.insert(n), "{n} twice");
        }
    }
}
