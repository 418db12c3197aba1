//! sqlite3 and zip/unzip run through `wasmsand-exec` with real wasm, each command beside the
//! machine's own program (Debian's sqlite3, Info-ZIP zip/unzip; rg is in `rg.rs`) in a temporary
//! directory holding the same files: stdout and exit status must be the same, and the files
//! they leave behind are read back by the other side (a database written in the sandbox is
//! opened by the host's sqlite3).

use crate::common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use wasmsand_exec::{Input, OutputBuffer, RunSpec, SharedVfs};
use wasmsand_vfs::VfsOptions;

const HOME: &str = "/home/user";

#[derive(Debug)]
struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

/// The same directory twice: a host temp dir and a sandbox VFS at `/home/user`.
struct Pair {
    dir: tempfile::TempDir,
    vfs: SharedVfs,
}

impl Pair {
    fn new(files: &[(&str, &[u8])]) -> Pair {
        Pair::with(files, VfsOptions::default())
    }

    fn with(files: &[(&str, &[u8])], options: VfsOptions) -> Pair {
        let p = Pair {
            dir: tempfile::tempdir().unwrap(),
            vfs: vfs_with(options),
        };
        for (path, data) in files {
            p.put(path, data);
        }
        p
    }

    fn put(&self, path: &str, data: &[u8]) {
        let full = self.dir.path().join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, data).unwrap();
        let full = format!("{HOME}/{path}");
        let mut v = self.vfs.lock();
        if let Some(dir) = Path::new(&full).parent() {
            v.mkdir_p(dir.to_str().unwrap()).unwrap();
        }
        v.write(&full, data).unwrap();
    }

    fn sandbox_file(&self, path: &str) -> Option<Vec<u8>> {
        self.vfs
            .lock()
            .read(&format!("{HOME}/{path}"))
            .ok()
            .map(|b| b.to_vec())
    }

    fn host_file(&self, path: &str) -> Option<Vec<u8>> {
        std::fs::read(self.dir.path().join(path)).ok()
    }

    fn host(&self, argv: &[&str], stdin: &[u8]) -> Out {
        let mut cmd = crate::host_tools::host_tool(argv[0]);
        cmd.args(&argv[1..])
            .current_dir(self.dir.path())
            .env_clear()
            .env("TZ", "UTC")
            .env("LC_ALL", "C")
            .env("HOME", self.dir.path())
            .env("PATH", "/usr/bin:/bin")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("host {}: {e} (is it installed?)", argv[0]));
        use std::io::Write;
        let _ = child.stdin.take().unwrap().write_all(stdin);
        let out = child.wait_with_output().unwrap();
        Out {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    fn sandbox(&self, argv: &[&str], stdin: &[u8]) -> Out {
        let out = OutputBuffer::new(4 << 20);
        let err = OutputBuffer::new(1 << 20);
        let mut spec = RunSpec::new(self.vfs.clone(), argv.iter().copied());
        spec.cwd = HOME.into();
        spec.stdin = Input::Bytes(Bytes::copy_from_slice(stdin));
        spec.stdout = out.clone().into();
        spec.stderr = err.clone().into();
        spec.env = vec![
            ("HOME".into(), HOME.into()),
            ("PATH".into(), "/bin:/usr/bin".into()),
            ("TZ".into(), "UTC".into()),
            ("LC_ALL".into(), "C".into()),
        ];
        spec.deadline = Some(Instant::now() + Duration::from_secs(60));
        let outcome = exec().run(&program(argv[0]), spec).unwrap();
        Out {
            code: outcome.exit.status(),
            stdout: out.snapshot().to_text().text,
            stderr: err.snapshot().to_text().text,
        }
    }

    /// Runs `argv` on both sides; stdout and exit status must match. Returns the sandbox's.
    fn check(&self, argv: &[&str], stdin: &[u8]) -> Out {
        let ours = self.sandbox(argv, stdin);
        let host = self.host(argv, stdin);
        assert_eq!(
            ours.stdout, host.stdout,
            "stdout of {argv:?} (sandbox stderr: {}; host stderr: {})",
            ours.stderr, host.stderr
        );
        assert_eq!(
            ours.code, host.code,
            "exit code of {argv:?}: sandbox stderr {:?}, host stderr {:?}",
            ours.stderr, host.stderr
        );
        ours
    }
}

