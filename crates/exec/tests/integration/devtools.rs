//! The developer tools of `devtools.wasm` (expr, bc, column, strings, tree, file) run through
//! `wasmsand-exec` with real wasm, each command beside the same command of the machine's own
//! tool (GNU expr, util-linux column, binutils strings, tree, file, GNU bc) in a temporary
//! directory holding the same files: stdout and exit status must be the same.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use wasmsand_exec::{Input, OutputBuffer, RunSpec, SharedVfs};

const HOME: &str = "/home/user";

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

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn on_host(files: &[(&str, &[u8])], argv: &[&str], stdin: &[u8], env: &[(&str, &str)]) -> Out {
    let dir = tempfile::tempdir().unwrap();
    for (path, data) in files {
        let full = dir.path().join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, data).unwrap();
    }
    let mut cmd = crate::host_tools::host_tool(argv[0]);
    cmd.args(&argv[1..])
        .current_dir(dir.path())
        .env_clear()
        .env("TZ", "UTC")
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
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

fn in_sandbox(files: &[(&str, &[u8])], argv: &[&str], stdin: &[u8], env: &[(&str, &str)]) -> Out {
    let vfs = vfs();
    write_files(&vfs, files);
    let out = OutputBuffer::new(1 << 20);
    let err = OutputBuffer::new(1 << 20);
    let mut spec = RunSpec::new(vfs.clone(), argv.iter().copied());
    spec.cwd = HOME.into();
    spec.stdin = Input::Bytes(Bytes::copy_from_slice(stdin));
    spec.stdout = out.clone().into();
    spec.stderr = err.clone().into();
    spec.env = vec![
        ("HOME".into(), HOME.into()),
        ("PATH".into(), "/bin:/usr/bin".into()),
        ("TZ".into(), "UTC".into()),
    ];
    for (k, v) in env {
        spec.env.push(((*k).into(), (*v).into()));
    }
    spec.deadline = Some(Instant::now() + Duration::from_secs(60));
    let outcome = exec().run(&program(argv[0]), spec).unwrap();
    Out {
        code: outcome.exit.status(),
        stdout: out.snapshot().to_text().text,
        stderr: err.snapshot().to_text().text,
    }
}

/// The same command in the sandbox and on the host: stdout and status must match, and
/// stderr too when `stderr` is set (messages that name the program's own path differ).
fn check(files: &[(&str, &[u8])], argv: &[&str], stdin: &[u8], env: &[(&str, &str)], stderr: bool) {
    let ours = in_sandbox(files, argv, stdin, env);
    let host = on_host(files, argv, stdin, env);
    assert_eq!(
        ours.stdout, host.stdout,
        "stdout of {argv:?} (sandbox stderr: {})",
        ours.stderr
    );
    assert_eq!(
        ours.code, host.code,
        "exit code of {argv:?}: {}",
        ours.stderr
    );
    if stderr {
        assert_eq!(ours.stderr, host.stderr, "stderr of {argv:?}");
    }
}

const C: &[(&str, &str)] = &[("LC_ALL", "C")];

#[test]
fn expr_matches_gnu_expr() {
    for argv in [
        &["expr", "3", "+", "4"][..],
        &["expr", "5", "/", "0"],
        &["expr", "5", "%", "0"],
        &["expr", "a", "+", "1"],
        &["expr", "abc", ":", "a\\(.\\)"],
        &["expr", "abc", ":", "a."],
        &["expr", "abc", ":", "b"],
        &["expr", "foo.txt", ":", ".*\\.\\(.*\\)"],
        &["expr", "length", "hello"],
        &["expr", "substr", "hello", "2", "3"],
        &["expr", "substr", "hello", "0", "3"],
        &["expr", "index", "hello", "lo"],
        &["expr", "match", "abc", "a*"],
        &["expr", "0", "|", "3"],
        &["expr", "0", "|", ""],
        &["expr", "", "&", "3"],
        &["expr", "3", "&", "4"],
        &["expr", "2", "<", "10"],
        &["expr", "a", "<", "b"],
        &["expr", "10", "<", "9a"],
        &["expr", "1", "=", "01"],
        &["expr", "x", "!=", "x"],
        &["expr", "(", "1", "+", "2", ")", "*", "3"],
        &["expr", "1", "+", "2", "*", "3"],
        &["expr", "-7", "/", "2"],
        &["expr", "-5", "%", "3"],
        &["expr", "99999999999999999999", "+", "1"],
        &["expr", "+", "length"],
        &["expr", "*"],
        &["expr", "0"],
        &["expr", ""],
        &["expr", "1", "2"],
        &["expr", "1", "+"],
        &["expr", "(", "1"],
        &["expr", "length"],
        &["expr"],
    ] {
        check(&[], argv, b"", C, true);
    }
}

