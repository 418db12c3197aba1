//! The `sandboxd` binary; the server itself is the library's [`sandboxd::run`].

#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(sandboxd::run(std::env::args_os()))
}
