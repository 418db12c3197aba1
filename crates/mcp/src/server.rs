//! The MCP handler: the tool table and what each tool does.

use std::borrow::Cow;
use std::sync::Arc;

use base64::Engine as _;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use wasmsand::{FileKind, Limits, Sandbox, SandboxOptions, SnapshotId};

use crate::run::{self, Prepare, Progress, RunSpec};
use crate::store::Store;
use crate::types::*;
use crate::{McpConfig, Principal, RunTicket};

/// The state every connection of one server shares.
pub(crate) struct Shared {
    pub config: McpConfig,
    pub store: Arc<Store>,
    tools: Vec<Tool>,
    instructions: String,
}

impl Shared {
    pub fn new(config: McpConfig, store: Arc<Store>) -> Shared {
        let tools = tool_table(&config);
        let instructions = instructions(&config);
        Shared {
            config,
            store,
            tools,
            instructions,
        }
    }
}

/// Who a request comes from: sessions belong to the client that created them.
#[derive(Clone)]
pub(crate) enum ClientKind {
    /// One client for the life of the connection (stdio).
    Fixed(Arc<str>),
    /// Over HTTP, per request: the [`Principal`] an embedding server attached after its own
    /// authentication, else the one anonymous HTTP client. Not the transport's MCP session:
    /// that expires on its own schedule (and the 2026-07-28 revision has none), while the
    /// sandbox sessions it made live on.
    Http,
}

/// The MCP server handler: one per connection (stdio) or per HTTP session or request.
#[derive(Clone)]
pub struct McpHandler {
    shared: Arc<Shared>,
    client: ClientKind,
}

impl McpHandler {
    pub(crate) fn new(shared: Arc<Shared>, client: ClientKind) -> McpHandler {
        McpHandler { shared, client }
    }

    fn owner(&self, ctx: &RequestContext<RoleServer>) -> String {
        match &self.client {
            ClientKind::Fixed(id) => id.to_string(),
            ClientKind::Http => {
                let parts = ctx.extensions.get::<axum::http::request::Parts>();
                if let Some(p) = parts.and_then(|p| p.extensions.get::<Principal>()) {
                    return format!("principal:{}", p.0);
                }
                "http".to_string()
            }
        }
    }

    /// The authenticated user of an HTTP request, for the embedding server's gate.
    fn principal(&self, ctx: &RequestContext<RoleServer>) -> Option<String> {
        let parts = ctx.extensions.get::<axum::http::request::Parts>()?;
        parts.extensions.get::<Principal>().map(|p| p.0.clone())
    }

    /// Asks the embedding server's gate, if any, to admit one run.
    async fn admit(
        &self,
        principal: Option<&str>,
        command: &str,
    ) -> Result<Option<Box<dyn RunTicket>>, String> {
        match &self.shared.config.gate {
            Some(g) => g.begin(principal, command).await.map(Some),
            None => Ok(None),
        }
    }

    /// Asks the embedding server's gate, if any, to admit one more session.
    fn admit_session(&self, principal: Option<&str>, live: usize) -> Result<(), String> {
        match &self.shared.config.gate {
            Some(g) => g.admit_session(principal, live),
            None => Ok(()),
        }
    }

    fn new_sandbox(&self, limits: Limits) -> Sandbox {
        Sandbox::new(SandboxOptions {
            limits,
            env: self.shared.config.env.clone(),
            cache_dir: self.shared.config.cache_dir.clone(),
            ..SandboxOptions::default()
        })
    }

    /// The ceiling no session's limits may pass.
    fn ceiling(&self) -> Limits {
        Limits {
            timeout_ms: self.shared.config.max_timeout_ms,
            ..self.shared.config.limits
        }
    }

