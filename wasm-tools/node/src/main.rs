//! `node` / `js`: JavaScript on the Boa engine with a small part of Node's API (console,
//! process, Buffer, timers, `require` of fs/path/util/os/events and of local CommonJS files).
//! The engine and the host functions are Rust; the Node layer is JavaScript (`prelude.js`),
//! which the host hands its primitives to.

#![forbid(unsafe_code)]

mod host;

use std::io::{Read, Write};

use boa_engine::{JsValue, Source, js_string};

const HELP: &str = "\
Usage: node [options] [ script.js | -e \"script\" | - ] [arguments]

JavaScript on the Boa engine (ES2024) with a part of Node's API:
console, process (argv, env, exit, exitCode, cwd, chdir, stdout/stderr.write, on('exit')),
Buffer, setTimeout/setInterval/setImmediate/queueMicrotask, Promises and async functions,
TextEncoder/TextDecoder, atob/btoa, structuredClone, and require() of fs (sync calls),
path, util, os, events, assert and local CommonJS files (.js, .json).

Not Node: no npm or node_modules packages, no network (http, net, fetch), no child
processes, no ES module import/export, no async fs callbacks beyond what runs synchronously.

Options:
  -e, --eval SCRIPT    evaluate SCRIPT
  -p, --print SCRIPT   evaluate SCRIPT and print the result
  -c, --check          check the script's syntax without running it
  -                    read the script from standard input (also when no script is given)
  -v, --version        print the version
  -h, --help           print this help
";

/// What `node --version` and `process.version` say: a Node release line, and the engine.
pub const VERSION: &str = "v20.0.0-boa";

enum Mode {
    Eval(String, bool),
    File(String),
    Stdin,
}

fn main() {
    guest_rt::enter_pwd();
    let args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut i = 1;
    let mut mode = None;
    let mut check = false;
    let mut dash = false;
    while i < args.len() {
        let a = args[i].as_str();
        match a {
            "-h" | "--help" => {
                print!("{HELP}");
                return;
            }
            "-v" | "--version" => {
                println!("{VERSION}");
                return;
            }
            "-c" | "--check" => check = true,
            "-e" | "--eval" | "-p" | "--print" | "-pe" => {
                let Some(code) = args.get(i + 1) else {
                    eprintln!("node: {a} requires an argument");
                    std::process::exit(9);
                };
                mode = Some(Mode::Eval(code.clone(), a.contains('p')));
                i += 2;
                break;
            }
            "-" => {
                mode = Some(Mode::Stdin);
                dash = true;
                i += 1;
                break;
            }
            "--" => {
                i += 1;
                if let Some(f) = args.get(i) {
                    mode = Some(Mode::File(f.clone()));
                    i += 1;
                }
                break;
            }
            _ if a.starts_with("--eval=") || a.starts_with("--print=") => {
                let (k, v) = a.split_once('=').unwrap();
                mode = Some(Mode::Eval(v.to_string(), k == "--print"));
                i += 1;
                break;
            }
            // Accepted and without effect here: there is one engine and no module loader.
            _ if a.starts_with("--input-type")
                || a.starts_with("--max-old-space-size")
                || a.starts_with("--stack-size")
                || a == "--no-warnings"
                || a == "--use-strict"
                || a == "--enable-source-maps" => {}
            _ if a.starts_with('-') && a.len() > 1 => {
                eprintln!("node: bad option: {a}");
                std::process::exit(9);
            }
            _ => {
                mode = Some(Mode::File(a.to_string()));
                i += 1;
                break;
            }
        }
        i += 1;
    }
    let mode = mode.unwrap_or(Mode::Stdin);
    let script_args: Vec<String> = args[i.min(args.len())..].to_vec();

    let (code, filename, print) = match mode {
        Mode::Eval(code, print) => (code, "[eval]".to_string(), print),
        Mode::Stdin => {
            let mut s = String::new();
            if let Err(e) = std::io::stdin().read_to_string(&mut s) {
                eprintln!("node: cannot read the script from stdin: {e}");
                std::process::exit(1);
            }
            (s, "[stdin]".to_string(), false)
        }
        Mode::File(path) => match std::fs::read(&path) {
            Ok(bytes) => (
                String::from_utf8_lossy(&bytes).into_owned(),
                host::absolute(&path),
                false,
            ),
            Err(e) => {
                eprintln!(
                    "Error: Cannot find module '{}' ({})",
                    host::absolute(&path),
                    guest_errno(&e)
                );
                std::process::exit(1);
            }
        },
    };
    // A `#!` line is a comment to node.
    let code = match code.strip_prefix("#!") {
        Some(rest) => format!("//{rest}"),
        None => code,
    };

    // Boa parses by recursive descent and runs out of the guest's stack a few hundred levels
    // in, which no JavaScript can catch: a program nested deeper gets V8's words for it.
    if nesting_depth(&code) > MAX_NESTING {
        eprintln!("{filename}:1\nRangeError: Maximum call stack size exceeded");
        std::process::exit(1);
    }

    let mut ctx = host::context();
    ctx.runtime_limits_mut().set_recursion_limit(10_000);
    ctx.runtime_limits_mut().set_stack_size_limit(1 << 20);

    if check {
        let src = Source::from_bytes(code.as_bytes());
        match boa_engine::Script::parse(src, None, &mut ctx) {
            Ok(_) => std::process::exit(0),
            Err(e) => {
                eprintln!("{filename}\n\n{e}");
                std::process::exit(1);
            }
        }
    }

    let runtime = match host::install(&mut ctx, &filename, dash, &script_args) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("node: start-up failed: {e}");
            std::process::exit(70);
        }
    };
    let kind = if filename.starts_with('[') {
        if print { "print" } else { "eval" }
    } else {
        "file"
    };
    let call = runtime.call(
        &JsValue::undefined(),
        &[
            JsValue::from(js_string!(kind)),
            JsValue::from(js_string!(code.as_str())),
            JsValue::from(js_string!(filename.as_str())),
        ],
        &mut ctx,
    );
    let code = match call {
        Ok(v) => v.to_i32(&mut ctx).unwrap_or(0),
        Err(e) => {
            // JavaScript cannot catch the engine's limits, so they end up here rather than in
            // the prelude's handler. Node's own words for running out of stack.
            let text = e.to_string();
            if text.contains("recursi") || text.contains("stack size") {
                eprintln!("RangeError: Maximum call stack size exceeded");
            } else {
                eprintln!("{}", text.lines().next().unwrap_or("node: internal error"));
            }
            1
        }
    };
    host::finish(code);
}

