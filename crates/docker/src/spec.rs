//! The one shape of every container this runtime makes (a session's, a one-shot run's or a
//! warm pool entry): the isolation flags of seed 003 §12-13, as an Engine API body.

use std::collections::{BTreeMap, HashMap};

use bollard::models::{ContainerCreateBody, HostConfig, HostConfigLogConfig, ResourcesUlimits};

/// Label keys every container carries, so the reaper and an operator can tell whose it is.
pub mod labels {
    /// The service instance that made it (stable across that instance's restarts).
    pub const INSTANCE: &str = "org.wasmsand.instance";
    /// `session`, `run` or `pool`.
    pub const KIND: &str = "org.wasmsand.kind";
    /// The session it serves, when it serves one.
    pub const SESSION: &str = "org.wasmsand.session";
    /// The one-shot run it serves, when it serves one.
    pub const RUN: &str = "org.wasmsand.run";
    /// The user it was made for.
    pub const OWNER: &str = "org.wasmsand.owner";
    /// The image name requested (before alias resolution).
    pub const IMAGE: &str = "org.wasmsand.image";
}

/// Where the user's files live in a container: uploads land there, runs start there,
/// artifacts are captured from there.
pub const WORKSPACE: &str = "/workspace";

/// Limits and isolation settings of one container.
#[derive(Debug, Clone, PartialEq)]
pub struct BoxConfig {
    /// Image reference (a name the engine resolves, or an image id).
    pub image: String,
    /// Container name; unique on the engine.
    pub name: String,
    /// Memory cap in MiB, swap included (swap is off).
    pub memory_mb: u64,
    /// CPUs, as a fraction (1.5 = one and a half CPUs of time).
    pub cpu: f64,
    /// Most processes and threads in the container.
    pub pids_limit: u64,
    /// RLIMIT_NOFILE, soft and hard.
    pub nofile: u64,
    /// RLIMIT_NPROC, soft and hard (counted per host UID: the run's UID is the container's own).
    pub nproc: u64,
    /// Size of the `/workspace` tmpfs in MiB.
    pub workspace_mb: u64,
    /// Most files and directories in `/workspace` (the tmpfs's inode count).
    pub workspace_files: u64,
    /// Size of the `/tmp` tmpfs in MiB.
    pub tmp_mb: u64,
    /// Mount `/workspace` and `/tmp` `noexec` (seed 003's default).
    pub noexec: bool,
    /// An extra exec-allowed tmpfs at [`EXEC_SCRATCH`] of this many MiB (for toolchains that
    /// build and then run a binary, like `go run`), when set.
    pub exec_scratch_mb: Option<u64>,
    /// The OCI runtime (`runc`, `runsc`); `None` is the engine's default.
    pub oci_runtime: Option<String>,
    /// A seccomp profile's JSON text; `None` is the engine's default profile.
    pub seccomp: Option<String>,
    /// UID:GID of the container's idle init process.
    pub init_user: String,
    /// Environment of every process in it (the image's own comes first).
    pub env: BTreeMap<String, String>,
    /// Labels (see [`labels`]).
    pub labels: BTreeMap<String, String>,
    /// The network to attach it to (an internal one whose only way out is the service's
    /// egress proxy); `None`: no network at all.
    pub network: Option<String>,
}

/// The exec-allowed scratch directory (see [`BoxConfig::exec_scratch_mb`]).
pub const EXEC_SCRATCH: &str = "/opt/exec";

impl BoxConfig {
    fn tmpfs_options(&self, mb: u64, exec: bool, extra: &str) -> String {
        let exec = if exec { "exec" } else { "noexec" };
        // Docker drops `mode` when an option it does not know of follows it.
        format!("rw,{exec},nodev,nosuid,size={mb}m{extra},mode=1777")
    }

