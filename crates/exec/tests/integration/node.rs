//! `node`/`js` (node.wasm: the Boa engine with a Node layer) through `wasmsand-exec` with real
//! wasm, each script beside the same script run by the machine's own `node` in a temporary
//! directory holding the same files: stdout and exit status must be the same.

use crate::common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use wasmsand_exec::{Exit, Input, OutputBuffer, RunSpec, SharedVfs};

const HOME: &str = "/home/user";

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
    files: Vec<(String, String)>,
}

fn on_host(files: &[(&str, &str)], argv: &[&str], stdin: &str, read: &[&str]) -> Out {
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
        .env("HOME", HOME)
        .env("PATH", "/usr/bin:/bin")
        .env("GREETING", "hi")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("host {}: {e} (is it installed?)", argv[0]));
    use std::io::Write;
    let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    let out = child.wait_with_output().unwrap();
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        files: read
            .iter()
            .map(|f| {
                let text = std::fs::read_to_string(dir.path().join(f)).unwrap_or("<none>".into());
                (f.to_string(), text)
            })
            .collect(),
    }
}

fn in_sandbox(files: &[(&str, &str)], argv: &[&str], stdin: &str, read: &[&str]) -> Out {
    let vfs = vfs();
    write_files(&vfs, files);
    let ran = run_node(&vfs, argv, stdin, Duration::from_secs(60));
    let v = vfs.lock();
    Out {
        code: ran.0.status(),
        stdout: ran.1,
        stderr: ran.2,
        files: read
            .iter()
            .map(|f| {
                let text = v
                    .read(&format!("{HOME}/{f}"))
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or("<none>".into());
                (f.to_string(), text)
            })
            .collect(),
    }
}

fn write_files(vfs: &SharedVfs, files: &[(&str, &str)]) {
    let mut v = vfs.lock();
    for (path, data) in files {
        let full = format!("{HOME}/{path}");
        if let Some(dir) = Path::new(&full).parent() {
            v.mkdir_p(dir.to_str().unwrap()).unwrap();
        }
        v.write(&full, data.as_bytes()).unwrap();
    }
}

fn run_node(
    vfs: &SharedVfs,
    argv: &[&str],
    stdin: &str,
    limit: Duration,
) -> (Exit, String, String) {
    let out = OutputBuffer::new(1 << 20);
    let err = OutputBuffer::new(1 << 20);
    let mut spec = RunSpec::new(vfs.clone(), argv.iter().copied());
    spec.cwd = HOME.into();
    spec.stdin = Input::Bytes(Bytes::copy_from_slice(stdin.as_bytes()));
    spec.stdout = out.clone().into();
    spec.stderr = err.clone().into();
    spec.env = vec![
        ("HOME".into(), HOME.into()),
        ("PATH".into(), "/bin:/usr/bin".into()),
        ("GREETING".into(), "hi".into()),
    ];
    spec.deadline = Some(Instant::now() + limit);
    let outcome = exec().run(&program(argv[0]), spec).unwrap();
    (
        outcome.exit,
        out.snapshot().to_text().text,
        err.snapshot().to_text().text,
    )
}

/// The same script in the sandbox and under the host's node: stdout, status and the files
/// named in `read` must match.
fn check(files: &[(&str, &str)], argv: &[&str], stdin: &str, read: &[&str]) -> (Out, Out) {
    let ours = in_sandbox(files, argv, stdin, read);
    let host = on_host(files, argv, stdin, read);
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
    assert_eq!(ours.files, host.files, "files after {argv:?}");
    (ours, host)
}

fn eval(code: &str) {
    check(&[], &["node", "-e", code], "", &[]);
}

