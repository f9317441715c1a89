"""Command-line interface: ``acagent chat | run | serve | attach | sessions | models | doctor``."""

from __future__ import annotations

from acagent.cli._app import app

__all__ = ["app", "main"]


def _load_commands() -> None:
    import importlib

    for name in ("_run", "_chat", "_sessions", "_serve", "_attach", "_models", "_doctor"):
        try:
            importlib.import_module(f"acagent.cli.{name}")
        except ModuleNotFoundError as exc:  # a command module not written yet
            if exc.name != f"acagent.cli.{name}":
                raise


def main() -> None:
    """Console-script entry point."""
    _load_commands()
    app()
