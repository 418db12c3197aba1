//! The interpreter: runs a parsed script against a [`ShellState`] and a run's resources.
//!
//! Builtins run here, in the host; every other command runs as a WASI program through
//! `wasmsand-exec`. A pipeline's stages, background jobs and subshells each get a clone of the
//! interpreter (the state is made of persistent maps, so a clone is cheap) on their own thread,
//! which is what makes them subshells: what they change is not seen by the parent.
//!
//! [`Interp`]'s methods are spread over the modules of their subject, each an `impl Interp`
//! block: here, the run's plumbing (descriptors, output, variables' access, limits, traps);
//! `execute.rs`, running the tree (lists, pipelines, commands, redirections, functions,
//! programs); `expand.rs`, word expansion; `prompt.rs`, the prompt escapes of `${x@P}`;
//! `eval.rs`, arithmetic and `[[ ]]`/`test` operators; `jobs/`, background jobs and their
//! builtins; `timeout.rs`, `timeout` and `which`; `builtins/`, every other builtin, one file
//! per family (listed in `builtins/mod.rs`, whose registry says which builtins exist).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use parking_lot::Mutex;
use wasmsand_exec::{
    CancelToken, Exec, Exit, Input, OpenFile, Output, PipeReader, Program, RunSpec, SharedVfs,
    ToolChannel,
};

use crate::error::ShellError;
use crate::syntax::ast::*;
use crate::vars::{ATTR_EXPORT, ATTR_NAMEREF, ATTR_READONLY, Value, Var, Vars};

/// Bounds on what one script may make the host do. Each has a clear error when exceeded.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ShellLimits {
    /// Nested function calls, `eval`, `source` and command substitutions.
    pub max_depth: u32,
    /// Bytes of one variable value, word, command substitution result or here-doc.
    pub max_word_bytes: usize,
    /// Words one brace expansion may produce.
    pub max_brace_words: usize,
    /// Paths one glob may produce.
    pub max_glob_results: usize,
    /// Subshells, pipeline stages, background jobs and programs started by one run.
    pub max_processes: usize,
}

impl Default for ShellLimits {
    fn default() -> Self {
        Self {
            max_depth: 1000,
            max_word_bytes: 32 << 20,
            max_brace_words: 200_000,
            max_glob_results: 100_000,
            max_processes: 20_000,
        }
    }
}

/// Shell options (`set -o`, `shopt`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Options {
    /// `set -e`: exit when a command fails outside a condition.
    pub errexit: bool,
    /// `set -u`: expanding an unset variable is an error.
    pub nounset: bool,
    /// `set -o pipefail`: a pipeline's status is the last non-zero one of its commands.
    pub pipefail: bool,
    /// `set -x`: print each command, prefixed by `$PS4`, to stderr before running it.
    pub xtrace: bool,
    /// `set -f`: no pathname expansion.
    pub noglob: bool,
    /// `set -C`: `>` refuses to overwrite an existing regular file (`>|` still does).
    pub noclobber: bool,
    /// `set -a`: every variable assigned is exported.
    pub allexport: bool,
    /// `shopt -s nullglob`: a glob matching nothing expands to no word.
    pub nullglob: bool,
    /// `shopt -s dotglob`: globs match names starting with `.`.
    pub dotglob: bool,
    /// `shopt -s failglob`: a glob matching nothing is an error.
    pub failglob: bool,
    /// `shopt -s nocaseglob`: globs match case-insensitively.
    pub nocaseglob: bool,
    /// `shopt -s nocasematch`: `case` and `[[ == ]]` match case-insensitively.
    pub nocasematch: bool,
    /// `shopt -s expand_aliases`: aliases are expanded (off by default, as in
    /// non-interactive bash).
    pub expand_aliases: bool,
    /// `shopt -s lastpipe`: the last command of a pipeline runs in the current shell.
    pub lastpipe: bool,
    /// `set -n`: read commands without running them.
    pub noexec: bool,
    /// `set -E`: the ERR trap applies in functions and subshells.
    pub errtrace: bool,
    /// `set -T`: DEBUG and RETURN traps apply in functions.
    pub functrace: bool,
    /// Options the shell only records (`set -o vi`, `shopt -s extglob`): their names when on.
    pub extra: std::collections::BTreeSet<String>,
    /// Started as `bash -i`: `$-` holds `i`, and an unset variable under `set -u` abandons
    /// its line instead of ending the shell.
    #[serde(default)]
    pub interactive: bool,
    /// `shopt -s extdebug`: a DEBUG trap's status can skip the command or return from the
    /// function, and `BASH_ARGV`/`BASH_ARGC` follow every call.
    #[serde(default)]
    pub extdebug: bool,
}

impl Default for Options {
    fn default() -> Self {
        let mut extra: std::collections::BTreeSet<String> =
            ["braceexpand", "hashall", "interactive-comments"]
                .into_iter()
                .map(String::from)
                .collect();
        for (name, on) in crate::options::SHOPT_OPTIONS {
            if *on {
                extra.insert(name.to_string());
            }
        }
        Options {
            errexit: false,
            nounset: false,
            pipefail: false,
            xtrace: false,
            noglob: false,
            noclobber: false,
            allexport: false,
            nullglob: false,
            dotglob: false,
            failglob: false,
            nocaseglob: false,
            nocasematch: false,
            expand_aliases: false,
            lastpipe: false,
            noexec: false,
            errtrace: false,
            functrace: false,
            extra,
            interactive: false,
            extdebug: false,
        }
    }
}

/// Everything a later command can observe: one bash session's state. Cloning it is cheap
/// (persistent maps), which is how a sandbox forks.
#[derive(Debug, Clone)]
pub struct ShellState {
    /// Shell variables (the exported ones are programs' environment).
    pub vars: Vars,
    /// Defined functions by name.
    pub functions: im::HashMap<String, Arc<FunctionDef>>,
    /// Functions marked `export -f` (child shells get them) and `readonly -f`.
    pub exported_functions: im::HashSet<String>,
    /// Functions marked `readonly -f`: they cannot be redefined or unset.
    pub readonly_functions: im::HashSet<String>,
    /// `alias name=value` definitions, by name.
    pub aliases: im::OrdMap<String, String>,
    /// The working directory, absolute and normalized (`$PWD`).
    pub cwd: String,
    /// `set -o` and `shopt` options.
    pub opts: Options,
    /// `$?`: the status of the last command.
    pub status: i32,
    /// `$1`, `$2`, ...: the positional parameters (`$0` is not among them).
    pub positional: Vec<String>,
    /// `$0`: `bash` unless a script or `bash -c` set it.
    pub arg0: String,
    /// `trap` actions (shell source) by signal or pseudo-signal name (`SIGTERM`, `EXIT`,
    /// `ERR`, ...).
    pub traps: im::OrdMap<String, String>,
    /// Signals ignored when this shell started, which a non-interactive bash can neither
    /// trap nor reset: SIGINT and SIGQUIT in a job started without job control, and what
    /// the shell that started a `bash` ignored.
    pub untrappable: im::OrdSet<String>,
    /// The `pushd`/`popd` stack below the current directory, its top last (`dirs` prints
    /// `cwd` and then these from the end).
    pub dirstack: Vec<String>,
    /// The file-creation mask applied to new files (`umask`), 0o022 at start.
    pub umask: u32,
    /// Bounds the shell enforces on the session's runs.
    pub limits: ShellLimits,
    /// `$$`: stable for the session, like a shell process's pid.
    pub pid: u32,
    /// `ulimit` soft limits a script set, by option letter (`None`: unlimited). Only `-n`
    /// (open files) is enforced, on the shell's own redirections; the others are recorded:
    /// the sandbox's own limits are what bound a run.
    pub ulimits: BTreeMap<char, Option<u64>>,
    /// The hard limits set, likewise; one never set is the soft limit's default.
    pub ulimits_hard: BTreeMap<char, Option<u64>>,
    /// Builtins `enable -n` turned off: their names are looked up as programs.
    pub disabled_builtins: im::OrdSet<String>,
    /// bash's table of remembered program paths (`hash`): a name found along `$PATH` is
    /// run from here until `PATH` is assigned or `hash -r` empties it. Not kept in a
    /// portable state, as a new bash process starts with it empty.
    pub hashed: im::HashMap<String, Hashed>,
    /// The history list `history -r/-s/-w/-c` works on. An interactive shell adds each
    /// command it reads; a non-interactive one only under `set -o history`. Not kept in a
    /// portable state.
    pub history: im::Vector<String>,
    /// The number of the list's first entry: 1, more once `HISTSIZE` dropped older ones.
    pub history_base: usize,
    /// How many of the newest entries this shell added and `history -a` has not appended to
    /// the history file yet (bash's `history_lines_this_session`).
    pub history_new: usize,
    /// The entries before the command being read (readline's `where_history`): `\!` in a
    /// prompt is one more, the number that command has.
    pub history_offset: usize,
    /// `\#` in a prompt: the number of the command a shell reading a script or its input
    /// runs (from 1); 0 in `-c` text, which bash does not count.
    pub command_number: usize,
    /// How many lines of the history file `history -r`/`-n` have read (for `-n`).
    pub history_lines_read: usize,
    /// Whether the last history entry is the command line running (or what `history -s` or
    /// `fc` put in its place): `fc` counts back from the entry before it and its editing form
    /// removes it, `history -s` replaces it, as bash does.
    pub history_last_added: bool,
    /// Whether `history -s` already replaced the running command line's entry (a second
    /// one in the same line adds beside it).
    pub history_pushed: bool,
    /// readline's keymaps and variables as `bind` changed them (`None`: readline's defaults).
    /// Not kept in a portable state, as a new bash process starts with the defaults.
    pub(crate) readline: Option<Arc<crate::readline::Readline>>,
    /// `complete`'s specifications by command name. Not kept in a portable state: a new
    /// bash process starts without them.
    pub completions: im::HashMap<String, crate::completion::CompSpec>,
}

