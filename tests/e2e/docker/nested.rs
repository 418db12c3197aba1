//! The battery of `sandboxd::nested` with sandboxd inside an unprivileged Docker container
//! (docs/security.md, "Running nested"): a non-root uid, every capability dropped,
//! no-new-privileges, Docker's default seccomp profile, no network, a read-only root with a
//! tmpfs /tmp, and the binary, its target dir and the module cache bind-mounted read-only. The
//! image is one the docker stage builds (the binary is Debian 12's, as the images are); the
//! engine's default runtime, or gVisor under `WASMSAND_TEST_DOCKER_RUNTIME=runsc`.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use super::{enabled, engine_host, gvisor, oci_runtime};
use crate::sandboxd::nested::{
    HostSide, NOBODY, Nest, battery, host_cache_dir, sandboxd_bin, target_dir,
};

const IMAGE: &str = "wasmsand/generic:current";
/// Where the container sees the host's module cache.
const CACHE: &str = "/var/cache/wasmsand";

fn docker() -> Command {
    let mut c = Command::new("docker");
    c.args(["-H", &engine_host()]);
    c
}

/// `docker run` of `program` in the unprivileged container, with the host side's folder at
/// its own path.
fn docker_run(host: &HostSide, program: &[&str]) -> Vec<OsString> {
    let user = format!("{NOBODY}:{NOBODY}");
    let target = target_dir();
    let host_dir = host.path().to_str().unwrap();
    let mut argv: Vec<String> = [
        "docker",
        "-H",
        &engine_host(),
        "run",
        "--rm",
        "-i",
        "--runtime",
        &oci_runtime(),
        "--user",
        &user,
        "--cap-drop",
        "ALL",
        "--security-opt",
        "no-new-privileges",
        "--network",
        "none",
        "--read-only",
        "--tmpfs",
        "/tmp:rw,nosuid,nodev,size=64m",
        "-v",
        &format!("{}:{}:ro", target.display(), target.display()),
        "-v",
        &format!("{}:{CACHE}:ro", host_cache_dir().display()),
        "-v",
        &format!("{host_dir}:{host_dir}"),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if let Some(python) = std::env::var("WASMSAND_PYTHON_DIR")
        .ok()
        .filter(|v| !v.is_empty())
    {
        argv.extend([
            "-e".into(),
            format!("WASMSAND_PYTHON_DIR={python}"),
            "-v".into(),
            format!("{python}:{python}:ro"),
        ]);
    }
    argv.push(IMAGE.into());
    argv.extend(program.iter().map(|s| s.to_string()));
    argv.into_iter().map(OsString::from).collect()
}

fn command(argv: &[OsString]) -> Command {
    let mut c = Command::new(&argv[0]);
    c.args(&argv[1..]);
    c
}

/// Compiles on the host what the battery runs, so that the containers, whose cache is
/// read-only, find every module there (a no-op once scripts/test.sh's precompile ran).
fn warm_the_cache() {
    let out = Command::new(sandboxd_bin())
        .arg("--cache-dir")
        .arg(host_cache_dir())
        .args([
            "exec",
            "seq 1 1 | head -c 1 | cat > /tmp/x && touch /tmp/y && ls /tmp >/dev/null \
             && awk 'BEGIN{}' && { curl -s http://127.0.0.1:1/; test $? = 7; }",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn the_limits_hold_inside_an_unprivileged_container() {
    if !enabled() {
        return;
    }
    let image = docker()
        .args(["image", "inspect", "--format", "{{.Id}}", IMAGE])
        .output()
        .expect("the docker command runs (Debian's docker.io)");
    assert!(
        image.status.success(),
        "{IMAGE} is not on the engine (sandboxd images build): {}",
        String::from_utf8_lossy(&image.stderr)
    );
    warm_the_cache();
    let host = HostSide::new();

    // The control: inside, the process is an unprivileged uid with no capability, on a
    // read-only root, with loopback as its only interface.
    let common = "id -u; grep '^CapEff' /proc/self/status; \
        awk '$2 == \"/\" { split($4, o, \",\"); print o[1] }' /proc/mounts; ls /sys/class/net";
    let mut want = format!("{NOBODY}\nCapEff:\t0000000000000000\nro\nlo\n");
    // And under runc, with no_new_privs and Docker's seccomp profile, it cannot make a
    // namespace; under gVisor the kernel it talks to is gVisor's (which emulates user
    // namespaces inside itself, so `unshare --user` proves nothing there).
    let (probe, want_stderr) = if gvisor() {
        want.push_str("[    0.000000] Starting gVisor...\n");
        ("dmesg | head -n 1", "")
    } else {
        want.push_str("NoNewPrivs:\t1\nunshare 1\n");
        (
            "grep '^NoNewPrivs' /proc/self/status; unshare --user true; echo \"unshare $?\"",
            "unshare: unshare failed: Operation not permitted\n",
        )
    };
    let out = command(&docker_run(
        &host,
        &["sh", "-c", &format!("{common}; {probe}")],
    ))
    .stdin(Stdio::null())
    .output()
    .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), want, "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stderr), want_stderr, "{out:?}");

    let bin = sandboxd_bin();
    let nest = Nest {
        name: if gvisor() {
            "docker (gVisor)"
        } else {
            "docker"
        },
        argv: docker_run(&host, &[bin.to_str().unwrap()]),
        cache_dir: PathBuf::from(CACHE),
    };
    battery(&nest, &host);
}
