//! The cross-binding conformance suite (`tests/conformance`, its README.md) on the Rust crate:
//! every case of `tests/conformance/cases/*.json` against `wasmsand::Sandbox` itself. The
//! Python (`tests/python/test_conformance.py`) and Node (`bindings/node/test/conformance.test.js`)
//! runners read the same files on each of their transports, so a behaviour that changes under
//! one binding fails all three suites.
//!
//! This is the crate's adapter: each step becomes the crate's call, each result is read back in
//! the cases' field names and checked by the rules the README states, which the other two
//! runners implement the same way. One test runs every case and reports every failure (and
//! every skip, with its reason) rather than stopping at the first.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use wasmsand::{
    ImportOptions, Limits, MergeOptions, RunOptions, Sandbox, SandboxError, SandboxOptions,
    SnapshotId, Truncation,
};

/// Every feature a case may require. A name outside this list fails the case, so that a typo
/// cannot turn into a skip.
const FEATURES: &[&str] = &[
    "run_env_cwd",
    "run_scope_subshell",
    "custom_limits",
    "output_caps",
    "truncation_mode",
    "atomic",
    "portable_state",
    "files_follow_shell_cwd",
];

/// What the crate lacks, and why a case needing it is skipped here.
const LACKS: &[(&str, &str)] = &[
    (
        "run_env_cwd",
        "the crate's RunOptions has no per-run env or cwd (the JSON-RPC dispatcher adds them, dispatch/src/sdk.rs)",
    ),
    (
        "run_scope_subshell",
        "the crate's RunOptions has no per-run env or cwd to scope",
    ),
];

type Fallible<T = ()> = Result<T, String>;

fn cases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance/cases")
}

/// Every case of every file, in file order; an error when the directory is missing or holds no
/// case, a file is not a cases file, or two cases share a name.
fn load_cases(dir: &Path) -> Fallible<Vec<(String, Value)>> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| format!("the conformance cases directory {dir:?} is missing: {e}"))?;
    let mut files = Vec::new();
    for e in entries {
        let path = e.map_err(|e| format!("{dir:?}: {e}"))?.path();
        if path.extension().is_some_and(|x| x == "json") {
            files.push(path);
        }
    }
    files.sort();
    let mut cases = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).map_err(|e| format!("{f:?}: {e}"))?;
        let doc: Value = serde_json::from_str(&text).map_err(|e| format!("{f:?}: {e}"))?;
        let Some(list) = doc.get("cases").and_then(Value::as_array) else {
            return Err(format!(
                "{f:?}: not a cases file (an object with a list `cases`)"
            ));
        };
        let file = f
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        cases.extend(list.iter().map(|c| (file.clone(), c.clone())));
    }
    if cases.is_empty() {
        return Err(format!("no conformance case in {dir:?} (files: {files:?})"));
    }
    let mut seen = HashMap::new();
    for (file, case) in &cases {
        let name = case["name"].as_str().unwrap_or_default().to_string();
        if let Some(other) = seen.insert(name.clone(), file.clone()) {
            return Err(format!(
                "the case name {name:?} is used twice ({other} and {file})"
            ));
        }
    }
    Ok(cases)
}

#[test]
fn conformance_cases() {
    let cases = load_cases(&cases_dir()).unwrap_or_else(|e| panic!("{e}"));
    let (mut passed, mut skipped, mut failed) = (0, Vec::new(), Vec::new());
    for (file, case) in &cases {
        let name = case["name"].as_str().unwrap_or("<unnamed>");
        // A panic in one case (a bug of this runner) is reported with the others.
        let outcome = std::panic::catch_unwind(|| run_case(case))
            .unwrap_or_else(|p| Err(format!("panicked: {}", panic_text(&*p))));
        match outcome {
            Ok(None) => passed += 1,
            Ok(Some(reason)) => {
                println!("SKIP {name}: {reason}");
                skipped.push(name);
            }
            Err(e) => {
                println!("FAIL {name} ({file}): {e}");
                failed.push(format!("{name} ({file}): {e}"));
            }
        }
    }
    println!(
        "conformance: {passed} passed, {} skipped, {} failed of {} cases",
        skipped.len(),
        failed.len(),
        cases.len()
    );
    assert!(
        failed.is_empty(),
        "{} conformance case(s) failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a non-text panic".into())
}

