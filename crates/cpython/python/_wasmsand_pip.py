"""`pip` in the sandbox: the real pip (its wheel, pinned by the build), set up for WASI.

- Packages go to the user site (`~/.local/lib/python3.X/site-packages`, pip's "Defaulting to
  user installation"), the one writable place on the interpreter's path: every later run,
  fork and export of the sandbox sees them.
- Only wheels are installed (`PIP_ONLY_BINARY=:all:`): a sandbox has no compiler and no
  subprocesses to build a source distribution. Of wheels, the interpreter takes pure-Python
  ones (`py3-none-any` and the like); a project that publishes only wheels for other
  platforms, or only sources, is named in an error that says so.
- Downloads go through the sandbox's network door, under its egress policy
  (`--index-url`/`PIP_INDEX_URL` must name an allowed host); no cache is kept (the cache would
  count against the sandbox's file and byte limits), no progress bar is drawn (it needs a
  thread), no version check is made, and certificates are verified by the host (pip's
  truststore needs OpenSSL).
"""

import glob
import os
import site
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def _wheel():
    found = sorted(glob.glob(os.path.join(os.path.dirname(HERE), "pip-*.whl")))
    if not found:
        raise SystemExit("pip is not installed in this sandbox's image")
    return found[-1]


def _explain_missing():
    """Adds to pip's "No matching distribution" the reason a project has nothing for us."""
    import logging

    from pip._internal.index import package_finder as pf
    from pip._internal.resolution.resolvelib.factory import Factory
    from pip._internal.utils.compatibility_tags import get_supported
    from pip._vendor.packaging.utils import canonicalize_name

    skipped = {}
    evaluate = pf.LinkEvaluator.evaluate_link

    def evaluate_link(self, link):
        result = evaluate(self, link)
        kind, name = result[0], link.filename
        wheel = name.endswith(".whl")
        sdist = name.endswith((".tar.gz", ".zip", ".tar.bz2", ".tgz", ".tar"))
        if (kind == pf.LinkType.platform_mismatch and wheel) or (
            kind == pf.LinkType.format_unsupported and sdist
        ):
            project = canonicalize_name(self.project_name)
            skipped.setdefault(project, {}).setdefault(kind, name)
        return result

    pf.LinkEvaluator.evaluate_link = evaluate_link
    logger = logging.getLogger("pip._internal.wasmsand")
    report = Factory._report_single_requirement_conflict

    def report_single_requirement_conflict(self, req, parent):
        error = report(self, req, parent)
        seen = skipped.get(canonicalize_name(req.project_name), {})
        if pf.LinkType.platform_mismatch in seen:
            logger.error(
                "%s has only wheels built for other platforms (such as %s): this sandbox's "
                "Python (CPython %d.%d on WASI, %s) installs pure-Python wheels (py3-none-any) "
                "only",
                req.project_name,
                seen[pf.LinkType.platform_mismatch],
                sys.version_info[0],
                sys.version_info[1],
                get_supported()[0].platform,
            )
        elif pf.LinkType.format_unsupported in seen:
            logger.error(
                "%s publishes only source distributions (such as %s) for the versions asked: "
                "this sandbox cannot build packages (no compiler, no subprocesses), it installs "
                "pure-Python wheels only",
                req.project_name,
                seen[pf.LinkType.format_unsupported],
            )
        return error

    Factory._report_single_requirement_conflict = report_single_requirement_conflict


def _writable_by_trying():
    """pip asks `os.access(dir, W_OK)` whether site-packages is writable; under WASI that
    answers from the preopened root's rights, not the directory's, and the sandbox refuses
    writes outside its writable paths only when one is tried. So try one, as pip does on
    Windows, and pip then defaults to the user site as it does for a system Python."""
    from pip._internal.commands import install
    from pip._internal.utils import filesystem

    def test_writable_dir(path):
        while not os.path.isdir(path):
            parent = os.path.dirname(path)
            if parent == path:
                break
            path = parent
        probe = os.path.join(path, ".wasmsand-pip-probe-%d" % os.getpid())
        try:
            fd = os.open(probe, os.O_RDWR | os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            return True
        except OSError:
            return False
        os.close(fd)
        os.unlink(probe)
        return True

    filesystem.test_writable_dir = test_writable_dir
    install.test_writable_dir = test_writable_dir


def _tls_by_the_host():
    """pip takes TLS to be missing when `_ssl` is, and warns that https:// indexes cannot be
    used; here the host does TLS for it (this directory's `ssl`). (Its user agent also reads
    `_ssl`, and keeps saying there is none.)"""
    from pip._internal.models import search_scope

    search_scope.has_tls = lambda: True


def main(argv=None):
    sys.path.insert(0, _wheel())
    # CPython gives WASI no user base (site._getuserbase), so no user site, unless
    # PYTHONUSERBASE names one; this is the directory the shell's prelude puts on `sys.path`.
    base = os.environ.setdefault(
        "PYTHONUSERBASE", os.path.join(os.environ.get("HOME") or "/", ".local")
    )
    site.USER_BASE = base
    site.USER_SITE = None
    site.ENABLE_USER_SITE = True
    # Scripts pip writes start with sys.executable; the build's own path is not in the tree.
    sys.executable = "/usr/local/bin/python3"
    # WASI has no users and no umask; pip reads both. The sandbox's user is 1000 (`id`), and
    # its shell's umask 022.
    for name in ("getuid", "geteuid", "getgid", "getegid"):
        if not hasattr(os, name):
            setattr(os, name, lambda: 1000)
    if not hasattr(os, "umask"):
        os.umask = lambda mask: 0o022
    for key, value in (
        ("PIP_DISABLE_PIP_VERSION_CHECK", "1"),
        ("PIP_PROGRESS_BAR", "off"),
        ("PIP_NO_CACHE_DIR", "1"),
        ("PIP_ONLY_BINARY", ":all:"),
        ("PIP_USE_DEPRECATED", "legacy-certs"),
        ("PIP_NO_INPUT", "1"),
    ):
        os.environ.setdefault(key, value)
    _explain_missing()
    _writable_by_trying()
    _tls_by_the_host()
    from pip._internal.cli.main import main as pip_main

    return pip_main(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.argv[0] = "pip"
    sys.exit(main())