    async fn dispatch(
        &self,
        name: &str,
        args: Option<JsonObject>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let owner = self.owner(&ctx);
        let principal = self.principal(&ctx);
        let out = match name {
            "sandbox_run" => async { self.sandbox_run(parse(args)?, &owner, ctx).await }.await,
            "session_create" => {
                async {
                    self.session_create(parse(args)?, &owner, principal.as_deref())
                        .await
                }
                .await
            }
            "session_fork" => {
                async {
                    self.session_fork(parse(args)?, &owner, principal.as_deref())
                        .await
                }
                .await
            }
            "session_list" => parse::<NoArgs>(args).map(|_| self.session_list(&owner)),
            "session_destroy" => async { self.session_destroy(parse(args)?, &owner).await }.await,
            "files_read" => async { self.files_read(parse(args)?, &owner).await }.await,
            "files_write" => async { self.files_write(parse(args)?, &owner).await }.await,
            "files_list" => async { self.files_list(parse(args)?, &owner).await }.await,
            "snapshot_create" => async { self.snapshot_create(parse(args)?, &owner).await }.await,
            "snapshot_restore" => async { self.snapshot_restore(parse(args)?, &owner).await }.await,
            other => {
                return Err(ErrorData::invalid_params(
                    format!(
                        "unknown tool {other:?}; the tools are: {}",
                        tool_names(&self.shared.tools)
                    ),
                    None,
                ));
            }
        };
        Ok(out.unwrap_or_else(|message| CallToolResult::error(vec![ContentBlock::text(message)])))
    }

