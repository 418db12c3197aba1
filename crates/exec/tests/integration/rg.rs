//! `rg` (rg.wasm) through `wasmsand-exec` with real wasm, each command beside the machine's own
//! ripgrep run as `rg --sort path` (the order the guest always prints in) in a temporary
//! directory holding the same files: stdout, exit status and (where they name no host path)
//! stderr must be the same.

use crate::common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use wasmsand_exec::{Input, OutputBuffer, RunSpec, SharedVfs};

const HOME: &str = "/home/user";

#[derive(Debug)]
struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

/// The same tree twice: a host temp dir and a sandbox VFS at `/home/user`.
struct Tree {
    dir: tempfile::TempDir,
    vfs: SharedVfs,
}

impl Tree {
    fn new(files: &[(&str, &[u8])]) -> Tree {
        let t = Tree {
            dir: tempfile::tempdir().unwrap(),
            vfs: vfs(),
        };
        for (path, data) in files {
            t.put(path, data);
        }
        t
    }

    fn put(&self, path: &str, data: &[u8]) {
        let full = self.dir.path().join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, data).unwrap();
        let full = format!("{HOME}/{path}");
        let mut v = self.vfs.lock();
        v.mkdir_p(Path::new(&full).parent().unwrap().to_str().unwrap())
            .unwrap();
        v.write(&full, data).unwrap();
    }

    /// Host ripgrep in `cwd` (relative to the tree). `stdin: None` is `/dev/null`, which
    /// ripgrep does not search: it searches the directory, as the guest does on an empty stdin.
    fn host(&self, cwd: &str, args: &[&str], stdin: Option<&[u8]>) -> Out {
        self.host_sorted(cwd, args, stdin, true)
    }

    fn host_sorted(&self, cwd: &str, args: &[&str], stdin: Option<&[u8]>, sort: bool) -> Out {
        let mut cmd = crate::host_tools::host_tool("rg");
        if sort {
            cmd.args(["--sort", "path"]);
        }
        cmd.args(args)
            .current_dir(self.dir.path().join(cwd))
            .env_clear()
            .env("HOME", self.dir.path())
            .env("PATH", "/usr/bin:/bin")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd.stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("host rg: {e} (apt-get install ripgrep)"));
        if let Some(data) = stdin {
            use std::io::Write;
            let _ = child.stdin.take().unwrap().write_all(data);
        }
        let out = child.wait_with_output().unwrap();
        Out {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    fn sandbox(&self, cwd: &str, args: &[&str], stdin: Option<&[u8]>) -> Out {
        let out = OutputBuffer::new(16 << 20);
        let err = OutputBuffer::new(1 << 20);
        let mut argv = vec!["rg"];
        argv.extend_from_slice(args);
        let mut spec = RunSpec::new(self.vfs.clone(), argv.iter().copied());
        spec.cwd = if cwd.is_empty() {
            HOME.into()
        } else {
            format!("{HOME}/{cwd}")
        };
        spec.stdin = match stdin {
            Some(data) => Input::Bytes(Bytes::copy_from_slice(data)),
            None => Input::Empty,
        };
        spec.stdout = out.clone().into();
        spec.stderr = err.clone().into();
        spec.env = vec![
            ("HOME".into(), HOME.into()),
            ("PATH".into(), "/bin:/usr/bin".into()),
        ];
        spec.deadline = Some(Instant::now() + Duration::from_secs(120));
        let outcome = exec().run(&program("rg"), spec).unwrap();
        Out {
            code: outcome.exit.status(),
            stdout: out.snapshot().to_text().text,
            stderr: err.snapshot().to_text().text,
        }
    }

    /// `rg args` on both sides in `cwd`: stdout, status and stderr must match.
    fn check_in(&self, cwd: &str, args: &[&str], stdin: Option<&[u8]>) -> Out {
        let ours = self.sandbox(cwd, args, stdin);
        let host = self.host(cwd, args, stdin);
        assert_eq!(
            ours.stdout, host.stdout,
            "stdout of rg {args:?} in {cwd:?} (sandbox stderr: {}; host stderr: {})",
            ours.stderr, host.stderr
        );
        assert_eq!(
            ours.code, host.code,
            "status of rg {args:?} in {cwd:?}: sandbox stderr {:?}, host stderr {:?}",
            ours.stderr, host.stderr
        );
        if ours.stderr != host.stderr {
            // ripgrep 13 words a missing path differently under `--sort path` (`x: IO error
            // for operation on x: ...`); the guest prints its plain message.
            let plain = self.host_sorted(cwd, args, stdin, false);
            assert_eq!(
                ours.stderr, plain.stderr,
                "stderr of rg {args:?} in {cwd:?}"
            );
        }
        ours
    }

    fn check(&self, args: &[&str]) -> Out {
        self.check_in("", args, None)
    }
}

