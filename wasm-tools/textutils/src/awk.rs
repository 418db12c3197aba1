//! awk: the project's own interpreter (the `wasm-awk` crate, which follows gawk), with the
//! commands a program starts (`system()`, `"cmd" | getline`, `print | "cmd"`) run by the shell
//! that started awk, through the spawn door. WASI has no pipes between processes, so a command's
//! input and output pass through files in `$TMPDIR` (or `/tmp`), removed afterwards.

use std::io;
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use wasm_awk::Host;

pub fn main(args: Vec<String>) -> i32 {
    wasm_awk::main(
        args.into_iter().skip(1).collect(),
        &mut SpawnHost { made: 0 },
    )
}

struct SpawnHost {
    /// Temporary files made so far, for their names.
    made: u32,
}

/// Removes its file when dropped, so an early return leaves nothing behind.
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

impl SpawnHost {
    fn temp_file(&mut self, contents: &[u8]) -> io::Result<TempFile> {
        let dir = std::env::var("TMPDIR")
            .ok()
            .filter(|d| !d.is_empty())
            .unwrap_or_else(|| "/tmp".into());
        let stamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        loop {
            self.made += 1;
            let path = PathBuf::from(format!(
                "{}/awk-pipe-{stamp:x}-{}",
                dir.trim_end_matches('/'),
                self.made
            ));
            let file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path);
            match file {
                Ok(mut f) => {
                    io::Write::write_all(&mut f, contents)?;
                    return Ok(TempFile(path));
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

/// Runs `argv` through the spawn door; its status, or why it could not run.
fn spawn(argv: &[String]) -> io::Result<i32> {
    guest_rt::spawn::run(argv, None).map_err(|f| io::Error::other(f.message))
}

impl Host for SpawnHost {
    fn run_captured(&mut self, command: &str, input: Option<&[u8]>) -> io::Result<(Vec<u8>, i32)> {
        let out = self.temp_file(b"")?;
        let inp = match input {
            Some(bytes) => Some(self.temp_file(bytes)?),
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