    async fn sandbox_run(
        &self,
        a: RunArgs,
        owner: &str,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, String> {
        let max = self.shared.config.max_timeout_ms.max(1);
        let progress = ctx.meta.get_progress_token().map(|token| Progress {
            peer: ctx.peer.clone(),
            token,
        });
        let prepare = Prepare {
            files: a.files,
            env: a.env.into_iter().collect(),
            cwd: a.cwd,
        };
        let spec = |default_timeout: u64| RunSpec {
            command: a.command.clone(),
            stdin: a.stdin.clone(),
            timeout_ms: a.timeout_ms.unwrap_or(default_timeout).clamp(1, max),
            prepare,
        };
        let principal = self.principal(&ctx);
        let (result, session_id) = match a.session_id {
            Some(id) => {
                let lease = self.shared.store.get(owner, &id)?;
                let ticket = self.admit(principal.as_deref(), &a.command).await?;
                let sb = lease.sandbox.clone();
                let spec = spec(sb.limits().timeout_ms);
                // Waiting for an earlier run on the session ends if this request is cancelled.
                let _running = tokio::select! {
                    g = lease.run_lock.clone().lock_owned() => g,
                    _ = ctx.ct.cancelled() => {
                        finish(ticket, &Err(String::new())).await;
                        return Err("cancelled before it started".into());
                    }
                };
                let r = run::run(sb, spec, progress, ctx.ct.clone()).await;
                finish(ticket, &r).await;
                (r?, Some(lease.id.clone()))
            }
            None => {
                let ticket = self.admit(principal.as_deref(), &a.command).await?;
                let limits = self.shared.config.limits;
                let shared = self.clone();
                let sb = match blocking(move || shared.new_sandbox(limits)).await {
                    Ok(sb) => Arc::new(sb),
                    Err(e) => {
                        finish(ticket, &Err(String::new())).await;
                        return Err(e);
                    }
                };
                let spec = spec(limits.timeout_ms);
                let r = run::run(sb.clone(), spec, progress, ctx.ct.clone()).await;
                sb.destroy();
                finish(ticket, &r).await;
                (r?, None)
            }
        };
        let out = RunOutput {
            exit_code: result.exit_code,
            timed_out: result.error_class == Some(wasmsand::ErrorClass::Timeout),
            error_class: result.error_class.map(ErrorClassOut::from),
            truncated: result
                .truncated
                .map(|t| TruncatedOut {
                    stdout: t.stdout,
                    stderr: t.stderr,
                })
                .unwrap_or_default(),
            stdout: result.stdout,
            stderr: result.stderr,
            duration_ms: result.execution_time_ms,
            session_id,
        };
        let text = run_text(&out);
        Ok(structured(&out, text))
    }

    async fn session_create(
        &self,
        a: SessionCreateArgs,
        owner: &str,
        principal: Option<&str>,
    ) -> Result<CallToolResult, String> {
        let limits = effective_limits(
            self.shared.config.limits,
            self.ceiling(),
            a.limits.unwrap_or_default(),
        );
        let shared = self.clone();
        let files = a.files;
        let sb = blocking(move || -> Result<Sandbox, String> {
            let sb = shared.new_sandbox(limits);
            run::write_files(&sb, &files)?;
            Ok(sb)
        })
        .await??;
        let lease = self
            .shared
            .store
            .insert(owner, None, sb, |live| self.admit_session(principal, live))?;
        let out = SessionCreated {
            session_id: lease.id.clone(),
            limits: LimitsOut::from(&limits),
        };
        let text = format!(
            "Created session {}. Pass session_id to sandbox_run, files_* and snapshot_* tools.",
            out.session_id
        );
        Ok(structured(&out, text))
    }

    async fn session_fork(
        &self,
        a: SessionArgs,
        owner: &str,
        principal: Option<&str>,
    ) -> Result<CallToolResult, String> {
        let parent = self.shared.store.get(owner, &a.session_id)?;
        let sb = parent.sandbox.clone();
        let child = blocking(move || sb.fork().map_err(|e| e.to_string())).await??;
        let lease = self
            .shared
            .store
            .insert(owner, Some(parent.id.clone()), child, |live| {
                self.admit_session(principal, live)
            })?;
        let out = SessionForked {
            session_id: lease.id.clone(),
            parent_session_id: parent.id.clone(),
        };
        let text = format!(
            "Forked session {} into {}: an independent copy (files, variables, working \
             directory); changes in one are invisible to the other.",
            out.parent_session_id, out.session_id
        );
        Ok(structured(&out, text))
    }

    fn session_list(&self, owner: &str) -> CallToolResult {
        let sessions: Vec<SessionInfo> = self
            .shared
            .store
            .list(owner)
            .iter()
            .map(|s| SessionInfo {
                session_id: s.id.clone(),
                parent_session_id: s.parent.clone(),
                age_ms: s.age().as_millis() as u64,
                idle_ms: s.idle().as_millis() as u64,
            })
            .collect();
        let caps = self.shared.store.caps;
        let out = SessionList {
            sessions,
            max_sessions: caps.per_owner as u64,
            idle_ttl_ms: caps.idle_ttl.as_millis() as u64,
        };
        let text = if out.sessions.is_empty() {
            "No live sessions.".to_string()
        } else {
            let ids: Vec<String> = out
                .sessions
                .iter()
                .map(|s| match &s.parent_session_id {
                    Some(p) => format!("{} (fork of {p})", s.session_id),
                    None => s.session_id.clone(),
                })
                .collect();
            format!("Live sessions: {}", ids.join(", "))
        };
        structured(&out, text)
    }

    async fn session_destroy(&self, a: SessionArgs, owner: &str) -> Result<CallToolResult, String> {
        let store = self.shared.store.clone();
        let owner = owner.to_string();
        let id = a.session_id.clone();
        blocking(move || store.remove(&owner, &id)).await??;
        let out = SessionDestroyed {
            session_id: a.session_id,
            destroyed: true,
        };
        let text = format!("Destroyed session {}.", out.session_id);
        Ok(structured(&out, text))
    }

    async fn files_read(&self, a: FilesReadArgs, owner: &str) -> Result<CallToolResult, String> {
        let lease = self.shared.store.get(owner, &a.session_id)?;
        let sb = lease.sandbox.clone();
        let max = self.shared.config.max_read_bytes;
        let path = a.path.clone();
        let data = blocking(move || -> Result<bytes::Bytes, String> {
            let info = sb.stat(&path).map_err(|e| format!("{path}: {e}"))?;
            if info.kind == FileKind::Dir {
                return Err(format!("{path}: is a directory (use files_list)"));
            }
            if info.size > max {
                return Err(format!(
                    "{path}: {} bytes is more than files_read returns ({max}); read part of it \
                     with sandbox_run (head -c, tail -c, split)",
                    info.size
                ));
            }
            sb.read_file(&path).map_err(|e| format!("{path}: {e}"))
        })
        .await??;
        let (content, encoding) = match (a.encoding, std::str::from_utf8(&data)) {
            (Some(Encoding::Base64), _) | (None, Err(_)) => (
                base64::engine::general_purpose::STANDARD.encode(&data),
                Encoding::Base64,
            ),
            (_, Ok(text)) => (text.to_string(), Encoding::Utf8),
            (Some(Encoding::Utf8), Err(_)) => {
                (String::from_utf8_lossy(&data).into_owned(), Encoding::Utf8)
            }
        };
        let out = FileContent {
            path: a.path,
            content,
            encoding,
            size: data.len() as u64,
        };
        let text = match out.encoding {
            Encoding::Utf8 => out.content.clone(),
            Encoding::Base64 => format!(
                "{} ({} bytes, binary) as base64:\n{}",
                out.path, out.size, out.content
            ),
        };
        Ok(structured(&out, text))
    }

    async fn files_write(&self, a: FilesWriteArgs, owner: &str) -> Result<CallToolResult, String> {
        let lease = self.shared.store.get(owner, &a.session_id)?;
        let data = run::decode(&a.content, a.encoding).map_err(|e| format!("{}: {e}", a.path))?;
        let sb = lease.sandbox.clone();
        let path = a.path.clone();
        let n = data.len() as u64;
        blocking(move || {
            sb.write_file(&path, &data)
                .map_err(|e| format!("{path}: {e}"))
        })
        .await??;
        let out = FileWritten {
            path: a.path,
            bytes_written: n,
        };
        let text = format!("Wrote {} bytes to {}.", out.bytes_written, out.path);
        Ok(structured(&out, text))
    }

    async fn files_list(&self, a: FilesListArgs, owner: &str) -> Result<CallToolResult, String> {
        let lease = self.shared.store.get(owner, &a.session_id)?;
        let sb = lease.sandbox.clone();
        let path = a.path.unwrap_or_else(|| ".".to_string());
        let p = path.clone();
        let entries = blocking(move || sb.list(&p).map_err(|e| format!("{p}: {e}"))).await??;
        let out = DirListing {
            path,
            entries: entries
                .into_iter()
                .map(|e| DirEntry {
                    name: e.name,
                    kind: match e.kind {
                        FileKind::File => EntryKind::File,
                        FileKind::Dir => EntryKind::Dir,
                        FileKind::Symlink => EntryKind::Symlink,
                    },
                    size: e.size,
                })
                .collect(),
        };
        let mut text = format!("{} ({} entries)", out.path, out.entries.len());
        for e in &out.entries {
            let suffix = match e.kind {
                EntryKind::Dir => "/".to_string(),
                EntryKind::Symlink => "@".to_string(),
                EntryKind::File => format!("  {} bytes", e.size),
            };
            text.push_str(&format!("\n{}{suffix}", e.name));
        }
        Ok(structured(&out, text))
    }

    async fn snapshot_create(&self, a: SessionArgs, owner: &str) -> Result<CallToolResult, String> {
        let lease = self.shared.store.get(owner, &a.session_id)?;
        let sb = lease.sandbox.clone();
        let id = blocking(move || sb.snapshot().map_err(|e| e.to_string())).await??;
        let out = SnapshotCreated {
            session_id: lease.id.clone(),
            snapshot_id: id.to_string(),
        };
        let text = format!(
            "Snapshot {} of session {}: files, variables and working directory; \
             snapshot_restore puts them back.",
            out.snapshot_id, out.session_id
        );
        Ok(structured(&out, text))
    }

    async fn snapshot_restore(
        &self,
        a: SnapshotRestoreArgs,
        owner: &str,
    ) -> Result<CallToolResult, String> {
        let lease = self.shared.store.get(owner, &a.session_id)?;
        let unknown = || {
            format!(
                "unknown snapshot_id {:?} in session {}: use an id snapshot_create returned \
                 for this session",
                a.snapshot_id, a.session_id
            )
        };
        let id: SnapshotId = a.snapshot_id.parse().map_err(|_| unknown())?;
        let sb = lease.sandbox.clone();
        blocking(move || sb.restore(id))
            .await?
            .map_err(|e| match e {
                wasmsand::SandboxError::UnknownSnapshot(_) => unknown(),
                other => other.to_string(),
            })?;
        let out = SnapshotRestored {
            session_id: a.session_id,
            snapshot_id: a.snapshot_id,
            restored: true,
        };
        let text = format!(
            "Restored session {} to snapshot {}.",
            out.session_id, out.snapshot_id
        );
        Ok(structured(&out, text))
    }
}

impl ServerHandler for McpHandler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("wasmsand", env!("CARGO_PKG_VERSION"))
                    .with_title("wasmsand sandbox"),
            )
            .with_instructions(self.shared.instructions.clone())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.shared.tools.clone()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.shared.tools.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.dispatch(&request.name, request.arguments, context)
            .await
            .map(CallToolResponse::from)
    }
}

