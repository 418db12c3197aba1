//! One running container: runs as execs in it (streamed, with TERM → grace → KILL to the
//! run's user), files in and out by `tar` over an exec's stdin and stdout (the
//! engine's archive API can neither write under a read-only root nor see into a tmpfs), and
//! each run's usage from the container's cgroup.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use futures::StreamExt;
use tokio::io::AsyncWriteExt;

use crate::cgroup::Cgroup;
use crate::engine::{Engine, EngineError};
use crate::spec::{BoxConfig, WORKSPACE};

/// Which output stream bytes came on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// Where a run's output goes, as it comes.
pub type Sink = Arc<dyn Fn(Stream, &[u8]) + Send + Sync>;

/// One command to run in the container.
#[derive(Debug, Clone, Default)]
pub struct RunRequest {
    /// The program and its arguments (no shell unless it is one).
    pub argv: Vec<String>,
    /// Environment added to the container's.
    pub env: BTreeMap<String, String>,
    /// Working directory, relative to the workspace or absolute.
    pub cwd: Option<String>,
    /// Wall-clock limit from the start of the program.
    pub timeout: Duration,
    /// Time between TERM and KILL when the run is stopped or times out.
    pub grace: Duration,
    /// The program's standard input, closed after it (none: empty).
    pub stdin: Option<Vec<u8>>,
}

/// Why a run ended, beyond its exit status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunEnd {
    /// The program exited (or was killed by a signal it did not get from us).
    Exited,
    /// It ran past its timeout and was stopped.
    Timeout,
    /// It was stopped on request.
    Stopped,
    /// The kernel killed a process of it for memory.
    OomKilled,
    /// A fork was refused by the pids limit during it.
    PidsLimit,
    /// The engine went away during the run.
    EngineLost(String),
}

/// How a run went.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// Exit status (128 + signal when killed by one; -1 when unknown).
    pub exit_code: i32,
    /// Why it ended.
    pub end: RunEnd,
    /// CPU time of the run's processes, from the container's cgroup.
    pub cpu_time_sec: Option<f64>,
    /// The cgroup's memory high-water mark during the run, in MiB.
    pub peak_rss_mb: Option<f64>,
    /// The run could not be stopped from inside (a fork bomb at the pids limit leaves no room
    /// for the process that sends the signal): only removing the container ends it.
    pub abandoned: bool,
}

/// Why files could not be written into the workspace.
#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    /// Not enough space or inodes left in the workspace.
    #[error("{0}")]
    WorkspaceFull(String),
    /// A path clashes with what is there (a file where a directory must go, or the reverse).
    #[error("{0}")]
    Conflict(String),
    /// The engine failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// A workspace entry, as `find` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Path relative to the workspace.
    pub path: String,
    /// `f` file, `d` directory, `l` symlink, other letters for the rest.
    pub kind: char,
    /// Size in bytes (of the link itself for a symlink).
    pub size: u64,
}

/// A container this runtime made and owns.
pub struct Container {
    engine: Arc<Engine>,
    /// The engine's id of it.
    pub id: String,
    run_user: String,
    cgroup: parking_lot::Mutex<Option<Cgroup>>,
}

/// KILLs sent (a second apart) before a stopped run's open output is given up on.
const MAX_ESCALATIONS: u8 = 5;

/// What a helper exec printed and how it exited.
pub(crate) struct Collected {
    pub(crate) exit_code: i64,
    pub(crate) stdout: Vec<u8>,
    pub(crate) stderr: Vec<u8>,
}

impl Container {
    pub(crate) fn new(engine: Arc<Engine>, id: String, run_user: String) -> Container {
        Container {
            engine,
            id,
            run_user,
            cgroup: parking_lot::Mutex::new(None),
        }
    }

    /// Creates and starts a container. Its id is handed to `created` before it is started, so
    /// a caller that gives up meanwhile (a startup timeout) can still remove it.
    pub async fn create(
        engine: &Arc<Engine>,
        config: &BoxConfig,
        run_user: &str,
        created: impl FnOnce(&str),
    ) -> Result<Container, EngineError> {
        let docker = engine.client().await?;
        let options = bollard::query_parameters::CreateContainerOptionsBuilder::default()
            .name(&config.name)
            .build();
        let made = docker
            .create_container(Some(options), config.body())
            .await
            .map_err(|e| engine.error(e))?;
        created(&made.id);
        let container = Container::new(engine.clone(), made.id, run_user.to_string());
        if let Err(e) = docker.start_container(&container.id, None).await {
            container.remove().await;
            return Err(engine.error(e));
        }
        container.locate_cgroup();
        Ok(container)
    }

