use serde::{Deserialize, Serialize};

use crate::CappedBuffer;

/// Why a run ended abnormally, in the wire spelling (`"TIMEOUT"`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorClass {
    /// The run's wall-clock deadline passed.
    Timeout,
    /// The caller cancelled the run.
    Cancelled,
    /// The program asked for something the sandbox does not grant.
    CapabilityDenied,
    /// A resource limit (command size, tool calls, ...) stopped the run.
    LimitExceeded,
}

impl ErrorClass {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::Timeout => "TIMEOUT",
            ErrorClass::Cancelled => "CANCELLED",
            ErrorClass::CapabilityDenied => "CAPABILITY_DENIED",
            ErrorClass::LimitExceeded => "LIMIT_EXCEEDED",
        }
    }
}

impl std::fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which output streams lost bytes to their cap.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Truncated {
    /// stdout passed `stdoutBytes`.
    pub stdout: bool,
    /// stderr passed `stderrBytes`.
    pub stderr: bool,
}

impl Truncated {
    /// `Some` only when at least one stream was truncated: the wire form omits the field
    /// otherwise.
    pub fn if_any(stdout: bool, stderr: bool) -> Option<Self> {
        (stdout || stderr).then_some(Self { stdout, stderr })
    }
}

/// What a stream that passes its cap shows in the result.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Truncation {
    /// Its first and last part with one marker line counting the bytes left out between
    /// them; the whole stream goes to a spill file in the sandbox (up to `spillBytes`).
    #[default]
    HeadTail,
    /// Its first `cap` bytes, the rest dropped (no spill file).
    Plain,
}

/// Where the whole of a stream that passed its cap was written (a file in the sandbox), per
/// stream; absent for a stream that fit or was not spilled.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spilled {
    /// Absolute path, in the sandbox, of the file holding the whole stdout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout: Option<String>,
    /// Absolute path, in the sandbox, of the file holding the whole stderr.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
}

/// What one run used: its resource receipt, in every [`RunResult`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Usage {
    /// Wall-clock time of the run.
    pub wall_ms: u64,
    /// CPU time of the run's guest programs, in microseconds: the thread CPU clock across
    /// each program's execution (builtins run in the host and are not counted).
    pub cpu_us: u64,
    /// The largest linear memory of any program of the run, at its exit (a wasm memory never
    /// shrinks, so this is its peak); 0 when only builtins ran.
    pub peak_memory_bytes: u64,
    /// Processes the run started: programs, subshells, pipeline stages, background jobs.
    pub processes: u64,
    /// Calls the run's programs made to host tools (`hostCalls` on the wire before
    /// 2026-11-26; that name is still read).
    #[serde(alias = "hostCalls")]
    pub tool_calls: u64,
    /// Bytes written into files of the sandbox.
    pub bytes_written: u64,
    /// Files, directories and symlinks created.
    pub files_created: u64,
    /// Files, directories and symlinks removed.
    pub files_deleted: u64,
    /// Bytes of file content the sandbox holds after the run.
    pub fs_bytes: u64,
    /// Files the sandbox holds after the run beyond its initial layout (what `fileCount`
    /// limits).
    pub fs_files: u64,
    /// Network requests the run's programs sent through the sandbox's network door (and, in
    /// the Docker tier, connections through the egress proxy).
    pub net_requests: u64,
    /// Bytes the run received over the network (response bodies; tunnel bytes in the Docker
    /// tier).
    pub net_bytes: u64,
    /// The limits the run ran into, by their [`crate::Limits`] field name: `timeoutMs`,
    /// `memoryBytes`, `stdoutBytes`, `stderrBytes`, `fsBytes`, `fileCount`, `toolCalls`,
    /// `commandBytes`, `shell` for the shell's own bounds (recursion, expansion size,
    /// processes), and `netRequests` / `netBytes` for the network caps.
    pub limits_hit: Vec<String>,
}

