//! Small developer tools in one multicall binary (dispatch on argv[0]'s basename, or on
//! argv[1] when invoked as `devtools TOOL ...`): expr, bc, column, strings, tree, file, patch.

#![forbid(unsafe_code)]

mod bc;
mod bcnum;
mod column;
mod expr;
mod file;
mod file_elf;
mod json;
mod patch;
#[path = "../../textutils/src/posix_re.rs"]
#[allow(dead_code)]
mod posix_re;
mod strings;
mod tree;

use std::io::Write;

const TOOLS: &[&str] = &["expr", "bc", "column", "strings", "tree", "file", "patch"];

fn main() {
    guest_rt::enter_pwd();
    let mut args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut name = args
        .first()
        .map(|a| guest_rt::tool_name(a.as_ref()))
        .unwrap_or_default();
    if !TOOLS.contains(&name.as_str()) {
        match args.get(1).map(|a| guest_rt::tool_name(a.as_ref())) {
            Some(n) if TOOLS.contains(&n.as_str()) => {
                name = n;
                args.remove(0);
            }
            _ => {
                eprintln!("usage: devtools TOOL [ARGS...]\ntools: {}", TOOLS.join(" "));
                std::process::exit(2);
            }
        }
    }
    let rest = &args[1..];
    let code = match name.as_str() {
        "expr" => expr::main(rest),
        "bc" => bc::main(rest),
        "column" => column::main(rest),
        "strings" => strings::main(rest),
        "tree" => tree::main(rest),
        "patch" => patch::main(rest),
        _ => file::main(rest),
    };
    let _ = std::io::stdout().flush();
    std::process::exit(code);
}

/// The text of an I/O error without Rust's ` (os error N)` suffix, as C tools print it.
pub fn errno_text(e: &std::io::Error) -> String {
    let s = e.to_string();
    s.split(" (os error").next().unwrap_or(&s).to_string()
}

/// Writes to stdout; a closed pipe ends the program quietly, as SIGPIPE would.
pub fn out(data: &[u8]) {
    let mut o = std::io::stdout().lock();
    if let Err(e) = o.write_all(data) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("write error: {}", errno_text(&e));
        std::process::exit(1);
    }
}

/// `-tx` → `-t -x`, and `-s,` stays whole: short flags in one word are split up to the first
/// letter of `with_value` (which takes the rest of the word, or the next one, as its value).
pub fn split_clusters(args: &[String], with_value: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--" {
            out.push(a.clone());
            out.extend(it.cloned());
            break;
        }
        if !a.starts_with('-') || a.starts_with("--") || a.len() <= 2 {
            out.push(a.clone());
            continue;
        }
        let body = &a[1..];
        if body.bytes().all(|b| b.is_ascii_digit()) {
            out.push(a.clone());
            continue;
        }
        for (k, c) in body.char_indices() {
            if with_value.contains(c) {
                out.push(format!("-{}", &body[k..]));
                break;
            }
            out.push(format!("-{c}"));
        }
    }
    out
}
