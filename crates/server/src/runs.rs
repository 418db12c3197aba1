//! Runs: the queue, the state machine, execution in a sandbox, cancel, and the sweeper.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::json;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use wasmsand::{ErrorClass, FileKind, RunOptions, RunResult, Sandbox, SandboxOptions};

use crate::App;
use crate::logs::{RunLog, Stream};
use crate::sessions::{Session, WORKSPACE};
use crate::store::{self, Phase, RunRecord};
use crate::util::{iso, now_ms};

/// Why a run is being stopped from outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopCause {
    None,
    User,
    Shutdown,
}

/// A validated request, consumed by the executor.
pub struct RunSpec {
    pub session: Option<Arc<Session>>,
    pub command: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub cwd: Option<String>,
    pub files: Vec<(String, Vec<u8>)>,
    pub capture: Option<globset::GlobSet>,
    pub startup_timeout_sec: u64,
    pub timeout_sec: u64,
    pub memory_mb: u64,
}

/// A run this process knows in memory: queued, going, or recently finished (its frames
/// stay for late clients until the log retention passes).
pub struct LiveRun {
    pub id: String,
    pub record: Mutex<RunRecord>,
    pub log: Arc<RunLog>,
    /// `resume_from_seq` of the request: where a stream without `from_seq` starts.
    pub resume_from_seq: Option<u64>,
    stop: watch::Sender<StopCause>,
    sandbox: Mutex<Option<Arc<Sandbox>>>,
    spec: Mutex<Option<RunSpec>>,
    /// The app's clock, for the phase times this run records.
    pub(crate) clock: crate::clock::Clock,
}

impl LiveRun {
    pub fn new(
        record: RunRecord,
        spec: RunSpec,
        log: Arc<RunLog>,
        resume: Option<u64>,
        clock: crate::clock::Clock,
    ) -> Arc<Self> {
        Arc::new(LiveRun {
            id: record.id.clone(),
            record: Mutex::new(record),
            log,
            resume_from_seq: resume,
            stop: watch::channel(StopCause::None).0,
            sandbox: Mutex::new(None),
            spec: Mutex::new(Some(spec)),
            clock,
        })
    }

    pub fn snapshot(&self) -> RunRecord {
        self.record.lock().clone()
    }

    pub fn phase(&self) -> Phase {
        self.record.lock().phase
    }

    fn stop_cause(&self) -> StopCause {
        *self.stop.borrow()
    }

    fn transition(&self, phase: Phase) {
        let now = self.clock.now_ms();
        {
            let mut r = self.record.lock();
            r.phase = phase;
            match phase {
                Phase::Starting => r.starting_at = Some(now),
                Phase::Running => r.started_at = Some(now),
                _ => {}
            }
        }
        self.log
            .event("phase", json!({ "phase": phase.as_str(), "ts": iso(now) }));
    }
}

/// The concurrency cap and the waiting line in front of it.
pub struct Queue {
    sem: Arc<Semaphore>,
    waiting: AtomicUsize,
    concurrency: usize,
    /// Moving average of run durations, for `estimated_start_time` and `Retry-After`.
    avg_ms: AtomicU64,
}

pub enum Admission {
    Started,
    Queued { estimated_start: i64 },
    Full { retry_after_sec: u64 },
}

impl Queue {
    pub fn new(concurrency: usize) -> Queue {
        Queue {
            sem: Arc::new(Semaphore::new(concurrency)),
            waiting: AtomicUsize::new(0),
            concurrency,
            avg_ms: AtomicU64::new(100),
        }
    }

    fn record_duration(&self, ms: u64) {
        let old = self.avg_ms.load(Ordering::Relaxed);
        self.avg_ms
            .store((old * 7 + ms.max(1)) / 8, Ordering::Relaxed);
    }

    pub(crate) fn wait_estimate_ms(&self, position: usize) -> u64 {
        let rounds = (position / self.concurrency + 1) as u64;
        rounds * self.avg_ms.load(Ordering::Relaxed)
    }

    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }
}

