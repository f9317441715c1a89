"""The typer application object shared by every command module.

Each command lives in its own module (``_run.py``, ``_chat.py``, ...): it parses options, builds
:class:`~acagent.settings.Settings`, calls ``anyio.run`` on a library function and turns an
:class:`~acagent.errors.AcagentError` into a one-line message and an exit code (:func:`fail`).
Heavy modules (SDKs, FastAPI, prompt_toolkit) are imported inside the command functions so
``acagent --help`` stays fast.
"""

from __future__ import annotations

import sys
from typing import NoReturn

import typer

__all__ = ["app", "fail", "models_app", "sessions_app"]

app = typer.Typer(
    name="acagent",
    help="A coding/chat agent whose sessions outlive any process.",
    no_args_is_help=False,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
sessions_app = typer.Typer(help="List, show, export and import sessions.", no_args_is_help=True)
models_app = typer.Typer(help="Local models: list and pull.", no_args_is_help=True)
app.add_typer(sessions_app, name="sessions")
app.add_typer(models_app, name="models")


def fail(message: str, code: int = 1) -> NoReturn:
    """Print ``acagent: error: <message>`` on stderr (one line) and exit with ``code``."""
    sys.stderr.write(f"acagent: error: {message}\n")
    sys.stderr.flush()
    raise typer.Exit(code)
