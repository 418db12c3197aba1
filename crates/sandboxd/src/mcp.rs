//! `sandboxd mcp`: wasmsand's tools over the Model Context Protocol (crate `wasmsand-mcp`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use wasmsand::Limits;
use wasmsand_mcp::{HttpOptions, Listen, McpConfig};

#[derive(Debug, Args)]
pub(crate) struct McpArgs {
    /// Serve streamable HTTP at http://ADDR/mcp instead of stdio (port 0 picks a free port; the
    /// URL is printed on stdout once it accepts connections)
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// A Host header the HTTP endpoint accepts: a name (any port) or name:port; repeatable;
    /// '*' accepts any [default: localhost, 127.0.0.1, ::1]
    #[arg(long = "allowed-host", value_name = "HOST")]
    allowed_hosts: Vec<String>,
    /// An Origin header the HTTP endpoint accepts (requests without one pass); repeatable;
    /// '*' accepts any [default: http://localhost:*, http://127.0.0.1:*, http://[::1]:*]
    #[arg(long = "allowed-origin", value_name = "ORIGIN")]
    allowed_origins: Vec<String>,
    /// The most attempts one sandbox_best_of call may make
    #[arg(long, value_name = "N", default_value_t = McpConfig::DEFAULT_MAX_BEST_OF)]
    max_best_of: usize,
    /// The longest timeout_ms a run may ask for; longer ones are clamped (and so is --timeout-ms,
    /// the default)
    #[arg(long, value_name = "MS", default_value_t = McpConfig::DEFAULT_MAX_TIMEOUT_MS)]
    max_timeout_ms: u64,
    /// Live sessions the server holds in total
    #[arg(long, value_name = "N", default_value_t = McpConfig::DEFAULT_MAX_SESSIONS)]
    max_sessions: usize,
    /// Live sessions one client may hold
    #[arg(long, value_name = "N", default_value_t = McpConfig::DEFAULT_MAX_SESSIONS_PER_CLIENT)]
    max_sessions_per_client: usize,
    /// What the sandboxes may reach on the network (curl, wget), as JSON
    /// '{"hosts": [...], "cidrs": [...], "ips": [...]}' (docs/network.md) [default: nothing]
    #[arg(long, value_name = "JSON")]
    egress_allowlist: Option<String>,
    /// Also list seed 003's `sandbox.run` tool (a dotted name some clients refuse; also
    /// turned on by MCP_ENABLE_SANDBOX_MODULE=1)
    #[arg(long)]
    sandbox_run_tool: bool,
    /// A session unused for this many milliseconds is destroyed
    #[arg(long, value_name = "MS", default_value_t = McpConfig::DEFAULT_SESSION_IDLE_TTL.as_millis() as u64)]
    session_idle_ms: u64,
    /// Serve on stdio the tools of a service's MCP endpoint instead of running sandboxes here
    /// (`sandboxd serve`: http://HOST:PORT/mcp): its sessions, quotas and runtimes
    #[arg(long, value_name = "URL", conflicts_with_all = ["http", "egress_allowlist"])]
    service: Option<String>,
    /// The service's API key (sent as a bearer token); also $WASMSAND_API_KEY
    #[arg(long, value_name = "KEY", requires = "service")]
    api_key: Option<String>,
}

pub(crate) fn serve(
    args: McpArgs,
    mut limits: Limits,
    cache_dir: Option<PathBuf>,
    mounts: Vec<wasmsand::HostMount>,
) -> u8 {
    if let Some(url) = args.service {
        if !mounts.is_empty() {
            eprintln!(
                "sandboxd mcp: --mount does not apply with --service (the service's sandboxes \
                 run there)"
            );
            return 2;
        }
        let key = args.api_key.or_else(|| {
            std::env::var("WASMSAND_API_KEY")
                .ok()
                .filter(|k| !k.is_empty())
        });
        return bridge(url, key);
    }
    // The default timeout of a run (--timeout-ms) never exceeds the most a run may ask for.
    limits.timeout_ms = limits.timeout_ms.min(args.max_timeout_ms.max(1));
    let network = match args.egress_allowlist.as_deref().map(egress_policy) {
        None => None,
        Some(Ok(allow)) => Some(wasmsand::Network::allow(allow)),
        Some(Err(e)) => {
            eprintln!("sandboxd mcp: --egress-allowlist: {e}");
            return 2;
        }
    };
    let config = McpConfig {
        limits,
        env: Vec::new(),
        cache_dir,
        max_timeout_ms: args.max_timeout_ms.max(1),
        max_sessions: args.max_sessions,
        max_sessions_per_client: args.max_sessions_per_client,
        session_idle_ttl: Duration::from_millis(args.session_idle_ms),
        max_read_bytes: McpConfig::DEFAULT_MAX_READ_BYTES,
        gate: None,
        network,
        // A standalone MCP server has only its wasm sandbox and its own sessions; the
        // service's `/mcp` hosts more (`--service` reaches it).
        host: None,
        sessions: None,
        sandbox_dot_run: args.sandbox_run_tool
            || std::env::var("MCP_ENABLE_SANDBOX_MODULE")
                .is_ok_and(|v| matches!(v.as_str(), "1" | "true" | "yes" | "on")),
        mounts,
        max_best_of: args.max_best_of.max(1),
    };
    let listen = match args.http {
        None if !args.allowed_hosts.is_empty() || !args.allowed_origins.is_empty() => {
            eprintln!("sandboxd mcp: --allowed-host and --allowed-origin apply only with --http");
            return 2;
        }
        None => Listen::Stdio,
        Some(addr) => {
            let mut options = HttpOptions::default();
            if !args.allowed_hosts.is_empty() {
                options.allowed_hosts = args.allowed_hosts;
            }
            if !args.allowed_origins.is_empty() {
                options.allowed_origins = args.allowed_origins;
            }
            Listen::Http(addr, options)
        }
    };
    match wasmsand_mcp::serve_blocking(config, listen) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("sandboxd mcp: {e}");
            1
        }
    }
}

/// `--service URL`: the service's tools on stdio, until stdin closes.
fn bridge(url: String, api_key: Option<String>) -> u8 {
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        eprintln!("sandboxd mcp: --service must be an http:// or https:// URL, not {url:?}");
        return 2;
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sandboxd mcp: {e}");
            return 1;
        }
    };
    let options = wasmsand_mcp::BridgeOptions { url, api_key };
    match rt.block_on(wasmsand_mcp::serve_stdio_bridge(options)) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("sandboxd mcp: {e}");
            1
        }
    }
}

fn egress_policy(json: &str) -> Result<wasmsand::egress::EgressPolicy, String> {
    let list: wasmsand::egress::EgressAllowlist =
        serde_json::from_str(json).map_err(|e| format!("not an allowlist: {e}"))?;
    wasmsand::egress::EgressPolicy::parse(&list).map_err(|e| e.to_string())
}
