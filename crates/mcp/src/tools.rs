//! The MCP tools, listed once: [`ToolName`] names every tool, its definition (schemas,
//! description, annotations) is a `match` on it and so is the server's dispatch, so a tool
//! cannot be listed without a handler or handled without being listed. docs/mcp.md's tool
//! table is rendered from the definitions (`tool_table_in_the_docs_is_the_registry`).

use std::borrow::Cow;

use rmcp::model::{Tool, ToolAnnotations};
use schemars::JsonSchema;

use crate::McpConfig;
use crate::types::*;

/// Declares the tools: variant and wire name, in the order `tools/list` gives them.
macro_rules! tool_names {
    ($($variant:ident = $name:literal,)+) => {
        /// One MCP tool.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) enum ToolName {
            $($variant,)+
        }

        impl ToolName {
            /// Every tool, in `tools/list` order.
            pub(crate) const ALL: &'static [ToolName] = &[$(ToolName::$variant),+];

            /// The name clients call it by.
            pub(crate) fn as_str(self) -> &'static str {
                match self {
                    $(ToolName::$variant => $name,)+
                }
            }

            /// The tool called `name`, if there is one.
            pub(crate) fn from_name(name: &str) -> Option<ToolName> {
                match name {
                    $($name => Some(ToolName::$variant),)+
                    _ => None,
                }
            }
        }
    };
}

tool_names! {
    SandboxRun = "sandbox_run",
    SandboxDotRun = "sandbox.run",
    SessionCreate = "session_create",
    SessionFork = "session_fork",
    SessionList = "session_list",
    SessionDestroy = "session_destroy",
    FilesRead = "files_read",
    FilesWrite = "files_write",
    FilesList = "files_list",
    SnapshotCreate = "snapshot_create",
    SnapshotRestore = "snapshot_restore",
    SandboxDiff = "sandbox_diff",
    SandboxCommit = "sandbox_commit",
    SandboxDiscard = "sandbox_discard",
    SandboxBestOf = "sandbox_best_of",
}

/// Every tool's definition, in `tools/list` order.
pub(crate) fn tool_table(c: &McpConfig) -> Vec<Tool> {
    ToolName::ALL
        .iter()
        .filter(|t| t.offered(c))
        .map(|t| t.definition(c))
        .collect()
}

pub(crate) fn tool_names(tools: &[Tool]) -> String {
    tools
        .iter()
        .map(|t| t.name.as_ref())
        .collect::<Vec<_>>()
        .join(", ")
}

fn human_bytes(n: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    if n >= MIB && n.is_multiple_of(MIB) {
        format!("{} MiB", n / MIB)
    } else if n >= 1024 && n.is_multiple_of(1024) {
        format!("{} KiB", n / 1024)
    } else {
        format!("{n} bytes")
    }
}

fn secs(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        format!("{} s", ms / 1000)
    } else {
        format!("{ms} ms")
    }
}

/// What the server tells the model about the sandbox as a whole.
pub(crate) fn instructions(c: &McpConfig) -> String {
    format!(
        "wasmsand runs shell commands in isolated WebAssembly sandboxes. {} Use sandbox_run for \
         one-off commands; create a session (session_create) to keep files, variables and the \
         working directory between calls, fork it (session_fork) to try alternatives in \
         parallel, and snapshot it (snapshot_create/snapshot_restore) to roll back. To see a \
         change before it lands, run with preview: true (or several attempts at once with \
         sandbox_best_of), look at its changes, then sandbox_commit or sandbox_discard it; \
         sandbox_diff shows what a session changed as a git patch. Sessions unused for {} are \
         destroyed.",
        environment(c),
        secs(c.session_idle_ttl.as_millis() as u64)
    )
}