/// One `NAME=value` binding in front of a command while the command runs.
#[derive(Debug, Clone)]
pub(crate) struct TempBinding {
    pub name: String,
    /// What the binding hides (`None`: the name was unset).
    pub hidden: Option<Var>,
    /// How many function frames were active when it was made.
    pub depth: usize,
    /// Made for a function call: bash puts it in the function's own scope, so a `local` of
    /// the name there replaces it.
    pub for_function: bool,
    /// A `local` of the name in the scope the binding was made in took it over.
    pub claimed: bool,
    /// `unset` removed it, showing what it hid; an `unset` after that reaches under it.
    pub unset: bool,
}

/// A remembered program path: where `name` was found, how often it ran from there, and
/// when it was added (bash lists each bucket of its table newest first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hashed {
    /// The program's file.
    pub path: String,
    /// How many times the name ran from this entry (`hash` lists it).
    pub hits: u32,
    /// Order of insertion.
    pub seq: u64,
}

impl ShellState {
    /// A fresh session in `cwd` with the given environment (all exported).
    pub fn new(env: &[(String, String)], cwd: &str) -> ShellState {
        let mut vars = Vars::default();
        for (k, v) in env {
            vars.put(
                k,
                Var {
                    value: Value::Str(v.clone()),
                    attrs: ATTR_EXPORT,
                },
            );
        }
        for (k, v) in [("IFS", " \t\n"), ("PS4", "+ ")] {
            if vars.get(k).is_none() {
                vars.put(k, Var::scalar(v));
            }
        }
        // Without PATH in its environment bash sets its built-in default (not exported); an
        // unset PATH later finds programs in the working directory only.
        if vars.get("PATH").is_none() {
            vars.put("PATH", Var::scalar(DEFAULT_PATH));
        }
        bash_variables(&mut vars);
        vars.put(
            "PWD",
            Var {
                value: Value::Str(cwd.to_string()),
                attrs: ATTR_EXPORT,
            },
        );
        ShellState {
            vars,
            functions: im::HashMap::new(),
            exported_functions: im::HashSet::new(),
            readonly_functions: im::HashSet::new(),
            aliases: im::OrdMap::new(),
            cwd: cwd.to_string(),
            opts: Options::default(),
            status: 0,
            positional: Vec::new(),
            arg0: "bash".into(),
            traps: im::OrdMap::new(),
            untrappable: im::OrdSet::new(),
            dirstack: Vec::new(),
            umask: 0o022,
            limits: ShellLimits::default(),
            pid: 1000 + random_u32() % 30000,
            ulimits: BTreeMap::new(),
            ulimits_hard: BTreeMap::new(),
            disabled_builtins: im::OrdSet::new(),
            hashed: im::HashMap::new(),
            history: im::Vector::new(),
            history_base: 1,
            history_new: 0,
            history_offset: 0,
            command_number: 0,
            history_lines_read: 0,
            history_last_added: false,
            history_pushed: false,
            readline: None,
            completions: im::HashMap::new(),
        }
    }
}

/// bash's built-in search path, set when its environment has no PATH.
pub(crate) const DEFAULT_PATH: &str =
    "/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin:.";

/// The variables bash sets for itself. Scripts test `$BASH_VERSION` to know they run under
/// bash, and `$OSTYPE`/`$MACHTYPE` to pick a platform; the values are those of the bash the
/// shell follows. The sandbox runs every program as one unprivileged user, uid 1000.
pub(crate) fn bash_variables(vars: &mut Vars) {
    const VERSINFO: [&str; 6] = ["5", "2", "15", "1", "release", "x86_64-pc-linux-gnu"];
    for (k, v) in [
        ("BASH", "/bin/bash"),
        ("BASH_VERSION", "5.2.15(1)-release"),
        ("HOSTTYPE", "x86_64"),
        ("MACHTYPE", "x86_64-pc-linux-gnu"),
        ("OSTYPE", "linux-gnu"),
        ("OPTERR", "1"),
        // bash sets the machine's name when its environment has none; the sandbox's machine
        // is `sandbox` unless the embedder names it (in the environment).
        ("HOSTNAME", "sandbox"),
    ] {
        if vars.get(k).is_none() {
            vars.put(k, Var::scalar(v));
        }
    }
    // Each new bash is one level deeper than the shell whose environment it got.
    let level = vars
        .get("SHLVL")
        .filter(|v| v.has(ATTR_EXPORT))
        .and_then(Var::scalar_value)
        .map_or(0, |s| s.trim().parse::<i64>().unwrap_or(0));
    let level = if level < 0 {
        0
    } else {
        level.saturating_add(1)
    };
    vars.put(
        "SHLVL",
        Var {
            value: Value::Str(if level >= 1000 { 1 } else { level }.to_string()),
            attrs: ATTR_EXPORT,
        },
    );
    for (k, v) in [("UID", "1000"), ("EUID", "1000"), ("PPID", "1")] {
        vars.put(
            k,
            Var {
                value: Value::Str(v.into()),
                attrs: ATTR_READONLY | crate::vars::ATTR_INTEGER,
            },
        );
    }
    vars.put(
        "OPTIND",
        Var {
            value: Value::Str("1".into()),
            attrs: crate::vars::ATTR_INTEGER,
        },
    );
    vars.put("COMP_WORDBREAKS", Var::scalar(" \t\n\"'@><=;|&(:"));
    vars.put(
        "BASH_LOADABLES_PATH",
        Var::scalar("/usr/local/lib/bash:/usr/lib/bash:/opt/local/lib/bash:/usr/pkg/lib/bash:/opt/pkg/lib/bash:."),
    );
    // bash names a terminal type when the environment has none (not exported), and exports
    // OLDPWD without a value until the first `cd`.
    if vars.get("TERM").is_none() {
        vars.put("TERM", Var::scalar("dumb"));
    }
    if vars.get("OLDPWD").is_none() {
        vars.put(
            "OLDPWD",
            Var {
                value: Value::Unset,
                attrs: ATTR_EXPORT,
            },
        );
    }
    // The call stack's arrays exist, empty, outside any function or sourced file.
    for name in ["BASH_SOURCE", "BASH_LINENO"] {
        vars.put(
            name,
            Var {
                value: Value::Indexed(Default::default()),
                attrs: 0,
            },
        );
    }
    // Declared at the top level too, without a value.
    vars.put(
        "FUNCNAME",
        Var {
            value: Value::Indexed(Default::default()),
            attrs: crate::vars::ATTR_NOVALUE,
        },
    );
    // `$0` by another name (read through `Interp::get_var`).
    vars.put("BASH_ARGV0", Var::scalar(""));
    // Declared from the start, set up on first need (see `Interp::init_bash_argv`).
    for k in ["BASH_ARGV", "BASH_ARGC"] {
        vars.put(
            k,
            Var {
                value: Value::Indexed(Default::default()),
                attrs: 0,
            },
        );
    }
    vars.put(
        "BASH_VERSINFO",
        Var {
            value: Value::Indexed((0..).zip(VERSINFO.iter().map(|s| s.to_string())).collect()),
            attrs: ATTR_READONLY,
        },
    );
}

/// The variables bash computes when they are read (see [`Interp::dynamic_var`]).
pub(crate) const DYNAMIC_VARS: [&str; 15] = [
    "BASHPID",
    "BASH_ALIASES",
    "BASH_CMDS",
    "BASH_COMMAND",
    "BASH_SUBSHELL",
    "DIRSTACK",
    "EPOCHREALTIME",
    "EPOCHSECONDS",
    "GROUPS",
    "HISTCMD",
    "LINENO",
    "RANDOM",
    "SECONDS",
    "SRANDOM",
    "_",
];

/// How many references bash follows from a nameref to the variable it names.
const NAMEREF_MAX: usize = 8;

/// The group the sandbox's user is in (`$GROUPS`, `id -g`).
pub(crate) const SANDBOX_GID: u32 = 1000;

/// Why a whole run stopped early.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Abort {
    /// The run's deadline passed.
    Timeout,
    /// The run's cancel token was triggered (or the host terminated it).
    Cancelled,
    /// A shell limit (recursion, expansion size, programs started): the message was already
    /// printed.
    Limit(String),
    /// A process could not be started because every slot of the sandbox's `pids` limit was
    /// held: the run stops as bash's `-c` does when `fork` fails (status 126); the message was
    /// already printed.
    Fork(String),
}

/// What fired a trap's action (bits of [`Interp::running_traps`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum TrapKind {
    Debug = 1,
    Err = 2,
    Return = 4,
    Signal = 8,
}

/// Non-local control flow through the interpreter.
#[derive(Debug)]
pub(crate) enum Flow {
    Break(u32),
    Continue(u32),
    Return(i32),
    /// `exit`, or a fatal error in a non-interactive shell (unbound variable, bad
    /// substitution): ends the current (sub)shell with this status.
    Exit(i32),
    /// An error that makes a non-interactive bash abandon the rest of the current top-level
    /// line (bad substitution, arithmetic error, assignment to a readonly variable) and go on
    /// with the next one.
    Fatal(i32),
    /// `set -u` on an unset variable, `${x:?}`: the shell exits, with 127 at the top level
    /// and 1 in a subshell, as bash does.
    Unbound,
    Abort(Abort),
}

/// What an interpreter step returns: its status (or value), or control flow leaving it.
pub(crate) type FlowResult<T = i32> = Result<T, Flow>;

