//! The guest programs of wasmsand, built from `wasm-tools/` for `wasm32-wasip1` by this
//! crate's build script and embedded here.

include!(concat!(env!("OUT_DIR"), "/tools.rs"));

/// The wasm bytes of a module file (`coreutils.wasm`, ...).
pub fn file(name: &str) -> Option<&'static [u8]> {
    FILES.iter().find(|(f, _)| *f == name).map(|(_, b)| *b)
}

/// The module file that provides a tool (`sort` → `coreutils.wasm`).
pub fn file_for_tool(tool: &str) -> Option<&'static str> {
    TOOLS.iter().find(|(t, _)| *t == tool).map(|(_, f)| *f)
}

/// The wasm bytes that run a tool.
pub fn wasm_for_tool(tool: &str) -> Option<&'static [u8]> {
    file_for_tool(tool).and_then(file)
}

/// Every tool name, in the order of `wasm-tools/tools.txt`.
pub fn tool_names() -> impl Iterator<Item = &'static str> {
    TOOLS.iter().map(|(t, _)| *t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_wasm_bytes() {
        assert!(TOOLS.len() > 50);
        for name in tool_names() {
            let wasm = wasm_for_tool(name).unwrap();
            assert_eq!(&wasm[..4], b"\0asm", "{name}");
        }
        assert!(wasm_for_tool("no-such-tool").is_none());
    }
}
