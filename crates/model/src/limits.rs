use serde::{Deserialize, Serialize};

use crate::{KIB, MIB};

/// Hard resource limits of a sandbox. Every field has a default (see [`Limits::default`]); a
/// partial override is a [`LimitsPatch`] merged over the defaults with [`Limits::merged`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    /// Bytes of stdout kept per run; past it the output is truncated.
    pub stdout_bytes: u64,
    /// Bytes of stderr kept per run; past it the output is truncated.
    pub stderr_bytes: u64,
    /// Largest command text accepted by `run`; a longer one does not run at all.
    pub command_bytes: u64,
    /// Largest JSON-RPC line the server reads. A transport concern, carried here so one
    /// configuration object describes a server.
    pub rpc_bytes: u64,
    /// Nodes (files, directories, symlinks) that may be created beyond the initial layout.
    pub file_count: u64,
    /// Bytes of regular-file content the filesystem may hold.
    pub fs_bytes: u64,
    /// Wall-clock budget of one run, in milliseconds.
    pub timeout_ms: u64,
    /// Linear memory one program instance may grow to.
    pub memory_bytes: u64,
    /// Host tool calls one run may make.
    pub tool_calls: u64,
    /// Bytes of a stream that passed its cap written to its spill file in the sandbox (head +
    /// tail output); the file counts against `fsBytes` and `fileCount`. 0: no spill file.
    /// Absent from state blobs written before it existed: the default.
    #[serde(default = "default_spill_bytes")]
    pub spill_bytes: u64,
    /// Background processes (`Sandbox::spawn`, `process.start`, `nohup cmd &`) alive at once
    /// in one sandbox. Absent from state blobs written before it existed: the default.
    #[serde(default = "default_background_processes")]
    pub background_processes: u64,
}

fn default_spill_bytes() -> u64 {
    Limits::DEFAULT_SPILL_BYTES
}

fn default_background_processes() -> u64 {
    Limits::DEFAULT_BACKGROUND_PROCESSES
}

impl Limits {
    /// Default of [`Limits::stdout_bytes`]: 1 MiB.
    pub const DEFAULT_STDOUT_BYTES: u64 = MIB;
    /// Default of [`Limits::stderr_bytes`]: 1 MiB.
    pub const DEFAULT_STDERR_BYTES: u64 = MIB;
    /// Default of [`Limits::command_bytes`]: 64 KiB.
    pub const DEFAULT_COMMAND_BYTES: u64 = 64 * KIB;
    /// Default of [`Limits::rpc_bytes`]: 8 MiB.
    pub const DEFAULT_RPC_BYTES: u64 = 8 * MIB;
    /// Default of [`Limits::file_count`]: 10 000 nodes.
    pub const DEFAULT_FILE_COUNT: u64 = 10_000;
    /// Default of [`Limits::fs_bytes`]: 256 MiB.
    pub const DEFAULT_FS_BYTES: u64 = 256 * MIB;
    /// Default of [`Limits::timeout_ms`]: 30 s.
    pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
    /// Default of [`Limits::memory_bytes`]: 512 MiB.
    pub const DEFAULT_MEMORY_BYTES: u64 = 512 * MIB;
    /// Default of [`Limits::tool_calls`]: 500 calls.
    pub const DEFAULT_TOOL_CALLS: u64 = 500;
    /// Default of [`Limits::spill_bytes`]: 16 MiB.
    pub const DEFAULT_SPILL_BYTES: u64 = 16 * MIB;
    /// Default of [`Limits::background_processes`]: 8.
    pub const DEFAULT_BACKGROUND_PROCESSES: u64 = 8;

    /// These limits with every field the patch sets replaced.
    #[must_use]
    pub fn merged(mut self, patch: &LimitsPatch) -> Self {
        self.apply(patch);
        self
    }

    /// Replaces every field the patch sets.
    pub fn apply(&mut self, patch: &LimitsPatch) {
        let LimitsPatch {
            stdout_bytes,
            stderr_bytes,
            command_bytes,
            rpc_bytes,
            file_count,
            fs_bytes,
            timeout_ms,
            memory_bytes,
            tool_calls,
            spill_bytes,
            background_processes,
        } = *patch;
        let pairs = [
            (&mut self.stdout_bytes, stdout_bytes),
            (&mut self.stderr_bytes, stderr_bytes),
            (&mut self.command_bytes, command_bytes),
            (&mut self.rpc_bytes, rpc_bytes),
            (&mut self.file_count, file_count),
            (&mut self.fs_bytes, fs_bytes),
            (&mut self.timeout_ms, timeout_ms),
            (&mut self.memory_bytes, memory_bytes),
            (&mut self.tool_calls, tool_calls),
            (&mut self.spill_bytes, spill_bytes),
            (&mut self.background_processes, background_processes),
        ];
        for (field, value) in pairs {
            if let Some(value) = value {
                *field = value;
            }
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            stdout_bytes: Self::DEFAULT_STDOUT_BYTES,
            stderr_bytes: Self::DEFAULT_STDERR_BYTES,
            command_bytes: Self::DEFAULT_COMMAND_BYTES,
            rpc_bytes: Self::DEFAULT_RPC_BYTES,
            file_count: Self::DEFAULT_FILE_COUNT,
            fs_bytes: Self::DEFAULT_FS_BYTES,
            timeout_ms: Self::DEFAULT_TIMEOUT_MS,
            memory_bytes: Self::DEFAULT_MEMORY_BYTES,
            tool_calls: Self::DEFAULT_TOOL_CALLS,
            spill_bytes: Self::DEFAULT_SPILL_BYTES,
            background_processes: Self::DEFAULT_BACKGROUND_PROCESSES,
        }
    }
}

