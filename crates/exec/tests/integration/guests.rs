//! Every guest program runs through `wasmsand-exec` with real wasm: arguments, stdin, exit codes,
//! and files read and written in the VFS. Where the machine has the GNU (or Debian) tool, the
//! same command runs on the host in a temporary directory holding the same files, and the
//! outputs, exit codes and resulting files must match it; the remaining cases state their
//! expectations, each checked by hand against the host tools.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;

use common::*;
use wasmsand_exec::{Exit, SharedVfs};

const HOME: &str = "/home/user";

struct Host {
    code: i32,
    stdout: String,
    files: BTreeMap<String, Vec<u8>>,
}

fn write_files(vfs: &SharedVfs, files: &[(&str, &[u8])]) {
    let mut v = vfs.lock();
    for (path, data) in files {
        let full = format!("{HOME}/{path}");
        if let Some(dir) = Path::new(&full).parent() {
            v.mkdir_p(dir.to_str().unwrap()).unwrap();
        }
        v.write(&full, data).unwrap();
    }
}

/// Every regular file below `/home/user` in the sandbox.
fn sandbox_files(vfs: &SharedVfs) -> BTreeMap<String, Vec<u8>> {
    let v = vfs.lock();
    let mut out = BTreeMap::new();
    let mut dirs = vec![String::new()];
    while let Some(rel) = dirs.pop() {
        let abs = if rel.is_empty() {
            HOME.to_string()
        } else {
            format!("{HOME}/{rel}")
        };
        for e in v.readdir(&abs).unwrap() {
            let r = if rel.is_empty() {
                e.name.clone()
            } else {
                format!("{rel}/{}", e.name)
            };
            match e.file_type {
                wasmsand_vfs::FileType::Dir => dirs.push(r),
                wasmsand_vfs::FileType::File => {
                    out.insert(r.clone(), v.read(&format!("{HOME}/{r}")).unwrap().to_vec());
                }
                _ => {}
            }
        }
    }
    out
}

fn host_files(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                dirs.push(p);
            } else if ft.is_file() {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

fn on_host(files: &[(&str, &[u8])], argv: &[&str], stdin: &[u8]) -> Host {
    let dir = tempfile::tempdir().unwrap();
    for (path, data) in files {
        let full = dir.path().join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, data).unwrap();
    }
    let mut child = crate::host_tools::host_tool(argv[0])
        .args(&argv[1..])
        .current_dir(dir.path())
        .env_clear()
        .env("LC_ALL", "C")
        .env("TZ", "UTC")
        .env("HOME", dir.path())
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("host {}: {e}", argv[0]));
    use std::io::Write;
    // Commands that do not read stdin close it early; that is not an error here.
    let _ = child.stdin.take().unwrap().write_all(stdin);
    let out = child.wait_with_output().unwrap();
    Host {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        files: host_files(dir.path()),
    }
}

/// Runs the command in the sandbox and on the host; stdout, exit code and the files left
/// behind must be the same.
fn same_as_host(files: &[(&str, &[u8])], argv: &[&str], stdin: &[u8]) {
    let vfs = vfs();
    write_files(&vfs, files);
    let ran = run(&vfs, argv, stdin);
    let host = on_host(files, argv, stdin);
    assert_eq!(
        ran.stdout, host.stdout,
        "stdout of {argv:?} (sandbox stderr: {})",
        ran.stderr
    );
    assert_eq!(
        ran.code(),
        host.code,
        "exit code of {argv:?}: {}",
        ran.stderr
    );
    assert_eq!(sandbox_files(&vfs), host.files, "files after {argv:?}");
}

/// Runs in the sandbox only; returns the result and the VFS for further checks.
fn sandbox(files: &[(&str, &[u8])], argv: &[&str], stdin: &[u8]) -> (Ran, SharedVfs) {
    let vfs = vfs();
    write_files(&vfs, files);
    (run(&vfs, argv, stdin), vfs)
}

const LINES: &[u8] = b"banana\napple\ncherry\napple\ndate\n";
const CSV: &[u8] = b"id,name,qty\n3,pear,7\n1,fig,12\n2,kiwi,3\n";

