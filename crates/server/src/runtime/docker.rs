//! The `docker` runtime: a box is one container on a Docker engine (wasmsand-docker), on an
//! image built from Debian's packages by `sandboxd images build`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use globset::GlobSet;
use parking_lot::Mutex;
use serde_json::json;
use tokio::sync::watch;
use wasmsand_docker::images::{
    self as docker_images, EXEC_SCRATCH_LABEL, ImageInfo as EngineImage, RECIPES,
};
use wasmsand_docker::{BoxConfig, Container, Engine, EngineInfo, EngineSettings, RunEnd, labels};

use super::{
    BoxSpec, Candidate, EndHint, ExecOutcome, ExecRequest, FilesError, FsEntry, FsFailure, FsOp,
    FsReply, Fut, ImageRef, MAX_WALK, OutputSink, ProvisionError, Runtime, SandboxBox, StopCause,
};
use crate::config::{Config, DockerConfig};
use crate::egress_proxy::EgressProxy;
use crate::error::{ApiError, ErrorCode};
use crate::logs::Stream;
use crate::views::{ImageInfo, RuntimeInfo};

/// The PRD's image names, and what they run here. Debian 12 has no Node.js 20 and no Go
/// 1.22: those names run Debian's Node.js 18 and Go 1.19, and the answers say which image
/// really ran. An operator changes or adds names with `SANDBOX_IMAGE_ALIASES`.
pub(crate) const DEFAULT_ALIASES: &[(&str, &str)] = &[
    ("python:3.11-slim", "wasmsand/python:current"),
    ("python:3.11", "wasmsand/python:current"),
    ("python:3", "wasmsand/python:current"),
    ("python", "wasmsand/python:current"),
    ("node:20-alpine", "wasmsand/node:current"),
    ("node:20", "wasmsand/node:current"),
    ("node", "wasmsand/node:current"),
    ("golang:1.22-alpine", "wasmsand/go:current"),
    ("golang:1.22", "wasmsand/go:current"),
    ("golang", "wasmsand/go:current"),
    ("eclipse-temurin:17-jre", "wasmsand/java:current"),
    ("eclipse-temurin:17", "wasmsand/java:current"),
    ("openjdk:17", "wasmsand/java:current"),
    ("debian", "wasmsand/generic:current"),
    ("ubuntu", "wasmsand/generic:current"),
    ("busybox", "wasmsand/generic:current"),
];

/// The internal network of containers with an egress allowlist (see `egress_proxy`).
pub(crate) const EGRESS_NETWORK: &str = "wasmsand-egress";

/// How long an engine status is reused by `/runtimes` and the availability check.
const STATUS_TTL: Duration = Duration::from_secs(2);

pub(crate) struct DockerRuntime {
    config: Config,
    engine: Arc<Engine>,
    aliases: BTreeMap<String, String>,
    maker: Arc<Maker>,
    status: tokio::sync::Mutex<Option<(Instant, Result<EngineInfo, String>)>>,
    runsc_probe: tokio::sync::OnceCell<Result<(), String>>,
    /// The egress proxy, started with the first box that has an allowlist.
    egress: tokio::sync::Mutex<Option<(Arc<EgressProxy>, crate::egress_proxy::Seal)>>,
}

/// A box's way out: its address on the egress network and its gate there.
struct Attached {
    proxy: Arc<EgressProxy>,
    ip: IpAddr,
    gate: Arc<wasmsand::Gate>,
    events: super::EgressLog,
}

impl DockerRuntime {
    pub(crate) fn new(config: &Config, instance: String) -> DockerRuntime {
        let d = &config.docker;
        let mut aliases: BTreeMap<String, String> = DEFAULT_ALIASES
            .iter()
            .map(|(a, t)| (a.to_string(), t.to_string()))
            .collect();
        for (alias, target) in &config.image_aliases {
            if target == crate::images::DEFAULT_IMAGE {
                aliases.remove(alias);
            } else {
                aliases.insert(alias.clone(), target.clone());
            }
        }
        // Each box gets its own pair of user ids: nothing of one container can signal, or
        // count against the process limit of, another.
        let seed = std::process::id() as u64 * 7919 + crate::util::now_ms() as u64;
        let engine = Engine::new(EngineSettings {
            host: d.host.clone(),
            instance,
            cgroup_root: "/sys/fs/cgroup".into(),
        });
        DockerRuntime {
            maker: Arc::new(Maker {
                config: config.clone(),
                engine: engine.clone(),
                live: Arc::default(),
                pool: Mutex::default(),
                filling: Mutex::default(),
                closed: AtomicBool::new(false),
                uid: AtomicU64::new(seed % 30_000),
            }),
            engine,
            config: config.clone(),
            aliases,
            status: tokio::sync::Mutex::new(None),
            runsc_probe: tokio::sync::OnceCell::new(),
            egress: tokio::sync::Mutex::new(None),
        }
    }