/// A small project: sources in several languages, mixed case, words inside words, a hidden
/// file, and names whose order differs between a per-directory sort and a whole-path sort
/// (`a/x` before `a.txt`).
fn project() -> Tree {
    Tree::new(&[
        (
            "a.txt",
            b"hello world\nfoo\nbar hello\nHello Caps\nhelloworld\n",
        ),
        ("a/x.txt", b"x hello in a/\n"),
        (
            "src/main.rs",
            b"fn main() {\n    // TODO: hello\n    let x = 1;\n    println!(\"hello {x}\");\n}\n",
        ),
        (
            "src/lib.py",
            b"def hello():\n    return 'HELLO'\n# todo later\n",
        ),
        ("docs/README.md", b"# Title\nSay hello.\nfoo.bar\nfooXbar\n"),
        (".hidden.txt", b"hidden hello\n"),
        ("words.txt", b"-dash\nthe cat sat\ncatalog\ncat\n"),
    ])
}

#[test]
fn search_flags_match_ripgrep() {
    let t = project();
    for args in [
        &["hello"][..],
        &["-n", "hello"],
        &["-N", "hello"],
        &["-i", "HELLO"],
        &["-S", "hello"],
        &["-S", "Hello"],
        &["-i", "-s", "Hello"],
        &["-w", "cat"],
        &["-x", "cat"],
        &["-F", "foo.bar"],
        &["foo.bar"],
        &["-v", "hello", "a.txt"],
        &["-o", "hel+o"],
        &["-o", "-n", "-i", "h[a-z]+"],
        &["-e", "foo", "-e", "cat"],
        &["-e", "-dash"],
        &["-c", "hello"],
        &["-c", "-o", "l"],
        &["--count-matches", "l"],
        &["-l", "hello"],
        &["--files-without-match", "hello"],
        &["-m", "1", "hello"],
        &["-q", "hello"],
        &["-q", "nothing-matches-this"],
        &["nothing-matches-this"],
        &["--heading", "hello"],
        &["--heading", "-n", "hello"],
        &["--no-heading", "hello"],
        &["-H", "hello", "a.txt"],
        &["hello", "a.txt"],
        &["--no-filename", "hello"],
        &["-I", "-n", "hello", "a.txt", "src"],
        &["--color", "never", "hello"],
        &["--color=never", "-n", "hello"],
        &["hello", "."],
        &["hello", "src", "a.txt"],
        &["--vimgrep", "hello"],
        &["--column", "hello"],
        &["-b", "hello", "a.txt"],
        &["-r", "[$0]", "hel+o"],
        &["-0", "-l", "hello"],
        &["--trim", "hello", "src"],
        &["-inw", "HELLO"],
        &["-A1", "-e", "foo"],
        &["-j", "4", "hello"],
        &["-f", "words.txt"],
        &["-f", "words.txt", "-e", "foo", "-n"],
    ] {
        t.check(args);
    }
}

#[test]
fn file_selection_matches_ripgrep() {
    let t = project();
    for args in [
        &["--files"][..],
        &["--files", "src"],
        &["--hidden", "--files"],
        &["-g", "*.rs", "hello"],
        &["-g", "!*.txt", "hello"],
        &["-g", "*.txt", "-g", "!a*", "--files"],
        &["--glob", "docs/**", "foo"],
        &["--iglob", "*.MD", "foo"],
        &["-t", "rust", "hello"],
        &["-t", "py", "-t", "md", "-i", "hello"],
        &["-T", "rust", "hello"],
        &["--type", "txt", "--files"],
        &["--type-add", "mine:*.md", "-t", "mine", "foo"],
        &["--hidden", "hello"],
        &["-.", "-l", "hello"],
        &["--max-depth", "1", "--files"],
        &["--sortr", "path", "--files"],
        &["-g", "a/*", "--files"],
    ] {
        t.check(args);
    }
}

