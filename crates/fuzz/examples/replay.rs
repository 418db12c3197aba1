//! Replays inputs through a fuzz target's contract without libFuzzer, and says which fail:
//! `cargo run -p wasmsand-fuzz --example replay -- TARGET FILE...`. Each failing input's message
//! is written to `$REPLAY_OUT/NAME.txt` (default `target/replay/TARGET/`), so that a fork-mode
//! run's many artifacts can be sorted into groups after a fix.

use std::panic;
use std::path::{Path, PathBuf};

fn fail(message: impl std::fmt::Display) -> ! {
    eprintln!("{message}");
    std::process::exit(2)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let name = args
        .next()
        .unwrap_or_else(|| fail("usage: replay TARGET FILE..."));
    let target = wasmsand_fuzz::target(&name)
        .unwrap_or_else(|| fail(format!("{name}: no such target (scripts/fuzz.sh list)")));
    let out = std::env::var_os("REPLAY_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new("target/replay").join(&name));
    std::fs::create_dir_all(&out).unwrap_or_else(|e| fail(format!("{}: {e}", out.display())));
    // The messages go to files; the default hook would print every one of them.
    panic::set_hook(Box::new(|_| {}));
    let (mut passed, mut failed) = (0, 0);
    for file in args {
        let data = std::fs::read(&file).unwrap_or_else(|e| fail(format!("{file}: {e}")));
        let Err(e) = panic::catch_unwind(|| target(&data)) else {
            passed += 1;
            continue;
        };
        failed += 1;
        let message = e
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        let base = Path::new(&file)
            .file_name()
            .unwrap_or_default()
            .to_string_lossy();
        let path = out.join(format!("{base}.txt"));
        std::fs::write(&path, message).unwrap_or_else(|e| fail(format!("{}: {e}", path.display())));
        println!("failed: {file}");
    }
    println!(
        "{passed} passed, {failed} failed (messages in {})",
        out.display()
    );
}