#[test]
fn column_matches_util_linux() {
    let files: &[(&str, &[u8])] = &[
        (
            "t.txt",
            b"name qty price\napple 3 1.25\nbanana  12\n\nkiwi 100 0.5\n",
        ),
        ("c.csv", b"a,b,c\nlonger,,y\nz\n"),
        (
            "words",
            b"alpha\nbeta\ngamma\ndelta\nepsilon\nzeta\neta\ntheta\niota\nkappa\nlambda\nmu\n",
        ),
    ];
    let many: String = (1..=100).map(|n| format!("{n}\n")).collect();
    for (argv, stdin) in [
        (&["column", "-t", "t.txt"][..], &b""[..]),
        (&["column", "-t", "-s", ",", "c.csv"], b""),
        (&["column", "-t", "-s,", "-o", " | ", "c.csv"], b""),
        (&["column", "-t", "-N", "N,Q,P", "t.txt"], b""),
        (&["column", "-t", "-R", "2", "t.txt"], b""),
        (&["column", "words"], b""),
        (&["column", "-x", "words"], b""),
        (&["column", "-c", "30", "words"], b""),
        (&["column", "-x", "-c", "40"], many.as_bytes()),
        (&["column"], many.as_bytes()),
        (&["column", "-c", "3", "words"], b""),
        (&["column", "-t"], b""),
        (&["column", "missing"], b""),
    ] {
        check(files, argv, stdin, C, true);
    }
}

#[test]
fn strings_matches_binutils() {
    let bin: &[u8] = b"abc\x00hello world\x01\x02xy\tzw\x7f\xffgood\nline2222\n\x00\x00tail";
    let files: &[(&str, &[u8])] = &[("s.bin", bin)];
    for argv in [
        &["strings", "s.bin"][..],
        &["strings", "-n", "2", "s.bin"],
        &["strings", "-3", "s.bin"],
        &["strings", "-t", "x", "s.bin"],
        &["strings", "-td", "-n3", "s.bin"],
        &["strings", "-o", "s.bin"],
        &["strings", "-f", "s.bin"],
        &["strings", "-w", "s.bin"],
        &["strings", "--bytes=8", "s.bin"],
        &["strings"],
    ] {
        check(files, argv, bin, C, true);
    }
    check(files, &["strings", "missing", "s.bin"], b"", C, false);
}

#[test]
fn tree_matches_tree() {
    let files: &[(&str, &[u8])] = &[
        ("a.txt", b"a"),
        ("B", b""),
        ("_x", b""),
        ("a10", b""),
        ("a9", b""),
        (".hidden", b""),
        (".cfg/x", b""),
        ("d/b.txt", b""),
        ("d/e/c.txt", b""),
        ("d/e/f/g.rs", b""),
    ];
    for argv in [
        &["tree"][..],
        &["tree", "-a"],
        &["tree", "-d"],
        &["tree", "-L", "1"],
        &["tree", "-L", "2", "d"],
        &["tree", "-I", "a*|e"],
        &["tree", "-P", "*.txt"],
        &["tree", "-F", "--noreport"],
        &["tree", "-f", "d"],
        &["tree", "--dirsfirst"],
        &["tree", "-r", "-a"],
        &["tree", "-da"],
        &["tree", "d", "missing"],
        &["tree", "a.txt"],
        &["tree", "-L", "0"],
    ] {
        check(files, argv, b"", C, false);
        check(files, argv, b"", &[("LANG", "C.UTF-8")], false);
    }
}