#[test]
fn file_utilities_match_gnu() {
    let files: &[(&str, &[u8])] = &[("a.txt", LINES), ("d/b.txt", b"bee\n"), ("d/e/c.txt", b"")];
    for argv in [
        &["cat", "a.txt", "d/b.txt"][..],
        &["cat", "-n", "a.txt"],
        &["cat", "missing.txt"],
        &["ls"],
        &["ls", "-1", "d"],
        &["ls", "-a", "d"],
        &["ls", "-R", "d"],
        &["cp", "a.txt", "copy.txt"],
        &["cp", "-r", "d", "d2"],
        &["mv", "a.txt", "d/moved.txt"],
        &["rm", "a.txt"],
        &["rm", "-r", "d"],
        &["rm", "nope"],
        &["mkdir", "-p", "x/y/z"],
        &["mkdir", "d"],
        &["rmdir", "d/e"],
        &["touch", "new.txt"],
        &["basename", "/a/b/c.txt", ".txt"],
        &["dirname", "/a/b/c.txt"],
        &["stat", "-c", "%s %F", "a.txt"],
        &["du", "-b", "a.txt"],
        &["truncate", "-s", "3", "a.txt"],
        &["split", "-l", "2", "a.txt", "part-"],
        &["tee", "out.txt"],
        &["true"],
        &["false"],
    ] {
        same_as_host(files, argv, b"piped into tee\n");
    }
}

#[test]
fn text_utilities_match_gnu() {
    let files: &[(&str, &[u8])] = &[
        ("a.txt", LINES),
        ("data.csv", CSV),
        ("l.txt", b"1 a\n2 b\n3 c\n"),
        ("r.txt", b"1 x\n3 z\n"),
        ("tabs.txt", b"a\tb\n"),
    ];
    for argv in [
        &["head", "-n", "2", "a.txt"][..],
        &["head", "-c", "5", "a.txt"],
        &["tail", "-n", "2", "a.txt"],
        &["tail", "-n", "+3", "a.txt"],
        &["wc", "a.txt"],
        &["wc", "-l"],
        &["sort", "a.txt"],
        &["sort", "-r", "-u", "a.txt"],
        &["sort", "-t", ",", "-k", "3", "-n", "data.csv"],
        &["uniq", "-c"],
        &["cut", "-d", ",", "-f", "2", "data.csv"],
        &["cut", "-c", "1-3", "a.txt"],
        &["tr", "a-z", "A-Z"],
        &["tr", "-d", "a"],
        &["paste", "-d", ":", "l.txt", "r.txt"],
        &["comm", "-12", "l.txt", "r.txt"],
        &["join", "l.txt", "r.txt"],
        &["tac", "a.txt"],
        &["nl", "a.txt"],
        &["fold", "-w", "3", "a.txt"],
        &["expand", "tabs.txt"],
        &["od", "-c", "a.txt"],
        &["base64", "a.txt"],
        &["base64", "-d"],
        &["md5sum", "a.txt"],
        &["sha1sum", "a.txt"],
        &["sha256sum", "a.txt"],
        &["cksum", "a.txt"],
        &["seq", "1", "2", "9"],
        &["numfmt", "--to=iec", "1048576"],
        &["rev", "a.txt"],
        &["xxd", "l.txt"],
        &["hexdump", "-C", "l.txt"],
    ] {
        let stdin: &[u8] = if argv == ["base64", "-d"] {
            b"aGVsbG8K"
        } else {
            LINES
        };
        same_as_host(files, argv, stdin);
    }
}