// ---------------------------------------------------------------------------------------------
// sqlite3

const PEOPLE_SQL: &str =
    "CREATE TABLE people(id INTEGER PRIMARY KEY, name TEXT, age INT, score REAL);
INSERT INTO people(name, age, score) VALUES ('Ann', 31, 9.5), ('Bob', NULL, 7.25),
  ('Cé \"Quoted\", x', 44, NULL), ('', 0, 0.1);
CREATE INDEX people_age ON people(age);
CREATE VIEW adults AS SELECT name, age FROM people WHERE age >= 18;
CREATE TABLE t2(a, \"odd name\");";

#[test]
fn sqlite3_output_modes_match_sqlite3() {
    let p = Pair::new(&[]);
    p.check(&["sqlite3", "db.sqlite", PEOPLE_SQL], b"");
    let q = "SELECT * FROM people ORDER BY id";
    for mode in [
        &[][..],
        &["-header"],
        &["-csv"],
        &["-csv", "-header"],
        &["-json"],
        &["-line"],
        &["-column"],
        &["-column", "-header"],
        &["-box"],
        &["-table"],
        &["-markdown"],
        &["-tabs", "-header"],
        &["-quote"],
        &["-separator", ";", "-header"],
        &["-nullvalue", "NULL"],
    ] {
        let mut argv = vec!["sqlite3"];
        argv.extend_from_slice(mode);
        argv.extend(["db.sqlite", q]);
        p.check(&argv, b"");
    }
    for args in [
        &["db.sqlite", ".tables"][..],
        &["db.sqlite", ".schema"],
        &["db.sqlite", ".schema people"],
        &["db.sqlite", ".tables peo%"],
        &[
            "db.sqlite",
            "SELECT count(*), sum(age), avg(score) FROM adults",
        ],
        &[
            "db.sqlite",
            ".mode insert people",
            "SELECT * FROM people WHERE id < 3",
        ],
        &[
            "db.sqlite",
            ".headers on",
            ".mode csv",
            "SELECT name, age FROM adults",
        ],
        &["db.sqlite", "SELECT 1; SELECT 2, 'two';"],
        &["-json", "db.sqlite", "SELECT 1 WHERE 0"],
        &["-box", "db.sqlite", "SELECT 1 WHERE 0"],
        &[
            ":memory:",
            "SELECT 2*21, 1e100, 0.1, x'4142', 'a' || char(10) || 'b'",
        ],
        &[
            "-json",
            ":memory:",
            "SELECT 2.0 AS r, -3.0 AS m, 0.1 AS z, 1.5e-7 AS e, x'41' AS b",
        ],
        &[
            "-quote",
            ":memory:",
            "SELECT 2.0, 0.5, 'it''s', NULL, x'00ff'",
        ],
        &["-version"],
        // Errors: a bad statement stops the arguments with status 1.
        &["db.sqlite", "SELECT nosuch FROM people"],
        &["db.sqlite", "SELEC 1"],
        &["db.sqlite", "SELECT 1", "SELECT * FROM missing", "SELECT 3"],
        &["db.sqlite", ".nosuchcommand"],
        &["db.sqlite", "INSERT INTO people(id) VALUES (1)"],
    ] {
        let mut argv = vec!["sqlite3"];
        argv.extend_from_slice(args);
        if args == ["-version"] {
            // The engines differ (the sandbox's is newer): only the shape is compared.
            let ours = p.sandbox(&argv, b"");
            assert_eq!(ours.code, 0);
            assert!(ours.stdout.starts_with("3."), "{}", ours.stdout);
            continue;
        }
        let out = p.check(&argv, b"");
        if out.code != 0 {
            assert!(
                out.stderr.starts_with("Error: ") || out.stderr.contains("rror"),
                "{argv:?}: {}",
                out.stderr
            );
        }
    }
    let ours = p.sandbox(&["sqlite3", "db.sqlite", "SELECT nosuch FROM people"], b"");
    assert_eq!(
        ours.stderr,
        "Error: in prepare, no such column: nosuch\n  SELECT nosuch FROM people\n         ^--- error here\n"
    );
}

#[test]
fn sqlite3_reads_stdin_and_dot_commands() {
    let csv = b"city,pop,country\nParis,2100000,FR\n\"Washington, D.C.\",690000,US\nLyon,520000\n";
    let p = Pair::new(&[("cities.csv", csv)]);
    let script = b"-- a comment
.mode csv
.import cities.csv cities
.headers on
.mode column
SELECT city, pop
  FROM cities
  ORDER BY CAST(pop AS INT) DESC;
.mode json
SELECT count(*) AS n FROM cities; SELECT typeof(pop) FROM cities LIMIT 1;
.import --csv --skip 1 cities.csv cities
.mode list
.separator ' :: '
SELECT country, count(*) FROM cities GROUP BY country ORDER BY 1;
.nullvalue (null)
SELECT NULL, 'x';
SELECT nosuch;
SELECT 'after the error';
.mode
.quit
SELECT 'not reached';
";
    let out = p.check(&["sqlite3", "imp.db"], script);
    assert_eq!(out.code, 1, "a failed statement makes the exit status 1");
    assert!(
        out.stderr
            .contains("Parse error near line 17: no such column: nosuch"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("cities.csv:4: expected 3 columns but found 2 - filling the rest with NULL"),
        "{}",
        out.stderr
    );
    // .import with a table that exists takes every row as data.
    p.check(
        &[
            "sqlite3",
            "imp.db",
            ".import --csv cities.csv cities",
            "SELECT count(*) FROM cities",
        ],
        b"",
    );
    // Statements spread over lines, a final one without its semicolon, and .read.
    p.put(
        "more.sql",
        b"CREATE TABLE k(v);\nINSERT INTO k VALUES\n (1),\n (2);\n.print read done\n",
    );
    p.check(
        &["sqlite3", "imp.db"],
        b".read more.sql\nSELECT sum(v)\nFROM k\n",
    );
    p.check(
        &["sqlite3", "-csv", ":memory:"],
        b"SELECT 1, 'a,b';\n.show\n",
    );
    p.check(
        &["sqlite3", "-bail", ":memory:"],
        b"SELECT 1;\nSELECT x;\nSELECT 2;\n",
    );
}

#[test]
fn sqlite3_databases_are_real_sqlite_files() {
    let p = Pair::new(&[]);
    let make = "CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT);
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 2000)
        INSERT INTO notes(body) SELECT printf('note %d %s', i, hex(randomblob(20))) FROM n;
        DELETE FROM notes WHERE id % 3 = 0;";
    let ours = p.sandbox(&["sqlite3", "notes.db", make], b"");
    assert_eq!(ours.code, 0, "{}", ours.stderr);
    // No journal or lock left behind, and the host's sqlite3 reads the file as written.
    let mut names: Vec<String> = p
        .vfs
        .lock()
        .readdir(HOME)
        .unwrap()
        .into_iter()
        .map(|e| e.name.to_string())
        .collect();
    names.sort();
    assert_eq!(names, ["notes.db"]);
    let db = p.sandbox_file("notes.db").unwrap();
    std::fs::write(p.dir.path().join("notes.db"), &db).unwrap();
    let host = p.host(
        &[
            "sqlite3",
            "notes.db",
            "PRAGMA integrity_check; SELECT count(*), max(id) FROM notes",
        ],
        b"",
    );
    assert_eq!(host.stdout, "ok\n1334|2000\n", "{}", host.stderr);
    // And the other way: a database the host wrote, changed in the sandbox, read by the host.
    p.host(
        &[
            "sqlite3",
            "notes.db",
            "UPDATE notes SET body = 'host' WHERE id = 1",
        ],
        b"",
    );
    p.put("notes.db", &p.host_file("notes.db").unwrap());
    let ours = p.sandbox(
        &[
            "sqlite3",
            "notes.db",
            "SELECT body FROM notes WHERE id = 1; DELETE FROM notes WHERE id > 10; VACUUM;",
        ],
        b"",
    );
    assert_eq!(ours.stdout, "host\n", "{}", ours.stderr);
    std::fs::write(
        p.dir.path().join("notes.db"),
        p.sandbox_file("notes.db").unwrap(),
    )
    .unwrap();
    let host = p.host(
        &[
            "sqlite3",
            "notes.db",
            "PRAGMA integrity_check; SELECT count(*) FROM notes",
        ],
        b"",
    );
    assert_eq!(host.stdout, "ok\n7\n");
}

#[test]
fn sqlite3_hits_the_vfs_byte_limit_cleanly() {
    // Threat: T-EXHAUST-FILES
    let limit = 256 * 1024;
    let p = Pair::with(
        &[],
        VfsOptions {
            fs_limit_bytes: Some(limit),
            ..VfsOptions::default()
        },
    );
    let ours = p.sandbox(
        &[
            "sqlite3",
            "big.db",
            "CREATE TABLE t(x)",
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 1000) \
           INSERT INTO t SELECT randomblob(1000) FROM n",
        ],
        b"",
    );
    // sqlite3 exits with SQLite's result code when an argument's statement fails: SQLITE_FULL.
    assert_eq!(ours.code, 13, "{}", ours.stderr);
    assert!(
        ours.stderr.contains("database or disk is full"),
        "{}",
        ours.stderr
    );
    // The failed transaction rolled back: the table is there and empty, and the sandbox is
    // still usable below its limit.
    let ours = p.sandbox(
        &[
            "sqlite3",
            "big.db",
            "SELECT count(*) FROM t; PRAGMA integrity_check",
        ],
        b"",
    );
    assert_eq!(
        (ours.code, ours.stdout.as_str()),
        (0, "0\nok\n"),
        "{}",
        ours.stderr
    );
    let ours = p.sandbox(
        &[
            "sqlite3",
            "big.db",
            "INSERT INTO t VALUES (1); SELECT count(*) FROM t",
        ],
        b"",
    );
    assert_eq!(ours.stdout, "1\n", "{}", ours.stderr);
}