/// What the sandboxes may reach, in a sentence.
fn network(c: &McpConfig) -> String {
    let Some(n) = &c.network else {
        return "There is no network access".into();
    };
    let l = n.allowlist.to_allowlist();
    let mut parts = Vec::new();
    for (name, v) in [
        ("hosts", &l.hosts),
        ("blocks", &l.cidrs),
        ("addresses", &l.ips),
    ] {
        if !v.is_empty() {
            parts.push(format!("{name} {}", v.join(", ")));
        }
    }
    format!(
        "The network is reached only with curl and wget (http and https), git (clone, fetch \
         and pull over http and https), pip and Python's urllib/http.client/requests, and only \
         what this egress allowlist allows: {} (anything else fails saying `blocked by sandbox \
         network policy`; curl exits with code 7)",
        parts.join("; ")
    )
}

/// The host folders mounted in every sandbox, in a sentence (empty when none).
fn mounted(c: &McpConfig) -> String {
    if c.mounts.is_empty() {
        return String::new();
    }
    let list: Vec<String> = c
        .mounts
        .iter()
        .map(|m| {
            let at = if m.at.starts_with('/') {
                m.at.clone()
            } else {
                format!("{}/{}", wasmsand::HOME, m.at.trim_start_matches("./"))
            };
            if m.options.read_only {
                format!("{at} (read-only)")
            } else {
                at
            }
        })
        .collect();
    format!(
        " Every sandbox has the operator's project folder(s) at {}: changes to them stay in the \
         sandbox (the real folder is never written), and sandbox_diff gives them as a git patch \
         for the user to apply.",
        list.join(", ")
    )
}

fn environment(c: &McpConfig) -> String {
    let l = &c.limits;
    format!(
        "The sandbox is a bash subset (pipes, redirections, variables, functions, loops, \
         conditionals, $(...), here-docs) with coreutils (ls, cat, sort, wc, head, ...), grep, \
         rg (ripgrep's options; .gitignore respected), sed, awk, find, xargs, diff, jq, yq, \
         gzip, bzip2, xz, tar, timeout, which, expr, bc, column, strings, tree, file, patch, node \
         (JavaScript on the Boa engine with console, fs and path; no npm), git (local \
         repositories only), and python3 (CPython 3.15 with numpy and \
         pandas) over an in-memory filesystem: the home and working directory is {home}; only \
         {home} and /tmp are writable. {network}, and Python cannot start \
         subprocesses or threads. Limits: {timeout} per command by default (timeout_ms, up to \
         {max_timeout}), {memory} of memory per program, {out} each of stdout and stderr kept \
         per run (the rest is cut off and `truncated` says so), commands up to {cmd}, and per \
         sandbox {fs} of files and {files} files. The very first python3 on a machine can take \
         a minute (it is compiled once, then cached); later ones start quickly.{mounted}",
        mounted = mounted(c),
        home = wasmsand::HOME,
        network = network(c),
        timeout = secs(l.timeout_ms),
        max_timeout = secs(c.max_timeout_ms),
        memory = human_bytes(l.memory_bytes),
        out = human_bytes(l.stdout_bytes),
        cmd = human_bytes(l.command_bytes),
        fs = human_bytes(l.fs_bytes),
        files = l.file_count,
    )
}

/// What the embedding server offers besides the wasm sandbox, for `sandbox_run`'s description.
fn other_runtimes(c: &McpConfig) -> String {
    match c.host.as_ref().and_then(|h| h.offer()) {
        Some(offer) => format!(
            " Other runtimes (runtime/base_image, without session_id; a fresh box per call, \
             destroyed afterwards): {offer}"
        ),
        None => String::new(),
    }
}

/// The `format`s JSON Schema defines (draft 2020-12, "Defined Formats"). schemars also
/// writes the width of Rust's numbers as a format (`uint64`, `int32`, `double`, ...), which
/// is no format of the standard and which strict validators warn about or reject; the
/// `minimum: 0` it writes for unsigned types says what matters to a client.
pub(crate) const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Drops every `format` outside [`STANDARD_FORMATS`], in a schema and all its subschemas.
#[derive(Clone, Copy)]
struct StandardFormats;