#[test]
fn search_and_edit_guests_match_gnu() {
    let files: &[(&str, &[u8])] = &[
        ("a.txt", LINES),
        ("data.csv", CSV),
        ("src/main.rs", b"fn main() {\n    println!(\"hi\");\n}\n"),
        (
            "src/lib.rs",
            b"pub fn add(a: i32) -> i32 { a }\n// TODO: more\n",
        ),
        ("old.txt", b"one\ntwo\nthree\n"),
        ("new.txt", b"one\n2\nthree\nfour\n"),
    ];
    for argv in [
        &["grep", "an", "a.txt"][..],
        &["grep", "-i", "-n", "APPLE", "a.txt"],
        &["grep", "-v", "-c", "a", "a.txt"],
        &["grep", "-o", "-E", "[a-z]+y", "a.txt"],
        &["grep", "-w", "-F", "fig", "data.csv"],
        &["grep", "-x", "date", "a.txt"],
        &["grep", "-q", "zzz", "a.txt"],
        &["grep", "-r", "-n", "fn", "src"],
        &["grep", "-l", "-r", "TODO", "."],
        &["grep", "-L", "TODO", "src/main.rs", "src/lib.rs"],
        &["grep", "-A", "1", "-B", "1", "cherry", "a.txt"],
        &["grep", "-C", "1", "-n", "date", "a.txt"],
        &["grep", "x", "missing.txt"],
        &["sed", "s/a/A/g", "a.txt"],
        &["sed", "-n", "2,3p", "a.txt"],
        &["sed", "-E", "s/(an)+/<&>/2", "a.txt"],
        &["sed", "/apple/d", "a.txt"],
        &["sed", "1i\\\nfirst", "a.txt"],
        &["sed", "$a\\\nlast", "a.txt"],
        &["sed", "2c\\\nchanged", "a.txt"],
        &["sed", "y/abc/xyz/", "a.txt"],
        &["sed", "3q", "a.txt"],
        &["sed", "-n", "/apple/=", "a.txt"],
        &["sed", "-i", "s/apple/APPLE/", "a.txt"],
        &["sed", "-e", "s/a/1/", "-e", "s/e/2/", "a.txt"],
        &["sed", "2!d", "a.txt"],
        &["awk", "-F", ",", "NR>1 {s+=$3} END {print s}", "data.csv"],
        &["awk", "{print NR\": \"$0}", "a.txt"],
        &[
            "awk",
            "-v",
            "x=5",
            "BEGIN {printf \"%d-%s\\n\", x*2, \"ok\"}",
        ],
        &["awk", "{c[$1]++} END {for (k in c) n++; print n}", "a.txt"],
        &["awk", "{n=split($0, p, \"a\"); print n}", "a.txt"],
        &["awk", "{gsub(/a/, \"_\"); print toupper($0)}", "a.txt"],
        &[
            "awk",
            "BEGIN {while ((getline l < \"a.txt\") > 0) n++; print n}",
        ],
        &[
            "awk",
            "function f(x) {return x*x} {print f(NR), length($0), substr($0, 2, 3)}",
            "a.txt",
        ],
        &["awk", "-F", ",", "$3 > 5 {print $2}", "data.csv"],
        &["diff", "old.txt", "new.txt"],
        &["diff", "-u", "old.txt", "new.txt"],
        &["diff", "old.txt", "old.txt"],
        &["cmp", "old.txt", "new.txt"],
        &["cmp", "old.txt", "old.txt"],
    ] {
        let diffu = argv.len() == 4 && argv[1] == "-u";
        if diffu {
            // Unified headers carry file times; compare the body only.
            let (ran, _) = sandbox(files, argv, b"");
            let host = on_host(files, argv, b"");
            let body = |s: &str| s.lines().skip(2).collect::<Vec<_>>().join("\n");
            assert_eq!(body(&ran.stdout), body(&host.stdout));
            assert_eq!(ran.code(), host.code);
            assert!(ran.stdout.starts_with("--- old.txt\t"), "{}", ran.stdout);
            continue;
        }
        same_as_host(files, argv, LINES);
    }
}

#[test]
fn find_lists_like_gnu_find() {
    let files: &[(&str, &[u8])] = &[("a.txt", b"x"), ("d/b.txt", b"yy"), ("d/e/c.md", b"")];
    for argv in [
        &["find", "."][..],
        &["find", ".", "-name", "*.txt"],
        &["find", "d", "-type", "d"],
        &["find", ".", "-type", "f", "-size", "-2c"],
        &["find", ".", "-maxdepth", "1", "-type", "f"],
        &["find", ".", "-path", "./d/*", "-name", "*.md"],
    ] {
        let (ran, _) = sandbox(files, argv, b"");
        let host = on_host(files, argv, b"");
        // Directory order is the filesystem's; compare as sets.
        let sorted = |s: &str| {
            let mut v: Vec<String> = s.lines().map(String::from).collect();
            v.sort();
            v
        };
        assert_eq!(
            sorted(&ran.stdout),
            sorted(&host.stdout),
            "{argv:?}: {}",
            ran.stderr
        );
        assert_eq!(ran.code(), host.code);
    }
}