/// A 3x2 RGBA PNG, a GIF, a JFIF JPEG, a PDF head, a wasm header.
fn sample_binaries() -> Vec<(&'static str, Vec<u8>)> {
    fn chunk(t: &[u8], d: &[u8]) -> Vec<u8> {
        let mut v = (d.len() as u32).to_be_bytes().to_vec();
        v.extend_from_slice(t);
        v.extend_from_slice(d);
        // file reads the header only; the CRC is not checked.
        v.extend_from_slice(&[0, 0, 0, 0]);
        v
    }
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = 3u32.to_be_bytes().to_vec();
    ihdr.extend_from_slice(&2u32.to_be_bytes());
    ihdr.extend_from_slice(&[8, 6, 0, 0, 0]);
    png.extend(chunk(b"IHDR", &ihdr));
    png.extend(chunk(b"IEND", b""));
    let mut gray = png.clone();
    gray[25] = 0;
    gray[24] = 16;
    vec![
        ("i.png", png),
        ("g.png", gray),
        ("g.gif", b"GIF89a\x05\x00\x07\x00\x00\x00\x00;".to_vec()),
        (
            "j.jpg",
            b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00\xff\xc0\x00\x11\x08\x00\x02\x00\x03\x03\x01\x22\x00\x02\x11\x01\x03\x11\x01\xff\xd9"
                .to_vec(),
        ),
        ("x.pdf", b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n".to_vec()),
        ("m.wasm", b"\0asm\x01\0\0\0".to_vec()),
        ("bin", b"\x00\x01\x02\x03\xfe".to_vec()),
    ]
}

/// Archives made by the host's own gzip, tar and zip, and the host's `true` (an ELF).
fn host_made() -> Vec<(&'static str, Vec<u8>)> {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::write(p.join("a.txt"), b"hello\n").unwrap();
    let sh = |cmd: &str| {
        let ok = crate::host_tools::host_tool("sh")
            .args(["-c", cmd])
            .current_dir(p)
            .status()
            .unwrap()
            .success();
        assert!(ok, "{cmd}");
    };
    sh("gzip -k a.txt && tar cf t.tar a.txt && zip -q z.zip a.txt && echo hi | gzip -9 > s.gz");
    let mut v = Vec::new();
    for (name, file) in [
        ("a.txt.gz", "a.txt.gz"),
        ("t.tar", "t.tar"),
        ("z.zip", "z.zip"),
        ("s.gz", "s.gz"),
    ] {
        v.push((name, std::fs::read(p.join(file)).unwrap()));
    }
    v.push(("elf", std::fs::read("/usr/bin/true").unwrap()));
    v
}

#[test]
fn file_matches_file() {
    let mut owned: Vec<(&str, Vec<u8>)> = vec![
        ("a.txt", b"hello\n".to_vec()),
        ("empty", Vec::new()),
        (
            "j.json",
            b"{\"a\": [1, 2.5e3, null, true], \"b\": \"x\"}\n".to_vec(),
        ),
        ("comma.json", b"{\"a\": [1, 2,],}\n".to_vec()),
        ("bad.json", b"{a: 1}\n".to_vec()),
        ("s.sh", b"#!/bin/sh\necho hi\n".to_vec()),
        ("b.sh", b"#!/bin/bash\necho hi\n".to_vec()),
        ("p.py", b"#!/usr/bin/env python3\nprint(1)\n".to_vec()),
        ("nd", b"#!/usr/bin/env node\n1\n".to_vec()),
        ("ff", b"#!/usr/bin/foo\n1\n".to_vec()),
        ("u.txt", "café\n".as_bytes().to_vec()),
        ("bom.txt", b"\xef\xbb\xbfbom\n".to_vec()),
        ("latin", b"caf\xe9\n".to_vec()),
        ("crlf.txt", b"a\r\nb\r\n".to_vec()),
        ("mixed", b"a\nb\r\n".to_vec()),
        ("cr", b"a\rb\r".to_vec()),
        ("noeol", b"noeol".to_vec()),
        ("esc", b"\x1b[1mhi\n".to_vec()),
        ("long.txt", [vec![b'x'; 400], b"\n".to_vec()].concat()),
        ("x.xml", b"<?xml version=\"1.0\"?>\n<a/>\n".to_vec()),
        ("h.html", b"<!DOCTYPE html>\n<html></html>\n".to_vec()),
    ];
    owned.extend(sample_binaries());
    owned.extend(host_made());
    let files: Vec<(&str, &[u8])> = owned.iter().map(|(n, d)| (*n, d.as_slice())).collect();
    let names: Vec<&str> = owned.iter().map(|(n, _)| *n).collect();
    for flags in [
        &[][..],
        &["-b"],
        &["-i"],
        &["--mime-type"],
        &["--mime-encoding"],
    ] {
        let mut argv = vec!["file"];
        argv.extend_from_slice(flags);
        argv.extend_from_slice(&names);
        check(&files, &argv, b"", C, false);
    }
    check(&files, &["file", "-"], b"#!/bin/sh\n", C, false);
    check(&files, &["file", "missing", "a.txt"], b"", C, false);
    check(
        &files,
        &["file", "-F", " =", "a.txt", "empty"],
        b"",
        C,
        false,
    );
}

/// Programs checked against GNU bc: scale rules, bases, functions and arrays, the `-l`
/// library to the last digit, line wrapping, and how errors end a line.
#[test]
fn bc_matches_gnu_bc() {
    let cases: &[(&str, bool)] = &[
        ("obase=16;255", false),
        ("obase=2;-5.5", false),
        ("obase=20;12345", false),
        ("ibase=16;FF", false),
        ("\"hi\"", false),
        ("print \"a\\tb\\n\"", false),
        ("3 > 2", false),
        ("!0", false),
        ("1 && 0", false),
        ("s(1);c(1);a(1);l(2);e(1);j(1,2)", true),
        ("4*a(1)", true),
        ("e(-1);l(0.5);s(-3);e(10);l(1000)", true),
        ("scale=50;4*a(1)", true),
        ("2^1000", false),
        (
            "define f(n) { if (n<2) return 1; return n*f(n-1) }; f(20)",
            false,
        ),
        ("a[3]=4;a[3]+a[2]", false),
        ("x=3;x^=2;x", false),
        (".5", false),
        ("-.5+0", false),
        ("scale=0; 7/2; -7/2; -7%2", false),
        ("obase=16; 10.5", false),
        ("ibase=2; 101.1", false),
        ("-2^2", false),
        ("a = 3 < 2; a", false),
        ("2^3^2", false),
        ("x=3 ; (x=4)", false),
        ("print 1, 2, \"\\n\"", false),
        ("++a; a++; a", false),
        ("if (1) 5 else 6", false),
        ("for (i=0;i<3;i++) i", false),
        ("i=0; while (i<3) { i; i+=1 }", false),
        ("\"a\\nb\"", false),
        ("define f() { return }; f()", false),
        ("define g(a[]) { return a[1] }; b[1]=7; g(b[])", false),
        ("define h(x) { auto y; y = x*2; y }; h(3)", false),
        ("scale=5; 1/3", false),
        ("1/3", true),
        ("sqrt(16)", false),
        ("scale=2; sqrt(0.04)", false),
        ("j(0,1);j(2,5.5);j(-1,1)", true),
        ("s(100);c(-2.5);a(-5);a(0.1)", true),
        ("e(0);l(1);e(50)", true),
        ("scale=5;e(1);l(10);s(0.5)", true),
        ("scale=0;e(1)", true),
        ("x=0.1; x*3", false),
        ("1.25*1.25", false),
        ("scale=1;1.25*1.25", false),
        ("scale=1; 1.5 % 0.4", false),
        ("1 +\n2", false),
        ("5; last; .", false),
        ("ibase=16; A.8", false),
        ("obase=16; -255.5", false),
        ("obase=8; 0.1", false),
        ("obase=16; 0", false),
        (
            "x = 1; if (x == 1) {\n \"one\\n\"\n} else {\n \"other\\n\"\n}",
            false,
        ),
        (
            "define fib(n) {\n auto a, b, t, i\n a = 0; b = 1\n for (i = 0; i < n; i++) { t = a + b; a = b; b = t }\n return a\n}\nfib(100)",
            false,
        ),
        ("scale=100; sqrt(2)", false),
        ("scale=30; e(2); l(3); s(2); c(3); a(2); a(0.5)", true),
        ("scale=10; for (i=-3; i<=3; i+=0.5) { e(i) }", true),
        ("scale=10; for (i=1; i<=5; i++) { l(i/3) }", true),
        ("2^64 / 3", false),
        ("99999999999999999999999 * 99999999999999999999", false),
        (
            "x = 10; while (x > 0) { x = x - 3; if (x < 4) break }; x",
            false,
        ),
        ("1/0\n2", false),
        ("obase=2; 1024; 7", false),
        ("halt; 5", false),
        ("quit", false),
        ("/* c */ 3 # x", false),
        ("print 1/3, \"\\n\"", true),
        ("scale=4; -1.2345678", false),
        ("3 == 3.0", false),
        ("10 % 3; -10 % 3; 10 % -3", false),
        ("scale=3; 10 % 3", false),
        ("length(1/3)", true),
        ("1/0; 2", false),
        ("{ 1; 2/0; 3 }; 4", false),
        ("1; quit", false),
        (
            "scale=60; e(100); l(123456.789); s(1000); c(0.001); a(1000); j(3, 10)",
            true,
        ),
        (
            "scale=25; for (i=0; i<20; i++) { x = i/7 - 1; s(x); c(x); a(x); e(x) }",
            true,
        ),
        ("scale=20; l(10^30); l(0.0000001)", true),
        ("obase=3; 100/7", true),
        ("scale=7; obase=16; 1/3", false),
        (
            "define p(x) { print x, \"\\n\"; return x*2 }; p(p(3))",
            false,
        ),
    ];
    for (prog, mathlib) in cases {
        let stdin = format!("{prog}\n");
        let argv: &[&str] = if *mathlib { &["bc", "-l"] } else { &["bc"] };
        check(&[], argv, stdin.as_bytes(), C, false);
    }
    let files: &[(&str, &[u8])] = &[("f.bc", b"define sq(x) { return x * x }\nsq(12)\n")];
    check(files, &["bc", "f.bc"], b"sq(3)\n", C, false);
    check(files, &["bc", "-q", "f.bc"], b"quit\n", C, false);
}

/// Every regular file below `root` (sandbox or host), by relative path.
fn files_below(
    list: &mut dyn FnMut(&str) -> Vec<(String, bool)>,
    read: &mut dyn FnMut(&str) -> Vec<u8>,
) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![String::new()];
    while let Some(rel) = dirs.pop() {
        for (name, is_dir) in list(&rel) {
            let r = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            if is_dir {
                dirs.push(r);
            } else {
                let data = read(&r);
                out.insert(r, data);
            }
        }
    }
    out
}

