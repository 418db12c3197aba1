#!/usr/bin/env python3
"""Measure how faithfully the sandbox's tools behave on the tools' own upstream test suites.

A benchmark, not a CI test. The suites are upstream's text and are NOT part of this repository:
fetch them yourself (jq: github.com/jqlang/jq, its tests/ directory; BusyBox:
github.com/mirror/busybox, its testsuite/ directory; Oils: github.com/oils-for-unix/oils, its
spec/ directory, e.g. `git archive HEAD spec | tar -x -C /tmp/upstream/oils` from a clone, with
`git rev-parse HEAD > /tmp/upstream/oils/COMMIT` if the copy is not a git work tree; brush:
github.com/reubeno/brush, its brush-shell/tests/cases/ directory, the same way) and point
`record` at the checkouts. The expected results are recorded from the real programs on this
machine, so everything recorded lives under target/upstream-suites/ (git-ignored):

    scripts/upstream-suites.py record --jq /tmp/upstream/jq --busybox /tmp/upstream/busybox \
        --oils /tmp/upstream/oils --brush /tmp/upstream/brush
    scripts/upstream-suites.py run [--suite oils] [--tool sed] [--case SUBSTRING] [--bin PATH] \
        [-v]

(`--suite` may be repeated; `--tool` is a tool's name, for oils a spec file's stem such as
var-op-len.)

record
  jq       Every case of tests/*.test (jq's --run-tests format) is run with the host's
           /usr/bin/jq (Debian's jq 1.6) as `jq -c PROGRAM` with the input line on stdin (cases
           that import modules get `-L modules`, a copy of tests/modules). Only the cases jq 1.6
           passes by the rules of jq's own runner (each output equal as a JSON value, no more,
           no fewer; %%FAIL: a compile error with the given message) are kept, and jq 1.6's exact
           stdout and exit status become the reference.
  busybox  For each applet this project ships (wasm-tools/commands.txt, plus the shell builtins
           echo, printf, test and [), its testsuite/APPLET.tests runs under the host's bash, in a
           copy of testsuite/, with a replacement testing.sh whose `testing` records, at each
           call: the five arguments as the shell evaluated them, the files of the copy that
           differ from the pristine one (so setup commands between calls are kept), the stdin
           and `input` bytes as `echo -ne` makes them, the shell functions and variables the
           command refers to, the locale variables and umask; then runs the command with the
           host's GNU tools exactly as testing.sh does (`echo -ne "$5" | eval "$2" > actual`) and
           records GNU's stdout and exit status as the reference (BusyBox's own EXPECTED argument
           is kept too, but results are judged against GNU; awk is gawk). Old-style tests
           (testsuite/APPLET/NAME, a shell snippet run with `set -e` in a fresh directory) are
           recorded the same way; they pass when they exit 0 (ones that fail with GNU are
           skipped). Every file is recorded twice: cases whose output differs between the two
           runs, or whose reference shows the current date or time, are tagged and skipped.
  oils     The Oils shell spec suite measures the sandbox's shell against GNU bash (/bin/bash,
           5.2 here). Files spec/*.test.sh whose `## compare_shells:` names bash (or bash-4.4)
           are parsed exactly as test/sh_spec.py parses them (`#### NAME` starts a case; its
           code is the lines that are not `##` annotations, comment lines never count;
           `## STDOUT:` ... `## END` blocks; OK/BUG/N-I qualifiers naming shells). bash's
           expectation is the unqualified annotations, each kind (stdout, status) replaced by a
           qualified one that names bash; with no status the case must exit 0; stderr
           annotations are not checked. Each case runs as sh_spec.py runs it: `bash` with the
           code on stdin, cwd a fresh $TMP (_tmp/spec-tmp/FILE/NN-bash under the work path,
           with _tmp/ in it for legacy_tmp_dir files), environment exactly PATH=spec/bin:
           /usr/local/bin:/usr/bin:/bin, LC_ALL=C.UTF-8, REPO_ROOT, TMP, SH=/bin/bash and
           HOME=$TMP; 10 s timeout. The work copy holds only spec/testdata and spec/bin; the
           python2 helpers in spec/bin (argv.py, printenv.py, ...) are replaced, for the host
           and the sandbox alike, by python3 ports that print byte for byte what python2 does
           (code that runs python2 itself fails on both sides and is dropped). Only the cases
           bash passes are kept, with bash's exact stdout and exit status as the reference
           (killed by signal N: 128+N). Every file is recorded twice: cases whose output
           differs, or shows the current date/time or the process id of bash or of its parent,
           are tagged and skipped; oils.json lists the dropped cases with the reason.
  brush    The brush shell's compatibility cases (brush-shell/tests/cases/compat/**/*.yaml),
           which brush's harness compares with bash, measure the sandbox's shell against GNU
           bash the way that harness runs bash: `bash --norc --noprofile ARGS` (a case may drop
           a default argument) with the case's `stdin` as input, an environment of exactly
           LC_ALL=C, PS1='test$ ', PATH=/usr/local/bin:/usr/bin:/bin, the case's variables and
           its HOME, in a fresh directory (BRUSH_WORK/FILE/NNN) holding the file's common test
           files and the case's own. Cases brush skips, that need a terminal, that are checked
           against a fixed expectation instead of bash, that copy files from brush's tree, or
           whose bash version bounds exclude 5.2.15 are dropped (brush.json lists them with the
           reason); `known_failure` (brush's own failures) is ignored, as bash is the reference.
           bash's stdout and exit status are the reference; every case is recorded twice and
           tagged skip when the runs differ or show the time or a pid. brush's harness runs
           bash and the shell it tests as one user on one machine; so that the prompt escapes
           for user, host and uid, $EUID, ~ and `ulimit -n` mean the same on both sides, bash
           is recorded (as root, in new UTS and mount namespaces) as the sandbox's user: uid
           1000 `user`, host
           `sandbox`, home /home/user, 1024 open files (--host-identity: as the recording
           user). `run` compares as brush's harness does, leaving out what a case's
           ignore_stdout / ignore_whitespace / ignore_exit_status say; --strict compares
           stdout and exit status of every case.

run
  Replays each recorded case in the sandbox through one long-lived `e2e-sandboxd` JSON-RPC
  process: the root sandbox gets the testsuite copy (and jq's modules) once; each BusyBox case
  runs in a fork of it, with the recorded files written in, `input` and `expected` written like
  testing.sh does, and `eval "$CMD" > actual` run with the recorded stdin bytes. The root
  sandbox gets the Oils spec/testdata and spec/bin too; each Oils case runs in a fork, in its
  $TMP, as `env -i PATH=... bash` with the case's code as stdin bytes (a brush case: `env -i
  ... bash ARGS` in its directory, its files written in first; bash's stdout comes back
  as the RPC's text; when that has a U+FFFD, which may stand for invalid UTF-8, the case runs
  again in a new fork with bash's stdout redirected to a file, whose bytes count). stdout bytes
  and exit status are compared with the reference (jq: exact text, and JSON-value equality
  reported separately); an old-style test passes when it exits 0. Each run writes every failure
  (also of a filtered run) to target/upstream-suites/results.json. The sandbox runs in its
  deterministic mode (seeded randomness: e.g. awk's `for (k in a)` order is the same in every
  run; a virtual clock) unless --no-deterministic.

Host prerequisites for `record`: Debian's jq 1.6 at /usr/bin/jq, gawk, uudecode (sharutils),
which some BusyBox tests use to unpack their archives, and tree: apt-get install -y jq gawk
sharutils tree. A case whose tool the host lacks is recorded as skipped. Oils: bash and
/usr/bin/python3 (for the helper ports), nothing else.

Both the host recording and the sandbox use the same absolute work path
(/tmp/upstream-suites.work; for Oils, /tmp/upstream-suites.oils, which is $REPO_ROOT), so paths
that the .tests scripts expand into their commands, or that the Oils cases print, mean the same
thing in both.
"""

from __future__ import annotations

import argparse
import base64
import collections
import datetime
import difflib
import hashlib
import json
import os
import queue
import re
import shlex
import shutil
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "target" / "upstream-suites"
WORK = "/tmp/upstream-suites.work"  # the same absolute path on the host and in the sandbox
BB_DIR = WORK + "/testsuite"
BB_BINDIR = WORK + "/bindir"
JQ_DIR = WORK + "/jq"
SHIM_DIR = WORK + "/shim"
OILS_WORK = "/tmp/upstream-suites.oils"  # the Oils checkout's root ($REPO_ROOT), same on both
OILS_SPEC = OILS_WORK + "/spec"  # spec/testdata and spec/bin only
OILS_TMP = OILS_WORK + "/_tmp/spec-tmp"  # each case's $TMP and cwd: FILE/NN-bash
OILS_CAPTURE = OILS_WORK + "/stdout"  # run: bash's stdout, when the RPC's text cannot carry it
BRUSH_WORK = "/tmp/upstream-suites.brush"  # each case's cwd: FILE-STEM/NNN, same on both
BRUSH_PATH = "/usr/local/bin:/usr/bin:/bin"
BRUSH_BASH_VERSION = (5, 2, 15)
# Who the sandbox says its programs run as. brush's harness runs bash and the shell under test
# side by side as one user on one machine, so bash is recorded as this identity too: a prompt's
# \u, \h and \$, $EUID, `~` of a user without HOME and `ulimit -n` then mean the same in both.
SANDBOX_IDENTITY = {"user": "user", "uid": 1000, "host": "sandbox", "home": "/home/user",
                    "nofile": 1024}
DEFAULT_BIN = REPO / "target" / "debug" / "e2e-sandboxd"

# The sandbox's own environment (`env` in a fresh sandbox); the host recording runs with the same.
SANDBOX_ENV = {
    "HOME": "/home/user",
    "HOSTNAME": "sandbox",
    "LANG": "C.UTF-8",
    "LOGNAME": "user",
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "SHELL": "/bin/bash",
    "TERM": "dumb",
    "TMPDIR": "/tmp",
    "USER": "user",
}
LOCALE_VARS = ["LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_COLLATE", "LC_MESSAGES",
               "LC_NUMERIC", "LC_TIME", "TZ", "POSIXLY_CORRECT"]
BUILTIN_APPLETS = {"echo", "printf", "test", "["}
SUITES = ("jq", "busybox", "oils", "brush")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def unb64(s: str) -> bytes:
    return base64.b64decode(s)


def text(data: bytes) -> str:
    return data.decode("utf-8", "backslashreplace")