#[test]
fn jq_matches_the_host_jq() {
    let doc: &[u8] = br#"{"users":[{"name":"ann","age":31},{"name":"bob","age":25}],"n":null}"#;
    let files: &[(&str, &[u8])] = &[("doc.json", doc)];
    for argv in [
        &["jq", "."][..],
        &["jq", "-c", ".users[0]"],
        &["jq", "-r", ".users[].name"],
        &["jq", "[.users[] | select(.age > 30) | .name]"],
        &["jq", "-c", ".users | map(.age) | add"],
        &["jq", "-n", "1 + 1"],
        &["jq", "-c", "-s", "map(.n)"],
        &["jq", "--arg", "who", "cy", "-c", "{who: $who}"],
        &["jq", "--argjson", "v", "[1,2]", "-c", "$v | length"],
        &["jq", "-e", ".n"],
        &["jq", ".users[", "doc.json"],
        &["jq", "-c", "keys", "doc.json"],
    ] {
        same_as_host(files, argv, doc);
    }
}

#[test]
fn gzip_and_tar_round_trip_and_interoperate_with_the_host() {
    let files: &[(&str, &[u8])] = &[("a.txt", LINES), ("d/b.txt", b"bee\n")];
    // gzip then gunzip in the sandbox gives the file back; the host gunzip reads it too.
    let (ran, vfs) = sandbox(files, &["gzip", "-k", "a.txt"], b"");
    assert_eq!(ran.exit, Exit::Code(0), "{}", ran.stderr);
    let gz = vfs.lock().read("/home/user/a.txt.gz").unwrap().to_vec();
    assert_eq!(&gz[..2], &[0x1f, 0x8b]);
    let r = run(&vfs, &["zcat", "a.txt.gz"], b"");
    assert_eq!(r.stdout.as_bytes(), LINES);
    let host = on_host(&[("a.txt.gz", &gz)], &["gunzip", "-c", "a.txt.gz"], b"");
    assert_eq!(host.stdout.as_bytes(), LINES);
    vfs.lock().unlink("/home/user/a.txt").unwrap();
    let r = run(&vfs, &["gunzip", "a.txt.gz"], b"");
    assert_eq!(r.exit, Exit::Code(0), "{}", r.stderr);
    assert_eq!(&vfs.lock().read("/home/user/a.txt").unwrap()[..], LINES);

    // tar czf / tzf / xzf, and the host's tar agrees on the listing.
    let (ran, vfs) = sandbox(files, &["tar", "czf", "out.tgz", "a.txt", "d"], b"");
    assert_eq!(ran.exit, Exit::Code(0), "{}", ran.stderr);
    let listing = run(&vfs, &["tar", "tzf", "out.tgz"], b"");
    let tgz = vfs.lock().read("/home/user/out.tgz").unwrap().to_vec();
    let host = on_host(&[("out.tgz", &tgz)], &["tar", "tzf", "out.tgz"], b"");
    assert_eq!(listing.stdout, host.stdout);
    assert!(listing.stdout.contains("d/b.txt"));
    vfs.lock().mkdir("/home/user/x").unwrap();
    let r = run(&vfs, &["tar", "xzf", "out.tgz", "-C", "x"], b"");
    assert_eq!(r.exit, Exit::Code(0), "{}", r.stderr);
    assert_eq!(
        &vfs.lock().read("/home/user/x/d/b.txt").unwrap()[..],
        b"bee\n"
    );
    // A tarball made by the host extracts in the sandbox.
    let made = tempfile::tempdir().unwrap();
    std::fs::write(made.path().join("h.txt"), "from host\n").unwrap();
    let status = crate::host_tools::host_tool("tar")
        .args(["czf", "h.tgz", "h.txt"])
        .current_dir(made.path())
        .status()
        .unwrap();
    assert!(status.success());
    let htgz = std::fs::read(made.path().join("h.tgz")).unwrap();
    let (r, vfs) = sandbox(&[("h.tgz", &htgz)], &["tar", "xzf", "h.tgz"], b"");
    assert_eq!(r.exit, Exit::Code(0), "{}", r.stderr);
    assert_eq!(
        &vfs.lock().read("/home/user/h.txt").unwrap()[..],
        b"from host\n"
    );
}

