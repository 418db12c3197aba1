//! The bash-subset shell of wasmsand.
//!
//! For now this crate holds the parser: [`parse`] turns a script into an [`ast::Script`] without
//! any I/O or global state, never panics, and bounds its own recursion, so it can be fed
//! untrusted input (and fuzzed). The interpreter will live next to it.

pub mod arith;
pub mod ast;
mod error;
pub mod parser;

pub use error::ParseError;
pub use parser::{MAX_DEPTH, parse, parse_arith};
