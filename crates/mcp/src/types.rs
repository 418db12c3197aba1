//! Arguments and results of the tools. Their JSON Schemas (schemars) are what `tools/list`
//! advertises: doc comments become the descriptions a model reads.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How `content` is encoded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Encoding {
    /// Plain text.
    #[default]
    Utf8,
    /// Binary data as standard base64.
    Base64,
}

/// A file to put in the sandbox before anything runs.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileArg {
    /// Path of the file; relative paths are under /home/user. Parent directories are created.
    pub path: String,
    /// The file's content, encoded as `encoding` says.
    pub content: String,
    /// `utf8` (default) or `base64`.
    #[serde(default)]
    pub encoding: Encoding,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunArgs {
    /// The bash command line to run, e.g. `ls -la | head` or `python3 script.py`.
    pub command: String,
    /// A session from session_create or session_fork: files, variables and the working
    /// directory persist between calls. Without it the command runs in a fresh sandbox that is
    /// discarded afterwards.
    #[serde(default)]
    pub session_id: Option<String>,
    /// Files written before the command runs.
    #[serde(default)]
    pub files: Vec<FileArg>,
    /// Wall-clock limit of this run in milliseconds (clamped to the server's maximum).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Environment variables exported before the command runs (they persist in a session).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Directory to run in (a `cd` that persists in a session); must exist.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Text given to the command as standard input.
    #[serde(default)]
    pub stdin: Option<String>,
    /// Where the command runs: `wasm` (this server's sandbox, the default) or another runtime
    /// the server offers (`docker`), for a run without session_id.
    #[serde(default)]
    pub runtime: Option<String>,
    /// The image of a run without session_id, e.g. `python:3.11-slim` (the runtime that has
    /// it runs the command); default: this server's wasm sandbox.
    #[serde(default)]
    pub base_image: Option<String>,
}

/// A command as an argument vector or as one shell line.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum CommandArg {
    /// Program and arguments, run as they are (nothing is expanded).
    Argv(Vec<String>),
    /// A bash command line.
    Line(String),
}

/// A file of seed 003's `sandbox.run`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PrdFileArg {
    /// Path of the file; relative paths are under /home/user.
    pub path: String,
    /// Its content, base64.
    pub content_b64: String,
}

/// Seed 003's `sandbox.run` arguments: exactly one of `session_id` and `base_image`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PrdRunArgs {
    /// The runtime of a run without session_id (`wasm`, `docker`, ...).
    #[serde(default)]
    pub runtime: Option<String>,
    /// A session (from session_create or the service's POST /sessions): the run uses its
    /// files and state, and its image.
    #[serde(default)]
    pub session_id: Option<String>,
    /// The image of a run without session_id (required then), e.g. `wasmsand/default` or
    /// `python:3.11-slim`.
    #[serde(default)]
    pub base_image: Option<String>,
    /// The command: an argument vector (`["python3", "-c", "print(1)"]`) or a shell line.
    pub command: CommandArg,
    /// Files written before the command runs.
    #[serde(default)]
    pub files: Vec<PrdFileArg>,
    /// Wall-clock limit in seconds (clamped to the server's maximum).
    #[serde(default)]
    pub timeout_sec: Option<u64>,
    /// Variables exported before the command runs.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

/// Seed 003's `sandbox.run` answer: the run's output and what the server's record says of it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PrdRunOutput {
    #[serde(flatten)]
    pub output: RunOutput,
    /// Its log stream (WebSocket), when the server keeps one (the service's `/mcp`).
    pub log_stream_url: Option<String>,
    /// The `policy_hash` it ran under, when the server has one.
    pub policy_hash: Option<String>,
    /// The digest of the image it ran on, when the server has one.
    pub image_digest: Option<String>,
}

/// Which output streams were cut at their cap.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct TruncatedOut {
    pub stdout: bool,
    pub stderr: bool,
}

/// Why a run ended abnormally.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorClassOut {
    /// The wall-clock limit passed (exit code 124).
    Timeout,
    /// The client cancelled the run (exit code 130).
    Cancelled,
    /// The program asked for something the sandbox does not grant.
    CapabilityDenied,
    /// A resource limit stopped the run (or the command was too long to run at all).
    LimitExceeded,
}

impl From<wasmsand::ErrorClass> for ErrorClassOut {
    fn from(c: wasmsand::ErrorClass) -> Self {
        match c {
            wasmsand::ErrorClass::Timeout => ErrorClassOut::Timeout,
            wasmsand::ErrorClass::Cancelled => ErrorClassOut::Cancelled,
            wasmsand::ErrorClass::CapabilityDenied => ErrorClassOut::CapabilityDenied,
            wasmsand::ErrorClass::LimitExceeded => ErrorClassOut::LimitExceeded,
        }
    }
}

impl ErrorClassOut {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClassOut::Timeout => "TIMEOUT",
            ErrorClassOut::Cancelled => "CANCELLED",
            ErrorClassOut::CapabilityDenied => "CAPABILITY_DENIED",
            ErrorClassOut::LimitExceeded => "LIMIT_EXCEEDED",
        }
    }
}

