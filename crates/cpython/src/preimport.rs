//! The snapshot's pre-initialized memory: numpy imported once per process, which every run of
//! `python3` then starts from (see `wasmsand_exec::Preinit` for the mechanism).

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use wasmsand_exec::{Preinit, RunSpec};
use wasmsand_vfs::{Vfs, VfsOptions};

/// Runs in the interpreter as the wheel's session `turn` does: 0 if it returned, the code of
/// a `SystemExit` otherwise. Everything it names is local to a function that is deleted: the
/// turn's namespace is not any run's `__main__`, but nothing of it is left either.
///
/// - The capture refuses (exit 2) if the import left a descriptor open: a later run's fresh
///   WASI table would not have it.
/// - It checks (exit 3) that nothing seeded from entropy at import time is in memory: the
///   `random` module and `numpy.random` (whose global generator seeds itself on import) are
///   not imported by `import numpy`; were they, every run would draw the same numbers.
/// - A collection and `gc.freeze()` last: the imported objects are moved out of the
///   collector's generations, so a run's collections do not walk (and so copy the pages of)
///   numpy's hundred thousand objects.
///
/// It puts the project's modules ([`crate::SUPPORT_DIR`]) on `sys.path` and imports the network
/// door's sockets (`_wasmsand_net`) once, here, rather than in every run.
///
/// It also leaves one name in the turn's namespace, `_wasmsand_run(argv0, args, env)`: the
/// command-line prelude the shell sends as each run's turn (`crates/shell/src/reactor.rs`,
/// which describes what it does), compiled here once instead of in every run (compiling the
/// prelude's source was a quarter of a `print(1)` run). A run's turn is then one call.
const SOURCE: &str = r#"
def _wasmsand_prelude():
    import os, sys, linecache, _reactor, atexit, gc, io, site
    writers = (io.TextIOWrapper, io.BufferedWriter, io.BufferedRandom)
    sys.path.insert(0, SUPPORT_DIR)
    import _wasmsand_net
    user_site = '.local/lib/python%d.%d/site-packages' % sys.version_info[:2]
    def run(argv0, a, env):
        os.environ.clear()
        os.environ.update(env)
        linecache._interactive_cache.clear()
        os.chdir(os.environ.get('PWD') or '/')
        i = 0
        while i < len(a) and a[i].startswith('-') and a[i] not in ('-', '-c', '-m'):
            i += 2 if a[i] == '-X' else 1
        t = a[i] if i < len(a) else '-'
        sys.path.insert(0, '' if t in ('-', '-c') else os.getcwd() if t == '-m' else os.path.dirname(os.path.abspath(t)))
        if t == '-m' and a[i + 1:i + 2] == ['pip']:
            a = [*a[:i + 1], '_wasmsand_pip', *a[i + 2:]]
        p = os.environ.get('PYTHONPATH')
        if p:
            sys.path[1:1] = [d for d in p.split(':') if d]
        u = os.path.join(os.environ.get('HOME') or '/', user_site)
        if os.path.isdir(u):
            site.addsitedir(u)
        r = _reactor.run([argv0, *a], dict(os.environ))
        atexit._run_exitfuncs()
        for f in [*gc.get_objects(), sys.stdout, sys.stderr]:
            if isinstance(f, writers):
                try:
                    f.flush()
                except Exception:
                    pass
        os._exit(r if isinstance(r, int) else 1)
    return run
_wasmsand_run = _wasmsand_prelude()
del _wasmsand_prelude

def _preimport():
    import os, sys, gc
    def descriptors():
        open_ = set()
        for fd in range(256):
            try:
                os.fstat(fd)
            except OSError:
                continue
            open_.add(fd)
        return open_
    before = descriptors()
    import numpy
    if descriptors() != before:
        raise SystemExit(2)
    if any(m in sys.modules for m in ("random", "numpy.random", "secrets", "uuid", "tempfile")):
        raise SystemExit(3)
    gc.collect()
    gc.freeze()
_preimport()
del _preimport
"#;

/// The capture's environment.
pub(crate) const ENV: [(&str, &str); 3] = [
    ("HOME", "/home/user"),
    ("TMPDIR", "/tmp"),
    ("LANG", "C.UTF-8"),
];

/// `depends`: what the capture reads besides the module and [`SOURCE`] (see
/// `wasmsand_exec::Preinit::depends`).
pub(crate) fn register(digest: [u8; 32], depends: Option<Vec<u8>>) {
    wasmsand_exec::register_preinit(
        digest,
        Preinit {
            spec: Box::new(spec),
            alloc: "host_alloc".into(),
            entry: "turn".into(),
            input: SOURCE
                .replace("SUPPORT_DIR", &format!("{:?}", crate::SUPPORT_DIR))
                .into_bytes(),
            run: None,
            depends,
        },
    );
}

/// A sandbox's default filesystem and environment, with nothing of any user's.
fn spec() -> RunSpec {
    let mut vfs = Vfs::with_standard_layout(VfsOptions::default());
    if let Err(e) = vfs.layout(crate::install) {
        tracing::warn!("cannot lay out the pre-import filesystem: {e}");
    }
    let mut spec = RunSpec::new(Arc::new(Mutex::new(vfs)), ["python3"]);
    spec.env = ENV.map(|(k, v)| (k.into(), v.into())).to_vec();
    spec.deadline = Some(Instant::now() + Duration::from_secs(120));
    spec
}