def sh_quote(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"


def host_env(**extra: str) -> dict:
    env = dict(SANDBOX_ENV)
    env["PATH"] = SHIM_DIR + ":" + env["PATH"]
    env.update(extra)
    return env


def git_head(src: Path) -> str:
    try:
        return subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        f = src / "COMMIT"
        return f.read_text().strip() if f.exists() else "unknown"


def shipped_commands() -> list[str]:
    names = []
    for line in (REPO / "wasm-tools" / "commands.txt").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            names.append(line.split()[0])
    return names


def make_shims() -> None:
    """`awk` means gawk for recording (the reference awk is GNU's)."""
    os.makedirs(SHIM_DIR, exist_ok=True)
    gawk = shutil.which("gawk")
    if not gawk:
        sys.exit("gawk is needed to record awk's reference: apt-get install -y gawk")
    link = Path(SHIM_DIR) / "awk"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(gawk)


# --------------------------------------------------------------------------------------------
# JSON values (jq's runner compares each output as a value: numbers as doubles, keys unordered)

_DEC = json.JSONDecoder(parse_int=float, parse_constant=float)


def json_values(s: str) -> list:
    vals, i, n = [], 0, len(s)
    while True:
        while i < n and s[i] in " \t\r\n":
            i += 1
        if i >= n:
            return vals
        v, i = _DEC.raw_decode(s, i)
        vals.append(v)


def json_equal(a: str, b: str) -> bool:
    try:
        return json_values(a) == json_values(b)
    except ValueError:
        return False


# --------------------------------------------------------------------------------------------
# jq: parse and record


def parse_jq_tests(path: Path):
    """Cases of a jq .test file, read as src/jq_test.c reads them."""
    lines = path.read_text(encoding="utf-8", errors="surrogateescape").split("\n")
    if lines and lines[-1] == "":
        lines.pop()

    def skip(line: str) -> bool:
        s = line.lstrip(" \t")
        return s == "" or s.startswith("#")

    i, must_fail, check_msg = 0, False, False
    while i < len(lines):
        line = lines[i]
        i += 1
        if skip(line):
            continue
        if line in ("%%FAIL", "%%FAIL IGNORE MSG"):
            must_fail, check_msg = True, line == "%%FAIL"
            continue
        prog, lineno = line, i
        if must_fail:
            msgs = []
            while i < len(lines) and not skip(lines[i]):
                msgs.append(lines[i])
                i += 1
            yield {"kind": "fail", "line": lineno, "program": prog,
                   "messages": msgs if check_msg else None}
            must_fail = check_msg = False
            continue
        if i >= len(lines):
            break
        inp = lines[i]
        i += 1
        exp = []
        while i < len(lines) and not skip(lines[i]):
            exp.append(lines[i])
            i += 1
        yield {"kind": "ok", "line": lineno, "program": prog, "input": inp, "expected": exp}


JQ_MODULE_RE = re.compile(r'\b(import|include)\s*"|\b(modulemeta|get_search_list)\b')
JQ_TIME_RE = re.compile(r"\bnow\b")


def run_host_jq(args: list[str], stdin: bytes):
    try:
        r = subprocess.run(["/usr/bin/jq"] + args[1:], input=stdin, capture_output=True,
                           cwd=JQ_DIR, env=host_env(PAGER="less"), timeout=5)
    except subprocess.TimeoutExpired:
        return None
    return r.stdout, r.returncode, r.stderr


def record_jq(src: Path) -> dict:
    tests = src / "tests"
    if not tests.is_dir():
        sys.exit(f"{tests}: not a jq checkout (no tests/)")
    shutil.rmtree(JQ_DIR, ignore_errors=True)
    os.makedirs(JQ_DIR)
    if (tests / "modules").is_dir():
        shutil.copytree(tests / "modules", JQ_DIR + "/modules", symlinks=True)
    version = subprocess.run(["/usr/bin/jq", "--version"], capture_output=True,
                             text=True).stdout.strip()
    cases, dropped, per_file = [], [], {}
    for f in sorted(tests.glob("*.test")):
        kept = total = 0
        for c in parse_jq_tests(f):
            total += 1
            cid = f"{f.name}:{c['line']}"
            prog = c["program"]
            args = ["jq"] + (["-L", "modules"] if JQ_MODULE_RE.search(prog) else []) + ["-c", prog]
            stdin = (c["input"] + "\n").encode("utf-8", "surrogateescape") if c["kind"] == "ok" else b""
            r1 = run_host_jq(args, stdin)
            why = None
            if r1 is None:
                why = "jq 1.6 timed out"
            elif c["kind"] == "ok":
                out, rc, err = r1
                try:
                    exp = [_DEC.decode(e) for e in c["expected"]]
                except ValueError:
                    why = "expected output is not JSON to Python"
                else:
                    try:
                        got = json_values(out.decode("utf-8", "surrogateescape"))
                    except ValueError:
                        got = None
                    if got != exp:
                        why = "jq 1.6 output differs"
            else:
                out, rc, err = r1
                if rc != 3:
                    why = f"jq 1.6 compiled it (exit {rc})"
                elif c["messages"]:
                    want = "\n".join(c["messages"])
                    if want not in err.decode("utf-8", "replace"):
                        why = "jq 1.6 error message differs"
            if why:
                dropped.append({"id": cid, "program": prog, "why": why})
                continue
            kept += 1
            out, rc, err = r1
            skip = None
            r2 = run_host_jq(args, stdin)
            if r2 is None or r2[:2] != r1[:2]:
                skip = "nondeterministic: two jq 1.6 runs differ"
            elif JQ_TIME_RE.search(prog):
                skip = "time-dependent (now)"
            cases.append({
                "id": cid, "suite": "jq", "tool": "jq", "file": f.name, "line": c["line"],
                "kind": c["kind"], "program": prog, "input": c.get("input"),
                "expected_lines": c.get("expected") if c["kind"] == "ok" else c["messages"],
                "command": shlex.join(args), "cwd": JQ_DIR, "env": {"PAGER": "less"},
                "stdin_b64": b64(stdin),
                "ref": {"stdout_b64": b64(out), "exit": rc, "stderr": text(err)[:2000]},
                "skip": skip,
            })
        per_file[f.name] = {"cases": total, "kept": kept}
    save_base(JQ_DIR)
    return {"suite": "jq", "source": {"repo": "jqlang/jq", "commit": git_head(src)},
            "reference": f"{version} (/usr/bin/jq)", "recorded": now_iso(),
            "per_file": per_file, "dropped": dropped, "cases": cases}


# --------------------------------------------------------------------------------------------
# BusyBox: the replacement testing.sh and the recording


TESTING_SH = r'''# Replacement testing.sh written by scripts/upstream-suites.py: records every `testing` call.
export FAILCOUNT=0
export SKIP=
ECHO=echo
export ECHO
__US_HELPERS="testing optional busybox mkchroot dochroot __us_ctx"

busybox() { "$@"; }
mkchroot() { echo "mkchroot: not supported by the recorder" >&2; return 1; }
dochroot() { echo "dochroot: not supported by the recorder" >&2; return 1; }

optional()
{
	SKIP=
	while test "$1"; do
	    case $1 in
	    "!"*)
		case "${OPTIONFLAGS}" in
			*:${1#!}:*) SKIP=1; return;;
		esac
		shift
		;;
	    *)
		case "${OPTIONFLAGS}" in
			*:$1:*) ;;
			*) SKIP=1; return ;;
		esac
		shift
		;;
	    esac
	done
}

# NUL-separated records: F name body | V/X name value (X: exported) | E name value | U name | M umask
__us_ctx()
{
	local __w __p
	for __w in $(printf '%s\n' "$1" | grep -oE '[A-Za-z_][A-Za-z0-9_]*' | sort -u); do
		case " $__US_HELPERS " in *" $__w "*) continue;; esac
		if declare -F -- "$__w" >/dev/null 2>&1; then
			printf 'F\0%s\0%s\0' "$__w" "$(declare -f -- "$__w")"
		fi
	done
	for __w in $(printf '%s\n' "$1" | grep -oE '\$\{?[A-Za-z_][A-Za-z0-9_]*' | tr -d '${' | sort -u); do
		case $__w in
		PATH|HOME|PWD|OLDPWD|SHELL|USER|LOGNAME|TERM|RANDOM|LINENO|SECONDS|IFS|PPID|UID|EUID) continue;;
		HOSTNAME|SHLVL|BASH*|FUNCNAME|TMPDIR|LANG|LANGUAGE|LC_*|TZ|POSIXLY_CORRECT|NAME|RETVAL|__*) continue;;
		esac
		[ "${!__w+set}" = set ] || continue
		__p=$(declare -p -- "$__w" 2>/dev/null) || continue
		case $__p in "declare -a"*|"declare -A"*) continue;; esac
		if [[ $__p =~ ^declare\ -[a-zA-Z]*x ]]; then
			printf 'X\0%s\0%s\0' "$__w" "${!__w}"
		else
			printf 'V\0%s\0%s\0' "$__w" "${!__w}"
		fi
	done
	for __w in LANG LANGUAGE LC_ALL LC_CTYPE LC_COLLATE LC_MESSAGES LC_NUMERIC LC_TIME TZ POSIXLY_CORRECT; do
		__p=$(declare -p -- "$__w" 2>/dev/null)
		if [ "${!__w+set}" = set ] && [[ $__p =~ ^declare\ -[a-zA-Z]*x ]]; then
			printf 'E\0%s\0%s\0' "$__w" "${!__w}"
		else
			printf 'U\0%s\0' "$__w"
		fi
	done
	printf 'M\0%s\0' "$(umask)"
}

__us_n=0
testing()
{
  NAME="$1"
  [ -n "$1" ] || NAME="$2"

  if [ $# -ne 5 ]
  then
    echo "Test $NAME has wrong number of arguments: $# (must be 5)" >&2
    exit 1
  fi

  __us_n=$((__us_n + 1))
  local __d
  __d="$US_REC/$(printf %04d $__us_n)"
  mkdir -p "$__d"
  printf '%s' "$1" > "$__d/a1"
  printf '%s' "$2" > "$__d/a2"
  printf '%s' "$3" > "$__d/a3"
  printf '%s' "$4" > "$__d/a4"
  printf '%s' "$5" > "$__d/a5"
  pwd > "$__d/cwd"

  if [ -n "$SKIP" ]
  then
    : > "$__d/skipped"
    echo "SKIPPED: $NAME"
    return 0
  fi

  "$US_PY" -I -S "$US_SCRIPT" _snapshot "$__d/snap.json" || exit 1
  __us_ctx "$2" > "$__d/context"

  $ECHO -ne "$3" > expected
  $ECHO -ne "$4" > input
  cp expected "$__d/expected"
  cp input "$__d/input"
  $ECHO -ne "$5" > "$__d/stdin"
  $ECHO -ne "$5" | eval "$2" > actual 2> "$__d/stderr"
  RETVAL=$?
  cp actual "$__d/stdout"
  echo $RETVAL > "$__d/rc"

  if cmp expected actual >/dev/null 2>/dev/null
  then
    echo "PASS: $NAME"
  else
    FAILCOUNT=$(($FAILCOUNT + 1))
    echo "FAIL: $NAME"
  fi
  rm -f input expected actual

  return $RETVAL
}
'''

BUSYBOX_FN = 'busybox() { "$@"; }'


def walk_tree(root: str) -> dict:
    """path (relative) -> [kind, mode, sha256-or-target]"""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ["symlink", mode, os.readlink(p)]
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ["dir", mode, ""]
            elif stat.S_ISREG(st.st_mode):
                try:
                    with open(p, "rb") as fh:
                        h = hashlib.sha256(fh.read()).hexdigest()
                except OSError:
                    h = "unreadable"
                out[rel] = ["file", mode, h]
            else:
                out[rel] = ["special", mode, ""]
    return out


def snapshot_cmd(dest: str) -> None:
    """Called by the replacement `testing`: what differs in BB_DIR from the pristine copy."""
    base = json.loads(Path(os.environ["US_BASE"]).read_text())
    now = walk_tree(BB_DIR)
    entries, deleted = [], sorted(p for p in base if p not in now)
    for rel, (kind, mode, h) in now.items():
        if base.get(rel) == [kind, mode, h]:
            continue
        e = {"path": rel, "kind": kind, "mode": mode}
        if kind == "file":
            try:
                e["data_b64"] = b64(Path(BB_DIR, rel).read_bytes())
            except OSError:
                e["kind"], e["unreadable"] = "file", True
                e["data_b64"] = ""
        elif kind == "symlink":
            e["target"] = h
        entries.append(e)
    # a deleted directory's children need not be listed
    deleted = [d for d in deleted if os.path.dirname(d) not in deleted]
    Path(dest).write_text(json.dumps({"entries": entries, "deleted": deleted}))


def parse_context(data: bytes) -> dict:
    f = data.decode("utf-8", "surrogateescape").split("\0")
    ctx = {"functions": {}, "vars": [], "locale": {}, "umask": "0022"}
    i = 0
    while i < len(f) and f[i]:
        tag = f[i]
        if tag == "F":
            ctx["functions"][f[i + 1]] = f[i + 2]
            i += 3
        elif tag in ("V", "X"):
            ctx["vars"].append([f[i + 1], f[i + 2], tag == "X"])
            i += 3
        elif tag == "E":
            ctx["locale"][f[i + 1]] = f[i + 2]
            i += 3
        elif tag == "U":
            ctx["locale"][f[i + 1]] = None
            i += 2
        elif tag == "M":
            ctx["umask"] = f[i + 1]
            i += 2
        else:
            break
    return ctx


def build_prelude(ctx: dict) -> str:
    lines = [BUSYBOX_FN]
    for name in LOCALE_VARS:
        host = ctx["locale"].get(name)
        if host == SANDBOX_ENV.get(name):
            continue
        lines.append(f"unset {name}" if host is None else f"export {name}={sh_quote(host)}")
    if ctx["umask"] not in ("0022", "022"):
        lines.append(f"umask {ctx['umask']}")
    for name, val, exported in ctx["vars"]:
        lines.append(f"{'export ' if exported else ''}{name}={sh_quote(val)}")
    for body in ctx["functions"].values():
        lines.append(body)
    return "\n".join(lines)


def bb_script(prelude: str, command: str) -> str:
    """What the sandbox runs for one new-style case (cwd: the case's directory)."""
    return f"{prelude}\n__us_cmd={sh_quote(command)}\neval \"$__us_cmd\" > actual"


def write_bb_config(ts: Path) -> str:
    """A .config and OPTIONFLAGS with every feature the tests name switched on."""
    names = set()
    for p in ts.rglob("*"):
        if p.is_file() and p.stat().st_size < 2_000_000:
            t = p.read_text(errors="replace")
            names.update(re.findall(r"CONFIG_([A-Z0-9_]+)", t))
            for m in re.finditer(r"^\s*optional\s+([^#\n]*)", t, re.M):
                names.update(w.lstrip("!") for w in m.group(1).split())
    names.discard("")
    os.makedirs(BB_BINDIR, exist_ok=True)
    Path(BB_BINDIR, ".config").write_text("".join(f"CONFIG_{n}=y\n" for n in sorted(names)))
    return ":" + ":".join(sorted(names)) + ":"


def fresh_testsuite(ts: Path) -> None:
    shutil.rmtree(BB_DIR, ignore_errors=True)
    shutil.copytree(ts, BB_DIR, symlinks=True)
    Path(BB_DIR, "testing.sh").write_text(TESTING_SH)


def now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def time_leak_patterns() -> list[re.Pattern]:
    now = datetime.datetime.now()
    utc = datetime.datetime.now(datetime.timezone.utc)
    pats = []
    for t in {now, utc}:
        pats.append(re.escape(t.strftime("%Y-%m-%d")))
        pats.append(re.escape(t.strftime("%b")) + r"\s+0?" + str(t.day) + r"\s+\d\d:\d\d")
        pats.append(re.escape(t.strftime("%a %b")))
    pats.append(str(int(time.time()))[:6] + r"\d{4}")
    return [re.compile(p.encode()) for p in pats]


# A shell builtin's diagnostic starts with the running script's name and line: the recording
# ran the case inside BusyBox's testing.sh, the sandbox runs it as a `bash -c` script (where a
# function the prelude defines, `busybox`, is bash's `environment`). Which script and line is
# an artifact of the two harnesses, so both sides drop it.
SHELL_PREFIX = re.compile(rb"^(?:\./testing\.sh|bash|sh|environment): line \d+: ", re.M)


def shell_neutral(out: bytes) -> bytes:
    return SHELL_PREFIX.sub(b"SHELL: ", out)


def words(cmd: str) -> list[str]:
    return [w for w in re.split(r"[\s|;&()`$\"'{}<>=!]+", cmd) if w]


def tool_of(stem: str, cmd: str, shipped: set[str]) -> str:
    ws = words(cmd)
    if stem in ws:
        return stem
    for w in ws:
        w = os.path.basename(w)
        if w in shipped and w != "busybox":
            return w
    return stem


def run_tests_file(stem: str, ts: Path, rec: Path, optionflags: str, log) -> None:
    fresh_testsuite(ts)
    Path(WORK, "base.json").write_text(json.dumps(walk_tree(BB_DIR)))
    shutil.rmtree(rec, ignore_errors=True)
    rec.mkdir(parents=True)
    env = host_env(US_REC=str(rec), US_PY=sys.executable, US_SCRIPT=str(Path(__file__).resolve()),
                   US_BASE=WORK + "/base.json", OPTIONFLAGS=optionflags, bindir=BB_BINDIR,
                   tsdir=BB_DIR, VERBOSE="")
    try:
        r = subprocess.run(["bash", f"{BB_DIR}/{stem}.tests"], cwd=BB_DIR, env=env,
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=900)
        log.write(f"== {stem}.tests exit {r.returncode}\n".encode() + r.stdout + r.stderr)
    except subprocess.TimeoutExpired:
        log.write(f"== {stem}.tests TIMED OUT\n".encode())


def read_rec_case(d: Path) -> dict:
    g = lambda n: (d / n).read_bytes() if (d / n).exists() else b""  # noqa: E731
    c = {"args": [g(f"a{i}").decode("utf-8", "surrogateescape") for i in range(1, 6)],
         "cwd": g("cwd").decode().strip(), "skipped": (d / "skipped").exists()}
    if not c["skipped"]:
        c.update(snapshot=json.loads(g("snap.json") or b'{"entries":[],"deleted":[]}'),
                 context=parse_context(g("context")), expected=g("expected"), input=g("input"),
                 stdin=g("stdin"), stdout=g("stdout"), stderr=g("stderr"),
                 rc=int(g("rc").strip() or b"-1") if (d / "rc").exists() else None)
    return c


def record_busybox(src: Path) -> dict:
    ts = src / "testsuite"
    if not (ts / "testing.sh").is_file():
        sys.exit(f"{ts}: not a BusyBox checkout (no testsuite/testing.sh)")
    make_shims()
    if not shutil.which("uudecode"):
        print("warning: uudecode (sharutils) is missing; tests that build archives with it will "
              "record a failure as the reference", file=sys.stderr)
    shipped = set(shipped_commands())
    applets = shipped | BUILTIN_APPLETS
    optionflags = write_bb_config(ts)
    leaks = time_leak_patterns()
    os.makedirs(OUT, exist_ok=True)
    log = open(OUT / "record-busybox.log", "wb")
    cases, skipped_upstream = [], 0
    new_style = sorted(p.stem for p in ts.glob("*.tests") if p.stem in applets)
    for stem in new_style:
        runs = []
        for n in (1, 2):
            rec = Path(WORK, "rec", stem, str(n))
            run_tests_file(stem, ts, rec, optionflags, log)
            runs.append([read_rec_case(d) for d in sorted(rec.iterdir())])
            if n == 1:
                time.sleep(1.1)  # let a clock tick between the two recordings
        first, second = runs
        kept = 0
        for i, c in enumerate(first):
            name = c["args"][0] or c["args"][1]
            if c["skipped"]:
                skipped_upstream += 1
                continue
            o = second[i] if i < len(second) else None
            skip = None
            if c["rc"] is None:
                skip = "did not finish on the host"
            elif o is None or o["skipped"] or (o["stdout"], o["rc"]) != (c["stdout"], c["rc"]):
                skip = "nondeterministic: two host runs differ"
            elif any(p.search(c["stdout"]) for p in leaks):
                skip = "time-dependent: the reference shows the current date/time"
            elif not shutil.which(tool_of(stem, c["args"][1], shipped)):
                # Without the real program the "reference" is bash's command-not-found.
                skip = "the host lacks the tool, so there is no reference (install it, record again)"
            elif any(e["kind"] == "special" for e in c["snapshot"]["entries"]):
                skip = "needs a FIFO or device node, which the harness cannot make in the sandbox"
            else:
                try:
                    c["args"][1].encode("utf-8")
                except UnicodeEncodeError:
                    skip = "command is not UTF-8 (cannot be sent over JSON-RPC)"
            kept += 1
            cases.append({
                "id": f"{stem}.tests#{i + 1}", "suite": "busybox", "style": "new",
                "tool": tool_of(stem, c["args"][1], shipped), "file": f"{stem}.tests",
                "name": name, "command": c["args"][1], "bb_expected_arg": c["args"][2],
                "cwd": c["cwd"], "prelude": build_prelude(c["context"]),
                "files": c["snapshot"], "input_b64": b64(c["input"]),
                "stdin_b64": b64(c["stdin"]), "bb_expected_b64": b64(c["expected"]),
                "ref": {"stdout_b64": b64(c["stdout"]), "exit": c["rc"],
                        "stderr": text(c["stderr"])[:2000]},
                "gnu_matches_busybox_expected": c["stdout"] == c["expected"],
                "skip": skip,
            })
        print(f"  {stem}.tests: {kept} cases", file=sys.stderr)

    # Old-style tests: testsuite/APPLET/NAME, run with `set -e` in a fresh directory.
    fresh_testsuite(ts)
    for d in sorted(p for p in ts.iterdir() if p.is_dir() and p.name in applets):
        for t in sorted(d.iterdir()):
            if t.name.startswith(".") or t.name.endswith("~") or not t.is_file():
                continue
            body = t.read_text(errors="surrogateescape")
            cwd = f"{BB_DIR}/.tmpdir.{d.name}"
            # runtest runs these with `sh -x -e`; no -x here: with `busybox` a shell function,
            # the trace of its body would land in redirections like `busybox false 2>&1 | cmp`
            script = (f"set -e\nd={sh_quote(BB_DIR)}\nexport d\nECHO=echo\n{BUSYBOX_FN}\n"
                      f"{body}")
            results = []
            for n in (1, 2):
                shutil.rmtree(cwd, ignore_errors=True)
                os.makedirs(cwd)
                try:
                    r = subprocess.run(["bash", "-c", script], cwd=cwd, env=host_env(),
                                       stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
                    results.append((r.returncode, r.stdout, r.stderr))
                except subprocess.TimeoutExpired:
                    results.append((None, b"", b"timeout"))
                shutil.rmtree(cwd, ignore_errors=True)
            (rc, out, err), (rc2, _, _) = results
            skip = None
            if re.search(r"\b(wget|curl)\b", body):
                skip = "needs the network"
            elif rc != 0:
                skip = f"fails with the host's GNU tools too (exit {rc})"
            elif rc2 != 0:
                skip = "nondeterministic: two host runs differ"
            cases.append({
                "id": f"{d.name}/{t.name}", "suite": "busybox", "style": "old", "tool": d.name,
                "file": f"{d.name}/{t.name}", "name": t.name, "command": script, "cwd": cwd,
                "ref": {"exit": rc, "stdout_b64": b64(out), "stderr": text(err)[-2000:]},
                "skip": skip,
            })
    log.close()
    fresh_testsuite(ts)
    save_base(BB_DIR, BB_BINDIR)
    return {"suite": "busybox", "source": {"repo": "mirror/busybox", "commit": git_head(src)},
            "reference": "host GNU tools (coreutils, gawk, GNU sed/grep/diff/tar/bc...) and bash "
                         "builtins, Debian " + Path("/etc/debian_version").read_text().strip(),
            "recorded": now_iso(), "skipped_by_upstream_SKIP": skipped_upstream,
            "work": BB_DIR, "cases": cases}


# --------------------------------------------------------------------------------------------
# Oils: the spec/*.test.sh format of test/sh_spec.py, and the recording with the host's bash

OILS_KV_RE = re.compile(rb"""
   [#][#] \s+
   (?: (OK(?:-\d)? | BUG(?:-\d)? | N-I) \s+ ([\w+/]+) \s+ )?   # qualifier and shells
   ([\w\-]+)                                                   # key
   :
   \s* (.*)                                                    # value
""", re.VERBOSE)
OILS_END_RE = re.compile(rb"[#][#] \s+ END", re.VERBOSE)
_T_BEGIN, _T_KV, _T_KV_MULTI, _T_END, _T_PLAIN, _T_EOF = range(6)


class SpecParseError(Exception):
    pass


def parse_oils_spec(data: bytes):
    """(file metadata, cases) of a spec/*.test.sh file, read exactly as test/sh_spec.py reads
    it: a case is `#### DESC`, then `## key: value` lines and code lines (blank lines count,
    comment lines never do, not even inside a STDOUT block), then more `## ...` lines;
    `## STDOUT:` / `## STDERR:` take the following lines up to the next `##`/`####` line or
    the end (`## END` is optional and consumed). Values are bytes; `stdout`/`stderr` values
    get their newline. Raises SpecParseError where sh_spec.py raises."""
    lines = data.split(b"\n")
    lines = [ln + b"\n" for ln in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
    state = {"pos": 0, "cur": None}

    def classify(line_num, line, raw):
        if not line:
            return line_num, _T_EOF, b""
        if not raw and not line.strip():
            return None
        if line.startswith(b"####"):
            return line_num, _T_BEGIN, line[4:].strip()
        m = OILS_KV_RE.match(line)
        if m:
            qual, shells, name, value = m.groups()
            if name in (b"stdout", b"stderr"):
                value += b"\n"
            kind = _T_KV_MULTI if name in (b"STDOUT", b"STDERR") else _T_KV
            return line_num, kind, (qual and qual.decode(), shells, name.decode(), value)
        if OILS_END_RE.match(line):
            return line_num, _T_END, None
        if line.startswith(b"##"):
            raise SpecParseError(f"line {line_num}: invalid ## line {line!r}")
        if line.lstrip().startswith(b"#"):
            return None
        return line_num, _T_PLAIN, line

    def nxt(raw=False):
        while True:
            line = lines[state["pos"]] if state["pos"] < len(lines) else b""
            state["pos"] += 1
            tok = classify(state["pos"], line, raw)
            if tok is not None:
                state["cur"] = tok
                return tok

    def add_qualified(case, qual, shells, name, value, line_num):
        for sh in shells.decode().split("/"):
            d = case.setdefault(sh, {})
            base = re.sub(r"-json$", "", name)
            if base in d or base + "-json" in d:
                raise SpecParseError(f"line {line_num}: duplicate spec {name!r} for {sh!r}")
            if "qualifier" in d and d["qualifier"] != qual:
                raise SpecParseError(f"line {line_num}: inconsistent qualifier for {sh!r}")
            d[name] = value
            d["qualifier"] = qual

    def key_values(case):
        while True:
            line_num, kind, item = state["cur"]
            if kind == _T_KV_MULTI:
                qual, shells, name, empty = item
                if empty:
                    raise SpecParseError(f"line {line_num}: the value of {name} must follow it")
                vals = []
                while True:
                    _, kind2, item2 = nxt(raw=True)
                    if kind2 != _T_PLAIN:
                        break
                    vals.append(item2)
                name, value = name.lower(), b"".join(vals)
                if qual:
                    add_qualified(case, qual, shells, name, value, line_num)
                else:
                    case[name] = value
                if kind2 == _T_END:
                    nxt()
            elif kind == _T_KV:
                qual, shells, name, value = item
                if qual:
                    add_qualified(case, qual, shells, name, value, line_num)
                else:
                    case[name] = value
                nxt()
            else:
                return

    nxt()
    meta = {}
    while state["cur"][1] == _T_KV:
        qual, shells, name, value = state["cur"][2]
        if qual is not None or shells is not None:
            raise SpecParseError("a qualifier in the file's metadata")
        meta[name] = value.decode("utf-8", "surrogateescape")
        nxt()
    cases = []
    while True:
        line_num, kind, item = state["cur"]
        if kind == _T_EOF:
            return meta, cases
        if kind != _T_BEGIN:
            raise SpecParseError(f"line {line_num}: expected a #### line")
        case = {"desc": item.decode("utf-8", "surrogateescape"), "line_num": line_num}
        nxt()
        key_values(case)
        if "code" not in case:  # else the code was a `## code:` value
            if state["cur"][1] != _T_PLAIN:
                raise SpecParseError(f"line {line_num}: expected a line of code")
            code = []
            while state["cur"][1] == _T_PLAIN:
                code.append(state["cur"][2])
                nxt(raw=True)
            case["code"] = b"".join(code)
            key_values(case)
        cases.append(case)


def oils_expectation(case: dict, shell: str = "bash") -> dict:
    """What sh_spec.py's CreateAssertions checks for `shell`: {"stdout": [bytes...], "status":
    int}. A qualified annotation naming the shell (`## OK bash stdout: ...`) replaces the
    unqualified one of the same kind; with no status at all the case must exit 0. (stderr
    assertions are not checked here.) stdout-json is compared as its UTF-8 bytes."""
    def strings(d):
        out = []
        if d.get("stdout") is not None:
            out.append(d["stdout"])
        if d.get("stdout-json") is not None:
            out.append(json.loads(d["stdout-json"].decode("utf-8")).encode("utf-8",
                                                                          "surrogatepass"))
        return out
    q = case.get(shell) or {}
    stdout = strings(q) or strings(case)
    if q.get("status") is not None:
        status = int(q["status"])
    else:
        status = int(case["status"]) if case.get("status") is not None else 0
    return {"stdout": stdout, "status": status,
            "qualifier": q.get("qualifier") if q else None}


# Oils' spec/bin helpers are python2 scripts; this machine's PATH and the sandbox have only
# python3. Each is replaced (on the host and in the sandbox alike) by a python3 port that
# prints byte-for-byte what python2 would: argv.py prints the arguments as python2 prints a
# list of byte strings (python3's bytes repr minus the b), printenv.py the raw values.
OILS_PY_PORTS = {
    "argv.py": r'''import os
import sys

out = "[" + ", ".join(repr(os.fsencode(a))[1:] for a in sys.argv[1:]) + "]\n"
sys.stdout.buffer.write(out.encode())
''',
    "printenv.py": r'''import os
import sys

for name in sys.argv[1:]:
    v = os.environb.get(os.fsencode(name))
    sys.stdout.buffer.write((b"None" if v is None else v) + b"\n")
''',
    "read_from_fd.py": r'''import os
import sys

for arg in sys.argv[1:]:
    fd = int(arg)
    try:
        in_str = os.read(fd, 1024)
    except OSError as e:
        sys.stderr.write("FATAL: Error reading from fd %d: %s\n" % (fd, e))
        sys.stderr.flush()
        sys.stdout.buffer.flush()
        sys.exit(1)
    sys.stdout.buffer.write(b"%d: " % fd)
    sys.stdout.buffer.write(in_str)
''',
    # python2's stdout is buffered and its stderr is not: stderr first when both share a pipe
    "stdout_stderr.py": r'''import os
import sys

argv = [os.fsencode(a) for a in sys.argv]
stdout = argv[1] if len(argv) > 1 else b"STDOUT"
stderr = argv[2] if len(argv) > 2 else b"STDERR"
status = int(argv[3]) if len(argv) > 3 else 0
sys.stdout.buffer.write(stdout + b"\n")
sys.stderr.buffer.write(stderr + b"\n")
sys.stderr.buffer.flush()
sys.exit(status)
''',
    "show_fd_table.py": r'''import os

d = "/proc/self/fd/"
for fd in os.listdir(d):
    path = os.path.join(d, fd)
    try:
        connected_to = os.readlink(path)
    except OSError as e:
        print("%s %s" % (fd, e))
    else:
        print("%s %s" % (fd, connected_to))
''',
}


def oils_env(case_dir: str) -> dict:
    """The environment sh_spec.py gives each case (test/spec-common.sh's flags), HOME added.
    Upstream's PATH is spec/bin and then the caller's; /usr/local/bin is in it because that
    is where the sandbox's python3 lives (the host's is /usr/bin/python3)."""
    return {"PATH": f"{OILS_SPEC}/bin:/usr/local/bin:/usr/bin:/bin", "LC_ALL": "C.UTF-8",
            "REPO_ROOT": OILS_WORK, "TMP": case_dir, "SH": "/bin/bash", "HOME": case_dir}


def oils_case_dir(file: str, index: int) -> str:
    return f"{OILS_TMP}/{file}/{index:02d}-bash"  # sh_spec.py's _tmp/spec-tmp/FILE/NN-SHELL


def prepare_oils_work(spec: Path) -> dict:
    """The checkout's spec/testdata and spec/bin under OILS_SPEC, python2 helpers ported."""
    shutil.rmtree(OILS_WORK, ignore_errors=True)
    os.makedirs(OILS_TMP)
    for sub in ("testdata", "bin"):
        shutil.copytree(spec / sub, f"{OILS_SPEC}/{sub}", symlinks=True)
    helpers = {}
    for p in sorted(Path(OILS_SPEC, "bin").iterdir()):
        if not p.is_file() or p.is_symlink():
            continue
        first = p.read_bytes().split(b"\n", 1)[0]
        if not re.match(rb"#!.*\bpython2?\s*$", first):
            shebang = first.decode(errors="replace") if first.startswith(b"#!") else "no shebang"
            helpers[p.name] = f"as is ({shebang})"
            continue
        if p.name in OILS_PY_PORTS:
            p.write_text("#!/usr/bin/env python3\n# python3 port of Oils' spec/bin/" + p.name +
                         " by scripts/upstream-suites.py (prints what python2 prints)\n" +
                         OILS_PY_PORTS[p.name])
            helpers[p.name] = "python2 script replaced by a python3 port"
        else:
            data = p.read_bytes().split(b"\n", 1)
            p.write_bytes(b"#!/usr/bin/env python3\n" + (data[1] if len(data) > 1 else b""))
            helpers[p.name] = "python2 script run with python3 (shebang changed; no port)"
        p.chmod(0o755)
    return helpers


def run_host_bash(code: bytes, case_dir: str, legacy_tmp: bool, timeout: float = 10):
    """As sh_spec.py runs a case: `bash` reading the code on stdin in a fresh $TMP."""
    shutil.rmtree(case_dir, ignore_errors=True)
    os.makedirs(case_dir)
    if legacy_tmp:
        os.mkdir(case_dir + "/_tmp")
    p = subprocess.Popen(["bash"], env=oils_env(case_dir), cwd=case_dir, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = p.communicate(code, timeout=timeout)
        res = {"stdout": out, "status": p.returncode, "stderr": err, "pid": p.pid}
    except subprocess.TimeoutExpired:
        res = None
    try:
        os.killpg(p.pid, 9)  # background jobs the case left behind
    except OSError:
        pass
    if res is None:
        p.communicate()
    return res


def bash_skip_reason(r1: dict, r2: dict | None, leaks: list[re.Pattern]) -> str | None:
    """Why a case bash ran twice cannot be a reference, if it cannot."""
    if r2 is None or (r2["stdout"], r2["status"]) != (r1["stdout"], r1["status"]):
        return "nondeterministic: two bash runs differ"
    if any(p.search(r1["stdout"]) for p in leaks):
        return "time-dependent: the reference shows the current date/time"
    if any(re.search(rb"(?<!\d)%d(?!\d)" % pid, r1["stdout"]) for pid in (r1["pid"], os.getpid())):
        return "shows a process id ($$ or $PPID)"
    return None


def oils_passes(exp: dict, r: dict) -> bool:
    return (r["status"] == exp["status"] and all(r["stdout"] == s for s in exp["stdout"])
            and b"Traceback (most recent" not in r["stderr"])


def record_oils(src: Path) -> dict:
    spec = src / "spec"
    if not (spec / "testdata").is_dir():
        sys.exit(f"{spec}: not an Oils checkout (no spec/testdata)")
    version = subprocess.run(["bash", "-c", "echo $BASH_VERSION"], capture_output=True,
                             text=True).stdout.strip()
    helpers = prepare_oils_work(spec)
    leaks = time_leak_patterns()
    cases, dropped, per_file, unparsed = [], [], {}, {}
    for f in sorted(spec.glob("*.test.sh")):
        try:
            meta, parsed = parse_oils_spec(f.read_bytes())
        except SpecParseError as e:
            unparsed[f.name] = str(e)
            continue
        labels = [s for s in meta.get("compare_shells", "").split() if s.startswith("bash")]
        if not labels:
            continue
        stem = f.name[:-len(".test.sh")]
        legacy = bool(meta.get("legacy_tmp_dir"))
        runs = []
        for n in (1, 2):
            t0 = time.monotonic()
            runs.append([run_host_bash(c["code"], oils_case_dir(f.name, i), legacy)
                         for i, c in enumerate(parsed)])
            if n == 1:
                time.sleep(max(0.0, 1.1 - (time.monotonic() - t0)))  # let the clock tick
        shutil.rmtree(f"{OILS_TMP}/{f.name}", ignore_errors=True)
        kept = 0
        for i, c in enumerate(parsed):
            cid = f"{f.name}#{i}"
            exp = oils_expectation(c)
            r1, r2 = runs[0][i], runs[1][i]
            why = None
            if r1 is None:
                why = "bash timed out (10 s)"
            elif not oils_passes(exp, r1):
                why = f"bash fails the annotations (exit {r1['status']})"
                if re.search(rb"\bpython2\b", c["code"]):
                    why += "; the code runs python2, which is on neither side's $PATH"
            if why:
                dropped.append({"id": cid, "name": c["desc"], "why": why})
                continue
            skip = bash_skip_reason(r1, r2, leaks)
            if not skip:
                kept += 1
            status = r1["status"]
            cases.append({
                "id": cid, "suite": "oils", "tool": stem, "file": f.name,
                "line": c["line_num"], "index": i, "name": c["desc"],
                "command": c["code"].decode("utf-8", "surrogateescape"),
                "code_b64": b64(c["code"]), "cwd": oils_case_dir(f.name, i),
                "legacy_tmp_dir": legacy, "annotation": exp["qualifier"] or "",
                # killed by signal N: a shell reports 128+N, python's returncode -N
                "ref": {"stdout_b64": b64(r1["stdout"]),
                        "exit": 128 - status if status < 0 else status,
                        "stderr": text(r1["stderr"])[:2000]},
                "skip": skip,
            })
        per_file[f.name] = {"cases": len(parsed), "kept": kept, "shells": labels}
        print(f"  {f.name}: {kept}/{len(parsed)} kept", file=sys.stderr)
    shutil.rmtree(OILS_TMP, ignore_errors=True)
    os.makedirs(OILS_TMP)
    save_base(OILS_SPEC)
    return {"suite": "oils", "source": {"repo": "oils-for-unix/oils", "commit": git_head(src)},
            "reference": f"GNU bash {version} (/bin/bash)", "recorded": now_iso(),
            "work": OILS_WORK, "helpers": helpers, "unparsed": unparsed,
            "per_file": per_file, "dropped": dropped, "cases": cases}


def brush_env(case: dict, case_dir: str) -> dict:
    """What brush's harness gives bash: a cleared environment with LC_ALL=C, a fixed PS1, a
    PATH, the case's variables and its HOME (relative to the case's directory)."""
    env = {"LC_ALL": "C", "PS1": "test$ ", "PATH": BRUSH_PATH}
    env.update({k: str(v) for k, v in (case.get("env") or {}).items()})
    if case.get("home_dir"):
        env["HOME"] = os.path.join(case_dir, str(case["home_dir"]))
    return env


def brush_args(case: dict) -> list[str]:
    removed = set(case.get("removed_default_args") or [])
    return [a for a in ("--norc", "--noprofile") if a not in removed] + \
        [str(a) for a in case.get("args") or []]


def brush_unusable(case: dict, files: list) -> str | None:
    """Why brush's harness would not compare this case with bash, or why it cannot be
    replayed here; None when it is a plain comparison."""
    if case.get("skip"):
        return "skipped upstream"
    if case.get("pty"):
        return "needs a terminal"
    if "linux" in (case.get("incompatible_os") or []):
        return "incompatible with Linux upstream"
    if case.get("skip_oracle") or case.get("snapshot") or case.get("expected_stdout") is not None:
        return "checked against a fixed expectation, not bash"
    if any(f.get("source_path") for f in files):
        return "copies a file from brush's tree"
    def ver(s):
        return tuple(int(x) for x in re.findall(r"\d+", str(s))[:3])
    if case.get("min_oracle_version") and ver(case["min_oracle_version"]) > BRUSH_BASH_VERSION:
        return f"needs bash {case['min_oracle_version']}"
    if case.get("max_oracle_version") and ver(case["max_oracle_version"]) < BRUSH_BASH_VERSION:
        return f"needs bash up to {case['max_oracle_version']}"
    return None


def brush_files(case_dir: str, files: list) -> list[tuple[str, str, bytes | None, int]]:
    out = []
    for f in files:
        p = os.path.join(case_dir, str(f["path"]))
        mode = 0o755 if f.get("executable") else 0o644
        out.append((p, "file", str(f.get("contents", "")).encode(), mode))
    return out


def as_sandbox_identity(argv: list[str], env: dict, etc: str) -> list[str]:
    """argv run as the sandbox's user, on a machine named as the sandbox is, with its open-file
    limit and a home directory: in new UTS and mount namespaces, with passwd/group files that
    know the user bound over /etc's and an empty tmpfs on /home. The environment is exactly
    `env` (`env -i`), as when bash is started directly."""
    ident = SANDBOX_IDENTITY
    setup = (f'hostname {ident["host"]} && mount --bind "$0/passwd" /etc/passwd '
             f'&& mount --bind "$0/group" /etc/group && mount -t tmpfs -o mode=755 none /home '
             f'&& mkdir -m 755 {ident["home"]} && chown {ident["uid"]}:{ident["uid"]} '
             f'{ident["home"]} && exec env -i "$@"')
    return (["unshare", "--uts", "--mount", "--", "sh", "-c", setup, etc]
            + [f"{k}={v}" for k, v in env.items()]
            + ["prlimit", f"--nofile={ident['nofile']}:{ident['nofile']}",
               "setpriv", f"--reuid={ident['uid']}", f"--regid={ident['uid']}", "--init-groups",
               "--"] + argv)


def identity_etc() -> str:
    """A directory with the passwd and group files the sandbox's identity needs."""
    ident = SANDBOX_IDENTITY
    d = f"{BRUSH_WORK}.etc"
    os.makedirs(d, exist_ok=True)
    u, uid = ident["user"], ident["uid"]
    Path(d, "passwd").write_text(f"root:x:0:0:root:/root:/bin/bash\n"
                                 f"{u}:x:{uid}:{uid}:{u}:{ident['home']}:/bin/bash\n")
    Path(d, "group").write_text(f"root:x:0:\n{u}:x:{uid}:\n")
    return d


def run_host_brush(case: dict, case_dir: str, files, timeout: float = 10,
                   etc: str | None = None):
    shutil.rmtree(case_dir, ignore_errors=True)
    os.makedirs(case_dir)
    for p, _, data, mode in files:
        os.makedirs(os.path.dirname(p), exist_ok=True)
        Path(p).write_bytes(data)
        os.chmod(p, mode)
    argv, env = ["bash", *brush_args(case)], brush_env(case, case_dir)
    if etc:
        # The case's tree (and the directories above it, up to BRUSH_WORK) is the user's, as
        # the sandbox lets its user write anywhere in it.
        uid = SANDBOX_IDENTITY["uid"]
        top = Path(BRUSH_WORK)
        for d in [top, *Path(case_dir).relative_to(top).parents]:
            os.chown(top / d, uid, uid)
        for root, dirs, names in os.walk(case_dir):
            for n in [*dirs, *names]:
                os.lchown(os.path.join(root, n), uid, uid)
        os.chown(case_dir, uid, uid)
        argv = as_sandbox_identity(argv, env, etc)
    p = subprocess.Popen(argv, env=env, cwd=case_dir, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = p.communicate(str(case.get("stdin") or "").encode(), timeout=timeout)
        res = {"stdout": out, "status": p.returncode, "stderr": err, "pid": p.pid}
    except subprocess.TimeoutExpired:
        res = None
    try:
        os.killpg(p.pid, 9)
    except OSError:
        pass
    if res is None:
        p.communicate()
    return res


def record_brush(src: Path, host_identity: bool = False) -> dict:
    import yaml  # only the recording needs it (Debian: python3-yaml)
    root = src / "brush-shell" / "tests" / "cases" / "compat"
    if not root.is_dir():
        sys.exit(f"{root}: not a brush checkout (no brush-shell/tests/cases/compat)")
    version = subprocess.run(["bash", "-c", "echo $BASH_VERSION"], capture_output=True,
                             text=True).stdout.strip()
    leaks = time_leak_patterns()
    shutil.rmtree(BRUSH_WORK, ignore_errors=True)
    etc = None
    if not host_identity:
        if os.geteuid() != 0:
            sys.exit("recording brush as the sandbox's identity needs root (unshare, mount, "
                     "setpriv); --host-identity records as this user instead")
        etc = identity_etc()
    cases, dropped, per_file = [], [], {}
    for f in sorted(root.rglob("*.yaml")):
        rel = f.relative_to(root).as_posix()
        stem = rel[:-len(".yaml")].replace("/", "-")
        doc = yaml.safe_load(f.read_text()) or {}
        common = doc.get("common_test_files") or []
        if doc.get("incompatible_configs"):
            per_file[rel] = {"cases": len(doc.get("cases") or []), "kept": 0,
                             "why": "incompatible configurations upstream"}
            continue
        parsed = doc.get("cases") or []
        kept = 0
        for i, case in enumerate(parsed):
            cid = f"{rel}#{i}"
            name = str(case.get("name", cid))
            case_dir = f"{BRUSH_WORK}/{stem}/{i:03d}"
            all_files = list(common) + list(case.get("test_files") or [])
            why = brush_unusable(case, all_files)
            if why:
                dropped.append({"id": cid, "name": name, "why": why})
                continue
            files = brush_files(case_dir, all_files)
            r1 = run_host_brush(case, case_dir, files, etc=etc)
            time.sleep(0.01)
            r2 = run_host_brush(case, case_dir, files, etc=etc)
            if r1 is None:
                dropped.append({"id": cid, "name": name, "why": "bash timed out (10 s)"})
                continue
            skip = bash_skip_reason(r1, r2, leaks)
            if not skip:
                kept += 1
            status = r1["status"]
            code = str(case.get("stdin") or "").encode()
            cases.append({
                "id": cid, "suite": "brush", "tool": stem, "file": rel, "index": i,
                "name": name, "command": code.decode(), "code_b64": b64(code),
                "args": brush_args(case), "env": brush_env(case, case_dir), "cwd": case_dir,
                "files": [{"path": p, "data_b64": b64(d or b""), "mode": m}
                          for p, _, d, m in files],
                "ref": {"stdout_b64": b64(r1["stdout"]),
                        "exit": 128 - status if status < 0 else status,
                        "stderr": text(r1["stderr"])[:2000]},
                "skip": skip,
                # What brush's harness leaves out of its comparison for this case.
                "ignore": [k for k in ("stdout", "whitespace", "exit_status")
                           if case.get(f"ignore_{k}")],
            })
        shutil.rmtree(f"{BRUSH_WORK}/{stem}", ignore_errors=True)
        per_file[rel] = {"cases": len(parsed), "kept": kept}
        print(f"  {rel}: {kept}/{len(parsed)} kept", file=sys.stderr)
    ident = ("the recording user" if host_identity else
             "uid {uid} ({user}) on host {host}, HOME-less ~ {home}, ulimit -n {nofile}"
             .format(**SANDBOX_IDENTITY))
    shutil.rmtree(f"{BRUSH_WORK}.etc", ignore_errors=True)
    return {"suite": "brush", "source": {"repo": "reubeno/brush", "commit": git_head(src)},
            "reference": f"GNU bash {version} (/bin/bash) as {ident}", "recorded": now_iso(),
            "work": BRUSH_WORK, "per_file": per_file, "dropped": dropped, "cases": cases}


def cmd_record(a) -> None:
    os.makedirs(OUT, exist_ok=True)
    if a.jq:
        print("recording jq ...", file=sys.stderr)
        data = record_jq(Path(a.jq))
        (OUT / "jq.json").write_text(json.dumps(data, indent=1))
        n = len(data["cases"])
        print(f"jq: kept {n} cases (jq 1.6 passes), dropped {len(data['dropped'])}; "
              f"{sum(1 for c in data['cases'] if c['skip'])} tagged skip", file=sys.stderr)
    if a.busybox:
        print("recording busybox ...", file=sys.stderr)
        data = record_busybox(Path(a.busybox))
        (OUT / "busybox.json").write_text(json.dumps(data, indent=1))
        cs = data["cases"]
        print(f"busybox: {len(cs)} cases, {sum(1 for c in cs if c['skip'])} tagged skip",
              file=sys.stderr)
    if a.brush:
        print("recording brush ...", file=sys.stderr)
        data = record_brush(Path(a.brush), host_identity=a.host_identity)
        (OUT / "brush.json").write_text(json.dumps(data, indent=1))
        cs = data["cases"]
        n_skip = sum(1 for c in cs if c["skip"])
        print(f"brush: kept {len(cs) - n_skip} cases, dropped {len(data['dropped'])}; "
              f"{n_skip} tagged skip", file=sys.stderr)
    if a.oils:
        print("recording oils ...", file=sys.stderr)
        data = record_oils(Path(a.oils))
        (OUT / "oils.json").write_text(json.dumps(data, indent=1))
        cs = data["cases"]
        n_skip = sum(1 for c in cs if c["skip"])
        print(f"oils: kept {len(cs) - n_skip} cases (bash passes, same twice), dropped "
              f"{len(data['dropped'])} that bash fails or that time out; {n_skip} tagged skip",
              file=sys.stderr)
        for name, why in data["unparsed"].items():
            print(f"  {name}: not parsed ({why})", file=sys.stderr)


# --------------------------------------------------------------------------------------------
# The sandbox side


class Hang(Exception):
    pass


class RpcError(Exception):
    def __init__(self, err):
        super().__init__(err.get("message"))
        self.err = err


class Sandboxd:
    def __init__(self, binary: str, timeout_ms: int, deterministic: bool):
        self.binary, self.timeout_ms, self.deterministic = binary, timeout_ms, deterministic
        self.start()

    def start(self) -> None:
        self.log = open(OUT / "sandboxd.stderr", "ab")
        self.p = subprocess.Popen([self.binary], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.log)
        self.q: queue.Queue = queue.Queue()
        self.n = 0
        threading.Thread(target=self._reader, args=(self.p, self.q), daemon=True).start()
        params = {"timeoutMs": self.timeout_ms, "limits": {"rpcBytes": 64 * 1024 * 1024}}
        if self.deterministic:
            # seeded randomness (so hash-table iteration order, e.g. awk's `for (k in a)`, is
            # the same in every run) and a virtual clock; every fork starts from the same point
            params["deterministic"] = {"seed": 1}
        self.call("create", params)

    @staticmethod
    def _reader(p, q) -> None:
        for line in p.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if "id" in msg and msg["id"] is not None:
                q.put(msg)
        q.put(None)

    def call(self, method: str, params: dict | None = None, wait: float = 60):
        self.n += 1
        req = {"jsonrpc": "2.0", "id": self.n, "method": method, "params": params or {}}
        try:
            self.p.stdin.write((json.dumps(req) + "\n").encode())
            self.p.stdin.flush()
        except (BrokenPipeError, OSError):
            raise Hang(f"sandboxd is gone ({method})")
        deadline = time.monotonic() + wait
        while True:
            try:
                msg = self.q.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise Hang(f"no answer to {method} within {wait:.0f}s")
            if msg is None:
                raise Hang(f"sandboxd exited ({method})")
            if msg.get("id") != self.n:
                continue
            if "error" in msg:
                raise RpcError(msg["error"])
            return msg["result"]

    def close(self) -> None:
        try:
            self.p.kill()
            self.p.wait(timeout=10)
        except OSError:
            pass
        self.log.close()


BASE = OUT / "base"  # record keeps a copy of the work trees here; run reads them from it


def base_copy(d: str) -> Path:
    """Where record keeps work tree `d` (the Oils tree has its own work path)."""
    if d == OILS_WORK or d.startswith(OILS_WORK + "/"):
        return BASE / "oils" / os.path.relpath(d, OILS_WORK)
    return BASE / os.path.relpath(d, WORK)


def save_base(*dirs: str) -> None:
    for d in dirs:
        dest = base_copy(d)
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(d, dest, symlinks=True)


def base_files(jq_needed: bool, bb_needed: bool,
               oils_needed: bool = False) -> list[tuple[str, str, bytes | None, int]]:
    """(absolute path in the sandbox, kind, data, mode) the root sandbox is prepared with."""
    out = []
    roots = []
    if bb_needed:
        roots += [BB_DIR, BB_BINDIR]
    if jq_needed:
        roots.append(JQ_DIR)
    if oils_needed:
        roots.append(OILS_SPEC)
        out.append((OILS_TMP, "dir", None, 0o755))
    for root in roots:
        src = base_copy(root)
        if not src.is_dir():
            sys.exit(f"{src} is missing: run `record` again")
        out.append((root, "dir", None, 0o755))
        for rel, (kind, mode, h) in walk_tree(str(src)).items():
            p = os.path.join(src, rel)
            if kind == "file":
                out.append((os.path.join(root, rel), kind, Path(p).read_bytes(), mode))
            elif kind == "dir":
                out.append((os.path.join(root, rel), kind, None, mode))
            elif kind == "symlink":
                out.append((os.path.join(root, rel), kind, os.readlink(p).encode(), mode))
    return out


class Runner:
    def __init__(self, a, jq_needed: bool, bb_needed: bool, oils_needed: bool = False):
        self.a = a
        self.base = base_files(jq_needed, bb_needed, oils_needed)
        self.sb = None
        self.restart()

    def restart(self) -> None:
        if self.sb:
            self.sb.close()
        self.sb = Sandboxd(self.a.bin, self.a.timeout * 1000, not self.a.no_deterministic)
        self.apply_files(None, [(p, k, d, m) for p, k, d, m in self.base])

    def apply_files(self, sid, files) -> None:
        """files: (abs path, kind, data, mode); dirs before their contents."""
        setup = []
        for p, kind, data, mode in files:
            params = {"path": p}
            if sid is not None:
                params["sandboxId"] = sid
            if kind == "dir":
                self.sb.call("files.mkdir", params)
                if mode != 0o755:
                    setup.append(f"chmod {mode:o} {sh_quote(p)}")
            elif kind == "file":
                self.sb.call("files.mkdir", dict(params, path=os.path.dirname(p)))
                self.sb.call("files.write", dict(params, data=b64(data or b"")))
                if mode != 0o644:
                    setup.append(f"chmod {mode:o} {sh_quote(p)}")
            elif kind == "symlink":
                setup.append(f"rm -rf {sh_quote(p)}; ln -s {sh_quote(data.decode())} {sh_quote(p)}")
        if setup:
            # The session's shell then forgets the programs it ran: each case's bash starts
            # with an empty `hash` table, as the recording's did.
            params = {"command": "\n".join(setup + ["hash -r"]), "timeoutMs": 60000}
            if sid is not None:
                params["sandboxId"] = sid
            r = self.sb.call("run", params)
            if r.get("exitCode") != 0:
                raise RuntimeError(f"setup failed: {r.get('stderr', '')[:300]}")

    def run_jq(self, c: dict) -> dict:
        r = self.sb.call("run", {"command": c["command"], "cwd": c["cwd"], "env": c["env"],
                                 "stdinBase64": c["stdin_b64"], "usage": False,
                                 "timeoutMs": self.a.timeout * 1000},
                         wait=self.a.timeout + 60)
        return {"stdout": r.get("stdout", "").encode("utf-8", "surrogateescape"),
                "exit": r.get("exitCode"), "stderr": r.get("stderr", ""),
                "errorClass": r.get("errorClass")}

    def run_bb(self, c: dict) -> dict:
        sid = self.sb.call("sandbox.fork")["sandboxId"]
        try:
            return self._run_bb(sid, c)
        finally:
            try:
                self.sb.call("sandbox.destroy", {"sandboxId": sid})
            except (RpcError, Hang):
                pass

    def _run_bb(self, sid: str, c: dict) -> dict:
        cwd = c["cwd"]
        if c["style"] == "old":
            self.sb.call("files.mkdir", {"path": cwd, "sandboxId": sid})
            r = self.sb.call("run", {"command": c["command"], "cwd": cwd, "sandboxId": sid,
                                     "usage": False, "timeoutMs": self.a.timeout * 1000},
                             wait=self.a.timeout + 60)
            return {"stdout": r.get("stdout", "").encode("utf-8", "surrogateescape"),
                    "exit": r.get("exitCode"), "stderr": r.get("stderr", ""),
                    "errorClass": r.get("errorClass")}
        snap = c["files"]
        for rel in snap["deleted"]:
            try:
                self.sb.call("files.rm", {"path": os.path.join(BB_DIR, rel), "recursive": True,
                                          "sandboxId": sid})
            except RpcError:
                pass
        files = []
        for e in snap["entries"]:
            p = os.path.join(BB_DIR, e["path"])
            if e["kind"] == "file":
                files.append((p, "file", unb64(e["data_b64"]), e["mode"]))
            elif e["kind"] == "dir":
                files.append((p, "dir", None, e["mode"]))
            elif e["kind"] == "symlink":
                files.append((p, "symlink", e["target"].encode(), e["mode"]))
        # chmod of directories last (a read-only directory must be filled first)
        files.sort(key=lambda f: (f[1] == "symlink",))
        self.apply_files(sid, files)
        self.sb.call("files.mkdir", {"path": cwd, "sandboxId": sid})
        self.sb.call("files.write", {"path": cwd + "/expected", "data": c["bb_expected_b64"],
                                     "sandboxId": sid})
        self.sb.call("files.write", {"path": cwd + "/input", "data": c["input_b64"],
                                     "sandboxId": sid})
        r = self.sb.call("run", {"command": bb_script(c["prelude"], c["command"]), "cwd": cwd,
                                 "stdinBase64": c["stdin_b64"], "sandboxId": sid, "usage": False,
                                 "timeoutMs": self.a.timeout * 1000},
                         wait=self.a.timeout + 60)
        try:
            out = unb64(self.sb.call("files.read", {"path": cwd + "/actual",
                                                    "sandboxId": sid})["data"])
        except RpcError:
            out = r.get("stdout", "").encode("utf-8", "surrogateescape")
        return {"stdout": out, "exit": r.get("exitCode"), "stderr": r.get("stderr", ""),
                "errorClass": r.get("errorClass"), "run_stdout": r.get("stdout", "")}


    def run_brush(self, c: dict) -> dict:
        """The case's code on the stdin of `bash ARGS` in a fork, in its directory with its
        files, with the environment brush's harness gives (`env -i`)."""
        def setup(sid):
            self.sb.call("files.mkdir", {"path": c["cwd"], "sandboxId": sid})
            self.apply_files(sid, [(f["path"], "file", unb64(f["data_b64"]), f["mode"])
                                   for f in c["files"]])
        cmd = "env -i " + " ".join(f"{k}={sh_quote(v)}" for k, v in c["env"].items()) \
            + " bash " + " ".join(sh_quote(x) for x in c["args"])
        return self.run_bash_case(c, cmd, setup, BRUSH_WORK + "/stdout")

    def run_oils(self, c: dict) -> dict:
        """The case's code on the stdin of `bash` in a fork, with sh_spec.py's environment only
        (`env -i`) and its $TMP as cwd."""
        def setup(sid):
            self.sb.call("files.mkdir", {"path": c["cwd"], "sandboxId": sid})
            if c["legacy_tmp_dir"]:
                self.sb.call("files.mkdir", {"path": c["cwd"] + "/_tmp", "sandboxId": sid})
        cmd = "env -i " + " ".join(f"{k}={sh_quote(v)}" for k, v in oils_env(c["cwd"]).items()) \
            + " bash"
        return self.run_bash_case(c, cmd, setup, OILS_CAPTURE)

    def run_bash_case(self, c: dict, cmd: str, setup, capture_path: str) -> dict:
        """`cmd` with the case's code on stdin, in a fork prepared by `setup`. The RPC's stdout
        is text (invalid UTF-8 arrives as U+FFFD), so when the answer has a U+FFFD the case
        runs again in a new fork with bash's stdout redirected to `capture_path`, and that
        file's bytes are the stdout."""
        got = self._run_bash_case(c, cmd, setup, None)
        if "\ufffd" in got["run_stdout"] or got.get("truncated"):
            got = self._run_bash_case(c, cmd, setup, capture_path)
        return got

    def _run_bash_case(self, c: dict, cmd: str, setup, capture: str | None) -> dict:
        sid = self.sb.call("sandbox.fork")["sandboxId"]
        try:
            setup(sid)
            if capture:
                cmd += " > " + sh_quote(capture)
            r = self.sb.call("run", {"command": cmd, "cwd": c["cwd"],
                                     "stdinBase64": c["code_b64"], "sandboxId": sid,
                                     "usage": False, "timeoutMs": self.a.timeout * 1000},
                             wait=self.a.timeout + 60)
            got = {"stdout": r.get("stdout", "").encode("utf-8", "surrogateescape"),
                   "exit": r.get("exitCode"), "stderr": r.get("stderr", ""),
                   "errorClass": r.get("errorClass"), "run_stdout": r.get("stdout", ""),
                   "truncated": bool((r.get("truncated") or {}).get("stdout"))}
            if capture:
                got["stdout_via_file"] = True
                try:
                    got["stdout"] = unb64(self.sb.call("files.read", {"path": capture,
                                                                      "sandboxId": sid})["data"])
                except RpcError:
                    pass
            return got
        finally:
            try:
                self.sb.call("sandbox.destroy", {"sandboxId": sid})
            except (RpcError, Hang):
                pass


def load_suite(name: str):
    p = OUT / f"{name}.json"
    if not p.exists():
        return None
    return json.loads(p.read_text())


def brush_matches(c: dict, got: dict, ref_out: bytes) -> bool:
    """The comparison brush's harness makes: stdout (whitespace runs as one space under
    ignore_whitespace, not at all under ignore_stdout) and the exit status (unless
    ignore_exit_status)."""
    ignore = set(c.get("ignore") or [])
    if "exit_status" not in ignore and got["exit"] != c["ref"]["exit"]:
        return False
    if "stdout" in ignore:
        return True
    if "whitespace" in ignore:
        return re.sub(rb"\s+", b" ", got["stdout"]) == re.sub(rb"\s+", b" ", ref_out)
    return got["stdout"] == ref_out


def cmd_run(a) -> None:
    suites = [s for s in (load_suite(n) for n in SUITES if not a.suite or n in a.suite) if s]
    if not suites:
        sys.exit(f"nothing recorded under {OUT}: run `{sys.argv[0]} record` first")
    todo = []
    for s in suites:
        for c in s["cases"]:
            if a.tool and c["tool"] != a.tool:
                continue
            if a.case and a.case not in c["id"] and a.case not in c.get("name", "") \
                    and a.case not in c["command"]:
                continue
            todo.append(c)
    if not todo:
        sys.exit("no case matches")
    if not os.path.exists(a.bin):
        sys.exit(f"{a.bin}: no such binary (build it, or pass --bin)")
    runner = Runner(a, any(c["suite"] == "jq" for c in todo),
                    any(c["suite"] == "busybox" for c in todo),
                    any(c["suite"] == "oils" for c in todo))
    stats = collections.OrderedDict()
    failures = []
    t0 = time.monotonic()
    for i, c in enumerate(todo):
        key = (c["suite"], c["tool"])
        st = stats.setdefault(key, collections.Counter())
        if c["skip"]:
            st["skipped"] += 1
            continue
        st["cases"] += 1
        try:
            got = {"jq": runner.run_jq, "busybox": runner.run_bb,
                   "oils": runner.run_oils, "brush": runner.run_brush}[c["suite"]](c)
        except Hang as e:
            got = {"stdout": b"", "exit": None, "stderr": f"harness: {e}", "errorClass": "HANG"}
            runner.restart()
        except (RpcError, RuntimeError) as e:
            got = {"stdout": b"", "exit": None, "stderr": f"harness: {e}",
                   "errorClass": "HARNESS"}
        ref_out = unb64(c["ref"]["stdout_b64"])
        if c["suite"] == "busybox" and c["style"] == "old":
            ok = got["exit"] == 0
        elif c["suite"] == "busybox":
            ok = (shell_neutral(got["stdout"]) == shell_neutral(ref_out)
                  and got["exit"] == c["ref"]["exit"])
        elif c["suite"] == "brush" and not a.strict:
            ok = brush_matches(c, got, ref_out)
        else:
            ok = got["stdout"] == ref_out and got["exit"] == c["ref"]["exit"]
        if ok:
            st["passed"] += 1
        if c["suite"] == "jq":
            jeq = json_equal(got["stdout"].decode("utf-8", "replace"),
                             ref_out.decode("utf-8", "replace")) and got["exit"] == c["ref"]["exit"]
            if jeq:
                st["json_equal"] += 1
        if not ok:
            f = {"suite": c["suite"], "tool": c["tool"], "id": c["id"],
                 "name": c.get("name", c.get("program")), "command": c["command"],
                 "expected": text(ref_out), "actual": text(got["stdout"]),
                 "expected_exit": c["ref"]["exit"], "actual_exit": got["exit"],
                 "stderr": got["stderr"][:4000], "reference_stderr": c["ref"]["stderr"][:1000]}
            if got.get("errorClass"):
                f["errorClass"] = got["errorClass"]
            if c["suite"] == "jq":
                f["input"] = c["input"]
                f["json_equal"] = jeq
            elif c["suite"] == "oils":
                f.update(file=c["file"], line=c["line"], cwd=c["cwd"],
                         annotation=c["annotation"])
                if got.get("stdout_via_file"):
                    f["stdout_via_file"] = True
            elif c["suite"] == "brush":
                f.update(file=c["file"], cwd=c["cwd"], args=c["args"])
                if got.get("stdout_via_file"):
                    f["stdout_via_file"] = True
            else:
                f["cwd"] = c["cwd"]
                if c["style"] == "new":
                    f["stdin"] = text(unb64(c["stdin_b64"]))
                    f["input_file"] = text(unb64(c["input_b64"]))
                    f["busybox_expected"] = text(unb64(c["bb_expected_b64"]))
                    f["prelude"] = c["prelude"]
                    f["files_written"] = [e["path"] for e in c["files"]["entries"]]
            failures.append(f)
            if a.verbose:
                print(f"FAIL {c['id']} [{c['tool']}] {f['name']}")
                print("  $ " + c["command"].replace("\n", "\n    "))
                print(f"  exit: expected {f['expected_exit']}, got {f['actual_exit']}")
                for line in difflib.unified_diff(f["expected"].splitlines(),
                                                 f["actual"].splitlines(), "expected", "actual",
                                                 lineterm="", n=2):
                    print("  " + line)
                if got["stderr"]:
                    print("  stderr: " + got["stderr"][:500].replace("\n", "\n          "))
        if not a.verbose and sys.stderr.isatty():
            print(f"\r{i + 1}/{len(todo)}", end="", file=sys.stderr, flush=True)
    runner.sb.close()
    if not a.verbose and sys.stderr.isatty():
        print(file=sys.stderr)

    # the table
    tw = max([10] + [len(tool) for _, tool in stats])  # oils' tools are spec file names
    print(f"{'suite':8} {'tool':{tw}} {'cases':>6} {'passed':>7} {'%':>6}  {'skipped':>7}  note")
    totals = collections.OrderedDict()
    order = {s: i for i, s in enumerate(SUITES)}
    for (suite, tool), st in sorted(stats.items(), key=lambda kv: (order.get(kv[0][0], 9), kv[0])):
        tot = totals.setdefault(suite, collections.Counter())
        tot.update(st)
        note = f"json-equal {st['json_equal']} ({pct(st['json_equal'], st['cases'])}%)" \
            if suite == "jq" else ""
        print(f"{suite:8} {tool:{tw}} {st['cases']:6} {st['passed']:7} "
              f"{pct(st['passed'], st['cases']):>6}  {st['skipped']:7}  {note}")
    print()
    grand = collections.Counter()
    for suite, tot in totals.items():
        grand.update(tot)
        print(f"{suite:8} {'TOTAL':{tw}} {tot['cases']:6} {tot['passed']:7} "
              f"{pct(tot['passed'], tot['cases']):>6}  {tot['skipped']:7}")
    print(f"{'all':8} {'TOTAL':{tw}} {grand['cases']:6} {grand['passed']:7} "
          f"{pct(grand['passed'], grand['cases']):>6}  {grand['skipped']:7}")
    print(f"({time.monotonic() - t0:.0f}s)", file=sys.stderr)

    summary = {f"{s}/{t}": dict(st) for (s, t), st in stats.items()}
    out = {"generated": now_iso(), "bin": str(a.bin),
           "filters": {"suite": a.suite, "tool": a.tool, "case": a.case},
           "summary": summary, "totals": {s: dict(t) for s, t in totals.items()},
           "failures": failures}
    (OUT / "results.json").write_text(json.dumps(out, indent=1, ensure_ascii=False))
    print(f"failures: {OUT / 'results.json'}", file=sys.stderr)


def pct(n: int, d: int) -> str:
    return f"{100.0 * n / d:.1f}" if d else "-"


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "_snapshot":  # called by the recording testing.sh
        snapshot_cmd(sys.argv[2])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record", help="record the references from the host's programs")
    r.add_argument("--jq", metavar="DIR", help="a jq checkout (with tests/)")
    r.add_argument("--busybox", metavar="DIR", help="a BusyBox checkout (with testsuite/)")
    r.add_argument("--oils", metavar="DIR", help="an Oils checkout (with spec/)")
    r.add_argument("--brush", metavar="DIR",
                   help="a brush checkout (with brush-shell/tests/cases/compat)")
    r.add_argument("--host-identity", action="store_true",
                   help="brush: run bash as this user on this host (default, as root: as the "
                        "sandbox's user 1000 on host `sandbox`, as brush runs both shells as "
                        "one user)")
    x = sub.add_parser("run", help="replay the recorded cases in the sandbox")
    x.add_argument("--suite", action="append", choices=SUITES,
                   help="only this suite (repeatable; default: every recorded one)")
    x.add_argument("--tool", help="only this tool (e.g. jq, sed, awk; for oils a spec file's "
                                  "stem, e.g. var-op-len)")
    x.add_argument("--case", help="only cases whose id, name or command contains this")
    x.add_argument("--bin", default=str(DEFAULT_BIN), help="the sandboxd binary")
    x.add_argument("--timeout", type=int, default=10, help="seconds per case (default 10)")
    x.add_argument("--no-deterministic", action="store_true",
                   help="run without the sandbox's deterministic mode (default: seeded "
                        "randomness and a virtual clock, so that runs are reproducible)")
    x.add_argument("--strict", action="store_true",
                   help="brush: compare stdout and exit status of every case, also where "
                        "brush's harness does not (ignore_stdout, ignore_whitespace)")
    x.add_argument("-v", "--verbose", action="store_true", help="print each failure's diff")
    a = ap.parse_args()
    if a.cmd == "record":
        if not (a.jq or a.busybox or a.oils or a.brush):
            ap.error("record needs --jq DIR, --busybox DIR, --oils DIR and/or --brush DIR")
        cmd_record(a)
    else:
        cmd_run(a)


if __name__ == "__main__":
    main()
