//! `sandboxd serve`: the HTTP + WebSocket service of `wasmsand-server`.

use std::path::PathBuf;

use clap::Args;
use wasmsand_server::{StoreConfig, settings};

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (port 0 picks a free one; the address is printed)
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8787")]
    listen: String,
    /// Data directory: the SQLite store and artifacts (default: $SANDBOX_DATA_DIR, else
    /// $XDG_DATA_HOME/wasmsand/service, else ~/.local/share/wasmsand/service)
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Where runs and idempotency entries are kept: `memory`, `sqlite` (in the data
    /// directory), `sqlite:PATH`, or `postgres://USER:PASSWORD@HOST:PORT/DB`, the store
    /// replicas share (see docs/deploy.md) [default: sqlite]
    #[arg(long, value_name = "STORE")]
    store: Option<String>,
    /// A configuration file (TOML if it ends in .toml, else JSON) of `SANDBOX_*` settings
    /// (keys may drop the prefix and be lower case); the environment and `--set` win over
    /// it [default: $SANDBOX_CONFIG_FILE]
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// API keys, one `SHA256HEX USER [admin]` a line (same as SANDBOX_API_KEYS_FILE)
    #[arg(long, value_name = "FILE")]
    api_keys_file: Option<PathBuf>,
    /// Any setting, e.g. `--set SANDBOX_USER_RUNS_PER_MINUTE=30` (repeatable; wins over the
    /// environment and the file)
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
}

fn default_data_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("XDG_DATA_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(d).join("wasmsand").join("service");
    }
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(h) => PathBuf::from(h)
            .join(".local")
            .join("share")
            .join("wasmsand")
            .join("service"),
        None => PathBuf::from("wasmsand-service"),
    }
}

/// Configuration from the file, `SANDBOX_*` variables and `--set`, then the other flags.
pub fn serve(args: ServeArgs, cache_dir: Option<PathBuf>) -> u8 {
    let file = args
        .config
        .or_else(|| std::env::var_os("SANDBOX_CONFIG_FILE").map(PathBuf::from));
    let mut overrides = match settings::parse_overrides(&args.set) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("sandboxd serve: {e}");
            return 2;
        }
    };
    if let Some(p) = args.api_keys_file {
        overrides.insert(
            "SANDBOX_API_KEYS_FILE".into(),
            p.to_string_lossy().into_owned(),
        );
    }
    let from_file = match file.as_deref().map(settings::read_file).transpose() {
        Ok(f) => f.unwrap_or_default(),
        Err(e) => {
            eprintln!("sandboxd serve: --config: {e}");
            return 2;
        }
    };
    let mut config = match settings::load(file.as_deref(), |k| std::env::var(k).ok(), &overrides) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sandboxd serve: {e}");
            return 2;
        }
    };
    // A setting named by any source, not only the environment.
    let named = |k: &str| {
        std::env::var_os(k).is_some() || overrides.contains_key(k) || from_file.contains_key(k)
    };
    let env_has_data_dir = named("SANDBOX_DATA_DIR");
    if let Some(d) = args.data_dir {
        config.data_dir = d;
    } else if !env_has_data_dir {
        config.data_dir = default_data_dir();
    }
    let env_has_store = named("SANDBOX_STORE_BACKEND")
        || named("SANDBOX_STORE_DB_PATH")
        || named("SANDBOX_STORE_URL");
    match args.store {
        Some(s) => match StoreConfig::parse(&s, &config.data_dir) {
            Ok(store) => config.store = store,
            Err(e) => {
                eprintln!("sandboxd serve: --store: {e}");
                return 2;
            }
        },
        // SQLite in the data directory is the default of a served instance.
        None if !env_has_store => {
            config.store =
                StoreConfig::Sqlite(config.data_dir.join("meta").join("sandbox_store.db"))
        }
        None => {}
    }
    if cache_dir.is_some() {
        config.cache_dir = cache_dir;
    }
    match wasmsand_server::run_blocking(config, &args.listen) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("sandboxd serve: {e}");
            1
        }
    }
}
