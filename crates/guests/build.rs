//! Builds the guest workspace `wasm-tools/` for `wasm32-wasip1` and embeds the result, so that
//! `cargo build`/`cargo test` alone produce every guest program (nothing to build by hand, no
//! .wasm committed).
//!
//! The guests are built by a nested cargo into `<target>/guests`, inside the one target
//! directory but apart from the host build (a nested cargo must not wait on the outer one's
//! lock). The outer jobserver is inherited, so the two never run more jobs than allowed.
//!
//! The modules are then kept in the module cache's directory under `guests/<key>`, where the key
//! is the SHA-256 of everything that decides their bytes: every file of `wasm-tools/`, the
//! compiler's version and the C toolchain. A fresh clone or a new target dir on a machine that
//! built the same sources before embeds them from there instead of spending some ten minutes of
//! CPU on the same build (CI clones afresh for every run). `WASMSAND_GUESTS_CACHE=0` turns it
//! off.

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const TARGET: &str = "wasm32-wasip1";

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let workspace = manifest_dir
        .join("../../wasm-tools")
        .canonicalize()
        .expect("wasm-tools/ sits two levels above crates/guests");
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());
    println!("cargo::rerun-if-env-changed=WASMSAND_GUESTS_TARGET_DIR");
    let target_dir = env::var_os("WASMSAND_GUESTS_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| host_target_dir(&out_dir).join("guests"));

    watch_sources(&workspace);
    let list = fs::read_to_string(workspace.join("commands.txt")).expect("wasm-tools/commands.txt");
    let mut files: Vec<String> = Vec::new();
    let mut commands = String::new();
    for line in list.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut parts = line.split_whitespace();
        let (Some(command), Some(file)) = (parts.next(), parts.next()) else {
            panic!("guests/commands.txt: bad line {line:?}");
        };
        writeln!(commands, "    ({command:?}, {file:?}),").unwrap();
        if !files.iter().any(|f| f == file) {
            files.push(file.to_owned());
        }
    }
    let release = match cached(&workspace, &files) {
        Ok(dir) => dir,
        Err(entry) => {
            ensure_target();
            let mut cmd = build_command(&workspace, &target_dir);
            c_toolchain(&mut cmd);
            build(cmd);
            let release = target_dir.join(TARGET).join("release");
            if let Some(entry) = entry {
                store(&release, &files, &entry);
            }
            release
        }
    };
    let mut code = String::from("/// Every guest module: file name and wasm bytes.\n");
    code.push_str("pub static FILES: &[(&str, &[u8])] = &[\n");
    for file in &files {
        let path = release.join(file);
        assert!(
            path.exists(),
            "{} was not built; is it a binary of wasm-tools/?",
            path.display()
        );
        no_undefined_symbols(&path);
        writeln!(
            code,
            "    ({file:?}, include_bytes!({:?})),",
            path.display().to_string()
        )
        .unwrap();
    }
    // Their SHA-256, which the module cache keys them by: computed here once instead of by
    // every process that loads them.
    code.push_str("];\n\n/// The SHA-256 of every guest module, by file name.\n");
    code.push_str("pub static DIGESTS: &[(&str, [u8; 32])] = &[\n");
    for file in &files {
        use sha2::{Digest, Sha256};
        let path = release.join(file);
        let bytes = fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let digest: [u8; 32] = Sha256::digest(&bytes).into();
        writeln!(code, "    ({file:?}, {digest:?}),").unwrap();
    }
    code.push_str("];\n\n/// Every command name and the module file that provides it.\n");
    code.push_str("pub static COMMANDS: &[(&str, &str)] = &[\n");
    code.push_str(&commands);
    code.push_str("];\n");
    fs::write(out_dir.join("commands.rs"), code).unwrap();
}

/// wasm-ld turns a symbol the C in a guest left undefined (a libc function wasi-libc lacks) into
/// an import from `env`, which no host provides: the module would build and then fail when the
/// sandbox loads it. Such a guest fails its build here instead.
fn no_undefined_symbols(path: &Path) {
    let bytes = fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut missing = Vec::new();
    for payload in wasmparser::Parser::new(0).parse_all(&bytes) {
        let Ok(wasmparser::Payload::ImportSection(imports)) = payload else {
            continue;
        };
        for import in imports.into_imports().flatten() {
            if import.module == "env" {
                missing.push(import.name.to_owned());
            }
        }
    }
    assert!(
        missing.is_empty(),
        "{} has undefined symbols (wasi-libc lacks them): {}",
        path.display(),
        missing.join(", ")
    );
}

