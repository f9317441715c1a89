"""Command-line interface: ``acagent chat | run | serve | attach | sessions | models | doctor``."""

from __future__ import annotations

from acagent.cli._app import app

__all__ = ["app", "main"]


_MODULES = (
    "_run",
    "_chat",
    "_sessions",
    "_serve",
    "_attach",
    "_models",
    "_doctor",
    "_usage",
    "_mcp",
    "_compact",
)
_COMMAND_MODULE = {
    "run": "_run",
    "chat": "_chat",
    "sessions": "_sessions",
    "export": "_sessions",
    "import": "_sessions",
    "serve": "_serve",
    "status": "_serve",
    "attach": "_attach",
    "models": "_models",
    "doctor": "_doctor",
    "usage": "_usage",
    "mcp": "_mcp",
    "compact": "_compact",
}
"""Command name → the module that defines it (``acagent run …`` imports ``_run`` only)."""
_SETTLE_IN_OPEN_CLIENT = (None, "run", "chat")
"""Commands (None: a bare ``acagent``, which is chat) whose start-up goes on into
``open_client``, which calls :func:`acagent._entry.settled` once the session is open; every
other command settles right after its module is imported."""


def _command_word(argv: list[str] | None) -> str | None:
    """The command named by ``argv``: its first non-option word (the root takes no option with
    a value), or None."""
    return next((a for a in (argv or []) if not a.startswith("-")), None)


def _load_commands(argv: list[str] | None = None) -> None:
    """Register the commands: only the invoked one's module when ``argv`` names a command
    (the root takes no option with a value, so its first non-option word is the command), else
    all of them (``--help``, a typo, no command)."""
    import importlib

    word = _command_word(argv)
    names = (_COMMAND_MODULE[word],) if word in _COMMAND_MODULE else _MODULES
    for name in names:
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
    import sys

    from acagent._entry import settled

    _configure_logging()
    _load_commands(sys.argv[1:])
    if _command_word(sys.argv[1:]) not in _SETTLE_IN_OPEN_CLIENT:
        settled()
    app(prog_name="acagent")