#[test]
fn ignore_files_nested_and_in_parent_directories() {
    let t = Tree::new(&[
        (".git/HEAD", b"ref: refs/heads/main\n"),
        (".gitignore", b"*.log\n/vendor/\nbuild/\n!keep.log\n"),
        ("proj/.gitignore", b"*.tmp\n"),
        ("proj/sub/.ignore", b"secret*\n"),
        ("proj/sub/.rgignore", b"deep/\n"),
        ("proj/a.rs", b"needle a\n"),
        ("proj/a.tmp", b"needle tmp\n"),
        ("proj/sub/b.py", b"needle b\n"),
        ("proj/sub/secret.txt", b"needle secret\n"),
        ("proj/sub/deep/c.rs", b"needle deep\n"),
        ("proj/build/out.txt", b"needle build\n"),
        ("logs/x.log", b"needle log\n"),
        ("logs/keep.log", b"needle keep\n"),
        ("vendor/v.rs", b"needle vendor\n"),
        ("proj/vendor/v.rs", b"needle not root vendor\n"),
    ]);
    for args in [
        &["needle"][..],
        &["--files"],
        &["needle", "proj"],
        &["needle", "logs"],
        &["--no-ignore", "needle"],
        &["-u", "--files"],
        &["--no-ignore-vcs", "needle"],
        &["--no-ignore-dot", "needle"],
        &["--no-ignore-parent", "needle", "proj/sub"],
        // A named file is searched even when ignored.
        &["needle", "proj/a.tmp"],
        &["-l", "needle", "logs/x.log", "proj"],
    ] {
        t.check(args);
    }
    // From inside the repository: the root's .gitignore still applies (parents up to .git).
    t.check_in("proj", &["needle"], None);
    t.check_in("proj/sub", &["--files"], None);
    t.check_in("proj/sub", &["-n", "needle", ".."], None);
    t.check_in("logs", &["needle"], None);
    t.check_in("logs", &["--no-ignore-parent", "needle"], None);
}

#[test]
fn gitignore_applies_only_inside_a_git_repository() {
    let t = Tree::new(&[
        (".gitignore", b"*.log\n"),
        (".ignore", b"*.skip\n"),
        ("a.log", b"needle\n"),
        ("b.skip", b"needle\n"),
        ("c.txt", b"needle\n"),
    ]);
    t.check(&["needle"]);
    t.check(&["--no-require-git", "needle"]);
    t.check(&["--files"]);
}

#[test]
fn hidden_files_and_directories() {
    let t = Tree::new(&[
        (".env", b"KEY=needle\n"),
        (".config/app.toml", b"needle = 1\n"),
        ("visible.txt", b"needle\n"),
        ("dir/.inner/x.txt", b"needle\n"),
    ]);
    for args in [
        &["needle"][..],
        &["--hidden", "needle"],
        &["-uu", "needle"],
        &["--hidden", "-g", "!.config", "needle"],
        &["--hidden", "--files"],
        // A hidden file named on the command line is searched.
        &["needle", ".env"],
    ] {
        t.check(args);
    }
}

#[test]
fn binary_files_as_ripgrep_treats_them() {
    let mut late = Vec::new();
    for i in 0..20_000 {
        late.extend_from_slice(
            format!("row {i} {}\n", if i % 3000 == 0 { "hit" } else { "" }).as_bytes(),
        );
    }
    late.extend_from_slice(b"\0 hit after the NUL\n");
    let t = Tree::new(&[
        ("bin.dat", b"\x7fELF\0\0 hit inside\n"),
        ("text.txt", b"a hit\n"),
        ("late.txt", &late),
    ]);
    for args in [
        // Walked: a NUL near the start drops the file; one after earlier matches stops there
        // with ripgrep's warning.
        &["hit"][..],
        &["-c", "hit"],
        &["-l", "hit"],
        // Named: searched, reported as a binary match.
        &["hit", "bin.dat"],
        &["hit", "bin.dat", "text.txt"],
        &["-c", "hit", "bin.dat"],
        &["-a", "hit"],
        &["--text", "-c", "hit", "bin.dat"],
        &["--binary", "hit"],
        &["-uuu", "hit"],
        &["--files"],
    ] {
        t.check(args);
    }
}