#[test]
fn console_log_formats_values_like_node() {
    for code in [
        "console.log(1, 'a', true, null, undefined, -0, 10n, 1.5e300, NaN)",
        "console.log({a:1, b:'two', c:[1,2,3], d:{e:{f:{g:1}}}})",
        "console.log([[1,[2,[3,[4]]]]], {a:{b:{c:{}}}})",
        "console.log({x:'a'.repeat(30), y:'b'.repeat(35), z:'c'.repeat(21)})",
        "console.log(Array.from({length:30}, (_, i) => i * 7))",
        "console.log(Array.from({length:120}, (_, i) => i))",
        "console.log(['apple','banana','cherry','date','elderberry','fig','grape','honeydew'])",
        "console.log([\"it's\", 'a\\nb', 'x\"y\\'z', 'tab\\there'])",
        "console.log(new Map([['a',1],['b',{c:2}]]), new Set([1,'x']), new Map(), new Set())",
        "console.log(function foo(){}, () => 1, class A {}, class B extends Array {}, async function g(){})",
        "console.log(/x+/gi, new Date(0), [1,,3], [,,], {'a-b':1, [Symbol('k')]:2}, Symbol('s'))",
        "console.log(Object.create(null), [], {}, [[]], [{}], {a:[]})",
        "class P { constructor(){ this.x = 1 } }; console.log(new P(), [new P()])",
        "const o = {name: 'o'}; o.self = o; console.log(o)",
        "console.log(Buffer.from('hi'), new Uint8Array([1,2,3]), {get g(){return 1}, set s(v){}})",
        "const a = [1,2]; a.extra = 'x'; console.log(a)",
        "console.log('%s is %d years, %i, %f, %j %%', 'Bob', 42.5, 42.5, '3.25', {a:1}, 'rest')",
        "console.log([{a:1,b:2},{a:3,b:4}], {f(){}, g: function(){}})",
        "console.log(JSON.stringify({a:[1,{b:2}],c:'x'}), JSON.stringify({a:1,b:[1,2]}, null, 2))",
        "console.log(Promise.resolve(4), new Error('boom').message, [new Number(3), new String('s')])",
        "console.log(new Array(5), new Array(150).fill(0).length, 'x'.padStart(5, '-'))",
        "console.info('info'); console.debug('debug'); console.error('to stderr'); console.warn('w')",
        "process.stdout.write('no newline'); process.stdout.write(' more\\n')",
        "console.dir({a:{b:{c:{d:1}}}}, {depth: 0}); console.log(require('util').inspect({a:{b:{c:{d:1}}}}, {depth: null}))",
        "console.log(require('util').format('%s=%d', 'x', 5), typeof require('util').inspect)",
    ] {
        eval(code);
    }
}

#[test]
fn print_and_eval_modes() {
    for argv in [
        &["node", "-p", "1 + 2"][..],
        &["node", "-p", "[1,2].map(x => x * 2)"],
        &["node", "-p", "({a: 1})"],
        &["node", "-p", "'str'"],
        &[
            "node",
            "-e",
            "console.log(process.argv.slice(2))",
            "a",
            "b c",
        ],
        &[
            "node",
            "-e",
            "console.log(process.env.GREETING, process.env.NOPE)",
        ],
        &[
            "node",
            "-e",
            "console.log(typeof require, typeof module, __filename)",
        ],
    ] {
        check(&[], argv, "", &[]);
    }
    check(&[], &["node"], "console.log('from stdin', 6 * 7)", &[]);
    check(
        &[],
        &["node", "-", "x"],
        "console.log(process.argv.slice(1))",
        &[],
    );
}

#[test]
fn scripts_modules_and_json() {
    let files: &[(&str, &str)] = &[
        (
            "main.js",
            "const lib = require('./lib');\nconst data = require('./data.json');\n\
             console.log(lib.add(2, 3), data.items.length, module.id, require.main === module);\n\
             console.log(process.argv.length, process.argv.slice(2));\n\
             console.log(__filename.endsWith('/main.js'), require('path').basename(__dirname).length > 0);\n",
        ),
        (
            "lib.js",
            "exports.add = (a, b) => a + b;\nmodule.exports.name = 'lib';\n",
        ),
        ("data.json", "{\"items\": [1, 2, 3]}"),
        ("shebang.js", "#!/usr/bin/env node\nconsole.log('ran')\n"),
        (
            "bad-require.js",
            "try { require('left-pad') } catch (e) { console.log(e.code) }",
        ),
    ] as &[_];
    check(files, &["node", "main.js", "one", "two"], "", &[]);
    check(files, &["node", "shebang.js"], "", &[]);
    check(files, &["node", "bad-require.js"], "", &[]);
    let js = in_sandbox(files, &["js", "main.js"], "", &[]);
    let host = on_host(files, &["node", "main.js"], "", &[]);
    assert_eq!((js.code, js.stdout), (host.code, host.stdout), "js is node");
}

