//! The host writes each answer into memory it asks the program for: `host_alloc` must be
//! exported, which a binary does not do for a `#[no_mangle]` function by itself.

fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("wasi") {
        println!("cargo::rustc-link-arg-bins=--export=host_alloc");
    }
}