/// What a run shares across its threads (pipeline stages, background jobs).
pub(crate) struct Runtime {
    pub exec: &'static Exec,
    pub vfs: SharedVfs,
    /// The run's deadline as given; see [`Runtime::deadline`].
    pub base_deadline: Option<Instant>,
    /// Time spent compiling modules during this run, which does not count against it.
    pub compile_nanos: AtomicU64,
    pub cancel: CancelToken,
    pub memory_limit: Option<u64>,
    pub tool_channel: Option<ToolChannel>,
    /// The sandbox's process slots, which every subshell thread of the run holds one of.
    pub pids: Arc<crate::Pids>,
    /// The descriptor caps every program of the run is started with.
    pub open_files: Option<wasmsand_exec::OpenFiles>,
    pub processes: AtomicUsize,
    pub next_pid: AtomicU32,
    /// Hands a job to the host to keep after the run (`nohup cmd &`, `cmd & disown`).
    pub detach: Option<crate::DetachFn>,
    pub abort: Mutex<Option<Abort>>,
    pub aborted: AtomicBool,
    pub started: Instant,
    pub shell_pid: u32,
    /// Signals a subshell sent to the shell (`kill -USR1 $$`): the shell takes them when its
    /// current command ends, as bash does on its return from waiting for a child.
    pub pending_signals: Arc<Mutex<Vec<(u32, String)>>>,
    /// The `bash` shells of the run that set traps, by `$$`, with the signals they trap: a
    /// `kill` of one such shell's job (`bash -c 'trap ... USR1; sleep 1' & kill -USR1 $!`)
    /// leaves it the signal, which it takes when its current command ends (as bash defers a
    /// trapped signal, and SIGINT, until its child returns), instead of ending its thread.
    pub trapping_shells: Arc<Mutex<std::collections::HashMap<u32, Vec<String>>>>,
}

/// The run's receipt as it accumulates: atomics, since pipeline stages and background jobs
/// run programs on their own threads.
#[derive(Default)]
pub(crate) struct UsageCounters {
    pub cpu_nanos: AtomicU64,
    pub peak_memory: AtomicU64,
    pub tool_calls: AtomicU64,
    pub programs: AtomicU64,
    pub processes: AtomicU64,
    pub out_of_memory: AtomicBool,
    pub open_files_capped: AtomicBool,
    pub pool_open_files_capped: AtomicBool,
    pub pids_exhausted: AtomicBool,
}

impl UsageCounters {
    fn add(&self, o: &wasmsand_exec::Outcome) {
        self.cpu_nanos
            .fetch_add(o.cpu_time.as_nanos() as u64, Ordering::Relaxed);
        self.peak_memory.fetch_max(o.peak_memory, Ordering::Relaxed);
        self.tool_calls.fetch_add(o.tool_calls, Ordering::Relaxed);
        self.programs.fetch_add(1, Ordering::Relaxed);
        if o.memory_capped {
            self.out_of_memory.store(true, Ordering::Relaxed);
        }
        if o.open_files_capped {
            self.open_files_capped.store(true, Ordering::Relaxed);
        }
        if o.pool_open_files_capped {
            self.pool_open_files_capped.store(true, Ordering::Relaxed);
        }
    }

    pub(crate) fn stats(&self) -> crate::RunStats {
        crate::RunStats {
            cpu_time: std::time::Duration::from_nanos(self.cpu_nanos.load(Ordering::Relaxed)),
            peak_memory: self.peak_memory.load(Ordering::Relaxed),
            processes: self.processes.load(Ordering::Relaxed),
            programs: self.programs.load(Ordering::Relaxed),
            tool_calls: self.tool_calls.load(Ordering::Relaxed),
            out_of_memory: self.out_of_memory.load(Ordering::Relaxed),
            open_files_capped: self.open_files_capped.load(Ordering::Relaxed),
            session_open_files_capped: self.pool_open_files_capped.load(Ordering::Relaxed),
            pids_exhausted: self.pids_exhausted.load(Ordering::Relaxed),
        }
    }
}

impl Runtime {
    /// When the run must end. Compiling a module the cache did not have (a minute for
    /// CPython, once per machine) is the host's cost, not the script's: it moves the
    /// deadline, so a first `python3` does not time out on its own compilation.
    pub fn deadline(&self) -> Option<Instant> {
        self.base_deadline.map(|d| {
            d + std::time::Duration::from_nanos(self.compile_nanos.load(Ordering::Relaxed))
        })
    }

    pub fn set_abort(&self, a: Abort) {
        let mut g = self.abort.lock();
        if g.is_none() {
            *g = Some(a);
        }
        self.aborted.store(true, Ordering::SeqCst);
        // Wakes every pipe wait and stops every program of the run.
        self.cancel.cancel();
    }
}

/// One open descriptor of the shell.
#[derive(Debug, Clone)]
pub(crate) enum Fd {
    In(InSrc),
    Out(Output),
}

#[derive(Debug, Clone)]
pub(crate) enum InSrc {
    Empty,
    Pipe(PipeReader),
    File(OpenFile),
    /// A here-doc or here-string, consumed through a shared cursor.
    Bytes(Arc<Mutex<(bytes::Bytes, usize)>>),
}

/// The highest descriptor a redirection may name: bash's limit is the process's open-file
/// limit, 1024 by default.
pub(crate) const MAX_FD: u32 = 1023;

/// The descriptor table.
#[derive(Debug, Clone, Default)]
pub(crate) struct Fds {
    slots: BTreeMap<u32, Slot>,
}

#[derive(Debug, Clone)]
struct Slot {
    fd: Fd,
    /// Opened with `<>`: its copies may be read and written (the file shares one offset).
    rw: Option<OpenFile>,
}

impl Fds {
    pub fn get(&self, fd: u32) -> Option<&Fd> {
        self.slots.get(&fd).map(|s| &s.fd)
    }

    pub fn set(&mut self, fd: u32, v: Option<Fd>) {
        match v {
            Some(fd_entry) if fd <= MAX_FD => {
                self.slots.insert(
                    fd,
                    Slot {
                        fd: fd_entry,
                        rw: None,
                    },
                );
            }
            _ => {
                self.slots.remove(&fd);
            }
        }
    }

    /// Closes every descriptor from `low` up.
    pub fn close_from(&mut self, low: u32) {
        self.slots.retain(|&fd, _| fd < low);
    }

    /// Opens `fd` on a file for reading and writing (`<>`).
    pub fn set_rw(&mut self, fd: u32, f: OpenFile) {
        if fd <= MAX_FD {
            self.slots.insert(
                fd,
                Slot {
                    fd: Fd::In(InSrc::File(f.clone())),
                    rw: Some(f),
                },
            );
        }
    }

    /// Makes `to` a copy of `from` for reading or writing (`to<&from`, `to>&from`); a `<>`
    /// descriptor serves either way. False when `from` is not open.
    pub fn dup(&mut self, from: u32, to: u32, write: bool) -> bool {
        let Some(slot) = self.slots.get(&from).cloned() else {
            return false;
        };
        let slot = match slot.rw {
            Some(f) => Slot {
                fd: if write {
                    Fd::Out(Output::File(f.clone()))
                } else {
                    Fd::In(InSrc::File(f.clone()))
                },
                rw: Some(f),
            },
            None => slot,
        };
        if to <= MAX_FD {
            self.slots.insert(to, slot);
        }
        true
    }

    /// The lowest free descriptor, where a file opened for a redirection lands first.
    pub fn lowest_free(&self) -> u32 {
        (0..=MAX_FD)
            .find(|n| !self.slots.contains_key(n))
            .unwrap_or(MAX_FD + 1)
    }

    /// The lowest free descriptor from 10 up, as bash gives `{name}>file`.
    pub fn free_from_10(&self) -> Option<u32> {
        (10..=MAX_FD).find(|n| !self.slots.contains_key(n))
    }

    /// The entry of `fd` with its read-write state, to put back after a redirection.
    pub(crate) fn take_snapshot(&self, fd: u32) -> Saved {
        Saved(fd, self.slots.get(&fd).cloned())
    }

    pub(crate) fn restore(&mut self, s: Saved) {
        match s.1 {
            Some(slot) => {
                self.slots.insert(s.0, slot);
            }
            None => {
                self.slots.remove(&s.0);
            }
        }
    }

    pub fn output(&self, fd: u32) -> Option<Output> {
        match self.get(fd) {
            Some(Fd::Out(o)) => Some(o.clone()),
            _ => None,
        }
    }

    /// The descriptor as a program's standard input.
    pub fn input(&self, fd: u32) -> Input {
        match self.get(fd) {
            Some(Fd::In(InSrc::Pipe(p))) => Input::Pipe(p.clone()),
            Some(Fd::In(InSrc::File(f))) => Input::File(f.clone()),
            // The program moves the shared cursor by what it reads, no further: what it leaves
            // is there for the next command, as with a file or pipe in bash.
            Some(Fd::In(InSrc::Bytes(c))) => Input::Cursor(c.clone()),
            _ => Input::Empty,
        }
    }
}

/// One descriptor as it was before a command's redirections changed it.
#[derive(Debug, Clone)]
pub(crate) struct Saved(u32, Option<Slot>);

/// One frame of `BASH_SOURCE` / `caller`: the file its code comes from, what it is (`main`,
/// `source` or the function's name) and the line it was entered from.
#[derive(Clone, Debug)]
pub(crate) struct SourceFrame {
    pub file: Arc<str>,
    pub kind: String,
    pub line: usize,
}

