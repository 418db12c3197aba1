//! QEMU's machine protocol (QMP) on its Unix socket: what the host asks of QEMU itself (stop,
//! save, load, continue, quit), as opposed to what it asks of the guest (the agent).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub(crate) struct Qmp {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Qmp {
    /// Connects (QEMU creates the socket as it starts: retried until `deadline`) and leaves
    /// capability negotiation. `alive` says whether QEMU still runs, so that a QEMU that died
    /// at once is not waited for.
    pub(crate) fn connect(
        path: &Path,
        deadline: Instant,
        alive: &mut dyn FnMut() -> bool,
    ) -> Result<Qmp, String> {
        let stream = loop {
            match UnixStream::connect(path) {
                Ok(s) => break s,
                Err(e) => {
                    if !alive() {
                        return Err("QEMU exited".into());
                    }
                    if Instant::now() >= deadline {
                        return Err(format!("no QMP socket: {e}"));
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        };
        let left = deadline.saturating_duration_since(Instant::now());
        stream
            .set_read_timeout(Some(left.max(Duration::from_millis(100))))
            .map_err(|e| e.to_string())?;
        let writer = stream.try_clone().map_err(|e| e.to_string())?;
        let mut qmp = Qmp {
            reader: BufReader::new(stream),
            writer,
        };
        let greeting = qmp.read()?;
        if greeting.get("QMP").is_none() {
            return Err(format!("not a QMP greeting: {greeting}"));
        }
        qmp.execute("qmp_capabilities", Value::Null)?;
        Ok(qmp)
    }

    fn read(&mut self) -> Result<Value, String> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) => Err("QEMU closed its QMP socket".into()),
            Ok(_) => serde_json::from_str(&line).map_err(|e| format!("bad QMP message: {e}")),
            Err(e) => Err(format!("QMP: {e}")),
        }
    }

    /// Runs one command; its `return` value, or QEMU's error text.
    pub(crate) fn execute(&mut self, command: &str, arguments: Value) -> Result<Value, String> {
        let mut msg = json!({ "execute": command });
        if !arguments.is_null() {
            msg["arguments"] = arguments;
        }
        let mut bytes = msg.to_string().into_bytes();
        bytes.push(b'\n');
        self.writer
            .write_all(&bytes)
            .map_err(|e| format!("QMP {command}: {e}"))?;
        loop {
            let v = self.read()?;
            if v.get("event").is_some() {
                continue;
            }
            if let Some(r) = v.get("return") {
                return Ok(r.clone());
            }
            if let Some(e) = v.get("error") {
                let desc = e.get("desc").and_then(Value::as_str).unwrap_or("error");
                return Err(format!("QMP {command}: {desc}"));
            }
        }
    }

    /// Waits for the migration (a save or a load) to end; an error if it failed or `deadline`
    /// passed.
    pub(crate) fn wait_migration(&mut self, deadline: Instant) -> Result<(), String> {
        loop {
            let r = self.execute("query-migrate", Value::Null)?;
            match r.get("status").and_then(Value::as_str) {
                Some("completed") => return Ok(()),
                Some("failed") | Some("cancelled") => {
                    let why = r
                        .get("error-desc")
                        .and_then(Value::as_str)
                        .unwrap_or("no reason given");
                    return Err(format!("migration failed: {why}"));
                }
                _ => {}
            }
            if Instant::now() >= deadline {
                return Err("migration did not end in time".into());
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}
