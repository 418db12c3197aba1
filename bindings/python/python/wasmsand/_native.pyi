"""Type stubs of the Rust extension module."""

from typing import Callable

__version__: str

class NativeDispatcher:
    """One root sandbox and its forks, in this process, answering JSON-RPC text."""

    def __init__(self) -> None: ...
    def call(self, request: str, on_notify: Callable[[str], None] | None = None) -> str | None:
        """Answers one JSON-RPC request (GIL released while it runs)."""
    def set_request_handler(self, handler: Callable[[str, str], str]) -> None:
        """Answers the dispatcher's calls to the client (host tools), JSON in and out."""
    def set_notification_handler(self, handler: Callable[[str], None]) -> None:
        """Receives every background process's notifications (``process.output``,
        ``process.exit``) as JSON text."""
    def is_killed(self) -> bool:
        """Whether ``kill`` has run."""

def sandboxd_main(argv: list[str]) -> int:
    """Runs the sandboxd server on this process's stdin/stdout."""

def limit_specs() -> str:
    """The limits registry as JSON: ``[{name, wire, default, unit, doc}]``."""