    /// Sets the memory cap (swap still off) and the CPUs of a running container: a warm
    /// pool's container takes the limits of the run it is handed to.
    pub async fn resize(&self, memory_mb: u64, cpu: f64) -> Result<(), EngineError> {
        let docker = self.engine.client().await?;
        let memory = (memory_mb as i64) << 20;
        docker
            .update_container(
                &self.id,
                bollard::models::ContainerUpdateBody {
                    memory: Some(memory),
                    memory_swap: Some(memory),
                    nano_cpus: Some((cpu * 1e9) as i64),
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| self.engine.error(e))
    }

    fn locate_cgroup(&self) {
        *self.cgroup.lock() = Cgroup::find(&self.engine.settings().cgroup_root, &self.id);
    }

    /// Removes it, and everything running in it; an engine that is gone is not an error here
    /// (the reaper removes the container once the engine is back).
    pub async fn remove(&self) {
        if let Err(e) = self.engine.remove(&self.id).await {
            tracing::warn!(container = %self.id, %e, "cannot remove a container");
        }
    }

    /// Whether the engine still runs it.
    pub async fn is_running(&self) -> bool {
        let Ok(docker) = self.engine.client().await else {
            return false;
        };
        docker
            .inspect_container(&self.id, None)
            .await
            .ok()
            .and_then(|c| c.state?.running)
            .unwrap_or(false)
    }

    /// Starts an exec; its output stream and stdin.
    async fn start(
        &self,
        argv: Vec<String>,
        env: Vec<String>,
        cwd: Option<String>,
        stdin: bool,
    ) -> Result<(String, StartExecResults), EngineError> {
        let docker = self.engine.client().await?;
        let exec = docker
            .create_exec(
                &self.id,
                CreateExecOptions {
                    cmd: Some(argv),
                    env: Some(env),
                    working_dir: cwd,
                    user: Some(self.run_user.clone()),
                    attach_stdin: Some(stdin),
                    attach_stdout: Some(true),
                    attach_stderr: Some(true),
                    tty: Some(false),
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| self.engine.error(e))?;
        let started = docker
            .start_exec(
                &exec.id,
                Some(StartExecOptions {
                    detach: false,
                    tty: false,
                    output_capacity: Some(64 << 10),
                }),
            )
            .await
            .map_err(|e| self.engine.error(e))?;
        Ok((exec.id, started))
    }

    /// The exit status of a finished exec (its stream may end a moment before the engine
    /// records the status).
    async fn exit_code(&self, exec_id: &str) -> Result<i64, EngineError> {
        let docker = self.engine.client().await?;
        for _ in 0..200 {
            let info = docker
                .inspect_exec(exec_id)
                .await
                .map_err(|e| self.engine.error(e))?;
            if info.running != Some(true) {
                return Ok(info.exit_code.unwrap_or(-1));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(-1)
    }

    /// Runs a helper command to its end, feeding it `input` and keeping at most `cap` bytes
    /// of its stdout (the rest is drained).
    pub(crate) async fn collect(
        &self,
        argv: &[&str],
        input: Option<Vec<u8>>,
        cap: usize,
    ) -> Result<Collected, EngineError> {
        let argv = argv.iter().map(|s| s.to_string()).collect();
        let (exec_id, started) = self.start(argv, Vec::new(), None, input.is_some()).await?;
        let StartExecResults::Attached {
            mut output,
            input: mut stdin,
        } = started
        else {
            return Err(EngineError::Api(
                "the engine detached an attached exec".into(),
            ));
        };
        let writer = async move {
            if let Some(data) = input {
                // A write error means the program stopped reading; its status says why.
                let _ = stdin.write_all(&data).await;
            }
            // Half-closes the connection: the program sees the end of its input.
            let _ = stdin.shutdown().await;
        };
        let reader = async {
            let mut out = Vec::new();
            let mut err = Vec::new();
            while let Some(item) = output.next().await {
                match item.map_err(|e| self.engine.error(e))? {
                    bollard::container::LogOutput::StdOut { message } => {
                        let room = cap.saturating_sub(out.len());
                        out.extend_from_slice(&message[..message.len().min(room)]);
                    }
                    bollard::container::LogOutput::StdErr { message } if err.len() < 64 << 10 => {
                        err.extend_from_slice(&message);
                    }
                    _ => {}
                }
            }
            Ok::<_, EngineError>((out, err))
        };
        let ((), read) = tokio::join!(writer, reader);
        let (stdout, stderr) = read?;
        Ok(Collected {
            exit_code: self.exit_code(&exec_id).await?,
            stdout,
            stderr,
        })
    }

    /// Runs a command, streaming its output to `sink`, until it exits, times out or `stop`
    /// resolves. Stopping sends TERM to the run's process group, KILL after the grace, then
    /// KILL to every process of the run's user (which reaches what left the group too).
    pub async fn run(
        &self,
        req: RunRequest,
        sink: Sink,
        stop: impl Future<Output = ()>,
    ) -> Result<RunOutcome, EngineError> {
        self.run_fed(req, None, sink, stop).await
    }

    /// [`Container::run`] with the program's stdin fed from `input` while it runs, instead of
    /// `req.stdin`: each chunk in order, then end of file once every sender is gone (an
    /// interactive run). A chunk waits while the program does not read; the feeding stops
    /// with the run.
    pub async fn run_fed(
        &self,
        req: RunRequest,
        input: Option<tokio::sync::mpsc::UnboundedReceiver<bytes::Bytes>>,
        sink: Sink,
        stop: impl Future<Output = ()>,
    ) -> Result<RunOutcome, EngineError> {
        let argv = req.argv.clone();
        let env = req.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let cwd = absolute(req.cwd.as_deref().unwrap_or(WORKSPACE));
        let cgroup = self.cgroup.lock().clone();
        let peak_reset = cgroup.as_ref().is_some_and(|c| c.reset_peak());
        let before = cgroup.as_ref().map(|c| c.sample());
        let t0 = Instant::now();
        let (exec_id, started) = self
            .start(argv, env, Some(cwd), req.stdin.is_some() || input.is_some())
            .await?;
        let StartExecResults::Attached {
            mut output,
            input: mut stdin,
        } = started
        else {
            return Err(EngineError::Api(
                "the engine detached an attached exec".into(),
            ));
        };
        // Fed beside the output loop: a program that writes before it reads its input
        // (or never reads it) must not stall the run.
        let feeder = match (input, req.stdin) {
            (Some(mut rx), _) => Some(tokio::spawn(async move {
                while let Some(chunk) = rx.recv().await {
                    // Flushed chunk by chunk: the program is waiting for this line.
                    if stdin.write_all(&chunk).await.is_err() || stdin.flush().await.is_err() {
                        return;
                    }
                }
                let _ = stdin.shutdown().await;
            })),
            (None, Some(data)) => Some(tokio::spawn(async move {
                // A write error means the program stopped reading; its status says why.
                let _ = stdin.write_all(&data).await;
                let _ = stdin.shutdown().await;
            })),
            (None, None) => None,
        };
        let _feeder = feeder.map(AbortOnDrop);

        let mut end = RunEnd::Exited;
        let mut stop = std::pin::pin!(stop);
        let timeout = tokio::time::sleep(req.timeout);
        tokio::pin!(timeout);
        let mut stopping = false;
        let mut abandoned = false;
        let mut escalations = 0u8;
        let escalate_at = tokio::time::sleep(Duration::MAX / 4);
        tokio::pin!(escalate_at);
        loop {
            tokio::select! {
                item = output.next() => match item {
                    Some(Ok(bollard::container::LogOutput::StdOut { message })) => {
                        sink(Stream::Stdout, &message)
                    }
                    Some(Ok(bollard::container::LogOutput::StdErr { message })) => {
                        sink(Stream::Stderr, &message)
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => {
                        end = RunEnd::EngineLost(self.engine.error(e).to_string());
                        break;
                    }
                    None => break,
                },
                _ = &mut stop, if !stopping => {
                    end = RunEnd::Stopped;
                    stopping = true;
                    self.signal("TERM");
                    escalate_at.as_mut().reset(tokio::time::Instant::now() + req.grace);
                }
                _ = &mut timeout, if !stopping => {
                    end = RunEnd::Timeout;
                    stopping = true;
                    self.signal("TERM");
                    escalate_at.as_mut().reset(tokio::time::Instant::now() + req.grace);
                }
                _ = &mut escalate_at, if stopping => {
                    escalations += 1;
                    if escalations > MAX_ESCALATIONS {
                        // The signals could not be delivered (no process could be started to
                        // send them) or something holds the output open: waiting on would
                        // hang the run forever.
                        tracing::warn!(container = %self.id, "a stopped run's output stays open");
                        abandoned = true;
                        break;
                    }
                    self.signal("KILL");
                    escalate_at.as_mut().reset(tokio::time::Instant::now() + Duration::from_secs(1));
                }
            }
        }
        let exit_code = match &end {
            RunEnd::EngineLost(_) => -1,
            _ if abandoned => 137,
            _ => match self.exit_code(&exec_id).await {
                Ok(code) => code as i32,
                Err(e) => {
                    end = RunEnd::EngineLost(e.to_string());
                    -1
                }
            },
        };
        let wall = t0.elapsed();
        let mut cpu_time_sec = None;
        if let (Some(cg), Some(before)) = (&cgroup, before) {
            let after = cg.sample();
            cpu_time_sec = Some(after.cpu_ns.saturating_sub(before.cpu_ns) as f64 / 1e9);
            // What the kernel did explains a timeout or an exit better than they do.
            if matches!(end, RunEnd::Exited | RunEnd::Timeout) {
                if after.oom_kills > before.oom_kills {
                    end = RunEnd::OomKilled;
                } else if after.pids_max_hits > before.pids_max_hits {
                    end = RunEnd::PidsLimit;
                }
            }
        }
        let peak_rss_mb = match &cgroup {
            Some(cg) if peak_reset => cg.peak_bytes().map(|b| b as f64 / (1024.0 * 1024.0)),
            _ => self.stats_peak_mb().await,
        };
        tracing::debug!(container = %self.id, ?end, exit_code, ?wall, "run ended");
        Ok(RunOutcome {
            exit_code,
            end,
            cpu_time_sec,
            peak_rss_mb,
            abandoned,
        })
    }

    /// The container's memory high-water mark from the engine's stats (its whole life).
    async fn stats_peak_mb(&self) -> Option<f64> {
        let docker = self.engine.client().await.ok()?;
        let options = bollard::query_parameters::StatsOptionsBuilder::default()
            .stream(false)
            .one_shot(true)
            .build();
        let stats = docker.stats(&self.id, Some(options)).next().await?.ok()?;
        let max = stats.memory_stats?.max_usage?;
        Some(max as f64 / (1024.0 * 1024.0))
    }

    /// Sends a signal to every process of the run's user, in the background (the output
    /// loop keeps draining meanwhile). Runs of a container are one at a time and the idle init
    /// runs as another user, so this is the run and whatever it started (in its process group
    /// or not). `pkill` never signals itself.
    fn signal(&self, signal: &str) {
        let uid = self.run_user.split(':').next().unwrap_or("").to_string();
        self.spawn_helper(vec![
            "/usr/bin/pkill".into(),
            "--signal".into(),
            signal.into(),
            "-U".into(),
            uid,
        ]);
    }

    fn spawn_helper(&self, argv: Vec<String>) {
        let engine = self.engine.clone();
        let id = self.id.clone();
        let user = self.run_user.clone();
        tokio::spawn(async move {
            let me = Container::new(engine, id, user);
            let refs: Vec<&str> = argv.iter().map(String::as_str).collect();
            if let Err(e) = me.collect(&refs, None, 0).await {
                tracing::warn!(container = %me.id, %e, "cannot signal a run");
            }
        });
    }

    /// Whether `path` (relative to the workspace, or absolute) is a directory the run's user
    /// sees.
    pub async fn is_dir(&self, path: &str) -> Result<bool, EngineError> {
        let path = absolute(path);
        let out = self
            .collect(&["/usr/bin/test", "-d", &path], None, 0)
            .await?;
        Ok(out.exit_code == 0)
    }

    /// Every entry under the workspace (links not followed, other filesystems not entered).
    pub async fn list(&self) -> Result<Vec<Entry>, EngineError> {
        let out = self
            .collect(
                &[
                    "/usr/bin/find",
                    WORKSPACE,
                    "-xdev",
                    "-mindepth",
                    "1",
                    "-printf",
                    "%y %s %P\\0",
                ],
                None,
                64 << 20,
            )
            .await?;
        Ok(parse_listing(&out.stdout))
    }

    /// Free bytes and free inodes of the workspace.
    async fn free_space(&self) -> Result<(u64, u64), EngineError> {
        let out = self
            .collect(
                &["/usr/bin/stat", "-f", "-c", "%a %S %d %c", WORKSPACE],
                None,
                4096,
            )
            .await?;
        let text = String::from_utf8_lossy(&out.stdout);
        let n: Vec<u64> = text
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        match n[..] {
            // A filesystem that counts no inodes at all (gVisor's tmpfs) has no inode limit.
            [blocks, size, _, 0] => Ok((blocks * size, u64::MAX)),
            [blocks, size, inodes, _] => Ok((blocks * size, inodes)),
            _ => Err(EngineError::Api(format!(
                "cannot read the workspace's free space: {text}"
            ))),
        }
    }

    /// Writes files (paths relative to the workspace) and directories, all or nothing: the
    /// space and the paths are checked first, and what a failed extraction created is
    /// removed again.
    pub async fn write_files(
        &self,
        dirs: &[String],
        files: &[(String, Vec<u8>)],
    ) -> Result<(), FilesError> {
        if dirs.is_empty() && files.is_empty() {
            return Ok(());
        }
        let existing: HashMap<String, char> = self
            .list()
            .await?
            .into_iter()
            .map(|e| (e.path, e.kind))
            .collect();
        let mut needed_dirs = std::collections::BTreeSet::new();
        for d in dirs {
            needed_dirs.insert(d.clone());
        }
        for (p, _) in files {
            let mut parent = std::path::Path::new(p).parent();
            while let Some(d) = parent.filter(|d| !d.as_os_str().is_empty()) {
                needed_dirs.insert(d.to_string_lossy().into_owned());
                parent = d.parent();
            }
        }
        for d in &needed_dirs {
            if existing.get(d).is_some_and(|k| *k != 'd') {
                return Err(FilesError::Conflict(format!(
                    "cannot write the upload: '{d}' exists and is not a directory"
                )));
            }
        }
        for (p, _) in files {
            if existing.get(p).is_some_and(|k| *k == 'd') {
                return Err(FilesError::Conflict(format!(
                    "cannot write the upload: '{p}' is a directory"
                )));
            }
        }
        // tmpfs rounds each file up to pages and each new entry takes an inode.
        let page = 4096u64;
        let bytes: u64 = files
            .iter()
            .map(|(_, d)| (d.len() as u64).div_ceil(page) * page)
            .sum();
        let new_entries = (files.len() + needed_dirs.len()) as u64;
        let (free_bytes, free_inodes) = self.free_space().await?;
        if bytes > free_bytes || new_entries > free_inodes {
            return Err(FilesError::WorkspaceFull(format!(
                "the upload does not fit in the workspace: it needs {bytes} bytes and \
                 {new_entries} entries, {free_bytes} bytes and {free_inodes} entries are free"
            )));
        }
        let archive = build_tar(&needed_dirs, files).map_err(|e| {
            FilesError::Engine(EngineError::Api(format!("cannot pack the upload: {e}")))
        })?;
        let out = self
            .collect(
                &[
                    "/usr/bin/tar",
                    "-x",
                    "--no-same-owner",
                    "--no-same-permissions",
                    "-C",
                    WORKSPACE,
                    "-f",
                    "-",
                ],
                Some(archive),
                0,
            )
            .await?;
        if out.exit_code == 0 {
            return Ok(());
        }
        let mut created: Vec<String> = files
            .iter()
            .map(|(p, _)| p.clone())
            .chain(needed_dirs.iter().cloned())
            .filter(|p| !existing.contains_key(p))
            .collect();
        // Deepest first, so directories are empty when their turn comes.
        created.sort_by_key(|p| std::cmp::Reverse(p.matches('/').count()));
        if !created.is_empty() {
            let mut argv = vec!["/bin/rm", "-rf", "--"];
            let abs: Vec<String> = created.iter().map(|p| format!("{WORKSPACE}/{p}")).collect();
            argv.extend(abs.iter().map(String::as_str));
            let _ = self.collect(&argv, None, 0).await;
        }
        let why = String::from_utf8_lossy(&out.stderr).trim().to_string();
        if why.contains("No space left") || why.contains("Disk quota") {
            Err(FilesError::WorkspaceFull(format!(
                "the upload does not fit in the workspace: {why}"
            )))
        } else {
            Err(FilesError::Conflict(format!(
                "cannot write the upload: {why}"
            )))
        }
    }

    /// The contents of regular files (paths relative to the workspace), read until `cap`
    /// bytes; files the run's user cannot read are left out.
    pub async fn read_files(
        &self,
        paths: &[String],
        cap: u64,
    ) -> Result<Vec<(String, Vec<u8>)>, EngineError> {
        if paths.is_empty() {
            return Ok(Vec::new());
        }
        let mut list = Vec::new();
        for p in paths {
            list.extend_from_slice(p.as_bytes());
            list.push(0);
        }
        // The tar stream carries headers and padding besides the contents.
        let room = cap as usize + (paths.len() + 2) * 1024;
        let out = self
            .collect(
                &[
                    "/usr/bin/tar",
                    "-c",
                    "--no-recursion",
                    "--null",
                    "-C",
                    WORKSPACE,
                    "-T",
                    "-",
                    "-f",
                    "-",
                ],
                Some(list),
                room,
            )
            .await?;
        let mut files = Vec::new();
        let mut archive = tar::Archive::new(&out.stdout[..]);
        let Ok(entries) = archive.entries() else {
            return Ok(files);
        };
        for entry in entries {
            let Ok(mut entry) = entry else { break };
            if entry.header().entry_type() != tar::EntryType::Regular {
                continue;
            }
            let Ok(path) = entry.path().map(|p| p.to_string_lossy().into_owned()) else {
                continue;
            };
            let mut data = Vec::new();
            if std::io::Read::read_to_end(&mut entry, &mut data).is_err() {
                break;
            }
            files.push((path, data));
        }
        Ok(files)
    }
}

/// A path as the container sees it: relative ones are under the workspace.
pub(crate) fn absolute(path: &str) -> String {
    if path.starts_with('/') {
        path.to_string()
    } else {
        format!("{WORKSPACE}/{path}")
    }
}

/// `find -printf '%y %s %P\0'` output, as entries.
pub fn parse_listing(raw: &[u8]) -> Vec<Entry> {
    raw.split(|b| *b == 0)
        .filter_map(|rec| {
            let text = std::str::from_utf8(rec).ok()?;
            let (kind, rest) = text.split_once(' ')?;
            let (size, path) = rest.split_once(' ')?;
            Some(Entry {
                path: path.to_string(),
                kind: kind.chars().next()?,
                size: size.parse().ok()?,
            })
        })
        .filter(|e| !e.path.is_empty())
        .collect()
}

/// A tar of the upload: directories 0755, files 0644, no links, names as given.
pub fn build_tar(
    dirs: &std::collections::BTreeSet<String>,
    files: &[(String, Vec<u8>)],
) -> std::io::Result<Vec<u8>> {
    let mut b = tar::Builder::new(Vec::new());
    for d in dirs {
        let mut h = tar::Header::new_ustar();
        h.set_entry_type(tar::EntryType::Directory);
        h.set_mode(0o755);
        h.set_size(0);
        b.append_data(&mut h, format!("{d}/"), std::io::empty())?;
    }
    for (p, data) in files {
        let mut h = tar::Header::new_ustar();
        h.set_entry_type(tar::EntryType::Regular);
        h.set_mode(0o644);
        h.set_size(data.len() as u64);
        b.append_data(&mut h, p, &data[..])?;
    }
    b.into_inner()
}

/// Ends a helper task with the run that started it.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listings_parse_with_spaces_and_newlines_in_names() {
        let raw = b"f 12 a b.txt\0d 80 dir\0l 5 dir/link\0f 0 odd\nname\0";
        let got = parse_listing(raw);
        assert_eq!(got.len(), 4);
        assert_eq!(
            got[0],
            Entry {
                path: "a b.txt".into(),
                kind: 'f',
                size: 12
            }
        );
        assert_eq!(got[2].kind, 'l');
        assert_eq!(got[3].path, "odd\nname");
    }

    #[test]
    fn upload_tars_hold_plain_entries_only() {
        let dirs = std::collections::BTreeSet::from(["d".to_string()]);
        let data = build_tar(&dirs, &[("d/x.txt".into(), b"hello".to_vec())]).unwrap();
        let mut a = tar::Archive::new(&data[..]);
        let kinds: Vec<(String, tar::EntryType, u32)> = a
            .entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.path().unwrap().to_string_lossy().into_owned(),
                    e.header().entry_type(),
                    e.header().mode().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            kinds,
            [
                ("d/".to_string(), tar::EntryType::Directory, 0o755),
                ("d/x.txt".to_string(), tar::EntryType::Regular, 0o644)
            ]
        );
    }
}