#[test]
fn sqlite3_help() {
    let p = Pair::new(&[]);
    let out = p.sandbox(&["sqlite3", "--help"], b"");
    assert_eq!(out.code, 0);
    assert!(
        out.stdout
            .starts_with("Usage: sqlite3 [OPTIONS] [FILENAME [SQL...]]")
    );
    let out = p.sandbox(&["sqlite3", ":memory:", ".help"], b"");
    assert!(out.stdout.contains(".import FILE TABLE"), "{}", out.stdout);
    let out = p.sandbox(&["sqlite3", "-nosuchflag"], b"");
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("unknown option: -nosuchflag"),
        "{}",
        out.stderr
    );
}

// ---------------------------------------------------------------------------------------------
// zip / unzip

/// A tree to archive, the same on both sides.
const TREE: &[(&str, &[u8])] = &[
    ("d/a.txt", b"hello\n"),
    (
        "d/sub/n.txt",
        b"1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n16\n17\n18\n19\n20\n",
    ),
    (
        "d/sub/deeper/x.json",
        b"{\"k\": [1, 2, 3], \"s\": \"text text text text text\"}\n",
    ),
    ("d/empty", b""),
    ("top.txt", b"top level\n"),
];

/// 2024-03-09 10:41:59 UTC: an odd second before the end of a minute. Info-ZIP's zip rounds
/// such a time *up* in the DOS field (10:42:00) and keeps it exact in its extended timestamp,
/// and its unzip shows the latter; a tool that mixed the two up would be a minute off. Left at
/// "now", the tests would see that only when they happen to run at :59.
const ODD_SECOND: u64 = 1_709_980_919;