    /// The proxy on the egress network's gateway (the network made if missing). A failure is
    /// not kept: the next box tries again.
    async fn egress_proxy(&self) -> Result<Arc<EgressProxy>, String> {
        let mut slot = self.egress.lock().await;
        if let Some((p, _)) = slot.as_ref() {
            return Ok(p.clone());
        }
        let (gateway, iface) = self
            .engine
            .internal_network(EGRESS_NETWORK)
            .await
            .map_err(|e| format!("cannot set up the egress network: {e}"))?;
        let proxy = EgressProxy::start(gateway)
            .await
            .map_err(|e| format!("cannot start the egress proxy on {gateway}: {e}"))?;
        // Fail closed: without the rules a container could reach the host's own services.
        let seal = crate::egress_proxy::Seal::close(&iface, gateway, proxy.addr().port())
            .await
            .map_err(|e| {
                format!("cannot close the egress network ({iface}) to the host's services: {e}")
            })?;
        *slot = Some((proxy.clone(), seal));
        Ok(proxy)
    }

    /// Puts a new container behind the proxy under `policy`.
    async fn attach(
        &self,
        container: &Container,
        proxy: Arc<EgressProxy>,
        policy: wasmsand::egress::EgressPolicy,
    ) -> Result<Attached, String> {
        let ip = self
            .engine
            .container_ip(&container.id, EGRESS_NETWORK)
            .await
            .map_err(|e| e.to_string())?;
        let events = super::EgressLog::default();
        let gate = Arc::new(wasmsand::Gate::new(wasmsand::Network {
            allowlist: policy,
            resolve: self.config.egress_resolve.clone(),
            resolver: None,
            limits: wasmsand::NetLimits::default(),
            // TLS runs end to end inside the tunnel: the container's own trust store decides.
            ca_pem: Vec::new(),
            on_event: Some(events.sink()),
        }));
        proxy.register(ip, gate.clone());
        Ok(Attached {
            proxy,
            ip,
            gate,
            events,
        })
    }

    fn settings(&self) -> &DockerConfig {
        &self.config.docker
    }

    /// The engine's status, at most [`STATUS_TTL`] old.
    async fn status(&self) -> Result<EngineInfo, String> {
        if !self.settings().enabled {
            return Err("the docker runtime is turned off (SANDBOX_DOCKER_ENABLED=false)".into());
        }
        let mut slot = self.status.lock().await;
        if let Some((at, s)) = slot.as_ref()
            && at.elapsed() < STATUS_TTL
        {
            return s.clone();
        }
        let s = self
            .engine
            .info()
            .await
            .map_err(|e| e.to_string())
            .and_then(|info| {
                let d = self.settings();
                let wanted = [
                    Some((&d.oci_runtime, "SANDBOX_DOCKER_RUNTIME")),
                    d.egress_oci_runtime
                        .as_ref()
                        .map(|r| (r, "SANDBOX_DOCKER_EGRESS_RUNTIME")),
                ];
                for (wanted, key) in wanted.into_iter().flatten() {
                    if !info.runtimes.iter().any(|r| r == wanted) {
                        return Err(format!(
                            "the OCI runtime {wanted:?} ({key}) is not registered with the Docker \
                         engine, which has: {}; register it in dockerd's daemon.json",
                            info.runtimes.join(", ")
                        ));
                    }
                }
                Ok(info)
            });
        let s = match s {
            Ok(info) if self.settings().oci_runtime == "runsc" => {
                match self.runsc_probe.get_or_init(|| self.probe_runsc()).await {
                    Ok(()) => Ok(info),
                    Err(e) => Err(e.clone()),
                }
            }
            other => other,
        };
        *slot = Some((Instant::now(), s.clone()));
        s
    }

    /// Whether gVisor can serve runs here: a container under runsc, a run in it, and that run
    /// stopped by a signal from another exec, the way every cancel and timeout stops runs.
    /// Done once per process; the error says what failed.
    async fn probe_runsc(&self) -> Result<(), String> {
        let mut image = None;
        for r in RECIPES.iter().rev() {
            if let Ok(Some(i)) = self.engine.built(r).await {
                image = Some(i);
                break;
            }
        }
        let image = image.ok_or(
            "gVisor (runsc) cannot be checked: no image is built yet (sandboxd images build)",
        )?;
        let owner = Owner {
            owner: "probe".into(),
            image: "runsc-probe".into(),
            session: None,
            run: Some("runsc-probe".into()),
        };
        let c = self
            .maker
            .make(&image, Some(owner), 64, 1.0, &BTreeMap::new(), None)
            .await
            .map_err(|e| {
                format!(
                    "gVisor (runsc) cannot start a container here: {}",
                    e.message()
                )
            })?;
        let sink: wasmsand_docker::Sink = Arc::new(|_, _| {});
        let stop = tokio::time::sleep(Duration::from_millis(500));
        let ran = c
            .run(
                wasmsand_docker::RunRequest {
                    argv: vec!["sleep".into(), "30".into()],
                    timeout: Duration::from_secs(20),
                    grace: Duration::from_secs(1),
                    ..Default::default()
                },
                sink,
                stop,
            )
            .await;
        let alive = c.is_running().await;
        c.remove().await;
        self.maker.forget(&c.id);
        match ran {
            Ok(o) if o.end == RunEnd::Stopped && alive => Ok(()),
            Ok(o) => Err(format!(
                "gVisor (runsc, as registered with this dockerd) cannot stop a run: a signal sent \
                 from a second exec {} (run ended {:?}, status {}); this service stops every \
                 cancelled or timed-out run that way, so runsc is refused here",
                if alive {
                    "did not end it"
                } else {
                    "brought the whole sandbox down"
                },
                o.end,
                o.exit_code
            )),
            Err(e) => Err(format!(
                "gVisor (runsc) cannot stop a run here: the sandbox failed while a second exec \
                 signalled the first ({e}); runsc is refused"
            )),
        }
    }

