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
    /// the server offers (`docker`; `vm`, a whole Linux machine under QEMU), for a run
    /// without session_id.
    #[serde(default)]
    pub runtime: Option<String>,
    /// The image of a run without session_id, e.g. `python:3.11-slim` (the runtime that has
    /// it runs the command); default: this server's wasm sandbox.
    #[serde(default)]
    pub base_image: Option<String>,
    /// Run in a preview of the session (needs session_id): a fork of it, which the answer's
    /// `preview` names with what the run changed. The session itself is untouched until
    /// sandbox_commit brings the preview in; sandbox_discard drops it.
    #[serde(default)]
    pub preview: bool,
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
    /// The runtime of a run without session_id (`wasm`, `docker`, `vm`, ...).
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
    /// The runtime that ran it (`wasm`, `docker`, `vm`).
    pub runtime: String,
    /// The image it ran on.
    pub base_image: String,
    /// The serving host's record of the run, when it keeps one (the HTTP service's
    /// `/v1/runs/{run_id}`).
    pub run_id: Option<String>,
    /// With `preview`: the preview the command ran in and what it changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preview: Option<PreviewOut>,
}

/// A run's preview: a fork of the session, kept until it is committed or discarded.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PreviewOut {
    /// The preview (a session forked from `parent_session_id`): sandbox_commit and
    /// sandbox_discard take it; sandbox_run, files_* and sandbox_diff can look into it first.
    pub preview_id: String,
    /// The session it previews a change of.
    pub parent_session_id: String,
    /// What the run changed against the session.
    pub changes: ChangesOut,
}

/// One changed path.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct FileChangeOut {
    /// Relative to `root`.
    pub path: String,
    /// `added`, `modified` or `deleted`.
    pub status: String,
    /// `file`, `symlink`, `dir` or `device`: what it is now (was, when deleted).
    pub kind: String,
    /// Permission bits before, in octal (null when added).
    pub old_mode: Option<String>,
    /// Permission bits after, in octal (null when deleted).
    pub new_mode: Option<String>,
    /// Not text: the patch carries it as a git binary patch.
    pub binary: bool,
}

/// What differs, path by path, and as a patch.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ChangesOut {
    /// The sandbox directory the paths are relative to (the mounted folder, or the home
    /// directory).
    pub root: String,
    /// Every changed path (directories included), parents first.
    pub files: Vec<FileChangeOut>,
    /// The changes in `git diff --binary` format: `git apply` in a copy of the folder
    /// reproduces them. Empty when nothing changed.
    pub patch: String,
}

impl From<&wasmsand::Changes> for ChangesOut {
    fn from(c: &wasmsand::Changes) -> ChangesOut {
        let mode = |m: Option<u32>| m.map(|m| format!("{m:o}"));
        ChangesOut {
            root: c.root.clone(),
            files: c
                .files
                .iter()
                .map(|f| FileChangeOut {
                    path: f.path.clone(),
                    status: f.status.as_str().into(),
                    kind: f.kind.into(),
                    old_mode: mode(f.old_mode),
                    new_mode: mode(f.new_mode),
                    binary: f.binary,
                })
                .collect(),
            patch: c.patch.clone(),
        }
    }
}

/// What sandbox_diff compares with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SinceArg {
    /// The host folder mounted in the session, as it was mounted.
    Mount,
    /// The session it was forked from (a preview's session), as it was at the fork.
    Parent,
    /// A snapshot of the session (give snapshot_id).
    Snapshot,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiffArgs {
    /// A session (or a preview_id).
    pub session_id: String,
    /// What to compare with: `mount`, `parent` or `snapshot`. Default: `snapshot` when
    /// snapshot_id is given, else `parent` for a preview or fork, else `mount`.
    #[serde(default)]
    pub since: Option<SinceArg>,
    /// With since `snapshot`: an id from snapshot_create on this session.
    #[serde(default)]
    pub snapshot_id: Option<String>,
    /// Only this directory (relative: under /home/user); paths are relative to it. Default:
    /// the mounted folder when one is, else /home/user.
    #[serde(default)]
    pub path: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DiffOutput {
    pub session_id: String,
    /// `mount`, `parent` or `snapshot`.
    pub since: String,
    #[serde(flatten)]
    pub changes: ChangesOut,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CommitArgs {
    /// A preview_id from sandbox_run (preview) or sandbox_best_of, or a session from
    /// session_fork: what it changed is brought into the session it came from.
    pub preview_id: String,
    /// The preview's exported variables replace the session's too.
    #[serde(default)]
    pub env: bool,
    /// The session moves to the preview's working directory too.
    #[serde(default)]
    pub cwd: bool,
}

/// A path the commit set to the preview's state.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CommittedPath {
    pub path: String,
    /// `added`, `changed` or `deleted` in the session.
    pub change: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Committed {
    /// The session the preview was brought into.
    pub session_id: String,
    /// The preview, discarded now.
    pub preview_id: String,
    /// Each path set to the preview's state (a tree added or deleted whole is one entry).
    pub applied: Vec<CommittedPath>,
    /// Variables set, changed or unset (with `env`).
    pub env: Vec<String>,
    /// The session's new working directory (with `cwd`).
    pub cwd: Option<String>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiscardArgs {
    /// Previews (preview_id of sandbox_run or sandbox_best_of) to drop with their changes.
    pub preview_ids: Vec<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Discarded {
    pub discarded: Vec<String>,
}

/// One attempt of sandbox_best_of.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AttemptArg {
    /// The bash command line of this attempt.
    pub command: String,
    /// Variables exported in this attempt's preview before it runs.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BestOfArgs {
    /// The session every attempt starts from (it is not changed).
    pub session_id: String,
    /// The attempts: different commands, or one command with different env.
    pub attempts: Vec<AttemptArg>,
    /// Attempts running at once (default and most: the server's cap).
    #[serde(default)]
    pub concurrency: Option<usize>,
    /// Wall-clock limit of each attempt in milliseconds (clamped to the server's maximum).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// How one attempt went.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct AttemptOut {
    /// Its preview: commit it (sandbox_commit) or discard it (sandbox_discard).
    pub preview_id: String,
    pub command: String,
    pub exit_code: i32,
    pub stdout: String,
    pub stderr: String,
    pub truncated: TruncatedOut,
    /// Set when the attempt ended abnormally.
    pub error_class: Option<ErrorClassOut>,
    pub timed_out: bool,
    pub duration_ms: u64,
    /// The serving host's record of the run, when it keeps one.
    pub run_id: Option<String>,
    /// What it changed against the session.
    pub changes: ChangesOut,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct BestOfOutput {
    /// The session the attempts started from (unchanged).
    pub session_id: String,
    /// In the order of the request.
    pub attempts: Vec<AttemptOut>,
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
