//! `sandboxd` over real pipes: requests per second for `files.read` and `run 'true'`
//! (pipelined on one connection; criterion's elements/s is the request rate), and the time
//! from spawning the process to the first `run` answered, with the module cache warm.

// `criterion_group!` defines an undocumented `pub fn`; a benchmark has no API to document.
#![allow(missing_docs)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

struct Daemon {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Daemon {
    fn start() -> Daemon {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sandboxd"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("sandboxd starts");
        Daemon {
            stdin: child.stdin.take().unwrap(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
        }
    }

    fn read_line(&mut self) -> String {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert!(line.contains("\"result\""), "unexpected answer: {line}");
        line
    }

    /// Sends `n` copies of `request` at once (from another thread, so that neither side
    /// blocks on a full pipe) and reads the `n` answers.
    fn pipelined(&mut self, request: &str, n: u64) -> Duration {
        let mut batch = Vec::with_capacity(request.len() * n as usize + n as usize);
        for _ in 0..n {
            batch.extend_from_slice(request.as_bytes());
            batch.push(b'\n');
        }
        let start = Instant::now();
        std::thread::scope(|s| {
            let stdin = &mut self.stdin;
            s.spawn(move || {
                stdin.write_all(&batch).unwrap();
                stdin.flush().unwrap();
            });
            let mut line = String::new();
            for _ in 0..n {
                line.clear();
                self.stdout.read_line(&mut line).unwrap();
            }
        });
        start.elapsed()
    }

    fn call(&mut self, request: &str) -> String {
        writeln!(self.stdin, "{request}").unwrap();
        self.stdin.flush().unwrap();
        self.read_line()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn requests_per_second(c: &mut Criterion) {
    let mut d = Daemon::start();
    d.call(r#"{"jsonrpc":"2.0","id":0,"method":"files.write","params":{"path":"/tmp/f","data":"aGVsbG8gd29ybGQK"}}"#);
    let mut g = c.benchmark_group("stdio");
    g.throughput(Throughput::Elements(1));
    g.bench_function("files.read", |b| {
        b.iter_custom(|n| {
            d.pipelined(
                r#"{"jsonrpc":"2.0","id":1,"method":"files.read","params":{"path":"/tmp/f"}}"#,
                n,
            )
        })
    });
    g.bench_function("run true", |b| {
        b.iter_custom(|n| {
            d.pipelined(
                r#"{"jsonrpc":"2.0","id":2,"method":"run","params":{"command":"true"}}"#,
                n,
            )
        })
    });
    g.finish();
}

fn start_to_first_run(c: &mut Criterion, name: &str, command: &str) {
    let request =
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"run","params":{{"command":"{command}"}}}}"#);
    // Warms the on-disk module cache for the guest programs the command uses.
    Daemon::start().call(&request);
    let mut g = c.benchmark_group("startup");
    g.sample_size(20);
    g.bench_function(name, |b| {
        b.iter_custom(|n| {
            let mut total = Duration::ZERO;
            for _ in 0..n {
                let start = Instant::now();
                let mut d = Daemon::start();
                d.call(&request);
                total += start.elapsed();
            }
            total
        })
    });
    g.finish();
}

fn startup(c: &mut Criterion) {
    start_to_first_run(c, "first run true", "true");
    start_to_first_run(c, "first run cat (guest program)", "cat /etc/hostname");
}

criterion_group!(benches, requests_per_second, startup);
criterion_main!(benches);
