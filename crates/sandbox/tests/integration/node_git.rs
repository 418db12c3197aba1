//! `node` and `git` as an agent types them, through `Sandbox::run` (the shell, `$PATH`
//! lookup, pipes, `&&`): the same script runs in a sandbox and in the host's bash with the
//! host's node and git in a fresh directory, and stdout and status must match.

use wasmsand::{Sandbox, SandboxOptions};

const IDENTITY: &str = "export GIT_AUTHOR_NAME=Ann GIT_AUTHOR_EMAIL=ann@example.com \
    GIT_AUTHOR_DATE='1700000000 +0000' GIT_COMMITTER_NAME=Ann \
    GIT_COMMITTER_EMAIL=ann@example.com GIT_COMMITTER_DATE='1700000000 +0000'; ";

fn host(script: &str) -> (String, i32) {
    let dir = tempfile::tempdir().unwrap();
    crate::host_tools::require_listed(&["node", "git"]);
    let out = crate::host_tools::host_tool("bash")
        .args(["-c", script])
        .current_dir(dir.path())
        .env_clear()
        .env("LC_ALL", "C")
        .env("HOME", dir.path())
        .env("PATH", "/usr/bin:/bin:/usr/local/bin")
        .output()
        .expect("host bash");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

fn same_as_host(script: &str) {
    let sb = Sandbox::new(SandboxOptions::default());
    // A directory of its own, as the host side gets, so `git init` makes a fresh repository.
    let r = sb.run(&format!("mkdir -p w && cd w && {script}")).unwrap();
    let (out, code) = host(script);
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
}

#[test]
fn an_agents_git_session() {
    same_as_host(&format!(
        "{IDENTITY}git init -q && printf 'a\\nb\\n' > f.txt && git add -A && git commit -q -m x \
         && printf 'a\\nc\\n' > f.txt && git diff && git commit -qam y && git log --oneline \
         && git status --short | wc -l"
    ));
    same_as_host(&format!(
        "{IDENTITY}git init -q && echo 1 > a && git add a && git commit -q -m one \
         && git checkout -q -b b2 && echo 2 >> a && git commit -qam two \
         && git checkout -q master && cat a && git log --oneline b2 | wc -l"
    ));
    same_as_host("git push origin main; echo $?");
}

#[test]
fn an_agents_node_session() {
    same_as_host("node -e 'console.log(1 + 1, [1, 2].map(x => x * 2))'");
    same_as_host("echo '{\"a\": [1, 2, 3]}' > d.json && node -p 'require(\"./d.json\").a.length'");
    same_as_host(
        "printf 'const fs = require(\"fs\");\\nfs.writeFileSync(\"o.txt\", \"out\\\\n\");\\n\
         console.log(fs.readdirSync(\".\").sort().join(\",\"))\\n' > s.js && node s.js && cat o.txt",
    );
    same_as_host(
        "seq 3 | node -e 'const s = require(\"fs\").readFileSync(0, \"utf8\"); console.log(s.split(\"\\n\").filter(Boolean).map(Number).reduce((a, b) => a + b))'",
    );
    same_as_host("node -e 'process.exit(3)'; echo $?");
    same_as_host("node -e 'throw new Error(\"x\")' 2>/dev/null; echo $?");
}
