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

__all__ = ["app", "fail", "models_app", "sessions_app", "version"]

HELP_OPTIONS = {"help_option_names": ["-h", "--help"]}

app = typer.Typer(
    name="acagent",
    help="A coding/chat agent whose sessions outlive any process. With no command: `acagent chat`.",
    no_args_is_help=False,
    invoke_without_command=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings=HELP_OPTIONS,
)
sessions_app = typer.Typer(
    help="List, show, rename, remove, export and import sessions.",
    no_args_is_help=True,
    context_settings=HELP_OPTIONS,
)
models_app = typer.Typer(
    help="Local models: list and pull.", no_args_is_help=True, context_settings=HELP_OPTIONS
)
app.add_typer(sessions_app, name="sessions")
app.add_typer(models_app, name="models")


def version() -> str:
    """acagent's installed version (``pyproject.toml`` ``[project] version``)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("acagent")
    except PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"


def _print_version(value: bool) -> None:
    if value:
        sys.stdout.write(f"acagent {version()}\n")
        raise typer.Exit(0)


@app.callback()
def _root(
    ctx: typer.Context,
    show_version: bool = typer.Option(
        False, "--version", "-V", help="Print the version and exit.", is_eager=True, callback=_print_version
    ),
) -> None:
    """A coding/chat agent whose sessions outlive any process. With no command: `acagent chat`."""
    if ctx.invoked_subcommand is None:  # a bare `acagent` starts chat with its defaults
        from acagent.cli._chat import chat_command

        ctx.invoke(chat_command)


def fail(message: str, code: int = 1) -> NoReturn:
    """Print ``acagent: error: <message>`` on stderr (one line: line breaks become spaces) and
    exit with ``code``."""
    message = " ".join(part.strip() for part in message.splitlines() if part.strip())
    sys.stderr.write(f"acagent: error: {message}\n")
    sys.stderr.flush()
    raise typer.Exit(code)