impl schemars::transform::Transform for StandardFormats {
    fn transform(&mut self, schema: &mut schemars::Schema) {
        if let Some(obj) = schema.as_object_mut()
            && obj
                .get("format")
                .and_then(|f| f.as_str())
                .is_some_and(|f| !STANDARD_FORMATS.contains(&f))
        {
            obj.remove("format");
        }
        schemars::transform::transform_subschemas(self, schema);
    }
}

/// The JSON Schema of `T` as a tool's input (what it accepts) or output (what it writes), as
/// rmcp's own helpers make it (draft 2020-12, without the root's `title` and `description`,
/// which only name the Rust type) but with standard formats only.
fn schema_of<T: JsonSchema>(output: bool) -> std::sync::Arc<rmcp::model::JsonObject> {
    let settings =
        schemars::generate::SchemaSettings::draft2020_12().with_transform(StandardFormats);
    let settings = if output {
        settings.for_serialize()
    } else {
        settings
    };
    let schema = settings.into_generator().into_root_schema_for::<T>();
    let serde_json::Value::Object(mut object) = schema.to_value() else {
        unreachable!("a root schema is an object")
    };
    object.remove("title");
    object.remove("description");
    std::sync::Arc::new(object)
}

fn tool<A: JsonSchema + 'static, O: JsonSchema + 'static>(
    name: &'static str,
    title: &'static str,
    description: String,
    annotations: ToolAnnotations,
) -> Tool {
    let input = schema_of::<A>(false);
    assert_eq!(
        input.get("type").and_then(|t| t.as_str()),
        Some("object"),
        "MCP wants an object as the input schema of {name}"
    );
    let mut tool = Tool::new(name, Cow::Owned(description), input)
        .with_title(title)
        .with_annotations(annotations);
    tool.output_schema = Some(schema_of::<O>(true));
    tool
}

impl ToolName {
    /// Whether a server configured as `c` lists the tool and answers calls to it.
    pub(crate) fn offered(self, c: &McpConfig) -> bool {
        self != ToolName::SandboxDotRun || c.sandbox_dot_run
    }

