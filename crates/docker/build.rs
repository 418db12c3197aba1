//! Compiles `shim/statx_compat.c` into the shared object every image preloads (see the file
//! for why), so that building images needs no compiler: sandboxd carries it.

use std::path::PathBuf;

fn main() {
    let src = "shim/statx_compat.c";
    println!("cargo:rerun-if-changed={src}");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("statx_compat.so");
    let compiler = cc::Build::new().opt_level(2).get_compiler();
    let status = compiler
        .to_command()
        .args(["-shared", "-fPIC", "-Wall", "-Werror", "-o"])
        .arg(&out)
        .arg(src)
        .arg("-ldl")
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler for {src}: {e}"));
    assert!(status.success(), "compiling {src} failed ({status})");
}