/// `<target>/<profile>/build/<pkg>/out` → `<target>` (or `<target>/<triple>` when
/// cross-building the host side, which is still inside the one target dir).
fn host_target_dir(out_dir: &Path) -> PathBuf {
    out_dir
        .ancestors()
        .nth(4)
        .expect("OUT_DIR is inside a target directory")
        .to_path_buf()
}

fn watch_sources(workspace: &Path) {
    for entry in fs::read_dir(workspace).unwrap().flatten() {
        let name = entry.file_name();
        // The guests' own target dir (if someone built there by hand) must not trigger
        // rebuilds.
        if name == "target" {
            continue;
        }
        println!("cargo::rerun-if-changed={}", entry.path().display());
    }
}

/// rustup installs the targets of `rust-toolchain.toml` only when it installs the toolchain
/// itself: on a machine where the pinned toolchain already exists without `wasm32-wasip1`, a
/// plain `cargo build` would fail deep inside the guest build. The build adds the target the way
/// a user would, so the README's commands work on such a machine.
fn ensure_target() {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let (installed, libdir) = target_installed(&rustc);
    // A removed target reruns this script (cargo treats a missing path as changed).
    println!("cargo::rerun-if-changed={}", libdir.display());
    if installed {
        return;
    }
    println!("cargo::warning=the {TARGET} target is missing; adding it with `rustup target add`");
    let mut cmd = Command::new("rustup");
    cmd.args(["target", "add", TARGET]);
    // rustup tells proxied processes which toolchain they belong to; naming it keeps a nested
    // `rust-toolchain.toml` or a default toolchain from taking the target instead.
    if let Ok(toolchain) = env::var("RUSTUP_TOOLCHAIN") {
        cmd.args(["--toolchain", &toolchain]);
    }
    match cmd.status() {
        Ok(s) if s.success() && target_installed(&rustc).0 => {}
        Ok(s) => panic!(
            "the {TARGET} target is missing and `rustup target add {TARGET}` failed ({s}); \
             the guest programs cannot be built without it"
        ),
        Err(e) => panic!(
            "the {TARGET} target is missing from {rustc} and rustup cannot be run ({e}): install \
             the target for this toolchain (the guest programs are built for it)"
        ),
    }
}

/// Whether the toolchain's sysroot holds the target's standard library (what the guest build
/// needs), asked of the compiler cargo uses rather than of rustup's bookkeeping.
fn target_installed(rustc: &str) -> (bool, PathBuf) {
    let out = Command::new(rustc)
        .args(["--print", "target-libdir", "--target", TARGET])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {rustc}: {e}"));
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let installed = out.status.success()
        && fs::read_dir(&dir).is_ok_and(|mut entries| {
            entries.any(|e| e.is_ok_and(|e| e.file_name().to_string_lossy().starts_with("libstd-")))
        });
    (installed, dir)
}

/// The cache entry holding these sources' modules: `Ok` with its directory when it is complete,
/// else `Err` with where to store them (`None` when there is no cache).
fn cached(workspace: &Path, files: &[String]) -> Result<PathBuf, Option<PathBuf>> {
    println!("cargo::rerun-if-env-changed=WASMSAND_GUESTS_CACHE");
    for var in ["WASMSAND_CACHE_DIR", "XDG_CACHE_HOME", "HOME"] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    if env::var_os("WASMSAND_GUESTS_CACHE").is_some_and(|v| v == "0") {
        return Err(None);
    }
    // Where wasmsand-exec keeps compiled modules (`default_cache_dir`): one cache to clear.
    let nonempty = |name: &str| env::var_os(name).filter(|v| !v.is_empty());
    let Some(root) = nonempty("WASMSAND_CACHE_DIR")
        .map(PathBuf::from)
        .or_else(|| nonempty("XDG_CACHE_HOME").map(|x| PathBuf::from(x).join("wasmsand")))
        .or_else(|| nonempty("HOME").map(|h| PathBuf::from(h).join(".cache/wasmsand")))
    else {
        return Err(None);
    };
    let entry = root.join("guests").join(cache_key(workspace));
    if files.iter().all(|f| entry.join(f).is_file()) {
        // Touched so that pruning (see `store`) keeps the entries in use.
        let _ = fs::File::open(&entry).and_then(|d| d.set_modified(std::time::SystemTime::now()));
        Ok(entry)
    } else {
        Err(Some(entry))
    }
}