/// A string's bytes, one char each (U+0000..U+00FF): what the C locale's byte-wise
/// matching, lengths and offsets work on.
pub(crate) fn bytes_as_chars(s: &str) -> String {
    wasmsand_exec::raw::encode(s)
        .iter()
        .map(|&b| char::from(b))
        .collect()
}

/// The inverse of [`bytes_as_chars`]: bytes a C-locale operation split in the middle of a
/// character stay the bytes they are.
pub(crate) fn chars_as_bytes(s: &str) -> String {
    let bytes: Vec<u8> = s.chars().map(|c| c as u32 as u8).collect();
    wasmsand_exec::raw::decode_vec(bytes)
}

/// How a shell was started: a few of bash's behaviours depend on it (`$-` has `c` or `s`,
/// the `main` frame of `FUNCNAME`/`BASH_SOURCE`, the status a fatal expansion error exits
/// with).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Invocation {
    /// `bash -c TEXT`, as a sandbox runs its commands.
    #[default]
    DashC,
    /// `bash FILE`, `./script`.
    File,
    /// `bash` reading its script from standard input; `seekable` when that is a file (bash
    /// then names the line of a syntax error, as it cannot for a pipe).
    Stdin { seekable: bool },
}

/// A running interpreter: the session state plus this thread's view of the run.
pub(crate) struct Interp {
    pub st: ShellState,
    pub invocation: Invocation,
    pub rt: Arc<Runtime>,
    pub fds: Fds,
    pub depth: u32,
    pub funcnames: Vec<String>,
    /// The frames `BASH_SOURCE` and `caller` describe, outermost first: a script run as
    /// `bash FILE` (`main`), a sourced file (`source`), each function call.
    pub frames: Vec<SourceFrame>,
    pub loops: u32,
    pub line: usize,
    /// Inside a condition (`if`, `while`, `!`, left of `&&`/`||`): `set -e` and the ERR trap
    /// do not apply.
    pub cond: u32,
    pub jobs: Vec<crate::jobs::table::Job>,
    /// Jobs `disown` took out of the table: no longer the script's to wait for or name, but
    /// still threads of the run, joined when it ends.
    pub disowned: Vec<crate::jobs::table::Job>,
    /// Jobs that ended and left the table (`jobs`, `wait -n`), kept for `wait PID`.
    pub reaped: Vec<crate::jobs::table::Job>,
    /// Coprocesses started by this shell (not its subshells) and not reaped yet.
    pub coprocs: Vec<crate::jobs::table::Coproc>,
    pub last_bg: Option<u32>,
    /// In a background job: its own token (a child of the run's), so `kill %N` ends it alone.
    pub job_cancel: Option<CancelToken>,
    /// In a subshell: the jobs of the shell it was forked from, for `jobs` to list.
    pub parent_jobs: Arc<[crate::jobs::table::JobView]>,
    /// Set for a top-level `cmd &` that the next command disowns (see `jobs::disowned_next`).
    pub disown_follows: bool,
    /// Status of the last command substitution of the current simple command.
    pub subst_status: Option<i32>,
    pub in_trap: bool,
    /// The kinds of trap whose action is running ([`TrapKind`] bits): a kind does not fire
    /// again inside its own action, the others do (an ERR trap inside a DEBUG trap's action).
    pub(crate) running_traps: u8,
    /// Inside `source`: `return` is allowed.
    pub sourcing: u32,
    /// A background job about to start without job control: it ignores SIGINT.
    pub(crate) async_ignores: bool,
    /// Runs what `env` started: its environment is exactly what `env` was given.
    pub(crate) exact_env: bool,
    /// This shell has trapped SIGINT at some point: a job it starts without job control may
    /// trap it again (bash then knows the signal's original handling).
    pub(crate) int_trapped: bool,
    /// The subshell of a process substitution, whose `trap -p` lists only its own traps
    /// (bash's `$(...)` and `( )` list the parent's).
    pub(crate) in_procsub: bool,
    /// A builtin runs through `command`, which keeps a special builtin's failure from
    /// ending a POSIX-mode shell.
    pub(crate) via_command: bool,
    /// The descriptor `BASH_XTRACEFD` names, where `set -x` writes instead of stderr.
    pub(crate) xtrace_fd: Option<u32>,
    /// The line being abandoned was abandoned by an arithmetic error, which `set -e` does
    /// not turn into an exit (bash goes on with the next line).
    pub(crate) arith_fatal: bool,
    /// The frames of `BASH_ARGV`/`BASH_ARGC`, outermost first; `None` until bash would set
    /// them up (`shopt -s extdebug`, `source`, their first use at the top level).
    pub(crate) bash_argv: Option<Vec<Vec<String>>>,
    /// Set by `exec` without a command: keep this command's redirections.
    pub keep_redirs: bool,
    /// The `NAME=value cmd` bindings in force while cmd runs, innermost last: `unset NAME`
    /// inside cmd brings the hidden value back, as bash's temporary environment does.
    pub temp_hidden: Vec<TempBinding>,
    /// Evaluating the array literal of a declaration that makes an associative array
    /// (`declare -A a=(...)`).
    pub(crate) assoc_literal: bool,
    /// Expanding a word that is not split (an assignment's value, a `case` word, `[[ ]]`
    /// operands): an unquoted `$*` joins with IFS's first character there, as `"$*"` does.
    pub unsplit: bool,
    pub getopts_optind: usize,
    pub getopts_char: usize,
    /// In a subshell that has not set a trap yet: the parent's traps, which `trap -p` still
    /// lists (bash shows them so `$(trap -p)` can save them).
    pub inherited_traps: Option<im::OrdMap<String, String>>,
    /// Added to parsed line numbers: `eval` text and traps count from where they ran.
    pub line_offset: usize,
    /// The line the running simple command ends on (see `SimpleCommand::end_line`).
    pub(crate) end_line: usize,
    /// Per function call: the options `local -` saved, restored on return.
    pub saved_opts: Vec<Option<Options>>,
    /// Per function call: the RETURN trap when it was entered.
    pub return_traps: Vec<Option<String>>,
    /// The run's receipt, shared by every interpreter of the run (subshells, pipeline
    /// stages, jobs, nested runtimes with their own deadline).
    pub usage: Arc<UsageCounters>,
    /// Files standing for `<( )` / `>( )` of the commands being run, with the `>( )` reader
    /// to run once the command is done; removed when their pipeline ends.
    pub(crate) procsubs: Vec<(String, Option<Script>)>,
    /// `$_`: the last argument of the previous simple command.
    pub(crate) last_arg: String,
    /// `$BASHPID` of a subshell: numbered from the run's pids the first time it is read, so
    /// subshells that never ask use none.
    pub(crate) subshell_pid: Option<std::cell::OnceCell<u32>>,
    /// `$BASH_SUBSHELL`: how many subshells deep this shell runs (0 in a new bash).
    pub(crate) subshell_depth: u32,
    /// `$$` of a shell started by `bash -c`/`bash FILE` (its `$BASHPID`, and its subshells'
    /// `$$`); `None` in the run's own shell and its subshells, whose `$$` is the run's.
    pub(crate) nested_shell_pid: Option<u32>,
    /// `$$` of the shells around a nested one, outermost first: a signal a script sends one
    /// of them (`sh -c "kill -USR1 $$"`) waits for that shell.
    pub(crate) outer_shells: Vec<u32>,
    /// This shell reads commands from a script or its input and counts them (`\#`).
    pub(crate) counts_commands: bool,
    /// The line of the last command counted (`None` inside: a command without one).
    pub(crate) counted_line: Option<Option<usize>>,
    /// A background job's only command is running: a `bash` it starts takes the job's pid,
    /// as the job's process would exec it.
    pub(crate) job_exec: bool,
}

/// Stack for every interpreter thread: the tree walk recurses per nesting level and per
/// function call, bounded by [`ShellLimits::max_depth`]. Only touched pages cost memory.
pub(crate) const THREAD_STACK: usize = 256 << 20;
/// Capacity of the pipes between pipeline stages and to coprocesses (as Linux's default).
pub(crate) const PIPE_BYTES: usize = 64 * 1024;

type ProgramCache = BTreeMap<(usize, usize), (bytes::Bytes, Program)>;

fn programs() -> &'static Mutex<ProgramCache> {
    static P: OnceLock<Mutex<ProgramCache>> = OnceLock::new();
    P.get_or_init(Default::default)
}

impl Interp {
    pub fn new(st: ShellState, rt: Arc<Runtime>, fds: Fds) -> Interp {
        Interp {
            st,
            invocation: Invocation::DashC,
            rt,
            fds,
            depth: 0,
            funcnames: Vec::new(),
            frames: Vec::new(),
            loops: 0,
            line: 1,
            cond: 0,
            jobs: Vec::new(),
            disowned: Vec::new(),
            reaped: Vec::new(),
            coprocs: Vec::new(),
            last_bg: None,
            job_cancel: None,
            disown_follows: false,
            parent_jobs: Arc::from([]),
            subst_status: None,
            in_trap: false,
            running_traps: 0,
            sourcing: 0,
            async_ignores: false,
            exact_env: false,
            int_trapped: false,
            xtrace_fd: None,
            via_command: false,
            in_procsub: false,
            arith_fatal: false,
            bash_argv: None,
            keep_redirs: false,
            temp_hidden: Vec::new(),
            assoc_literal: false,
            unsplit: false,
            getopts_optind: 0,
            getopts_char: 0,
            inherited_traps: None,
            line_offset: 0,
            end_line: 0,
            saved_opts: Vec::new(),
            return_traps: Vec::new(),
            usage: Arc::default(),
            procsubs: Vec::new(),
            last_arg: String::new(),
            subshell_pid: None,
            subshell_depth: 0,
            nested_shell_pid: None,
            outer_shells: Vec::new(),
            counts_commands: false,
            counted_line: None,
            job_exec: false,
        }
    }