/// Admits a run: it starts now, waits in line, or is refused because the line is full.
pub fn submit(app: &Arc<App>, run: Arc<LiveRun>) -> Admission {
    let q = &app.queue;
    if let Ok(permit) = q.sem.clone().try_acquire_owned() {
        run.transition(Phase::Starting);
        admitted(app, &run, Phase::Starting);
        let app = app.clone();
        tokio::spawn(execute(app, run, permit));
        return Admission::Started;
    }
    let max = app.config.queue_max_length;
    let (position, place) = match PlaceInLine::reserve(app, max) {
        Ok(reserved) => reserved,
        Err(n) => {
            let ms = q.wait_estimate_ms(n);
            crate::observe::queue_full(app);
            return Admission::Full {
                retry_after_sec: ms.div_ceil(1000).max(1),
            };
        }
    };
    // Replicas sharing a store share one line: its length is counted there.
    let position = match crate::replica::queue_enter(app, &run.id) {
        Ok(Some(waiting)) => waiting.max(position),
        refused => {
            if let Err(e) = refused {
                tracing::error!(%e, "cannot reserve a place in the shared queue");
            }
            drop(place);
            crate::observe::queue_full(app);
            return Admission::Full {
                retry_after_sec: q.wait_estimate_ms(max).div_ceil(1000).max(1),
            };
        }
    };
    run.log.event(
        "phase",
        json!({ "phase": "queued", "ts": iso(app.clock.now_ms()) }),
    );
    admitted(app, &run, Phase::Queued);
    let estimated_start = app.clock.now_ms() + q.wait_estimate_ms(position) as i64;
    // The TTL counts from now, on the app's clock, whenever the task below first runs.
    let expired = app
        .clock
        .sleep(Duration::from_secs(app.config.queue_ttl_sec));
    let app2 = app.clone();
    tokio::spawn(async move {
        let mut stop = run.stop.subscribe();
        let acquired = tokio::select! {
            p = app2.queue.sem.clone().acquire_owned() => p.ok(),
            _ = expired => None,
            _ = stopped(&mut stop) => None,
        };
        drop(place);
        crate::replica::queue_leave(&app2, &run.id).await;
        match acquired {
            Some(permit) if run.stop_cause() == StopCause::None => {
                run.transition(Phase::Starting);
                let rec = run.snapshot();
                let waited =
                    rec.starting_at.unwrap_or_else(|| app2.clock.now_ms()) - rec.created_at;
                crate::observe::queue_wait(&app2, waited.max(0) as f64 / 1000.0);
                crate::audit::run_phase(&app2, &rec, Phase::Starting);
                execute(app2, run, permit).await;
            }
            _ => {
                if run.stop_cause() == StopCause::None {
                    crate::observe::queue_ttl_expired(&app2);
                }
                let (phase, reason, message) = match run.stop_cause() {
                    StopCause::User => (Phase::Killed, "canceled_by_user", "canceled_by_user"),
                    StopCause::Shutdown => (
                        Phase::Failed,
                        "server_shutdown",
                        "the server shut down before the run started",
                    ),
                    StopCause::None => (
                        Phase::Failed,
                        "queue_ttl_expired",
                        "the run waited in the queue longer than queue_ttl_sec",
                    ),
                };
                finish(&app2, &run, Ending::new(phase, reason, message)).await;
            }
        }
    });
    Admission::Queued { estimated_start }
}

/// A place in the queue's line, given back when dropped: however the wait ends (a permit,
/// the TTL, a stop, the shared queue's refusal, a panic), the line's count cannot leak.
struct PlaceInLine(Arc<App>);

impl PlaceInLine {
    /// Reserves a place atomically so concurrent submissions cannot overfill the line: its
    /// position, or `Err` with the line's length when it holds `max` already.
    fn reserve(app: &Arc<App>, max: usize) -> Result<(usize, PlaceInLine), usize> {
        let n = app
            .queue
            .waiting
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < max).then_some(n + 1)
            })?;
        Ok((n, PlaceInLine(app.clone())))
    }
}