/// SHA-256 over what decides the modules' bytes: the compiler (`rustc -vV`), the C compiler the
/// build would use, and every file of the workspace by relative path (its `target/` aside).
fn cache_key(workspace: &Path) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = |cmd: &str| {
        Command::new(cmd)
            .arg(if cmd == rustc { "-vV" } else { "--version" })
            .output()
            .map(|o| o.stdout)
            .unwrap_or_default()
    };
    h.update(version(&rustc));
    for var in [
        "WASMSAND_WASM_CC",
        "WASMSAND_WASM_AR",
        "WASMSAND_WASM_CFLAGS",
    ] {
        println!("cargo::rerun-if-env-changed={var}");
        h.update(format!("{var}={:?}\n", env::var(var).ok()));
    }
    let cc = env::var("WASMSAND_WASM_CC").unwrap_or_else(|_| "clang-14".into());
    h.update(version(&cc));
    let mut paths = Vec::new();
    let mut dirs = vec![workspace.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                if !(dir == workspace && entry.file_name() == "target") {
                    dirs.push(path);
                }
            } else {
                paths.push(path);
            }
        }
    }
    paths.sort();
    for path in paths {
        let rel = path.strip_prefix(workspace).unwrap();
        let bytes = fs::read(&path).unwrap_or_default();
        h.update(format!("{}\0{}\0", rel.display(), bytes.len()));
        h.update(&bytes);
    }
    hex(&h.finalize())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Copies the built modules into the cache entry (whole, by a rename, so a reader never sees
/// half of one), and prunes all but the newest few entries.
fn store(release: &Path, files: &[String], entry: &Path) {
    const KEEP: usize = 4;
    let Some(parent) = entry.parent() else { return };
    let staging = parent.join(format!(".staging-{}", std::process::id()));
    let result = (|| -> std::io::Result<()> {
        fs::create_dir_all(&staging)?;
        for f in files {
            fs::copy(release.join(f), staging.join(f))?;
        }
        match fs::rename(&staging, entry) {
            // Another build stored the same entry first: the same bytes.
            Err(_) if entry.is_dir() => fs::remove_dir_all(&staging),
            r => r,
        }
    })();
    if let Err(e) = result {
        let _ = fs::remove_dir_all(&staging);
        println!(
            "cargo::warning=could not keep the guest modules in {}: {e}",
            parent.display()
        );
        return;
    }
    let mut entries: Vec<(std::time::SystemTime, PathBuf)> = fs::read_dir(parent)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    entries.sort_by_key(|e| std::cmp::Reverse(e.0));
    for (_, old) in entries.into_iter().skip(KEEP) {
        let _ = fs::remove_dir_all(old);
    }
}

fn build_command(workspace: &Path, target_dir: &Path) -> Command {
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace)
        .args(["build", "--release", "--locked", "--target", TARGET])
        .arg("--target-dir")
        .arg(target_dir);
    // Settings meant for the host build must not leak into the guest build (clippy's driver,
    // host RUSTFLAGS, a target triple, ...).
    for var in [
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_PRIMARY_PACKAGE",
    ] {
        cmd.env_remove(var);
    }
    // Nor the host target's cfgs, which cargo hands this script as CARGO_CFG_*: the guest
    // build's scripts get their own for wasm32, but one the guest target lacks (`fuzzing`,
    // `sanitize`) would reach them unchanged and describe the host build as theirs.
    for (var, _) in env::vars_os() {
        if var.to_str().is_some_and(|v| v.starts_with("CARGO_CFG_")) {
            cmd.env_remove(var);
        }
    }
    cmd
}

fn build(mut cmd: Command) {
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run cargo: {e}"));
    if !status.success() {
        panic!("building wasm-tools/ for {TARGET} failed (see above).");
    }
}