#[test]
fn context_lines_and_separators() {
    let text: String = (1..=30)
        .map(|n| {
            if n % 7 == 0 {
                format!("line {n} match\n")
            } else {
                format!("line {n}\n")
            }
        })
        .collect();
    let t = Tree::new(&[
        ("one.txt", text.as_bytes()),
        ("two.txt", b"match first\nsecond\nthird match\n"),
    ]);
    for args in [
        &["-A", "1", "match"][..],
        &["-B", "2", "match"],
        &["-C", "1", "match"],
        &["-C3", "match"],
        &["-C", "1", "-n", "match", "one.txt"],
        &["-A", "2", "-B", "1", "match"],
        &["--heading", "-n", "-C", "1", "match"],
        &["-C", "1", "--context-separator", "==", "match"],
        &["-C", "1", "--no-context-separator", "match"],
        &["-m", "1", "-A", "2", "match"],
        &["-v", "-C", "1", "line", "two.txt"],
        &["--passthru", "-n", "match", "two.txt"],
        &["-o", "-C", "1", "match"],
    ] {
        t.check(args);
    }
}

#[test]
fn stdin_is_searched_when_it_has_data() {
    let t = project();
    let input: &[u8] = b"first hello\nsecond\nthird Hello\n";
    for args in [
        &["hello"][..],
        &["-i", "-n", "hello"],
        &["-H", "hello"],
        &["-c", "hello"],
        &["-l", "hello"],
        &["-v", "hello"],
        &["hello", "-"],
        &["hello", "-", "a.txt"],
    ] {
        t.check_in("", args, Some(input));
    }
    // `-f -`: the patterns come from stdin and the directory is searched.
    t.check_in("", &["-f", "-"], Some(b"hello\nfoo\n"));
    // No data: the current directory is searched (ripgrep with stdin not readable).
    let ours = t.sandbox("", &["-l", "hello"], Some(b""));
    let host = t.host("", &["-l", "hello"], None);
    assert_eq!(ours.stdout, host.stdout);
    assert_eq!(ours.code, 0);
}

#[test]
fn errors_and_exit_statuses() {
    let t = project();
    // A missing path: its message, the other path still searched, status 2.
    let out = t.check(&["hello", "missing.txt", "a.txt"]);
    assert_eq!(out.code, 2);
    assert_eq!(
        out.stderr,
        "missing.txt: No such file or directory (os error 2)\n"
    );
    t.check(&["hello", "missing-dir/"]);
    // -q with a match wins over the error.
    assert_eq!(t.check(&["-q", "hello", "missing.txt", "a.txt"]).code, 0);
    assert_eq!(t.check(&["-q", "nothing", "missing.txt", "a.txt"]).code, 2);
    // Bad patterns, globs and types: ripgrep's message, status 2.
    for args in [
        &["(unclosed"][..],
        &["-e", "ok", "-e", "[bad"],
        &["-g", "[", "x"],
        &["-t", "nosuchtype", "x"],
    ] {
        assert_eq!(t.check(args).code, 2, "{args:?}");
    }
    // No pattern, an unknown flag, a bad number: status 2 with a message.
    for args in [
        &[][..],
        &["--no-such-flag", "x"],
        &["-A", "many", "x"],
        &["-e"],
    ] {
        let ours = t.sandbox("", args, None);
        assert_eq!(ours.code, 2, "{args:?}");
        assert!(!ours.stderr.is_empty(), "{args:?}");
        assert!(ours.stdout.is_empty(), "{args:?}");
    }
    let ours = t.sandbox("", &["-P", "x"], None);
    assert_eq!(
        (ours.code, ours.stderr.as_str()),
        (2, "PCRE2 is not available in this build of ripgrep.\n")
    );
}