    fn boxed(
        &self,
        container: Container,
        image: &EngineImage,
        egress: Option<Attached>,
    ) -> Arc<dyn SandboxBox> {
        Arc::new(DockerBox {
            container: Arc::new(container),
            digest: image.id.clone(),
            alive: AtomicBool::new(true),
            destroyed: AtomicBool::new(false),
            live: self.maker.live.clone(),
            egress,
        })
    }

    fn unavailable(&self, reason: &str) -> ApiError {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::RuntimeUnavailable,
            "Requested runtime 'docker' is not available",
        )
        .with_details(json!({
            "runtime": "docker", "available": false, "reason": reason, "suggested": ["wasm"],
        }))
    }
}

/// The recipe behind a canonical image name (`wasmsand/python:current`).
fn recipe_of(canonical: &str) -> Option<&'static docker_images::Recipe> {
    canonical
        .strip_prefix("wasmsand/")
        .and_then(|_| docker_images::recipe(canonical))
}

fn is_dotnet(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n.starts_with("dotnet") || n.contains("/dotnet")
}

impl Runtime for DockerRuntime {
    fn name(&self) -> &'static str {
        "docker"
    }

    fn version(&self) -> String {
        match self.status.try_lock().ok().and_then(|s| s.clone()) {
            Some((_, Ok(info))) => info.version,
            _ => "unknown".into(),
        }
    }

    fn knows_image(&self, name: &str) -> bool {
        self.aliases.contains_key(name) || recipe_of(name).is_some() || is_dotnet(name)
    }

    fn image_names(&self) -> Vec<String> {
        self.aliases.keys().cloned().collect()
    }

    fn resolve_image(&self, name: &str) -> Result<ImageRef, ApiError> {
        if is_dotnet(name) {
            return Err(ApiError::invalid(format!(
                ".NET images are not available: base_image '{name}' has no Debian package \
                 (images here are built from Debian's packages only)"
            ))
            .with_details(json!({ "base_image": name, "reason": "no_debian_package" })));
        }
        let target = self.aliases.get(name).map(String::as_str).unwrap_or(name);
        let canonical = if target.contains(':') {
            target.to_string()
        } else {
            format!("{target}:current")
        };
        if recipe_of(&canonical).is_none() {
            let mut known: Vec<String> = RECIPES
                .iter()
                .map(|r| format!("wasmsand/{}", r.name))
                .collect();
            known.extend(self.aliases.keys().cloned());
            return Err(ApiError::invalid(format!(
                "unknown base_image '{name}' for runtime docker; known images: {}",
                known.join(", ")
            ))
            .with_details(json!({ "base_image": name, "runtime": "docker", "known": known })));
        }
        Ok(ImageRef {
            requested: name.to_string(),
            canonical,
        })
    }

    fn default_image(&self) -> &'static str {
        "wasmsand/generic:current"
    }

    fn image_digest<'a>(&'a self, image: &'a ImageRef) -> Fut<'a, String> {
        Box::pin(async move {
            match self.engine.image(&image.canonical).await {
                Ok(Some(i)) => i.id,
                _ => String::new(),
            }
        })
    }

    fn normalize(&self, cpu: Option<f64>, memory_mb: Option<u64>) -> Result<(f64, u64), ApiError> {
        let ncpu = match self.status.try_lock().ok().and_then(|s| s.clone()) {
            Some((_, Ok(info))) => info.ncpu as f64,
            _ => std::thread::available_parallelism().map_or(1, |n| n.get()) as f64,
        };
        let max_cpu = self.config.max_cpu.min(ncpu);
        super::wasm::check_cpu(&self.config, cpu, max_cpu)?;
        let max_mem = self.config.max_mem_mb;
        // The engine refuses less than 6 MiB.
        let mem = memory_mb.unwrap_or(self.settings().default_mem_mb);
        if !(6..=max_mem).contains(&mem) {
            return Err(ApiError::invalid(format!(
                "resources.memory_mb must be in [6, {max_mem}] for runtime docker"
            ))
            .with_details(json!({ "max_mem_mb": max_mem })));
        }
        Ok((cpu.unwrap_or(1.0_f64.min(max_cpu)), mem))
    }

    fn interactive_supported(&self) -> bool {
        // The exec's stdin is attached (no TTY) and fed from the run's stdin frames.
        true
    }

    fn egress_supported(&self) -> bool {
        // The runsc that runs the other containers has its network off (`--network=none`), and
        // Debian's runsc cannot start its own network stack on Linux 6.11 and later (it takes
        // every network namespace there for the host's): under gVisor, only a runsc with
        // `--network=host`, inside the container's own namespace, reaches the proxy.
        self.settings().oci_runtime != "runsc" || self.settings().egress_oci_runtime.is_some()
    }

    fn check_available(&self) -> Fut<'_, Result<(), ApiError>> {
        Box::pin(async move {
            self.status()
                .await
                .map(|_| ())
                .map_err(|r| self.unavailable(&r))
        })
    }

    fn create_box(&self, spec: BoxSpec) -> Fut<'_, Result<Arc<dyn SandboxBox>, ProvisionError>> {
        Box::pin(async move {
            self.status().await.map_err(ProvisionError::Unavailable)?;
            let image = match self.engine.image(&spec.image.canonical).await {
                Ok(Some(i)) => i,
                Ok(None) => {
                    let name = recipe_of(&spec.image.canonical).map_or("", |r| r.name);
                    return Err(ProvisionError::ImageMissing {
                        image: spec.image.canonical.clone(),
                        build: format!("sandboxd images build {name}"),
                    });
                }
                Err(e) => return Err(ProvisionError::Unavailable(e.to_string())),
            };
            let owned = Owner {
                owner: spec.owner.clone(),
                image: spec.image.requested.clone(),
                session: spec.session.clone(),
                run: spec.run.clone(),
            };
            let one_shot = spec.session.is_none();
            // The warm pool's containers have no network: a box with an allowlist is made
            // on the egress network, its proxy variables set.
            let mut env = spec.env.clone();
            let egress = match &spec.network {
                Some(_) => {
                    let proxy = self
                        .egress_proxy()
                        .await
                        .map_err(ProvisionError::Unavailable)?;
                    for (k, v) in proxy_env(proxy.addr()) {
                        match env.get_mut(&k) {
                            // The box's own JVM options still apply, after the proxy's.
                            Some(own) if k == JVM_OPTIONS => *own = format!("{v} {own}"),
                            Some(_) => {}
                            None => {
                                env.insert(k, v);
                            }
                        }
                    }
                    Some(proxy)
                }
                None => None,
            };
            if one_shot
                && egress.is_none()
                && let Some(c) = self.maker.checkout(&image.id)
            {
                // A warm container: the run's limits instead of the pool's defaults.
                if c.resize(spec.memory_mb, spec.cpu).await.is_ok() {
                    self.maker.refill(image.clone());
                    return Ok(self.boxed(c, &image, None));
                }
                c.remove().await;
                self.maker.forget(&c.id);
            }
            let network = egress.as_ref().map(|_| EGRESS_NETWORK.to_string());
            let c = self
                .maker
                .make(&image, Some(owned), spec.memory_mb, spec.cpu, &env, network)
                .await?;
            if one_shot && egress.is_none() {
                self.maker.refill(image.clone());
            }
            let attached = match (egress, spec.network) {
                (Some(proxy), Some(policy)) => match self.attach(&c, proxy, policy).await {
                    Ok(a) => Some(a),
                    Err(e) => {
                        c.remove().await;
                        self.maker.forget(&c.id);
                        return Err(ProvisionError::Failed(format!(
                            "cannot put the container behind the egress proxy: {e}"
                        )));
                    }
                },
                _ => None,
            };
            Ok(self.boxed(c, &image, attached))
        })
    }

    fn describe(&self, base: RuntimeInfo) -> Fut<'_, RuntimeInfo> {
        Box::pin(async move {
            let status = self.status().await;
            let mut images = Vec::new();
            let mut default_images = Vec::new();
            let mut missing = Vec::new();
            if status.is_ok() {
                for r in RECIPES {
                    match self.engine.built(r).await {
                        Ok(Some(i)) => {
                            let canonical = format!("wasmsand/{}:current", r.name);
                            let aliases: Vec<String> = self
                                .aliases
                                .iter()
                                .filter(|(_, t)| **t == canonical)
                                .map(|(a, _)| a.clone())
                                .collect();
                            default_images.extend(aliases.iter().map(|a| format!("{a}@{}", i.id)));
                            images.push(ImageInfo {
                                name: i.versioned_tag().unwrap_or(&canonical).to_string(),
                                digest: i.id.clone(),
                                aliases,
                            });
                        }
                        _ => missing.push(r.name),
                    }
                }
            }
            let d = self.settings();
            let notes = match &status {
                Ok(info) => {
                    let mut n = format!(
                        "Docker {} (API {}) over {}, OCI runtime {}; containers run as a \
                         random non-root user with a read-only root, no network (with \
                         `network_policy: allowlist`: an internal network whose only way out is \
                         the service's egress proxy, named by HTTP_PROXY/HTTPS_PROXY), no \
                         capabilities and {} tmpfs /workspace and /tmp; images are built from \
                         Debian's packages (node:20 and golang:1.22 names run Debian's \
                         Node.js 18 and Go 1.19). .NET is not available.",
                        info.version,
                        info.api_version,
                        d.host,
                        d.oci_runtime,
                        if d.tmpfs_noexec {
                            "noexec"
                        } else {
                            "exec-allowed"
                        },
                    );
                    match (&d.egress_oci_runtime, self.egress_supported()) {
                        (_, false) => n.push_str(
                            " No egress allowlist under runsc: its network is off, and Debian's \
                             runsc cannot start its own network stack on Linux 6.11 and later \
                             (SANDBOX_DOCKER_EGRESS_RUNTIME names a runsc with --network=host).",
                        ),
                        (Some(r), true) => n.push_str(&format!(
                            " Containers with an egress allowlist run under {r}: gVisor with the \
                             kernel's network stack inside the container's own namespace."
                        )),
                        (None, true) => {}
                    }
                    if !missing.is_empty() {
                        n.push_str(&format!(
                            " Not built yet: {} (sandboxd images build {}).",
                            missing.join(", "),
                            missing.join(" ")
                        ));
                    }
                    n
                }
                Err(e) => e.clone(),
            };
            let ncpu = status.as_ref().map_or(1, |i| i.ncpu) as f64;
            RuntimeInfo {
                available: status.is_ok(),
                runtime_version: status.as_ref().ok().map(|i| i.version.clone()),
                default: Some(self.config.default_runtime == "docker"),
                max_cpu: self.config.max_cpu.min(ncpu),
                max_mem_mb: self.config.max_mem_mb,
                images: Some(images),
                default_images,
                notes,
                oci_runtime: Some(d.oci_runtime.clone()),
                egress_allowlist_supported: self.egress_supported(),
                ..base
            }
        })
    }

    fn shutdown(&self) -> Fut<'_, ()> {
        Box::pin(async move {
            self.maker.drain().await;
            if let Some((_, seal)) = self.egress.lock().await.take() {
                seal.open_no_more().await;
            }
        })
    }

    fn reap(&self) -> Fut<'_, ()> {
        Box::pin(async move {
            if !self.settings().enabled {
                return;
            }
            let keep = self.maker.live.lock().clone();
            match self.engine.reap(&keep).await {
                Ok(0) => {}
                Ok(n) => tracing::warn!(removed = n, "removed containers left behind"),
                Err(e) if e.is_unreachable() => {}
                Err(e) => tracing::warn!(%e, "cannot reap containers"),
            }
        })
    }
}

