//! The service's docker runtime against a real Docker engine, through the real HTTP and
//! WebSocket API on loopback: the languages of its images, sessions and uploads, hostile
//! programs, and the orphan reaper; and `sandboxd` itself inside an unprivileged container
//! (`nested`).
//!
//! Without `WASMSAND_TEST_DOCKER` every test prints "skipped" and passes: the cargo stage has
//! no engine. The `docker` stage of scripts/test.sh sets it after starting an engine and
//! building the images; from then on a missing engine or image is a failure.

mod egress;
mod hostile;
mod languages;
mod mcp;
mod nested;
mod reaper;
mod sessions;

use std::sync::Arc;

use serde_json::{Value, json};
use wasmsand_docker::{Engine, EngineSettings};

use crate::service::common::TestServer;

/// A service with the docker runtime on, labelling its containers with its own instance id,
/// and the engine it uses (to look at the containers behind its back).
pub(crate) struct DockerServer {
    pub srv: TestServer,
    pub engine: Arc<Engine>,
    pub instance: String,
    /// Set by [`DockerServer::finish`]; a test that panicked before it still removes its
    /// containers (on drop), so one failure does not leave containers for the next run.
    finished: bool,
}

impl Drop for DockerServer {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let engine = self.engine.clone();
        // The test's runtime is unwinding: a runtime of its own, on a thread of its own.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let _ = rt.block_on(engine.reap(&Default::default()));
        })
        .join();
    }
}

pub(crate) fn engine_host() -> String {
    std::env::var("WASMSAND_TEST_DOCKER_HOST")
        .unwrap_or_else(|_| "unix:///var/run/docker.sock".into())
}

/// The OCI runtime the suite runs under this time: `runc`, or `runsc` (gVisor) when the
/// docker stage runs it a second time.
pub(crate) fn oci_runtime() -> String {
    std::env::var("WASMSAND_TEST_DOCKER_RUNTIME").unwrap_or_else(|_| "runc".into())
}

/// The runsc that scripts/dockerd.sh registers for containers with an egress allowlist.
pub(crate) const GVISOR_EGRESS_RUNTIME: &str = "runsc-hostinet";

pub(crate) fn gvisor() -> bool {
    oci_runtime() == "runsc"
}

/// The test's engine, or `None` (and "skipped" printed) outside the docker stage.
pub(crate) fn enabled() -> bool {
    if std::env::var_os("WASMSAND_TEST_DOCKER").is_some() {
        return true;
    }
    eprintln!("skipped: WASMSAND_TEST_DOCKER is not set (scripts/test.sh --only docker)");
    false
}

pub(crate) fn engine_for(instance: &str) -> Arc<Engine> {
    Engine::new(EngineSettings {
        host: engine_host(),
        instance: instance.to_string(),
        cgroup_root: "/sys/fs/cgroup".into(),
    })
}

impl DockerServer {
    pub async fn start(name: &str) -> Option<DockerServer> {
        Self::with(name, |_| {}).await
    }

    pub async fn with(
        name: &str,
        f: impl FnOnce(&mut wasmsand_server::Config),
    ) -> Option<DockerServer> {
        if !enabled() {
            return None;
        }
        let instance = format!("e2e-{name}-{}", std::process::id());
        let inst = instance.clone();
        let srv = TestServer::with(move |c| {
            c.docker.enabled = true;
            c.docker.host = engine_host();
            c.docker.instance = Some(inst);
            // The docker stage runs this suite a second time under gVisor.
            c.docker.oci_runtime = oci_runtime();
            if gvisor() {
                c.docker.egress_oci_runtime = Some(GVISOR_EGRESS_RUNTIME.into());
            }
            f(c);
        })
        .await;
        let engine = engine_for(&instance);
        engine
            .info()
            .await
            .expect("the Docker engine answers (scripts/dockerd.sh start)");
        Some(DockerServer {
            srv,
            engine,
            instance,
            finished: false,
        })
    }