/// Arguments that do not fit the schema are a tool error the model can read and fix, not a
/// protocol error its host would hide.
/// Tells the gate's ticket, if any, how the run ended.
async fn finish(ticket: Option<Box<dyn RunTicket>>, r: &Result<wasmsand::RunResult, String>) {
    let Some(t) = ticket else { return };
    match r {
        Ok(r) => {
            t.finish(
                r.exit_code,
                r.error_class == Some(wasmsand::ErrorClass::Timeout),
                r.execution_time_ms,
            )
            .await
        }
        Err(_) => t.finish(-1, false, 0).await,
    }
}

fn parse<T: DeserializeOwned>(args: Option<JsonObject>) -> Result<T, String> {
    serde_json::from_value(serde_json::Value::Object(args.unwrap_or_default()))
        .map_err(|e| format!("invalid arguments: {e}"))
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, String> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| format!("the call failed inside the server: {e}"))
}

fn structured<T: Serialize>(value: &T, text: String) -> CallToolResult {
    let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
    r.structured_content =
        Some(serde_json::to_value(value).expect("tool results serialize to JSON"));
    r
}

/// The text block for clients that show no structured content.
fn run_text(o: &RunOutput) -> String {
    let mut t = String::new();
    t.push_str(&o.stdout);
    if !o.stdout.is_empty() && !o.stdout.ends_with('\n') {
        t.push('\n');
    }
    if !o.stderr.is_empty() {
        t.push_str("[stderr]\n");
        t.push_str(&o.stderr);
        if !o.stderr.ends_with('\n') {
            t.push('\n');
        }
    }
    t.push_str(&format!("[exit code {}", o.exit_code));
    if let Some(c) = o.error_class {
        t.push_str(&format!(", {}", c.as_str()));
    }
    if o.truncated.stdout {
        t.push_str(", stdout truncated");
    }
    if o.truncated.stderr {
        t.push_str(", stderr truncated");
    }
    t.push_str(&format!(", {} ms", o.duration_ms));
    if let Some(s) = &o.session_id {
        t.push_str(&format!(", session {s}"));
    }
    t.push(']');
    t
}

