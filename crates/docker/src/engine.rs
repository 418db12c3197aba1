//! The connection to the Docker engine: version negotiation, status, container creation and
//! the orphan reaper.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use bollard::Docker;
use bollard::query_parameters::{ListContainersOptionsBuilder, RemoveContainerOptionsBuilder};

use crate::spec::labels;

/// What went wrong talking to the engine.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The engine does not answer (no socket, not running, or the connection broke).
    #[error("the Docker engine at {host} is not reachable: {reason}")]
    Unreachable {
        /// The socket tried.
        host: String,
        /// What the connection said.
        reason: String,
    },
    /// The image is not on this engine.
    #[error("image {0} is not on this Docker engine")]
    NoImage(String),
    /// Any other refusal of the engine.
    #[error("{0}")]
    Api(String),
}

impl EngineError {
    pub(crate) fn from_bollard(host: &str, e: bollard::errors::Error) -> EngineError {
        use bollard::errors::Error as B;
        match e {
            B::DockerResponseServerError {
                status_code: 404,
                message,
            } if message.contains("image") => EngineError::NoImage(message),
            B::DockerResponseServerError {
                status_code,
                message,
            } => EngineError::Api(format!(
                "the Docker engine refused ({status_code}): {message}"
            )),
            B::IOError { .. }
            | B::HyperResponseError { .. }
            | B::RequestTimeoutError
            | B::HyperLegacyError { .. } => EngineError::Unreachable {
                host: host.to_string(),
                reason: e.to_string(),
            },
            other => EngineError::Api(other.to_string()),
        }
    }

    /// Whether the engine itself is gone (rather than refusing one request).
    pub fn is_unreachable(&self) -> bool {
        matches!(self, EngineError::Unreachable { .. })
    }
}

/// How to reach the engine and how to label what this instance makes there.
#[derive(Debug, Clone)]
pub struct EngineSettings {
    /// `unix:///path/to/docker.sock` or a plain socket path.
    pub host: String,
    /// This service instance's id, stable across its restarts: the reaper removes only the
    /// containers labelled with it.
    pub instance: String,
    /// The cgroupfs root where containers' cgroups are read (normally `/sys/fs/cgroup`).
    pub cgroup_root: PathBuf,
}

/// What the engine says of itself.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineInfo {
    /// The engine's version (`20.10.24+dfsg1`).
    pub version: String,
    /// The API version negotiated with it.
    pub api_version: String,
    /// OCI runtimes registered with it (`runc`, `runsc`, ...).
    pub runtimes: Vec<String>,
    /// Its default OCI runtime.
    pub default_runtime: String,
    /// `1` or `2`.
    pub cgroup_version: String,
    /// CPUs the engine's host has.
    pub ncpu: u64,
}

/// One Docker engine, connected on first use and again after it went away.
pub struct Engine {
    settings: EngineSettings,
    client: tokio::sync::Mutex<Option<Docker>>,
}

/// Seconds an engine call may take to answer (not to finish: streams run on).
const REQUEST_TIMEOUT_SEC: u64 = 120;

impl Engine {
    /// An engine handle; nothing is contacted until the first call.
    pub fn new(settings: EngineSettings) -> Arc<Engine> {
        Arc::new(Engine {
            settings,
            client: tokio::sync::Mutex::new(None),
        })
    }

    /// The settings it was made with.
    pub fn settings(&self) -> &EngineSettings {
        &self.settings
    }

    fn socket_path(&self) -> &str {
        self.settings
            .host
            .strip_prefix("unix://")
            .unwrap_or(&self.settings.host)
    }

    pub(crate) fn error(&self, e: bollard::errors::Error) -> EngineError {
        EngineError::from_bollard(&self.settings.host, e)
    }