fn guest_errno(e: &std::io::Error) -> String {
    let s = e.to_string();
    s.split(" (os error").next().unwrap_or(&s).to_string()
}

/// Flushes stdout; a closed pipe is not an error worth reporting.
pub fn flush_stdout() {
    let _ = std::io::stdout().flush();
}

/// Deepest bracket nesting the parser is given; Boa's parser needs about 20 KiB of the 8 MiB
/// stack per level of `[`, `(` or `{`.
const MAX_NESTING: usize = 256;

/// The deepest nesting of brackets in `code` outside strings, template text and comments.
/// Regular-expression literals are not told apart (a bracket inside one counts), which can
/// only overstate the depth of a program already close to the limit.
fn nesting_depth(code: &str) -> usize {
    let b = code.as_bytes();
    let (mut depth, mut deepest, mut i) = (0usize, 0usize, 0usize);
    while i < b.len() {
        match b[i] {
            b'[' | b'(' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b')' | b'}' => depth = depth.saturating_sub(1),
            q @ (b'"' | b'\'' | b'`') => {
                i += 1;
                while i < b.len() && b[i] != q {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                    i += 1;
                }
                i += 1;
            }
            _ => {}
        }
        i += 1;
    }
    deepest
}

#[cfg(test)]
mod nesting_tests {
    use super::nesting_depth;

    #[test]
    fn brackets_in_strings_and_comments_do_not_count() {
        assert_eq!(nesting_depth("f([{a: 1}])"), 3);
        assert_eq!(
            nesting_depth("'(((' + \"[[[\" + `{{{` // (((\n/* [[[ */ x"),
            0
        );
        assert_eq!(nesting_depth("a('\\'(')"), 1);
    }
}
