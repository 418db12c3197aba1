//! `sandboxd --mode v86 --disk-image PATH` (or `--mode vm`): seed 002's second mode. The line
//! protocol, exactly as the simple mode answers it (wasmsand-dispatch shapes the answers for
//! both), against a whole Linux machine (wasmsand-vm) instead of the WebAssembly sandbox.
//! JSON-RPC is not served in this mode.
//!
//! Requests are answered one at a time, in order, as the simple mode's root sandbox answers
//! them. End of input stops the machine and exits 0; a `sandboxd` killed takes its QEMU with
//! it (wasmsand-vm starts QEMU with a parent-death signal).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use wasmsand_dispatch::{
    LineStatus, LineTarget, ShellAnswer, answer_line_request, answer_too_large,
    answer_unparsed_line,
};
use wasmsand_vm::{AccelChoice, Machine, MachineConfig, RunEnd, RunRequest, Stream, VmError};

use crate::lines::{self, Event};
use crate::output::Output;

const MIB: u64 = 1024 * 1024;
/// The largest file `read_file` answers (its base64 is one line of the answer).
const READ_MAX: u64 = 64 * MIB;

/// What the v86 mode needs from the command line.
pub struct VmArgs {
    pub image: PathBuf,
    pub memory_mb: Option<u64>,
    pub accel: AccelChoice,
    pub state_dir: Option<PathBuf>,
    pub stdout_cap: usize,
    pub stderr_cap: usize,
    pub line_cap: usize,
}

struct Target {
    machine: Machine,
    started: Instant,
    stdout_cap: usize,
    stderr_cap: usize,
}

fn vm_error(e: VmError) -> String {
    e.to_string()
}

impl LineTarget for Target {
    fn shell(&self, command: &str, time_limit_ms: u64) -> Result<ShellAnswer, String> {
        let mut req = RunRequest::new(command, Duration::from_millis(time_limit_ms));
        req.stdout_cap = self.stdout_cap;
        req.stderr_cap = self.stderr_cap;
        let mut out = Vec::new();
        let mut err = Vec::new();
        let outcome = self
            .machine
            .run(&req, &mut |s, b| match s {
                Stream::Stdout => out.extend_from_slice(b),
                Stream::Stderr => err.extend_from_slice(b),
            })
            .map_err(vm_error)?;
        let mut answer = ShellAnswer {
            stdout: String::from_utf8_lossy(&out).into_owned(),
            stderr: String::from_utf8_lossy(&err).into_owned(),
            exit_code: outcome.exit_code.map(i64::from),
            timed_out: false,
            error: None,
        };
        match outcome.end {
            RunEnd::Exited | RunEnd::Cancelled => {}
            RunEnd::TimedOut => answer.timed_out = true,
            RunEnd::Reset { why } => {
                // A guest that went silent past the limit timed out as far as the client is
                // concerned; one that powered off did not.
                answer.timed_out = outcome.duration >= req.timeout;
                answer.error = Some(format!(
                    "{why}; the machine was reset to its pristine state"
                ));
            }
        }
        Ok(answer)
    }

    fn write_file(&self, path: &str, data: &[u8], mode: u32) -> Result<(), String> {
        self.machine.write_file(path, data, mode).map_err(vm_error)
    }

    fn read_file(&self, path: &str) -> Result<Vec<u8>, String> {
        self.machine.read_file(path, READ_MAX).map_err(vm_error)
    }

    fn reset(&self) -> Result<(), String> {
        self.machine.reset().map_err(vm_error)
    }

    fn status(&self) -> LineStatus {
        let st = self.machine.status();
        let mut extra = Map::new();
        extra.insert("accel".into(), st.accel.name().into());
        LineStatus {
            uptime_ms: self.started.elapsed().as_millis() as u64,
            memory_used_bytes: st.memory_used_bytes,
            memory_limit_bytes: st.memory_limit_bytes,
            ready: st.ready,
            extra,
        }
    }
}

/// Starts the machine (a clear message and exit 2 when it cannot) and serves the line
/// protocol on stdio until the end of input.
pub fn serve(args: VmArgs) -> u8 {
    let started = Instant::now();
    let mut cfg = MachineConfig::new(&args.image);
    if let Some(mb) = args.memory_mb {
        cfg.memory_mb = mb;
    }
    cfg.accel = args.accel;
    if let Some(dir) = args.state_dir {
        cfg.state_dir = dir;
    }
    let machine = match Machine::start(cfg) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("sandboxd: --mode v86: {e}");
            return 2;
        }
    };
    let r = machine.report();
    eprintln!(
        "sandboxd: vm: {} ({}); {}, ready in {:.1} s",
        r.accel.name(),
        r.accel_note,
        match r.cold_boot {
            Some(d) => format!(
                "booted and saved in {:.1} s, restored in {} ms",
                d.as_secs_f64(),
                r.restore.as_millis()
            ),
            None => format!("restored in {} ms", r.restore.as_millis()),
        },
        started.elapsed().as_secs_f64()
    );
    let target = Target {
        machine: machine.clone(),
        started,
        stdout_cap: args.stdout_cap,
        stderr_cap: args.stderr_cap,
    };
    let out = Arc::new(Output::stdout());
    let read = lines::read_lines(
        std::io::stdin().lock(),
        || args.line_cap,
        |event| {
            let answer = match event {
                Event::TooLarge => answer_too_large(),
                Event::Line(line) if line.iter().all(u8::is_ascii_whitespace) => return true,
                Event::Line(line) => answer_line(&target, line),
            };
            out.send(&answer);
            true
        },
    );
    if let Err(e) = read {
        eprintln!("sandboxd: reading stdin: {e}");
    }
    out.close();
    machine.shutdown();
    0
}

fn answer_line(target: &Target, line: &[u8]) -> Value {
    match serde_json::from_slice::<Value>(line) {
        Err(e) => answer_unparsed_line(line, &e.to_string()),
        Ok(Value::Object(obj)) if obj.contains_key("type") && !obj.contains_key("method") => {
            answer_line_request(target, &obj)
        }
        Ok(v) => {
            let id = v.get("id").cloned().unwrap_or(Value::Null);
            json!({
                "jsonrpc": "2.0",
                "id": id,
                "error": {
                    "code": -32601,
                    "message": "--mode v86 serves the line protocol only (objects with a \
                                `type`: shell, write_file, read_file, reset, status)",
                },
            })
        }
    }
}