/// A session's limits: the server's defaults with the request's lower values; nothing above
/// the ceiling, nothing at zero.
fn effective_limits(defaults: Limits, ceiling: Limits, want: LimitsArg) -> Limits {
    let pick = |want: Option<u64>, default: u64, max: u64| want.unwrap_or(default).clamp(1, max);
    Limits {
        timeout_ms: pick(want.timeout_ms, defaults.timeout_ms, ceiling.timeout_ms),
        memory_bytes: pick(
            want.memory_bytes,
            defaults.memory_bytes,
            ceiling.memory_bytes,
        ),
        fs_bytes: pick(want.fs_bytes, defaults.fs_bytes, ceiling.fs_bytes),
        file_count: pick(want.file_count, defaults.file_count, ceiling.file_count),
        stdout_bytes: pick(
            want.stdout_bytes,
            defaults.stdout_bytes,
            ceiling.stdout_bytes,
        ),
        stderr_bytes: pick(
            want.stderr_bytes,
            defaults.stderr_bytes,
            ceiling.stderr_bytes,
        ),
        ..defaults
    }
}

fn tool_names(tools: &[Tool]) -> String {
    tools
        .iter()
        .map(|t| t.name.as_ref())
        .collect::<Vec<_>>()
        .join(", ")
}

fn human_bytes(n: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    if n >= MIB && n.is_multiple_of(MIB) {
        format!("{} MiB", n / MIB)
    } else if n >= 1024 && n.is_multiple_of(1024) {
        format!("{} KiB", n / 1024)
    } else {
        format!("{n} bytes")
    }
}

fn secs(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        format!("{} s", ms / 1000)
    } else {
        format!("{ms} ms")
    }
}

/// What the server tells the model about the sandbox as a whole.
fn instructions(c: &McpConfig) -> String {
    format!(
        "wasmsand runs shell commands in isolated WebAssembly sandboxes. {} Use sandbox_run for \
         one-off commands; create a session (session_create) to keep files, variables and the \
         working directory between calls, fork it (session_fork) to try alternatives in \
         parallel, and snapshot it (snapshot_create/snapshot_restore) to roll back. Sessions \
         unused for {} are destroyed.",
        environment(c),
        secs(c.session_idle_ttl.as_millis() as u64)
    )
}

