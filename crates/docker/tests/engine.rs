//! The Docker runtime against a real engine (the `docker` stage of scripts/test.sh starts
//! one and builds the images). Without `WASMSAND_TEST_DOCKER` these print "skipped": the
//! cargo stage has no engine. With it, an engine that does not answer is a failure.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use wasmsand_docker::{BoxConfig, Engine, EngineSettings, RunEnd, RunRequest, Stream, labels};

fn engine(instance: &str) -> Option<Arc<Engine>> {
    if std::env::var_os("WASMSAND_TEST_DOCKER").is_none() {
        eprintln!("skipped: WASMSAND_TEST_DOCKER is not set (scripts/test.sh --only docker)");
        return None;
    }
    Some(Engine::new(EngineSettings {
        host: std::env::var("WASMSAND_TEST_DOCKER_HOST")
            .unwrap_or_else(|_| "unix:///var/run/docker.sock".into()),
        instance: instance.to_string(),
        cgroup_root: "/sys/fs/cgroup".into(),
    }))
}

fn config(instance: &str, image: &str, memory_mb: u64) -> BoxConfig {
    let uid = 200_000 + (std::process::id() % 60_000);
    BoxConfig {
        image: image.into(),
        name: format!("wsd-test-{instance}-{}", std::process::id()),
        memory_mb,
        cpu: 1.0,
        pids_limit: 64,
        nofile: 256,
        nproc: 128,
        workspace_mb: 32,
        workspace_files: 1000,
        tmp_mb: 16,
        noexec: true,
        exec_scratch_mb: None,
        oci_runtime: None,
        seccomp: None,
        init_user: format!("{uid}:{uid}"),
        env: BTreeMap::new(),
        labels: BTreeMap::from([(labels::INSTANCE.to_string(), instance.to_string())]),
        network: None,
    }
}

/// What a run printed: stdout, stderr.
type Printed = Arc<Mutex<(Vec<u8>, Vec<u8>)>>;

fn collector() -> (wasmsand_docker::Sink, Printed) {
    let got = Arc::new(Mutex::new((Vec::new(), Vec::new())));
    let g = got.clone();
    let sink: wasmsand_docker::Sink = Arc::new(move |s: Stream, b: &[u8]| {
        let mut g = g.lock();
        match s {
            Stream::Stdout => g.0.extend_from_slice(b),
            Stream::Stderr => g.1.extend_from_slice(b),
        }
    });
    (sink, got)
}

fn req(argv: &[&str]) -> RunRequest {
    RunRequest {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        env: BTreeMap::new(),
        cwd: None,
        timeout: Duration::from_secs(30),
        grace: Duration::from_secs(1),
        stdin: None,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn files_runs_and_stops_in_one_container() {
    let instance = "engine-test-files";
    let Some(engine) = engine(instance) else {
        return;
    };
    let uid = 200_001 + (std::process::id() % 60_000);
    let c = wasmsand_docker::Container::create(
        &engine,
        &config(instance, "wasmsand/python:current", 128),
        &format!("{uid}:{uid}"),
        |_| {},
    )
    .await
    .expect("the python image is built (sandboxd images build python)");

    c.write_files(
        &["src".to_string()],
        &[(
            "src/main.py".into(),
            b"import sys\nprint('out'); print('err', file=sys.stderr)\n".to_vec(),
        )],
    )
    .await
    .unwrap();
    let (sink, got) = collector();
    let out = c
        .run(
            req(&["python", "src/main.py"]),
            sink,
            std::future::pending(),
        )
        .await
        .unwrap();
    assert_eq!((out.exit_code, out.end.clone()), (0, RunEnd::Exited));
    assert_eq!(got.lock().0, b"out\n");
    assert_eq!(got.lock().1, b"err\n");
    assert!(out.cpu_time_sec.unwrap() > 0.0, "{out:?}");
    assert!(out.peak_rss_mb.unwrap() > 1.0, "{out:?}");

    // Standard input: 4 MiB through a program that reads it all, and the same offered to one
    // that exits without reading (the run ends; the unread input is dropped).
    let input: Vec<u8> = (0..4u32 << 20).map(|i| b'a' + (i % 26) as u8).collect();
    let (sink, got) = collector();
    let out = c
        .run(
            RunRequest {
                stdin: Some(input.clone()),
                ..req(&["sh", "-c", "wc -c; head -c 3 /dev/stdin"])
            },
            sink,
            std::future::pending(),
        )
        .await
        .unwrap();
    assert_eq!(out.exit_code, 0, "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&got.lock().0),
        format!("{}\n", input.len())
    );
    let (sink, got) = collector();
    let out = c
        .run(
            RunRequest {
                stdin: Some(input),
                ..req(&["echo", "ignored"])
            },
            sink,
            std::future::pending(),
        )
        .await
        .unwrap();
    assert_eq!((out.exit_code, &got.lock().0[..]), (0, &b"ignored\n"[..]));

    // A run that ignores TERM is killed after the grace.
    let (sink, _) = collector();
    let stop = tokio::time::sleep(Duration::from_millis(500));
    let out = c
        .run(req(&["sh", "-c", "trap '' TERM; sleep 1000"]), sink, stop)
        .await
        .unwrap();
    assert_eq!((out.exit_code, out.end), (137, RunEnd::Stopped));

    // Artifacts: listing and reading.
    let (sink, _) = collector();
    c.run(
        req(&[
            "sh",
            "-c",
            "mkdir -p out && echo data > out/a.txt && ln -s /etc/passwd out/link",
        ]),
        sink,
        std::future::pending(),
    )
    .await
    .unwrap();
    let listing = c.list().await.unwrap();
    assert!(
        listing
            .iter()
            .any(|e| e.path == "out/link" && e.kind == 'l'),
        "{listing:?}"
    );
    let files = c.read_files(&["out/a.txt".into()], 1 << 20).await.unwrap();
    assert_eq!(files, [("out/a.txt".to_string(), b"data\n".to_vec())]);

    // An upload that does not fit leaves nothing behind.
    let big = vec![0u8; 40 << 20];
    let err = c
        .write_files(&[], &[("new/big.bin".into(), big)])
        .await
        .unwrap_err();
    assert!(
        matches!(err, wasmsand_docker::FilesError::WorkspaceFull(_)),
        "{err}"
    );
    assert!(
        !c.list()
            .await
            .unwrap()
            .iter()
            .any(|e| e.path.starts_with("new"))
    );

    c.remove().await;
    assert_eq!(engine.reap(&Default::default()).await.unwrap(), 0);
}