/// A container made but not yet held by a box: when its creation fails or is given up (a
/// startup timeout drops the future), it is removed rather than left running.
struct Unclaimed {
    engine: Arc<Engine>,
    live: Arc<Mutex<HashSet<String>>>,
    id: Arc<Mutex<Option<String>>>,
}

impl Drop for Unclaimed {
    fn drop(&mut self) {
        let Some(id) = self.id.lock().take() else {
            return;
        };
        self.live.lock().remove(&id);
        let engine = self.engine.clone();
        if let Ok(h) = tokio::runtime::Handle::try_current() {
            h.spawn(async move {
                let _ = engine.remove(&id).await;
            });
        }
    }
}

/// Who a container serves (none: a warm pool entry).
struct Owner {
    owner: String,
    image: String,
    session: Option<String>,
    run: Option<String>,
}

/// Makes containers, and keeps the warm pool: per image, up to `SANDBOX_DOCKER_POOL_SIZE`
/// started containers waiting for a one-shot run (never paused: a paused container would
/// need an unpause on the run's path). Shared with the refill tasks.
struct Maker {
    config: Config,
    engine: Arc<Engine>,
    /// Containers this process made and has not removed: the reaper keeps these.
    live: Arc<Mutex<HashSet<String>>>,
    pool: Mutex<HashMap<String, Vec<Container>>>,
    /// Refills under way, per image.
    filling: Mutex<HashMap<String, usize>>,
    /// Set by a shutdown: refills still under way remove what they make.
    closed: AtomicBool,
    uid: AtomicU64,
}

