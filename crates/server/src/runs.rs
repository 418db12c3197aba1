//! Runs: the queue, the state machine, execution in a sandbox, cancel, and the sweeper.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::json;
use tokio::sync::watch;

use crate::App;
use crate::logs::RunLog;
pub use crate::runtime::StopCause;
use crate::runtime::{
    BoxSpec, EndHint, ExecOutcome, ExecRequest, ImageRef, ProvisionError, Runtime, SandboxBox,
};
use crate::sessions::Session;
use crate::store::{self, Phase, RunRecord};
use crate::util::{iso, now_ms};

/// A validated request, consumed by the executor.
pub struct RunSpec {
    pub session: Option<Arc<Session>>,
    /// What runs it (a session's runtime, or the one the request picked).
    pub runtime: Arc<dyn Runtime>,
    pub image: ImageRef,
    pub cpu: f64,
    pub command: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub cwd: Option<String>,
    pub files: Vec<(String, Vec<u8>)>,
    /// Directories to make first (a `git` input's, whose empty ones git needs).
    pub dirs: Vec<String>,
    /// A one-shot run's effective egress allowlist (a session's run has the session's).
    pub egress: Option<wasmsand::egress::EgressPolicy>,
    pub capture: Option<globset::GlobSet>,
    pub startup_timeout_sec: u64,
    pub timeout_sec: u64,
    pub memory_mb: u64,
    /// The command's standard input (the run request's or MCP's `stdin`).
    pub stdin: Option<Vec<u8>>,
    /// An interactive run's stdin, fed from its stream's `stdin` frames.
    pub stdin_feed: Option<crate::runtime::StdinFeed>,
}

/// A run this process knows in memory: queued, going, or recently finished (its frames
/// stay for late clients until the log retention passes).
pub struct LiveRun {
    pub id: String,
    pub record: Mutex<RunRecord>,
    pub log: Arc<RunLog>,
    /// `resume_from_seq` of the request: where a stream without `from_seq` starts.
    pub resume_from_seq: Option<u64>,
    /// An interactive run's stdin, which its stream's connections write to.
    pub stdin: Option<Arc<crate::interactive::Interactive>>,
    stop: watch::Sender<StopCause>,
    spec: Mutex<Option<RunSpec>>,
    /// Gets the run's output besides its log (an MCP call waiting for the run), until the
    /// run ends.
    tap: Mutex<Option<crate::runtime::OutputSink>>,
    /// The app's clock, for the phase times this run records.
    pub(crate) clock: crate::clock::Clock,
}

impl LiveRun {
    pub fn new(
        record: RunRecord,
        spec: RunSpec,
        log: Arc<RunLog>,
        resume: Option<u64>,
        stdin: Option<Arc<crate::interactive::Interactive>>,
        clock: crate::clock::Clock,
    ) -> Arc<Self> {
        Arc::new(LiveRun {
            id: record.id.clone(),
            record: Mutex::new(record),
            log,
            resume_from_seq: resume,
            stdin,
            stop: watch::channel(StopCause::None).0,
            spec: Mutex::new(Some(spec)),
            tap: Mutex::new(None),
            clock,
        })
    }

