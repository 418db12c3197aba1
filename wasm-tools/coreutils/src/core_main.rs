//! `coreutils-core.wasm`: the light tools alone (see `core_tools`).

#![forbid(unsafe_code)]

mod core_tools;
mod cp_modes;
mod dispatch;
mod name_checks;

fn main() {
    dispatch::run("coreutils-core", core_tools::lookup, core_tools::TOOLS);
}