#[test]
fn fs_over_the_sandbox_files() {
    let files: &[(&str, &str)] = &[
        ("in.txt", "line1\nline2\n"),
        ("d/a.txt", "A"),
        ("d/b.txt", "B"),
    ];
    let code = "
        const fs = require('fs'), path = require('path');
        const text = fs.readFileSync('in.txt', 'utf8');
        console.log(JSON.stringify(text), text.split('\\n').length);
        const buf = fs.readFileSync('in.txt');
        console.log(Buffer.isBuffer(buf), buf.length, buf.toString('hex').slice(0, 8), buf.toString('base64'));
        fs.writeFileSync('out.txt', text.toUpperCase());
        fs.appendFileSync('out.txt', 'tail\\n');
        fs.mkdirSync('new/deep', { recursive: true });
        fs.writeFileSync(path.join('new', 'deep', 'x.json'), JSON.stringify({ok: true}));
        console.log(fs.existsSync('out.txt'), fs.existsSync('nope'), fs.readdirSync('d').sort());
        console.log(fs.readdirSync('d', {withFileTypes: true}).map(e => [e.name, e.isFile(), e.isDirectory()]));
        console.log(fs.statSync('in.txt').size, fs.statSync('d').isDirectory(), fs.statSync('in.txt').isFile());
        fs.renameSync('d/a.txt', 'd/c.txt'); fs.unlinkSync('d/b.txt');
        console.log(fs.readdirSync('d'));
        try { fs.readFileSync('missing.txt') } catch (e) { console.log(e.code, e.message, e.syscall, e.errno) }
        try { fs.mkdirSync('d') } catch (e) { console.log(e.code, e.message) }
        try { fs.readdirSync('in.txt') } catch (e) { console.log(e.code) }
        fs.rmSync('new', { recursive: true }); console.log(fs.existsSync('new'));
        console.log(path.resolve('a/../b') === path.join(process.cwd(), 'b'), path.join('/x', '..', 'y', 'z.txt'), path.extname('f.tar.gz'), path.dirname('/a/b/c'));
        console.log(path.relative('/a/b', '/a/c/d'), path.parse('/home/u/f.txt'), path.normalize('a//b/./c/..'));
    ";
    let (ours, _) = check(files, &["node", "-e", code], "", &["out.txt", "d/c.txt"]);
    assert!(ours.stdout.contains("ENOENT"), "{}", ours.stdout);
    check(
        &[],
        &[
            "node",
            "-e",
            "console.log(require('fs').readFileSync(0, 'utf8').trim().split('\\n').reverse().join(','))",
        ],
        "a\nb\nc\n",
        &[],
    );
}

#[test]
fn promises_timers_and_exit_codes() {
    for (code, stdin) in [
        (
            "setTimeout(() => console.log('t2'), 200); setTimeout(() => console.log('t1'), 100); \
          (async () => { await null; console.log('async') })(); \
          Promise.resolve().then(() => console.log('micro')); process.nextTick(() => console.log('tick')); \
          setImmediate(() => console.log('immediate')); console.log('sync')",
            "",
        ),
        (
            "let n = 0; const h = setInterval(() => { console.log('i', ++n); if (n === 3) clearInterval(h) }, 1)",
            "",
        ),
        (
            "const sleep = ms => new Promise(r => setTimeout(r, ms)); (async () => { for (const x of [3,1,2]) { await sleep(x); console.log(x) } })()",
            "",
        ),
        (
            "process.on('exit', c => console.log('exit', c)); console.log('body'); process.exitCode = 3",
            "",
        ),
        (
            "console.log('before'); process.exit(4); console.log('after')",
            "",
        ),
        ("throw new Error('boom')", ""),
        ("throw 5", ""),
        ("null.x", ""),
        ("Promise.reject(new Error('rejected'))", ""),
        ("(async () => { throw new TypeError('in async') })()", ""),
        (
            "const p = Promise.reject(new Error('late')); p.catch(e => console.log('caught', e.message))",
            "",
        ),
        (
            "process.on('uncaughtException', e => console.log('handled', e.message)); setTimeout(() => { throw new Error('x') }, 1)",
            "",
        ),
        ("let x = ;", ""),
        ("require('assert').strictEqual(1, 2)", ""),
        (
            "require('assert').deepStrictEqual({a:[1]}, {a:[1]}); console.log('ok')",
            "",
        ),
        (
            "const E = require('events'); const e = new E(); e.on('x', v => console.log('got', v)); e.emit('x', 1); console.log(e.listenerCount('x'))",
            "",
        ),
        (
            "console.log(new TextDecoder().decode(new TextEncoder().encode('héllo')), btoa('abc'), atob('YWJj'), structuredClone({a:[1]}))",
            "",
        ),
        (
            "const u = new URL('https://example.com:8080/p/a?x=1&y=2#h'); console.log(u.hostname, u.port, u.pathname, u.searchParams.get('y'), u.hash)",
            "",
        ),
    ] {
        let (ours, _) = check(&[], &["node", "-e", code], stdin, &[]);
        if ours.code == 1 && !code.contains("assert") {
            assert!(
                !ours.stderr.is_empty(),
                "an uncaught error is reported: {code}"
            );
        }
    }
    let (ours, _) = check(
        &[],
        &["node", "-e", "throw new RangeError('bad range')"],
        "",
        &[],
    );
    assert!(
        ours.stderr.contains("RangeError: bad range"),
        "{}",
        ours.stderr
    );
}

