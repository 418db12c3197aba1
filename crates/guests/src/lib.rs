//! The guest programs of wasmsand, built from `wasm-tools/` for `wasm32-wasip1` by this crate's
//! build script and embedded here. `wasm-tools/commands.txt` maps each command name to the module
//! file that provides it (several commands may share one module).

#![forbid(unsafe_code)]

include!(concat!(env!("OUT_DIR"), "/commands.rs"));

/// The wasm bytes of a module file (`coreutils.wasm`, ...).
pub fn file(name: &str) -> Option<&'static [u8]> {
    FILES.iter().find(|(f, _)| *f == name).map(|(_, b)| *b)
}

/// The SHA-256 of a module file's bytes, computed when the crate was built.
pub fn sha256(name: &str) -> Option<[u8; 32]> {
    DIGESTS.iter().find(|(f, _)| *f == name).map(|(_, d)| *d)
}

/// The module file that provides a command (`sort` → `coreutils.wasm`).
pub fn file_for_command(command: &str) -> Option<&'static str> {
    COMMANDS
        .iter()
        .find(|(c, _)| *c == command)
        .map(|(_, f)| *f)
}

/// The wasm bytes that run a command.
pub fn wasm_for_command(command: &str) -> Option<&'static [u8]> {
    file_for_command(command).and_then(file)
}

/// Every command name, in the order of `wasm-tools/commands.txt`.
pub fn command_names() -> impl Iterator<Item = &'static str> {
    COMMANDS.iter().map(|(c, _)| *c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_has_wasm_bytes() {
        assert!(COMMANDS.len() > 50);
        for name in command_names() {
            let wasm = wasm_for_command(name).unwrap();
            assert_eq!(&wasm[..4], b"\0asm", "{name}");
        }
        assert!(wasm_for_command("no-such-command").is_none());
    }

    #[test]
    fn the_digests_are_those_of_the_bytes() {
        use sha2::{Digest, Sha256};
        for (name, bytes) in FILES {
            let digest: [u8; 32] = Sha256::digest(bytes).into();
            assert_eq!(sha256(name), Some(digest), "{name}");
        }
    }
}