impl Drop for PlaceInLine {
    fn drop(&mut self) {
        self.0.queue.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Audit and count a run the queue took (it starts now or waits).
fn admitted(app: &App, run: &LiveRun, phase: Phase) {
    let rec = run.snapshot();
    crate::audit::run_created(app, &rec);
    crate::audit::run_phase(app, &rec, phase);
    crate::observe::run_started(app, &rec.runtime);
}

struct Ending {
    phase: Phase,
    reason_code: Option<String>,
    message: Option<String>,
    exit_code: Option<i32>,
    wall_ms: Option<u64>,
    /// The sandbox's receipt of the run, when it ran.
    usage: Option<wasmsand::Usage>,
    artifacts: Option<(Vec<store::ArtifactEntry>, u64, bool)>,
}

impl Ending {
    fn new(phase: Phase, reason: &str, message: &str) -> Ending {
        Ending {
            phase,
            reason_code: Some(reason.to_string()),
            message: Some(message.to_string()),
            exit_code: None,
            wall_ms: None,
            usage: None,
            artifacts: None,
        }
    }

    /// Writes the ending into a run's record, with what its log says of the output.
    fn apply(&self, r: &mut RunRecord, log: &RunLog, now: i64) {
        r.phase = self.phase;
        r.reason_code = self.reason_code.clone();
        r.message = self.message.clone();
        r.exit_code = self.exit_code;
        r.finished_at = Some(now);
        if let Some(ms) = self.wall_ms {
            r.resource_usage.wall_time_sec = ms as f64 / 1000.0;
        }
        if let Some(u) = &self.usage {
            // The guest programs' own CPU time, and the largest linear memory any of them
            // had: the sandbox's closest measure of a process's resident set.
            r.resource_usage.cpu_time_sec = u.cpu_us as f64 / 1e6;
            r.resource_usage.peak_rss_mb = Some(u.peak_memory_bytes as f64 / (1024.0 * 1024.0));
        }
        r.resource_usage.log_bytes = log.log_bytes();
        r.log_truncated = log.truncated();
        r.frames_dropped = log.evicted();
        if let Some((list, bytes, capped)) = self.artifacts.clone() {
            r.artifacts = list;
            r.resource_usage.artifact_bytes = bytes;
            r.artifacts_capped = capped;
        }
    }
}

async fn finish(app: &Arc<App>, run: &Arc<LiveRun>, e: Ending) {
    let now = app.clock.now_ms();
    // The final record is stored before anyone can see the run end: a client that saw it
    // end (its status or its stream) and starts another finds its quota place given back,
    // and any replica answers the same.
    let last_seq = run.log.seal();
    let stored = {
        let mut r = run.record.lock().clone();
        e.apply(&mut r, &run.log, now);
        r.last_seq = last_seq;
        r
    };
    record_end(app, run, stored.clone()).await;
    // Counted and audited before the end is published, so whoever saw the run end also
    // finds it in the metrics and the audit log.
    crate::audit::run_phase(app, &stored, stored.phase);
    crate::observe::run_finished(app, &stored);
    // The record and the last frames change under one lock: whoever reads the status sees
    // a terminal phase only with its final `last_seq`, and a client that got `end` reads the
    // terminal status.
    let ended = {
        let mut r = run.record.lock();
        e.apply(&mut r, &run.log, now);
        r.last_seq = run.log.end_with_phase(
            json!({
                "phase": r.phase.as_str(),
                "ts": iso(now),
                "reason_code": r.reason_code,
                "message": r.message,
            }),
            json!({
                "phase": r.phase.as_str(),
                "exit_code": r.exit_code,
                "reason_code": r.reason_code,
                "message": r.message,
            }),
        );
        // The last frames may have pushed older ones out of the ring.
        r.frames_dropped = run.log.evicted();
        r.clone()
    };
    if let Some(ms) = e.wall_ms {
        app.queue.record_duration(ms);
    }
    if ended != stored {
        record_end(app, run, ended.clone()).await;
    }
}

/// A store that fails here is logged, not fatal: the run still ends for its clients.
async fn record_end(app: &Arc<App>, run: &LiveRun, rec: RunRecord) {
    if let Err(err) = store::call(&app.store, move |s| s.put_run(&rec)).await {
        tracing::error!(run_id = %run.id, %err, "cannot record the end of a run");
    }
}

/// Quotes a word for the shell: inside single quotes nothing is special.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// The shell line of an argv. `bash -c SCRIPT [NAME [ARGS...]]` (or `sh`) runs SCRIPT as the
/// run's own script, so its traps (`trap ... TERM`) are the run's; anything else is run as one
/// command with every word quoted, so nothing in it is parsed by the shell.
pub fn command_line(argv: &[String]) -> String {
    let prog = argv[0].rsplit('/').next().unwrap_or("");
    if matches!(prog, "bash" | "sh") && argv.len() >= 3 && argv[1] == "-c" {
        let script = &argv[2];
        if argv.len() > 4 {
            let args: Vec<String> = argv[4..].iter().map(|a| shell_quote(a)).collect();
            return format!("set -- {}\n{script}", args.join(" "));
        }
        return script.clone();
    }
    argv.iter()
        .map(|a| shell_quote(a))
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn sandbox_options(app: &App, memory_mb: u64, env: Vec<(String, String)>) -> SandboxOptions {
    let c = &app.config;
    SandboxOptions {
        limits: wasmsand::Limits {
            memory_bytes: memory_mb * crate::config::MIB,
            fs_bytes: c.workspace_cap_mb * crate::config::MIB,
            file_count: c.workspace_file_count,
            timeout_ms: c.default_exec_timeout_sec * 1000,
            // The stream callbacks only see what the run's own buffers keep: past the log
            // cap by one byte, so the log notices the overflow and says `truncated`.
            stdout_bytes: c.max_log_bytes.saturating_add(1),
            stderr_bytes: c.max_log_bytes.saturating_add(1),
            background_processes: c.max_processes_per_session,
            ..Default::default()
        },
        env,
        cache_dir: c.cache_dir.clone(),
        files: Vec::new(),
    }
}

/// Sets up the run's sandbox: the session's (waiting for its previous run) or a fresh one,
/// with the inline files written and the cwd checked.
async fn provision(
    app: &Arc<App>,
    spec: &RunSpec,
) -> Result<(Arc<Sandbox>, Option<tokio::sync::OwnedMutexGuard<()>>), String> {
    let (sandbox, guard) = match &spec.session {
        Some(s) => {
            let guard = s.lock.clone().lock_owned().await;
            if s.sandbox.is_destroyed() {
                return Err("the session was deleted".into());
            }
            (s.sandbox.clone(), Some(guard))
        }
        None => {
            let opts = sandbox_options(app, spec.memory_mb, Vec::new());
            let sb = tokio::task::spawn_blocking(move || Sandbox::new(opts))
                .await
                .map_err(|e| format!("cannot create the sandbox: {e}"))?;
            (Arc::new(sb), None)
        }
    };
    let files = spec.files.clone();
    let cwd = spec.cwd.clone();
    let sb = sandbox.clone();
    tokio::task::spawn_blocking(move || -> Result<(), String> {
        for (path, data) in &files {
            sb.write_file(&format!("{WORKSPACE}/{path}"), data)
                .map_err(|e| format!("cannot write inline file '{path}': {e}"))?;
        }
        if let Some(cwd) = &cwd {
            let abs = absolute_cwd(cwd);
            match sb.stat(&abs) {
                Ok(info) if info.kind == FileKind::Dir => {}
                _ => return Err(format!("cwd '{cwd}' is not a directory in the sandbox")),
            }
        }
        Ok(())
    })
    .await
    .map_err(|e| e.to_string())??;
    Ok((sandbox, guard))
}

pub(crate) fn absolute_cwd(cwd: &str) -> String {
    if cwd.starts_with('/') {
        cwd.to_string()
    } else {
        format!("{WORKSPACE}/{cwd}")
    }
}

/// Runs an admitted run to its end: sandbox, command, artifacts, then its record. The
/// permit is its place among the concurrent runs, given back when this returns.
async fn execute(app: Arc<App>, run: Arc<LiveRun>, _permit: OwnedSemaphorePermit) {
    let Some(spec) = run.spec.lock().take() else {
        return;
    };
    let Some((sandbox, _session_guard)) = start_sandbox(&app, &run, &spec).await else {
        return;
    };
    let (line, restore) = command_script(&sandbox, &spec).await;

    run.transition(Phase::Running);
    crate::audit::run_phase(&app, &run.snapshot(), Phase::Running);
    let started_at = run.record.lock().started_at.unwrap_or_else(now_ms);
    run.log.event(
        "start",
        json!({ "run_id": run.id, "started_at": iso(started_at), "command": spec.command }),
    );
    *run.sandbox.lock() = Some(sandbox.clone());
    let t0 = Instant::now();
    let (out_log, err_log) = (run.log.clone(), run.log.clone());
    let opts = RunOptions {
        timeout_ms: Some(spec.timeout_sec * 1000),
        on_stdout: Some(Arc::new(move |b: &[u8]| out_log.output(Stream::Stdout, b))),
        on_stderr: Some(Arc::new(move |b: &[u8]| err_log.output(Stream::Stderr, b))),
        stdin: None,
        // The run's log is the service's output (with its own cap); a spill file would
        // appear in the user's workspace unasked.
        truncation: wasmsand::Truncation::Plain,
        ..RunOptions::default()
    };
    let sb = sandbox.clone();
    let result = tokio::task::spawn_blocking(move || sb.run_with(&line, opts)).await;
    let wall_ms = t0.elapsed().as_millis() as u64;
    *run.sandbox.lock() = None;
    run.log.flush();

    let artifacts = restore_and_capture(&app, &run, &sandbox, &spec, restore).await;
    if spec.session.is_none() {
        sandbox.destroy();
    }
    let mut ending = match result {
        Ok(Ok(r)) => result_ending(run.stop_cause(), &r, spec.timeout_sec),
        Ok(Err(err)) => Ending::new(Phase::Failed, "exec_failed", &err.to_string()),
        Err(err) => Ending::new(
            Phase::Failed,
            "exec_failed",
            &format!("the run panicked: {err}"),
        ),
    };
    ending.wall_ms = Some(wall_ms);
    ending.artifacts = artifacts;
    finish(&app, &run, ending).await;
}

/// How a run stopped on request ends.
fn stop_ending(cause: StopCause) -> Ending {
    match cause {
        StopCause::Shutdown => {
            Ending::new(Phase::Failed, "server_shutdown", "the server shut down")
        }
        _ => Ending::new(Phase::Killed, "canceled_by_user", "canceled_by_user"),
    }
}

/// The run's sandbox within `startup_timeout_sec`, with the session's lock held; `None`
/// when the run already ended (timed out, failed to provision, or stopped meanwhile).
async fn start_sandbox(
    app: &Arc<App>,
    run: &Arc<LiveRun>,
    spec: &RunSpec,
) -> Option<(Arc<Sandbox>, Option<tokio::sync::OwnedMutexGuard<()>>)> {
    let mut stop = run.stop.subscribe();
    let startup = Duration::from_secs(spec.startup_timeout_sec);
    let provisioned = tokio::select! {
        r = tokio::time::timeout(startup, provision(app, spec)) => r,
        _ = stopped(&mut stop) => {
            finish(app, run, stop_ending(run.stop_cause())).await;
            return None;
        }
    };
    let ending = match provisioned {
        Err(_) => {
            let msg = format!(
                "the sandbox was not ready within startup_timeout_sec ({}s)",
                spec.startup_timeout_sec
            );
            Ending::new(Phase::TimedOut, "startup_timeout", &msg)
        }
        Ok(Err(msg)) => Ending::new(Phase::Failed, "provision_failed", &msg),
        Ok(Ok(x)) if run.stop_cause() == StopCause::None => return Some(x),
        Ok(Ok(_)) => stop_ending(run.stop_cause()),
    };
    finish(app, run, ending).await;
    None
}

/// The shell script of the run (its env, cwd and command), and the script that gives a
/// session its previous env and cwd back afterwards: per-run values are the run's only.
async fn command_script(sandbox: &Arc<Sandbox>, spec: &RunSpec) -> (String, Vec<String>) {
    let mut line = String::new();
    let mut restore = Vec::new();
    if spec.session.is_some() && (!spec.env.is_empty() || spec.cwd.is_some()) {
        let sb = sandbox.clone();
        let names: Vec<String> = spec.env.keys().cloned().collect();
        let saved = tokio::task::spawn_blocking(move || {
            let cwd = sb.cwd().unwrap_or_else(|_| WORKSPACE.to_string());
            let vars: Vec<(String, Option<String>)> = names
                .into_iter()
                .map(|n| {
                    let v = sb.get_env(&n).ok().flatten();
                    (n, v)
                })
                .collect();
            (cwd, vars)
        })
        .await
        .unwrap_or_default();
        restore.push(format!("cd {}", shell_quote(&saved.0)));
        for (name, value) in saved.1 {
            restore.push(match value {
                Some(v) => format!("export {name}={}", shell_quote(&v)),
                None => format!("unset {name}"),
            });
        }
    }
    for (k, v) in &spec.env {
        line.push_str(&format!("export {k}={}\n", shell_quote(v)));
    }
    if let Some(cwd) = &spec.cwd {
        line.push_str(&format!(
            "cd {} || exit 1\n",
            shell_quote(&absolute_cwd(cwd))
        ));
    }
    line.push_str(&command_line(&spec.command));
    (line, restore)
}

/// After the command: the session's env and cwd restored, then the artifacts captured.
async fn restore_and_capture(
    app: &Arc<App>,
    run: &LiveRun,
    sandbox: &Arc<Sandbox>,
    spec: &RunSpec,
    restore: Vec<String>,
) -> Option<(Vec<store::ArtifactEntry>, u64, bool)> {
    let sb = sandbox.clone();
    let capture = spec.capture.clone();
    let app2 = app.clone();
    let run_id = run.id.clone();
    let user = run.record.lock().user_id.clone();
    tokio::task::spawn_blocking(move || {
        if !restore.is_empty() {
            let _ = sb.run(&restore.join("\n"));
        }
        capture.map(|set| crate::artifacts::capture(&app2, &sb, &set, &user, &run_id))
    })
    .await
    .ok()
    .flatten()
}

/// How a command that ran ends: stopped on request, or by what the engine reported.
fn result_ending(cause: StopCause, r: &RunResult, timeout_sec: u64) -> Ending {
    let mut e = if cause != StopCause::None {
        stop_ending(cause)
    } else {
        match r.error_class {
            Some(ErrorClass::Timeout) => Ending::new(
                Phase::TimedOut,
                "execution_timeout",
                &format!("the command ran longer than timeout_sec ({timeout_sec}s)"),
            ),
            Some(ErrorClass::LimitExceeded) => Ending::new(
                Phase::Failed,
                "limit_exceeded",
                r.stderr
                    .lines()
                    .last()
                    .unwrap_or("a resource limit was exceeded"),
            ),
            Some(ErrorClass::Cancelled) => Ending::new(
                Phase::Failed,
                "session_destroyed",
                "the session was deleted during the run",
            ),
            _ if r.exit_code == 0 => Ending {
                reason_code: None,
                message: None,
                ..Ending::new(Phase::Completed, "", "")
            },
            _ if r.exit_code == 137 && r.stderr.contains("out of memory") => Ending::new(
                Phase::Failed,
                "oom_killed",
                "a program exceeded its memory limit",
            ),
            _ => Ending::new(
                Phase::Failed,
                "nonzero_exit",
                &format!("the command exited with status {}", r.exit_code),
            ),
        }
    };
    e.exit_code = Some(r.exit_code);
    e.usage = Some(r.usage.clone());
    e
}

/// Asks a run to stop: a queued or starting run ends at once; a running one gets TERM (its
/// trap runs), then KILL after the grace period.
pub fn stop(run: &Arc<LiveRun>, cause: StopCause, grace: Duration) -> bool {
    if run.phase().is_terminal() || run.stop_cause() != StopCause::None {
        return false;
    }
    run.stop.send_replace(cause);
    let run = run.clone();
    tokio::spawn(async move {
        let deadline = tokio::time::Instant::now() + grace;
        let mut term_sent = false;
        // The executor may be between its last look at the stop flag and the start of the
        // command: keep trying until TERM lands or the run is over.
        while !run.log.ended() {
            if !term_sent {
                let sb = run.sandbox.lock().clone();
                if let Some(sb) = sb {
                    term_sent = sb.signal_term();
                }
            }
            if term_sent
                && tokio::time::Instant::now() >= deadline
                && let Some(sb) = run.sandbox.lock().clone()
            {
                sb.cancel();
            }
            let mut rx = run.log.subscribe();
            let pause = if term_sent {
                deadline
                    .saturating_duration_since(tokio::time::Instant::now())
                    .max(Duration::from_millis(20))
            } else {
                Duration::from_millis(2)
            };
            let _ = tokio::time::timeout(pause, rx.changed()).await;
        }
    });
    true
}

pub async fn shutdown(app: &Arc<App>) {
    let runs: Vec<Arc<LiveRun>> = app.runs.lock().values().cloned().collect();
    let grace = app.config.grace().min(Duration::from_secs(2));
    for run in &runs {
        stop(run, StopCause::Shutdown, grace);
    }
    for run in runs {
        let mut rx = run.log.subscribe();
        let _ = tokio::time::timeout(grace + Duration::from_secs(10), async {
            while !run.log.ended() {
                if rx.changed().await.is_err() {
                    break;
                }
            }
        })
        .await;
    }
}

/// Heartbeats of one run, until its end.
pub fn spawn_heartbeat(app: &Arc<App>, log: Arc<RunLog>) {
    let every = Duration::from_secs(app.config.ws_heartbeat_sec);
    let metrics = app.metrics.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        loop {
            tick.tick().await;
            if log.ended() {
                break;
            }
            log.heartbeat();
            crate::observe::heartbeat(&metrics);
        }
    });
}

/// Reaps expired sessions, forgets finished runs past the log retention and idempotency
/// entries past their TTL, and deletes artifacts past theirs.
pub fn spawn_sweeper(app: &Arc<App>) {
    let weak = Arc::downgrade(app);
    let artifact_every = Duration::from_secs(app.config.sweep_interval_sec.max(1));
    tokio::spawn(async move {
        let mut last_artifact_sweep = Instant::now();
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let Some(app) = weak.upgrade() else { break };
            if app.is_shutting_down() {
                break;
            }
            app.reap_sessions();
            let now = app.clock.now_ms();
            let retention = app.config.log_retention_sec as i64 * 1000;
            forget_finished(&app, now - retention);
            let cutoff = now - app.config.idempotency_ttl_sec as i64 * 1000;
            let _ = store::call(&app.store, move |s| s.idem_purge(cutoff)).await;
            if last_artifact_sweep.elapsed() >= artifact_every {
                last_artifact_sweep = Instant::now();
                let audit_cutoff = now - app.config.audit_retention_days as i64 * 86_400_000;
                if let Err(e) = store::call(&app.store, move |s| s.audit_purge(audit_cutoff)).await
                {
                    tracing::warn!(%e, "cannot purge old audit events");
                }
                crate::artifacts::sweep(&app).await;
            }
        }
    });
}

