"""The cross-binding conformance suite (tests/conformance, README.md there) on the Python SDK:
every case of tests/conformance/cases on every transport of the ``transport`` fixture. The Rust
(tests/e2e/conformance.rs) and Node (bindings/node/test/conformance.test.js) runners read the
same files, so a behaviour that changes for one binding fails all three suites.

This file is the Python adapter: it maps each step of a case onto the SDK's calls and the SDK's
results back onto the cases' binding-neutral field names, then checks them by the rules the
README states (which the other two runners implement the same way)."""

from __future__ import annotations

import base64
import errno
import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from wasmsand import MergeConflictError, Sandbox, SandboxError

ROOT = Path(__file__).resolve().parents[2]
CONFORMANCE = ROOT / "tests" / "conformance"
CASES_DIR = CONFORMANCE / "cases"

# What each transport lacks, with the reason a case needing it is skipped there. Every feature
# a case may name is a key of FEATURES; a name outside it fails the case (a typo must not turn
# into a silent skip).
FEATURES = {
    "run_env_cwd",
    "run_scope_subshell",
    "custom_limits",
    "output_caps",
    "truncation_mode",
    "atomic",
    "portable_state",
    "files_follow_shell_cwd",
}
LACKS: dict[str, dict[str, str]] = {
    "inprocess": {},
    "rpc": {},
    "service": {
        "run_scope_subshell": "a run with envs/cwd is not a subshell on the service: what it sets persists (docs/python.md)",
        "custom_limits": "the service's own limits apply; limits= raises NotSupportedError",
        "output_caps": "the service caps a run's log as a whole (SANDBOX_MAX_LOG_BYTES), not each stream at its stdout_bytes/stderr_bytes",
        "truncation_mode": "truncation= raises NotSupportedError on the service",
        "atomic": "atomic=True raises NotSupportedError on the service",
        "portable_state": "export_state/import_state raise NotSupportedError on the service",
        "files_follow_shell_cwd": "relative files.* paths are relative to the workspace, not the shell's cwd, on the service",
    },
}


def load_cases() -> list[dict[str, Any]]:
    """Every case of every file, in file order; fails (at collection, so the run fails) when
    the directory is missing or holds no case, or two cases share a name."""
    if not CASES_DIR.is_dir():
        raise RuntimeError(f"the conformance cases directory {CASES_DIR} is missing")
    files = sorted(CASES_DIR.glob("*.json"))
    cases: list[dict[str, Any]] = []
    for f in files:
        doc = json.loads(f.read_text(encoding="utf-8"))
        if not isinstance(doc, dict) or not isinstance(doc.get("cases"), list):
            raise RuntimeError(f"{f}: not a cases file (an object with a list `cases`)")
        for case in doc["cases"]:
            cases.append({**case, "_file": f.name})
    if not cases:
        raise RuntimeError(f"no conformance case in {CASES_DIR} (files: {[f.name for f in files]})")
    names = [c["name"] for c in cases]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise RuntimeError(f"conformance case names used twice: {dupes}")
    return cases


CASES = load_cases()