impl Maker {
    fn next_uid(&self) -> u64 {
        // Two ids per box, in a range no image's own users use.
        200_000 + (self.uid.fetch_add(2, Ordering::Relaxed) % 60_000)
    }

    fn checkout(&self, image_id: &str) -> Option<Container> {
        self.pool.lock().get_mut(image_id)?.pop()
    }

    fn forget(&self, id: &str) {
        self.live.lock().remove(id);
    }

    /// Tops the image's pool up in the background.
    fn refill(self: &Arc<Self>, image: EngineImage) {
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        let size = self.config.docker.pool_size;
        let missing = {
            let pool = self.pool.lock();
            let mut filling = self.filling.lock();
            let have = pool.get(&image.id).map_or(0, Vec::len);
            let going = filling.entry(image.id.clone()).or_default();
            let missing = size.saturating_sub(have + *going);
            *going += missing;
            missing
        };
        for _ in 0..missing {
            let me = self.clone();
            let image = image.clone();
            tokio::spawn(async move {
                let d = &me.config.docker;
                let made = me
                    .make(&image, None, d.default_mem_mb, 1.0, &BTreeMap::new(), None)
                    .await;
                match made {
                    Ok(c) if me.closed.load(Ordering::SeqCst) => {
                        c.remove().await;
                        me.forget(&c.id);
                    }
                    Ok(c) => me.pool.lock().entry(image.id.clone()).or_default().push(c),
                    Err(e) => {
                        tracing::warn!(image = %image.id, e = %e.message(), "cannot refill the warm pool")
                    }
                }
                *me.filling.lock().entry(image.id.clone()).or_default() -= 1;
            });
        }
    }

