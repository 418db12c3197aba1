//! awk: the project's own interpreter (the `wasm-awk` crate, which follows gawk), with the
//! commands a program starts (`system()`, `"cmd" | getline`, `print | "cmd"`) run by the shell
//! that started awk, through the spawn door. WASI has no pipes between processes, so a command's
//! input and output pass through files in `$TMPDIR` (or `/tmp`), removed afterwards.

use std::io;

use wasm_awk::Host;

use crate::util::temp_file;

pub fn main(args: Vec<String>) -> i32 {
    wasm_awk::main(args.into_iter().skip(1).collect(), &mut SpawnHost)
}

/// Runs awk's commands through the spawn door.
struct SpawnHost;

/// Runs `argv` through the spawn door; its status, or why it could not run.
fn spawn(argv: &[String]) -> io::Result<i32> {
    guest_rt::spawn::run(argv, None).map_err(|f| io::Error::other(f.message))
}

impl Host for SpawnHost {
    fn run_captured(&mut self, command: &str, input: Option<&[u8]>) -> io::Result<(Vec<u8>, i32)> {
        let out = temp_file("awk-pipe", b"")?;
        let inp = match input {
            Some(bytes) => Some(temp_file("awk-pipe", bytes)?),
            None => None,
        };
        // The command and the paths travel as positional parameters, so nothing in them is
        // parsed twice.
        let script = match inp {
            Some(_) => r#"{ eval "$1"; } <"$3" >"$2""#,
            None => r#"{ eval "$1"; } >"$2""#,
        };
        let mut argv = vec![
            "sh".to_string(),
            "-c".into(),
            script.into(),
            "sh".into(),
            command.into(),
            out.0.to_string_lossy().into_owned(),
        ];
        if let Some(inp) = &inp {
            argv.push(inp.0.to_string_lossy().into_owned());
        }
        let status = spawn(&argv)?;
        let bytes = std::fs::read(&out.0)?;
        Ok((bytes, status))
    }

    fn run_inherit(&mut self, command: &str) -> io::Result<i32> {
        spawn(&["sh".into(), "-c".into(), command.into()])
    }
}
