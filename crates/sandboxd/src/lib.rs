//! `sandboxd`: wasmsand's server. Reads line-delimited JSON on stdin (JSON-RPC 2.0, and the
//! line protocol on the same stream), answers on stdout, logs on stderr.
//!
//! Shutdown: `kill` destroys every sandbox (running commands end as cancelled), answers (the
//! last line written: requests not yet answered never are), and exits 0 at once. End of input is a clean shutdown of another kind: requests already read
//! run to their end and are answered, then the process exits 0, so `printf '...' | sandboxd`
//! gets every answer.
//!
//! The server is a library function ([`run`]) so that the Python module can carry it: its RPC
//! transport starts `python -m wasmsand._sandboxd` when no `sandboxd` binary is installed.

#![forbid(unsafe_code)]

mod images;
mod lines;
mod mcp;
mod output;
mod service;
mod vm;

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use clap::{Parser, Subcommand, ValueEnum};
use wasmsand::{Limits, Sandbox, SandboxOptions};
use wasmsand_dispatch::{DispatchConfig, Dispatcher, Notify, Server};

use lines::Event;
use output::Output;

const MIB: u64 = 1024 * 1024;

/// A WebAssembly sandbox for LLM agents, served as line-delimited JSON on stdio.
///
/// Without a subcommand, serves JSON-RPC 2.0 (run, files.*, env.*, snapshot.*, sandbox.*,
/// kill) and the line protocol (objects with a `type`: shell, write_file, read_file, reset,
/// status) on stdin/stdout until `kill` or the end of input.
#[derive(Debug, Parser)]
#[command(name = "sandboxd", version, about, long_about)]
struct Cli {
    /// Memory one program may use, in MiB
    #[arg(long, value_name = "MB", global = true, value_parser = clap::value_parser!(u64).range(1..))]
    memory_limit: Option<u64>,
    /// Wall-clock limit of one command, in milliseconds
    #[arg(long, value_name = "MS", global = true)]
    timeout_ms: Option<u64>,
    /// Bytes of file content a sandbox's filesystem may hold
    #[arg(long, value_name = "BYTES", global = true)]
    fs_limit_bytes: Option<u64>,
    /// Files, directories and symlinks a sandbox may create
    #[arg(long, value_name = "N", global = true)]
    file_count: Option<u64>,
    /// Longest request line accepted, in bytes
    #[arg(long, value_name = "BYTES", global = true, value_parser = clap::value_parser!(u64).range(1..))]
    rpc_bytes: Option<u64>,
    /// Any limit by its registry name, repeatable: `--limit stdout_bytes=4096`. The names:
    /// stdout_bytes, stderr_bytes, command_bytes, rpc_bytes, file_count, fs_bytes, timeout_ms,
    /// memory_bytes, tool_calls, spill_bytes, background_processes, open_files,
    /// session_open_files, pids. Applied after the flags above.
    #[arg(long = "limit", value_name = "NAME=VALUE", global = true, value_parser = parse_limit)]
    limit: Vec<(&'static str, u64)>,
    /// Where compiled modules are cached (default: $WASMSAND_CACHE_DIR, else the user cache)
    #[arg(long, value_name = "DIR", global = true)]
    cache_dir: Option<PathBuf>,
    /// Mount a host folder into the sandbox: HOST:SANDBOX[:ro] (SANDBOX relative: from
    /// /home/user). Read lazily under the sandbox's own copy-on-write layer: the host is never
    /// written. Secrets (.env*, *.pem, id_*, .aws/, .ssh/, .netrc, .git-credentials, and
    /// .git/config's credentials) stay invisible unless named with --mount-allow-secret.
    /// Repeatable; applies to exec, to the stdio server's root sandbox and to every sandbox of
    /// `sandboxd mcp` (not with --service).
    #[arg(long = "mount", value_name = "HOST:SANDBOX[:ro]", global = true, value_parser = parse_mount)]
    mounts: Vec<wasmsand::HostMount>,
    /// Hide what the mounted folders' .gitignore files ignore
    #[arg(long, global = true)]
    mount_gitignore: bool,
    /// Hide more of the mounted folders: a gitignore pattern, repeatable
    #[arg(long = "mount-exclude", value_name = "PATTERN", global = true)]
    mount_exclude: Vec<String>,
    /// Show an entry of the secret denylist anyway, named as the denylist spells it (".env*");
    /// repeatable
    #[arg(long = "mount-allow-secret", value_name = "PATTERN", global = true)]
    mount_allow_secret: Vec<String>,
    /// Bytes of host files each mount may read in all
    #[arg(long, value_name = "BYTES", global = true)]
    mount_max_host_bytes: Option<u64>,
    /// Sandbox mode: `simple` (WebAssembly in this process) or `v86` (alias `vm`: a whole
    /// Linux machine under QEMU, booted from --disk-image; the line protocol only; see
    /// docs/vm.md)
    #[arg(long, value_enum, default_value_t = Mode::Simple, global = true)]
    mode: Mode,
    /// Disk image of the v86 mode (`sandboxd images build vm` makes one)
    #[arg(long, value_name = "PATH", global = true)]
    disk_image: Option<PathBuf>,
    /// The v86 mode's acceleration: `kvm`, `tcg`, or `auto` (KVM when a probe boot works)
    #[arg(long, value_enum, default_value_t = VmAccel::Auto, global = true)]
    vm_accel: VmAccel,
    /// Where the v86 mode keeps its saved machines (default: $XDG_CACHE_HOME/wasmsand/vm)
    #[arg(long, value_name = "DIR", global = true)]
    vm_state_dir: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// Commands run as WebAssembly in this process
    Simple,
    /// A whole x86 Linux machine booted from a disk image (QEMU)
    #[value(alias = "vm")]
    V86,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum VmAccel {
    /// KVM when a probe boot works, else TCG
    Auto,
    /// KVM, or fail
    Kvm,
    /// QEMU's software emulation
    Tcg,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one command line in a fresh sandbox, print its stdout and stderr, exit with its code
    Exec {
        /// The command line, e.g. 'echo hi | wc -c'
        command: String,
        /// After the command, write what it changed in the mounted folder (--mount) as a patch
        /// `git apply` takes to FILE ('-': standard error)
        #[arg(long, value_name = "FILE")]
        changes: Option<PathBuf>,
        /// After the command, write what it changed in the mounted folder into DIR (often the
        /// mounted folder itself, to keep the changes)
        #[arg(long, value_name = "DIR")]
        export_changes: Option<PathBuf>,
    },
    /// Serve wasmsand's tools over MCP (Model Context Protocol) on stdio, or over streamable
    /// HTTP with --http; see docs/mcp.md
    Mcp(mcp::McpArgs),
    /// Serve the code-interpreter HTTP + WebSocket API (sessions, runs, live logs, uploads,
    /// artifacts) under /api/v1/sandbox; see docs/service.md
    Serve(service::ServeArgs),
    /// The Docker runtime's images: build them from Debian's packages, or list them
    Images(images::ImagesArgs),
    /// A Language Server on stdio: "Run in Sandbox" from an editor, against a sandbox service
    /// this process starts on loopback, or the one at --server-url; see docs/ide.md
    Lsp(LspArgs),
    /// Compile every guest program and CPython into the module cache now (CPython: about a
    /// minute, once per machine and version), so that no first run waits for it
    Precompile,
}

impl Cli {
    /// The --mount folders with the --mount-* options applied to each.
    fn mounts(&self) -> Vec<wasmsand::HostMount> {
        self.mounts
            .iter()
            .cloned()
            .map(|mut m| {
                m.options.gitignore = self.mount_gitignore;
                m.options.exclude = self.mount_exclude.clone();
                m.options.allow_secrets = self.mount_allow_secret.clone();
                m.options.max_host_bytes = self.mount_max_host_bytes;
                m
            })
            .collect()
    }

    fn limits(&self) -> Limits {
        let mut l = Limits::default();
        if let Some(mb) = self.memory_limit {
            l.memory_bytes = mb.saturating_mul(MIB);
        }
        if let Some(v) = self.timeout_ms {
            l.timeout_ms = v;
        }
        if let Some(v) = self.fs_limit_bytes {
            l.fs_bytes = v;
        }
        if let Some(v) = self.file_count {
            l.file_count = v;
        }
        if let Some(v) = self.rpc_bytes {
            l.rpc_bytes = v;
        }
        for (name, value) in &self.limit {
            l.set(name, *value);
        }
        l
    }
}

fn parse_mount(arg: &str) -> Result<wasmsand::HostMount, String> {
    let m = wasmsand::HostMount::parse(arg)?;
    if !m.host.is_dir() {
        return Err(format!("{}: not a directory", m.host.display()));
    }
    Ok(m)
}

/// `NAME=VALUE` of `--limit`: a limit of [`Limits::SPECS`] and a non-negative integer.
fn parse_limit(arg: &str) -> Result<(&'static str, u64), String> {
    let (name, value) = arg
        .split_once('=')
        .ok_or_else(|| format!("expected NAME=VALUE, not {arg:?}"))?;
    let spec = Limits::SPECS
        .iter()
        .find(|l| l.name == name.trim())
        .ok_or_else(|| {
            let names: Vec<&str> = Limits::SPECS.iter().map(|l| l.name).collect();
            format!(
                "unknown limit {name:?}; the limits are: {}",
                names.join(", ")
            )
        })?;
    let value = value
        .trim()
        .parse()
        .map_err(|_| format!("{}: not a non-negative integer: {value:?}", spec.name))?;
    Ok((spec.name, value))
}

/// Runs `sandboxd` with these command-line arguments (program name first) and returns its
/// exit status.
pub fn run<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            // `--help` and `--version` are "errors" that print to stdout and succeed.
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    if cli.mode == Mode::V86 {
        return v86(cli);
    }
    if cli.disk_image.is_some() || cli.vm_state_dir.is_some() {
        eprintln!("sandboxd: --disk-image and --vm-state-dir are accepted only with --mode v86");
        return 2;
    }
    // A first python3 on a machine compiles for about a minute: the operator hears why here,
    // never in a run's output.
    wasmsand::on_slow_compile(|line| eprintln!("sandboxd: {line}"));
    let limits = cli.limits();
    let mounts = cli.mounts();
    if !mounts.is_empty()
        && !matches!(
            cli.command,
            None | Some(Command::Exec { .. } | Command::Mcp(_))
        )
    {
        eprintln!("sandboxd: --mount applies to exec, the stdio server and mcp only");
        return 2;
    }
    // A bad mount option (an unknown secret name, a pattern that does not parse) stops the
    // server before it answers anything.
    if !mounts.is_empty()
        && let Err(e) = Sandbox::new(SandboxOptions::default()).mount_all(&mounts)
    {
        eprintln!("sandboxd: {e}");
        return 2;
    }
    match cli.command {
        Some(Command::Exec {
            command,
            changes,
            export_changes,
        }) => exec(
            &command,
            Exec {
                limits,
                cache_dir: cli.cache_dir,
                mounts,
                changes,
                export_changes,
            },
        ),
        Some(Command::Mcp(args)) => mcp::serve(args, limits, cli.cache_dir, mounts),
        Some(Command::Serve(args)) => service::serve(args, cli.cache_dir),
        Some(Command::Precompile) => precompile(cli.cache_dir),
        Some(Command::Images(args)) => images::run(args),
        Some(Command::Lsp(args)) => lsp(args, cli.cache_dir),
        None => serve(DispatchConfig {
            limits,
            env: Vec::new(),
            cache_dir: cli.cache_dir,
            mounts,
        }),
    }
}

#[derive(Debug, clap::Args)]
struct LspArgs {
    /// The sandbox service's URL (e.g. http://127.0.0.1:8787); without it, and without
    /// $TLDW_SANDBOX_SERVER_URL, an embedded service serves the runs. The client's
    /// initializationOptions.serverUrl wins over both
    #[arg(long, value_name = "URL")]
    server_url: Option<String>,
    /// The service's API key, sent as X-API-KEY [default: $TLDW_SANDBOX_API_KEY]
    #[arg(long, value_name = "KEY")]
    api_key: Option<String>,
    /// Speak LSP on stdin/stdout (the only transport; accepted because clients pass it)
    #[arg(long)]
    stdio: bool,
}

/// `sandboxd lsp`: stdout is the protocol's, so everything else goes to stderr.
fn lsp(args: LspArgs, cache_dir: Option<PathBuf>) -> u8 {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let options = wasmsand_lsp::Options {
        server_url: args.server_url.or_else(|| env("TLDW_SANDBOX_SERVER_URL")),
        api_key: args.api_key.or_else(|| env("TLDW_SANDBOX_API_KEY")),
        cache_dir,
    };
    let _ = args.stdio;
    match wasmsand_lsp::run_stdio(options) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("sandboxd lsp: {e}");
            1
        }
    }
}