impl Pair {
    /// Dates every TREE path, and the directories above it, at ODD_SECOND on both sides.
    fn date_tree(&self) {
        let when = std::time::UNIX_EPOCH + Duration::from_secs(ODD_SECOND);
        for (path, _) in TREE {
            let mut at = Path::new(path);
            loop {
                std::fs::File::open(self.dir.path().join(at))
                    .unwrap()
                    .set_modified(when)
                    .unwrap();
                self.vfs
                    .lock()
                    .set_times(&format!("{HOME}/{}", at.display()), None, Some(when))
                    .unwrap();
                match at.parent() {
                    Some(up) if !up.as_os_str().is_empty() => at = up,
                    _ => break,
                }
            }
        }
    }
}

/// An archive made by the host's Info-ZIP zip from TREE, dated at ODD_SECOND.
fn host_archive() -> Vec<u8> {
    let p = Pair::new(TREE);
    p.date_tree();
    let out = p.host(&["zip", "-r", "-q", "a.zip", "d", "top.txt"], b"");
    assert_eq!(out.code, 0, "{}", out.stderr);
    p.host_file("a.zip").unwrap()
}

/// Every regular file under `dir` on the host, as (relative path, bytes), sorted.
fn host_tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                let rel = e
                    .path()
                    .strip_prefix(dir)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                files.push((rel, std::fs::read(e.path()).unwrap()));
            }
        }
    }
    files.sort();
    files
}