    /// A copy for a subshell (pipeline stage, `( )`, `$( )`, background job): the session
    /// and descriptors, with where it stands in the script; loops, jobs and traps start
    /// afresh.
    pub fn fork(&self) -> Interp {
        let mut child = Interp::new(self.st.clone(), self.rt.clone(), self.fds.clone());
        child.usage = self.usage.clone();
        child.depth = self.depth;
        child.invocation = self.invocation;
        child.funcnames = self.funcnames.clone();
        child.frames = self.frames.clone();
        child.bash_argv = self.bash_argv.clone();
        child.int_trapped = self.int_trapped;
        child.xtrace_fd = self.xtrace_fd;
        // A subshell of a subshell that set no trap still lists the traps from above.
        if self.st.traps.is_empty() {
            child.inherited_traps = self.inherited_traps.clone();
        }
        child.line = self.line;
        child.line_offset = self.line_offset;
        child.end_line = self.end_line;
        child.last_arg = self.last_arg.clone();
        child.subshell_pid = Some(std::cell::OnceCell::new());
        child.subshell_depth = self.subshell_depth + 1;
        child.nested_shell_pid = self.nested_shell_pid;
        child.outer_shells = self.outer_shells.clone();
        child.temp_hidden = self.temp_hidden.clone();
        child.cond = self.cond;
        child.last_bg = self.last_bg;
        child.job_cancel = self.job_cancel.clone();
        child.parent_jobs = if self.jobs.is_empty() {
            self.parent_jobs.clone()
        } else {
            self.jobs
                .iter()
                .map(crate::jobs::table::Job::view)
                .collect()
        };
        child
    }

    /// What cancels this interpreter's waits and programs: its job's token, else the run's.
    pub fn cancel_token(&self) -> CancelToken {
        self.job_cancel
            .clone()
            .unwrap_or_else(|| self.rt.cancel.clone())
    }

    /// `$BASHPID`: this shell's or subshell's own pid.
    pub(crate) fn bashpid(&self) -> u32 {
        self.subshell_pid
            .as_ref()
            .map_or(self.rt.shell_pid, |p| *p.get_or_init(|| self.next_pid()))
    }

    /// Whether this is a shell itself (the run's, or a `bash -c` in it), not a subshell of one.
    /// Asks without numbering a subshell that never read `$BASHPID`.
    pub(crate) fn is_shell_itself(&self) -> bool {
        match &self.subshell_pid {
            None => true,
            Some(cell) => cell.get().is_some() && cell.get().copied() == self.nested_shell_pid,
        }
    }

    /// Whether an action of a trap of this kind is running.
    pub(crate) fn trap_running(&self, kind: TrapKind) -> bool {
        self.running_traps & kind as u8 != 0
    }

    /// `$$`: the pid of the shell this code runs in, the same in its subshells.
    pub(crate) fn shell_pid(&self) -> u32 {
        self.nested_shell_pid.unwrap_or(self.rt.shell_pid)
    }

    /// The deadline and cancellation, checked in every loop iteration and command.
    pub fn check(&self) -> FlowResult<()> {
        if self.rt.aborted.load(Ordering::Relaxed) {
            let a = self.rt.abort.lock().clone().unwrap_or(Abort::Cancelled);
            return Err(Flow::Abort(a));
        }
        // The deadline first: a run stopped at its deadline also has its token cancelled
        // (that is how blocked waits wake), and must still be reported as a timeout.
        if let Some(d) = self.rt.deadline()
            && Instant::now() >= d
        {
            self.rt.set_abort(Abort::Timeout);
            return Err(Flow::Abort(Abort::Timeout));
        }
        if self.rt.cancel.is_cancelled() {
            self.rt.set_abort(Abort::Cancelled);
            return Err(Flow::Abort(Abort::Cancelled));
        }
        // A killed job stops without stopping the run.
        if self.job_cancel.as_ref().is_some_and(|t| t.is_cancelled()) {
            return Err(Flow::Abort(Abort::Cancelled));
        }
        Ok(())
    }

    /// Stops the whole run on a limit, after telling the script why.
    pub fn limit(&mut self, msg: String) -> Flow {
        self.err(&msg);
        self.rt.set_abort(Abort::Limit(msg.clone()));
        Flow::Abort(Abort::Limit(msg))
    }

    // ---- output ----

    /// Writes to a descriptor. A closed or input-only descriptor is `EBADF`.
    pub fn write_fd(&mut self, fd: u32, data: &[u8]) -> Result<(), ShellError> {
        match self.fds.get(fd) {
            Some(Fd::Out(o)) => write_output(o, data),
            _ => Err(ShellError::BadFd),
        }
    }

    /// Standard output of a builtin; a failed write is reported as bash does and is status 1
    /// (a broken pipe is 141, as SIGPIPE would end a real shell's subshell).
    pub fn out(&mut self, data: &[u8]) -> Result<(), i32> {
        match self.write_fd(1, data) {
            Ok(()) => Ok(()),
            Err(e) if e.is_broken_pipe() => Err(141),
            Err(e) => {
                self.err(&format!("write error: {e}"));
                Err(1)
            }
        }
    }

    /// `bash: line N: msg` on stderr; `bash: msg` in an interactive shell, which names no
    /// line, even for a sourced file's.
    pub fn err(&mut self, msg: &str) {
        if self.st.opts.interactive {
            self.err_raw(&format!("bash: {msg}\n"));
            return;
        }
        let text = format!("{}: line {}: {}\n", self.code_file(), self.line, msg);
        let _ = self.write_fd(2, &wasmsand_exec::raw::encode(&text));
    }

    /// An error that ends a posix-mode shell: bash names the file and line in a script and
    /// only itself at the top of `-c` text.
    pub(crate) fn err_fatal(&mut self, msg: &str) {
        if self.frames.is_empty() {
            self.err_raw(&format!("bash: {msg}\n"));
        } else {
            self.err(msg);
        }
    }

    /// What bash names in front of an error: the file the failing code comes from (the
    /// script, the sourced file, the file a function was defined in; `environment` for one
    /// defined in `-c` text), `bash` at the top of `-c` text.
    pub(crate) fn code_file(&self) -> &str {
        self.frames.last().map_or("bash", |f| &f.file)
    }

    /// Whether the locale the shell's variables name is C/POSIX (LC_ALL, else LC_CTYPE, else
    /// LANG; none at all is C too), where bash measures, slices and matches strings byte by
    /// byte: `?` does not match a two-byte `μ` and `${#s}` counts its bytes.
    pub(crate) fn byte_locale(&self) -> bool {
        matches!(self.ctype_locale(), None | Some("C" | "POSIX"))
    }

    /// The character locale the shell's variables name: LC_ALL, else LC_CTYPE, else LANG.
    fn ctype_locale(&self) -> Option<&str> {
        ["LC_ALL", "LC_CTYPE", "LANG"]
            .iter()
            .find_map(|v| self.st.vars.scalar(v).filter(|s| !s.is_empty()))
    }

    /// Whether the locale the shell's variables name uses UTF-8, where GNU programs quote
    /// names as ‘this’ rather than 'this'.
    pub(crate) fn utf8_locale(&self) -> bool {
        self.ctype_locale().is_some_and(|l| {
            let l = l.to_ascii_lowercase();
            l.contains("utf-8") || l.contains("utf8")
        })
    }

    pub fn err_raw(&mut self, text: &str) {
        let _ = self.write_fd(2, &wasmsand_exec::raw::encode(text));
    }

    /// `set -x` output: to `BASH_XTRACEFD`'s descriptor when it names one, else stderr.
    pub(crate) fn trace_raw(&mut self, text: &str) {
        let fd = self.xtrace_fd.unwrap_or(2);
        let _ = self.write_fd(fd, &wasmsand_exec::raw::encode(text));
    }

    /// bash checks `BASH_XTRACEFD` when it is assigned: an open descriptor becomes the trace
    /// file, an empty value (or unsetting it) closes the one there was and goes back to
    /// stderr, anything else is refused and changes nothing.
    fn xtrace_fd_assigned(&mut self) {
        let value = self.get_var("BASH_XTRACEFD").unwrap_or_default();
        if value.is_empty() {
            self.xtrace_reset();
            return;
        }
        match value.parse::<u32>() {
            Ok(fd) if !value.starts_with('+') && self.fds.get(fd).is_some() => {
                self.xtrace_fd = Some(fd)
            }
            _ => self.err(&format!(
                "BASH_XTRACEFD: {value}: invalid value for trace file descriptor"
            )),
        }
    }

    /// POSIX: assigning OPTIND 1 restarts `getopts`; bash also restarts it for 0, a
    /// negative or empty value and anything `atoi` reads as 0, even in the middle of `-abc`.
    fn optind_assigned(&mut self) {
        let value = self.get_var("OPTIND").unwrap_or_default();
        let t = value.trim_start();
        let digits = t.strip_prefix(['-', '+']).unwrap_or(t);
        let n = digits
            .bytes()
            .take_while(u8::is_ascii_digit)
            .fold(0i64, |n, d| {
                n.saturating_mul(10).saturating_add(i64::from(d - b'0'))
            });
        if n <= 1 || t.starts_with('-') {
            self.getopts_char = 0;
        }
    }

    /// bash closes the trace descriptor when it lets it go, even when that is stderr.
    fn xtrace_reset(&mut self) {
        if let Some(fd) = self.xtrace_fd.take() {
            self.fds.set(fd, None);
        }
    }

    // ---- variables ----