/// patch in the sandbox and on the host over the same files: output, status and every file
/// left behind (results, `.orig`, `.rej`) must be the same.
fn check_patch(files: &[(&str, &[u8])], argv: &[&str], stdin: &[u8]) {
    let vfs = vfs();
    write_files(&vfs, files);
    let out = OutputBuffer::new(1 << 20);
    let err = OutputBuffer::new(1 << 20);
    let mut spec = RunSpec::new(vfs.clone(), argv.iter().copied());
    spec.cwd = HOME.into();
    spec.stdin = Input::Bytes(Bytes::copy_from_slice(stdin));
    spec.stdout = out.clone().into();
    spec.stderr = err.clone().into();
    spec.env = vec![("LC_ALL".into(), "C".into())];
    spec.deadline = Some(Instant::now() + Duration::from_secs(60));
    let code = exec().run(&program("patch"), spec).unwrap().exit.status();
    let ours_out = out.snapshot().to_text().text;
    let ours = {
        let v = vfs.clone();
        let v2 = vfs.clone();
        files_below(
            &mut |rel| {
                let d = if rel.is_empty() {
                    HOME.to_string()
                } else {
                    format!("{HOME}/{rel}")
                };
                v.lock()
                    .readdir(&d)
                    .unwrap()
                    .into_iter()
                    .map(|e| (e.name, e.file_type == wasmsand_vfs::FileType::Dir))
                    .collect()
            },
            &mut |rel| v2.lock().read(&format!("{HOME}/{rel}")).unwrap().to_vec(),
        )
    };
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
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("host patch");
    use std::io::Write;
    let _ = child.stdin.take().unwrap().write_all(stdin);
    let host_out = child.wait_with_output().unwrap();
    let root = dir.path().to_path_buf();
    let host = files_below(
        &mut |rel| {
            std::fs::read_dir(root.join(rel))
                .unwrap()
                .flatten()
                .map(|e| {
                    (
                        e.file_name().to_string_lossy().into_owned(),
                        e.file_type().unwrap().is_dir(),
                    )
                })
                .collect()
        },
        &mut |rel| std::fs::read(root.join(rel)).unwrap(),
    );
    assert_eq!(
        ours_out,
        String::from_utf8_lossy(&host_out.stdout),
        "stdout of {argv:?}"
    );
    assert_eq!(code, host_out.status.code().unwrap(), "status of {argv:?}");
    assert_eq!(ours, host, "files after {argv:?}");
}

