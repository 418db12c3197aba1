//! Start-up shared by every guest program.

/// WASI has no working directory: wasi-libc starts every program at `/`. The host passes the
/// run's directory in `PWD`, as a shell does, and entering it here makes relative paths mean
/// what they mean under bash.
pub fn enter_pwd() {
    if let Some(dir) = std::env::var_os("PWD") {
        // A PWD that does not exist leaves the program at `/`, as wasi-libc would have.
        let _ = std::env::set_current_dir(dir);
    }
}
