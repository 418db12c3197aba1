#!/usr/bin/env python3
"""No module of a workspace crate depends, through any chain, on a module that depends on it.

Cycles inside a crate are how layering erodes below the crate level: a helper moved into the
module that uses it "for now", and soon no file can be understood without its neighbours. This
reads every `crates/*/src` and `bindings/*/src` tree, takes a module's dependencies from the
paths it names (`crate::a::b`, `super::x`, `use crate::{a, b::c}`), and fails listing each cycle.

A crate's root (`lib.rs`/`main.rs`) and a folder's `mod.rs` declare and re-export their
children, so their edges to children are not dependencies; a child naming its parent (a
re-export) is. Tests (`tests.rs`, `#[cfg(test)]` modules' files) may reach anywhere.

`--leaf DIR` additionally fails when a module under DIR (a crate-relative folder such as
`crates/shell/src/syntax`) names any module outside it: a leaf layer imports nothing above it.

Stdlib only (Python 3.11).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PATH_RE = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
GROUP_RE = re.compile(r"\b(crate|super)((?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{")


def module_of(src: Path, file: Path) -> tuple[str, ...]:
    rel = file.relative_to(src).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts.pop()
    return tuple(parts)


def strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    # String literals can hold `crate::` in messages; they are not dependencies.
    return re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)


def expand_groups(text: str) -> list[str]:
    """`crate::a::{b, c::{d, e}}` → ["crate::a::b", "crate::a::c::d", "crate::a::c::e"]."""
    out: list[str] = []
    for m in GROUP_RE.finditer(text):
        prefix = m.group(1) + m.group(2)
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        body = text[m.end() : i - 1]
        out.extend(flatten(prefix, body))
    return out


def flatten(prefix: str, body: str) -> list[str]:
    items, depth, cur = [], 0, ""
    for ch in body:
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
            continue
        depth += {"{": 1, "}": -1}.get(ch, 0)
        cur += ch
    items.append(cur)
    out: list[str] = []
    for item in (s.strip() for s in items):
        if not item:
            continue
        if "{" in item:
            head, rest = item.split("{", 1)
            out.extend(flatten(prefix + "::" + head.strip().rstrip(":").rstrip(":"), rest.rsplit("}", 1)[0]))
        else:
            out.append(prefix + "::" + item.split(" as ")[0].strip())
    return out


def resolve(mod: tuple[str, ...], is_dir_mod: bool, path: str, modules: set) -> tuple[str, ...] | None:
    head, *rest = path.split("::")
    if head == "crate":
        base: list[str] = []
    else:
        # `super` of a file module is its parent folder's module; of a `mod.rs` the one above.
        base = list(mod) if is_dir_mod or head == "self" else list(mod[:-1])
        while rest and rest[0] == "super":
            base = base[:-1]
            rest = rest[1:]
        if head == "super" and is_dir_mod:
            base = base[:-1]
    parts = base + [p for p in rest if p != "self"]
    best = None
    for n in range(len(parts), -1, -1):
        cand = tuple(parts[:n])
        if cand in modules:
            best = cand
            break
    return best


def crate_graph(src: Path) -> dict[tuple[str, ...], set[tuple[str, ...]]]:
    files = {module_of(src, f): f for f in src.rglob("*.rs")}
    modules = set(files)
    graph: dict[tuple[str, ...], set[tuple[str, ...]]] = {m: set() for m in modules}
    for mod, f in files.items():
        if f.name == "tests.rs" or f.stem.endswith("_tests") or "tests" in mod[:-1]:
            continue
        text = strip_comments(f.read_text(encoding="utf-8"))
        # Code under #[cfg(test)] tests the module from anywhere.
        text = re.split(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", text)[0]
        is_dir_mod = f.name in ("mod.rs", "lib.rs", "main.rs")
        paths = [m.group(1) + m.group(2) for m in PATH_RE.finditer(text)] + expand_groups(text)
        for p in paths:
            target = resolve(mod, is_dir_mod, p, modules)
            if target is None or target == mod:
                continue
            # A parent declaring or re-exporting its own children is structure, not use.
            if is_dir_mod and target[: len(mod)] == mod:
                continue
            graph[mod].add(target)
    return graph


def cycles(graph: dict) -> list[list]:
    """Tarjan's strongly connected components of more than one module."""
    index: dict = {}
    low: dict = {}
    stack: list = []
    on: set = set()
    out: list[list] = []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def name(m: tuple[str, ...]) -> str:
    return "::".join(m) or "(root)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--leaf", action="append", default=[], help="a folder that must import nothing outside it")
    ap.add_argument("crates", nargs="*", help="crate folders (default: every crate of the workspace)")
    args = ap.parse_args()
    crates = [ROOT / c for c in args.crates] or sorted(
        p.parent for p in list(ROOT.glob("crates/*/src")) + list(ROOT.glob("bindings/*/src"))
    )
    failed = False
    for crate in crates:
        src = crate / "src"
        graph = crate_graph(src)
        for comp in cycles(graph):
            failed = True
            rel = crate.relative_to(ROOT)
            print(f"{rel}: modules in a cycle: {', '.join(name(m) for m in comp)}")
            for m in comp:
                inside = sorted(name(t) for t in graph[m] if t in comp)
                print(f"    {name(m)} -> {', '.join(inside)}")
        for leaf in args.leaf:
            leaf_dir = ROOT / leaf
            if src not in leaf_dir.parents:
                continue
            prefix = module_of(src, leaf_dir / "mod.rs")
            for m, deps in sorted(graph.items()):
                if m[: len(prefix)] != prefix:
                    continue
                for t in sorted(deps):
                    if t[: len(prefix)] != prefix:
                        failed = True
                        print(f"{leaf}: {name(m)} names {name(t)}, outside the leaf layer")
    if not failed:
        leaves = f"; leaf layers hold: {', '.join(args.leaf)}" if args.leaf else ""
        print(f"check-modules: no module cycles{leaves}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
