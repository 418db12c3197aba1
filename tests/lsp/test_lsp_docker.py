"""`sandboxd lsp` on the Docker runtime's languages: a failing Node.js script, a Go panic and
a Java exception, each mapped to the workspace line that failed, through the embedded
service with `SANDBOX_DOCKER_ENABLED` (images from `sandboxd images build`, which the test
script runs first). Run when WASMSAND_TEST_DOCKER=1 (scripts/test.sh's lsp stage, after it
started the engine)."""

import asyncio
import os

import pytest

from lsp_client import SANDBOXD, Session, write

pytestmark = [
    pytest.mark.skipif(SANDBOXD is None, reason="no sandboxd (WASMSAND_SANDBOXD_BIN)"),
    pytest.mark.skipif(os.environ.get("WASMSAND_TEST_DOCKER") != "1", reason="no Docker engine (WASMSAND_TEST_DOCKER=1)"),
]

DOCKER_ENV = {
    "SANDBOX_DOCKER_ENABLED": "true",
    "SANDBOX_DOCKER_INSTANCE": f"lsp-test-{os.getpid()}",
}


def lens_run(files, lens_file, expect_file, expect_line, expect_message, image_hint):
    async def go(root):
        write(root, files)
        async with Session(root, env=DOCKER_ENV) as s:
            [lens] = await s.lenses(lens_file)
            spec = dict(lens.command.arguments[0])
            assert spec["base_image"] == image_hint, spec
            spec["timeout_sec"] = 300
            spec["startup_timeout_sec"] = 300
            started, done = await s.run(spec, timeout=600)
            assert done["exit_code"] not in (0, None), done
            uri = s.uri(expect_file)
            assert uri in s.diagnostics, (s.diagnostics, s.logs)
            d = s.diagnostics[uri][0]
            assert d.range.start.line == expect_line - 1, (d, s.logs)
            assert d.message.startswith(expect_message), d.message
            assert done["diagnostics"][0]["mapped"] is True
            return started

    return go


def test_a_failing_node_script_maps_to_the_throwing_line(tmp_path):
    files = {
        "app.js": "const lib = require('./lib/util');\nconsole.log('start');\nlib.check(-1);\n",
        "lib/util.js": "exports.check = function (n) {\n  if (n < 0) {\n    throw new RangeError('negative: ' + n);\n  }\n};\n",
    }
    asyncio.run(lens_run(files, "app.js", "lib/util.js", 3, "RangeError: negative: -1", "node")(tmp_path))


def test_a_go_panic_maps_to_the_panicking_line(tmp_path):
    files = {
        "go.mod": "module example.com/p\n\ngo 1.19\n",
        "main.go": "package main\n\nimport \"fmt\"\n\nfunc divide(a, b int) int {\n\tif b == 0 {\n\t\tpanic(fmt.Sprintf(\"divide %d by zero\", a))\n\t}\n\treturn a / b\n}\n\nfunc main() {\n\tfmt.Println(divide(6, 0))\n}\n",
    }
    asyncio.run(lens_run(files, "main.go", "main.go", 7, "panic: divide 6 by zero", "golang")(tmp_path))


def test_a_java_exception_maps_through_its_package_path(tmp_path):
    files = {
        "src/com/acme/App.java": "package com.acme;\n\npublic class App {\n    static void check(int n) {\n        if (n < 0) throw new IllegalArgumentException(\"negative \" + n);\n    }\n\n    public static void main(String[] args) {\n        check(-2);\n    }\n}\n",
    }
    asyncio.run(
        lens_run(files, "src/com/acme/App.java", "src/com/acme/App.java", 5,
                 "java.lang.IllegalArgumentException: negative -2", "openjdk:17")(tmp_path)
    )