/// Runs one case: `Ok(None)` passed, `Ok(Some(reason))` skipped, `Err` failed.
fn run_case(case: &Value) -> Fallible<Option<String>> {
    let case = obj(case, "case")?;
    check_keys(
        case,
        &["name", "doc", "requires", "sandbox", "setup", "steps"],
        "case",
    )?;
    let mut lacking = Vec::new();
    for f in case
        .get("requires")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let f = f.as_str().ok_or("requires: a list of strings")?;
        if !FEATURES.contains(&f) {
            return Err(format!(
                "unknown feature {f:?}: name it in FEATURES (and in the other runners and the schema)"
            ));
        }
        if let Some((_, why)) = LACKS.iter().find(|(name, _)| *name == f) {
            lacking.push(format!("{f}: {why}"));
        }
    }
    if !lacking.is_empty() {
        return Ok(Some(format!("the crate lacks {}", lacking.join("; "))));
    }
    let mut r = Runner::start(case)?;
    let steps = case["steps"].as_array().ok_or("steps: a list")?;
    if steps.is_empty() {
        return Err("a case needs steps".into());
    }
    for (i, step) in steps.iter().enumerate() {
        let op = step.get("op").and_then(Value::as_str).unwrap_or("?");
        r.step(step).map_err(|e| format!("step {i} ({op}): {e}"))?;
    }
    Ok(None)
}

// ---- the adapter ----

fn obj<'a>(v: &'a Value, what: &str) -> Fallible<&'a Map<String, Value>> {
    v.as_object().ok_or_else(|| format!("{what}: an object"))
}

fn check_keys(o: &Map<String, Value>, allowed: &[&str], what: &str) -> Fallible {
    let unknown: Vec<&String> = o
        .keys()
        .filter(|k| !allowed.contains(&k.as_str()))
        .collect();
    if unknown.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{what}: unknown field(s) {unknown:?}; allowed: {allowed:?}"
        ))
    }
}

fn string<'a>(o: &'a Map<String, Value>, key: &str) -> Fallible<&'a str> {
    o.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{key}: a string is required"))
}

fn opt_string<'a>(o: &'a Map<String, Value>, key: &str) -> Fallible<Option<&'a str>> {
    match o.get(key) {
        None => Ok(None),
        Some(v) => v
            .as_str()
            .map(Some)
            .ok_or_else(|| format!("{key}: a string")),
    }
}

fn opt_bool(o: &Map<String, Value>, key: &str) -> Fallible<bool> {
    match o.get(key) {
        None => Ok(false),
        Some(v) => v.as_bool().ok_or_else(|| format!("{key}: a boolean")),
    }
}

fn b64(s: &str) -> Fallible<Vec<u8>> {
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .map_err(|e| format!("bad base64: {e}"))
}

