//! A throw-away PostgreSQL cluster for the tests and the benchmark: initdb in a directory
//! under the target dir, the server on a free loopback port, one fresh database per caller.
//! A watchdog shell stops the server and deletes its files when this process ends (the test
//! harness has no hook at exit).
//!
//! `scripts/test.sh` starts one such cluster for the whole run and names its port in
//! `WASMSAND_TEST_PG_PORT`: the test runner gives every test a process of its own, and a cluster
//! per process would spend a second of initdb on each. Without that variable the first test of
//! a process starts one as below.
//!
//! Without the server binaries (Debian's `postgresql` package, which `scripts/test.sh`
//! installs) the tests are skipped with a message, except under `CI=true`, where that is a
//! failure.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub struct Pg {
    pub port: u16,
    bin: PathBuf,
    dir: PathBuf,
}

static PG: OnceLock<Option<Pg>> = OnceLock::new();
/// The port of a running cluster to use instead of starting one (see the module doc).
const PORT_ENV: &str = "WASMSAND_TEST_PG_PORT";
static NEXT_DB: AtomicUsize = AtomicUsize::new(0);

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false")
}

/// The newest `/usr/lib/postgresql/<version>/bin` that has a server.
fn server_bin() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            (bin.join("postgres").exists() && bin.join("initdb").exists()).then_some((v, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, b)| b)
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// PostgreSQL refuses to run as root: then its commands run as the `postgres` user.
fn as_server_user(root: bool, program: &Path) -> Command {
    if root {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start() -> Result<Pg, String> {
    let bin = server_bin().ok_or(
        "the PostgreSQL server is not installed (no /usr/lib/postgresql/*/bin/postgres); \
         scripts/test.sh installs Debian's `postgresql` package",
    )?;
    if let Ok(port) = std::env::var(PORT_ENV) {
        let port = port
            .parse()
            .map_err(|_| format!("{PORT_ENV}={port:?} is not a port"))?;
        // The script's cluster trusts the `postgres` user on loopback, as the one below does;
        // `dir` is only ever read for a server this process started.
        return Ok(Pg {
            port,
            bin,
            dir: PathBuf::new(),
        });
    }
    let root = is_root();
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    // The watchdog of an earlier run removed its cluster's data but cannot remove the
    // directory it does not own: tidy up those of processes that are gone.
    for e in std::fs::read_dir(&base).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(pid) = name.strip_prefix("pg-")
            && !Path::new("/proc").join(pid).exists()
        {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
    let dir = base.join(format!("pg-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if root {
        let st = Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(&dir)
            .status()
            .map_err(|e| format!("chown: {e}"))?;
        if !st.success() {
            return Err("cannot hand the cluster directory to the postgres user".into());
        }
    }
    let data = dir.join("data");
    let out = as_server_user(root, &bin.join("initdb"))
        .arg("-D")
        .arg(&data)
        .args(["-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"])
        .output()
        .map_err(|e| format!("initdb: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let port = free_port();
    // The watchdog polls this process through /proc (kill -0 on a process of another user
    // fails), stops the server with a fast shutdown and removes the cluster.
    let script = format!(
        "'{bin}/postgres' -D '{data}' -p {port} -k '{dir}' -c listen_addresses=127.0.0.1 \
         -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300 \
         >'{dir}/server.log' 2>&1 & pg=$!
         while [ -d /proc/{me} ] && kill -0 $pg 2>/dev/null; do sleep 0.5; done
         kill -INT $pg 2>/dev/null; wait $pg; rm -rf '{data}'",
        bin = bin.display(),
        data = data.display(),
        dir = dir.display(),
        me = std::process::id(),
    );
    as_server_user(root, Path::new("/bin/sh"))
        .arg("-c")
        .arg(script)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start postgres: {e}"))?;
    let pg = Pg { port, bin, dir };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ready = Command::new(pg.bin.join("pg_isready"))
            .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "postgres"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if ready {
            return Ok(pg);
        }
        if Instant::now() > deadline {
            let log = std::fs::read_to_string(pg.dir.join("server.log")).unwrap_or_default();
            return Err(format!("postgres did not start within 60 s:\n{log}"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The shared cluster, started on first use; `None` when PostgreSQL is not installed and
/// this is not CI (the caller skips, and says so).
pub fn cluster() -> Option<&'static Pg> {
    PG.get_or_init(|| match start() {
        Ok(pg) => Some(pg),
        Err(e) if in_ci() => panic!("CI=true and PostgreSQL cannot be started: {e}"),
        Err(e) => {
            eprintln!("SKIPPED: PostgreSQL tests need a local server: {e}");
            None
        }
    })
    .as_ref()
}

impl Pg {
    /// A new empty database; returns its URL.
    pub fn fresh_db(&self, label: &str) -> String {
        let name = format!(
            "{label}_{}_{}",
            std::process::id(),
            NEXT_DB.fetch_add(1, Ordering::SeqCst)
        );
        let st = Command::new(self.bin.join("createdb"))
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
            ])
            .arg(&name)
            .status()
            .expect("createdb runs");
        assert!(st.success(), "createdb {name} failed");
        self.url(&name)
    }

    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// Runs SQL through psql against `url` and returns its unaligned output.
    pub fn psql(&self, url: &str, sql: &str) -> String {
        let out = Command::new(self.bin.join("psql"))
            .args([
                "-X",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                "-d",
                url,
                "-c",
                sql,
            ])
            .output()
            .expect("psql runs");
        assert!(
            out.status.success(),
            "psql {sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

/// The cluster, or `return` from the calling test after the skip message.
#[macro_export]
macro_rules! pg_or_skip {
    () => {
        match $crate::sandboxd::cluster::pg::cluster() {
            Some(pg) => pg,
            None => {
                eprintln!("SKIPPED: {} (no PostgreSQL)", module_path!());
                return;
            }
        }
    };
}