    /// The Engine API body of `POST /containers/create`.
    pub fn body(&self) -> ContainerCreateBody {
        let mut tmpfs = HashMap::new();
        tmpfs.insert(
            WORKSPACE.to_string(),
            self.tmpfs_options(
                self.workspace_mb,
                !self.noexec,
                &format!(",nr_inodes={}", self.workspace_files.max(16)),
            ),
        );
        tmpfs.insert(
            "/tmp".to_string(),
            self.tmpfs_options(self.tmp_mb, !self.noexec, ""),
        );
        if let Some(mb) = self.exec_scratch_mb {
            tmpfs.insert(EXEC_SCRATCH.to_string(), self.tmpfs_options(mb, true, ""));
        }
        let mut security_opt = vec!["no-new-privileges".to_string()];
        if let Some(profile) = &self.seccomp {
            security_opt.push(format!("seccomp={profile}"));
        }
        let ulimit = |name: &str, n: u64| ResourcesUlimits {
            name: Some(name.into()),
            soft: Some(n as i64),
            hard: Some(n as i64),
        };
        let memory = (self.memory_mb as i64) << 20;
        let host = HostConfig {
            readonly_rootfs: Some(true),
            tmpfs: Some(tmpfs),
            network_mode: Some(self.network.clone().unwrap_or_else(|| "none".into())),
            cap_drop: Some(vec!["ALL".into()]),
            privileged: Some(false),
            security_opt: Some(security_opt),
            pids_limit: Some(self.pids_limit as i64),
            memory: Some(memory),
            // Equal to the memory cap: no swap on top of it.
            memory_swap: Some(memory),
            memory_swappiness: Some(0),
            nano_cpus: Some((self.cpu * 1e9) as i64),
            ulimits: Some(vec![
                ulimit("nofile", self.nofile),
                ulimit("nproc", self.nproc),
                ulimit("core", 0),
            ]),
            // An init as PID 1 reaps what the runs orphan; without it zombies would use up
            // the pids limit of a long session.
            init: Some(true),
            ipc_mode: Some("private".into()),
            shm_size: Some(64 << 20),
            oom_score_adj: Some(500),
            binds: None,
            mounts: None,
            devices: None,
            log_config: Some(HostConfigLogConfig {
                typ: Some("none".into()),
                config: None,
            }),
            runtime: self.oci_runtime.clone(),
            ..Default::default()
        };
        let mut env: Vec<String> = vec![
            format!("HOME={WORKSPACE}"),
            "LANG=C.UTF-8".into(),
            "TMPDIR=/tmp".into(),
        ];
        env.extend(self.env.iter().map(|(k, v)| format!("{k}={v}")));
        ContainerCreateBody {
            image: Some(self.image.clone()),
            user: Some(self.init_user.clone()),
            cmd: Some(vec!["sleep".into(), "infinity".into()]),
            entrypoint: Some(vec![]),
            // No working directory here: the engine would create it in the image's root as
            // root's 0755 and copy that mode onto the tmpfs, which the runs' user then
            // cannot write; each exec names its own.
            env: Some(env),
            network_disabled: Some(self.network.is_none()),
            labels: Some(self.labels.clone().into_iter().collect()),
            stop_timeout: Some(1),
            tty: Some(false),
            open_stdin: Some(false),
            attach_stdin: Some(false),
            attach_stdout: Some(false),
            attach_stderr: Some(false),
            host_config: Some(host),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> BoxConfig {
        BoxConfig {
            image: "wasmsand/python:current".into(),
            name: "wsd-test".into(),
            memory_mb: 256,
            cpu: 1.5,
            pids_limit: 256,
            nofile: 1024,
            nproc: 512,
            workspace_mb: 256,
            workspace_files: 10_000,
            tmp_mb: 64,
            noexec: true,
            exec_scratch_mb: None,
            oci_runtime: Some("runc".into()),
            seccomp: None,
            init_user: "200001:200001".into(),
            env: BTreeMap::from([("A".to_string(), "1".to_string())]),
            labels: BTreeMap::from([(labels::INSTANCE.to_string(), "i1".to_string())]),
            network: None,
        }
    }

    #[test]
    fn every_isolation_flag_of_the_prd_is_set() {
        let body = serde_json::to_value(config().body()).unwrap();
        let h = &body["HostConfig"];
        assert_eq!(h["ReadonlyRootfs"], true);
        assert_eq!(h["NetworkMode"], "none");
        assert_eq!(body["NetworkDisabled"], true);
        assert_eq!(h["CapDrop"], serde_json::json!(["ALL"]));
        assert_eq!(h["Privileged"], false);
        assert_eq!(h["SecurityOpt"], serde_json::json!(["no-new-privileges"]));
        assert_eq!(h["PidsLimit"], 256);
        assert_eq!(h["Memory"], 256 << 20);
        assert_eq!(h["MemorySwap"], 256 << 20);
        assert_eq!(h["NanoCpus"], 1_500_000_000i64);
        assert_eq!(h["Init"], true);
        assert_eq!(h["Runtime"], "runc");
        assert!(h.get("Binds").is_none() || h["Binds"].is_null());
        assert!(h.get("Mounts").is_none() || h["Mounts"].is_null());
        let ulimits: Vec<(String, i64)> = h["Ulimits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|u| {
                (
                    u["Name"].as_str().unwrap().to_string(),
                    u["Hard"].as_i64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            ulimits,
            [
                ("nofile".into(), 1024),
                ("nproc".into(), 512),
                ("core".into(), 0)
            ]
        );
        assert_eq!(
            h["Tmpfs"]["/workspace"],
            "rw,noexec,nodev,nosuid,size=256m,nr_inodes=10000,mode=1777"
        );
        assert_eq!(
            h["Tmpfs"]["/tmp"],
            "rw,noexec,nodev,nosuid,size=64m,mode=1777"
        );
        assert_eq!(body["User"], "200001:200001");
        assert_eq!(body["Labels"]["org.wasmsand.instance"], "i1");
        assert!(
            body["Env"]
                .as_array()
                .unwrap()
                .contains(&serde_json::json!("A=1"))
        );
    }

    #[test]
    fn exec_scratch_and_seccomp_are_opt_in() {
        let mut c = config();
        c.exec_scratch_mb = Some(128);
        c.seccomp = Some("{\"defaultAction\":\"SCMP_ACT_ALLOW\"}".into());
        let body = serde_json::to_value(c.body()).unwrap();
        let h = &body["HostConfig"];
        assert_eq!(
            h["Tmpfs"][EXEC_SCRATCH],
            "rw,exec,nodev,nosuid,size=128m,mode=1777"
        );
        assert_eq!(
            h["SecurityOpt"][1],
            "seccomp={\"defaultAction\":\"SCMP_ACT_ALLOW\"}"
        );
    }
}
