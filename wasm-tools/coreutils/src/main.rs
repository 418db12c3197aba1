//! Multicall entry point for the uutils coreutils: `ls ...` when invoked as `ls`, or
//! `coreutils ls ...`. One module for all tools keeps the host's compile cache to one entry.

mod chmod;
mod du;
mod stat;

use std::ffi::OsString;
use std::io::Write;

type UuMain = fn(std::vec::IntoIter<OsString>) -> i32;

/// Every tool this binary provides; `tools.txt` and the README are checked against it.
pub const TOOLS: &[&str] = &[
    "cat",
    "ls",
    "cp",
    "mv",
    "rm",
    "mkdir",
    "rmdir",
    "touch",
    "ln",
    "readlink",
    "realpath",
    "stat",
    "chmod",
    "head",
    "tail",
    "wc",
    "sort",
    "uniq",
    "cut",
    "tr",
    "paste",
    "comm",
    "join",
    "tee",
    "tac",
    "nl",
    "fold",
    "expand",
    "od",
    "base64",
    "md5sum",
    "sha1sum",
    "sha256sum",
    "seq",
    "yes",
    "basename",
    "dirname",
    "date",
    "env",
    "printenv",
    "sleep",
    "du",
    "split",
    "mktemp",
    "truncate",
    "shuf",
    "numfmt",
    "cksum",
    "true",
    "false",
];

fn lookup(name: &str) -> Option<UuMain> {
    let f: UuMain = match name {
        "cat" => |a| uu_cat::uumain(a),
        "ls" => |a| uu_ls::uumain(a),
        "cp" => |a| uu_cp::uumain(a),
        "mv" => |a| uu_mv::uumain(a),
        "rm" => |a| uu_rm::uumain(a),
        "mkdir" => |a| uu_mkdir::uumain(a),
        "rmdir" => |a| uu_rmdir::uumain(a),
        "touch" => |a| uu_touch::uumain(a),
        "ln" => |a| uu_ln::uumain(a),
        "readlink" => |a| uu_readlink::uumain(a),
        "realpath" => |a| uu_realpath::uumain(a),
        "stat" => stat::uumain,
        "chmod" => chmod::uumain,
        "head" => |a| uu_head::uumain(a),
        "tail" => |a| uu_tail::uumain(a),
        "wc" => |a| uu_wc::uumain(a),
        "sort" => |a| uu_sort::uumain(a),
        "uniq" => |a| uu_uniq::uumain(a),
        "cut" => |a| uu_cut::uumain(a),
        "tr" => |a| uu_tr::uumain(a),
        "paste" => |a| uu_paste::uumain(a),
        "comm" => |a| uu_comm::uumain(a),
        "join" => |a| uu_join::uumain(a),
        "tee" => |a| uu_tee::uumain(a),
        "tac" => |a| uu_tac::uumain(a),
        "nl" => |a| uu_nl::uumain(a),
        "fold" => |a| uu_fold::uumain(a),
        "expand" => |a| uu_expand::uumain(a),
        "od" => |a| uu_od::uumain(a),
        "base64" => |a| uu_base64::uumain(a),
        "md5sum" => |a| uu_md5sum::uumain(a),
        "sha1sum" => |a| uu_sha1sum::uumain(a),
        "sha256sum" => |a| uu_sha256sum::uumain(a),
        "seq" => |a| uu_seq::uumain(a),
        "yes" => |a| uu_yes::uumain(a),
        "basename" => |a| uu_basename::uumain(a),
        "dirname" => |a| uu_dirname::uumain(a),
        "date" => |a| uu_date::uumain(a),
        "env" => |a| uu_env::uumain(a),
        "printenv" => |a| uu_printenv::uumain(a),
        "sleep" => |a| uu_sleep::uumain(a),
        "du" => du::uumain,
        "split" => |a| uu_split::uumain(a),
        "mktemp" => |a| uu_mktemp::uumain(a),
        "truncate" => |a| uu_truncate::uumain(a),
        "shuf" => |a| uu_shuf::uumain(a),
        "numfmt" => |a| uu_numfmt::uumain(a),
        "cksum" => |a| uu_cksum::uumain(a),
        "true" => |a| uu_true::uumain(a),
        "false" => |a| uu_false::uumain(a),
        _ => return None,
    };
    Some(f)
}

fn usage() -> i32 {
    eprintln!(
        "usage: coreutils TOOL [ARGS...]\ntools: {}",
        TOOLS.join(" ")
    );
    1
}

fn main() {
    guest_rt::enter_pwd();
    let mut args: Vec<OsString> = std::env::args_os().collect();
    if args.is_empty() {
        std::process::exit(usage());
    }
    let mut name = guest_rt::tool_name(&args[0]);
    if lookup(&name).is_none() {
        // Called as `coreutils TOOL ...`: uucore derives the program name shown in messages
        // from argv[1] once told so, which keeps `ls: cannot access ...` instead of
        // `coreutils: ...`.
        if args.len() < 2 {
            std::process::exit(usage());
        }
        name = guest_rt::tool_name(&args[1]);
        if lookup(&name).is_none() {
            eprintln!("coreutils: unknown tool '{name}'");
            std::process::exit(usage());
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
