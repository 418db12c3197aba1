use serde::{Deserialize, Serialize};

use crate::{KIB, MIB};

/// What a limit counts, for its readers (docs, flags, error messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Bytes.
    Bytes,
    /// Milliseconds.
    Millis,
    /// A number of things (files, calls, processes).
    Count,
}

/// One limit as the registry states it: every place that names limits (the structs below,
/// the Python `Limits`, the MCP arguments, the README's table) is checked against this list.
#[derive(Debug, Clone, Copy)]
pub struct LimitSpec {
    /// The Rust field and Python attribute name (snake_case).
    pub name: &'static str,
    /// The JSON-RPC wire name (camelCase), as [`Limits`] serializes.
    pub wire: &'static str,
    /// The default.
    pub default: u64,
    /// What the number counts.
    pub unit: Unit,
    /// What it bounds.
    pub doc: &'static str,
    /// What happens past it, and where that is enforced.
    pub on_excess: &'static str,
}

/// Declares every limit once; the structs, their defaults, the patch and [`Limits::SPECS`]
/// are generated from it.
macro_rules! limits {
    ($($(#[$extra:meta])* $field:ident = $wire:literal, $default:expr, $unit:ident, $doc:literal, $excess:literal;)+) => {
        /// Hard resource limits of a sandbox. Every field has a default (see
        /// [`Limits::default`] and [`Limits::SPECS`]); a partial override is a [`LimitsPatch`]
        /// merged over the defaults with [`Limits::merged`]. A field absent from a state blob
        /// written before it existed takes its default.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(rename_all = "camelCase", default)]
        pub struct Limits {
            $(#[doc = $doc] $(#[$extra])* pub $field: u64,)+
        }

        /// A partial [`Limits`]: the wire form of `limits` in requests, where every field is
        /// optional and absent fields keep their defaults. Unknown fields are rejected so that
        /// a misspelt limit is an error rather than silently ignored.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        pub struct LimitsPatch {
            $(
                #[doc = concat!("Replaces [`Limits::", stringify!($field), "`] when set.")]
                #[serde(default, skip_serializing_if = "Option::is_none")]
                pub $field: Option<u64>,
            )+
        }

        impl Default for Limits {
            fn default() -> Self {
                Self { $($field: $default,)+ }
            }
        }

        impl Limits {
            /// Every limit: name, wire name, default, unit, what it bounds and what happens
            /// past it.
            pub const SPECS: &'static [LimitSpec] = &[$(LimitSpec {
                name: stringify!($field),
                wire: $wire,
                default: $default,
                unit: Unit::$unit,
                doc: $doc,
                on_excess: $excess,
            }),+];

            /// Replaces every field the patch sets.
            pub fn apply(&mut self, patch: &LimitsPatch) {
                $(if let Some(v) = patch.$field { self.$field = v; })+
            }

            /// Sets the limit called `name` (snake_case); false when there is none.
            pub fn set(&mut self, name: &str, value: u64) -> bool {
                match name {
                    $(stringify!($field) => { self.$field = value; true })+
                    _ => false,
                }
            }

            /// The value of the limit called `name` (snake_case), if there is one.
            pub fn get(&self, name: &str) -> Option<u64> {
                match name {
                    $(stringify!($field) => Some(self.$field),)+
                    _ => None,
                }
            }
        }
    };
}