/// The outcome of a command.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RunOutput {
    /// The command's exit status (0 is success; 124 timeout; 130 cancelled).
    pub exit_code: i32,
    pub stdout: String,
    pub stderr: String,
    pub truncated: TruncatedOut,
    /// Set when the run ended abnormally.
    pub error_class: Option<ErrorClassOut>,
    pub timed_out: bool,
    /// Wall-clock time of the run in milliseconds.
    pub duration_ms: u64,
    /// The session the command ran in; null for a one-off sandbox.
    pub session_id: Option<String>,
    /// The runtime that ran it (`wasm`, `docker`).
    pub runtime: String,
    /// The image it ran on.
    pub base_image: String,
    /// The serving host's record of the run, when it keeps one (the HTTP service's
    /// `/v1/runs/{run_id}`).
    pub run_id: Option<String>,
}

/// Limits of a new session; absent fields take the server's values, and no field can exceed
/// them.
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LimitsArg {
    /// Default wall-clock limit of each run, in milliseconds.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Memory one program may use, in bytes.
    #[serde(default)]
    pub memory_bytes: Option<u64>,
    /// Bytes of file content the session's filesystem may hold.
    #[serde(default)]
    pub fs_bytes: Option<u64>,
    /// Files and directories the session may create.
    #[serde(default)]
    pub file_count: Option<u64>,
    /// Bytes of stdout kept per run.
    #[serde(default)]
    pub stdout_bytes: Option<u64>,
    /// Bytes of stderr kept per run.
    #[serde(default)]
    pub stderr_bytes: Option<u64>,
}

/// The limits a session runs under.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
pub struct LimitsOut {
    pub timeout_ms: u64,
    pub memory_bytes: u64,
    pub fs_bytes: u64,
    pub file_count: u64,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    pub command_bytes: u64,
}

impl From<&wasmsand::Limits> for LimitsOut {
    fn from(l: &wasmsand::Limits) -> Self {
        LimitsOut {
            timeout_ms: l.timeout_ms,
            memory_bytes: l.memory_bytes,
            fs_bytes: l.fs_bytes,
            file_count: l.file_count,
            stdout_bytes: l.stdout_bytes,
            stderr_bytes: l.stderr_bytes,
            command_bytes: l.command_bytes,
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionCreateArgs {
    /// Lower limits for this session (optional).
    #[serde(default)]
    pub limits: Option<LimitsArg>,
    /// Files to start with.
    #[serde(default)]
    pub files: Vec<FileArg>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SessionCreated {
    /// Pass this to the other tools.
    pub session_id: String,
    pub limits: LimitsOut,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionArgs {
    /// A session id from session_create or session_fork.
    pub session_id: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SessionForked {
    /// The new, independent session.
    pub session_id: String,
    /// The session it was copied from.
    pub parent_session_id: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SessionInfo {
    pub session_id: String,
    /// The session this one was forked from, if any.
    pub parent_session_id: Option<String>,
    /// Milliseconds since the session was created.
    pub age_ms: u64,
    /// Milliseconds since the session was last used.
    pub idle_ms: u64,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SessionList {
    pub sessions: Vec<SessionInfo>,
    /// How many live sessions this client may hold.
    pub max_sessions: u64,
    /// A session unused for this long is destroyed.
    pub idle_ttl_ms: u64,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SessionDestroyed {
    pub session_id: String,
    pub destroyed: bool,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FilesReadArgs {
    pub session_id: String,
    /// Path of the file; relative paths are from the session's working directory.
    pub path: String,
    /// Force an encoding; by default UTF-8 text comes back as `utf8` and anything else as
    /// `base64`.
    #[serde(default)]
    pub encoding: Option<Encoding>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct FileContent {
    pub path: String,
    pub content: String,
    pub encoding: Encoding,
    /// Size of the file in bytes.
    pub size: u64,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FilesWriteArgs {
    pub session_id: String,
    /// Path of the file; relative paths are from the session's working directory. Parent
    /// directories are created.
    pub path: String,
    pub content: String,
    /// `utf8` (default) or `base64`.
    #[serde(default)]
    pub encoding: Encoding,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct FileWritten {
    pub path: String,
    pub bytes_written: u64,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FilesListArgs {
    pub session_id: String,
    /// Directory to list; relative paths are from the session's working directory. Default:
    /// the working directory.
    #[serde(default)]
    pub path: Option<String>,
}

/// What kind of node an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    File,
    Dir,
    Symlink,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DirEntry {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: EntryKind,
    /// Size in bytes (0 for directories).
    pub size: u64,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DirListing {
    pub path: String,
    pub entries: Vec<DirEntry>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SnapshotCreated {
    pub session_id: String,
    /// Pass this to snapshot_restore.
    pub snapshot_id: String,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SnapshotRestoreArgs {
    pub session_id: String,
    /// An id from snapshot_create on this session (or on the session it was forked from,
    /// before the fork).
    pub snapshot_id: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SnapshotRestored {
    pub session_id: String,
    pub snapshot_id: String,
    pub restored: bool,
}

#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}