/// `--mode v86`: the line protocol against a machine booted from `--disk-image`.
fn v86(cli: Cli) -> u8 {
    if cli.command.is_some() {
        eprintln!("sandboxd: --mode v86 serves the line protocol on stdio; it takes no subcommand");
        return 2;
    }
    if !cli.mounts.is_empty() {
        eprintln!("sandboxd: --mount applies to the simple mode only");
        return 2;
    }
    let Some(image) = cli.disk_image.clone() else {
        eprintln!(
            "sandboxd: --mode v86 needs --disk-image PATH (`sandboxd images build vm` makes one)"
        );
        return 2;
    };
    let limits = cli.limits();
    let cap = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
    vm::serve(vm::VmArgs {
        image,
        // The machine's memory; Debian's cloud kernel needs more than the simple mode's 64.
        memory_mb: cli.memory_limit,
        accel: match cli.vm_accel {
            VmAccel::Auto => wasmsand_vm::AccelChoice::Auto,
            VmAccel::Kvm => wasmsand_vm::AccelChoice::Kvm,
            VmAccel::Tcg => wasmsand_vm::AccelChoice::Tcg,
        },
        state_dir: cli.vm_state_dir,
        stdout_cap: cap(limits.stdout_bytes),
        stderr_cap: cap(limits.stderr_bytes),
        line_cap: cap(limits.rpc_bytes),
    })
}