    /// Sends the run's output to `tap` as well, from now until the run ends.
    pub(crate) fn set_tap(&self, tap: crate::runtime::OutputSink) {
        *self.tap.lock() = Some(tap);
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
    slots: Arc<crate::fair::Slots>,
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
            slots: crate::fair::Slots::new(concurrency),
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

/// A session with its lock held: its runs go one at a time.
type SessionHeld = (Arc<Session>, tokio::sync::OwnedMutexGuard<()>);

/// The session's lock now, if nothing holds it. Its sandbox may have gone to the store:
/// waking it is provisioning ([`provision`]), under the run's startup timeout.
fn try_lock_session(s: &Arc<Session>) -> Option<SessionHeld> {
    let guard = s.lock.clone().try_lock_owned().ok()?;
    Some((s.clone(), guard))
}

/// Admits a run: it starts now, waits in line, or is refused because the line is full.
///
/// A run of a session whose previous run has not ended waits in line for its session
/// first and only then for a run slot: it does not hold one of the server's slots while
/// it cannot start. Slots go round robin between the users waiting for one
/// ([`crate::fair`]).
pub fn submit(app: &Arc<App>, run: Arc<LiveRun>) -> Admission {
    let q = &app.queue;
    let session = run.spec.lock().as_ref().and_then(|s| s.session.clone());
    let held = match &session {
        Some(s) => try_lock_session(s),
        None => None,
    };
    if (session.is_none() || held.is_some())
        && let Some(slot) = q.slots.try_acquire()
    {
        run.transition(Phase::Starting);
        admitted(app, &run, Phase::Starting);
        crate::observe::queue_wait(app, &run.snapshot(), 0.0);
        let app = app.clone();
        tokio::spawn(execute(app, run, slot, held));
        return Admission::Started;
    }
    let max = app.config.queue_max_length;
    let (position, place) = match PlaceInLine::reserve(app, max) {
        Ok(reserved) => reserved,
        Err(n) => {
            let ms = q.wait_estimate_ms(n);
            crate::observe::queue_full(app, &run.snapshot().runtime);
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
            crate::observe::queue_full(app, &run.snapshot().runtime);
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
    let user = run.record.lock().user_id.clone();
    // A run that needs no session, or holds it, takes its place in its user's line now, so
    // runs are served in the order they were submitted; one waiting for its session takes
    // it once the session is free.
    let slot_place = (session.is_none() || held.is_some()).then(|| q.slots.enqueue(&user));
    tokio::spawn(async move {
        let mut stop = run.stop.subscribe();
        let wait = async {
            let held = match (held, session) {
                (Some(h), _) => Some(h),
                (None, Some(s)) => {
                    let guard = s.lock.clone().lock_owned().await;
                    Some((s, guard))
                }
                (None, None) => None,
            };
            let slot_place = slot_place.unwrap_or_else(|| app2.queue.slots.enqueue(&user));
            (slot_place.slot().await, held)
        };
        let acquired = tokio::select! {
            p = wait => Some(p),
            _ = expired => None,
            _ = stopped(&mut stop) => None,
        };
        drop(place);
        crate::replica::queue_leave(&app2, &run.id).await;
        match acquired {
            Some((slot, held)) if run.stop_cause() == StopCause::None => {
                run.transition(Phase::Starting);
                let rec = run.snapshot();
                let waited =
                    rec.starting_at.unwrap_or_else(|| app2.clock.now_ms()) - rec.created_at;
                crate::observe::queue_wait(&app2, &rec, waited.max(0) as f64 / 1000.0);
                crate::audit::run_phase(&app2, &rec, Phase::Starting);
                execute(app2, run, slot, held).await;
            }
            _ => {
                let rec = run.snapshot();
                let waited = app2.clock.now_ms() - rec.created_at;
                crate::observe::queue_wait(&app2, &rec, waited.max(0) as f64 / 1000.0);
                if run.stop_cause() == StopCause::None {
                    crate::observe::queue_ttl_expired(&app2, &rec.runtime);
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
    crate::observe::run_started(app, &rec);
}

/// What a finished run's box measured: CPU seconds, peak memory in MiB, and the network
/// (requests, bytes received).
type Measured = (Option<f64>, Option<f64>, (u64, u64));

struct Ending {
    phase: Phase,
    reason_code: Option<String>,
    message: Option<String>,
    exit_code: Option<i32>,
    wall_ms: Option<u64>,
    /// CPU seconds and peak memory (MiB) of the run, when it ran.
    usage: Option<Measured>,
    artifacts: Option<(Vec<store::ArtifactEntry>, u64, bool)>,
}

/// Longest `message` a run records: it goes into the `phase`, `error` and `end` frames, which
/// must stay under the 64 KiB frame cap whatever a request put into it (a long `cwd`).
const MAX_MESSAGE_BYTES: usize = 4096;

/// Reason codes of runs that failed because the runtime could not prepare or keep the
/// sandbox (not because of the program or the caller): those get an `error` frame.
const RUNTIME_FAILURES: &[&str] = &["provision_failed", "image_pull_failed", "exec_failed"];

impl Ending {
    fn new(phase: Phase, reason: &str, message: &str) -> Ending {
        Ending {
            phase,
            reason_code: Some(reason.to_string()),
            message: Some(crate::util::cut_utf8(message, MAX_MESSAGE_BYTES)),
            exit_code: None,
            wall_ms: None,
            usage: None,
            artifacts: None,
        }
    }

    /// The `error` event's data when the run failed for a runtime reason: the error
    /// envelope's `code` and `message` (so a client showing API errors shows this one too),
    /// the `reason_code` as the record has it and the phase the run was in.
    fn runtime_error(&self, during: Phase, now: i64) -> Option<serde_json::Value> {
        let reason = self.reason_code.as_deref()?;
        RUNTIME_FAILURES.contains(&reason).then(|| {
            json!({
                "code": reason,
                "message": self.message,
                "reason_code": reason,
                "phase": during.as_str(),
                "ts": iso(now),
            })
        })
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
        if let Some((cpu, peak, (requests, bytes))) = self.usage {
            r.resource_usage.cpu_time_sec = cpu.unwrap_or(0.0);
            r.resource_usage.peak_rss_mb = peak;
            r.resource_usage.network_requests = requests;
            r.resource_usage.network_bytes = bytes;
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
    // A run that never got to its command (cancelled or timed out first) closes its stdin
    // here; one that did closed it when the command ended.
    if let Some(input) = &run.stdin {
        input.close(crate::interactive::RUN_ENDED);
    }
    let now = app.clock.now_ms();
    // Before the seal: the log takes no other frame after it but the final two.
    if let Some(error) = e.runtime_error(run.phase(), now) {
        run.log.event("error", error);
    }
    // The final record is stored before anyone can see the run end: a client that saw it
    // end (its status or its stream) and starts another finds its quota place given back,
    // and any replica answers the same.
    let last_seq = run.log.seal();
    run.tap.lock().take();
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

/// A run's box, and for a session's run the session with its lock held.
type Provisioned = (Arc<dyn SandboxBox>, Option<SessionHeld>);

/// Sets up the run's box: the session's (`held`, locked when the run was admitted) or a
/// fresh one, with the inline files written and the cwd checked.
async fn provision(
    app: &Arc<App>,
    run: &LiveRun,
    spec: &RunSpec,
    held: Option<SessionHeld>,
) -> Result<Provisioned, ProvisionError> {
    let (boxed, guard) = match (&spec.session, held) {
        (Some(_), Some((s, guard))) => {
            let (s, guard) = if s.hibernated.load(Ordering::SeqCst) {
                // It went to the store (or was replaced) while the run waited: wake it.
                drop(guard);
                app.lock_session(s)
                    .await
                    .map_err(|e| ProvisionError::Failed(e.message))?
            } else {
                (s, guard)
            };
            if !s.boxed.is_alive() {
                return Err(ProvisionError::Failed(
                    "the session was deleted, or its sandbox was lost".into(),
                ));
            }
            (s.boxed.clone(), Some((s, guard)))
        }
        // `submit` admits a session's run only with its session held.
        (Some(_), None) => {
            return Err(ProvisionError::Failed(
                "the run was admitted without its session".into(),
            ));
        }
        (None, _) => {
            let owner = run.record.lock().user_id.clone();
            let boxed = spec
                .runtime
                .create_box(BoxSpec {
                    image: spec.image.clone(),
                    memory_mb: spec.memory_mb,
                    cpu: spec.cpu,
                    env: Default::default(),
                    owner,
                    session: None,
                    run: Some(run.id.clone()),
                    network: spec.egress.clone(),
                    limits: None,
                })
                .await?;
            (boxed, None)
        }
    };
    let ready = async {
        if !spec.files.is_empty() || !spec.dirs.is_empty() {
            boxed
                .write_files(spec.dirs.clone(), spec.files.clone())
                .await
                .map_err(|e| ProvisionError::Failed(format!("cannot write inline files: {e:?}")))?;
        }
        if let Some(cwd) = &spec.cwd
            && !boxed.is_dir(cwd).await
        {
            return Err(ProvisionError::Failed(format!(
                "cwd '{cwd}' is not a directory in the sandbox"
            )));
        }
        Ok(())
    };
    if let Err(e) = ready.await {
        if spec.session.is_none() {
            boxed.destroy().await;
        }
        return Err(e);
    }
    Ok((boxed, guard))
}

/// Runs an admitted run to its end: sandbox, command, artifacts, then its record. The
/// slot is its place among the concurrent runs, given back when this returns; `held` is its
/// session, locked.
async fn execute(
    app: Arc<App>,
    run: Arc<LiveRun>,
    _slot: crate::fair::Slot,
    held: Option<SessionHeld>,
) {
    let Some(mut spec) = run.spec.lock().take() else {
        return;
    };
    let Some((boxed, session)) = start_sandbox(&app, &run, &spec, held).await else {
        return;
    };

    run.transition(Phase::Running);
    let rec = run.snapshot();
    crate::audit::run_phase(&app, &rec, Phase::Running);
    crate::observe::start_latency(&app, &rec);
    // The idle timeout counts from here: a run that waited in the queue or for its session
    // longer than it must not find its stdin closed before its command could read it.
    if let Some(input) = &run.stdin {
        input.arm_idle();
    }
    let started_at = run.record.lock().started_at.unwrap_or_else(now_ms);
    run.log.event(
        "start",
        crate::logs::start_event_data(&run.id, &iso(started_at), &spec.command),
    );
    let t0 = Instant::now();
    let log = run.log.clone();
    let request = ExecRequest {
        command: spec.command.clone(),
        env: spec.env.clone(),
        cwd: spec.cwd.clone(),
        timeout: Duration::from_secs(spec.timeout_sec),
        grace: app.config.grace(),
        in_session: spec.session.is_some(),
        stdin: spec.stdin.clone(),
        stdin_feed: spec.stdin_feed.take(),
    };
    let tap = run.tap.lock().clone();
    let result = boxed
        .run(
            request,
            Arc::new(move |s, b: &[u8]| {
                log.output(s, b);
                if let Some(t) = &tap {
                    t(s, b);
                }
            }),
            run.stop.subscribe(),
        )
        .await;
    let wall_ms = t0.elapsed().as_millis() as u64;
    run.log.flush();
    // Nothing reads it any more: frames from now on are refused, not dropped unseen.
    if let Some(input) = &run.stdin {
        input.close(crate::interactive::RUN_ENDED);
    }
    let egress = boxed.take_egress();
    if !egress.is_empty() {
        let rec = run.snapshot();
        for e in &egress {
            crate::audit::run_egress(&app, &rec, e);
        }
        crate::observe::egress(&app, &egress);
    }

    let artifacts = match &spec.capture {
        Some(set) => {
            let user = run.record.lock().user_id.clone();
            Some(crate::artifacts::capture(&app, boxed.as_ref(), set, &user, &run.id).await)
        }
        None => None,
    };
    match &session {
        // Its lock is still held: the checkpoint is of the state this run left, and in the
        // store before the run is reported finished.
        Some((s, _guard)) => {
            s.touch(app.clock.now_ms());
            app.checkpoint(s).await;
        }
        None => boxed.destroy().await,
    }
    let mut ending = match result {
        Ok(o) => result_ending(run.stop_cause(), &o, spec.timeout_sec),
        Err(err) => Ending::new(Phase::Failed, "exec_failed", &err),
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
    held: Option<SessionHeld>,
) -> Option<Provisioned> {
    let mut stop = run.stop.subscribe();
    let startup = Duration::from_secs(spec.startup_timeout_sec);
    let provisioned = tokio::select! {
        r = tokio::time::timeout(startup, provision(app, run, spec, held)) => r,
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
        Ok(Err(e)) => Ending::new(Phase::Failed, e.reason_code(), &e.message()),
        Ok(Ok(x)) if run.stop_cause() == StopCause::None => return Some(x),
        Ok(Ok(_)) => stop_ending(run.stop_cause()),
    };
    finish(app, run, ending).await;
    None
}

/// How a command that ran ends: stopped on request, or by what the runtime reported.
fn result_ending(cause: StopCause, o: &ExecOutcome, timeout_sec: u64) -> Ending {
    let mut e = if cause != StopCause::None {
        stop_ending(cause)
    } else {
        match &o.end {
            EndHint::Stopped => stop_ending(StopCause::User),
            EndHint::OomKilled => Ending::new(
                Phase::Failed,
                "oom_killed",
                "a program exceeded its memory limit and was killed",
            ),
            EndHint::PidsLimit => Ending::new(
                Phase::Failed,
                "pids_limit_exceeded",
                "the run hit its process limit (pids_limit); a fork was refused",
            ),
            EndHint::Timeout => Ending::new(
                Phase::TimedOut,
                "execution_timeout",
                &format!("the command ran longer than timeout_sec ({timeout_sec}s)"),
            ),
            EndHint::LimitExceeded(m) => Ending::new(Phase::Failed, "limit_exceeded", m),
            EndHint::SessionDestroyed => Ending::new(
                Phase::Failed,
                "session_destroyed",
                "the session was deleted during the run",
            ),
            EndHint::Lost(m) => Ending::new(Phase::Failed, "exec_failed", m),
            EndHint::Exited if o.exit_code == 0 => Ending {
                reason_code: None,
                message: None,
                ..Ending::new(Phase::Completed, "", "")
            },
            EndHint::Exited => Ending::new(
                Phase::Failed,
                "nonzero_exit",
                &format!("the command exited with status {}", o.exit_code),
            ),
        }
    };
    e.exit_code = Some(o.exit_code);
    e.usage = Some((o.cpu_time_sec, o.peak_rss_mb, o.network));
    e
}

/// Asks a run to stop: a queued or starting run ends at once; a running one gets TERM (its
/// trap runs), then KILL after the grace period (its runtime's box does both).
pub fn stop(run: &Arc<LiveRun>, cause: StopCause) -> bool {
    if run.phase().is_terminal() || run.stop_cause() != StopCause::None {
        return false;
    }
    run.stop.send_replace(cause);
    true
}

pub async fn shutdown(app: &Arc<App>) {
    let runs: Vec<Arc<LiveRun>> = app.runs.lock().values().cloned().collect();
    let grace = StopCause::Shutdown.grace(app.config.grace());
    for run in &runs {
        stop(run, StopCause::Shutdown);
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

/// How often the checkpoints of sessions whose TTL ended are looked for.
const SAVED_SWEEP_EVERY: Duration = Duration::from_secs(10);

/// Reaps expired sessions, hibernates idle ones, forgets expired checkpoints, finished runs
/// past the log retention and idempotency entries past their TTL, and deletes artifacts past
/// theirs.
pub fn spawn_sweeper(app: &Arc<App>) {
    let weak = Arc::downgrade(app);
    let artifact_every = Duration::from_secs(app.config.sweep_interval_sec.max(1));
    tokio::spawn(async move {
        let mut last_artifact_sweep = Instant::now();
        let mut last_saved_sweep = Instant::now();
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let Some(app) = weak.upgrade() else { break };
            if app.is_shutting_down() {
                break;
            }
            app.reap_sessions();
            app.hibernate_idle().await;
            if last_saved_sweep.elapsed() >= SAVED_SWEEP_EVERY {
                last_saved_sweep = Instant::now();
                app.forget_expired_saved().await;
            }
            let now = app.clock.now_ms();
            let retention = app.config.log_retention_sec as i64 * 1000;
            forget_finished(&app, now - retention);
            if last_artifact_sweep.elapsed() >= artifact_every {
                last_artifact_sweep = Instant::now();
                // Housekeeping only: a claim already treats an expired key as absent. Every
                // second, it was a DELETE on a shared PostgreSQL per replica, and it raced
                // `POST /admin/gc`'s own count.
                let cutoff = now - app.config.idempotency_ttl_sec as i64 * 1000;
                if let Err(e) = store::call(&app.store, move |s| s.idem_purge(cutoff)).await {
                    tracing::warn!(%e, "cannot purge expired idempotency entries");
                }
                let audit_cutoff = now - app.config.audit_retention_days as i64 * 86_400_000;
                if let Err(e) = store::call(&app.store, move |s| s.audit_purge(audit_cutoff)).await
                {
                    tracing::warn!(%e, "cannot purge old audit events");
                }
                crate::artifacts::sweep(&app).await;
                crate::retention::purge_runs(&app).await;
                app.rate_limits.shrink();
                for rt in app.runtimes.all() {
                    rt.reap().await;
                }
            }
        }
    });
}

/// Drops finished runs from memory: those finished before `cutoff`, then the oldest past
/// `max_retained_runs` or past `max_retained_log_bytes` of frames. Their records stay in the
/// store.
fn forget_finished(app: &App, cutoff: i64) {
    let mut runs = app.runs.lock();
    runs.retain(|_, r| {
        let rec = r.record.lock();
        !(rec.phase.is_terminal() && rec.finished_at.is_some_and(|f| f < cutoff))
    });
    let finished: Vec<(i64, String, u64)> = runs
        .values()
        .filter_map(|r| {
            let rec = r.record.lock();
            rec.phase.is_terminal().then(|| {
                (
                    rec.finished_at.unwrap_or(0),
                    rec.id.clone(),
                    r.log.retained_bytes() as u64,
                )
            })
        })
        .collect();
    for id in past_budget(
        finished,
        app.config.max_retained_runs,
        app.config.max_retained_log_bytes,
    ) {
        runs.remove(&id);
    }
}

/// Which finished runs `(finished_at, id, bytes)` to forget so that the newest ones left
/// are at most `max_runs` and hold at most `max_bytes` together.
fn past_budget(
    mut finished: Vec<(i64, String, u64)>,
    max_runs: usize,
    max_bytes: u64,
) -> Vec<String> {
    // Newest first; ids break ties so the choice does not depend on the map's order.
    finished.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| b.1.cmp(&a.1)));
    let mut bytes = 0u64;
    let mut keep = 0;
    for (_, _, b) in &finished {
        if keep == max_runs || bytes + b > max_bytes {
            break;
        }
        bytes += b;
        keep += 1;
    }
    finished
        .split_off(keep)
        .into_iter()
        .map(|(_, id, _)| id)
        .collect()
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
    use super::past_budget;

    fn runs(list: &[(i64, &str, u64)]) -> Vec<(i64, String, u64)> {
        list.iter()
            .map(|(t, id, b)| (*t, id.to_string(), *b))
            .collect()
    }

    #[test]
    fn the_oldest_finished_runs_go_past_the_count_or_the_bytes() {
        let finished = runs(&[(1, "a", 10), (4, "d", 10), (2, "b", 10), (3, "c", 10)]);
        assert!(past_budget(finished.clone(), 10, 1000).is_empty());
        assert_eq!(past_budget(finished.clone(), 2, 1000), ["b", "a"]);
        assert_eq!(past_budget(finished.clone(), 10, 25), ["b", "a"]);
        assert_eq!(past_budget(finished.clone(), 10, 30), ["a"]);
        // A run bigger than the whole budget is not kept, nor anything older than it.
        let big = runs(&[(3, "new", 5), (2, "huge", 500), (1, "old", 5)]);
        assert_eq!(past_budget(big, 10, 100), ["huge", "old"]);
        assert_eq!(past_budget(runs(&[(1, "x", 0)]), 0, 100), ["x"]);
    }
}
