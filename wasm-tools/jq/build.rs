//! jq recurses in C over nested values (printing, setpath, getpath) as deep as 10 000 levels in
//! its own tests; Debian's jq has Linux's 8 MiB stack for that, not the 1 MiB a wasm32 program
//! gets by default. A link argument for a binary has to come from the binary's own package.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_ARCH").is_ok_and(|a| a == "wasm32") {
        println!("cargo:rustc-link-arg-bins=-zstack-size=8388608");
    }
}