fn precompile(cache_dir: Option<PathBuf>) -> u8 {
    let started = std::time::Instant::now();
    match wasmsand::precompile(cache_dir) {
        Ok(p) => {
            println!(
                "sandboxd: {} modules ready, {} compiled now ({:.1} s)",
                p.modules,
                p.compiled,
                started.elapsed().as_secs_f64()
            );
            0
        }
        Err(e) => {
            eprintln!("sandboxd: precompile failed: {e}");
            1
        }
    }
}

struct Exec {
    limits: Limits,
    cache_dir: Option<PathBuf>,
    mounts: Vec<wasmsand::HostMount>,
    changes: Option<PathBuf>,
    export_changes: Option<PathBuf>,
}

fn exec(command: &str, x: Exec) -> u8 {
    let sb = Sandbox::new(SandboxOptions {
        limits: x.limits,
        env: Vec::new(),
        cache_dir: x.cache_dir,
        ..SandboxOptions::default()
    });
    if let Err(e) = sb.mount_all(&x.mounts) {
        eprintln!("sandboxd: {e}");
        return 2;
    }
    let code = match sb.run(command) {
        Ok(r) => {
            let _ = std::io::stdout().write_all(r.stdout.as_bytes());
            let _ = std::io::stdout().flush();
            let _ = std::io::stderr().write_all(r.stderr.as_bytes());
            r.exit_code.clamp(0, 255) as u8
        }
        Err(e) => {
            eprintln!("sandboxd: {e}");
            return 1;
        }
    };
    if x.changes.is_none() && x.export_changes.is_none() {
        return code;
    }
    let changes = match sb.changes(&wasmsand::ChangesOptions::default()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sandboxd: --changes/--export-changes: {e}");
            return 2;
        }
    };
    if let Some(path) = &x.changes {
        let written = if path.as_os_str() == "-" {
            std::io::stderr().write_all(changes.patch.as_bytes())
        } else {
            std::fs::write(path, &changes.patch)
        };
        if let Err(e) = written {
            eprintln!("sandboxd: --changes {}: {e}", path.display());
            return 2;
        }
    }
    if let Some(dir) = &x.export_changes
        && let Err(e) = sb.export_changes(&changes, dir)
    {
        eprintln!("sandboxd: --export-changes: {e}");
        return 2;
    }
    code
}

