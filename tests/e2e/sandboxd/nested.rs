//! The sandbox keeps every limit when its own host process is confined (docs/security.md,
//! "Running nested"): the same battery through the real `sandboxd` binary, run directly (the
//! control), inside bubblewrap with every namespace unshared, and under a seccomp filter that
//! forbids `unshare`, `mount` and their kin (tests/support/seccomp_no_namespaces.py). The same
//! battery inside an unprivileged Docker container is `docker::nested`.
//!
//! Nothing in the sandbox needs a namespace, a mount or a privilege: guests are WebAssembly run
//! in the process, so the limits are the process's own bookkeeping. Each wrapper comes with a
//! control that shows it really confines (a battery that passed under a wrapper that silently
//! did nothing would prove nothing).
//!
//! Without `bwrap` or Debian's python3-seccomp (both in scripts/host-tools.txt) the wrapper's
//! test prints "skipped", except under `CI=true`, where it fails.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs;
use std::io::Write;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Instant;

use serde_json::{Value, json};

use super::common::text;

/// The interpreter Debian's python3-seccomp is built for (a pyenv or venv `python3` earlier on
/// the PATH cannot import it).
const SYSTEM_PYTHON: &str = "/usr/bin/python3";

/// A uid and gid with no files and no privileges, as the confined sandboxd runs.
pub(crate) const NOBODY: &str = "65534";

/// The memory one program may use, in MiB, in the battery.
const MEMORY_MB: &str = "32";
const STDOUT_BYTES: usize = 1000;
const FS_BYTES: &str = "65536";
const FILE_COUNT: &str = "40";

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false")
}

/// False (and "skipped" printed) when a wrapper's tool is missing, outside CI.
fn available(ok: bool, what: &str) -> bool {
    if ok {
        return true;
    }
    assert!(
        !in_ci(),
        "CI=true and {what} is missing (scripts/test.sh installs it from scripts/host-tools.txt)"
    );
    eprintln!("skipped: {what} is missing (scripts/test.sh installs it)");
    false
}

/// The module cache a plain `sandboxd` uses here (crates/exec/src/cache.rs's default), named
/// explicitly so that every wrapper can be given the same one: the guests compiled once on
/// this machine, instead of seconds of compiling per wrapper.
pub(crate) fn host_cache_dir() -> PathBuf {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let dir = var("WASMSAND_CACHE_DIR")
        .map(PathBuf::from)
        .or_else(|| var("XDG_CACHE_HOME").map(|x| PathBuf::from(x).join("wasmsand")))
        .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".cache/wasmsand")))
        .unwrap_or_else(|| std::env::temp_dir().join("wasmsand-cache"));
    fs::create_dir_all(&dir).unwrap();
    dir
}

pub(crate) fn sandboxd_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_e2e-sandboxd"))
}

/// The target dir the binary was built in: it also holds the CPython files the binary maps
/// at run time (crates/cpython/build.rs), so a wrapper that hides the host must show it.
pub(crate) fn target_dir() -> PathBuf {
    sandboxd_bin()
        .ancestors()
        .nth(2)
        .expect("the binary is <target>/<profile>/e2e-sandboxd")
        .to_path_buf()
}

/// How sandboxd is started: a command line that ends in the binary, and the cache directory
/// as that binary sees it.
pub(crate) struct Nest {
    pub name: &'static str,
    /// The wrapper's program and arguments, then sandboxd's path as the wrapper sees it.
    pub argv: Vec<OsString>,
    pub cache_dir: PathBuf,
}

impl Nest {
    fn direct() -> Nest {
        Nest {
            name: "direct",
            argv: vec![sandboxd_bin().into()],
            cache_dir: host_cache_dir(),
        }
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.argv[0]);
        c.args(&self.argv[1..])
            .arg("--cache-dir")
            .arg(&self.cache_dir)
            .args(args);
        c
    }
}

/// What the host shows the battery: a folder to mount with a file in it, a marker file beside
/// it that the sandbox must not see, and a loopback listener that nothing may reach.
pub(crate) struct HostSide {
    dir: tempfile::TempDir,
    listener: TcpListener,
    port: u16,
}

