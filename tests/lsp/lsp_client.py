"""A real LSP client (pygls's) driving `sandboxd lsp` over stdio, with what the tests read back:
published diagnostics, the `tldw/sandbox/*` notifications, `$/progress` and messages."""

import asyncio
import os
import pathlib
import shutil

from lsprotocol import types
from pygls.lsp.client import LanguageClient

SANDBOXD = os.environ.get("WASMSAND_SANDBOXD_BIN") or shutil.which("sandboxd")


def as_dict(v):
    """pygls hands custom notifications over as attribute objects; tests want plain data."""
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, (list, tuple)) and not hasattr(v, "_fields"):
        return [as_dict(x) for x in v]
    if isinstance(v, dict):
        return {k: as_dict(x) for k, x in v.items()}
    if hasattr(v, "_asdict"):
        return {k: as_dict(x) for k, x in v._asdict().items()}
    if hasattr(v, "__dict__"):
        return {k: as_dict(x) for k, x in vars(v).items()}
    return v


class Session:
    """One `sandboxd lsp` process and the client talking to it."""

    def __init__(self, root: pathlib.Path, args=(), env=None, tldw=True):
        self.root = root
        self.args = list(args)
        self.env = env
        self.tldw = tldw
        self.client = LanguageClient("wasmsand-tests", "1")
        self.diagnostics = {}
        self.diag_events = asyncio.Queue()
        self.finished = asyncio.Queue()
        self.logs = []
        self.log_messages = []
        self.progress = []
        self.shown = []
        c = self.client

        @c.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def _diags(params):
            self.diagnostics[params.uri] = params.diagnostics
            self.diag_events.put_nowait((params.uri, params.diagnostics))

        @c.feature("tldw/sandbox/runFinished")
        def _finished(params):
            self.finished.put_nowait(as_dict(params))

        @c.feature("tldw/sandbox/log")
        def _log(params):
            self.logs.append(as_dict(params))

        @c.feature(types.WINDOW_LOG_MESSAGE)
        def _log_message(params):
            self.log_messages.append(params.message)

        @c.feature(types.WINDOW_SHOW_MESSAGE)
        def _show(params):
            self.shown.append(params.message)

        @c.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)
        def _create(params):
            return None

        @c.feature(types.PROGRESS)
        def _progress(params):
            self.progress.append(as_dict(params.value))

    async def __aenter__(self):
        env = dict(os.environ)
        env.update(self.env or {})
        await self.client.start_io(SANDBOXD, "lsp", *self.args, env=env)
        self.init = await asyncio.wait_for(
            self.client.initialize_async(
                types.InitializeParams(
                    process_id=os.getpid(),
                    root_uri=self.root.as_uri(),
                    capabilities=types.ClientCapabilities(
                        window=types.WindowClientCapabilities(work_done_progress=True)
                    ),
                    initialization_options={"tldwNotifications": self.tldw},
                )
            ),
            120,
        )
        self.client.initialized(types.InitializedParams())
        return self

    async def __aexit__(self, *exc):
        try:
            await asyncio.wait_for(self.client.shutdown_async(None), 30)
            self.client.exit(None)
        finally:
            await asyncio.wait_for(self.client.stop(), 30)

    def uri(self, rel: str) -> str:
        return (self.root / rel).as_uri()

    async def command(self, name: str, *arguments):
        return await asyncio.wait_for(
            self.client.workspace_execute_command_async(
                types.ExecuteCommandParams(command=name, arguments=list(arguments))
            ),
            120,
        )

    async def run(self, spec=None, timeout=180):
        """`tldw.sandbox.run`, then the run's `runFinished`."""
        args = [] if spec is None else [spec]
        started = as_dict(await self.command("tldw.sandbox.run", *args))
        done = await asyncio.wait_for(self.finished.get(), timeout)
        assert done["run_id"] == started["run_id"], (started, done)
        return started, done

    async def lenses(self, rel: str):
        return await asyncio.wait_for(
            self.client.text_document_code_lens_async(
                types.CodeLensParams(
                    text_document=types.TextDocumentIdentifier(uri=self.uri(rel))
                )
            ),
            30,
        )

    def open(self, rel: str, language: str):
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(
                    uri=self.uri(rel),
                    language_id=language,
                    version=1,
                    text=(self.root / rel).read_text(),
                )
            )
        )

    def change(self, rel: str, text: str, version=2):
        # What was published before the change is not its answer.
        while not self.diag_events.empty():
            self.diag_events.get_nowait()
        (self.root / rel).write_text(text)
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(
                    uri=self.uri(rel), version=version
                ),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )

    async def next_diagnostics(self, uri: str, timeout=30):
        while True:
            got_uri, diags = await asyncio.wait_for(self.diag_events.get(), timeout)
            if got_uri == uri:
                return diags


def write(root: pathlib.Path, files: dict):
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
