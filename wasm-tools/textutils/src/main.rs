//! Multicall binary for the text tools that are not part of coreutils: grep, sed, awk, find,
//! xargs, diff, cmp, rev, xxd, hexdump. Dispatches on argv[0]'s basename, or on argv[1] when
//! invoked as `textutils TOOL ...`.

#![forbid(unsafe_code)]

mod awk;
mod diff;
mod find;
mod gnudiff;
mod grep;
mod hexdump;
mod matcher;
mod posix_re;
mod sed_anchors;
mod sed_inputs;
mod small;
mod util;
mod uucode;

use std::ffi::OsString;

/// The commands this binary answers to, by `argv[0]` or its first argument.
pub const TOOLS: &[&str] = &[
    "grep", "egrep", "fgrep", "sed", "awk", "find", "xargs", "diff", "cmp", "rev", "xxd",
    "hexdump", "uuencode", "uudecode",
];

fn main() {
    guest_rt::enter_pwd();
    let mut os_args: Vec<OsString> = std::env::args_os().collect();
    let mut name = os_args
        .first()
        .map(|a| guest_rt::tool_name(a))
        .unwrap_or_default();
    if !TOOLS.contains(&name.as_str()) {
        match os_args.get(1).map(|a| guest_rt::tool_name(a)) {
            Some(n) if TOOLS.contains(&n.as_str()) => {
                name = n;
                os_args.remove(0);
            }
            _ => {
                eprintln!(
                    "usage: textutils TOOL [ARGS...]\ntools: {}",
                    TOOLS.join(" ")
                );
                std::process::exit(2);
            }
        }
    }
    os_args[0] = OsString::from(&name);
    let args: Vec<String> = os_args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let code = match name.as_str() {
        "grep" => grep::main(args),
        "egrep" => grep::main(with_flag(args, "-E")),
        "fgrep" => grep::main(with_flag(args, "-F")),
        "sed" => {
            // uutils sed prints its messages through uucore, which names the program after
            // argv[0]; everything else it needs is plain text, so no locale setup is needed.
            let (args, _joined) = sed_inputs::prepare(sed_anchors::rewrite(os_args));
            sed::sed::uumain(args.into_iter())
        }
        "awk" => awk::main(args),
        "find" => find::main(args),
        "xargs" => {
            eprintln!(
                "xargs: cannot run commands in this sandbox build (WASI has no processes); \
                 the shell provides xargs"
            );
            126
        }
        "diff" if gnudiff::wants_library(&os_args) => diff::diff_main(os_args),
        "diff" => gnudiff::main(args),
        "cmp" => diff::cmp_main(os_args),
        "rev" => small::rev(args),
        "xxd" => small::xxd(args),
        "hexdump" => hexdump::main(args),
        "uuencode" => uucode::uuencode(args),
        "uudecode" => uucode::uudecode(args),
        _ => unreachable!("checked against TOOLS"),
    };
    std::process::exit(code);
}

fn with_flag(mut args: Vec<String>, flag: &str) -> Vec<String> {
    args[0] = "grep".into();
    args.insert(1, flag.into());
    args
}
