//! jq is jq 1.6 itself: Debian's jq is the reference the project measures against, and its C
//! (with the Oniguruma it bundles) is compiled for the guest by build.rs. `yq` is this binary
//! under another name and works as kislyuk's yq does: YAML documents are turned into JSON, jq
//! runs over them, and with `-y` its results are written back as YAML.

use wasm_jq_c as ffi;

mod yaml;
mod yq;

/// The sandbox's pre-initialization: jq's builtins made once, in an instance whose memory every
/// later run starts from (`crates/sandbox/src/preinit.rs` registers it, with guest-rt's
/// `host_alloc` making room for the input, which is unused). Returns 0 when done.
#[unsafe(no_mangle)]
pub extern "C" fn wasmsand_jq_preinit(_input: *const u8, _len: usize) -> i32 {
    if ffi::prepare_builtins() { 0 } else { 1 }
}

/// `main`, for runs that start from the pre-initialized memory: `_start` would run the C
/// library's start-up a second time over it.
#[unsafe(no_mangle)]
pub extern "C" fn wasmsand_jq_main() {
    run()
}

fn main() {
    run()
}

fn run() {
    guest_rt::enter_pwd();
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let mut is_yq = args.first().is_some_and(|a| guest_rt::tool_name(a) == "yq");
    if !is_yq && args.get(1).is_some_and(|a| a == "yq") {
        is_yq = true;
        args.remove(1);
    }
    let args: Vec<std::ffi::OsString> = args.into_iter().skip(1).collect();
    let code = if is_yq { yq::run(args) } else { ffi::jq(&args) };
    std::process::exit(code);
}