    pub fn get_var(&self, name: &str) -> Option<String> {
        match name {
            "RANDOM" => Some((random_from(&self.rt.vfs) % 32768).to_string()),
            "SRANDOM" => Some(random_from(&self.rt.vfs).to_string()),
            "BASH_SUBSHELL" => Some(self.subshell_depth.to_string()),
            "BASH_ARGV0" if self.st.vars.get(name).is_some() => Some(self.st.arg0.clone()),
            "EPOCHSECONDS" | "EPOCHREALTIME" => {
                let now = std::time::Duration::from_nanos(wall_clock_ns(&self.rt.vfs));
                Some(if name == "EPOCHSECONDS" {
                    now.as_secs().to_string()
                } else {
                    format!("{}.{:06}", now.as_secs(), now.subsec_micros())
                })
            }
            "SECONDS" => Some(self.rt.started.elapsed().as_secs().to_string()),
            "LINENO" => Some(self.line.to_string()),
            "HISTCMD" if self.st.vars.get(name).is_none() => {
                Some(self.history_number().to_string())
            }
            // A `_` the running command assigned, or a readonly one, is the variable's.
            "_" => match self.st.vars.get("_") {
                Some(v) => v.scalar_value().map(str::to_string),
                None => Some(self.last_arg.clone()),
            },
            "BASHPID" => Some(self.bashpid().to_string()),
            "SHELLOPTS" => Some(self.shellopts()),
            "BASHOPTS" => Some(self.bashopts()),
            _ => match self.st.vars.get(name) {
                // A chain that comes back to itself reads as unset, as in bash (which also
                // warns on stderr).
                Some(v) if v.has(ATTR_NAMEREF) && self.ref_is_circular(name) => None,
                Some(v) if v.has(ATTR_NAMEREF) => {
                    let (target, sub) = self.resolve_ref(name);
                    match sub {
                        // A reference to itself (`x=x; declare -n x`) reads as unset.
                        None if target == name => {
                            v.scalar_value().filter(|t| *t != name).map(str::to_string)
                        }
                        None => self.get_var(&target),
                        Some(k) => self.element_value(&target, &k),
                    }
                }
                Some(v) => v.scalar_value().map(str::to_string),
                None => None,
            },
        }
    }

    /// bash's dynamic variables that exist only when read: what `declare -p` shows for one
    /// of them, `None` for any other name (or one the script declared itself).
    pub(crate) fn dynamic_var(&self, name: &str) -> Option<Var> {
        if !DYNAMIC_VARS.contains(&name) || self.st.vars.get(name).is_some() {
            return None;
        }
        let int = |v: String| Var {
            value: Value::Str(v),
            attrs: crate::vars::ATTR_INTEGER,
        };
        let list = |items: Vec<String>| Value::Indexed((0..).zip(items).collect());
        Some(match name {
            "BASHPID" => int(self.bashpid().to_string()),
            "RANDOM" | "SRANDOM" => int(self.get_var(name)?),
            "HISTCMD" => int(self.history_number().to_string()),
            "BASH_ALIASES" | "BASH_CMDS" => {
                let mut m = crate::vars::AssocMap::new();
                if name == "BASH_ALIASES" {
                    for (k, v) in &self.st.aliases {
                        m.insert(k.clone(), v.clone());
                    }
                } else {
                    let mut hashed: Vec<_> = self.st.hashed.iter().collect();
                    hashed.sort_by_key(|(_, h)| h.seq);
                    for (k, h) in hashed {
                        m.insert(k.clone(), h.path.clone());
                    }
                }
                Var {
                    value: Value::Assoc(m),
                    attrs: 0,
                }
            }
            "GROUPS" => Var {
                value: list(vec![SANDBOX_GID.to_string()]),
                attrs: 0,
            },
            "DIRSTACK" => {
                let mut all = vec![self.st.cwd.clone()];
                all.extend(self.st.dirstack.iter().rev().cloned());
                Var {
                    value: list(all),
                    attrs: 0,
                }
            }
            _ => Var::scalar(self.get_var(name).unwrap_or_default()),
        })
    }

    /// `$HISTCMD`: the history number of the command running, 0 when the shell keeps no
    /// history.
    pub(crate) fn history_number(&self) -> usize {
        if self.keeps_history() {
            self.st.history_base + self.st.history.len().saturating_sub(1)
        } else {
            0
        }
    }

    /// Where a `declare -n` chain ends: the variable's name, and the subscript when the
    /// reference is to an element (`declare -n r='a[1]'`). A name that is no reference is
    /// its own end.
    pub fn resolve_ref(&self, name: &str) -> (String, Option<String>) {
        let mut cur = name.to_string();
        // bash's depth bounds the walk, so a cycle ends it too; reads and assignments ask
        // `ref_is_circular` first and treat a cycle, or a chain too long, as bash does.
        for _ in 0..NAMEREF_MAX {
            let Some(v) = self.st.vars.get(&cur) else {
                break;
            };
            if !v.has(ATTR_NAMEREF) {
                break;
            }
            let Value::Str(t) = &v.value else {
                break;
            };
            if t.is_empty() || *t == cur {
                break;
            }
            if let Some(i) = t.find('[')
                && t.ends_with(']')
            {
                return (t[..i].to_string(), Some(t[i + 1..t.len() - 1].to_string()));
            }
            cur = t.clone();
        }
        (cur, None)
    }

    /// The variable a `declare -n` name stands for (the name itself when it is no
    /// reference, or one that leads to an element or nowhere).
    pub(crate) fn reference_target(&self, name: &str) -> String {
        if self.st.vars.get(name).is_some_and(|v| v.has(ATTR_NAMEREF))
            && !self.ref_is_circular(name)
            && let (target, None) = self.resolve_ref(name)
            && crate::vars::is_valid_name(&target)
        {
            return target;
        }
        name.to_string()
    }

    /// Whether `name`'s `declare -n` chain comes back to a name it already passed
    /// (`declare -n a=b b=a`). A reference to itself is refused when it is declared.
    pub fn ref_is_circular(&self, name: &str) -> bool {
        let mut seen: Vec<&str> = vec![name];
        let mut cur = name;
        while let Some(v) = self.st.vars.get(cur) {
            // More references than bash follows resolve to nothing, as a cycle does.
            if seen.len() > NAMEREF_MAX && v.has(ATTR_NAMEREF) {
                return true;
            }
            let Value::Str(t) = &v.value else {
                return false;
            };
            if !v.has(ATTR_NAMEREF) || t.is_empty() || t.contains('[') || t == cur {
                return false;
            }
            if seen.contains(&t.as_str()) {
                return true;
            }
            seen.push(t);
            cur = t;
        }
        false
    }

    /// `a[k]` read without side effects: a key for associative arrays, a number or a
    /// variable's number for indexed ones.
    pub fn element_value(&self, name: &str, key: &str) -> Option<String> {
        let v = self.st.vars.get(name)?;
        match &v.value {
            Value::Assoc(m) => m.get(key).cloned(),
            Value::Indexed(m) => {
                let k = key.trim();
                let i = k.parse::<i64>().ok().or_else(|| {
                    self.st
                        .vars
                        .scalar(k)
                        .and_then(|s| s.trim().parse::<i64>().ok())
                })?;
                let i = if i < 0 {
                    m.keys().next_back().map(|t| t + 1 + i)?
                } else {
                    i
                };
                m.get(&i).cloned()
            }
            Value::Str(s) if matches!(key.trim(), "0" | "-1") => Some(s.clone()),
            _ => None,
        }
    }

    /// Assigns a scalar, honouring `readonly`, `-i`, case attributes and `allexport`.
    pub fn set_var(&mut self, name: &str, value: String) -> Result<(), ShellError> {
        self.assign(name, None, value, false)
    }