/// Drops finished runs from memory: those finished before `cutoff`, then the oldest past
/// `max_retained_runs`. Their records stay in the store.
fn forget_finished(app: &App, cutoff: i64) {
    let mut runs = app.runs.lock();
    runs.retain(|_, r| {
        let rec = r.record.lock();
        !(rec.phase.is_terminal() && rec.finished_at.is_some_and(|f| f < cutoff))
    });
    let mut finished: Vec<(i64, String)> = runs
        .values()
        .filter_map(|r| {
            let rec = r.record.lock();
            rec.phase
                .is_terminal()
                .then(|| (rec.finished_at.unwrap_or(0), rec.id.clone()))
        })
        .collect();
    if finished.len() > app.config.max_retained_runs {
        finished.sort();
        let excess = finished.len() - app.config.max_retained_runs;
        for (_, id) in finished.into_iter().take(excess) {
            runs.remove(&id);
        }
    }
}

impl App {
    pub(crate) fn live_run(&self, id: &str) -> Option<Arc<LiveRun>> {
        self.runs.lock().get(id).cloned()
    }

    pub(crate) fn add_live_run(&self, run: Arc<LiveRun>) {
        self.runs.lock().insert(run.id.clone(), run);
    }

    pub(crate) fn remove_live_run(&self, id: &str) {
        self.runs.lock().remove(id);
    }