#[test]
fn unzip_matches_info_zip() {
    let zip = host_archive();
    let p = Pair::new(&[("a.zip", &zip)]);
    for argv in [
        &["unzip", "-l", "a.zip"][..],
        &["unzip", "-l", "a"],
        &["unzip", "-l", "a.zip", "d/sub/*"],
        &["unzip", "-l", "a.zip", "*.txt", "-x", "top.txt"],
        &["unzip", "-l", "a.zip", "nomatch"],
        &["unzip", "-p", "a.zip", "d/sub/n.txt"],
        &["unzip", "a.zip", "-d", "out"],
        // Everything exists now: without -o, the prompt meets EOF and skips it all.
        &["unzip", "a.zip", "-d", "out"],
        &["unzip", "-o", "-q", "a.zip", "-d", "out"],
        &["unzip", "-q", "a.zip", "top.txt"],
        &["unzip", "-n", "a.zip", "d/a.txt"],
        &["unzip", "missing.zip"],
        &["unzip", "-q", "a.zip", "nomatch"],
    ] {
        p.check(argv, b"");
    }
    // The extracted trees are the same.
    let mut ours = Vec::new();
    for (path, _) in host_tree(&p.dir.path().join("out")) {
        ours.push((
            path.clone(),
            p.sandbox_file(&format!("out/{path}")).unwrap(),
        ));
    }
    assert_eq!(ours, host_tree(&p.dir.path().join("out")));
    assert_eq!(ours.len(), TREE.len());
    // And dated alike: the exact time, not the DOS field's rounded one.
    for (path, _) in &ours {
        let host = std::fs::metadata(p.dir.path().join("out").join(path))
            .unwrap()
            .modified()
            .unwrap();
        let sandbox = p
            .vfs
            .lock()
            .stat(&format!("{HOME}/out/{path}"))
            .unwrap()
            .mtime;
        assert_eq!(sandbox, host, "mtime of out/{path}");
    }
    assert_eq!(p.sandbox_file("top.txt").unwrap(), b"top level\n");
}