/// A file's bytes from `text`, `base64` or `repeat` (exactly one).
fn content(o: &Map<String, Value>) -> Fallible<Vec<u8>> {
    let given: Vec<&str> = ["text", "base64", "repeat"]
        .into_iter()
        .filter(|k| o.contains_key(*k))
        .collect();
    match given.as_slice() {
        ["text"] => Ok(string(o, "text")?.as_bytes().to_vec()),
        ["base64"] => b64(string(o, "base64")?),
        ["repeat"] => {
            let rep = obj(&o["repeat"], "repeat")?;
            check_keys(rep, &["text", "count"], "repeat")?;
            let count = rep["count"].as_u64().ok_or("repeat.count: a number")?;
            Ok(string(rep, "text")?.repeat(count as usize).into_bytes())
        }
        _ => Err(format!(
            "exactly one of text, base64, repeat (given: {given:?})"
        )),
    }
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A failure in the cases' terms: a filesystem error by its errno's name, anything else by
/// the kind the JSON-RPC wire gives it (`crates/dispatch/src/error.rs`), which the Python and
/// Node SDKs expose.
fn error_of(e: &SandboxError) -> Value {
    match e {
        SandboxError::Fs(v) => json!({"errno": v.errno.name()}),
        SandboxError::Destroyed => json!({"kind": "sandbox_destroyed"}),
        SandboxError::UnknownSnapshot(_) => json!({"kind": "unknown_snapshot"}),
        SandboxError::Invalid(_) => json!({"kind": "invalid_params"}),
        SandboxError::Process(p) => json!({"kind": p.kind()}),
        SandboxError::MergeConflict(c) => json!({
            "kind": "merge_conflict",
            "conflict_paths": c.iter().map(|c| c.path.clone()).collect::<Vec<_>>(),
        }),
    }
}

/// The live state of one case: its sandboxes by name, snapshot ids and exported blobs.
struct Runner {
    sandboxes: HashMap<String, Sandbox>,
    snapshots: HashMap<String, SnapshotId>,
    blobs: HashMap<String, Vec<u8>>,
}

impl Runner {
    fn start(case: &Map<String, Value>) -> Fallible<Runner> {
        let mut limits = Limits::default();
        if let Some(spec) = case.get("sandbox") {
            let spec = obj(spec, "sandbox")?;
            check_keys(spec, &["timeout_ms", "limits"], "sandbox")?;
            if let Some(t) = spec.get("timeout_ms") {
                limits.timeout_ms = t.as_u64().ok_or("sandbox.timeout_ms: a number")?;
            }
            for (name, v) in spec
                .get("limits")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                let v = v
                    .as_u64()
                    .ok_or_else(|| format!("limit {name}: a number"))?;
                if !limits.set(name, v) {
                    return Err(format!("no limit named {name:?}"));
                }
            }
        }
        let root = Sandbox::new(SandboxOptions {
            limits,
            ..SandboxOptions::default()
        });
        if let Some(setup) = case.get("setup") {
            let setup = obj(setup, "setup")?;
            check_keys(setup, &["files", "env", "cwd"], "setup")?;
            for f in setup
                .get("files")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let f = obj(f, "setup.files[]")?;
                check_keys(f, &["path", "text", "base64", "repeat"], "setup.files[]")?;
                root.write_file(string(f, "path")?, &content(f)?)
                    .map_err(|e| format!("setup: {e}"))?;
            }
            // Variables and cwd are set by a run of the shell, the same line on every binding.
            let mut line = Vec::new();
            for (k, v) in setup
                .get("env")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                line.push(format!(
                    "export {k}={}",
                    quote(v.as_str().ok_or("env: strings")?)
                ));
            }
            if let Some(cwd) = opt_string(setup, "cwd")? {
                line.push(format!("cd -- {}", quote(cwd)));
            }
            if !line.is_empty() {
                let r = root
                    .run(&line.join("; "))
                    .map_err(|e| format!("setup: {e}"))?;
                if r.exit_code != 0 {
                    return Err(format!("setup failed: {r:?}"));
                }
            }
        }
        Ok(Runner {
            sandboxes: HashMap::from([("root".to_string(), root)]),
            snapshots: HashMap::new(),
            blobs: HashMap::new(),
        })
    }

    fn sandbox(&self, step: &Map<String, Value>) -> Fallible<&Sandbox> {
        let name = opt_string(step, "in")?.unwrap_or("root");
        self.sandboxes.get(name).ok_or_else(|| {
            let mut made: Vec<&String> = self.sandboxes.keys().collect();
            made.sort();
            format!("no sandbox named {name:?} (made so far: {made:?})")
        })
    }

    fn step(&mut self, step: &Value) -> Fallible {
        let step = obj(step, "step")?;
        let op = string(step, "op")?;
        let allowed = expect_keys(op)?;
        let empty = Map::new();
        let expect = match step.get("expect") {
            Some(e) => obj(e, "expect")?,
            None => &empty,
        };
        check_keys(expect, allowed, "expect")?;
        let actual = match self.op(op, step)? {
            Ok(v) => v,
            Err(e) => {
                let got = error_of(&e);
                let Some(want) = expect.get("error") else {
                    return Err(format!("failed unexpectedly: {got} ({e})"));
                };
                return compare_error(want, &got);
            }
        };
        if let Some(want) = expect.get("error") {
            return Err(format!(
                "expected the error {want}, but it succeeded with {actual}"
            ));
        }
        check(op, expect, &actual)
    }

    /// Carries out one step; the outer error is a bad case, the inner one the sandbox's.
    fn op(&mut self, op: &str, s: &Map<String, Value>) -> Fallible<Result<Value, SandboxError>> {
        let keys = |extra: &[&str]| {
            let mut k = vec!["op", "in", "doc", "expect"];
            k.extend_from_slice(extra);
            check_keys(s, &k, "step")
        };
        Ok(match op {
            "run" => {
                keys(&[
                    "command",
                    "stdin",
                    "stdin_base64",
                    "env",
                    "cwd",
                    "timeout_ms",
                    "atomic",
                    "truncation",
                ])?;
                if s.contains_key("env") || s.contains_key("cwd") {
                    // Cases with these require `run_env_cwd`, which this runner skips.
                    return Err("env/cwd on a run: the case must require run_env_cwd".into());
                }
                let stdin = match (opt_string(s, "stdin")?, opt_string(s, "stdin_base64")?) {
                    (Some(t), None) => Some(t.as_bytes().to_vec()),
                    (None, Some(b)) => Some(b64(b)?),
                    (None, None) => None,
                    _ => return Err("stdin or stdin_base64, not both".into()),
                };
                let truncation = match opt_string(s, "truncation")? {
                    None | Some("headTail") => Truncation::HeadTail,
                    Some("plain") => Truncation::Plain,
                    Some(t) => return Err(format!("truncation: {t:?}")),
                };
                let opts = RunOptions {
                    timeout_ms: s.get("timeout_ms").and_then(Value::as_u64),
                    stdin: stdin.map(Into::into),
                    atomic: opt_bool(s, "atomic")?,
                    truncation,
                    ..RunOptions::default()
                };
                self.sandbox(s)?
                    .run_with(string(s, "command")?, opts)
                    .map(|r| {
                        json!({
                            "exit_code": r.exit_code,
                            "stdout": r.stdout,
                            "stderr": r.stderr,
                            "error_class": r.error_class.map(|c| c.as_str()),
                            "truncated": r.truncated.map(|t| json!({"stdout": t.stdout, "stderr": t.stderr})),
                            "spilled": r.spilled,
                            "rolled_back": r.rolled_back,
                            "limits_hit": r.usage.limits_hit,
                        })
                    })
            }
            "write_file" => {
                keys(&["path", "text", "base64", "repeat"])?;
                let data = content(s)?;
                self.sandbox(s)?
                    .write_file(string(s, "path")?, &data)
                    .map(|()| Value::Null)
            }
            "read_file" => {
                keys(&["path"])?;
                self.sandbox(s)?
                    .read_file(string(s, "path")?)
                    .map(|b| json!(base64::engine::general_purpose::STANDARD.encode(&b)))
            }
            "list_dir" => {
                keys(&["path"])?;
                self.sandbox(s)?.list(string(s, "path")?).map(|entries| {
                    entries
                        .into_iter()
                        .map(|e| json!({"name": e.name, "type": e.kind.as_str(), "size": e.size}))
                        .collect()
                })
            }
            "stat" => {
                keys(&["path"])?;
                self.sandbox(s)?
                    .stat(string(s, "path")?)
                    .map(|e| json!({"name": e.name, "type": e.kind.as_str(), "size": e.size}))
            }
            "mkdir" => {
                keys(&["path"])?;
                self.sandbox(s)?
                    .mkdir(string(s, "path")?)
                    .map(|()| Value::Null)
            }
            "remove" => {
                keys(&["path", "recursive"])?;
                self.sandbox(s)?
                    .remove(string(s, "path")?, opt_bool(s, "recursive")?)
                    .map(|()| Value::Null)
            }
            "rename" => {
                keys(&["from", "to"])?;
                self.sandbox(s)?
                    .rename(string(s, "from")?, string(s, "to")?)
                    .map(|()| Value::Null)
            }
            "fork" => {
                keys(&["as"])?;
                let name = string(s, "as")?;
                if self.sandboxes.contains_key(name) {
                    return Err(format!("the name {name:?} is taken"));
                }
                match self.sandbox(s)?.fork() {
                    Ok(f) => {
                        self.sandboxes.insert(name.to_string(), f);
                        Ok(Value::Null)
                    }
                    Err(e) => Err(e),
                }
            }
            "destroy" => {
                keys(&[])?;
                self.sandbox(s)?.destroy();
                Ok(Value::Null)
            }
            "snapshot" => {
                keys(&["as"])?;
                match self.sandbox(s)?.snapshot() {
                    Ok(id) => {
                        self.snapshots.insert(string(s, "as")?.to_string(), id);
                        Ok(Value::Null)
                    }
                    Err(e) => Err(e),
                }
            }
            "restore" => {
                keys(&["snapshot", "snapshot_id"])?;
                let id = match (opt_string(s, "snapshot")?, opt_string(s, "snapshot_id")?) {
                    (Some(name), None) => *self
                        .snapshots
                        .get(name)
                        .ok_or_else(|| format!("no snapshot named {name:?}"))?,
                    (None, Some(raw)) => raw
                        .parse()
                        .map_err(|e| format!("snapshot_id {raw:?}: {e}"))?,
                    _ => return Err("snapshot or snapshot_id, one of them".into()),
                };
                self.sandbox(s)?.restore(id).map(|()| Value::Null)
            }
            "merge" => {
                keys(&["from", "env", "cwd"])?;
                let from = string(s, "from")?;
                let fork = self
                    .sandboxes
                    .get(from)
                    .ok_or_else(|| format!("no sandbox named {from:?}"))?;
                let opts = MergeOptions {
                    env: opt_bool(s, "env")?,
                    cwd: opt_bool(s, "cwd")?,
                };
                self.sandbox(s)?.merge(fork, opts).map(|m| {
                    let applied: BTreeMap<String, &str> = m
                        .applied
                        .iter()
                        .map(|a| (a.path.clone(), a.change.as_str()))
                        .collect();
                    json!({"applied": applied, "env": m.env, "cwd": m.cwd})
                })
            }
            "export_state" => {
                keys(&["as"])?;
                match self.sandbox(s)?.export_state(None) {
                    Ok(blob) => {
                        self.blobs.insert(string(s, "as")?.to_string(), blob);
                        Ok(Value::Null)
                    }
                    Err(e) => Err(e),
                }
            }
            "import_state" => {
                check_keys(s, &["op", "doc", "blob", "base64", "as", "expect"], "step")?;
                let blob = match (opt_string(s, "blob")?, opt_string(s, "base64")?) {
                    (Some(name), None) => self
                        .blobs
                        .get(name)
                        .cloned()
                        .ok_or_else(|| format!("no blob named {name:?}"))?,
                    (None, Some(raw)) => b64(raw)?,
                    _ => return Err("blob or base64, one of them".into()),
                };
                match Sandbox::import_state(&blob, ImportOptions::default()) {
                    Ok(sb) => {
                        self.sandboxes.insert(string(s, "as")?.to_string(), sb);
                        Ok(Value::Null)
                    }
                    Err(e) => Err(e),
                }
            }
            other => return Err(format!("unknown op {other:?}")),
        })
    }
}