/// A partial [`Limits`]: the wire form of `limits` in requests, where every field is optional
/// and absent fields keep their defaults. Unknown fields are rejected so that a misspelt limit
/// is an error rather than silently ignored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LimitsPatch {
    /// Replaces [`Limits::stdout_bytes`] when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout_bytes: Option<u64>,
    /// Replaces [`Limits::stderr_bytes`] when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr_bytes: Option<u64>,
    /// Replaces [`Limits::command_bytes`] when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_bytes: Option<u64>,
    /// Replaces [`Limits::rpc_bytes`] when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpc_bytes: Option<u64>,
    /// Replaces [`Limits::file_count`] when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_count: Option<u64>,
    /// Replaces [`Limits::fs_bytes`] when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs_bytes: Option<u64>,
    /// Replaces [`Limits::timeout_ms`] when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Replaces [`Limits::memory_bytes`] when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// Replaces [`Limits::tool_calls`] when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<u64>,
    /// Replaces [`Limits::spill_bytes`] when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spill_bytes: Option<u64>,
    /// Replaces [`Limits::background_processes`] when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background_processes: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_architecture_table() {
        let l = Limits::default();
        assert_eq!(l.stdout_bytes, 1_048_576);
        assert_eq!(l.stderr_bytes, 1_048_576);
        assert_eq!(l.command_bytes, 65_536);
        assert_eq!(l.rpc_bytes, 8_388_608);
        assert_eq!(l.file_count, 10_000);
        assert_eq!(l.fs_bytes, 268_435_456);
        assert_eq!(l.timeout_ms, 30_000);
        assert_eq!(l.memory_bytes, 536_870_912);
        assert_eq!(l.tool_calls, 500);
        assert_eq!(l.spill_bytes, 16 << 20);
        assert_eq!(l.background_processes, 8);
    }

    #[test]
    fn partial_override_changes_only_that_field() {
        let patch: LimitsPatch = serde_json::from_str(r#"{"stdoutBytes": 5}"#).unwrap();
        let merged = Limits::default().merged(&patch);
        assert_eq!(
            merged,
            Limits {
                stdout_bytes: 5,
                ..Limits::default()
            }
        );
    }

    #[test]
    fn every_field_can_be_overridden() {
        let patch: LimitsPatch = serde_json::from_str(
            r#"{"stdoutBytes":1,"stderrBytes":2,"commandBytes":3,"rpcBytes":4,"fileCount":5,
                "fsBytes":6,"timeoutMs":7,"memoryBytes":8,"toolCalls":9,"spillBytes":10}"#,
        )
        .unwrap();
        let m = Limits::default().merged(&patch);
        assert_eq!(
            [
                m.stdout_bytes,
                m.stderr_bytes,
                m.command_bytes,
                m.rpc_bytes,
                m.file_count,
                m.fs_bytes,
                m.timeout_ms,
                m.memory_bytes,
                m.tool_calls,
                m.spill_bytes
            ],
            [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
        );
    }

    #[test]
    fn empty_patch_keeps_defaults_and_serializes_empty() {
        let patch: LimitsPatch = serde_json::from_str("{}").unwrap();
        assert_eq!(Limits::default().merged(&patch), Limits::default());
        assert_eq!(serde_json::to_string(&patch).unwrap(), "{}");
    }

    #[test]
    fn misspelt_or_negative_limits_are_rejected() {
        assert!(serde_json::from_str::<LimitsPatch>(r#"{"stdoutbytes": 5}"#).is_err());
        assert!(serde_json::from_str::<LimitsPatch>(r#"{"stdoutBytes": -5}"#).is_err());
        assert!(serde_json::from_str::<LimitsPatch>(r#"{"stdoutBytes": "5"}"#).is_err());
    }

    #[test]
    fn full_limits_round_trip_in_camel_case() {
        let json = serde_json::to_value(Limits::default()).unwrap();
        assert_eq!(json["stdoutBytes"], 1_048_576);
        assert_eq!(json["toolCalls"], 500);
        let back: Limits = serde_json::from_value(json).unwrap();
        assert_eq!(back, Limits::default());
    }
}
