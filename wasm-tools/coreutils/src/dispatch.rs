//! The multicall start-up both coreutils modules share: pick the tool from argv[0] (or
//! argv[1] when called by the module's own name), load its messages, run it, flush.

use std::ffi::OsString;
use std::io::Write;

pub type UuMain = fn(std::vec::IntoIter<OsString>) -> i32;

fn usage(module: &str, tools: &[&str]) -> i32 {
    eprintln!("usage: {module} TOOL [ARGS...]\ntools: {}", tools.join(" "));
    1
}

/// Runs the tool the arguments name and exits with its status.
pub fn run(module: &str, lookup: fn(&str) -> Option<UuMain>, tools: &[&str]) -> ! {
    guest_rt::enter_pwd();
    let mut args: Vec<OsString> = std::env::args_os().collect();
    if args.is_empty() {
        std::process::exit(usage(module, tools));
    }
    let mut name = guest_rt::tool_name(&args[0]);
    if lookup(&name).is_none() {
        // Called as `coreutils TOOL ...`: uucore derives the program name shown in messages
        // from argv[1] once told so, which keeps `ls: cannot access ...` instead of
        // `coreutils: ...`.
        if args.len() < 2 {
            std::process::exit(usage(module, tools));
        }
        name = guest_rt::tool_name(&args[1]);
        if lookup(&name).is_none() {
            eprintln!("{module}: unknown tool '{name}'");
            std::process::exit(usage(module, tools));
        }
        uucore::set_utility_is_second_arg();
        args.remove(0);
    }
    let uumain = lookup(&name).expect("checked above");

    // Without this uucore has no Fluent bundle and prints message ids (`ls-total`) instead of
    // text; the English strings are compiled in by uucore's build script.
    if let Err(err) = uucore::locale::setup_localization(&name) {
        eprintln!("{name}: could not load messages: {err}");
    }

    let code = uumain(args.into_iter());
    if let Err(err) = std::io::stdout().flush()
        && err.kind() != std::io::ErrorKind::BrokenPipe
    {
        eprintln!("{name}: write error: {err}");
    }
    std::process::exit(code);
}