// ---- the checks (the README's rules) ----

fn expect_keys(op: &str) -> Fallible<&'static [&'static str]> {
    Ok(match op {
        "run" => &[
            "exit_code",
            "stdout",
            "stdout_contains",
            "stdout_regex",
            "stderr",
            "stderr_contains",
            "stderr_regex",
            "error_class",
            "truncated",
            "spilled",
            "rolled_back",
            "limits_hit_contains",
            "error",
        ],
        "write_file" | "mkdir" | "remove" | "rename" | "restore" | "import_state" => &["error"],
        "read_file" => &["text", "base64", "repeat", "size", "sha256", "error"],
        "list_dir" => &["entries", "names_include", "error"],
        "stat" => &["name", "type", "size", "error"],
        "merge" => &["applied", "env", "cwd", "error"],
        "fork" | "destroy" | "snapshot" | "export_state" => &[],
        other => return Err(format!("unknown op {other:?}")),
    })
}

fn compare_error(want: &Value, got: &Value) -> Fallible {
    let want = obj(want, "expect.error")?;
    check_keys(want, &["errno", "kind", "conflict_paths"], "expect.error")?;
    for (k, v) in want {
        if got.get(k) != Some(v) {
            return Err(format!("error {k}: expected {v}, got {got}"));
        }
    }
    Ok(())
}