    /// The client, connected with the API version both sides speak (Debian's engine speaks
    /// 1.41; the client's default is newer, and every call would be refused without this).
    pub async fn client(&self) -> Result<Docker, EngineError> {
        let mut slot = self.client.lock().await;
        if let Some(c) = slot.as_ref() {
            return Ok(c.clone());
        }
        let unreachable = |reason: String| EngineError::Unreachable {
            host: self.settings.host.clone(),
            reason,
        };
        let docker = Docker::connect_with_unix(
            self.socket_path(),
            REQUEST_TIMEOUT_SEC,
            bollard::API_DEFAULT_VERSION,
        )
        .map_err(|e| unreachable(e.to_string()))?
        .negotiate_version()
        .await
        .map_err(|e| unreachable(e.to_string()))?;
        *slot = Some(docker.clone());
        Ok(docker)
    }

    /// Forgets the connection: after an engine restart its pooled connections are dead, and
    /// the next call connects afresh.
    pub async fn forget_connection(&self) {
        *self.client.lock().await = None;
    }

    /// `call` once more on a fresh connection when the engine was unreachable (an engine that
    /// restarted leaves the pool's connections broken). For idempotent calls only.
    pub(crate) async fn retrying<T, F, Fu>(&self, call: F) -> Result<T, EngineError>
    where
        F: Fn() -> Fu,
        Fu: Future<Output = Result<T, EngineError>>,
    {
        match call().await {
            Err(e) if e.is_unreachable() => {
                self.forget_connection().await;
                call().await
            }
            other => other,
        }
    }

    /// The engine's version, API version and runtimes; an error when it does not answer.
    pub async fn info(&self) -> Result<EngineInfo, EngineError> {
        self.retrying(|| self.info_once()).await
    }

    async fn info_once(&self) -> Result<EngineInfo, EngineError> {
        let docker = self.client().await?;
        let version = docker.version().await.map_err(|e| self.error(e))?;
        let info = docker.info().await.map_err(|e| self.error(e))?;
        let mut runtimes: Vec<String> = info
            .runtimes
            .map(|r| r.into_keys().collect())
            .unwrap_or_default();
        runtimes.sort();
        Ok(EngineInfo {
            version: version.version.unwrap_or_default(),
            api_version: docker.client_version().to_string(),
            runtimes,
            default_runtime: info.default_runtime.unwrap_or_else(|| "runc".into()),
            cgroup_version: info
                .cgroup_version
                .map(|v| v.to_string())
                .unwrap_or_default(),
            ncpu: info.ncpu.unwrap_or(1).max(1) as u64,
        })
    }

    /// Removes a container by id, whatever it runs.
    pub async fn remove(&self, id: &str) -> Result<(), EngineError> {
        self.retrying(|| self.remove_once(id)).await
    }