fn serve(config: DispatchConfig) -> u8 {
    let dispatcher = Arc::new(Dispatcher::new(config));
    let out = Arc::new(Output::stdout());
    let sink: Notify = {
        let out = out.clone();
        Arc::new(move |v| out.send(&v))
    };
    let server = Server::new(dispatcher.clone(), sink);
    let cap = || usize::try_from(dispatcher.rpc_bytes()).unwrap_or(usize::MAX);
    let read = lines::read_lines(std::io::stdin().lock(), cap, |event| {
        match event {
            Event::Line(line) => server.submit_line(line),
            Event::TooLarge => server.reject_too_large(),
        }
        !dispatcher.is_killed()
    });
    if dispatcher.is_killed() {
        out.close();
        return 0;
    }
    if let Err(e) = read {
        eprintln!("sandboxd: reading stdin: {e}");
    }
    server.wait_idle();
    out.close();
    0
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    /// Every limit of the registry can be set from the command line, and `--limit`'s help
    /// names each one.
    #[test]
    fn every_limit_is_a_flag() {
        let cmd = Cli::command();
        let help = cmd
            .get_arguments()
            .find(|a| a.get_id() == "limit")
            .and_then(|a| a.get_help())
            .map(|h| h.to_string())
            .unwrap_or_default();
        for spec in Limits::SPECS {
            assert!(
                help.contains(spec.name),
                "--limit's help lacks {}",
                spec.name
            );
            let cli =
                Cli::try_parse_from(["sandboxd", "--limit", &format!("{}=3", spec.name)]).unwrap();
            assert_eq!(cli.limits().get(spec.name), Some(3), "{}", spec.name);
        }
        assert!(Cli::try_parse_from(["sandboxd", "--limit", "stdoutbytes=3"]).is_err());
        assert!(Cli::try_parse_from(["sandboxd", "--limit", "fs_bytes=-1"]).is_err());
    }
}
