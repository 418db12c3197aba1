//! The shared vocabulary of wasmsand: resource [`Limits`], the [`RunResult`] of a command, its
//! [`ErrorClass`], and [`CappedBuffer`], the bounded sink that holds a stream's output.
//!
//! Serde names follow the wire format of the JSON-RPC protocol (`exitCode`, `errorClass`, ...),
//! so these types serialize to exactly what clients of the server expect.

#![forbid(unsafe_code)]

mod capped;
#[cfg(test)]
#[path = "../../../tests/support/doc_block.rs"]
mod doc_block;
pub mod egress;
mod limits;
mod result;

pub use capped::{CappedBuffer, HEAD_TAIL_MIN_CAP, LossyText, MARKER_ROOM};
pub use limits::{LimitSpec, Limits, LimitsPatch, Unit};
pub use result::{ErrorClass, RunResult, Spilled, Truncated, Truncation, Usage};

/// One kibibyte.
pub const KIB: u64 = 1024;
/// One mebibyte.
pub const MIB: u64 = 1024 * KIB;
