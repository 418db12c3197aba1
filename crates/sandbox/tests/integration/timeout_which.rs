//! `timeout` and `which`, which the shell provides itself: the same script runs in a sandbox
//! and in the host's bash (GNU timeout, debianutils which), and stdout, stderr and status must
//! match; the sandbox-only cases check how `timeout` nests inside the run's own deadline.

use wasmsand::{ErrorClass, RunOptions, Sandbox, SandboxOptions};

fn sandbox() -> Sandbox {
    Sandbox::new(SandboxOptions::default())
}

fn host(script: &str) -> (String, String, i32) {
    crate::host_tools::require_listed(&["timeout", "which"]);
    let out = crate::host_tools::host_tool("bash")
        .args(["-c", script])
        .env_clear()
        .env("LC_ALL", "C")
        .env("PATH", "/usr/bin:/bin")
        .output()
        .expect("host bash");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

/// stdout and status always; stderr too unless the host's shell adds job messages to it
/// (`Killed` for a KILLed timeout).
fn same_as_host(script: &str, compare_stderr: bool) {
    let sb = sandbox();
    let r = sb.run(script).unwrap();
    let (out, err, code) = host(script);
    assert_eq!(
        r.stdout, out,
        "stdout of {script:?} (stderr {:?})",
        r.stderr
    );
    assert_eq!(
        r.exit_code, code,
        "status of {script:?} (stderr {:?})",
        r.stderr
    );
    if compare_stderr {
        assert_eq!(r.stderr, err, "stderr of {script:?}");
    }
}

#[test]
fn timeout_matches_gnu_timeout() {
    for script in [
        "timeout 0.3 sleep 5; echo $?",
        "timeout --preserve-status 0.3 sleep 5; echo $?",
        "timeout -s INT --preserve-status 0.2 sleep 5; echo $?",
        "timeout --signal=HUP --preserve-status 0.2 sleep 5; echo $?",
        "timeout -s 2 0.2 sleep 5; echo $?",
        "timeout -k 1 0.2 sleep 5; echo $?",
        "timeout --kill-after=1s 0.2s sleep 5; echo $?",
        "timeout 5 sh -c 'exit 3'; echo $?",
        "timeout 5 echo hi there; echo $?",
        "timeout 1m true; echo $?",
        "timeout 0 sleep 0.1; echo $?",
        "echo piped | timeout 5 cat; echo $?",
        "timeout 0.3 sh -c 'while :; do :; done'; echo $?",
        "timeout 0.3 bash -c 'sleep 5 | cat'; echo $?",
        "timeout 0.3 yes | head -2",
        "timeout 0.2 sleep 5 || echo failed $?",
        "timeout 5 seq 3 | timeout 5 wc -l",
        "f() { echo func; }; timeout 5 f; echo $?",
        "timeout 1 nosuch; echo $?",
        "timeout 1 ./missing.sh; echo $?",
        "timeout 1 /etc; echo $?",
        "timeout x sleep 1; echo $?",
        "timeout -1 sleep 1; echo $?",
        "timeout; echo $?",
        "timeout 5; echo $?",
        "timeout -s FOO 1 true; echo $?",
        "timeout --bogus 1 true; echo $?",
        "timeout -v 0.2 sleep 5; echo $?",
    ] {
        same_as_host(script, true);
    }
    // GNU timeout's KILL also kills timeout itself; the host shell reports it on stderr.
    same_as_host("timeout -s KILL 0.2 sleep 5; echo $?", false);
    same_as_host("timeout --preserve-status -s 9 0.2 sleep 5; echo $?", false);
}

#[test]
fn timeout_stops_the_command_early_and_the_script_goes_on() {
    let sb = sandbox();
    let r = sb
        .run("timeout 0.2 sleep 20; echo status $?; x=$(echo out; timeout 0.2 sleep 3); echo after $? \"$x\"")
        .unwrap();
    assert_eq!(r.stdout, "status 124\nafter 124 out\n");
    // The session keeps what the script did before and after.
    let r = sb.run("timeout 0.1 sleep 3; cd /tmp; pwd").unwrap();
    assert_eq!(r.stdout, "/tmp\n");
}

#[test]
fn the_runs_deadline_ends_a_longer_timeout_as_a_run_timeout() {
    let sb = sandbox();
    let r = sb
        .run_with(
            "timeout 30 sleep 20; echo not reached",
            RunOptions {
                timeout_ms: Some(300),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(r.error_class, Some(ErrorClass::Timeout));
    assert_eq!(r.exit_code, 124);
    assert!(!r.stdout.contains("not reached"));
    // A timeout inside a run that would end later: only the command ends.
    let r = sb
        .run_with(
            "timeout 0.2 sleep 20; echo $?",
            RunOptions {
                timeout_ms: Some(10_000),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(r.error_class, None);
    assert_eq!(r.stdout, "124\n");
}

#[test]
fn timeout_of_a_wasm_program_in_a_cpu_loop() {
    let sb = sandbox();
    // awk's loop runs inside the guest: the inner deadline must stop the module itself.
    let r = sb
        .run("timeout 0.3 awk 'BEGIN { while (1) x++ }'; echo $?")
        .unwrap();
    assert_eq!(r.stdout, "124\n", "{}", r.stderr);
}

#[test]
fn timeout_help() {
    let sb = sandbox();
    let r = sb.run("timeout --help").unwrap();
    assert_eq!(r.exit_code, 0);
    assert!(
        r.stdout
            .starts_with("Usage: timeout [OPTION] DURATION COMMAND")
    );
    assert!(r.stdout.contains("--preserve-status"));
}

#[test]
fn which_finds_programs_along_path() {
    let sb = sandbox();
    let r = sb
        .run(
            "mkdir -p /tmp/b1 /tmp/b2; printf '#!/bin/sh\\necho one\\n' > /tmp/b1/tool; \
             cp /tmp/b1/tool /tmp/b2/tool; chmod +x /tmp/b1/tool /tmp/b2/tool; \
             touch /tmp/b2/plain; PATH=/tmp/b1:/tmp/b2:$PATH; \
             which tool; echo $?; which -a tool; echo $?; which plain; echo $?; \
             which tool nosuch; echo $?; which; echo $?; which cd; echo $?; \
             which /tmp/b1/tool; which -x; echo $?",
        )
        .unwrap();
    assert_eq!(
        r.stdout,
        "/tmp/b1/tool\n0\n/tmp/b1/tool\n/tmp/b2/tool\n0\n1\n/tmp/b1/tool\n1\n1\n1\n/tmp/b1/tool\n\
         Usage: which [-a] args\n2\n"
    );
    assert_eq!(r.stderr, "Illegal option -x\n");
    // The same script on the host gives the same lines (paths there are the host's own).
    let (out, _, _) = host(
        "d=$(mktemp -d); mkdir -p $d/b1 $d/b2; printf '#!/bin/sh\\necho one\\n' > $d/b1/tool; \
         cp $d/b1/tool $d/b2/tool; chmod +x $d/b1/tool $d/b2/tool; touch $d/b2/plain; \
         PATH=$d/b1:$d/b2:$PATH; which tool; echo $?; which -a tool; echo $?; which plain; \
         echo $?; which tool nosuch; echo $?; which; echo $?; which cd; echo $?; \
         which $d/b1/tool; which -x 2>/dev/null; echo $?; rm -r $d",
    );
    let host_lines: Vec<String> = out
        .lines()
        .map(|l| l.replace("/usr/bin/which", "which"))
        .map(|l| match l.find("/b1/") {
            Some(i) => format!("/tmp{}", &l[i..]),
            None => match l.find("/b2/") {
                Some(i) => format!("/tmp{}", &l[i..]),
                None => l.to_string(),
            },
        })
        .collect();
    assert_eq!(r.stdout.lines().collect::<Vec<_>>(), host_lines);
    // The guests themselves are found in the sandbox's /bin or /usr/bin.
    let r = sb.run("which -a jq; which --help").unwrap();
    assert!(
        r.stdout.lines().next().unwrap().ends_with("/jq"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("Usage: which [-a] args"));
}