#[test]
fn zip_archives_read_by_info_zip() {
    let p = Pair::new(TREE);
    p.date_tree();
    p.check(&["zip", "-r", "-q", "ours.zip", "d", "top.txt"], b"");
    // Both times of every entry (`unzip -Z -v` shows the DOS field and the extended timestamp)
    // are what Info-ZIP's zip wrote for the same tree.
    let times = |zip: &Path| {
        let o = crate::host_tools::host_tool("unzip")
            .args(["-Z", "-v"])
            .arg(zip)
            .env("TZ", "UTC")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        let mut lines: Vec<String> = text
            .lines()
            .filter(|l| l.contains("file last modified on"))
            .map(str::to_owned)
            .collect();
        assert!(!lines.is_empty(), "{text}");
        lines.sort();
        lines
    };
    let ours_zip = tempfile::tempdir().unwrap();
    std::fs::write(
        ours_zip.path().join("ours.zip"),
        p.sandbox_file("ours.zip").unwrap(),
    )
    .unwrap();
    assert_eq!(
        times(&ours_zip.path().join("ours.zip")),
        times(&p.dir.path().join("ours.zip"))
    );
    // Without -q: the same entries announced (compression ratios differ between deflaters,
    // and Info-ZIP walks directories in readdir order, so both are normalised).
    let lines = |s: &str| {
        let mut v: Vec<String> = s
            .lines()
            .map(|l| l.split(" (").next().unwrap().to_string())
            .collect();
        v.sort();
        v
    };
    let ours = p.sandbox(&["zip", "-r", "again.zip", "d"], b"");
    let host = p.host(&["zip", "-r", "again.zip", "d"], b"");
    assert_eq!(lines(&ours.stdout), lines(&host.stdout));
    assert!(
        ours.stdout.contains("  adding: d/empty (stored 0%)\n"),
        "{}",
        ours.stdout
    );
    // Updating an archive replaces entries and keeps the others.
    p.put("d/a.txt", b"changed\n");
    let ours = p.sandbox(&["zip", "again.zip", "d/a.txt", "top.txt"], b"");
    let host = p.host(&["zip", "again.zip", "d/a.txt", "top.txt"], b"");
    assert_eq!(lines(&ours.stdout), lines(&host.stdout));
    for argv in [
        &["zip", "-q", "none.zip", "nonexistent"][..],
        &["zip", "-q", "-j", "flat", "d/sub/n.txt", "top.txt"],
    ] {
        p.check(argv, b"");
    }
    // The sandbox's archives, copied out, are read by the host's unzip: same names as the
    // host's archives, and the bytes each was made from.
    let tree = |changed: bool| -> Vec<(String, Vec<u8>)> {
        TREE.iter()
            .filter(|(n, _)| n.starts_with("d/"))
            .map(|(n, d)| {
                let d = if changed && *n == "d/a.txt" {
                    &b"changed\n"[..]
                } else {
                    d
                };
                (n.to_string(), d.to_vec())
            })
            .collect()
    };
    let top = ("top.txt".to_string(), b"top level\n".to_vec());
    let n = ("n.txt".to_string(), TREE[1].1.to_vec());
    let mut all = tree(false);
    all.push(top.clone());
    let mut updated = tree(true);
    updated.push(top.clone());
    for (archive, mut expected) in [
        ("ours.zip", all),
        ("again.zip", updated),
        ("flat.zip", vec![n, top]),
    ] {
        expected.sort();
        let bytes = p.sandbox_file(archive).unwrap();
        let check = tempfile::tempdir().unwrap();
        std::fs::write(check.path().join("x.zip"), &bytes).unwrap();
        let t = crate::host_tools::host_tool("unzip")
            .args(["-t", "-q", "x.zip"])
            .current_dir(check.path())
            .output()
            .unwrap();
        assert!(
            t.status.success(),
            "{archive}: {}",
            String::from_utf8_lossy(&t.stdout)
        );
        let names = |zip: &Path| {
            let o = crate::host_tools::host_tool("unzip")
                .arg("-Z1")
                .arg(zip)
                .output()
                .unwrap();
            let mut v: Vec<String> = String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(str::to_owned)
                .collect();
            v.sort();
            v
        };
        assert_eq!(
            names(&check.path().join("x.zip")),
            names(&p.dir.path().join(archive)),
            "{archive}"
        );
        let x = crate::host_tools::host_tool("unzip")
            .args(["-q", "x.zip", "-d", "x"])
            .current_dir(check.path())
            .status()
            .unwrap();
        assert!(x.success());
        assert_eq!(host_tree(&check.path().join("x")), expected, "{archive}");
    }
    // stdin as an entry named "-".
    let ours = p.sandbox(&["zip", "-q", "in.zip", "-"], b"piped data\n");
    assert_eq!(ours.code, 0, "{}", ours.stderr);
    let ours = p.sandbox(&["unzip", "-p", "in.zip", "-"], b"");
    assert_eq!(ours.stdout, "piped data\n");
    for tool in ["zip", "unzip"] {
        let out = p.sandbox(&[tool, "--help"], b"");
        assert_eq!(out.code, 0);
        assert!(out.stdout.starts_with("Usage: "), "{}", out.stdout);
    }
}