/// Packages of Debian 12 that give clang a wasm32-wasi target: the compiler, `llvm-ar`, and
/// wasi-libc's headers (found by Debian's clang without a `--sysroot`). Rust links the objects
/// with its own wasi-libc, so no C runtime or linker is needed beyond these.
const C_PACKAGES: &[&str] = &["clang-14", "llvm-14", "wasi-libc"];

/// The C compiler for the guests built from C (SQLite in `wasm-tools/sqlite`, jq 1.6 in
/// `wasm-tools/jq`), handed to the `cc` crate of the nested build.
/// `WASMSAND_WASM_CC`/`_AR`/`_CFLAGS` name another toolchain (wasi-sdk's clang with
/// `--sysroot=...`, say). Otherwise Debian's clang is used, installed
/// with apt-get when missing and the build runs as root (as the README's `cargo run` does on a
/// fresh machine); anyone else is told exactly what to install.
fn c_toolchain(cmd: &mut Command) {
    for var in [
        "WASMSAND_WASM_CC",
        "WASMSAND_WASM_AR",
        "WASMSAND_WASM_CFLAGS",
    ] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    let cflags = env::var("WASMSAND_WASM_CFLAGS").unwrap_or_else(|_| "--target=wasm32-wasi".into());
    let (cc, ar) = match env::var("WASMSAND_WASM_CC") {
        Ok(cc) => {
            let ar = env::var("WASMSAND_WASM_AR").unwrap_or_else(|_| "llvm-ar".into());
            if let Err(e) = probe_cc(&cc, &cflags) {
                panic!("WASMSAND_WASM_CC={cc} cannot compile C for wasm32-wasi: {e}");
            }
            (cc, ar)
        }
        Err(_) => match debian_clang(&cflags) {
            Ok(found) => found,
            Err(why) => {
                install_c_packages(&why);
                debian_clang(&cflags).unwrap_or_else(|why| {
                    panic!(
                        "no C compiler for wasm32-wasi ({why}); the sqlite3 and jq guests need one: \
                         install Debian's packages `apt-get install {}` (or set WASMSAND_WASM_CC, \
                         WASMSAND_WASM_AR and WASMSAND_WASM_CFLAGS to another clang and WASI \
                         sysroot)",
                        C_PACKAGES.join(" ")
                    )
                })
            }
        },
    };
    cmd.env("CC_wasm32_wasip1", cc)
        .env("AR_wasm32_wasip1", ar)
        .env("CFLAGS_wasm32_wasip1", cflags);
}

fn debian_clang(cflags: &str) -> Result<(String, String), String> {
    let cc = "clang-14";
    let ar = "llvm-ar-14";
    probe_cc(cc, cflags)?;
    match Command::new(ar).arg("--version").output() {
        Ok(o) if o.status.success() => Ok((cc.into(), ar.into())),
        _ => Err(format!("{ar} cannot be run")),
    }
}

/// Compiles a file that includes libc headers, which is what fails without wasi-libc.
fn probe_cc(cc: &str, cflags: &str) -> Result<(), String> {
    let dir = PathBuf::from(env::var("OUT_DIR").unwrap());
    let src = dir.join("probe.c");
    fs::write(
        &src,
        "#include <stdio.h>\n#include <fcntl.h>\nint probe(void) { return O_RDONLY; }\n",
    )
    .map_err(|e| e.to_string())?;
    let out = Command::new(cc)
        .args(cflags.split_whitespace())
        .arg("-c")
        .arg(&src)
        .arg("-o")
        .arg(dir.join("probe.o"))
        .output()
        .map_err(|e| format!("{cc} cannot be run: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cc} failed: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .next()
                .unwrap_or("")
        ))
    }
}

fn install_c_packages(why: &str) {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !root || Command::new("apt-get").arg("--version").output().is_err() {
        return;
    }
    println!(
        "cargo::warning=no C compiler for wasm32-wasi ({why}); installing {} with apt-get",
        C_PACKAGES.join(" ")
    );
    let install = || {
        Command::new("apt-get")
            .args(["install", "-y", "-qq", "--no-install-recommends"])
            .args(C_PACKAGES)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .is_ok_and(|s| s.success())
    };
    // A fresh container has no package lists yet.
    if !install() {
        let _ = Command::new("apt-get").args(["update", "-qq"]).status();
        install();
    }
}
