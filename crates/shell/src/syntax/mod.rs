//! The syntax layer: the parser, the tree it builds, arithmetic expressions and syntax errors.
//! It imports nothing from the rest of the crate (`scripts/check-modules.py --leaf` checks),
//! so the interpreter above it can change without touching how scripts are read.

pub mod arith;
pub mod ast;
pub mod error;
pub mod parser;

/// The declaration commands: their assignment-like arguments (`declare a=(1 2)`,
/// `local x=$y`) parse as assignments, not words. The builtin table marks the same commands
/// (`builtins::tests::declaration_builtins_are_the_syntax_list` checks).
pub const DECLARATION_COMMANDS: &[&str] = &["declare", "export", "local", "readonly", "typeset"];
