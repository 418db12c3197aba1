//! `sandboxd serve`: the HTTP + WebSocket service of `wasmsand-server`.

use std::path::PathBuf;

use clap::Args;
use wasmsand_server::{Config, StoreConfig};

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
    /// directory) or `sqlite:PATH` [default: sqlite]
    #[arg(long, value_name = "STORE")]
    store: Option<String>,
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

/// Configuration from `SANDBOX_*` variables, then the flags.
pub fn serve(args: ServeArgs, cache_dir: Option<PathBuf>) -> u8 {
    let mut config = match Config::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sandboxd serve: {e}");
            return 2;
        }
    };
    let env_has_data_dir = std::env::var_os("SANDBOX_DATA_DIR").is_some();
    if let Some(d) = args.data_dir {
        config.data_dir = d;
    } else if !env_has_data_dir {
        config.data_dir = default_data_dir();
    }
    let env_has_store = std::env::var_os("SANDBOX_STORE_BACKEND").is_some()
        || std::env::var_os("SANDBOX_STORE_DB_PATH").is_some();
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