    /// The tool's definition: title, description (stating `c`'s limits), annotations and the
    /// schemas of its arguments and of its structured result.
    pub(crate) fn definition(self, c: &McpConfig) -> Tool {
        let closed = |read_only: bool, destructive: bool, idempotent: bool| {
            ToolAnnotations::new()
                .read_only(read_only)
                .destructive(destructive)
                .idempotent(idempotent)
                .open_world(false)
        };
        match self {
            ToolName::SandboxRun => tool::<RunArgs, RunOutput>(
                self.as_str(),
                "Run a shell command in a sandbox",
                format!(
                    "Run a bash command line in an isolated sandbox and get its exit code, stdout \
                     and stderr. {} Without session_id the command runs in a fresh sandbox that is \
                     discarded afterwards; with a session_id (from session_create) files, variables \
                     and the working directory persist between calls. `files` are written and `env` \
                     exported before the command runs; `stdin` is its standard input. A non-zero \
                     exit code is a normal result, not a tool error. When the client asks for \
                     progress, output is streamed as progress notifications while the command runs.{}",
                    environment(c),
                    other_runtimes(c)
                ),
                closed(false, true, false),
            ),
            ToolName::SandboxDotRun => tool::<PrdRunArgs, PrdRunOutput>(
                self.as_str(),
                "Run a command in a sandbox (seed 003's sandbox.run)",
                "The tool of the code-interpreter PRD, beside sandbox_run (the same run, with its \
                 field names): give session_id (the run uses the session's files, state and \
                 image) or base_image (a fresh sandbox), and command as an argument vector or a \
                 shell line. files are {path, content_b64}; timeout_sec is in seconds. The answer \
                 is sandbox_run's with run_id, log_stream_url, policy_hash and image_digest when \
                 the server keeps a record of the run. Clients that refuse a dot in a tool name \
                 use sandbox_run."
                    .into(),
                closed(false, true, false),
            ),
            ToolName::SessionCreate => tool::<SessionCreateArgs, SessionCreated>(
                self.as_str(),
                "Create a sandbox session",
                format!(
                    "Create a persistent sandbox session and return its session_id, for \
                     sandbox_run, files_* and snapshot_* calls. Optional lower limits and starting \
                     files. A client may hold {} live sessions; a session unused for {} is \
                     destroyed.",
                    c.max_sessions_per_client,
                    secs(c.session_idle_ttl.as_millis() as u64)
                ),
                closed(false, false, false),
            ),
            ToolName::SessionFork => tool::<SessionArgs, SessionForked>(
                self.as_str(),
                "Fork a session",
                "Copy a session in O(1) into a new independent session (files, variables, \
                 functions, working directory, snapshots, limits); changes in either are invisible \
                 to the other. Use it to try alternatives from the same starting point."
                    .to_string(),
                closed(false, false, false),
            ),
            ToolName::SessionList => tool::<NoArgs, SessionList>(
                self.as_str(),
                "List sessions",
                "List this client's live sessions with their age and idle time.".to_string(),
                closed(true, false, true),
            ),
            ToolName::SessionDestroy => tool::<SessionArgs, SessionDestroyed>(
                self.as_str(),
                "Destroy a session",
                "Destroy a session and everything in it; a command running in it is cancelled. The \
                 id is invalid afterwards."
                    .to_string(),
                closed(false, true, true),
            ),
            ToolName::FilesRead => tool::<FilesReadArgs, FileContent>(
                self.as_str(),
                "Read a file",
                format!(
                    "Read a file of a session. UTF-8 text comes back as text, anything else as \
                     base64 (`encoding` says which). Files over {} must be read in parts with \
                     sandbox_run.",
                    human_bytes(c.max_read_bytes)
                ),
                closed(true, false, true),
            ),
            ToolName::FilesWrite => tool::<FilesWriteArgs, FileWritten>(
                self.as_str(),
                "Write a file",
                "Write a file in a session (replacing it if it exists; parent directories are \
                 created). `encoding` is utf8 (default) or base64 for binary data. Only /home/user \
                 and /tmp are writable."
                    .to_string(),
                closed(false, true, true),
            ),
            ToolName::FilesList => tool::<FilesListArgs, DirListing>(
                self.as_str(),
                "List a directory",
                "List a directory of a session: names, types (file, dir, symlink) and sizes."
                    .to_string(),
                closed(true, false, true),
            ),
            ToolName::SnapshotCreate => tool::<SessionArgs, SnapshotCreated>(
                self.as_str(),
                "Snapshot a session",
                "Record a session's files, variables and working directory in O(1); \
                 snapshot_restore returns to it, any number of times."
                    .to_string(),
                closed(false, false, false),
            ),
            ToolName::SnapshotRestore => tool::<SnapshotRestoreArgs, SnapshotRestored>(
                self.as_str(),
                "Restore a snapshot",
                "Put a session's files, variables and working directory back as they were at a \
                 snapshot; the snapshot stays usable."
                    .to_string(),
                closed(false, true, true),
            ),
            ToolName::SandboxDiff => tool::<DiffArgs, DiffOutput>(
                self.as_str(),
                "Show what a session changed",
                "What a session (or a preview) changed: added, modified and deleted paths with \
                 their modes, and a patch in `git diff --binary` format that `git apply` takes. \
                 Compared with the mounted project folder as it was mounted, the session a \
                 preview or fork came from, or a snapshot."
                    .to_string(),
                closed(true, false, true),
            ),
            ToolName::SandboxCommit => tool::<CommitArgs, Committed>(
                self.as_str(),
                "Commit a preview",
                "Bring what a preview changed into the session it came from, then drop the \
                 preview. A three-way merge: paths the session changed since are kept; a path \
                 both changed differently is a conflict, reported path by path, and then \
                 nothing is applied and the preview stays."
                    .to_string(),
                closed(false, true, false),
            ),
            ToolName::SandboxDiscard => tool::<DiscardArgs, Discarded>(
                self.as_str(),
                "Discard previews",
                "Drop previews and what they changed; their session is untouched.".to_string(),
                closed(false, true, true),
            ),
            ToolName::SandboxBestOf => tool::<BestOfArgs, BestOfOutput>(
                self.as_str(),
                "Try several attempts at once",
                format!(
                    "Run up to {} attempts (different commands, or one command with different \
                     env), each in its own preview of a session, concurrently, and return each \
                     one's output and changes. The session is untouched: sandbox_commit the \
                     attempt you pick and sandbox_discard the rest. Each preview counts as a \
                     session while it lives.",
                    c.max_best_of
                ),
                closed(false, false, false),
            ),
        }
    }
}

