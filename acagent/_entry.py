"""The program's entry point: Ctrl-C during start-up is a quiet exit 130, never a traceback.

Start-up imports a lot (typer, rich, the command modules, then what a command needs): a SIGINT
while they run used to end in a ``KeyboardInterrupt`` traceback from inside an import. So the
first thing the program does (``acagent`` console script and ``python -m acagent``) is to make
SIGINT exit at once with status 130 and one line; :func:`started` (called by the CLI when a
command's own event loop starts, ``cli/_common.py`` ``run_async``) hands SIGINT back to Python,
from where each command's own Ctrl-C handling takes over (a running turn is cancelled and
journaled as the user's cancel). Nothing is written to the journal before that point, so
exiting from the handler loses nothing. The interpreter's own initialisation, before any
acagent code runs, is Python's.
"""

from __future__ import annotations

import _signal  # not `signal`: importing it imports enum (milliseconds a Ctrl-C could hit)
import os

__all__ = ["main", "started"]


def _quiet_exit(signum: int, frame: object) -> None:
    os.write(2, b"\nacagent: interrupted\n")
    os._exit(130)


def started() -> None:
    """Start-up is over: SIGINT raises ``KeyboardInterrupt`` again (a no-op when not installed)."""
    if _signal.getsignal(_signal.SIGINT) is _quiet_exit:
        _signal.signal(_signal.SIGINT, _signal.default_int_handler)


def main() -> None:
    """Console-script entry point (see the module docstring)."""
    _signal.signal(_signal.SIGINT, _quiet_exit)
    from acagent.cli import main as cli_main

    cli_main()