fn environment(c: &McpConfig) -> String {
    let l = &c.limits;
    format!(
        "The sandbox is a bash subset (pipes, redirections, variables, functions, loops, \
         conditionals, $(...), here-docs) with coreutils (ls, cat, sort, wc, head, ...), grep, \
         rg (ripgrep's options; .gitignore respected), sed, awk, find, xargs, diff, jq, yq, \
         gzip, tar, timeout, which, expr, bc, column, strings, tree, file, patch, node \
         (JavaScript on the Boa engine with console, fs and path; no npm), git (local \
         repositories only), and python3 (CPython 3.15 with numpy and \
         pandas) over an in-memory filesystem: the home and working directory is {home}; only \
         {home} and /tmp are writable. There is no network access, and Python cannot start \
         subprocesses or threads. Limits: {timeout} per command by default (timeout_ms, up to \
         {max_timeout}), {memory} of memory per program, {out} each of stdout and stderr kept \
         per run (the rest is cut off and `truncated` says so), commands up to {cmd}, and per \
         sandbox {fs} of files and {files} files. The very first python3 on a machine can take \
         a minute (it is compiled once, then cached); later ones start quickly.",
        home = wasmsand::HOME,
        timeout = secs(l.timeout_ms),
        max_timeout = secs(c.max_timeout_ms),
        memory = human_bytes(l.memory_bytes),
        out = human_bytes(l.stdout_bytes),
        cmd = human_bytes(l.command_bytes),
        fs = human_bytes(l.fs_bytes),
        files = l.file_count,
    )
}

fn tool<A: JsonSchema + 'static, O: JsonSchema + 'static>(
    name: &'static str,
    title: &'static str,
    description: String,
    annotations: ToolAnnotations,
) -> Tool {
    let input = rmcp::handler::server::tool::schema_for_input::<A>()
        .unwrap_or_else(|e| panic!("input schema of {name}: {e}"));
    Tool::new(name, Cow::Owned(description), input)
        .with_title(title)
        .with_output_schema::<O>()
        .with_annotations(annotations)
}