def test_case_files_follow_the_schema() -> None:
    """The schema is the format's one description: a field it does not know is refused there,
    and each runner refuses it too (below), so a misspelt expectation cannot pass unnoticed."""
    import jsonschema

    schema = json.loads((CONFORMANCE / "schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for f in sorted(CASES_DIR.glob("*.json")):
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(json.loads(f.read_text("utf-8")))]
        assert not errors, f"{f.name}:\n" + "\n".join(errors[:10])


# ---- the adapter ----


def content(spec: dict[str, Any]) -> bytes:
    """A file's bytes from ``text``, ``base64`` or ``repeat`` (exactly one is given)."""
    given = [k for k in ("text", "base64", "repeat") if k in spec]
    assert len(given) == 1, f"exactly one of text, base64, repeat: {spec}"
    if "text" in spec:
        return str(spec["text"]).encode("utf-8")
    if "base64" in spec:
        return base64.b64decode(spec["base64"], validate=True)
    rep = spec["repeat"]
    return str(rep["text"]).encode("utf-8") * int(rep["count"])


def quote(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"


def error_of(e: BaseException) -> dict[str, Any]:
    """A failure in the cases' terms: a filesystem error by its errno name, anything else by
    the SDK's ``kind``."""
    if isinstance(e, OSError) and not isinstance(e, SandboxError) and e.errno is not None:
        return {"errno": errno.errorcode.get(e.errno, str(e.errno))}
    if isinstance(e, SandboxError):
        out: dict[str, Any] = {"kind": e.kind}
        if isinstance(e, MergeConflictError):
            out["conflict_paths"] = [c.path for c in e.conflicts]
        return out
    raise e


def check_keys(obj: dict[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(obj) - allowed)
    assert not unknown, f"{where}: unknown field(s) {unknown}; allowed: {sorted(allowed)}"


class Runner:
    def __init__(self, case: dict[str, Any], transport: str) -> None:
        self.case = case
        self.transport = transport
        self.sandboxes: dict[str, Sandbox] = {}
        self.roots: list[Sandbox] = []
        self.snapshots: dict[str, str] = {}
        self.blobs: dict[str, bytes] = {}

    def close(self) -> None:
        for sb in self.roots:
            sb.kill()

    def sandbox(self, step: dict[str, Any]) -> Sandbox:
        name = step.get("in", "root")
        assert name in self.sandboxes, f"no sandbox named {name!r} (made so far: {sorted(self.sandboxes)})"
        return self.sandboxes[name]

    def start(self) -> None:
        spec = self.case.get("sandbox", {})
        check_keys(spec, {"timeout_ms", "limits"}, "sandbox")
        kwargs: dict[str, Any] = {"transport": self.transport}
        if "timeout_ms" in spec:
            kwargs["timeout_ms"] = int(spec["timeout_ms"])
        if "limits" in spec:
            kwargs["limits"] = dict(spec["limits"])
        root = Sandbox(**kwargs)
        self.roots.append(root)
        self.sandboxes["root"] = root
        setup = self.case.get("setup", {})
        check_keys(setup, {"files", "env", "cwd"}, "setup")
        for f in setup.get("files", []):
            check_keys(f, {"path", "text", "base64", "repeat"}, "setup.files[]")
            root.files.write(f["path"], content(f))
        # Variables and cwd are set by a run of the shell, the same line on every binding.
        line = [f"export {k}={quote(v)}" for k, v in setup.get("env", {}).items()]
        if "cwd" in setup:
            line.append(f"cd -- {quote(setup['cwd'])}")
        if line:
            r = root.commands.run("; ".join(line))
            assert r.exit_code == 0, f"setup failed: {r}"

    def step(self, i: int, step: dict[str, Any]) -> None:
        op = step.get("op")
        where = f"step {i} ({op})"
        handler = getattr(self, f"op_{op}", None)
        assert handler is not None, f"{where}: unknown op"
        expect = step.get("expect", {})
        check_keys(expect, EXPECT_KEYS[op], f"{where}: expect")
        try:
            actual = handler(step, where)
        except (OSError, SandboxError) as e:
            got = error_of(e)
            assert "error" in expect, f"{where}: failed unexpectedly: {got} ({e})"
            compare_error(expect["error"], got, where)
            return
        assert "error" not in expect, f"{where}: expected the error {expect['error']}, but it succeeded with {actual}"
        CHECKS[op](expect, actual, where)

    # Each op_* returns what the step produced, in the cases' field names.

    def op_run(self, step: dict[str, Any], where: str) -> dict[str, Any]:
        check_keys(step, {"op", "in", "doc", "command", "stdin", "stdin_base64", "env", "cwd", "timeout_ms", "atomic", "truncation", "expect"}, where)
        kwargs: dict[str, Any] = {}
        if "stdin" in step:
            kwargs["stdin"] = step["stdin"]
        if "stdin_base64" in step:
            kwargs["stdin"] = base64.b64decode(step["stdin_base64"], validate=True)
        if "env" in step:
            kwargs["envs"] = step["env"]
        if "cwd" in step:
            kwargs["cwd"] = step["cwd"]
        if "timeout_ms" in step:
            kwargs["timeout_ms"] = int(step["timeout_ms"])
        if step.get("atomic"):
            kwargs["atomic"] = True
        if "truncation" in step:
            kwargs["truncation"] = step["truncation"]
        r = self.sandbox(step).commands.run(step["command"], **kwargs)
        return {
            "exit_code": r.exit_code,
            "stdout": r.stdout,
            "stderr": r.stderr,
            "error_class": r.error_class,
            "truncated": None if r.truncated is None else {"stdout": bool(r.truncated["stdout"]), "stderr": bool(r.truncated["stderr"])},
            "spilled": r.spilled,
            "rolled_back": r.rolled_back,
            "limits_hit": list(r.usage.limits_hit),
        }

    def op_write_file(self, step: dict[str, Any], where: str) -> None:
        check_keys(step, {"op", "in", "doc", "path", "text", "base64", "repeat", "expect"}, where)
        self.sandbox(step).files.write(step["path"], content(step))

    def op_read_file(self, step: dict[str, Any], where: str) -> bytes:
        check_keys(step, {"op", "in", "doc", "path", "expect"}, where)
        return self.sandbox(step).files.read(step["path"])

    def op_list_dir(self, step: dict[str, Any], where: str) -> list[dict[str, Any]]:
        check_keys(step, {"op", "in", "doc", "path", "expect"}, where)
        return [{"name": e.name, "type": e.type, "size": e.size} for e in self.sandbox(step).files.list(step["path"])]

    def op_stat(self, step: dict[str, Any], where: str) -> dict[str, Any]:
        check_keys(step, {"op", "in", "doc", "path", "expect"}, where)
        st = self.sandbox(step).files.stat(step["path"])
        return {"name": st.name, "type": st.type, "size": st.size}

    def op_mkdir(self, step: dict[str, Any], where: str) -> None:
        check_keys(step, {"op", "in", "doc", "path", "expect"}, where)
        self.sandbox(step).files.mkdir(step["path"])

    def op_remove(self, step: dict[str, Any], where: str) -> None:
        check_keys(step, {"op", "in", "doc", "path", "recursive", "expect"}, where)
        self.sandbox(step).files.rm(step["path"], recursive=bool(step.get("recursive", False)))

    def op_rename(self, step: dict[str, Any], where: str) -> None:
        check_keys(step, {"op", "in", "doc", "from", "to", "expect"}, where)
        self.sandbox(step).files.rename(step["from"], step["to"])

    def op_fork(self, step: dict[str, Any], where: str) -> None:
        check_keys(step, {"op", "in", "doc", "as"}, where)
        assert step["as"] not in self.sandboxes, f"{where}: the name {step['as']!r} is taken"
        self.sandboxes[step["as"]] = self.sandbox(step).fork()

    def op_destroy(self, step: dict[str, Any], where: str) -> None:
        check_keys(step, {"op", "in", "doc"}, where)
        self.sandbox(step).destroy()

    def op_snapshot(self, step: dict[str, Any], where: str) -> None:
        check_keys(step, {"op", "in", "doc", "as"}, where)
        self.snapshots[step["as"]] = self.sandbox(step).snapshot()

    def op_restore(self, step: dict[str, Any], where: str) -> None:
        check_keys(step, {"op", "in", "doc", "snapshot", "snapshot_id", "expect"}, where)
        sid = self.snapshots[step["snapshot"]] if "snapshot" in step else str(step["snapshot_id"])
        self.sandbox(step).restore(sid)

    def op_merge(self, step: dict[str, Any], where: str) -> dict[str, Any]:
        check_keys(step, {"op", "in", "doc", "from", "env", "cwd", "expect"}, where)
        fork = self.sandboxes[step["from"]]
        r = self.sandbox(step).merge(fork, env=bool(step.get("env", False)), cwd=bool(step.get("cwd", False)))
        return {"applied": dict(r.applied), "env": list(r.env), "cwd": r.cwd}

    def op_export_state(self, step: dict[str, Any], where: str) -> None:
        check_keys(step, {"op", "in", "doc", "as"}, where)
        self.blobs[step["as"]] = self.sandbox(step).export_state()

    def op_import_state(self, step: dict[str, Any], where: str) -> None:
        check_keys(step, {"op", "doc", "blob", "base64", "as", "expect"}, where)
        blob = self.blobs[step["blob"]] if "blob" in step else base64.b64decode(step["base64"], validate=True)
        sb = Sandbox.import_state(blob, transport=self.transport)
        self.roots.append(sb)
        self.sandboxes[step["as"]] = sb


# ---- the checks (the README's rules) ----

EXPECT_KEYS = {
    "run": {
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
    },
    "write_file": {"error"},
    "read_file": {"text", "base64", "repeat", "size", "sha256", "error"},
    "list_dir": {"entries", "names_include", "error"},
    "stat": {"name", "type", "size", "error"},
    "mkdir": {"error"},
    "remove": {"error"},
    "rename": {"error"},
    "fork": set(),
    "destroy": set(),
    "snapshot": set(),
    "restore": {"error"},
    "merge": {"applied", "env", "cwd", "error"},
    "export_state": set(),
    "import_state": {"error"},
}


def compare_error(want: dict[str, Any], got: dict[str, Any], where: str) -> None:
    check_keys(want, {"errno", "kind", "conflict_paths"}, f"{where}: expect.error")
    for k, v in want.items():
        assert got.get(k) == v, f"{where}: error {k}: expected {v!r}, got {got}"


def as_list(v: Any) -> list[str]:
    return [v] if isinstance(v, str) else list(v)


def check_run(expect: dict[str, Any], r: dict[str, Any], where: str) -> None:
    for field in ("exit_code", "stdout", "stderr", "error_class", "truncated", "spilled", "rolled_back"):
        if field in expect:
            assert r[field] == expect[field], f"{where}: {field}: expected {expect[field]!r}, got {r[field]!r} (result {r})"
    for stream in ("stdout", "stderr"):
        for needle in as_list(expect.get(f"{stream}_contains", [])):
            assert needle in r[stream], f"{where}: {stream} does not contain {needle!r}: {r[stream]!r}"
        pattern = expect.get(f"{stream}_regex")
        if pattern is not None:
            # The whole stream, `.` matching newlines: the one reading Rust, Python and
            # JavaScript regexes give alike (README).
            assert re.fullmatch(pattern, r[stream], re.DOTALL), f"{where}: {stream} does not match /{pattern}/: {r[stream]!r}"
    for limit in expect.get("limits_hit_contains", []):
        assert limit in r["limits_hit"], f"{where}: limits_hit {r['limits_hit']} lacks {limit!r}"


def check_read(expect: dict[str, Any], data: bytes, where: str) -> None:
    for key in ("text", "base64", "repeat"):
        if key in expect:
            want = content({key: expect[key]})
            assert data == want, f"{where}: content: expected {want[:200]!r} ({len(want)} bytes), got {data[:200]!r} ({len(data)} bytes)"
    if "size" in expect:
        assert len(data) == expect["size"], f"{where}: size: expected {expect['size']}, got {len(data)}"
    if "sha256" in expect:
        assert hashlib.sha256(data).hexdigest() == expect["sha256"], f"{where}: sha256 differs"


def check_list(expect: dict[str, Any], entries: list[dict[str, Any]], where: str) -> None:
    if "entries" in expect:
        # An expected entry without `size` leaves the size unchecked.
        got = [{k: e[k] for k in want} for e, want in zip(entries, expect["entries"])]
        assert len(entries) == len(expect["entries"]) and got == expect["entries"], (
            f"{where}: entries: expected {expect['entries']}, got {entries}"
        )
    names = [e["name"] for e in entries]
    for n in expect.get("names_include", []):
        assert n in names, f"{where}: {n!r} not listed in {names}"


def check_stat(expect: dict[str, Any], st: dict[str, Any], where: str) -> None:
    for k in ("name", "type", "size"):
        if k in expect:
            assert st[k] == expect[k], f"{where}: {k}: expected {expect[k]!r}, got {st}"


def check_merge(expect: dict[str, Any], m: dict[str, Any], where: str) -> None:
    for k in ("applied", "env", "cwd"):
        if k in expect:
            assert m[k] == expect[k], f"{where}: {k}: expected {expect[k]!r}, got {m}"


def check_nothing(expect: dict[str, Any], _actual: Any, where: str) -> None:
    assert not expect, f"{where}: nothing to expect of this op"


CHECKS = {
    "run": check_run,
    "write_file": check_nothing,
    "read_file": check_read,
    "list_dir": check_list,
    "stat": check_stat,
    "mkdir": check_nothing,
    "remove": check_nothing,
    "rename": check_nothing,
    "fork": check_nothing,
    "destroy": check_nothing,
    "snapshot": check_nothing,
    "restore": check_nothing,
    "merge": check_merge,
    "export_state": check_nothing,
    "import_state": check_nothing,
}


@pytest.fixture
def runner(request: pytest.FixtureRequest, transport: str) -> Iterator[Runner]:
    r = Runner(request.param, transport)
    yield r
    r.close()


@pytest.mark.parametrize("runner", CASES, ids=[c["name"] for c in CASES], indirect=True)
def test_case(runner: Runner) -> None:
    case = runner.case
    check_keys(case, {"name", "doc", "requires", "sandbox", "setup", "steps", "_file"}, f"case {case['name']}")
    unknown = sorted(set(case.get("requires", [])) - FEATURES)
    assert not unknown, f"unknown feature(s) {unknown}: name them in FEATURES (and in the other runners and the schema)"
    lacking = [f"{f}: {LACKS[runner.transport][f]}" for f in case.get("requires", []) if f in LACKS[runner.transport]]
    if lacking:
        pytest.skip(f"the {runner.transport} transport lacks " + "; ".join(lacking))
    runner.start()
    for i, step in enumerate(case["steps"]):
        runner.step(i, step)