    /// Removes every pool container, after the refills under way (a clean shutdown).
    async fn drain(&self) {
        self.closed.store(true, Ordering::SeqCst);
        for _ in 0..600 {
            if self.filling.lock().values().all(|n| *n == 0) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let all: Vec<Container> = self.pool.lock().drain().flat_map(|(_, v)| v).collect();
        for c in all {
            c.remove().await;
            self.forget(&c.id);
        }
    }

    async fn make(
        &self,
        image: &EngineImage,
        owner: Option<Owner>,
        memory_mb: u64,
        cpu: f64,
        env: &BTreeMap<String, String>,
        network: Option<String>,
    ) -> Result<Container, ProvisionError> {
        let d = &self.config.docker;
        if self.live.lock().len() >= d.max_containers {
            return Err(ProvisionError::Unavailable(format!(
                "the docker runtime holds its maximum of {} containers \
                 (SANDBOX_DOCKER_MAX_CONTAINERS)",
                d.max_containers
            )));
        }
        let uid = self.next_uid();
        let instance = &self.engine.settings().instance;
        let mut box_labels = BTreeMap::from([(labels::INSTANCE.to_string(), instance.clone())]);
        let kind = match &owner {
            Some(o) => {
                box_labels.insert(labels::OWNER.into(), o.owner.clone());
                box_labels.insert(labels::IMAGE.into(), o.image.clone());
                if let Some(s) = &o.session {
                    box_labels.insert(labels::SESSION.into(), s.clone());
                }
                if let Some(r) = &o.run {
                    box_labels.insert(labels::RUN.into(), r.clone());
                }
                if o.session.is_some() {
                    "session"
                } else {
                    "run"
                }
            }
            None => "pool",
        };
        box_labels.insert(labels::KIND.into(), kind.into());
        let exec_scratch = image
            .labels
            .get(EXEC_SCRATCH_LABEL)
            .is_some_and(|v| v == "1")
            && d.exec_scratch_mb > 0;
        let config = BoxConfig {
            image: image.id.clone(),
            name: format!(
                "wsd-{}-{}",
                instance.chars().take(12).collect::<String>(),
                crate::util::new_id()
            ),
            memory_mb,
            cpu,
            pids_limit: self.config.pids_limit,
            nofile: self.config.ulimit_nofile,
            nproc: self.config.ulimit_nproc,
            workspace_mb: self.config.workspace_cap_mb,
            workspace_files: self.config.workspace_file_count,
            tmp_mb: d.tmp_mb,
            noexec: d.tmpfs_noexec,
            exec_scratch_mb: exec_scratch.then_some(d.exec_scratch_mb),
            oci_runtime: Some(oci_runtime_for(d, network.is_some())),
            seccomp: d.seccomp_profile.clone(),
            init_user: format!("{uid}:{uid}"),
            env: env.clone(),
            labels: box_labels,
            network,
        };
        let guard = Unclaimed {
            engine: self.engine.clone(),
            live: self.live.clone(),
            id: Arc::default(),
        };
        let (live, slot) = (self.live.clone(), guard.id.clone());
        let made = Container::create(
            &self.engine,
            &config,
            &format!("{0}:{0}", uid + 1),
            move |id| {
                live.lock().insert(id.to_string());
                *slot.lock() = Some(id.to_string());
            },
        )
        .await;
        match made {
            Ok(c) => {
                guard.id.lock().take();
                Ok(c)
            }
            Err(e) if e.is_unreachable() => {
                self.engine.forget_connection().await;
                Err(ProvisionError::Unavailable(e.to_string()))
            }
            Err(e) => Err(ProvisionError::Failed(format!(
                "cannot start the container: {e}"
            ))),
        }
    }
}

struct DockerBox {
    container: Arc<Container>,
    digest: String,
    alive: AtomicBool,
    destroyed: AtomicBool,
    live: Arc<Mutex<HashSet<String>>>,
    egress: Option<Attached>,
}

/// The OCI runtime of a new container, with an egress allowlist or without.
fn oci_runtime_for(d: &DockerConfig, egress: bool) -> String {
    match (&d.egress_oci_runtime, egress) {
        (Some(r), true) => r.clone(),
        _ => d.oci_runtime.clone(),
    }
}

/// The variable every JVM reads its options from (the JDK ignores `HTTPS_PROXY`).
const JVM_OPTIONS: &str = "JAVA_TOOL_OPTIONS";

/// What points a container's programs at the proxy: the variables curl, pip, npm, go, git
/// and most HTTP libraries read (in both cases: some read only one), and the system
/// properties of Java's own clients and of Maven 3.8's transport.
fn proxy_env(proxy: SocketAddr) -> Vec<(String, String)> {
    let url = format!("http://{proxy}");
    let mut v = Vec::new();
    for k in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
        v.push((k.to_string(), url.clone()));
    }
    for k in ["NO_PROXY", "no_proxy"] {
        v.push((k.to_string(), "localhost,127.0.0.1,::1".to_string()));
    }
    let (host, port) = (proxy.ip(), proxy.port());
    v.push((
        JVM_OPTIONS.to_string(),
        format!(
            "-Dhttp.proxyHost={host} -Dhttp.proxyPort={port} -Dhttps.proxyHost={host} \
             -Dhttps.proxyPort={port} -Dhttp.nonProxyHosts=localhost|127.*|[::1]"
        ),
    ));
    v
}

