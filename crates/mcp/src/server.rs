//! The MCP handler: what each tool does (the tools themselves are listed in `crate::tools`).

use std::sync::Arc;

use base64::Engine as _;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde::Serialize;
use serde::de::DeserializeOwned;
use wasmsand::{FileKind, Limits, Sandbox, SandboxOptions};

use crate::host::{Caller, DiffBase, SessionHost};
use crate::run::{self, Prepare, Progress, RunSpec};
use crate::tools::{ToolName, instructions, tool_names, tool_table};
use crate::types::*;
use crate::{HostedEnd, HostedRun, McpConfig, Principal, RunFacts, RunTicket};

/// The state every connection of one server shares.
pub(crate) struct Shared {
    pub config: McpConfig,
    /// Where sessions live: the embedding server's ([`McpConfig::sessions`]) or this
    /// server's own table.
    pub sessions: Arc<dyn SessionHost>,
    tools: Vec<Tool>,
    instructions: String,
}

impl Shared {
    pub fn new(config: McpConfig, sessions: Arc<dyn SessionHost>) -> Shared {
        let tools = tool_table(&config);
        let instructions = instructions(&config);
        Shared {
            config,
            sessions,
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
        session: Option<&str>,
    ) -> Result<Option<Box<dyn RunTicket>>, String> {
        match &self.shared.config.gate {
            Some(g) => g.begin(principal, command, session).await.map(Some),
            None => Ok(None),
        }
    }

    fn new_sandbox(&self, limits: Limits) -> Result<Sandbox, String> {
        new_sandbox(&self.shared.config, limits)
    }

    /// Sends the next run's egress decisions to the gate's record of it (a session's runs
    /// are serialized by its run lock, so the sink changes between runs only).
    fn route_egress(&self, sb: &Sandbox, ticket: Option<&dyn RunTicket>) {
        if let (Some(net), Some(sink)) = (
            &self.shared.config.network,
            ticket.and_then(|t| t.egress_sink()),
        ) {
            sb.set_network(Some(wasmsand::Network {
                on_event: Some(sink),
                ..net.clone()
            }));
        }
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
        let caller = Caller {
            owner: self.owner(&ctx),
            principal: self.principal(&ctx),
        };
        let Some(tool) = ToolName::from_name(name).filter(|t| t.offered(&self.shared.config))
        else {
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown tool {name:?}; the tools are: {}",
                    tool_names(&self.shared.tools)
                ),
                None,
            ));
        };
        let c = &caller;
        let out = match tool {
            ToolName::SandboxRun => {
                async {
                    let a: RunArgs = parse(args)?;
                    let (out, _) = if a.preview {
                        self.preview_run(a, c, ctx).await?
                    } else {
                        self.sandbox_run(a, c, ctx, true).await?
                    };
                    let text = run_text(&out);
                    Ok(structured(&out, text))
                }
                .await
            }
            ToolName::SandboxDotRun => async { self.prd_run(parse(args)?, c, ctx).await }.await,
            ToolName::SessionCreate => async { self.session_create(parse(args)?, c).await }.await,
            ToolName::SessionFork => async { self.session_fork(parse(args)?, c).await }.await,
            ToolName::SessionList => {
                async {
                    parse::<NoArgs>(args)?;
                    self.session_list(c).await
                }
                .await
            }
            ToolName::SessionDestroy => async { self.session_destroy(parse(args)?, c).await }.await,
            ToolName::FilesRead => async { self.files_read(parse(args)?, c).await }.await,
            ToolName::FilesWrite => async { self.files_write(parse(args)?, c).await }.await,
            ToolName::FilesList => async { self.files_list(parse(args)?, c).await }.await,
            ToolName::SnapshotCreate => async { self.snapshot_create(parse(args)?, c).await }.await,
            ToolName::SnapshotRestore => {
                async { self.snapshot_restore(parse(args)?, c).await }.await
            }
            ToolName::SandboxDiff => async { self.sandbox_diff(parse(args)?, c).await }.await,
            ToolName::SandboxCommit => async { self.sandbox_commit(parse(args)?, c).await }.await,
            ToolName::SandboxDiscard => async { self.sandbox_discard(parse(args)?, c).await }.await,
            ToolName::SandboxBestOf => {
                async { self.sandbox_best_of(parse(args)?, c, ctx).await }.await
            }
        };
        Ok(out.unwrap_or_else(|message| CallToolResult::error(vec![ContentBlock::text(message)])))
    }

    /// Seed 003's `sandbox.run`: checked and translated into a `sandbox_run`, answered with
    /// what the server's record says of the run.
    async fn prd_run(
        &self,
        a: PrdRunArgs,
        caller: &Caller,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, String> {
        match (&a.session_id, &a.base_image) {
            (Some(_), Some(_)) => {
                return Err(
                    "invalid_request: give session_id or base_image, not both (the \
                            session fixes the image)"
                        .into(),
                );
            }
            (None, None) => {
                return Err(
                    "invalid_request: base_image is required when session_id is not \
                            given"
                        .into(),
                );
            }
            _ => {}
        }
        let command = match a.command {
            CommandArg::Line(l) if !l.trim().is_empty() => l,
            CommandArg::Argv(v) if !v.is_empty() && !v[0].is_empty() => run::command_line(&v),
            _ => return Err("invalid_request: command is empty".into()),
        };
        let base = ctx
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|p| {
                p.extensions
                    .get::<crate::StreamBase>()
                    .map(|b| b.0.clone())
                    .or_else(|| {
                        p.headers
                            .get(axum::http::header::HOST)
                            .and_then(|h| h.to_str().ok())
                            .map(|h| format!("ws://{h}"))
                    })
            });
        let run = RunArgs {
            command,
            session_id: a.session_id,
            files: a
                .files
                .into_iter()
                .map(|f| FileArg {
                    path: f.path,
                    content: f.content_b64,
                    encoding: Encoding::Base64,
                })
                .collect(),
            timeout_ms: a.timeout_sec.map(|s| s.saturating_mul(1000)),
            env: a.env,
            cwd: None,
            stdin: None,
            runtime: a.runtime,
            base_image: a.base_image,
            preview: false,
        };
        let (output, facts) = self.sandbox_run(run, caller, ctx, true).await?;
        let out = PrdRunOutput {
            log_stream_url: facts.log_stream_path.map(|p| match &base {
                Some(b) => format!("{b}{p}"),
                None => p,
            }),
            policy_hash: facts.policy_hash,
            image_digest: facts.image_digest,
            output,
        };
        let text = run_text(&out.output);
        Ok(structured(&out, text))
    }

    /// `sandbox_run` with `preview`: the run goes to a fork of the session, which the answer
    /// names with what the run changed there.
    async fn preview_run(
        &self,
        mut a: RunArgs,
        caller: &Caller,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(RunOutput, RunFacts), String> {
        let Some(parent) = a.session_id.clone() else {
            return Err(
                "invalid_request: preview needs session_id: a preview is a fork of a \
                        session, committed into it later (a one-off sandbox has nothing to \
                        commit into)"
                    .into(),
            );
        };
        if !in_process(a.runtime.as_deref(), a.base_image.as_deref()) {
            return Err(
                "invalid_request: a preview runs in a session, in this server's wasm \
                        sandbox; runtime and base_image do not apply"
                    .into(),
            );
        }
        let preview_id = self.shared.sessions.fork(caller, &parent).await?;
        a.session_id = Some(preview_id.clone());
        let ran = async {
            let (mut out, facts) = self.sandbox_run(a, caller, ctx, true).await?;
            let changes = self
                .shared
                .sessions
                .changes(caller, &preview_id, &DiffBase::Parent, None)
                .await?;
            out.preview = Some(PreviewOut {
                preview_id: preview_id.clone(),
                parent_session_id: parent,
                changes: ChangesOut::from(&changes),
            });
            Ok((out, facts))
        }
        .await;
        if ran.is_err() {
            // A preview that did not run is not left behind.
            let _ = self.shared.sessions.destroy(caller, &preview_id).await;
        }
        ran
    }

    async fn sandbox_run(
        &self,
        a: RunArgs,
        caller: &Caller,
        ctx: RequestContext<RoleServer>,
        stream: bool,
    ) -> Result<(RunOutput, RunFacts), String> {
        let max = self.shared.config.max_timeout_ms.max(1);
        let progress = ctx
            .meta
            .get_progress_token()
            .filter(|_| stream)
            .map(|token| Progress {
                peer: ctx.peer.clone(),
                token,
            });
        let principal = caller.principal.clone();
        if !in_process(a.runtime.as_deref(), a.base_image.as_deref()) {
            if a.session_id.is_some() {
                return Err(format!(
                    "invalid_request: a session runs in this server's wasm sandbox; \
                     runtime/base_image ({}) choose the sandbox of a run without session_id",
                    asked(a.runtime.as_deref(), a.base_image.as_deref())
                ));
            }
            let Some(host) = self.shared.config.host.clone() else {
                return Err(format!(
                    "runtime_unavailable: this MCP server runs commands only in its own wasm \
                     sandbox (runtime wasm, base_image {WASM_IMAGE}); {} is served by the HTTP \
                     service's MCP endpoint (sandboxd serve, /mcp) when its operator enables it",
                    asked(a.runtime.as_deref(), a.base_image.as_deref())
                ));
            };
            let files = a
                .files
                .iter()
                .map(|f| {
                    run::decode(&f.content, f.encoding)
                        .map(|data| (f.path.clone(), data))
                        .map_err(|e| format!("files: {}: {e}", f.path))
                })
                .collect::<Result<Vec<_>, String>>()?;
            let limits = self.shared.config.limits;
            let hosted = HostedRun {
                runtime: a.runtime,
                base_image: a.base_image,
                command: a.command,
                files,
                env: a.env,
                cwd: a.cwd,
                stdin: a.stdin.map(String::into_bytes),
                timeout_ms: a.timeout_ms.unwrap_or(limits.timeout_ms).clamp(1, max),
                stdout_cap: limits.stdout_bytes,
                stderr_cap: limits.stderr_bytes,
            };
            let (end, output) = run::hosted(
                &host,
                principal.as_deref(),
                hosted,
                progress,
                ctx.ct.clone(),
            )
            .await?;
            let facts = end.facts.clone();
            return Ok((hosted_output(end, output), facts));
        }
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
        let (result, session_id, run_id) = match a.session_id {
            Some(id) => {
                // Waiting for an earlier run on the session ends if this request is cancelled.
                let lease = tokio::select! {
                    l = self.shared.sessions.open(caller, &id, true) => l?,
                    _ = ctx.ct.cancelled() => return Err("cancelled before it started".into()),
                };
                let ticket = self
                    .admit(principal.as_deref(), &a.command, Some(&lease.id))
                    .await?;
                let sb = lease.sandbox.clone();
                let spec = spec(sb.limits().timeout_ms);
                self.route_egress(&sb, ticket.as_deref());
                let r = run::run(sb, spec, progress, ctx.ct.clone()).await;
                // Kept by the host before the run is reported: a crash loses no finished run.
                self.shared.sessions.changed(&lease).await;
                let run_id = finish(ticket, &r).await;
                (r?, Some(lease.id.clone()), run_id)
            }
            None => {
                let ticket = self.admit(principal.as_deref(), &a.command, None).await?;
                let limits = self.shared.config.limits;
                let shared = self.clone();
                let sb = match blocking(move || shared.new_sandbox(limits))
                    .await
                    .and_then(|r| r)
                {
                    Ok(sb) => Arc::new(sb),
                    Err(e) => {
                        finish(ticket, &Err(String::new())).await;
                        return Err(e);
                    }
                };
                let spec = spec(limits.timeout_ms);
                self.route_egress(&sb, ticket.as_deref());
                let r = run::run(sb.clone(), spec, progress, ctx.ct.clone()).await;
                sb.destroy();
                let run_id = finish(ticket, &r).await;
                (r?, None, run_id)
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
            runtime: "wasm".into(),
            base_image: WASM_IMAGE.into(),
            run_id: run_id.0,
            preview: None,
        };
        Ok((out, run_id.1))
    }

    async fn sandbox_diff(&self, a: DiffArgs, caller: &Caller) -> Result<CallToolResult, String> {
        let base = match (a.since, a.snapshot_id) {
            (Some(SinceArg::Snapshot) | None, Some(s)) => DiffBase::Snapshot(s),
            (Some(SinceArg::Snapshot), None) => {
                return Err("invalid_request: since snapshot needs snapshot_id".into());
            }
            (Some(_), Some(_)) => {
                return Err("invalid_request: snapshot_id goes with since: snapshot".into());
            }
            (Some(SinceArg::Mount), None) => DiffBase::Mount,
            (Some(SinceArg::Parent), None) => DiffBase::Parent,
            (None, None) => {
                let forked = self
                    .shared
                    .sessions
                    .list(caller)
                    .await?
                    .iter()
                    .any(|s| s.session_id == a.session_id && s.parent_session_id.is_some());
                if forked {
                    DiffBase::Parent
                } else {
                    DiffBase::Mount
                }
            }
        };
        let changes = self
            .shared
            .sessions
            .changes(caller, &a.session_id, &base, a.path.as_deref())
            .await?;
        let out = DiffOutput {
            session_id: a.session_id,
            since: match base {
                DiffBase::Mount => "mount",
                DiffBase::Parent => "parent",
                DiffBase::Snapshot(_) => "snapshot",
            }
            .into(),
            changes: ChangesOut::from(&changes),
        };
        let text = changes_text(&out.changes, usize::MAX);
        Ok(structured(&out, text))
    }

    async fn sandbox_commit(
        &self,
        a: CommitArgs,
        caller: &Caller,
    ) -> Result<CallToolResult, String> {
        let opts = wasmsand::MergeOptions {
            env: a.env,
            cwd: a.cwd,
        };
        let merged = self
            .shared
            .sessions
            .merge(caller, &a.preview_id, opts)
            .await?;
        // Committed is committed: a preview that could not be dropped now only waits for
        // its TTL.
        let _ = self.shared.sessions.destroy(caller, &a.preview_id).await;
        let out = Committed {
            session_id: merged.parent_session_id,
            preview_id: a.preview_id,
            applied: merged
                .result
                .applied
                .iter()
                .map(|p| CommittedPath {
                    path: p.path.clone(),
                    change: p.change.as_str().into(),
                })
                .collect(),
            env: merged.result.env,
            cwd: merged.result.cwd,
        };
        let mut text = format!(
            "Committed preview {} into session {}: {} path(s) set",
            out.preview_id,
            out.session_id,
            out.applied.len()
        );
        for p in &out.applied {
            text.push_str(&format!("\n{} {}", p.change, p.path));
        }
        Ok(structured(&out, text))
    }

    async fn sandbox_discard(
        &self,
        a: DiscardArgs,
        caller: &Caller,
    ) -> Result<CallToolResult, String> {
        if a.preview_ids.is_empty() {
            return Err("invalid_request: preview_ids is empty".into());
        }
        // Every id is checked before any is dropped: a typo discards nothing.
        let sessions = self.shared.sessions.list(caller).await?;
        for id in &a.preview_ids {
            match sessions.iter().find(|s| &s.session_id == id) {
                Some(s) if s.parent_session_id.is_some() => {}
                Some(_) => {
                    return Err(format!(
                        "{id} is a session made by session_create, not a preview; nothing was \
                         discarded (session_destroy ends a session)"
                    ));
                }
                None => {
                    return Err(format!(
                        "unknown preview_id {id:?}: it was never made, or was committed, \
                         discarded or expired; nothing was discarded"
                    ));
                }
            }
        }
        let mut discarded = Vec::new();
        for id in a.preview_ids {
            if !discarded.contains(&id) {
                self.shared.sessions.destroy(caller, &id).await?;
                discarded.push(id);
            }
        }
        let text = format!("Discarded {}.", discarded.join(", "));
        Ok(structured(&Discarded { discarded }, text))
    }

    async fn sandbox_best_of(
        &self,
        a: BestOfArgs,
        caller: &Caller,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, String> {
        let max = self.shared.config.max_best_of.max(1);
        let n = a.attempts.len();
        if n == 0 || n > max {
            return Err(format!(
                "invalid_request: attempts must hold 1 to {max} attempts, not {n}"
            ));
        }
        let mut ids = Vec::with_capacity(n);
        for _ in 0..n {
            match self.shared.sessions.fork(caller, &a.session_id).await {
                Ok(id) => ids.push(id),
                Err(e) => {
                    self.discard_all(caller, &ids).await;
                    return Err(format!(
                        "{e} (sandbox_best_of makes a preview, a session, per attempt: {n} here)"
                    ));
                }
            }
        }
        let limit = Arc::new(tokio::sync::Semaphore::new(
            a.concurrency.unwrap_or(max).clamp(1, max),
        ));
        let mut set = tokio::task::JoinSet::new();
        for (i, (attempt, id)) in a.attempts.iter().zip(&ids).enumerate() {
            let run = RunArgs {
                command: attempt.command.clone(),
                session_id: Some(id.clone()),
                files: Vec::new(),
                timeout_ms: a.timeout_ms,
                env: attempt.env.clone(),
                cwd: None,
                stdin: None,
                runtime: None,
                base_image: None,
                preview: false,
            };
            let (me, caller, ctx, limit, id) = (
                self.clone(),
                caller.clone(),
                ctx.clone(),
                limit.clone(),
                id.clone(),
            );
            set.spawn(async move {
                let _turn = limit.acquire_owned().await;
                let r = async {
                    let (out, _) = me.sandbox_run(run, &caller, ctx, false).await?;
                    let changes = me
                        .shared
                        .sessions
                        .changes(&caller, &id, &DiffBase::Parent, None)
                        .await?;
                    Ok::<_, String>((out, changes))
                }
                .await;
                (i, r)
            });
        }
        let mut done: Vec<Option<(RunOutput, wasmsand::Changes)>> = vec![None; n];
        let mut failed = None;
        while let Some(joined) = set.join_next().await {
            match joined {
                Ok((i, Ok(r))) => done[i] = Some(r),
                Ok((i, Err(e))) => failed = Some(format!("attempt {}: {e}", i + 1)),
                Err(e) => failed = Some(format!("the call failed inside the server: {e}")),
            }
        }
        if let Some(e) = failed {
            self.discard_all(caller, &ids).await;
            return Err(format!("{e}; no preview was kept"));
        }
        let attempts: Vec<AttemptOut> = done
            .into_iter()
            .zip(ids)
            .zip(&a.attempts)
            .map(|((r, preview_id), attempt)| {
                let (o, changes) = r.expect("every attempt ended");
                AttemptOut {
                    preview_id,
                    command: attempt.command.clone(),
                    exit_code: o.exit_code,
                    stdout: o.stdout,
                    stderr: o.stderr,
                    truncated: o.truncated,
                    error_class: o.error_class,
                    timed_out: o.timed_out,
                    duration_ms: o.duration_ms,
                    run_id: o.run_id,
                    changes: ChangesOut::from(&changes),
                }
            })
            .collect();
        let mut text = format!(
            "{} attempt(s) from session {}, each in a preview; sandbox_commit the one to keep \
             and sandbox_discard the rest.",
            attempts.len(),
            a.session_id
        );
        for (i, t) in attempts.iter().enumerate() {
            text.push_str(&format!(
                "\n\n[attempt {}: preview {}, exit code {}{}, {} path(s) changed]\n$ {}\n{}",
                i + 1,
                t.preview_id,
                t.exit_code,
                t.error_class
                    .map(|c| format!(", {}", c.as_str()))
                    .unwrap_or_default(),
                t.changes.files.len(),
                t.command,
                tail(&format!("{}{}", t.stdout, t.stderr), 2000)
            ));
        }
        let out = BestOfOutput {
            session_id: a.session_id,
            attempts,
        };
        Ok(structured(&out, text))
    }

    async fn discard_all(&self, caller: &Caller, ids: &[String]) {
        for id in ids {
            let _ = self.shared.sessions.destroy(caller, id).await;
        }
    }

    async fn session_create(
        &self,
        a: SessionCreateArgs,
        caller: &Caller,
    ) -> Result<CallToolResult, String> {
        let limits = effective_limits(
            self.shared.config.limits,
            self.ceiling(),
            a.limits.unwrap_or_default(),
        );
        let lease = self.shared.sessions.create(caller, limits).await?;
        if !a.files.is_empty() {
            let sb = lease.sandbox.clone();
            let files = a.files;
            let written = blocking(move || run::write_files(&sb, &files)).await?;
            if let Err(e) = written {
                // A session whose files could not all be written is not left behind.
                let id = lease.id.clone();
                drop(lease);
                let _ = self.shared.sessions.destroy(caller, &id).await;
                return Err(e);
            }
            self.shared.sessions.changed(&lease).await;
        }
        let out = SessionCreated {
            session_id: lease.id.clone(),
            limits: LimitsOut::from(lease.sandbox.limits()),
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
        caller: &Caller,
    ) -> Result<CallToolResult, String> {
        let id = self.shared.sessions.fork(caller, &a.session_id).await?;
        let out = SessionForked {
            session_id: id,
            parent_session_id: a.session_id,
        };
        let text = format!(
            "Forked session {} into {}: an independent copy (files, variables, working \
             directory); changes in one are invisible to the other.",
            out.parent_session_id, out.session_id
        );
        Ok(structured(&out, text))
    }

    async fn session_list(&self, caller: &Caller) -> Result<CallToolResult, String> {
        let sessions: Vec<SessionInfo> = self
            .shared
            .sessions
            .list(caller)
            .await?
            .into_iter()
            .map(|s| SessionInfo {
                session_id: s.session_id,
                parent_session_id: s.parent_session_id,
                age_ms: s.age_ms,
                idle_ms: s.idle_ms,
            })
            .collect();
        let caps = self.shared.sessions.caps();
        let out = SessionList {
            sessions,
            max_sessions: caps.max_sessions,
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
        Ok(structured(&out, text))
    }

    async fn session_destroy(
        &self,
        a: SessionArgs,
        caller: &Caller,
    ) -> Result<CallToolResult, String> {
        self.shared.sessions.destroy(caller, &a.session_id).await?;
        let out = SessionDestroyed {
            session_id: a.session_id,
            destroyed: true,
        };
        let text = format!("Destroyed session {}.", out.session_id);
        Ok(structured(&out, text))
    }

    async fn files_read(
        &self,
        a: FilesReadArgs,
        caller: &Caller,
    ) -> Result<CallToolResult, String> {
        let lease = self
            .shared
            .sessions
            .open(caller, &a.session_id, false)
            .await?;
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

    async fn files_write(
        &self,
        a: FilesWriteArgs,
        caller: &Caller,
    ) -> Result<CallToolResult, String> {
        let data = run::decode(&a.content, a.encoding).map_err(|e| format!("{}: {e}", a.path))?;
        let lease = self
            .shared
            .sessions
            .open(caller, &a.session_id, true)
            .await?;
        let sb = lease.sandbox.clone();
        let path = a.path.clone();
        let n = data.len() as u64;
        blocking(move || {
            sb.write_file(&path, &data)
                .map_err(|e| format!("{path}: {e}"))
        })
        .await??;
        self.shared.sessions.changed(&lease).await;
        let out = FileWritten {
            path: a.path,
            bytes_written: n,
        };
        let text = format!("Wrote {} bytes to {}.", out.bytes_written, out.path);
        Ok(structured(&out, text))
    }

    async fn files_list(
        &self,
        a: FilesListArgs,
        caller: &Caller,
    ) -> Result<CallToolResult, String> {
        let lease = self
            .shared
            .sessions
            .open(caller, &a.session_id, false)
            .await?;
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

    async fn snapshot_create(
        &self,
        a: SessionArgs,
        caller: &Caller,
    ) -> Result<CallToolResult, String> {
        let snapshot_id = self.shared.sessions.snapshot(caller, &a.session_id).await?;
        let out = SnapshotCreated {
            session_id: a.session_id,
            snapshot_id,
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
        caller: &Caller,
    ) -> Result<CallToolResult, String> {
        self.shared
            .sessions
            .restore(caller, &a.session_id, &a.snapshot_id)
            .await?;
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

/// An MCP sandbox of `config` with `limits`, the operator's folders mounted in it.
pub(crate) fn new_sandbox(config: &McpConfig, limits: Limits) -> Result<Sandbox, String> {
    let sb = Sandbox::new(SandboxOptions {
        limits,
        env: config.env.clone(),
        cache_dir: config.cache_dir.clone(),
        network: config.network.clone(),
        ..SandboxOptions::default()
    });
    if let Err(e) = sb.mount_all(&config.mounts) {
        sb.destroy();
        return Err(format!("unavailable: the server's project folder: {e}"));
    }
    Ok(sb)
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
/// Tells the gate's ticket, if any, how the run ended; the gate's id of the run.
/// Tells the gate how the run ended; its record's id and facts.
async fn finish(
    ticket: Option<Box<dyn RunTicket>>,
    r: &Result<wasmsand::RunResult, String>,
) -> (Option<String>, RunFacts) {
    let Some(t) = ticket else {
        return (None, RunFacts::default());
    };
    let id = (t.run_id(), t.facts());
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
    id
}

/// The image of this server's own sandbox.
const WASM_IMAGE: &str = "wasmsand/default";

/// Whether a run asking for `runtime` and `base_image` runs in this server's own sandbox.
fn in_process(runtime: Option<&str>, base_image: Option<&str>) -> bool {
    matches!(runtime, None | Some("wasm")) && matches!(base_image, None | Some(WASM_IMAGE))
}

fn asked(runtime: Option<&str>, base_image: Option<&str>) -> String {
    match (runtime, base_image) {
        (Some(r), Some(i)) => format!("runtime {r} with base_image {i}"),
        (Some(r), None) => format!("runtime {r}"),
        (None, Some(i)) => format!("base_image {i}"),
        (None, None) => "the default runtime".into(),
    }
}

/// The result of a hosted run: its output as this server kept it, and why it ended.
fn hosted_output(end: HostedEnd, mut o: run::Collected) -> RunOutput {
    if let Some(m) = &end.message {
        if !o.stderr.is_empty() && !o.stderr.ends_with('\n') {
            o.stderr.push('\n');
        }
        o.stderr.push_str(&format!("[{}: {m}]\n", end.runtime));
    }
    RunOutput {
        exit_code: end.exit_code,
        timed_out: end.error_class == Some(wasmsand::ErrorClass::Timeout),
        error_class: end.error_class.map(ErrorClassOut::from),
        truncated: o.truncated,
        stdout: o.stdout,
        stderr: o.stderr,
        duration_ms: end.duration_ms,
        session_id: None,
        runtime: end.runtime,
        base_image: end.base_image,
        run_id: Some(end.run_id),
        preview: None,
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
    if o.runtime != "wasm" {
        t.push_str(&format!(", {} {}", o.runtime, o.base_image));
    }
    match (&o.preview, &o.session_id) {
        (Some(p), _) => t.push_str(&format!(
            ", preview {} of session {}",
            p.preview_id, p.parent_session_id
        )),
        (None, Some(s)) => t.push_str(&format!(", session {s}")),
        (None, None) => {}
    }
    t.push(']');
    if let Some(p) = &o.preview {
        t.push_str(&format!(
            "\n{}\nsandbox_commit brings this preview into the session; sandbox_discard drops it.",
            changes_text(&p.changes, 16 * 1024)
        ));
    }
    t
}

/// At most the last `max` bytes of `s` (on a character boundary), marked when cut.
fn tail(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut at = s.len() - max;
    while !s.is_char_boundary(at) {
        at += 1;
    }
    format!("[... {at} bytes before]\n{}", &s[at..])
}

/// The text block of some changes: a line per path, then the patch up to `max_patch` bytes.
fn changes_text(c: &ChangesOut, max_patch: usize) -> String {
    if c.files.is_empty() {
        return format!("No changes under {}.", c.root);
    }
    let mut t = format!("{} path(s) changed under {}:", c.files.len(), c.root);
    for f in &c.files {
        t.push_str(&format!("\n{} {}", f.status, f.path));
    }
    if !c.patch.is_empty() {
        if c.patch.len() <= max_patch {
            t.push_str(&format!("\n\n{}", c.patch));
        } else {
            t.push_str(&format!(
                "\n\n(the patch is {} bytes: sandbox_diff's structured result has it whole)",
                c.patch.len()
            ));
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

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
            runtime: "wasm".into(),
            base_image: WASM_IMAGE.into(),
            run_id: None,
            preview: None,
        };
        assert_eq!(
            run_text(&o),
            "partial\n[stderr]\ncommand timed out\n[exit code 124, TIMEOUT, stdout truncated, \
             12 ms, session s-1]"
        );
    }
}
