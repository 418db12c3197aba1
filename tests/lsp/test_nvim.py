"""Neovim's built-in LSP client (Debian's neovim, headless) driving `sandboxd lsp`."""

import json
import os
import shutil
import subprocess

import pytest

from lsp_client import SANDBOXD, write
from test_lsp import APP

NVIM = shutil.which("nvim")
HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.skipif(SANDBOXD is None, reason="no sandboxd (WASMSAND_SANDBOXD_BIN)")
@pytest.mark.skipif(NVIM is None and not os.environ.get("CI"), reason="no nvim (Debian's neovim)")
def test_neovim_runs_the_lens_and_collects_the_diagnostic_then_a_passing_rerun_clears_it(tmp_path):
    ws = tmp_path / "ws"
    write(ws, APP)
    out = tmp_path / "seen.json"
    env = dict(os.environ, WASMSAND_SANDBOXD_BIN=SANDBOXD, LSP_ROOT=str(ws), LSP_OUT=str(out))
    proc = subprocess.run(
        [NVIM or "nvim", "--headless", "-u", "NONE", "-i", "NONE", "-n",
         "-c", f"luafile {os.path.join(HERE, 'nvim_run.lua')}"],
        env=env, capture_output=True, text=True, timeout=600,
    )
    assert out.exists(), proc.stderr
    seen = json.loads(out.read_text())
    assert "lua_error" not in seen, seen
    assert "tldw.sandbox.run" in seen["commands"]
    assert seen["lenses"][0]["command"]["arguments"][0]["command"] == ["python3", "app/main.py"]
    assert seen["started"]["run_id"]
    [d] = seen["failing"]
    assert d["lnum"] == 2, d
    assert d["message"].startswith("ValueError: bad input 3"), d
    assert seen["finished"][1]["exit_code"] == 0, seen["finished"]
    assert seen["passing"] == []
    assert "unknown command" in seen["unknown"]["message"]
