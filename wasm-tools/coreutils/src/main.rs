//! Multicall entry point for the uutils coreutils: `ls ...` when invoked as `ls`, or
//! `coreutils ls ...`. It has every tool; the light ones are also in `coreutils-core.wasm`,
//! which starts faster (see `core_tools`).

#![forbid(unsafe_code)]

mod chmod;
mod core_tools;
mod cp_modes;
mod dd;
mod dispatch;
mod du;
mod ls;
mod name_checks;
mod sort;
mod stat;
mod tac;
mod time_fmt;

use dispatch::UuMain;

/// The tools only this module has; with `core_tools::TOOLS`, every tool it provides.
/// `commands.txt` and the README are checked against both lists.
pub const TOOLS: &[&str] = &[
    "ls",
    "touch",
    "stat",
    "chmod",
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
    "date",
    "du",
    "cksum",
    "dd",
];

fn lookup(name: &str) -> Option<UuMain> {
    let f: UuMain = match name {
        "ls" => ls::uumain,
        "touch" => |a| uu_touch::uumain(a),
        "stat" => stat::uumain,
        "chmod" => chmod::uumain,
        "sort" => sort::uumain,
        "uniq" => |a| uu_uniq::uumain(a),
        "cut" => |a| uu_cut::uumain(a),
        "tr" => |a| uu_tr::uumain(a),
        "paste" => |a| uu_paste::uumain(a),
        "comm" => |a| uu_comm::uumain(a),
        "join" => |a| uu_join::uumain(a),
        "tee" => |a| uu_tee::uumain(a),
        "tac" => tac::uumain,
        "nl" => |a| uu_nl::uumain(a),
        "fold" => |a| uu_fold::uumain(a),
        "expand" => |a| uu_expand::uumain(a),
        "od" => od_main,
        "base64" => |a| uu_base64::uumain(a),
        "md5sum" => |a| uu_md5sum::uumain(a),
        "sha1sum" => |a| uu_sha1sum::uumain(a),
        "sha256sum" => |a| uu_sha256sum::uumain(a),
        "date" => |a| uu_date::uumain(a),
        "du" => du::uumain,
        "cksum" => |a| uu_cksum::uumain(a),
        "dd" => dd::uumain,
        _ => return core_tools::lookup(name),
    };
    Some(f)
}

fn main() {
    let all: Vec<&str> = core_tools::TOOLS.iter().chain(TOOLS).copied().collect();
    dispatch::run("coreutils", lookup, &all);
}

/// od: uutils' od, with GNU's traditional `-B` (octal two-byte units, the same as `-o`), which
/// uutils does not know.
fn od_main(args: std::vec::IntoIter<std::ffi::OsString>) -> i32 {
    let args: Vec<std::ffi::OsString> = args
        .map(|a| if a == "-B" { "-o".into() } else { a })
        .collect();
    uu_od::uumain(args.into_iter())
}