/// docs/mcp.md's tool table: each tool's arguments (`?`: optional) and the fields of its
/// structured result, read from the schemas clients get.
#[cfg(test)]
fn markdown_table() -> String {
    let c = McpConfig::default();
    let fields = |schema: &serde_json::Map<String, serde_json::Value>, mark_optional: bool| {
        let required: Vec<&str> = schema
            .get("required")
            .and_then(|r| r.as_array())
            .map(|r| r.iter().filter_map(|v| v.as_str()).collect())
            .unwrap_or_default();
        let names: Vec<String> = schema
            .get("properties")
            .and_then(|p| p.as_object())
            .map(|p| {
                p.keys()
                    .map(|k| {
                        let optional = mark_optional && !required.contains(&k.as_str());
                        format!("`{k}{}`", if optional { "?" } else { "" })
                    })
                    .collect()
            })
            .unwrap_or_default();
        if names.is_empty() {
            "—".to_string()
        } else {
            names.join(", ")
        }
    };
    let mut out = String::from("| tool | arguments | structured result |\n|---|---|---|\n");
    for t in ToolName::ALL {
        let def = t.definition(&c);
        let output = def.output_schema.as_deref().cloned().unwrap_or_default();
        out.push_str(&format!(
            "| `{}` | {} | {} |\n",
            t.as_str(),
            fields(&def.input_schema, true),
            fields(&output, false)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_table_in_the_docs_is_the_registry() {
        let page = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/mcp.md");
        crate::doc_block::check(&page, "mcp-tools", &markdown_table());
    }

    /// The limits a session takes and reports are the crate's limits, under their names.
    #[test]
    fn session_limits_are_registry_limits() {
        let names: Vec<&str> = wasmsand::Limits::SPECS.iter().map(|l| l.name).collect();
        let create = ToolName::SessionCreate.definition(&McpConfig::default());
        let arg = create.input_schema["properties"]["limits"].clone();
        let schema = serde_json::to_value(&create.input_schema).unwrap();
        // The argument's schema may be inline or a reference into `$defs`.
        let arg = match arg["$ref"]
            .as_str()
            .or_else(|| arg["anyOf"][0]["$ref"].as_str())
        {
            Some(r) => schema["$defs"][r.rsplit('/').next().unwrap()].clone(),
            None => arg,
        };
        let out = serde_json::to_value(create.output_schema.as_deref().unwrap()).unwrap();
        let out_ref = out["properties"]["limits"]["$ref"]
            .as_str()
            .unwrap_or_default();
        let out_limits = &out["$defs"][out_ref.rsplit('/').next().unwrap_or_default()];
        for (which, props) in [
            ("argument", &arg["properties"]),
            ("result", &out_limits["properties"]),
        ] {
            let props = props
                .as_object()
                .unwrap_or_else(|| panic!("{which}: {props}"));
            assert!(!props.is_empty(), "{which}");
            for k in props.keys() {
                assert!(
                    names.contains(&k.as_str()),
                    "{which} limit {k} is not in Limits::SPECS"
                );
            }
        }
    }

    #[test]
    fn every_name_resolves_to_its_tool() {
        for t in ToolName::ALL {
            assert_eq!(ToolName::from_name(t.as_str()), Some(*t));
            assert_eq!(t.definition(&McpConfig::default()).name, t.as_str());
        }
        assert_eq!(ToolName::from_name("sandbox_dot_run"), None);
        assert!(!ToolName::SandboxDotRun.offered(&McpConfig::default()));
    }

    #[test]
    fn every_tool_has_an_object_input_schema_and_an_output_schema() {
        let tools = tool_table(&McpConfig::default());
        assert_eq!(
            tool_names(&tools),
            "sandbox_run, session_create, session_fork, session_list, session_destroy, \
             files_read, files_write, files_list, snapshot_create, snapshot_restore, \
             sandbox_diff, sandbox_commit, sandbox_discard, sandbox_best_of"
        );
        let with_seed_tool = McpConfig {
            sandbox_dot_run: true,
            ..McpConfig::default()
        };
        assert_eq!(tool_table(&with_seed_tool)[1].name, "sandbox.run");
        for t in &tools {
            assert_eq!(t.input_schema["type"], "object", "{}", t.name);
            let out = t.output_schema.as_ref().expect("output schema");
            assert_eq!(out["type"], "object", "{}", t.name);
            assert!(t.name.chars().all(|c| c.is_ascii_lowercase() || c == '_'));
        }
        let run = &tools[0];
        assert_eq!(run.input_schema["required"], serde_json::json!(["command"]));
        assert_eq!(run.input_schema["additionalProperties"], false);
        let props = run.output_schema.as_ref().unwrap()["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect::<Vec<_>>();
        for key in [
            "exit_code",
            "stdout",
            "stderr",
            "truncated",
            "error_class",
            "timed_out",
            "duration_ms",
            "session_id",
        ] {
            assert!(props.iter().any(|p| p == key), "{key} in {props:?}");
        }
    }

    /// Every keyword of JSON Schema draft 2020-12's vocabularies (core, applicator,
    /// unevaluated, validation, meta-data, format-annotation, content).
    const KEYWORDS: &[&str] = &[
        "$schema",
        "$id",
        "$ref",
        "$anchor",
        "$dynamicRef",
        "$dynamicAnchor",
        "$vocabulary",
        "$comment",
        "$defs",
        "prefixItems",
        "items",
        "contains",
        "additionalProperties",
        "properties",
        "patternProperties",
        "dependentSchemas",
        "propertyNames",
        "if",
        "then",
        "else",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "unevaluatedItems",
        "unevaluatedProperties",
        "type",
        "const",
        "enum",
        "multipleOf",
        "maximum",
        "exclusiveMaximum",
        "minimum",
        "exclusiveMinimum",
        "maxLength",
        "minLength",
        "pattern",
        "maxItems",
        "minItems",
        "uniqueItems",
        "maxContains",
        "minContains",
        "maxProperties",
        "minProperties",
        "required",
        "dependentRequired",
        "title",
        "description",
        "default",
        "deprecated",
        "readOnly",
        "writeOnly",
        "examples",
        "format",
        "contentEncoding",
        "contentMediaType",
        "contentSchema",
    ];

    /// What is not standard JSON Schema in `schema` (at `at`) and its subschemas.
    fn nonstandard(schema: &serde_json::Value, at: &str, found: &mut Vec<String>) {
        use serde_json::Value;
        let obj = match schema {
            Value::Bool(_) => return,
            Value::Object(o) => o,
            other => {
                found.push(format!("{at}: a schema that is {other}"));
                return;
            }
        };
        for (k, v) in obj {
            let here = format!("{at}/{k}");
            if !KEYWORDS.contains(&k.as_str()) {
                found.push(format!("{here}: unknown keyword"));
                continue;
            }
            match k.as_str() {
                "format" => match v.as_str() {
                    Some(f) if STANDARD_FORMATS.contains(&f) => {}
                    _ => found.push(format!("{here}: format {v}")),
                },
                "$defs" | "properties" | "patternProperties" | "dependentSchemas" => {
                    for (name, sub) in v.as_object().into_iter().flatten() {
                        nonstandard(sub, &format!("{here}/{name}"), found);
                    }
                }
                "allOf" | "anyOf" | "oneOf" | "prefixItems" => {
                    for (i, sub) in v.as_array().into_iter().flatten().enumerate() {
                        nonstandard(sub, &format!("{here}/{i}"), found);
                    }
                }
                "items"
                | "contains"
                | "additionalProperties"
                | "propertyNames"
                | "if"
                | "then"
                | "else"
                | "not"
                | "unevaluatedItems"
                | "unevaluatedProperties"
                | "contentSchema" => nonstandard(v, &here, found),
                _ => {}
            }
        }
    }

    #[test]
    fn schemas_use_standard_keywords_and_formats_only() {
        let every = McpConfig {
            sandbox_dot_run: true,
            ..McpConfig::default()
        };
        let mut found = Vec::new();
        let mut unsigned = 0;
        for t in ToolName::ALL {
            let def = t.definition(&every);
            let input = serde_json::Value::Object((*def.input_schema).clone());
            let output = serde_json::Value::Object(
                (**def.output_schema.as_ref().expect("an output schema")).clone(),
            );
            nonstandard(&input, &format!("{}:input", t.as_str()), &mut found);
            nonstandard(&output, &format!("{}:output", t.as_str()), &mut found);
            unsigned += [input, output]
                .iter()
                .map(|s| s.to_string().matches("\"minimum\":0").count())
                .sum::<usize>();
        }
        assert!(
            found.is_empty(),
            "not standard JSON Schema:\n{}",
            found.join("\n")
        );
        // Unsigned fields still say they cannot be negative.
        assert!(unsigned > 0);
        let run = ToolName::SandboxRun.definition(&every);
        assert_eq!(
            run.input_schema["properties"]["timeout_ms"]["minimum"],
            serde_json::json!(0),
            "{:?}",
            run.input_schema["properties"]["timeout_ms"]
        );
    }

    #[test]
    fn the_walk_finds_what_is_not_standard() {
        let mut found = Vec::new();
        let schema = serde_json::json!({
            "type": "object",
            "properties": {
                "n": {"type": "integer", "format": "uint64", "minimum": 0},
                "when": {"type": "string", "format": "date-time"},
                "x": {"anyOf": [{"type": "null"}, {"type": "number", "nullable": true}]},
            },
            "$defs": {"D": {"type": "array", "items": {"format": "int32"}}},
        });
        nonstandard(&schema, "s", &mut found);
        found.sort();
        assert_eq!(
            found,
            [
                "s/$defs/D/items/format: format \"int32\"",
                "s/properties/n/format: format \"uint64\"",
                "s/properties/x/anyOf/1/nullable: unknown keyword",
            ]
        );
    }

    #[test]
    fn descriptions_state_the_configured_limits() {
        let c = McpConfig {
            max_timeout_ms: 90_000,
            ..McpConfig::default()
        };
        let run = &tool_table(&c)[0];
        let d = run.description.as_deref().unwrap();
        assert!(d.contains("30 s per command"), "{d}");
        assert!(d.contains("up to 90 s"), "{d}");
        assert!(d.contains("512 MiB of memory"), "{d}");
        assert!(d.contains("no network"), "{d}");
        assert!(d.contains("numpy and pandas"), "{d}");
    }
}
