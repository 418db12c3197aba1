//! One `sandbox_run`: preparing the sandbox (files, env, cwd), running with the output streamed
//! as progress notifications, and stopping the run when the client cancels the request.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use rmcp::model::{
    JsonObject, MetaObject, NotificationMetaObject, ProgressNotificationParam, ProgressToken,
};
use rmcp::{Peer, RoleServer};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use wasmsand::{RunOptions, RunResult, Sandbox};

use crate::types::{Encoding, FileArg, TruncatedOut};
use crate::{HostedEnd, HostedRun, RunHost};

/// Where progress notifications for a run go.
pub(crate) struct Progress {
    pub peer: Peer<RoleServer>,
    pub token: ProgressToken,
}

/// What to do before the command, in order: files, variables, directory.
#[derive(Default)]
pub(crate) struct Prepare {
    pub files: Vec<FileArg>,
    pub env: Vec<(String, String)>,
    pub cwd: Option<String>,
}

pub(crate) struct RunSpec {
    pub command: String,
    pub stdin: Option<String>,
    pub timeout_ms: u64,
    pub prepare: Prepare,
}

use crate::OutputStream as Stream;

impl Stream {
    fn name(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// Runs `spec` on `sb`. The caller holds the session's run lock, so `Sandbox::cancel` can only
/// reach this run. Errors are messages for the model (a bad file, a missing cwd).
pub(crate) async fn run(
    sb: Arc<Sandbox>,
    spec: RunSpec,
    progress: Option<Progress>,
    ct: CancellationToken,
) -> Result<RunResult, String> {
    let (chunks_tx, chunks_rx) = mpsc::unbounded_channel::<(Stream, Bytes)>();
    let mut opts = RunOptions {
        timeout_ms: Some(spec.timeout_ms),
        stdin: spec.stdin.map(Bytes::from),
        ..RunOptions::default()
    };
    let forwarder = match progress {
        Some(p) => {
            for stream in [Stream::Stdout, Stream::Stderr] {
                let tx = chunks_tx.clone();
                let cb = Arc::new(move |b: &[u8]| {
                    let _ = tx.send((stream, Bytes::copy_from_slice(b)));
                });
                match stream {
                    Stream::Stdout => opts.on_stdout = Some(cb),
                    Stream::Stderr => opts.on_stderr = Some(cb),
                }
            }
            Some(tokio::spawn(forward(chunks_rx, p)))
        }
        None => None,
    };
    // The callbacks hold the only senders left: the forwarder ends when the run has ended.
    drop(chunks_tx);

    let job_sb = sb.clone();
    let mut job = tokio::task::spawn_blocking(move || -> Result<RunResult, String> {
        prepare(&job_sb, spec.prepare)?;
        job_sb
            .run_with(&spec.command, opts)
            .map_err(|e| e.to_string())
    });
    let joined = tokio::select! {
        r = &mut job => r,
        _ = ct.cancelled() => {
            // `cancel` only reaches a command that has started; a cancel that lands while the
            // files are still being written is repeated until the run is over.
            loop {
                sb.cancel();
                tokio::select! {
                    r = &mut job => break r,
                    _ = tokio::time::sleep(Duration::from_millis(5)) => {}
                }
            }
        }
    };
    if let Some(f) = forwarder {
        let _ = f.await;
    }
    joined.map_err(|e| format!("the run failed inside the server: {e}"))?
}

/// The output of a hosted run as this server keeps it: each stream up to its cap.
pub(crate) struct Collected {
    pub stdout: String,
    pub stderr: String,
    pub truncated: TruncatedOut,
}

/// Runs `spec` on the embedding server's `host`, streaming what it sends as progress
/// notifications and keeping each stream up to its cap.
pub(crate) async fn hosted(
    host: &Arc<dyn RunHost>,
    principal: Option<&str>,
    spec: HostedRun,
    progress: Option<Progress>,
    ct: CancellationToken,
) -> Result<(HostedEnd, Collected), String> {
    let caps = [spec.stdout_cap as usize, spec.stderr_cap as usize];
    let (tx, mut rx) = mpsc::unbounded_channel::<(Stream, Bytes)>();
    let (progress_tx, forwarder) = match progress {
        Some(p) => {
            let (ptx, prx) = mpsc::unbounded_channel();
            (Some(ptx), Some(tokio::spawn(forward(prx, p))))
        }
        None => (None, None),
    };
    let mut kept = [Vec::new(), Vec::new()];
    let mut cut = [false, false];
    let mut keep = |(stream, data): (Stream, Bytes)| {
        let i = stream as usize;
        let room = caps[i].saturating_sub(kept[i].len());
        if data.len() > room {
            cut[i] = true;
        }
        let data = data.slice(..data.len().min(room));
        if data.is_empty() {
            return;
        }
        kept[i].extend_from_slice(&data);
        if let Some(p) = &progress_tx {
            let _ = p.send((stream, data));
        }
    };
    let mut run = host.run(principal, spec, tx, ct);
    // The host may keep its sender past the run's end: the end of the run, not of the
    // channel, ends the collection (every chunk was sent before the run ended).
    let end = loop {
        tokio::select! {
            end = &mut run => break end,
            Some(chunk) = rx.recv() => keep(chunk),
        }
    };
    while let Ok(chunk) = rx.try_recv() {
        keep(chunk);
    }
    drop(progress_tx);
    if let Some(f) = forwarder {
        let _ = f.await;
    }
    let end = end?;
    let [stdout, stderr] = kept.map(|b| String::from_utf8_lossy(&b).into_owned());
    Ok((
        end,
        Collected {
            stdout,
            stderr,
            truncated: TruncatedOut {
                stdout: cut[0],
                stderr: cut[1],
            },
        },
    ))
}

fn prepare(sb: &Sandbox, p: Prepare) -> Result<(), String> {
    write_files(sb, &p.files)?;
    for (name, value) in &p.env {
        sb.set_env(name, value)
            .map_err(|e| format!("env {name}: {e}"))?;
    }
    if let Some(dir) = p.cwd {
        let r = sb
            .run(&format!("cd -- {}", shell_quote(&dir)))
            .map_err(|e| e.to_string())?;
        if r.exit_code != 0 {
            return Err(format!("cwd {dir:?}: {}", r.stderr.trim_end()));
        }
    }
    Ok(())
}

/// Writes the files of a `files` argument; relative paths are under the home directory.
pub(crate) fn write_files(sb: &Sandbox, files: &[FileArg]) -> Result<(), String> {
    for f in files {
        let data = decode(&f.content, f.encoding).map_err(|e| format!("files: {}: {e}", f.path))?;
        let path = if f.path.starts_with('/') {
            f.path.clone()
        } else {
            format!("{}/{}", wasmsand::HOME, f.path)
        };
        sb.write_file(&path, &data)
            .map_err(|e| format!("files: {}: {e}", f.path))?;
    }
    Ok(())
}

pub(crate) fn decode(content: &str, encoding: Encoding) -> Result<Vec<u8>, String> {
    use base64::Engine as _;
    match encoding {
        Encoding::Utf8 => Ok(content.as_bytes().to_vec()),
        Encoding::Base64 => base64::engine::general_purpose::STANDARD
            .decode(content.trim())
            .map_err(|e| format!("content is not valid base64: {e}")),
    }
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// An argument vector as one bash line that runs exactly it: each word quoted, so nothing is
/// expanded.
pub(crate) fn command_line(argv: &[String]) -> String {
    argv.iter()
        .map(|w| shell_quote(w))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Sends output chunks as progress notifications: `progress` counts the bytes sent so far,
/// `message` is the text, `_meta["wasmsand/stream"]` says which stream. Chunks that queued up
/// while a notification was being sent go out together.
async fn forward(mut rx: mpsc::UnboundedReceiver<(Stream, Bytes)>, p: Progress) {
    let mut decoders = [Utf8Carry::default(), Utf8Carry::default()];
    let mut sent: u64 = 0;
    let mut peer_gone = false;
    while let Some(first) = rx.recv().await {
        if peer_gone {
            continue;
        }
        let mut batch = vec![first];
        while let Ok(more) = rx.try_recv() {
            batch.push(more);
        }
        for (stream, data) in coalesce(batch) {
            let (text, consumed) = decoders[stream as usize].push(&data);
            if !send(&p, stream, text, consumed, &mut sent).await {
                peer_gone = true;
                break;
            }
        }
    }
    if !peer_gone {
        for stream in [Stream::Stdout, Stream::Stderr] {
            let (text, consumed) = decoders[stream as usize].finish();
            if !send(&p, stream, text, consumed, &mut sent).await {
                return;
            }
        }
    }
}

async fn send(p: &Progress, stream: Stream, text: String, consumed: usize, sent: &mut u64) -> bool {
    if text.is_empty() {
        return true;
    }
    *sent += consumed as u64;
    let mut meta = JsonObject::new();
    meta.insert("wasmsand/stream".into(), stream.name().into());
    let mut param =
        ProgressNotificationParam::new(p.token.clone(), *sent as f64).with_message(text);
    param.meta = Some(NotificationMetaObject(MetaObject(meta)));
    p.peer.notify_progress(param).await.is_ok()
}

/// Joins neighbouring chunks of the same stream.
fn coalesce(batch: Vec<(Stream, Bytes)>) -> Vec<(Stream, Vec<u8>)> {
    let mut out: Vec<(Stream, Vec<u8>)> = Vec::new();
    for (stream, data) in batch {
        match out.last_mut() {
            Some((s, buf)) if *s == stream => buf.extend_from_slice(&data),
            _ => out.push((stream, data.to_vec())),
        }
    }
    out
}

/// Decodes a byte stream as UTF-8 across chunk boundaries: a character split between two
/// chunks comes out whole with the second, not as two replacement characters.
#[derive(Default)]
struct Utf8Carry {
    pending: Vec<u8>,
}

impl Utf8Carry {
    /// The text of every complete character so far, and how many bytes it used.
    fn push(&mut self, data: &[u8]) -> (String, usize) {
        self.pending.extend_from_slice(data);
        let cut = complete_prefix(&self.pending);
        let text = String::from_utf8_lossy(&self.pending[..cut]).into_owned();
        self.pending.drain(..cut);
        (text, cut)
    }

    /// Whatever is left at the end, invalid bytes as U+FFFD.
    fn finish(&mut self) -> (String, usize) {
        let n = self.pending.len();
        let text = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        (text, n)
    }
}

/// Length of the longest prefix that does not end inside an incomplete character.
fn complete_prefix(buf: &[u8]) -> usize {
    let mut pos = 0;
    loop {
        match std::str::from_utf8(&buf[pos..]) {
            Ok(_) => return buf.len(),
            Err(e) => match e.error_len() {
                Some(bad) => pos += e.valid_up_to() + bad,
                None => return pos + e.valid_up_to(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn characters_split_between_chunks_come_out_whole() {
        let mut d = Utf8Carry::default();
        let bytes = "héllo €".as_bytes();
        let (a, na) = d.push(&bytes[..2]);
        assert_eq!((a.as_str(), na), ("h", 1));
        let (b, nb) = d.push(&bytes[2..bytes.len() - 1]);
        assert_eq!(b, "éllo ");
        let (c, nc) = d.push(&bytes[bytes.len() - 1..]);
        assert_eq!(c, "€");
        assert_eq!(na + nb + nc, bytes.len());
        assert_eq!(d.finish(), (String::new(), 0));
    }

    #[test]
    fn invalid_bytes_become_replacement_characters() {
        let mut d = Utf8Carry::default();
        let (t, n) = d.push(b"a\xffb\xe2\x82");
        assert_eq!((t.as_str(), n), ("a\u{fffd}b", 3));
        assert_eq!(d.finish(), ("\u{fffd}".to_string(), 2));
    }

    #[test]
    fn neighbouring_chunks_of_a_stream_are_joined() {
        let batch = vec![
            (Stream::Stdout, Bytes::from_static(b"a")),
            (Stream::Stdout, Bytes::from_static(b"b")),
            (Stream::Stderr, Bytes::from_static(b"c")),
            (Stream::Stdout, Bytes::from_static(b"d")),
        ];
        let out = coalesce(batch);
        let shape: Vec<(&str, &[u8])> = out.iter().map(|(s, b)| (s.name(), &b[..])).collect();
        assert_eq!(
            shape,
            vec![("stdout", &b"ab"[..]), ("stderr", b"c"), ("stdout", b"d")]
        );
    }

    #[test]
    fn quoting_survives_quotes() {
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }
}