impl SandboxBox for DockerBox {
    fn is_alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }

    fn image_digest(&self) -> String {
        self.digest.clone()
    }

    fn write_files(
        &self,
        dirs: Vec<String>,
        files: Vec<(String, Vec<u8>)>,
    ) -> Fut<'_, Result<(), FilesError>> {
        Box::pin(async move {
            use wasmsand_docker::FilesError as E;
            self.container
                .write_files(&dirs, &files)
                .await
                .map_err(|e| match e {
                    E::WorkspaceFull(m) => FilesError::WorkspaceFull(m),
                    E::Conflict(m) => FilesError::Conflict(m),
                    E::Engine(e) => FilesError::Gone(e.to_string()),
                })
        })
    }

    fn is_dir<'a>(&'a self, cwd: &'a str) -> Fut<'a, bool> {
        Box::pin(async move { self.container.is_dir(cwd).await.unwrap_or(false) })
    }

    fn run(
        &self,
        req: ExecRequest,
        out: OutputSink,
        stop: watch::Receiver<StopCause>,
    ) -> Fut<'_, Result<ExecOutcome, String>> {
        Box::pin(async move {
            // Each run resolves and pins afresh and has its own caps.
            if let Some(a) = &self.egress {
                a.gate.next_run();
            }
            let mut stop_rx = stop.clone();
            let grace_base = req.grace;
            let stopped = async move {
                let _ = stop_rx.wait_for(|c| *c != StopCause::None).await;
            };
            let grace = match *stop.borrow() {
                StopCause::None => grace_base,
                c => c.grace(grace_base),
            };
            let sink: wasmsand_docker::Sink = Arc::new(move |s, b: &[u8]| {
                out(
                    match s {
                        wasmsand_docker::Stream::Stdout => Stream::Stdout,
                        wasmsand_docker::Stream::Stderr => Stream::Stderr,
                    },
                    b,
                )
            });
            let outcome = self
                .container
                .run_fed(
                    wasmsand_docker::RunRequest {
                        argv: req.command,
                        env: req.env,
                        cwd: req.cwd,
                        timeout: req.timeout,
                        grace,
                        stdin: req.stdin,
                    },
                    req.stdin_feed,
                    sink,
                    stopped,
                )
                .await;
            let o = match outcome {
                Ok(o) => o,
                Err(e) if self.destroyed.load(Ordering::SeqCst) => {
                    tracing::debug!(%e, "a run's container was removed under it");
                    return Ok(ExecOutcome {
                        exit_code: -1,
                        end: EndHint::SessionDestroyed,
                        cpu_time_sec: None,
                        peak_rss_mb: None,
                        network: (0, 0),
                    });
                }
                Err(e) => {
                    if e.is_unreachable() {
                        self.alive.store(false, Ordering::SeqCst);
                    }
                    return Err(e.to_string());
                }
            };
            if o.abandoned {
                // Nothing inside could be stopped: the container goes, and a session with it.
                self.alive.store(false, Ordering::SeqCst);
                self.container.remove().await;
            }
            let end = match o.end {
                _ if self.destroyed.load(Ordering::SeqCst) => EndHint::SessionDestroyed,
                RunEnd::Exited => EndHint::Exited,
                RunEnd::Timeout => EndHint::Timeout,
                RunEnd::Stopped => EndHint::Stopped,
                RunEnd::OomKilled => EndHint::OomKilled,
                RunEnd::PidsLimit => EndHint::PidsLimit,
                RunEnd::EngineLost(m) => {
                    self.alive.store(false, Ordering::SeqCst);
                    EndHint::Lost(format!(
                        "the Docker engine connection was lost during the run: {m}"
                    ))
                }
            };
            let network = self.egress.as_ref().map_or((0, 0), |a| {
                let (requests, bytes, _) = a.gate.used();
                (requests, bytes)
            });
            Ok(ExecOutcome {
                exit_code: o.exit_code,
                end,
                cpu_time_sec: o.cpu_time_sec,
                peak_rss_mb: o.peak_rss_mb,
                network,
            })
        })
    }

    fn candidates<'a>(&'a self, set: &'a GlobSet) -> Fut<'a, (Vec<Candidate>, bool)> {
        Box::pin(async move {
            let Ok(list) = self.container.list().await else {
                return (Vec::new(), false);
            };
            let cut = list.len() > MAX_WALK;
            let out = list
                .into_iter()
                .take(MAX_WALK)
                .filter(|e| matches!(e.kind, 'f' | 'l') && set.is_match(&e.path))
                .map(|e| Candidate {
                    symlink: e.kind == 'l',
                    size: if e.kind == 'l' { 0 } else { e.size },
                    path: e.path,
                })
                .collect();
            (out, cut)
        })
    }

    fn read(&self, paths: Vec<String>, cap: u64) -> Fut<'_, Vec<(String, Vec<u8>)>> {
        Box::pin(async move {
            self.container
                .read_files(&paths, cap)
                .await
                .unwrap_or_default()
        })
    }

    fn fs(&self, op: FsOp) -> Fut<'_, Result<FsReply, FsFailure>> {
        Box::pin(async move {
            let c = &self.container;
            let entry = |e: wasmsand_docker::FsEntry| FsEntry {
                name: e.name,
                kind: match e.kind {
                    'f' => "file",
                    'd' => "dir",
                    'l' => "symlink",
                    _ => "other",
                },
                size: e.size,
            };
            let answer = match op {
                FsOp::List(p) => c
                    .fs_list(&p)
                    .await
                    .map(|l| FsReply::Entries(l.into_iter().map(entry).collect())),
                FsOp::Stat(p) => c.fs_stat(&p).await.map(|e| FsReply::Entry(entry(e))),
                FsOp::Read {
                    path,
                    offset,
                    length,
                } => c
                    .fs_read(&path, offset, length)
                    .await
                    .map(|(d, size)| FsReply::Data(d.into(), size)),
                FsOp::Write { path, data, append } => {
                    c.fs_write(&path, data, append).await.map(FsReply::Size)
                }
                FsOp::Mkdir(p) => c.fs_mkdir(&p).await.map(FsReply::Created),
                FsOp::Rename { from, to } => c.fs_rename(&from, &to).await.map(|()| FsReply::Done),
                FsOp::Remove { path, recursive } => {
                    c.fs_remove(&path, recursive).await.map(|()| FsReply::Done)
                }
            };
            answer.map_err(|e| match e {
                wasmsand_docker::FsError::Errno { errno, message } => FsFailure::Errno {
                    errno: errno.to_string(),
                    message,
                },
                wasmsand_docker::FsError::Engine(e) => FsFailure::Gone(e.to_string()),
            })
        })
    }

    fn destroy(&self) -> Fut<'_, ()> {
        Box::pin(async move {
            if self.destroyed.swap(true, Ordering::SeqCst) {
                return;
            }
            self.alive.store(false, Ordering::SeqCst);
            self.container.remove().await;
            self.live.lock().remove(&self.container.id);
            if let Some(a) = &self.egress {
                a.proxy.unregister(a.ip);
            }
        })
    }

    fn take_egress(&self) -> Vec<wasmsand::EgressEvent> {
        self.egress
            .as_ref()
            .map(|a| a.events.take())
            .unwrap_or_default()
    }
}

/// The id of this service instance on the engine: `SANDBOX_DOCKER_INSTANCE`, else one kept
/// in the data directory so that a restarted service finds (and reaps) what its earlier life
/// left behind.
pub(crate) fn instance_id(config: &Config) -> std::io::Result<String> {
    if let Some(id) = &config.docker.instance {
        return Ok(id.clone());
    }
    let path = config.data_dir.join("docker-instance");
    if let Ok(id) = std::fs::read_to_string(&path) {
        let id = id.trim();
        if !id.is_empty() {
            return Ok(id.to_string());
        }
    }
    let id = crate::util::new_id();
    std::fs::write(&path, &id)?;
    Ok(id)
}