/// Files, argv, patch text on stdin.
type PatchCase<'a> = (Vec<(&'a str, &'a [u8])>, Vec<&'a str>, &'a str);

#[test]
fn patch_matches_gnu_patch() {
    let base = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n16\n17\n18\n19\n20\n";
    let diff = "--- a/f.txt\n+++ b/f.txt\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n\
                @@ -14,6 +14,7 @@\n 14\n 15\n 16\n+16.5\n 17\n 18\n 19\n";
    let multi = "--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,3 @@\n-1\n+one\n 2\n 3\n\
                 --- /dev/null\n+++ b/new/n.txt\n@@ -0,0 +1,2 @@\n+x\n+y\n\
                 --- a/gone.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-p\n-q\n";
    let noeol = "--- a/e.txt\n+++ b/e.txt\n@@ -1,3 +1,3 @@\n 1\n 2\n-3\n\\ No newline at end of file\n+three\n";
    let shifted = format!("0\n0\n0\n{base}");
    let fuzzed = base.replace("3\n", "Z\n");
    let broken = base.replace("4\n", "X\n").replace("17\n", "Y\n");
    let applied = base.replace("5\n", "five\n").replace("16\n", "16\n16.5\n");
    let cases: Vec<PatchCase> = vec![
        (vec![("f.txt", base.as_bytes())], vec!["patch", "-p1"], diff),
        (
            vec![("f.txt", base.as_bytes())],
            vec!["patch", "-p1", "--dry-run"],
            diff,
        ),
        (
            vec![("f.txt", applied.as_bytes())],
            vec!["patch", "-p1", "-R"],
            diff,
        ),
        (
            vec![("f.txt", shifted.as_bytes())],
            vec!["patch", "-p1"],
            diff,
        ),
        (
            vec![("f.txt", fuzzed.as_bytes())],
            vec!["patch", "-p1"],
            diff,
        ),
        (
            vec![("f.txt", fuzzed.as_bytes())],
            vec!["patch", "-p1", "-F", "0"],
            diff,
        ),
        (
            vec![("f.txt", broken.as_bytes())],
            vec!["patch", "-p1"],
            diff,
        ),
        (
            vec![("f.txt", broken.as_bytes())],
            vec!["patch", "-p1", "--dry-run"],
            diff,
        ),
        (
            vec![("f.txt", base.as_bytes())],
            vec!["patch", "-p1", "-s", "--no-backup-if-mismatch"],
            diff,
        ),
        (
            vec![("g.txt", base.as_bytes())],
            vec!["patch", "g.txt"],
            diff,
        ),
        (
            vec![("f.txt", base.as_bytes())],
            vec!["patch", "-p1", "-o", "out.txt"],
            diff,
        ),
        (
            vec![("f.txt", base.as_bytes()), ("gone.txt", b"p\nq\n")],
            vec!["patch", "-p1"],
            multi,
        ),
        (vec![("e.txt", b"1\n2\n3")], vec!["patch", "-p1"], noeol),
        (
            vec![("f.txt", base.as_bytes())],
            vec!["patch", "-p1"],
            "not a diff\n",
        ),
        (vec![("f.txt", base.as_bytes())], vec!["patch", "-p1"], ""),
    ];
    for (files, argv, stdin) in &cases {
        check_patch(files, argv, stdin.as_bytes());
    }
    let files: &[(&str, &[u8])] = &[("f.txt", base.as_bytes()), ("fix.diff", diff.as_bytes())];
    check_patch(files, &["patch", "-p1", "-i", "fix.diff"], b"");
}

