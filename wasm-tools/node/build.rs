//! The engine's parser and some builtins recurse on the native stack; wasm-ld's default 1 MiB
//! stack would overflow (a trap) before the engine's own recursion limit gives a RangeError.
fn main() {
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("wasm32") {
        println!("cargo::rustc-link-arg-bins=-zstack-size=8388608");
    }
}
