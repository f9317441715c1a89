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

Garbage collection: start-up builds only long-lived objects (modules, classes, pydantic
schemas, functions: some 45,000 tracked objects with about 600 garbage ones), and CPython's
cyclic collector would traverse the growing heap again and again while they are built (about a
sixth of a one-shot ``run``'s CPU). So :func:`main` turns the collector off first, and
:func:`settled` — called once the command has built what it runs on (``cli/_common.py``
``open_client`` once the session is open; right after the command module is imported for the
other commands) — moves everything built so far into the permanent generation
(:func:`gc.freeze`, never traversed again) and turns the collector back on for the command
proper. Reference counting frees everything else as usual meanwhile.
"""

from __future__ import annotations

import _signal  # not `signal`: importing it imports enum (milliseconds a Ctrl-C could hit)
import gc
import os

__all__ = ["main", "settled", "started"]

_gc_held: list[bool] = []
"""Non-empty while :func:`main` holds the collector off (see the module docstring)."""


def _quiet_exit(signum: int, frame: object) -> None:
    os.write(2, b"\nacagent: interrupted\n")
    os._exit(130)


def started() -> None:
    """Start-up is over: SIGINT raises ``KeyboardInterrupt`` again (a no-op when not installed)."""
    if _signal.getsignal(_signal.SIGINT) is _quiet_exit:
        _signal.signal(_signal.SIGINT, _signal.default_int_handler)


def settled() -> None:
    """Start-up objects are built: freeze them and turn the garbage collector back on.

    A no-op unless :func:`main` turned the collector off (a library user's or a test's own
    collector settings are left alone), and after the first call."""
    if _gc_held:
        _gc_held.clear()
        gc.freeze()
        gc.enable()


def main() -> None:
    """Console-script entry point (see the module docstring)."""
    if gc.isenabled():
        gc.disable()
        _gc_held.append(True)
    _signal.signal(_signal.SIGINT, _quiet_exit)
    from acagent.cli import main as cli_main

    cli_main()
