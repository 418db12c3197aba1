//! Each image's language, end to end: streamed output, exit status, an artifact (and a
//! symlink listed, not followed) and real usage.

use serde_json::json;

use super::{DockerServer, assert_completed, check_docker_record, inline, one_shot};
use crate::service::common::{check_stream_rules, output, stdout};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_traceback_streams_stderr_and_fails_with_nonzero_exit() {
    let Some(d) = DockerServer::start("python").await else {
        return;
    };
    let script = "import os\n\
                  print('before', flush=True)\n\
                  open('result.txt', 'w').write('42\\n')\n\
                  os.symlink('/etc/passwd', 'link')\n\
                  def f():\n    return 1 / 0\n\
                  f()\n";
    let (id, frames, status) = d
        .srv
        .run(one_shot(
            "python:3.11-slim",
            &["python", "main.py"],
            json!({ "files": inline(&[("main.py", script)]), "capture_patterns": ["result.txt", "link"] }),
        ))
        .await;
    check_stream_rules(&frames);
    assert_eq!(stdout(&frames), "before\n");
    let err = String::from_utf8(output(&frames, "stderr")).unwrap();
    assert!(err.contains("Traceback (most recent call last)"), "{err}");
    assert!(err.contains("ZeroDivisionError: division by zero"), "{err}");
    assert_eq!(status["phase"], "failed", "{status}");
    assert_eq!(status["reason_code"], "nonzero_exit");
    assert_eq!(status["exit_code"], 1);
    assert_eq!(status["base_image"], "python:3.11-slim");
    check_docker_record(&status);
    let artifacts = d.artifacts(&id).await;
    assert_eq!(artifacts.len(), 2, "{artifacts:?}");
    assert_eq!(artifacts[0]["path"], "link");
    assert_eq!(artifacts[0]["size"], 0);
    assert_eq!(artifacts[1]["path"], "result.txt");
    assert_eq!(artifacts[1]["size"], 3);
    assert_eq!(d.artifact(&id, "result.txt").await, b"42\n");
    d.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_runs_an_inline_expression_and_a_script() {
    let Some(d) = DockerServer::start("node").await else {
        return;
    };
    let (_, frames, status) = d
        .srv
        .run(one_shot(
            "node:20-alpine",
            &[
                "node",
                "-e",
                "console.log(process.version.split('.')[0], [1,2,3].map(x => x * 2).join(','))",
            ],
            json!({}),
        ))
        .await;
    assert_eq!(status["phase"], "completed", "{status}");
    assert_eq!(stdout(&frames), "v18 2,4,6\n");
    check_docker_record(&status);

    let script = "const fs = require('fs');\n\
                  for (let i = 0; i < 3; i++) console.log('line', i);\n\
                  fs.mkdirSync('out');\n\
                  fs.writeFileSync('out/data.json', JSON.stringify({ ok: true }));\n\
                  console.error('done');\n";
    let (id, frames, status) = d
        .srv
        .run(one_shot(
            "node:20",
            &["node", "app.js"],
            json!({ "files": inline(&[("app.js", script)]), "capture_patterns": ["out/**"] }),
        ))
        .await;
    check_stream_rules(&frames);
    assert_eq!(status["phase"], "completed", "{status}");
    assert_eq!(stdout(&frames), "line 0\nline 1\nline 2\n");
    assert_eq!(output(&frames, "stderr"), b"done\n");
    let artifacts = d.artifacts(&id).await;
    assert_eq!(artifacts[0]["path"], "out/data.json");
    assert_eq!(artifacts[0]["type"], "application/json");
    assert_eq!(d.artifact(&id, "out/data.json").await, b"{\"ok\":true}");
    check_docker_record(&status);
    d.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_run_builds_and_runs_a_two_file_module() {
    let Some(d) = DockerServer::start("go").await else {
        return;
    };
    let files = inline(&[
        ("go.mod", "module example.com/hello\n\ngo 1.19\n"),
        (
            "main.go",
            "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\nfunc main() {\n\tfmt.Println(greet(\"docker\"))\n\tos.WriteFile(\"built.txt\", []byte(\"go\\n\"), 0o644)\n}\n",
        ),
        (
            "greet.go",
            "package main\n\nfunc greet(who string) string { return \"hello, \" + who }\n",
        ),
    ]);
    let (id, frames, status) = d
        .srv
        .run(one_shot(
            "golang:1.22-alpine",
            &["go", "run", "."],
            json!({ "files": files, "capture_patterns": ["built.txt"], "timeout_sec": 300 }),
        ))
        .await;
    check_stream_rules(&frames);
    assert_completed(&status, &frames);
    assert_eq!(stdout(&frames), "hello, docker\n");
    assert_eq!(d.artifacts(&id).await[0]["path"], "built.txt");
    check_docker_record(&status);
    d.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn javac_compiles_and_java_runs() {
    let Some(d) = DockerServer::start("java").await else {
        return;
    };
    let main = "public class Main {\n\
                  public static void main(String[] args) throws Exception {\n\
                    System.out.println(\"sum=\" + java.util.stream.IntStream.rangeClosed(1, 10).sum());\n\
                    java.nio.file.Files.writeString(java.nio.file.Path.of(\"report.txt\"), \"java\\n\");\n\
                    System.err.println(\"err line\");\n\
                  }\n\
                }\n";
    let (id, frames, status) = d
        .srv
        .run(one_shot(
            "eclipse-temurin:17-jre",
            &["bash", "-c", "javac Main.java && java -cp . Main"],
            json!({ "files": inline(&[("Main.java", main)]), "capture_patterns": ["*.txt", "*.class"], "timeout_sec": 300 }),
        ))
        .await;
    check_stream_rules(&frames);
    assert_completed(&status, &frames);
    assert_eq!(stdout(&frames), "sum=55\n");
    assert!(String::from_utf8_lossy(&output(&frames, "stderr")).contains("err line"));
    let artifacts = d.artifacts(&id).await;
    let paths: Vec<&str> = artifacts
        .iter()
        .map(|a| a["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["Main.class", "report.txt"]);
    check_docker_record(&status);
    d.finish().await;
}

/// `ls -l` and `stat` in every image, also under gVisor, whose Debian runsc refuses the statx
/// flags Debian's coreutils pass (the images preload a shim that retries without them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ls_l_and_stat_work_in_every_image() {
    let Some(d) = DockerServer::start("ls-l").await else {
        return;
    };
    for image in [
        "debian",
        "python:3.11-slim",
        "node:20",
        "golang:1.22",
        "eclipse-temurin:17",
    ] {
        let (_, frames, status) = d
            .srv
            .run(one_shot(
                image,
                &[
                    "sh",
                    "-c",
                    "printf abc >f.txt && ls -l f.txt | cut -d' ' -f1,5 && stat -c '%s %F' f.txt \
                     && ls -l /etc/hostname >/dev/null && cat /etc/ld.so.preload",
                ],
                json!({}),
            ))
            .await;
        assert_completed(&status, &frames);
        assert_eq!(
            stdout(&frames),
            "-rw-r--r-- 3\n3 regular file\n/usr/lib/wasmsand/statx_compat.so\n",
            "{image}"
        );
    }
    d.finish().await;
}
