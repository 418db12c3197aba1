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