    /// `name=value`, `name+=value`, `name[key]=value`.
    pub fn assign(
        &mut self,
        name: &str,
        key: Option<AssignKey>,
        value: String,
        append: bool,
    ) -> Result<(), ShellError> {
        if self.st.vars.get(name).is_some_and(|v| v.has(ATTR_NAMEREF)) {
            if self.ref_is_circular(name) {
                return Err(ShellError::CircularRef(name.to_string()));
            }
            let (target, sub) = self.resolve_ref(name);
            if target != name {
                let key = match (sub, key) {
                    (Some(k), None) if k == "@" || k == "*" => {
                        return Err(ShellError::BadSubscript(format!("{target}[{k}]")));
                    }
                    (Some(k), None) => Some(self.runtime_key_for(&target, &k)?),
                    (Some(k), Some(_)) => {
                        return Err(ShellError::InvalidIdentifier(format!("{target}[{k}]")));
                    }
                    (None, k) => k,
                };
                return self.assign(&target, key, value, append);
            }
        }
        // Raw bytes that meet in one value are the character they spell, as in bash.
        let value = wasmsand_exec::raw::normalize(value);
        if value.len() > self.st.limits.max_word_bytes {
            return Err(ShellError::TooLarge {
                name: name.to_string(),
                len: value.len(),
                limit: self.st.limits.max_word_bytes,
            });
        }
        let existing = self.st.vars.get(name).cloned();
        let attrs = existing.as_ref().map(|v| v.attrs).unwrap_or(0);
        if attrs & ATTR_READONLY != 0 {
            return Err(ShellError::Readonly(name.to_string()));
        }
        if name == "PATH" {
            self.st.hashed.clear();
        }
        // bash cuts the history file to HISTFILESIZE lines when that is assigned.
        if name == "HISTFILESIZE"
            && key.is_none()
            && let Ok(n) = value.trim().parse::<usize>()
        {
            self.truncate_history_file(n);
        }
        let value = if attrs & crate::vars::ATTR_INTEGER != 0 {
            // `+=` adds to the value there is: the variable's, or the element's.
            let base = if append {
                let current = match (existing.as_ref().map(|v| &v.value), &key) {
                    (Some(Value::Str(s)), None) => Some(s.as_str()),
                    (Some(Value::Indexed(m)), None) => m.get(&0).map(String::as_str),
                    (Some(Value::Assoc(m)), None) => m.get("0").map(String::as_str),
                    (Some(Value::Indexed(m)), Some(AssignKey::Index(i))) => {
                        let i = if *i < 0 {
                            m.keys().next_back().map_or(*i, |top| top + 1 + i)
                        } else {
                            *i
                        };
                        m.get(&i).map(String::as_str)
                    }
                    (Some(Value::Assoc(m)), Some(AssignKey::Key(k))) => {
                        m.get(k).map(String::as_str)
                    }
                    _ => None,
                };
                current.unwrap_or("0").to_string()
            } else {
                "0".into()
            };
            let n = self.eval_arith_str(&value)?;
            if append {
                let b = self.eval_arith_str(&base).unwrap_or(0);
                b.wrapping_add(n).to_string()
            } else {
                n.to_string()
            }
        } else {
            value
        };
        let value = apply_case_attrs(attrs, value);
        let mut var = existing.unwrap_or(Var {
            value: Value::Unset,
            attrs: 0,
        });
        // `set -a` exports what is assigned as a whole, not an array's element.
        if self.st.opts.allexport && key.is_none() {
            var.attrs |= ATTR_EXPORT;
        }
        var.attrs &= !crate::vars::ATTR_NOVALUE;
        let int_append = attrs & crate::vars::ATTR_INTEGER != 0;
        let whole = key.is_none();
        match key {
            None => match &mut var.value {
                Value::Indexed(m) => {
                    let slot = m.entry(0).or_default();
                    if append && !int_append {
                        wasmsand_exec::raw::push_str(slot, &value)
                    } else {
                        *slot = value
                    }
                }
                Value::Assoc(m) => {
                    let slot = m.slot("0".into());
                    if append && !int_append {
                        wasmsand_exec::raw::push_str(slot, &value)
                    } else {
                        *slot = value
                    }
                }
                // bash converts the whole appended value (`declare -u v=ab; v+=c` is `ABC`
                // after `declare -u` left `ab` as it was).
                Value::Str(s) if append && !int_append => {
                    wasmsand_exec::raw::push_str(s, &value);
                    *s = apply_case_attrs(attrs, std::mem::take(s));
                }
                v => *v = Value::Str(value),
            },
            Some(AssignKey::Index(i)) => {
                let m = match &mut var.value {
                    Value::Indexed(m) => m,
                    v => {
                        let mut m = BTreeMap::new();
                        if let Value::Str(s) = v {
                            m.insert(0, std::mem::take(s));
                        }
                        *v = Value::Indexed(m);
                        let Value::Indexed(m) = v else { unreachable!() };
                        m
                    }
                };
                let i = if i < 0 {
                    // Counted from one past the highest index, which may be i64::MAX.
                    let top = m.keys().next_back().map_or(0, |&k| i128::from(k) + 1);
                    match i64::try_from(top + i128::from(i)) {
                        Ok(j) if j >= 0 => j,
                        _ => return Err(ShellError::BadSubscript(format!("{name}[{i}]"))),
                    }
                } else {
                    i
                };
                let slot = m.entry(i).or_default();
                if append && !int_append {
                    wasmsand_exec::raw::push_str(slot, &value)
                } else {
                    *slot = value
                }
            }
            Some(AssignKey::Key(k)) => {
                let m = match &mut var.value {
                    Value::Assoc(m) => m,
                    v => {
                        *v = Value::Assoc(crate::vars::AssocMap::new());
                        let Value::Assoc(m) = v else { unreachable!() };
                        m
                    }
                };
                let slot = m.slot(k);
                if append && !int_append {
                    wasmsand_exec::raw::push_str(slot, &value)
                } else {
                    *slot = value
                }
            }
        }
        // bash: a non-empty GLOBIGNORE turns `dotglob` on (an empty one leaves it as it is).
        if name == "GLOBIGNORE" && var.scalar_value().is_some_and(|v| !v.is_empty()) {
            self.st.opts.dotglob = true;
        }
        self.st.vars.put(name, var);
        if name == "BASH_XTRACEFD" && whole {
            self.xtrace_fd_assigned();
        }
        if name == "OPTIND" && whole {
            self.optind_assigned();
        }
        Ok(())
    }

    pub fn unset_var(&mut self, name: &str) -> Result<(), ShellError> {
        if let Some(v) = self.st.vars.get(name)
            && v.has(ATTR_READONLY)
        {
            return Err(ShellError::CannotUnset(name.to_string()));
        }
        if name == "PATH" {
            self.st.hashed.clear();
        }
        // bash: unsetting GLOBIGNORE turns `dotglob` off.
        if name == "GLOBIGNORE" {
            self.st.opts.dotglob = false;
        }
        if name == "BASH_XTRACEFD" {
            self.xtrace_reset();
        }
        if name == "OPTIND" {
            self.getopts_char = 0;
        }
        // A temporary binding unset shows what it hid, and is gone: the next unset reaches
        // the binding (or variable) under it, as bash peels its temporary scopes. One a
        // `local` took over is a local of the builtin's scope: unset there, it stays declared
        // (below); unset from a function called since, it is peeled the same way.
        let peel = self.top_temp_index(name).filter(|&i| {
            !self.temp_hidden[i].claimed || self.temp_hidden[i].depth < self.st.vars.frame_count()
        });
        if let Some(i) = peel {
            self.temp_hidden[i].unset = true;
            let hidden = self.temp_hidden[i].hidden.clone();
            match hidden {
                Some(v) => self.st.vars.put(name, v),
                None => {
                    self.st.vars.remove(name);
                }
            }
            return Ok(());
        }
        if self.is_local_here(name) {
            // A local stays declared (and shadowing) after unset, as in bash.
            if let Some(v) = self.st.vars.get_mut(name) {
                v.value = Value::Unset;
                v.attrs = 0;
                return Ok(());
            }
        }
        // A caller's local is popped, showing the binding it hid.
        if self.st.vars.unset_outer_local(name) {
            return Ok(());
        }
        self.st.vars.remove(name);
        Ok(())
    }

    /// The innermost `NAME=value cmd` binding of `name` still in force, if no function called
    /// since made a `local` of the name that hides it.
    fn top_temp_index(&self, name: &str) -> Option<usize> {
        self.temp_hidden
            .iter()
            .rposition(|t| t.name == name && !t.unset)
            .filter(|&i| !self.st.vars.local_since(name, self.temp_hidden[i].depth))
    }

    /// The `NAME=value cmd` binding `name` reads as now, unless a `local` took it over.
    fn visible_temp_index(&self, name: &str) -> Option<usize> {
        self.top_temp_index(name)
            .filter(|&i| !self.temp_hidden[i].claimed)
    }

    /// Whether `name` is local to the innermost function, or to the scope of a builtin's
    /// bindings made in it (`v=x eval 'local v'`).
    pub(crate) fn is_local_here(&self, name: &str) -> bool {
        self.st.vars.is_local_here(name)
            || self.top_temp_index(name).is_some_and(|i| {
                let t = &self.temp_hidden[i];
                t.claimed && t.depth == self.st.vars.frame_count()
            })
    }

    /// `local name` without a value: bash starts it with the value of a temporary binding it
    /// would hide (`v=x f` where f runs `local v`). Made in the scope of the function that
    /// binding was for, it replaces the binding, so an `unset` from a callee shows what the
    /// binding hid.
    pub(crate) fn make_local_var(&mut self, name: &str, with_value: bool) {
        let frames = self.st.vars.frame_count();
        if self.is_local_here(name) && !self.st.vars.is_local_here(name) {
            return;
        }
        let idx = self.visible_temp_index(name);
        // A binding made in this same function for a builtin (`v=x eval 'local v=y'`) is
        // taken over by the local, value and export attribute included: bash makes the local
        // in the builtin's scope, so it ends with the builtin, hides the function's own local
        // of the name, and never outlives the function.
        if let Some(i) = idx
            && self.temp_hidden[i].depth == frames
            && !self.temp_hidden[i].for_function
        {
            self.temp_hidden[i].claimed = true;
            return;
        }
        let already_local = self.st.vars.is_local_here(name);
        let visible = self.st.vars.get(name).cloned();
        self.st.vars.make_local(name);
        let Some(i) = idx else {
            return;
        };
        let t = &mut self.temp_hidden[i];
        if already_local {
            return;
        }
        if t.for_function && t.depth + 1 == frames {
            // The binding is gone, replaced by the local: an unset after the local's reaches
            // what the binding hid, and the call's end restores nothing of it.
            t.unset = true;
            let hidden = t.hidden.clone();
            self.st.vars.set_saved(name, hidden);
        }
        if !with_value && let Some(v) = visible {
            self.st.vars.put(
                name,
                Var {
                    value: v.value,
                    attrs: v.attrs & ATTR_EXPORT,
                },
            );
        }
    }

    // ---- programs ----

    /// Adds `name`'s program path to the `hash` table.
    pub(crate) fn remember_path(&mut self, name: &str, path: &str, hits: u32) {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        self.st.hashed.insert(
            name.to_string(),
            Hashed {
                path: path.to_string(),
                hits,
                seq: SEQ.fetch_add(1, Ordering::Relaxed),
            },
        );
    }