fn strings(v: &Value) -> Fallible<Vec<&str>> {
    match v {
        Value::String(s) => Ok(vec![s.as_str()]),
        Value::Array(a) => a
            .iter()
            .map(|x| x.as_str().ok_or_else(|| "a list of strings".to_string()))
            .collect(),
        _ => Err("a string or a list of strings".into()),
    }
}

fn check(op: &str, expect: &Map<String, Value>, actual: &Value) -> Fallible {
    match op {
        "run" => {
            for field in [
                "exit_code",
                "stdout",
                "stderr",
                "error_class",
                "truncated",
                "spilled",
                "rolled_back",
            ] {
                if let Some(want) = expect.get(field)
                    && actual[field] != *want
                {
                    return Err(format!(
                        "{field}: expected {want}, got {} (result {actual})",
                        actual[field]
                    ));
                }
            }
            for stream in ["stdout", "stderr"] {
                let text = actual[stream].as_str().unwrap_or_default();
                if let Some(needles) = expect.get(&format!("{stream}_contains")) {
                    for n in strings(needles)? {
                        if !text.contains(n) {
                            return Err(format!("{stream} does not contain {n:?}: {text:?}"));
                        }
                    }
                }
                if let Some(p) = expect.get(&format!("{stream}_regex")) {
                    let p = p.as_str().ok_or("a regex is a string")?;
                    // The whole stream, `.` matching newlines: the reading Rust, Python and
                    // JavaScript regexes share (README).
                    let re = regex::Regex::new(&format!("(?s)^(?:{p})$"))
                        .map_err(|e| format!("bad regex {p:?}: {e}"))?;
                    if !re.is_match(text) {
                        return Err(format!("{stream} does not match /{p}/: {text:?}"));
                    }
                }
            }
            if let Some(want) = expect.get("limits_hit_contains") {
                let hit = &actual["limits_hit"];
                for l in strings(want)? {
                    if !hit.as_array().is_some_and(|h| h.iter().any(|x| x == l)) {
                        return Err(format!("limits_hit {hit} lacks {l:?}"));
                    }
                }
            }
            Ok(())
        }
        "read_file" => {
            let data = b64(actual.as_str().unwrap_or_default())?;
            for key in ["text", "base64", "repeat"] {
                if let Some(v) = expect.get(key) {
                    let mut spec = Map::new();
                    spec.insert(key.to_string(), v.clone());
                    let want = content(&spec)?;
                    if data != want {
                        return Err(format!(
                            "content: expected {:?} ({} bytes), got {:?} ({} bytes)",
                            String::from_utf8_lossy(&want[..want.len().min(200)]),
                            want.len(),
                            String::from_utf8_lossy(&data[..data.len().min(200)]),
                            data.len()
                        ));
                    }
                }
            }
            if let Some(size) = expect.get("size")
                && Some(data.len() as u64) != size.as_u64()
            {
                return Err(format!("size: expected {size}, got {}", data.len()));
            }
            if let Some(want) = expect.get("sha256") {
                let got = hex::encode(Sha256::digest(&data));
                if want.as_str() != Some(got.as_str()) {
                    return Err(format!("sha256: expected {want}, got {got}"));
                }
            }
            Ok(())
        }
        "list_dir" => {
            let entries = actual.as_array().ok_or("a listing")?;
            if let Some(want) = expect.get("entries") {
                let want = want.as_array().ok_or("entries: a list")?;
                // An expected entry without `size` leaves the size unchecked.
                let same = entries.len() == want.len()
                    && entries.iter().zip(want).all(|(e, w)| {
                        w.as_object()
                            .is_some_and(|w| w.iter().all(|(k, v)| e.get(k) == Some(v)))
                    });
                if !same {
                    return Err(format!(
                        "entries: expected {}, got {}",
                        Value::Array(want.clone()),
                        actual
                    ));
                }
            }
            if let Some(names) = expect.get("names_include") {
                for n in strings(names)? {
                    if !entries.iter().any(|e| e["name"] == n) {
                        return Err(format!("{n:?} not listed in {actual}"));
                    }
                }
            }
            Ok(())
        }
        "stat" | "merge" => {
            for (k, want) in expect {
                if actual.get(k) != Some(want) {
                    return Err(format!("{k}: expected {want}, got {actual}"));
                }
            }
            Ok(())
        }
        _ => {
            if expect.is_empty() {
                Ok(())
            } else {
                Err("nothing to expect of this op".into())
            }
        }
    }
}

#[test]
fn a_missing_or_empty_case_directory_fails() {
    let missing = load_cases(Path::new("/nonexistent/conformance/cases"));
    assert!(missing.unwrap_err().contains("is missing"));
    let dir = tempfile::tempdir().unwrap();
    let empty = load_cases(dir.path());
    assert!(empty.unwrap_err().contains("no conformance case"));
    std::fs::write(dir.path().join("x.json"), r#"{"cases": []}"#).unwrap();
    let no_case = load_cases(dir.path());
    assert!(no_case.unwrap_err().contains("no conformance case"));
    std::fs::write(dir.path().join("x.json"), r#"[{"name": "a"}]"#).unwrap();
    let not_cases = load_cases(dir.path());
    assert!(not_cases.unwrap_err().contains("not a cases file"));
}
