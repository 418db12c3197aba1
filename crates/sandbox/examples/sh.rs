//! Runs each argument as a command line in one sandbox and prints what came back.
//!
//! `cargo run -p wasmsand --example sh -- 'echo hello | wc -c' 'ls /usr/bin | head -3'`

use wasmsand::{Sandbox, SandboxOptions};

fn main() {
    let sb = Sandbox::new(SandboxOptions::default());
    for cmd in std::env::args().skip(1) {
        match sb.run(&cmd) {
            Ok(r) => {
                print!("{}", r.stdout);
                eprint!("{}", r.stderr);
                eprintln!(
                    "[exit {} in {} ms{}{}]",
                    r.exit_code,
                    r.execution_time_ms,
                    r.error_class.map(|c| format!(", {c}")).unwrap_or_default(),
                    r.truncated.map(|_| ", truncated").unwrap_or_default()
                );
            }
            Err(e) => eprintln!("error: {e}"),
        }
    }
}