    /// A run's record: the live one, else the stored one.
    pub(crate) async fn run_record(
        &self,
        id: &str,
    ) -> Result<Option<RunRecord>, store::StoreError> {
        if let Some(r) = self.live_run(id) {
            return Ok(Some(r.snapshot()));
        }
        let id = id.to_string();
        store::call(&self.store, move |s| s.get_run(&id)).await
    }
}

/// Resolves once a stop was asked for (the watch's guard is not held across awaits).
async fn stopped(rx: &mut watch::Receiver<StopCause>) {
    let _ = rx.wait_for(|c| *c != StopCause::None).await.map(|_| ());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn words_are_quoted_so_the_shell_parses_nothing() {
        assert_eq!(shell_quote("plain-word_1.txt"), "plain-word_1.txt");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote("$(rm -rf /)"), "'$(rm -rf /)'");
        assert_eq!(
            command_line(&argv(&["echo", "$HOME", "*", "a;b"])),
            "echo '$HOME' '*' 'a;b'"
        );
    }

    #[test]
    fn bash_c_runs_its_script_with_positional_arguments() {
        assert_eq!(command_line(&argv(&["bash", "-c", "echo $1"])), "echo $1");
        assert_eq!(
            command_line(&argv(&["/bin/sh", "-c", "echo $1 $2", "name", "x y", "z"])),
            "set -- 'x y' z\necho $1 $2"
        );
        // Other flags or programs are plain argv.
        assert_eq!(
            command_line(&argv(&["bash", "-x", "script.sh"])),
            "bash -x script.sh"
        );
        assert_eq!(command_line(&argv(&["bash", "-c"])), "bash -c");
    }
}
