"""Command-line interface: ``acagent chat | run | serve | attach | sessions | models | doctor``."""

from __future__ import annotations

from acagent.cli._app import app

__all__ = ["app", "main"]


def _load_commands() -> None:
    import importlib

    for name in ("_run", "_chat", "_sessions", "_serve", "_attach", "_models", "_doctor", "_usage", "_mcp", "_compact"):
        try:
            importlib.import_module(f"acagent.cli.{name}")
        except ModuleNotFoundError as exc:  # a command module not written yet
            if exc.name != f"acagent.cli.{name}":
                raise


def _configure_logging() -> None:
    """Warnings and errors as one line on stderr; tracebacks only with ``ACAGENT_DEBUG=1``."""
    import logging
    import os

    debug = os.environ.get("ACAGENT_DEBUG") == "1"

    class _Short(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:
            if not debug:
                record.exc_info = None
                record.exc_text = None
            return super().format(record)

    handler = logging.StreamHandler()
    handler.setFormatter(_Short("acagent: %(levelname)s: %(message)s"))
    root = logging.getLogger("acagent")
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if debug else logging.WARNING)
    root.propagate = False


def main() -> None:
    """Console-script entry point."""
    _configure_logging()
    _load_commands()
    app(prog_name="acagent")