limits! {
    stdout_bytes = "stdoutBytes", MIB, Bytes,
        "Bytes of stdout kept per run; past it the output is truncated.",
        "truncated, `truncated.stdout` (the output collector, exec)";
    stderr_bytes = "stderrBytes", MIB, Bytes,
        "Bytes of stderr kept per run; past it the output is truncated.",
        "truncated, `truncated.stderr` (the output collector, exec)";
    command_bytes = "commandBytes", 64 * KIB, Bytes,
        "Largest command text accepted by `run`; a longer one does not run at all.",
        "exit 1, `LIMIT_EXCEEDED`, nothing runs (checked by `Sandbox::run`)";
    rpc_bytes = "rpcBytes", 8 * MIB, Bytes,
        "Largest JSON-RPC line the server reads. A transport concern, carried here so one configuration object describes a server.",
        "JSON-RPC error -32700 (sandboxd's line reader)";
    file_count = "fileCount", 10_000, Count,
        "Nodes (files, directories, symlinks) that may be created beyond the initial layout.",
        "`ENOSPC` (the filesystem, vfs)";
    fs_bytes = "fsBytes", 256 * MIB, Bytes,
        "Bytes of regular-file content the filesystem may hold.",
        "`ENOSPC` (the filesystem, vfs)";
    timeout_ms = "timeoutMs", 30_000, Millis,
        "Wall-clock budget of one run, in milliseconds.",
        "exit 124, `TIMEOUT` (the run's deadline: the shell and every guest program)";
    memory_bytes = "memoryBytes", 512 * MIB, Bytes,
        "Linear memory one program instance may grow to.",
        "the program fails, exit 137 (the memory tunables, exec)";
    tool_calls = "toolCalls", 500, Count,
        "Host tool calls one run may make.",
        "a catchable error in the guest (the host-call bridge, sandbox)";
    spill_bytes = "spillBytes", 16 * MIB, Bytes,
        "Bytes of a stream that passed its cap written to its spill file in the sandbox (head + tail output); the file counts against `fsBytes` and `fileCount`. 0: no spill file.",
        "the spill file is cut there (the output collector, sandbox)";
    background_processes = "backgroundProcesses", 8, Count,
        "Background processes (`Sandbox::spawn`, `process.start`, `nohup cmd &`) alive at once in one sandbox.",
        "refused with a `LimitExceeded` error (the process table, sandbox)";
    open_files = "openFiles", 1024, Count,
        "Descriptors one program may have open at once, its standard streams and root directories included (`ulimit -n`).",
        "`EMFILE` in the program, which goes on running (the WASI layer, exec)";
    session_open_files = "sessionOpenFiles", 4096, Count,
        "Descriptors the programs running at once in one sandbox (pipeline stages, jobs, background processes) may have opened together, beyond the standard streams each starts with.",
        "`EMFILE` in the program that opens past it, which goes on running (the WASI layer, exec)";
    pids = "pids", 256, Count,
        "Processes alive at once in one sandbox: pipeline stages, subshells and jobs on threads of their own, coprocesses, and background processes (`process.start`, `nohup cmd &`). The shell of a run and the program it runs in the foreground do not count.",
        "the run stops as bash's does when `fork` fails (`fork: Resource temporarily unavailable`), exit 126, `LIMIT_EXCEEDED`; a background process is refused (the shell's job slots and the process table, sandbox)";
}

impl Limits {
    /// These limits with every field the patch sets replaced.
    #[must_use]
    pub fn merged(mut self, patch: &LimitsPatch) -> Self {
        self.apply(patch);
        self
    }
}

/// README.md's table of defaults, rendered from the registry.
#[cfg(test)]
fn markdown_table() -> String {
    fn amount(v: u64, unit: Unit) -> String {
        match unit {
            Unit::Bytes if v >= MIB && v.is_multiple_of(MIB) => format!("{} MiB", v / MIB),
            Unit::Bytes if v >= KIB && v.is_multiple_of(KIB) => format!("{} KiB", v / KIB),
            Unit::Bytes => format!("{v} bytes"),
            Unit::Millis if v.is_multiple_of(1000) => format!("{} s", v / 1000),
            Unit::Millis => format!("{v} ms"),
            Unit::Count => v.to_string(),
        }
    }
    let mut out = String::from(
        "| limit | JSON-RPC name | default | bounds | past it |\n|---|---|---|---|---|\n",
    );
    for l in Limits::SPECS {
        out.push_str(&format!(
            "| `{}` | `{}` | {} | {} | {} |\n",
            l.name,
            l.wire,
            amount(l.default, l.unit),
            l.doc,
            l.on_excess
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readme_defaults_table_is_the_registry() {
        let page = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
        crate::doc_block::check(&page, "limits", &markdown_table());
    }

    #[test]
    fn specs_agree_with_the_structs() {
        let defaults = serde_json::to_value(Limits::default()).unwrap();
        let fields = defaults.as_object().unwrap();
        assert_eq!(fields.len(), Limits::SPECS.len());
        for l in Limits::SPECS {
            assert_eq!(fields[l.wire], l.default, "{}", l.name);
            assert_eq!(Limits::default().get(l.name), Some(l.default));
            let patch: LimitsPatch =
                serde_json::from_value(serde_json::json!({ l.wire: 7 })).unwrap();
            assert_eq!(
                Limits::default().merged(&patch).get(l.name),
                Some(7),
                "{}",
                l.name
            );
        }
    }

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
        assert_eq!(l.open_files, 1024);
        assert_eq!(l.session_open_files, 4096);
        assert_eq!(l.pids, 256);
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