#[test]
fn unzip_keeps_entries_inside_the_destination() {
    // Threat: T-ESCAPE-FS
    let p = Pair::new(&[]);
    let py = "import zipfile\nz = zipfile.ZipFile('evil.zip', 'w')\n\
              z.writestr('../../escape.txt', 'x')\nz.writestr('/abs.txt', 'y')\n\
              z.writestr('ok/../../up.txt', 'z')\nz.writestr('fine.txt', 'w')\nz.close()\n";
    let made = p.host(&["python3", "-c", py], b"");
    assert_eq!(made.code, 0, "{}", made.stderr);
    p.put("evil.zip", &p.host_file("evil.zip").unwrap());
    p.put("dest/.keep", b"");
    let ours = p.sandbox(&["unzip", "evil.zip", "-d", "dest"], b"");
    let host = p.host(&["unzip", "evil.zip", "-d", "dest"], b"");
    assert_eq!(ours.stdout, host.stdout);
    assert_eq!((ours.code, host.code), (1, 1));
    assert!(
        ours.stdout
            .contains("skipped \"../\" path component(s) in ../../escape.txt"),
        "{}",
        ours.stdout
    );
    assert_eq!(p.sandbox_file("dest/escape.txt").unwrap(), b"x");
    assert_eq!(p.sandbox_file("dest/abs.txt").unwrap(), b"y");
    assert!(!p.vfs.lock().exists("/home/escape.txt") && !p.vfs.lock().exists("/escape.txt"));
    assert!(!p.vfs.lock().exists("/abs.txt") && !p.vfs.lock().exists("/home/up.txt"));
}

#[test]
fn unzip_bomb_stops_at_the_vfs_byte_limit() {
    // Threat: T-EXHAUST-FILES
    // 64 MiB of zeros deflate to ~64 KiB; the sandbox may hold 4 MiB.
    let maker = Pair::new(&[("zeros", &vec![0u8; 64 << 20])]);
    assert_eq!(maker.host(&["zip", "-q", "bomb.zip", "zeros"], b"").code, 0);
    let bomb = maker.host_file("bomb.zip").unwrap();
    assert!(bomb.len() < 1 << 20);
    let p = Pair::with(
        &[("bomb.zip", &bomb)],
        VfsOptions {
            fs_limit_bytes: Some(4 << 20),
            ..VfsOptions::default()
        },
    );
    let ours = p.sandbox(&["unzip", "-q", "bomb.zip"], b"");
    assert_eq!(ours.code, 50, "{}", ours.stderr);
    assert!(ours.stderr.contains("disk full"), "{}", ours.stderr);
    // The partial file is gone and the sandbox is usable.
    assert!(p.sandbox_file("zeros").is_none());
    let ours = p.sandbox(&["unzip", "-p", "bomb.zip"], b"");
    assert_eq!(ours.code, 0);
    let ours = p.sandbox(&["zip", "-q", "small.zip", "bomb.zip"], b"");
    assert_eq!(ours.code, 0, "{}", ours.stderr);
}