/// The outcome of one `run`. Serializes to the wire form clients expect: `truncated` and
/// `errorClass` are absent unless set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunResult {
    /// The shell's exit status, as `$?` after the command: 0 success, 2 syntax error, 124
    /// timeout, 128+N a signal.
    pub exit_code: i32,
    /// What the run wrote to stdout, within `stdoutBytes` (invalid UTF-8 replaced by U+FFFD).
    pub stdout: String,
    /// What the run wrote to stderr, within `stderrBytes` (invalid UTF-8 replaced by U+FFFD).
    pub stderr: String,
    /// Wall-clock time of the run (the same figure as `usage.wallMs`).
    pub execution_time_ms: u64,
    /// Which streams passed their cap; absent when none did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<Truncated>,
    /// Why the run ended abnormally (deadline, cancel, denied capability, limit); absent when
    /// it ended normally, whatever its status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_class: Option<ErrorClass>,
    /// The run's resource receipt.
    #[serde(default)]
    pub usage: Usage,
    /// An atomic run that failed: the sandbox was put back as it was before the run. Absent
    /// unless set.
    #[serde(default, skip_serializing_if = "is_false")]
    pub rolled_back: bool,
    /// The files holding streams that passed their cap (head + tail output). Absent unless
    /// a stream was spilled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spilled: Option<Spilled>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl RunResult {
    /// Builds a result from the two capped streams of a run, setting `truncated` when either
    /// lost bytes. Invalid UTF-8 becomes U+FFFD (the wire format is text).
    pub fn from_streams(
        exit_code: i32,
        stdout: &CappedBuffer,
        stderr: &CappedBuffer,
        execution_time_ms: u64,
        error_class: Option<ErrorClass>,
    ) -> Self {
        Self {
            exit_code,
            stdout: stdout.to_text().text,
            stderr: stderr.to_text().text,
            execution_time_ms,
            truncated: Truncated::if_any(stdout.truncated(), stderr.truncated()),
            error_class,
            usage: Usage {
                wall_ms: execution_time_ms,
                ..Usage::default()
            },
            rolled_back: false,
            spilled: None,
        }
    }

    /// The result of a command that was refused before anything ran (exit 1, the message on
    /// stderr).
    pub fn refused(message: impl Into<String>, error_class: ErrorClass) -> Self {
        let mut stderr = message.into();
        if !stderr.ends_with('\n') {
            stderr.push('\n');
        }
        Self {
            exit_code: 1,
            stdout: String::new(),
            stderr,
            execution_time_ms: 0,
            truncated: None,
            error_class: Some(error_class),
            usage: Usage::default(),
            rolled_back: false,
            spilled: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn plain() -> RunResult {
        RunResult {
            exit_code: 0,
            stdout: "hello\n".into(),
            stderr: String::new(),
            execution_time_ms: 3,
            truncated: None,
            error_class: None,
            usage: Usage::default(),
            rolled_back: false,
            spilled: None,
        }
    }

    #[test]
    fn optional_fields_are_absent_when_unset() {
        let v = serde_json::to_value(plain()).unwrap();
        assert_eq!(
            v,
            json!({"exitCode": 0, "stdout": "hello\n", "stderr": "", "executionTimeMs": 3,
                "usage": {"wallMs": 0, "cpuUs": 0, "peakMemoryBytes": 0, "processes": 0,
                    "toolCalls": 0, "bytesWritten": 0, "filesCreated": 0, "filesDeleted": 0,
                    "fsBytes": 0, "fsFiles": 0, "netRequests": 0, "netBytes": 0, "limitsHit": []}})
        );
        let obj = v.as_object().unwrap();
        assert!(!obj.contains_key("truncated"));
        assert!(!obj.contains_key("errorClass"));
        assert!(!obj.contains_key("rolledBack"));
    }

    #[test]
    fn truncated_and_error_class_pass_through() {
        let r = RunResult {
            truncated: Some(Truncated {
                stdout: true,
                stderr: false,
            }),
            error_class: Some(ErrorClass::Timeout),
            exit_code: 124,
            ..plain()
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["truncated"], json!({"stdout": true, "stderr": false}));
        assert_eq!(v["errorClass"], "TIMEOUT");
        assert_eq!(v["exitCode"], 124);
        let back: RunResult = serde_json::from_value(v).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn error_classes_use_wire_spelling() {
        for (class, text) in [
            (ErrorClass::Timeout, "TIMEOUT"),
            (ErrorClass::Cancelled, "CANCELLED"),
            (ErrorClass::CapabilityDenied, "CAPABILITY_DENIED"),
            (ErrorClass::LimitExceeded, "LIMIT_EXCEEDED"),
        ] {
            assert_eq!(serde_json::to_value(class).unwrap(), json!(text));
            assert_eq!(class.to_string(), text);
            assert_eq!(
                serde_json::from_value::<ErrorClass>(json!(text)).unwrap(),
                class
            );
        }
        assert!(serde_json::from_value::<ErrorClass>(json!("timeout")).is_err());
    }

    #[test]
    fn result_without_optional_fields_deserializes() {
        let r: RunResult =
            serde_json::from_str(r#"{"exitCode":1,"stdout":"","stderr":"x","executionTimeMs":0}"#)
                .unwrap();
        assert_eq!(r.truncated, None);
        assert_eq!(r.error_class, None);
        assert_eq!(r.usage, Usage::default());
        assert!(!r.rolled_back);
    }

    #[test]
    fn from_streams_sets_truncated_only_when_a_stream_overflowed() {
        let mut out = CappedBuffer::new(5);
        out.write(b"hello world\n");
        let mut err = CappedBuffer::new(5);
        err.write(b"ok");
        let r = RunResult::from_streams(0, &out, &err, 1, None);
        assert_eq!(r.stdout, "hello");
        assert!(r.stdout.len() <= 5);
        assert_eq!(
            r.truncated,
            Some(Truncated {
                stdout: true,
                stderr: false
            })
        );

        let mut out = CappedBuffer::new(100);
        out.write(b"fits");
        let r = RunResult::from_streams(0, &out, &CappedBuffer::new(100), 1, None);
        assert_eq!(r.truncated, None);
    }

    #[test]
    fn refused_command_shape() {
        let r = RunResult::refused(
            "command too long (70000 bytes, max 65536)",
            ErrorClass::LimitExceeded,
        );
        assert_eq!(r.exit_code, 1);
        assert!(r.stderr.starts_with("command too long"));
        assert!(r.stderr.ends_with('\n'));
        assert_eq!(r.error_class, Some(ErrorClass::LimitExceeded));
    }
}