    /// Containers of this server's instance on the engine now.
    pub async fn containers(&self) -> usize {
        self.engine.containers().await.unwrap().len()
    }

    /// Stops the server cleanly and checks that it left no container behind.
    pub async fn finish(mut self) {
        self.srv.shut_down().await;
        let left = self.engine.containers().await.unwrap();
        assert!(
            left.is_empty(),
            "instance {} left containers behind: {left:?}",
            self.instance
        );
        self.finished = true;
    }

    /// The docker entry of `GET /runtimes`.
    pub async fn docker_entry(&self) -> Value {
        let (s, v) = self.srv.get("/runtimes").await;
        assert_eq!(s, reqwest::StatusCode::OK, "{v}");
        v["runtimes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "docker")
            .unwrap()
            .clone()
    }

    /// The artifact list of a run.
    pub async fn artifacts(&self, run_id: &str) -> Vec<Value> {
        let (s, v) = self.srv.get(&format!("/runs/{run_id}/artifacts")).await;
        assert_eq!(s, reqwest::StatusCode::OK, "{v}");
        v["artifacts"].as_array().unwrap().clone()
    }

    /// An artifact's bytes.
    pub async fn artifact(&self, run_id: &str, path: &str) -> Vec<u8> {
        let resp = self
            .srv
            .client
            .get(self.srv.url(&format!("/runs/{run_id}/artifacts/{path}")))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), reqwest::StatusCode::OK);
        resp.bytes().await.unwrap().to_vec()
    }

    /// A docker session of `image` with `extra` fields; its id.
    pub async fn session(&self, image: &str, extra: Value) -> String {
        let mut body = json!({ "runtime": "docker", "base_image": image });
        if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                b.insert(k.clone(), v.clone());
            }
        }
        self.srv.session(body).await
    }
}

/// A one-shot docker run body.
pub(crate) fn one_shot(image: &str, argv: &[&str], extra: Value) -> Value {
    let mut body = json!({
        "spec_version": "1.0", "runtime": "docker", "base_image": image, "command": argv,
    });
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            b.insert(k.clone(), v.clone());
        }
    }
    body
}

/// A session run body.
pub(crate) fn in_session(session: &str, argv: &[&str], extra: Value) -> Value {
    let mut body = json!({ "spec_version": "1.0", "session_id": session, "command": argv });
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            b.insert(k.clone(), v.clone());
        }
    }
    body
}

/// `files` of a run request: (path, content) base64-encoded.
pub(crate) fn inline(files: &[(&str, &str)]) -> Value {
    use base64::Engine as _;
    Value::Array(
        files
            .iter()
            .map(|(p, c)| {
                json!({ "path": p, "content": base64::engine::general_purpose::STANDARD.encode(c) })
            })
            .collect(),
    )
}

/// The run completed; its output is in the message when it did not (some tools, Maven
/// among them, report their errors on stdout).
pub(crate) fn assert_completed(status: &Value, frames: &[Value]) {
    assert_eq!(
        status["phase"],
        "completed",
        "{status}\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&crate::service::common::output(frames, "stdout")),
        String::from_utf8_lossy(&crate::service::common::output(frames, "stderr"))
    );
}

/// What every finished docker run reports: the runtime, the image that really ran, and real
/// usage from the container's cgroup.
pub(crate) fn check_docker_record(status: &Value) {
    assert_eq!(status["runtime"], "docker", "{status}");
    let digest = status["image_digest"].as_str().unwrap_or("");
    assert!(digest.starts_with("sha256:"), "{status}");
    let usage = &status["resource_usage"];
    assert!(usage["cpu_time_sec"].as_f64().unwrap() > 0.0, "{status}");
    assert!(usage["peak_rss_mb"].as_f64().unwrap() > 0.0, "{status}");
    assert!(usage["wall_time_sec"].as_f64().unwrap() > 0.0, "{status}");
}
