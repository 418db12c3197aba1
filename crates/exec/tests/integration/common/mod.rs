//! Shared helpers of the exec tests: one `Exec` whose disk cache lives in the target dir (so
//! each module compiles once for all test binaries), a fresh VFS, and a one-call guest runner.
#![allow(dead_code)]

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use wasmsand_exec::{Exec, ExecOptions, Exit, Input, OutputBuffer, Program, RunSpec, SharedVfs};
use wasmsand_vfs::{Vfs, VfsOptions};

pub fn exec() -> &'static Exec {
    static EXEC: OnceLock<Exec> = OnceLock::new();
    EXEC.get_or_init(|| {
        Exec::new(ExecOptions {
            cache_dir: Some(std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("module-cache")),
            no_disk_cache: false,
        })
    })
}

pub fn vfs() -> SharedVfs {
    vfs_with(VfsOptions::default())
}

pub fn vfs_with(options: VfsOptions) -> SharedVfs {
    let mut v = Vfs::with_standard_layout(options);
    v.layout(|v| v.chmod("/", 0o755)).unwrap();
    Arc::new(Mutex::new(v))
}

pub fn program(command: &str) -> Program {
    let wasm = wasmsand_guests::wasm_for_command(command)
        .unwrap_or_else(|| panic!("no command {command}"));
    exec().load(wasm).unwrap()
}

pub struct Ran {
    pub exit: Exit,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Ran {
    pub fn code(&self) -> i32 {
        self.exit.status()
    }
}

/// Runs `argv` (a command name first) in `vfs` at `cwd` with `stdin`.
pub fn run_in(vfs: &SharedVfs, cwd: &str, argv: &[&str], stdin: &[u8]) -> Ran {
    let out = OutputBuffer::new(1 << 20);
    let err = OutputBuffer::new(1 << 20);
    let mut spec = RunSpec::new(vfs.clone(), argv.iter().copied());
    spec.cwd = cwd.into();
    spec.stdin = Input::Bytes(Bytes::copy_from_slice(stdin));
    spec.stdout = out.clone().into();
    spec.stderr = err.clone().into();
    spec.env = vec![
        ("HOME".into(), "/home/user".into()),
        ("PATH".into(), "/bin:/usr/bin".into()),
        ("TZ".into(), "UTC".into()),
        ("LC_ALL".into(), "C".into()),
    ];
    spec.deadline = Some(Instant::now() + Duration::from_secs(60));
    let outcome = exec().run(&program(argv[0]), spec).unwrap();
    Ran {
        exit: outcome.exit,
        stdout: out.snapshot().to_text().text,
        stderr: err.snapshot().to_text().text,
        elapsed: outcome.elapsed,
    }
}

pub fn run(vfs: &SharedVfs, argv: &[&str], stdin: &[u8]) -> Ran {
    run_in(vfs, "/home/user", argv, stdin)
}

/// Resident memory of this process in bytes.
pub fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}