    /// Whether `path` (from the working directory) is a directory.
    pub(crate) fn is_dir(&self, path: &str) -> bool {
        let full = wasmsand_vfs::path::join(&self.st.cwd, path);
        self.rt
            .vfs
            .lock()
            .stat(&full)
            .is_ok_and(|m| m.file_type == wasmsand_vfs::FileType::Dir)
    }

    /// Resolves a command name to a program file in the VFS through `$PATH`.
    pub fn find_in_path(&self, name: &str) -> Option<String> {
        self.find_in(name, None)
    }

    /// As [`Self::find_in_path`], with `path` instead of `$PATH` (`PATH=... cmd`).
    pub fn find_in(&self, name: &str, path: Option<&str>) -> Option<String> {
        let path = path
            .map(str::to_string)
            .or_else(|| self.get_var("PATH"))
            .unwrap_or_default();
        let vfs = self.rt.vfs.lock();
        // As bash: the first executable file, else the first plain file (`type` shows it,
        // running it is "Permission denied").
        let mut fallback = None;
        for dir in path.split(':') {
            let dir = if dir.is_empty() { "." } else { dir };
            let full = wasmsand_vfs::path::join(&self.st.cwd, &format!("{dir}/{name}"));
            if let Ok(m) = vfs.stat(&full)
                && m.file_type == wasmsand_vfs::FileType::File
            {
                if m.mode & 0o111 != 0 {
                    return Some(full);
                }
                fallback.get_or_insert(full);
            }
        }
        fallback
    }

    /// The compiled program for a wasm file's contents. Guest files share their bytes with
    /// the embedded modules, so the buffer's address identifies them without hashing 4 MB
    /// per run; the cache holds a clone of each buffer, so an address cannot be reused.
    pub fn program_for(&mut self, data: &bytes::Bytes) -> Result<Program, ShellError> {
        let key = (data.as_ptr() as usize, data.len());
        if let Some((_, p)) = programs().lock().get(&key) {
            return Ok(p.clone());
        }
        let started = Instant::now();
        let p = self
            .rt
            .exec
            .load(data)
            .map_err(|e| ShellError::Load(e.to_string()))?;
        // A memory hit takes microseconds; anything slow was a compile or a disk load.
        if started.elapsed() > std::time::Duration::from_millis(20) {
            self.rt
                .compile_nanos
                .fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
        let mut cache = programs().lock();
        if cache.len() >= 256 {
            cache.clear();
        }
        cache.insert(key, (data.clone(), p.clone()));
        Ok(p)
    }

    /// Runs a WASI program with the shell's descriptors 0-2.
    pub fn run_program(
        &mut self,
        program: &Program,
        argv: Vec<String>,
        env: Vec<(String, String)>,
    ) -> FlowResult<i32> {
        self.check()?;
        self.count_process()?;
        let stdout = self.fds.output(1).unwrap_or(Output::Null);
        let stderr = self.fds.output(2).unwrap_or(Output::Null);
        let name = argv.first().cloned().unwrap_or_default();
        let entry = crate::reactor::prepare(program, argv, &env, &self.st.cwd);
        // Only a guest that can call the host gets the spawn door: forking the shell for it
        // costs a copy of the shell's state, which no other program should pay.
        let tool_channel = if program.imports_function("host", "call") {
            Some(crate::spawn::channel(
                Box::new(ShellSpawner(Mutex::new(self.fork()))),
                self.rt.tool_channel.clone(),
            ))
        } else {
            None
        };
        let spec = RunSpec {
            args: entry.argv,
            env,
            cwd: self.st.cwd.clone(),
            vfs: self.rt.vfs.clone(),
            stdin: self.fds.input(0),
            stdout,
            stderr,
            deadline: self.rt.deadline(),
            cancel: self.cancel_token(),
            memory_limit: self.rt.memory_limit,
            tool_channel,
            entry: entry.function,
            entry_input: entry.input,
            // `ulimit -n` lowers the sandbox's cap for the programs this shell starts, as
            // RLIMIT_NOFILE is inherited; it never raises it.
            open_files: self.rt.open_files.clone().map(|mut o| {
                if let Some(n) = self.ulimit_value('n', false) {
                    o.per_program = o.per_program.min(n);
                }
                o
            }),
        };
        let ran = self.rt.exec.run(program, spec);
        if let Ok(outcome) = &ran {
            self.usage.add(outcome);
        }

        match ran {
            Ok(outcome) => match outcome.exit {
                Exit::Code(c) => Ok(c),
                Exit::TimedOut => {
                    self.rt.set_abort(Abort::Timeout);
                    Err(Flow::Abort(Abort::Timeout))
                }
                Exit::Cancelled => {
                    self.check()?;
                    self.rt.set_abort(Abort::Cancelled);
                    Err(Flow::Abort(Abort::Cancelled))
                }
                e @ Exit::OutOfMemory(_) => {
                    self.err(&format!("{name}: out of memory (memory limit exceeded)"));
                    Ok(e.status())
                }
                Exit::Trap(msg) => {
                    self.err(&format!("{name}: program crashed: {msg}"));
                    Ok(134)
                }
            },
            Err(e) => {
                self.err(&format!("{name}: {e}"));
                Ok(126)
            }
        }
    }

    pub fn count_process(&mut self) -> FlowResult<()> {
        let n = self.rt.processes.fetch_add(1, Ordering::SeqCst) + 1;
        self.usage.processes.fetch_add(1, Ordering::Relaxed);
        if n > self.st.limits.max_processes {
            return Err(self.limit(format!(
                "fork: too many processes in one run (limit: {})",
                self.st.limits.max_processes
            )));
        }
        Ok(())
    }

    pub fn next_pid(&self) -> u32 {
        self.rt.next_pid.fetch_add(1, Ordering::SeqCst)
    }
}

/// The spawn door's commands run by the shell that started the guest: each in a fork of it
/// as it was then, with the guest's descriptors.
struct ShellSpawner(Mutex<Interp>);

impl crate::spawn::Spawner for ShellSpawner {
    fn spawn(&self, argv: Vec<String>, cwd: Option<&str>) -> Result<i32, crate::spawn::Refusal> {
        use crate::spawn::Refusal;
        let mut child = self.0.lock().fork();
        if let Some(dir) = cwd {
            let dir = wasmsand_vfs::path::join(&child.st.cwd, dir);
            if !child.is_dir(&dir) {
                return Err(Refusal {
                    kind: "cwd",
                    message: format!("{dir}: No such file or directory"),
                });
            }
            child.st.cwd = dir.clone();
            child.st.vars.put(
                "PWD",
                Var {
                    value: Value::Str(dir),
                    attrs: ATTR_EXPORT,
                },
            );
        }
        // As a failed execvp: nothing runs, and the caller reports it in its own words.
        let name = &argv[0];
        let found = if name.contains('/') {
            let path = wasmsand_vfs::path::join(&child.st.cwd, name);
            child.rt.vfs.lock().stat(&path).is_ok()
        } else {
            child.st.functions.contains_key(name)
                || child.builtin_enabled(name)
                || child.find_in_path(name).is_some()
        };
        if !found {
            return Err(Refusal {
                kind: "noent",
                message: "No such file or directory".into(),
            });
        }
        // Its own thread: the guest that asked is mid-call on this one, inside its store, and
        // a second instance must not run nested in that store's frames.
        let ran = wasmsand_exec::threads::spawn(THREAD_STACK, move || {
            child.run_as_subshell(|c| c.run_argv(argv))
        })
        .map(|h| h.join());
        match ran {
            Ok(Ok(status)) => Ok(status),
            Ok(Err(_)) => Err(Refusal {
                kind: "crashed",
                message: "spawn: the command's thread panicked".into(),
            }),
            Err(e) => Err(Refusal {
                kind: "limit",
                message: format!("fork: {e}"),
            }),
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) enum AssignKey {
    Index(i64),
    Key(String),
}

pub(crate) fn apply_case_attrs(attrs: u8, value: String) -> String {
    if attrs & crate::vars::ATTR_CAPCASE == crate::vars::ATTR_CAPCASE {
        let mut chars = value.chars();
        match chars.next() {
            Some(first) => first
                .to_uppercase()
                .chain(chars.flat_map(char::to_lowercase))
                .collect(),
            None => value,
        }
    } else if attrs & crate::vars::ATTR_LOWER != 0 {
        value.to_lowercase()
    } else if attrs & crate::vars::ATTR_UPPER != 0 {
        value.to_uppercase()
    } else {
        value
    }
}

pub(crate) fn write_output(o: &Output, data: &[u8]) -> Result<(), ShellError> {
    match o {
        Output::Null => Ok(()),
        Output::Buffer(b) => {
            b.write(data);
            Ok(())
        }
        Output::Pipe(p) => p.write_all(data).map_err(|e| ShellError::io(&e)),
        Output::File(f) => f.write(data).map_err(|e| ShellError::Fs(e.errno)),
    }
}

/// The wall clock as the run's programs see it: the sandbox's virtual clock in deterministic
/// mode (what `date` reads), else the host's. Nanoseconds since the Unix epoch.
pub(crate) fn wall_clock_ns(vfs: &SharedVfs) -> u64 {
    let det = vfs.lock().deterministic();
    match det {
        Some(d) => d.lock().unwrap_or_else(|e| e.into_inner()).now_ns(),
        None => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
    }
}

/// `$RANDOM`'s source: the sandbox's deterministic stream when it is in deterministic mode.
fn random_from(vfs: &SharedVfs) -> u32 {
    let det = vfs.lock().deterministic();
    match det {
        Some(d) => d.lock().unwrap_or_else(|e| e.into_inner()).next_u32(),
        None => random_u32(),
    }
}

pub(crate) fn random_u32() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.finish() as u32
}