#[test]
fn help_version_and_bad_options() {
    let vfs = vfs();
    let (exit, out, _) = run_node(&vfs, &["node", "--help"], "", Duration::from_secs(60));
    assert_eq!(exit.status(), 0);
    assert!(
        out.contains("Usage: node") && out.contains("no npm"),
        "{out}"
    );
    let (exit, out, _) = run_node(&vfs, &["node", "--version"], "", Duration::from_secs(60));
    assert_eq!(exit.status(), 0);
    assert!(out.starts_with('v'), "{out}");
    let (exit, _, err) = run_node(&vfs, &["node", "--frobnicate"], "", Duration::from_secs(60));
    assert_eq!(exit.status(), 9, "node's status for a bad option");
    assert!(err.contains("bad option: --frobnicate"), "{err}");
    let (exit, _, err) = run_node(&vfs, &["node", "missing.js"], "", Duration::from_secs(60));
    assert_eq!(exit.status(), 1);
    assert!(
        err.contains("Cannot find module") || err.contains("cannot open"),
        "{err}"
    );
    let (exit, _, err) = run_node(
        &vfs,
        &["node", "-e", "require('child_process').execSync('ls')"],
        "",
        Duration::from_secs(60),
    );
    assert_eq!(exit.status(), 1);
    assert!(err.contains("cannot start processes"), "{err}");
    check(
        &[("ok.js", "let a = 1;\n"), ("bad.js", "let = ;\n")],
        &["node", "--check", "ok.js"],
        "",
        &[],
    );
    check(
        &[("ok.js", "let a = 1;\n"), ("bad.js", "let a = ;\n")],
        &["node", "-c", "bad.js"],
        "",
        &[],
    );
}

// Threat: T-EXHAUST-CPU (docs/security.md)
#[test]
fn an_endless_loop_is_stopped_by_the_deadline_and_deep_recursion_is_an_error() {
    let vfs = vfs();
    // The deadline is what ends it (a wall-clock bound here would also count the module's
    // compile on a cold cache and a loaded machine: CI timed it at 10.5 s once).
    let (exit, _, _) = run_node(
        &vfs,
        &["node", "-e", "for (;;) {}"],
        "",
        Duration::from_millis(500),
    );
    assert_eq!(exit, Exit::TimedOut);
    let (exit, out, err) = run_node(
        &vfs,
        &[
            "node",
            "-e",
            "function f(n) { return n === 0 ? 0 : 1 + f(n - 1) }; console.log(f(5000)); f(1e7)",
        ],
        "",
        Duration::from_secs(60),
    );
    assert_eq!(exit.status(), 1, "{err}");
    assert_eq!(
        out, "5000\n",
        "recursion as deep as common code needs works"
    );
    assert!(err.contains("Maximum call stack size exceeded"), "{err}");
    // The same sandbox still runs programs afterwards.
    let (exit, out, _) = run_node(&vfs, &["node", "-p", "6 * 7"], "", Duration::from_secs(60));
    assert_eq!((exit.status(), out.as_str()), (0, "42\n"));
}

// Threat: T-EXHAUST-MEMORY (docs/security.md)
#[test]
fn memory_is_capped() {
    let vfs = vfs();
    let out = OutputBuffer::new(1 << 16);
    let err = OutputBuffer::new(1 << 16);
    let mut spec = RunSpec::new(
        vfs.clone(),
        [
            "node",
            "-e",
            "const a = []; for (;;) a.push('x'.repeat(1 << 20) + a.length)",
        ],
    );
    spec.cwd = HOME.into();
    spec.stdout = out.into();
    spec.stderr = err.into();
    spec.memory_limit = Some(64 << 20);
    spec.deadline = Some(Instant::now() + Duration::from_secs(60));
    let outcome = exec().run(&program("node"), spec).unwrap();
    assert!(
        matches!(outcome.exit, Exit::OutOfMemory(_)) || outcome.exit.status() != 0,
        "{:?}",
        outcome.exit
    );
    let (exit, out, _) = run_node(
        &vfs,
        &["node", "-p", "'still fine'"],
        "",
        Duration::from_secs(60),
    );
    assert_eq!((exit.status(), out.as_str()), (0, "still fine\n"));
}