fn tool_table(c: &McpConfig) -> Vec<Tool> {
    let closed = |read_only: bool, destructive: bool, idempotent: bool| {
        ToolAnnotations::new()
            .read_only(read_only)
            .destructive(destructive)
            .idempotent(idempotent)
            .open_world(false)
    };
    vec![
        tool::<RunArgs, RunOutput>(
            "sandbox_run",
            "Run a shell command in a sandbox",
            format!(
                "Run a bash command line in an isolated sandbox and get its exit code, stdout \
                 and stderr. {} Without session_id the command runs in a fresh sandbox that is \
                 discarded afterwards; with a session_id (from session_create) files, variables \
                 and the working directory persist between calls. `files` are written and `env` \
                 exported before the command runs; `stdin` is its standard input. A non-zero \
                 exit code is a normal result, not a tool error. When the client asks for \
                 progress, output is streamed as progress notifications while the command runs.",
                environment(c)
            ),
            closed(false, true, false),
        ),
        tool::<SessionCreateArgs, SessionCreated>(
            "session_create",
            "Create a sandbox session",
            format!(
                "Create a persistent sandbox session and return its session_id, for \
                 sandbox_run, files_* and snapshot_* calls. Optional lower limits and starting \
                 files. A client may hold {} live sessions; a session unused for {} is \
                 destroyed.",
                c.max_sessions_per_client,
                secs(c.session_idle_ttl.as_millis() as u64)
            ),
            closed(false, false, false),
        ),
        tool::<SessionArgs, SessionForked>(
            "session_fork",
            "Fork a session",
            "Copy a session in O(1) into a new independent session (files, variables, \
             functions, working directory, snapshots, limits); changes in either are invisible \
             to the other. Use it to try alternatives from the same starting point."
                .to_string(),
            closed(false, false, false),
        ),
        tool::<NoArgs, SessionList>(
            "session_list",
            "List sessions",
            "List this client's live sessions with their age and idle time.".to_string(),
            closed(true, false, true),
        ),
        tool::<SessionArgs, SessionDestroyed>(
            "session_destroy",
            "Destroy a session",
            "Destroy a session and everything in it; a command running in it is cancelled. The \
             id is invalid afterwards."
                .to_string(),
            closed(false, true, true),
        ),
        tool::<FilesReadArgs, FileContent>(
            "files_read",
            "Read a file",
            format!(
                "Read a file of a session. UTF-8 text comes back as text, anything else as \
                 base64 (`encoding` says which). Files over {} must be read in parts with \
                 sandbox_run.",
                human_bytes(c.max_read_bytes)
            ),
            closed(true, false, true),
        ),
        tool::<FilesWriteArgs, FileWritten>(
            "files_write",
            "Write a file",
            "Write a file in a session (replacing it if it exists; parent directories are \
             created). `encoding` is utf8 (default) or base64 for binary data. Only /home/user \
             and /tmp are writable."
                .to_string(),
            closed(false, true, true),
        ),
        tool::<FilesListArgs, DirListing>(
            "files_list",
            "List a directory",
            "List a directory of a session: names, types (file, dir, symlink) and sizes."
                .to_string(),
            closed(true, false, true),
        ),
        tool::<SessionArgs, SnapshotCreated>(
            "snapshot_create",
            "Snapshot a session",
            "Record a session's files, variables and working directory in O(1); \
             snapshot_restore returns to it, any number of times."
                .to_string(),
            closed(false, false, false),
        ),
        tool::<SnapshotRestoreArgs, SnapshotRestored>(
            "snapshot_restore",
            "Restore a snapshot",
            "Put a session's files, variables and working directory back as they were at a \
             snapshot; the snapshot stays usable."
                .to_string(),
            closed(false, true, true),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_an_object_input_schema_and_an_output_schema() {
        let tools = tool_table(&McpConfig::default());
        assert_eq!(
            tool_names(&tools),
            "sandbox_run, session_create, session_fork, session_list, session_destroy, \
             files_read, files_write, files_list, snapshot_create, snapshot_restore"
        );
        for t in &tools {
            assert_eq!(t.input_schema["type"], "object", "{}", t.name);
            let out = t.output_schema.as_ref().expect("output schema");
            assert_eq!(out["type"], "object", "{}", t.name);
            assert!(t.name.chars().all(|c| c.is_ascii_lowercase() || c == '_'));
        }
        let run = &tools[0];
        assert_eq!(run.input_schema["required"], serde_json::json!(["command"]));
        assert_eq!(run.input_schema["additionalProperties"], false);
        let props = run.output_schema.as_ref().unwrap()["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect::<Vec<_>>();
        for key in [
            "exit_code",
            "stdout",
            "stderr",
            "truncated",
            "error_class",
            "timed_out",
            "duration_ms",
            "session_id",
        ] {
            assert!(props.iter().any(|p| p == key), "{key} in {props:?}");
        }
    }

    #[test]
    fn descriptions_state_the_configured_limits() {
        let c = McpConfig {
            max_timeout_ms: 90_000,
            ..McpConfig::default()
        };
        let run = &tool_table(&c)[0];
        let d = run.description.as_deref().unwrap();
        assert!(d.contains("30 s per command"), "{d}");
        assert!(d.contains("up to 90 s"), "{d}");
        assert!(d.contains("512 MiB of memory"), "{d}");
        assert!(d.contains("no network"), "{d}");
        assert!(d.contains("numpy and pandas"), "{d}");
    }

    #[test]
    fn session_limits_never_exceed_the_ceiling() {
        let defaults = Limits::default();
        let ceiling = Limits {
            timeout_ms: 60_000,
            ..defaults
        };
        let l = effective_limits(
            defaults,
            ceiling,
            LimitsArg {
                timeout_ms: Some(10_000_000),
                memory_bytes: Some(1024 * 1024),
                fs_bytes: Some(u64::MAX),
                file_count: Some(0),
                ..LimitsArg::default()
            },
        );
        assert_eq!(l.timeout_ms, 60_000);
        assert_eq!(l.memory_bytes, 1024 * 1024);
        assert_eq!(l.fs_bytes, defaults.fs_bytes);
        assert_eq!(l.file_count, 1);
        assert_eq!(l.stdout_bytes, defaults.stdout_bytes);
    }

    #[test]
    fn run_text_reads_like_a_terminal() {
        let o = RunOutput {
            exit_code: 124,
            stdout: "partial".into(),
            stderr: "command timed out\n".into(),
            truncated: TruncatedOut {
                stdout: true,
                stderr: false,
            },
            error_class: Some(ErrorClassOut::Timeout),
            timed_out: true,
            duration_ms: 12,
            session_id: Some("s-1".into()),
        };
        assert_eq!(
            run_text(&o),
            "partial\n[stderr]\ncommand timed out\n[exit code 124, TIMEOUT, stdout truncated, \
             12 ms, session s-1]"
        );
    }
}
