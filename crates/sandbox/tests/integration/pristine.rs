//! A guest whose start-up is done once per process (jq: its builtins, `preinit.rs`) starts each
//! run from that memory, and still nothing of one run reaches the next: not the environment,
//! not `$HOME/.jq`, not the state a failed or killed run left in the guest's memory.

use wasmsand::{RunOptions, Sandbox, SandboxOptions};

#[test]
fn jq_runs_from_its_prepared_memory_and_each_run_starts_pristine() {
    wasmsand::precompile(None).unwrap();
    let jq = wasmsand_exec::Exec::shared()
        .load(wasmsand_guests::wasm_for_command("jq").unwrap())
        .unwrap();
    assert!(
        jq.is_preinitialized(),
        "precompile captures jq's prepared memory"
    );

    let sb = Sandbox::new(SandboxOptions::default());
    let r = sb
        .run("mkdir -p /tmp/a /tmp/b && echo 'def mine: \"from a\";' > /tmp/a/.jq")
        .unwrap();
    assert_eq!(r.exit_code, 0, "{}", r.stderr);
    for i in 0..3 {
        // The environment is the run's own, though the memory was captured with none.
        let r = sb
            .run(&format!(
                "HOME=/tmp/a V={i} jq -n -r '[mine, env.V, $ENV.HOME] | join(\" \")'"
            ))
            .unwrap();
        assert_eq!(
            (r.stdout.as_str(), r.exit_code),
            (&*format!("from a {i} /tmp/a\n"), 0)
        );
        // What the last run's ~/.jq defined is gone with it.
        let r = sb.run("HOME=/tmp/b jq -n mine").unwrap();
        assert_eq!(r.exit_code, 3, "{}", r.stderr);
        assert!(r.stderr.contains("mine/0 is not defined"), "{}", r.stderr);
        let r = sb.run("jq -n 'env | has(\"V\")'").unwrap();
        assert_eq!(r.stdout, "false\n");
        // A run that fails at run time, and one killed at its deadline, leave nothing either.
        let r = sb.run("jq -n 'error(\"boom\")'").unwrap();
        assert_eq!(r.exit_code, 5, "{}", r.stderr);
        let r = sb
            .run_with(
                "jq -n '[range(1e9)] | length'",
                RunOptions {
                    timeout_ms: Some(200),
                    ..RunOptions::default()
                },
            )
            .unwrap();
        assert_ne!(r.exit_code, 0);
        let r = sb
            .run("echo '{\"a\":[1,2,3]}' | jq -c '.a | map(. * 2)'")
            .unwrap();
        assert_eq!((r.stdout.as_str(), r.exit_code), ("[2,4,6]\n", 0));
    }
}

/// Every guest module starts each run from its initial memory (most from a memory image whose
/// pages a run wrote are put back, `crates/exec/src/memory.rs`): what a run accumulated in the
/// program's globals (awk's variables, sed's hold space, sort's and grep's buffers, jq's
/// definitions), or read from its environment, is not there in the next, whatever ran in
/// between.
// Threat: T-LEAK-RUNS (docs/security.md)
#[test]
fn every_guest_starts_each_run_from_its_initial_memory() {
    let sb = Sandbox::new(SandboxOptions::default());
    let r = sb.run("printf 'a b\\nc a\\nb\\n' > /tmp/in").unwrap();
    assert_eq!(r.exit_code, 0, "{}", r.stderr);
    let commands = [
        (
            "awk '{ n += NF; seen = seen $1 } END { print n, seen, ENVIRON[\"V\"] }' /tmp/in",
            "5 acb \n",
        ),
        ("sed -n 'H; ${ x; s/\\n/,/g; p }' /tmp/in", ",a b,c a,b\n"),
        ("grep -c a /tmp/in", "2\n"),
        ("sort /tmp/in | tr '\\n' '|'", "a b|b|c a|"),
        ("wc -w < /tmp/in", "5\n"),
        (
            "jq -nc --arg v \"$V\" '[$v, ($ENV.V // null)]'",
            "[\"\",null]\n",
        ),
        ("uniq -c /tmp/in | wc -l", "3\n"),
        ("cut -d' ' -f1 /tmp/in | paste -sd+", "a+c+b\n"),
    ];
    for round in 0..3 {
        for (i, (command, expected)) in commands.iter().enumerate() {
            // The same command with V set (its output differs) before each plain run; in a
            // subshell, so that the shell's own variables stay as they were.
            let with_env = sb
                .run(&format!("(export V=set{round}{i}; {command})"))
                .unwrap();
            assert_eq!(with_env.exit_code, 0, "{command}: {}", with_env.stderr);
            let r = sb.run(command).unwrap();
            assert_eq!(
                (r.stdout.as_str(), r.exit_code),
                (*expected, 0),
                "round {round}, {command}: {}",
                r.stderr
            );
        }
    }
}