/// yq (jq.wasm under another name) against the host's yq (kislyuk's jq wrapper): YAML in,
/// JSON out by default, YAML out with -y, several documents.
#[test]
fn yq_matches_the_host_yq() {
    let doc = "a: 1\nb: [x, y]\nc:\n  d: true\n  e: null\n  f: 1.5\n  g: \"1\"\n  h: [{p: 1, q: [1, 2]}, []]\n  i: {}\nname: hello world\n";
    let files: &[(&str, &[u8])] = &[("y.yaml", doc.as_bytes()), ("m.yaml", b"a: 1\n---\na: 2\n")];
    for argv in [
        &["yq", ".", "y.yaml"][..],
        &["yq", ".b", "y.yaml"],
        &["yq", "-r", ".b[0]", "y.yaml"],
        &["yq", "-c", ".c", "y.yaml"],
        &["yq", "keys", "y.yaml"],
        &["yq", "-y", ".", "y.yaml"],
        &["yq", "-y", ".c", "y.yaml"],
        &["yq", "-y", ".c.h", "y.yaml"],
        &["yq", "-y", ".b[]", "y.yaml"],
        &["yq", "-y", ".name", "y.yaml"],
        &["yq", ".a", "m.yaml"],
        &["yq", "-y", ".", "m.yaml"],
        &["yq", "-s", "map(.a) | add", "m.yaml"],
        &[
            "yq",
            "-y",
            "{total: (.c.f * 2), names: [.b[] | ascii_upcase]}",
            "y.yaml",
        ],
    ] {
        check(files, argv, b"", C, false);
    }
    check(files, &["yq", ".a"], b"a: 7\n", C, false);
}

#[test]
fn devtools_report_bad_usage() {
    for (argv, code) in [
        (&["column", "-Q"][..], 1),
        (&["strings", "-n", "x"], 1),
        (&["tree", "-L", "x"], 1),
        (&["file"], 1),
        (&["expr", "1", "+"], 2),
    ] {
        let r = in_sandbox(&[], argv, b"", C);
        assert_eq!(r.code, code, "{argv:?}: {}", r.stderr);
        assert!(!r.stderr.is_empty(), "{argv:?} said nothing");
    }
}
