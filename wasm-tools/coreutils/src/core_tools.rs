//! The tools whose code and tables are light. They also form `coreutils-core.wasm`, a second
//! module whose data section is ~0.5 MB instead of the full multicall's ~3.7 MB: a guest run
//! costs mostly the copy of that data into fresh memory, so the tools used most in pipelines
//! start several times faster from here.

use crate::dispatch::UuMain;

pub const TOOLS: &[&str] = &[
    "cat", "head", "tail", "wc", "true", "false", "basename", "dirname", "seq", "yes", "env",
    "printenv", "sleep", "shuf", "numfmt", "mkdir", "rmdir", "rm", "cp", "mv", "ln", "readlink",
    "realpath", "split", "mktemp", "truncate", "pwd",
];

pub fn lookup(name: &str) -> Option<UuMain> {
    let f: UuMain = match name {
        "cat" => |a| uu_cat::uumain(a),
        "cp" => crate::cp_modes::main,
        "mv" => crate::name_checks::mv,
        "rm" => |a| uu_rm::uumain(a),
        "mkdir" => |a| uu_mkdir::uumain(a),
        "rmdir" => |a| uu_rmdir::uumain(a),
        "ln" => crate::name_checks::ln,
        "readlink" => |a| uu_readlink::uumain(a),
        "realpath" => |a| uu_realpath::uumain(a),
        "head" => |a| uu_head::uumain(a),
        "tail" => |a| uu_tail::uumain(a),
        "wc" => |a| uu_wc::uumain(a),
        "seq" => |a| uu_seq::uumain(a),
        "yes" => |a| uu_yes::uumain(a),
        "basename" => |a| uu_basename::uumain(a),
        "dirname" => |a| uu_dirname::uumain(a),
        "env" => |a| uu_env::uumain(a),
        "printenv" => |a| uu_printenv::uumain(a),
        "pwd" => |a| uu_pwd::uumain(a),
        "sleep" => |a| uu_sleep::uumain(a),
        "split" => |a| uu_split::uumain(a),
        "mktemp" => |a| uu_mktemp::uumain(a),
        "truncate" => |a| uu_truncate::uumain(a),
        "shuf" => |a| uu_shuf::uumain(a),
        "numfmt" => |a| uu_numfmt::uumain(a),
        "true" => |a| uu_true::uumain(a),
        "false" => |a| uu_false::uumain(a),
        _ => return None,
    };
    Some(f)
}