#[test]
fn guests_with_nondeterministic_or_sandbox_specific_output() {
    let files: &[(&str, &[u8])] = &[("a.txt", LINES), ("d/b.txt", b"bee\n")];
    // `ls -l` prints real messages, not localization keys.
    let (r, _) = sandbox(files, &["ls", "-l", "d"], b"");
    assert!(r.stdout.starts_with("total "), "{}", r.stdout);
    assert!(r.stdout.contains("b.txt"));
    // Paths are the sandbox's.
    let (r, vfs) = sandbox(files, &["realpath", "d/../a.txt"], b"");
    assert_eq!(r.stdout, "/home/user/a.txt\n");
    let r = run(&vfs, &["ln", "-s", "a.txt", "link"], b"");
    assert_eq!(r.exit, Exit::Code(0), "{}", r.stderr);
    assert_eq!(vfs.lock().readlink("/home/user/link").unwrap(), "a.txt");
    let r = run(&vfs, &["readlink", "link"], b"");
    assert_eq!(r.stdout, "a.txt\n");
    let r = run(&vfs, &["readlink", "-f", "link"], b"");
    assert_eq!(r.stdout, "/home/user/a.txt\n");
    let r = run(&vfs, &["cat", "link"], b"");
    assert_eq!(r.stdout.as_bytes(), LINES);
    // WASI has no call that changes mode bits: the guest chmod validates and succeeds, and
    // the shell's own chmod is what changes the sandbox's modes.
    let r = run(&vfs, &["chmod", "600", "a.txt"], b"");
    assert_eq!(r.exit, Exit::Code(0), "{}", r.stderr);
    let r = run(&vfs, &["chmod", "600", "missing"], b"");
    assert_eq!(r.exit, Exit::Code(1));
    // mktemp creates a unique file under /tmp.
    let r = run(&vfs, &["mktemp"], b"");
    assert_eq!(r.exit, Exit::Code(0), "{}", r.stderr);
    let made = r.stdout.trim();
    assert!(made.starts_with("/tmp/tmp."), "{made}");
    assert!(vfs.lock().stat(made).unwrap().is_file());
    // shuf permutes.
    let r = run(&vfs, &["shuf", "-i", "1-20"], b"");
    let mut got: Vec<u32> = r.stdout.lines().map(|l| l.parse().unwrap()).collect();
    got.sort();
    assert_eq!(got, (1..=20).collect::<Vec<_>>());
    // date with a fixed instant and TZ=UTC.
    let r = run(&vfs, &["date", "-d", "@86400", "+%Y-%m-%d %H:%M"], b"");
    assert_eq!(r.stdout, "1970-01-02 00:00\n");
    let r = run(&vfs, &["date", "+%Y"], b"");
    assert!(r.stdout.trim().parse::<u32>().unwrap() >= 2026);
    // env and printenv see exactly the given environment.
    let r = run(&vfs, &["printenv", "HOME"], b"");
    assert_eq!(r.stdout, "/home/user\n");
    let r = run(&vfs, &["env"], b"");
    assert!(r.stdout.contains("TZ=UTC\n"));
    // sleep sleeps, yes repeats (head ends it elsewhere).
    let r = run(&vfs, &["sleep", "0.05"], b"");
    assert_eq!(r.exit, Exit::Code(0));
    assert!(r.elapsed.as_millis() >= 50);
    // du counts what is there.
    let r = run(&vfs, &["du", "-sb", "d"], b"");
    assert!(r.stdout.ends_with("\td\n"), "{}", r.stdout);
    // xargs cannot start processes inside a guest; it says so.
    let r = run(&vfs, &["xargs", "echo"], b"a b\n");
    assert_ne!(r.exit, Exit::Code(0));
    assert!(!r.stderr.is_empty());
    // egrep/fgrep are grep.
    let r = run(&vfs, &["egrep", "ap+le", "a.txt"], b"");
    assert_eq!(r.stdout, "apple\napple\n");
    let r = run(&vfs, &["fgrep", "a.t", "a.txt"], b"");
    assert_eq!(r.code(), 1);
}