    async fn remove_once(&self, id: &str) -> Result<(), EngineError> {
        let docker = self.client().await?;
        let options = RemoveContainerOptionsBuilder::default()
            .force(true)
            .v(true)
            .build();
        match docker.remove_container(id, Some(options)).await {
            Ok(()) => Ok(()),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => Ok(()),
            // Already being removed by an earlier call.
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 409, ..
            }) => Ok(()),
            Err(e) => Err(self.error(e)),
        }
    }

    /// The gateway address (on the host) of `name`, an internal bridge network made here if
    /// it is not there: no route leaves it, and its containers cannot reach each other
    /// (`enable_icc` off), so the host's side of the bridge is all they can talk to.
    /// Returns the gateway and the bridge's interface name on the host.
    pub async fn internal_network(
        &self,
        name: &str,
    ) -> Result<(std::net::IpAddr, String), EngineError> {
        let docker = self.client().await?;
        for attempt in 0..2 {
            match docker.inspect_network(name, None).await {
                Ok(n) => {
                    if n.internal != Some(true) {
                        return Err(EngineError::Api(format!(
                            "network {name} exists but is not internal; remove it"
                        )));
                    }
                    const BRIDGE: &str = "com.docker.network.bridge.name";
                    let iface = match n.options.as_ref().and_then(|o| o.get(BRIDGE)) {
                        Some(b) => b.clone(),
                        None => format!(
                            "br-{}",
                            n.id.as_deref().unwrap_or("").get(..12).unwrap_or("")
                        ),
                    };
                    let gateway = n
                        .ipam
                        .and_then(|i| i.config)
                        .unwrap_or_default()
                        .into_iter()
                        .find_map(|c| c.gateway?.parse().ok());
                    return gateway.map(|g| (g, iface)).ok_or_else(|| {
                        EngineError::Api(format!("network {name} has no IPv4 gateway"))
                    });
                }
                Err(bollard::errors::Error::DockerResponseServerError {
                    status_code: 404, ..
                }) if attempt == 0 => {
                    let made = docker
                        .create_network(bollard::models::NetworkCreateRequest {
                            name: name.to_string(),
                            driver: Some("bridge".into()),
                            internal: Some(true),
                            options: Some(HashMap::from([
                                (
                                    "com.docker.network.bridge.enable_icc".to_string(),
                                    "false".to_string(),
                                ),
                                (
                                    "com.docker.network.bridge.name".to_string(),
                                    "wsd-egress0".to_string(),
                                ),
                            ])),
                            // Shared by every instance on the engine (each container is known
                            // to its own instance's proxy only), so it is never reaped.
                            labels: Some(HashMap::from([(
                                "org.wasmsand.network".to_string(),
                                "egress".to_string(),
                            )])),
                            ..Default::default()
                        })
                        .await;
                    match made {
                        // Made meanwhile by another caller: inspect it.
                        Ok(_)
                        | Err(bollard::errors::Error::DockerResponseServerError {
                            status_code: 409,
                            ..
                        }) => {}
                        Err(e) => return Err(self.error(e)),
                    }
                }
                Err(e) => return Err(self.error(e)),
            }
        }
        Err(EngineError::Api(format!("network {name} cannot be made")))
    }

    /// A container's address on `network`.
    pub async fn container_ip(
        &self,
        id: &str,
        network: &str,
    ) -> Result<std::net::IpAddr, EngineError> {
        let docker = self.client().await?;
        let c = docker
            .inspect_container(id, None)
            .await
            .map_err(|e| self.error(e))?;
        c.network_settings
            .and_then(|n| n.networks)
            .and_then(|mut n| n.remove(network))
            .and_then(|e| e.ip_address)
            .and_then(|a| a.parse().ok())
            .ok_or_else(|| EngineError::Api(format!("container {id} has no address on {network}")))
    }

    /// Ids of the containers of this instance, with their labels.
    pub async fn containers(&self) -> Result<Vec<(String, HashMap<String, String>)>, EngineError> {
        self.retrying(|| self.containers_once()).await
    }

    async fn containers_once(&self) -> Result<Vec<(String, HashMap<String, String>)>, EngineError> {
        let docker = self.client().await?;
        let filters = HashMap::from([(
            "label".to_string(),
            vec![format!("{}={}", labels::INSTANCE, self.settings.instance)],
        )]);
        let list = docker
            .list_containers(Some(
                ListContainersOptionsBuilder::default()
                    .all(true)
                    .filters(&filters)
                    .build(),
            ))
            .await
            .map_err(|e| self.error(e))?;
        Ok(list
            .into_iter()
            .filter_map(|c| Some((c.id?, c.labels.unwrap_or_default())))
            .collect())
    }

    /// Removes every container of this instance whose id is not in `keep` (those an earlier
    /// life of the service left behind, or one it lost track of); how many it removed.
    pub async fn reap(&self, keep: &HashSet<String>) -> Result<usize, EngineError> {
        let mut removed = 0;
        for (id, _) in self.containers().await? {
            if !keep.contains(&id) {
                self.remove(&id).await?;
                removed += 1;
            }
        }
        Ok(removed)
    }
}