impl HostSide {
    pub fn new() -> HostSide {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("repo")).unwrap();
        fs::write(dir.path().join("repo/hello.txt"), "hello from the host\n").unwrap();
        fs::write(dir.path().join("marker.txt"), "host secret\n").unwrap();
        // Writable by whichever uid the wrapper runs sandboxd as: the mount check must show
        // that sandboxd does not write the host, not that it could not.
        for (p, mode) in [
            (dir.path().to_path_buf(), 0o777),
            (dir.path().join("repo"), 0o777),
            (dir.path().join("repo/hello.txt"), 0o666),
            (dir.path().join("marker.txt"), 0o666),
        ] {
            fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
        }
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        HostSide {
            dir,
            listener,
            port,
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Panics if anything connected to the listener: a connection that reached it waits in
    /// its backlog, so a non-blocking accept finds it.
    fn assert_never_connected(&self) {
        self.listener.set_nonblocking(true).unwrap();
        match self.listener.accept() {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Ok((_, from)) => panic!("the sandbox reached the host's listener (from {from})"),
            Err(e) => panic!("accept: {e}"),
        }
    }
}

fn run_output(mut c: Command) -> Output {
    c.stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{c:?}: {e}"))
}

/// sandboxd's stdio server under `nest`, with these flags, given `requests` (one JSON-RPC
/// request each) and then end of input: its exit status, the answers by id, and its stderr.
fn serve(nest: &Nest, flags: &[&str], requests: &[Value]) -> (Output, HashMap<u64, Value>) {
    let mut child = nest
        .command(flags)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: sandboxd starts: {e}", nest.name));
    let mut stdin = child.stdin.take().unwrap();
    for r in requests {
        let mut line = serde_json::to_vec(r).unwrap();
        line.push(b'\n');
        stdin.write_all(&line).unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let mut answers = HashMap::new();
    for line in text(&out.stdout).lines() {
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("{}: not JSON ({e}): {line}", nest.name));
        if let Some(id) = v["id"].as_u64() {
            answers.insert(id, v);
        }
    }
    (out, answers)
}

fn run(id: u64, command: &str, extra: Value) -> Value {
    let mut params = json!({ "command": command });
    for (k, v) in extra.as_object().unwrap() {
        params[k] = v.clone();
    }
    json!({ "jsonrpc": "2.0", "id": id, "method": "run", "params": params })
}

fn limits_hit(result: &Value) -> Vec<&str> {
    result["usage"]["limitsHit"]
        .as_array()
        .unwrap_or_else(|| panic!("no usage.limitsHit: {result}"))
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect()
}

/// Every limit and every isolation the sandbox promises, through `nest`, asserted exactly.
pub(crate) fn battery(nest: &Nest, host: &HostSide) {
    let started = Instant::now();
    let who = nest.name;
    let dir = host.path().to_str().unwrap();
    let url = format!("http://127.0.0.1:{}/", host.port);

    // The one-shot command line: the wall clock ends an endless loop.
    let out = run_output(nest.command(&[
        "--timeout-ms",
        "500",
        "exec",
        "echo started; while :; do :; done; echo never",
    ]));
    assert_eq!(out.status.code(), Some(124), "{who}: {out:?}");
    assert_eq!(text(&out.stdout), "started\n", "{who}");
    assert_eq!(text(&out.stderr), TIMED_OUT, "{who}");

    // Without a network policy there is no network at all.
    let out = run_output(nest.command(&["exec", &format!("curl -sS {url}")]));
    assert_eq!(out.status.code(), Some(7), "{who}: {out:?}");
    assert_eq!(text(&out.stdout), "", "{who}");
    assert_eq!(
        text(&out.stderr),
        "curl: (7) network access is off in this sandbox (it has no network policy)\n",
        "{who}"
    );

    // The stdio server, whose answers say which limit a run hit. Its root sandbox has the
    // limits of the flags, the host folder mounted, and the widest allowlist there is, which
    // still never opens loopback.
    let mount = format!("{dir}/repo:repo");
    let stdout_limit = format!("stdout_bytes={STDOUT_BYTES}");
    let flags = [
        "--memory-limit",
        MEMORY_MB,
        "--fs-limit-bytes",
        FS_BYTES,
        "--file-count",
        FILE_COUNT,
        "--limit",
        &stdout_limit,
        "--mount",
        &mount,
    ];
    let create = json!({"jsonrpc": "2.0", "id": 1, "method": "create",
        "params": {"network": {"allowlist": {"cidrs": ["0.0.0.0/0"]}}}});
    let requests = [
        create,
        run(2, "while :; do :; done", json!({"timeoutMs": 500})),
        // A string doubled to 64 MiB needs more than 32 MiB of linear memory.
        run(
            3,
            "awk 'BEGIN{s=\"x\"; for(i=0;i<26;i++) s=s s; print length(s)}'; echo \"awk $?\"",
            json!({}),
        ),
        run(4, "seq 1 100000", json!({"truncation": "plain"})),
        run(
            5,
            &format!("cat {dir}/marker.txt; echo \"cat $?\"; cat /etc/hostname; ls {dir}"),
            json!({}),
        ),
        run(6, &format!("curl -sS {url}"), json!({})),
        run(
            7,
            "cat repo/hello.txt && echo changed > repo/hello.txt && echo new > repo/new.txt \
             && cat repo/hello.txt repo/new.txt",
            json!({}),
        ),
        run(
            8,
            "head -c 100000 /dev/zero > /tmp/big; echo \"head $?\"",
            json!({}),
        ),
        run(
            9,
            "for i in $(seq 1 100); do touch /tmp/f$i || { echo \"touch $?\"; break; }; done",
            json!({}),
        ),
    ];
    let (out, answers) = serve(nest, &flags, &requests);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{who}: {stderr}");
    assert_eq!(stderr, "", "{who}");
    let result = |id: u64| -> &Value {
        let a = answers
            .get(&id)
            .unwrap_or_else(|| panic!("{who}: no answer {id}: {answers:?}"));
        assert!(a.get("error").is_none(), "{who}: {a}");
        &a["result"]
    };
    assert_eq!(result(1), &json!({"ok": true}), "{who}");

    let r = result(2);
    assert_eq!(r["exitCode"], 124, "{who}: {r}");
    assert_eq!(r["errorClass"], "TIMEOUT", "{who}: {r}");
    assert_eq!(limits_hit(r), ["timeoutMs"], "{who}: {r}");

    let r = result(3);
    assert_eq!(r["stdout"], "awk 134\n", "{who}: {r}");
    assert_eq!(
        allocation_size_as_n(r["stderr"].as_str().unwrap_or_default()),
        AWK_OUT_OF_MEMORY,
        "{who}: {r}"
    );
    assert_eq!(limits_hit(r), ["memoryBytes"], "{who}: {r}");

    let r = result(4);
    let all: String = (1..=100_000).map(|i| format!("{i}\n")).collect();
    assert_eq!(r["exitCode"], 0, "{who}: {r}");
    assert_eq!(r["stdout"], all[..STDOUT_BYTES], "{who}: {r}");
    assert_eq!(
        r["truncated"],
        json!({"stdout": true, "stderr": false}),
        "{who}: {r}"
    );
    assert_eq!(limits_hit(r), ["stdoutBytes"], "{who}: {r}");

    let r = result(5);
    assert_eq!(r["stdout"], "cat 1\nsandbox\n", "{who}: {r}");
    assert_eq!(
        r["stderr"],
        format!(
            "cat: {dir}/marker.txt: No such file or directory\n\
             ls: cannot access '{dir}': No such file or directory\n"
        ),
        "{who}: {r}"
    );

    let r = result(6);
    assert_eq!(r["exitCode"], 7, "{who}: {r}");
    assert_eq!(
        r["stderr"],
        format!(
            "curl: (7) blocked by sandbox network policy: {}\n",
            LOOPBACK_REFUSED
        ),
        "{who}: {r}"
    );
    host.assert_never_connected();

    let r = result(7);
    assert_eq!(r["exitCode"], 0, "{who}: {r}");
    assert_eq!(
        r["stdout"], "hello from the host\nchanged\nnew\n",
        "{who}: {r}"
    );
    assert_eq!(
        fs::read_to_string(host.path().join("repo/hello.txt")).unwrap(),
        "hello from the host\n",
        "{who}: the sandbox wrote the host's file"
    );
    assert!(
        !host.path().join("repo/new.txt").exists(),
        "{who}: the sandbox made a file on the host"
    );

    let r = result(8);
    assert_eq!(r["stdout"], "head 1\n", "{who}: {r}");
    assert_eq!(r["stderr"], HEAD_NO_SPACE, "{who}: {r}");
    assert_eq!(limits_hit(r), ["fsBytes"], "{who}: {r}");

    let r = result(9);
    assert_eq!(r["stdout"], "touch 1\n", "{who}: {r}");
    assert_eq!(r["stderr"], TOUCH_NO_SPACE, "{who}: {r}");
    assert_eq!(r["usage"]["fsFiles"], 40, "{who}: {r}");
    assert_eq!(limits_hit(r), ["fileCount"], "{who}: {r}");

    eprintln!(
        "{who}: the battery took {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

const TIMED_OUT: &str = "command timed out\n";
/// The awk guest is Rust: a refused allocation aborts it, which the shell reports as a crash.
const AWK_OUT_OF_MEMORY: &str = "memory allocation of N bytes failed\n\
    note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n\
    bash: line 1: awk: program crashed: unreachable\n";
const HEAD_NO_SPACE: &str = "head: error writing 'standard output': No space left on device\n";
/// repo/new.txt, /tmp/big and f1 to f38 are the 40 files the limit allows.
const TOUCH_NO_SPACE: &str = "touch: cannot touch '/tmp/f39': No space left on device\n";
const LOOPBACK_REFUSED: &str = "address 127.0.0.1 is a loopback address (127.0.0.0/8); only an \
    ips or cidrs rule inside 127.0.0.0/8 allows it (allowlist: cidrs 0.0.0.0/0)";

#[test]
fn the_limits_hold_when_sandboxd_runs_directly() {
    battery(&Nest::direct(), &HostSide::new());
}

/// `bwrap` with every namespace unshared, as an unprivileged uid, seeing only the system's
/// programs and libraries, the binary's target dir, the module cache and the test's folder.
fn bwrap_argv(host: &HostSide, program: &[&Path]) -> Vec<OsString> {
    let cache = host_cache_dir();
    let target = target_dir();
    let mut argv: Vec<OsString> = [
        "bwrap",
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--uid",
        NOBODY,
        "--gid",
        NOBODY,
        "--ro-bind",
        "/usr",
        "/usr",
    ]
    .iter()
    .map(OsString::from)
    .collect();
    // Debian's /bin, /lib, /lib64 and /sbin are links into /usr; elsewhere they may be
    // directories.
    for top in ["/bin", "/sbin", "/lib", "/lib64"] {
        match fs::read_link(top) {
            Ok(to) => argv.extend(["--symlink".into(), to.into(), top.into()]),
            Err(_) => argv.extend(["--ro-bind-try".into(), top.into(), top.into()]),
        }
    }
    // The tmpfs first: the binds below may lie under /tmp, and a later mount would hide them.
    argv.extend(
        [
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--tmpfs",
            "/tmp",
            "--clearenv",
        ]
        .iter()
        .map(OsString::from),
    );
    let mut binds = vec![
        ("--ro-bind", target),
        ("--bind", cache),
        ("--bind", host.path().to_path_buf()),
    ];
    if let Some(python) = std::env::var_os("WASMSAND_PYTHON_DIR").filter(|v| !v.is_empty()) {
        argv.extend([
            "--setenv".into(),
            "WASMSAND_PYTHON_DIR".into(),
            python.clone(),
        ]);
        binds.push(("--ro-bind", python.into()));
    }
    for (how, path) in binds {
        argv.extend([how.into(), path.clone().into(), path.into()]);
    }
    argv.extend(program.iter().map(|p| p.as_os_str().to_owned()));
    argv
}

fn bwrap_works() -> bool {
    Command::new("bwrap")
        .args(["--unshare-all", "--uid", NOBODY, "--gid", NOBODY])
        .args(["--ro-bind", "/", "/", "true"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn the_limits_hold_inside_bubblewrap() {
    if !available(
        bwrap_works(),
        "bubblewrap (bwrap, able to make its namespaces)",
    ) {
        return;
    }
    let host = HostSide::new();
    // The control: a file of the host outside the binds, readable by the test, does not exist
    // in there; the confined process has its own pid namespace, no capability and an
    // unprivileged uid.
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("visible.txt"), "x").unwrap();
    // bwrap's own init is pid 1 of the new namespace, the shell pid 2.
    let probe = format!(
        "test -e {}/visible.txt && echo visible; echo $$; id -u; \
         grep CapEff /proc/self/status",
        outside.path().display()
    );
    let argv = bwrap_argv(&host, &[Path::new("/bin/sh")]);
    let mut c = Command::new(&argv[0]);
    c.args(&argv[1..]).args(["-c", &probe]);
    let out = run_output(c);
    assert_eq!(
        text(&out.stdout),
        format!("2\n{NOBODY}\nCapEff:\t0000000000000000\n"),
        "{out:?}"
    );
    let nest = Nest {
        name: "bwrap",
        argv: bwrap_argv(&host, &[&sandboxd_bin()]),
        cache_dir: host_cache_dir(),
    };
    battery(&nest, &host);
}

/// What each namespace and mount call gives, each tried in a child of its own (one that
/// succeeded must not change what the next one sees): `ok` or the errno's name.
const SYSCALL_PROBE: &str = r#"
import ctypes, errno, os, platform
libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWUSER, SIGCHLD = 0x10000000, 17
SYS_clone = {"x86_64": 56, "aarch64": 220}[platform.machine()]
def attempt(name, call):
    pid = os.fork()
    if pid == 0:
        r = call()
        os._exit(0 if r >= 0 else ctypes.get_errno())
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    print(name, "ok" if code == 0 else errno.errorcode.get(code, code))
def raw_clone():
    r = libc.syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0)
    if r == 0:
        os._exit(0)
    if r > 0:
        os.waitpid(r, 0)
    return r
attempt("unshare(0)", lambda: libc.unshare(0))
attempt("unshare(CLONE_NEWUSER)", lambda: libc.unshare(CLONE_NEWUSER))
attempt("mount", lambda: libc.mount(b"none", b"/", b"tmpfs", 0, None))
attempt("umount2", lambda: libc.umount2(b"/", 0))
attempt("setns", lambda: libc.setns(os.open("/proc/self/ns/user", os.O_RDONLY), 0))
attempt("clone(CLONE_NEWUSER)", raw_clone)
"#;

fn seccomp_wrapper() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("support/seccomp_no_namespaces.py")
}

fn seccomp_module_present() -> bool {
    Command::new(SYSTEM_PYTHON)
        .args(["-c", "import seccomp"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn the_limits_hold_under_a_seccomp_filter_without_namespaces_or_mounts() {
    if !available(
        seccomp_module_present(),
        "Debian's python3-seccomp (for /usr/bin/python3)",
    ) {
        return;
    }
    let wrapper = seccomp_wrapper();
    // The control: unshare(0), which changes nothing and succeeds for anyone, is refused under
    // the filter, as is every call that makes or enters a namespace or mounts.
    let direct = run_output({
        let mut c = Command::new(SYSTEM_PYTHON);
        c.args(["-c", SYSCALL_PROBE]);
        c
    });
    assert!(
        text(&direct.stdout).starts_with("unshare(0) ok\n"),
        "{direct:?}"
    );
    let filtered = run_output({
        let mut c = Command::new(SYSTEM_PYTHON);
        c.arg(&wrapper).args([SYSTEM_PYTHON, "-c", SYSCALL_PROBE]);
        c
    });
    assert_eq!(
        text(&filtered.stdout),
        "unshare(0) EPERM\nunshare(CLONE_NEWUSER) EPERM\nmount EPERM\numount2 EPERM\n\
         setns EPERM\nclone(CLONE_NEWUSER) EPERM\n",
        "{filtered:?}"
    );
    let out = run_output({
        let mut c = Command::new(SYSTEM_PYTHON);
        c.arg(&wrapper).args(["unshare", "--user", "true"]);
        c
    });
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(
        text(&out.stderr),
        "unshare: unshare failed: Operation not permitted\n"
    );
    let nest = Nest {
        name: "seccomp",
        argv: vec![SYSTEM_PYTHON.into(), wrapper.into(), sandboxd_bin().into()],
        cache_dir: host_cache_dir(),
    };
    battery(&nest, &HostSide::new());
}

/// The size of the allocation that failed depends on what the guest holds already (its
/// environment among it), so the message is compared with that number as `N`.
fn allocation_size_as_n(stderr: &str) -> String {
    const HEAD: &str = "memory allocation of ";
    match stderr.split_once(HEAD) {
        Some((before, rest)) => {
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            format!("{before}{HEAD}N{}", &rest[digits..])
        }
        None => stderr.to_string(),
    }
}
