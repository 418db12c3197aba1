//! `sandboxd mcp` over real pipes: the round trip of a `sandbox_run` of `echo hi` (a fresh
//! sandbox each call), median and spread over sequential calls, through two clients: rmcp's
//! (which puts a progressToken on every request, so the output also comes back as one progress
//! notification), and bare JSON lines without a progressToken (the server's own cost).
//!
//! `cargo bench --profile dev -p sandboxd --bench mcp`

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

const WARMUP: usize = 50;
const CALLS: usize = 500;

fn report(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let pct = |p: f64| samples[((samples.len() - 1) as f64 * p).round() as usize];
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let mean = samples.iter().sum::<Duration>() / samples.len() as u32;
    println!(
        "{name}: median {:.0} µs, p10 {:.0} µs, p90 {:.0} µs, p99 {:.0} µs, mean {:.0} µs ({} calls)",
        us(pct(0.5)),
        us(pct(0.1)),
        us(pct(0.9)),
        us(pct(0.99)),
        us(mean),
        samples.len()
    );
}

fn rmcp_client() -> Vec<Duration> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_sandboxd"));
        cmd.arg("mcp");
        let client = ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap();
        let params = CallToolRequestParams::new("sandbox_run")
            .with_arguments(json!({"command": "echo hi"}).as_object().unwrap().clone());
        let mut samples = Vec::with_capacity(CALLS);
        for i in 0..WARMUP + CALLS {
            let start = Instant::now();
            let r = client.call_tool(params.clone()).await.unwrap();
            let took = start.elapsed();
            assert_eq!(r.structured_content.unwrap()["stdout"], "hi\n");
            if i >= WARMUP {
                samples.push(took);
            }
        }
        client.cancel().await.unwrap();
        samples
    })
}

fn raw_lines() -> Vec<Duration> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sandboxd"))
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let mut exchange = |stdin: &mut std::process::ChildStdin, v: &Value| -> Value {
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
        line.clear();
        stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap()
    };
    exchange(
        &mut stdin,
        &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"}}}),
    );
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    )
    .unwrap();
    let mut samples = Vec::with_capacity(CALLS);
    for i in 0..WARMUP + CALLS {
        let req = json!({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": {
            "name": "sandbox_run", "arguments": {"command": "echo hi"}}});
        let start = Instant::now();
        let answer = exchange(&mut stdin, &req);
        let took = start.elapsed();
        assert_eq!(answer["result"]["structuredContent"]["stdout"], "hi\n");
        if i >= WARMUP {
            samples.push(took);
        }
    }
    drop(stdin);
    child.wait().unwrap();
    samples
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is not supported and not needed.
    report(
        "sandbox_run echo hi over stdio, rmcp client (progress token)",
        rmcp_client(),
    );
    report(
        "sandbox_run echo hi over stdio, raw JSON lines (no progress token)",
        raw_lines(),
    );
}