#[test]
fn a_large_file() {
    let mut big = String::new();
    for i in 0..200_000 {
        big.push_str(&format!(
            "line {i} {} some text to make the line longer\n",
            if i % 4999 == 0 { "MATCH" } else { "plain" }
        ));
    }
    let t = Tree::new(&[("big.txt", big.as_bytes()), ("small.txt", b"MATCH\n")]);
    assert_eq!(t.check(&["-c", "MATCH"]).code, 0);
    t.check(&["-n", "MATCH", "big.txt"]);
    t.check(&["-c", "plain", "big.txt"]);
    t.check(&["-n", "-C", "1", "line 19999[0-9] "]);
    // Every line out: 200 000 lines through the sandbox's stdout.
    let out = t.check(&["-n", "line", "big.txt"]);
    assert_eq!(out.stdout.lines().count(), 200_000);
}

#[test]
fn help_version_and_type_list() {
    let t = project();
    let help = t.sandbox("", &["--help"], None);
    assert_eq!(help.code, 0);
    for flag in [
        "-i,",
        "-S,",
        "-n,",
        "-l,",
        "-c,",
        "-w,",
        "-F,",
        "-g,",
        "-t,",
        "--hidden",
        "-A,",
        "-B,",
        "-C,",
        "-v,",
        "-o,",
        "-e,",
        "--heading",
        "-H,",
        "--files",
        "--type-list",
        "--no-ignore",
        "-u,",
        "-q,",
        "-m,",
        "--color",
    ] {
        assert!(help.stdout.contains(flag), "--help lacks {flag}");
    }
    let short = t.sandbox("", &["-h"], None);
    assert_eq!(short.code, 0);
    assert!(short.stdout.contains("USAGE"));
    assert_eq!(t.sandbox("", &["--version"], None).code, 0);
    // The type table is the `ignore` crate's, newer than ripgrep 13's: types both know the
    // same read the same, and every host type exists here with at least the host's globs.
    let ours = t.sandbox("", &["--type-list"], None);
    let host = t.host("", &["--type-list"], None);
    assert_eq!(ours.code, 0);
    let line = |s: &str, name: &str| {
        s.lines()
            .find(|l| l.split(':').next() == Some(name))
            .map(str::to_string)
    };
    for name in ["rust", "c", "txt", "go", "yaml", "toml"] {
        assert_eq!(
            line(&ours.stdout, name),
            line(&host.stdout, name),
            "type {name}"
        );
    }
    for name in ["py", "md", "json", "sh", "js", "ts", "make"] {
        let ours = line(&ours.stdout, name).unwrap_or_else(|| panic!("no type {name}"));
        let host = line(&host.stdout, name).unwrap();
        let globs = |l: &str| -> Vec<String> {
            let list = l.split_once(": ").unwrap().1;
            list.split(", ").map(str::to_string).collect()
        };
        for glob in globs(&host) {
            assert!(globs(&ours).contains(&glob), "{name} lacks {glob}");
        }
    }
}

/// `"elapsed":{...}` and `"elapsed_total":{...}` (times of the run) emptied.
fn without_times(json: &str) -> String {
    let mut out = String::new();
    let mut rest = json;
    while let Some(at) = rest.find("\"elapsed") {
        let open = at + rest[at..].find('{').unwrap();
        let close = open + rest[open..].find('}').unwrap();
        out.push_str(&rest[..open]);
        out.push_str("{}");
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

#[test]
fn json_lines_match_ripgrep() {
    let t = project();
    for args in [
        &["--json", "hello"][..],
        &["--json", "-C", "1", "hello"],
        &["--json", "-i", "-w", "HELLO", "a.txt", "src"],
        &["--json", "-v", "hello", "a.txt"],
        &["--json", "nothing-matches-this"],
        &["--json", "-q", "hello"],
    ] {
        let ours = t.sandbox("", args, None);
        let host = t.host("", args, None);
        assert_eq!(
            without_times(&ours.stdout),
            without_times(&host.stdout),
            "rg {args:?} (sandbox stderr {:?})",
            ours.stderr
        );
        assert_eq!(ours.code, host.code, "status of rg {args:?}");
    }
    // Stdin, with its `<stdin>` path.
    let ours = t.sandbox("", &["--json", "b"], Some(b"a\nb\n"));
    let host = t.host("", &["--json", "b"], Some(b"a\nb\n"));
    assert_eq!(without_times(&ours.stdout), without_times(&host.stdout));
    // Summary modes do not combine with it.
    let ours = t.sandbox("", &["--json", "-c", "hello"], None);
    assert_eq!((ours.code, ours.stdout.as_str()), (2, ""));
}