// Threat: T-EXHAUST-FILES (docs/security.md)
#[test]
fn guest_writes_respect_vfs_limits() {
    use wasmsand_vfs::VfsOptions;
    let vfs = vfs_with(VfsOptions {
        max_file_count: Some(2),
        fs_limit_bytes: Some(64),
        writable_paths: Some(vec!["/home/user".into(), "/tmp".into()]),
    });
    let r = run(&vfs, &["touch", "a", "b", "c"], b"");
    assert_ne!(r.exit, Exit::Code(0));
    assert!(r.stderr.contains("No space left on device"), "{}", r.stderr);
    assert!(vfs.lock().exists("/home/user/b"));
    assert!(!vfs.lock().exists("/home/user/c"));
    let r = run(&vfs, &["tee", "a"], &[b'x'; 100]);
    assert_ne!(r.exit, Exit::Code(0));
    assert!(r.stderr.contains("No space left on device"), "{}", r.stderr);
    let r = run(&vfs, &["touch", "/etc/nope"], b"");
    assert_ne!(r.exit, Exit::Code(0));
    assert!(r.stderr.contains("Read-only file system"), "{}", r.stderr);
    let r = run(&vfs, &["mkdir", "/usr/x"], b"");
    assert!(r.stderr.contains("Read-only file system"), "{}", r.stderr);
    // Reading still works everywhere.
    let r = run(&vfs, &["ls", "/etc"], b"");
    assert_eq!(r.exit, Exit::Code(0));
}

#[test]
fn dev_files_behave_as_on_linux() {
    let vfs = vfs();
    let r = run(&vfs, &["head", "-c", "4", "/dev/zero"], b"");
    assert_eq!(r.stdout.as_bytes(), &[0, 0, 0, 0]);
    let r = run(&vfs, &["head", "-c", "16", "/dev/urandom"], b"");
    assert_eq!(r.code(), 0);
    let r = run(&vfs, &["cat", "/dev/null"], b"");
    assert_eq!((r.code(), r.stdout.as_str()), (0, ""));
    let r = run(&vfs, &["cat", "/dev/stdin"], b"via dev stdin\n");
    assert_eq!(r.stdout, "via dev stdin\n");
    let r = run(&vfs, &["tee", "/dev/stderr"], b"both\n");
    assert_eq!((r.stdout.as_str(), r.stderr.as_str()), ("both\n", "both\n"));
    let r = run(&vfs, &["cp", "/home/user", "/dev/null"], b"");
    assert_ne!(r.code(), 0);
    let r = run(&vfs, &["tee", "/dev/null"], b"gone\n");
    assert_eq!(r.stdout, "gone\n");
}

#[test]
fn every_command_instantiates_runs_and_answers_help() {
    let vfs = vfs();
    let guests_for_limit_tests = ["spin", "alloc", "flood"];
    let mut ran = 0;
    for command in wasmsand_guests::command_names() {
        if guests_for_limit_tests.contains(&command) {
            continue;
        }
        let r = run(&vfs, &[command, "--help"], b"");
        if command == "xargs" {
            // A guest cannot start processes; the shell runs xargs itself.
            assert_eq!(r.exit, Exit::Code(126));
            assert!(
                r.stderr.contains("the shell provides xargs"),
                "{}",
                r.stderr
            );
            continue;
        }
        assert!(
            matches!(r.exit, Exit::Code(0..=2)),
            "{command} --help: {:?} {}",
            r.exit,
            r.stderr
        );
        assert!(
            !(r.stdout.is_empty() && r.stderr.is_empty()),
            "{command} --help printed nothing"
        );
        ran += 1;
    }
    assert!(ran >= 65, "only {ran} commands");
}
