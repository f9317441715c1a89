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

pydantic plugins: on the first model it builds, pydantic scans the entry points of every
installed distribution for plugins (``importlib.metadata``: 25–40 ms of a one-shot ``run`` in a
venv with the test extras). acagent's models are its own internals, not something a pydantic
plugin is meant to observe, so :func:`main` sets ``PYDANTIC_DISABLE_PLUGINS=__all__`` (pydantic's
documented switch) for this process when the user has not set the variable; the name is in
:data:`ADDED_ENV`, and ``tools/_env.py`` ``scrubbed_env`` leaves it out of the environment of
the commands tools run, so the user's programs see their own environment. pydantic's plugin
loader module imports ``importlib.metadata`` at its top even when plugins are off (≈15 ms of
CPU, nothing else on a one-shot turn loads it), so with the switch set by :func:`main`,
:func:`_plugin_loader_stand_in` takes the module's place: its ``get_plugins`` returns no plugins
while the switch says so, exactly what pydantic's own does then, and hands every other call and
name to the real module (imported then).
"""

from __future__ import annotations

import _signal  # not `signal`: importing it imports enum (milliseconds a Ctrl-C could hit)
import gc
import os
import sys
import types
from typing import Any

__all__ = ["ADDED_ENV", "main", "settled", "started"]

ADDED_ENV: set[str] = set()
"""Environment variables :func:`main` set for this process only (tools' commands do not get them)."""

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


_PLUGIN_LOADER = "pydantic.plugin._loader"
_PLUGINS_OFF = ("__all__", "1", "true")
"""``PYDANTIC_DISABLE_PLUGINS`` values with which pydantic's ``get_plugins`` returns no plugins."""


def _plugin_loader_stand_in() -> types.ModuleType:
    """A stand-in for ``pydantic.plugin._loader`` that does not import ``importlib.metadata``.

    ``get_plugins()`` is ``()`` while ``PYDANTIC_DISABLE_PLUGINS`` disables all plugins (what the
    real one returns then); otherwise, and for any other name, the real module is imported in
    the stand-in's place and answers.
    """
    module = types.ModuleType(_PLUGIN_LOADER, "acagent's stand-in: no plugin scan (see acagent/_entry.py).")

    def real() -> types.ModuleType:
        if sys.modules.get(_PLUGIN_LOADER) is module:
            del sys.modules[_PLUGIN_LOADER]
        import importlib

        loaded = importlib.import_module(_PLUGIN_LOADER)
        parent = sys.modules.get("pydantic.plugin")
        if parent is not None:
            parent._loader = loaded  # type: ignore[attr-defined]
        return loaded

    def get_plugins() -> Any:
        if os.environ.get("PYDANTIC_DISABLE_PLUGINS") in _PLUGINS_OFF:
            return ()
        return real().get_plugins()

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):  # the import system's probes (``__path__``): a plain module
            raise AttributeError(name)
        return getattr(real(), name)

    module.get_plugins = get_plugins  # type: ignore[attr-defined]
    module._plugins = None  # type: ignore[attr-defined]  # "never scanned", like the real one's
    module.__getattr__ = __getattr__  # type: ignore[method-assign]
    return module


def _standard_streams() -> None:
    """A closed stdin, stdout or stderr (``acagent run x <&-``) becomes /dev/null.

    Python leaves ``sys.stdin`` None for a closed descriptor (every read or ``isatty()`` was a
    traceback), and the next file opened would take the descriptor (the journal or a tool's
    file written through as stdout).
    """
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            stream = open(fd, mode, encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115 (lives as long as the process)
            setattr(sys, name, stream)


def _os_error(exc: BaseException) -> OSError | None:
    """The OSError that ended the program, also inside exception groups (a task's write)."""
    from acagent.errors import leaf_exception

    if isinstance(exc, BaseExceptionGroup):
        exc = leaf_exception(exc.subgroup(OSError) or exc)
    return exc if isinstance(exc, OSError) else None


def main() -> None:
    """Console-script entry point (see the module docstring).

    An OSError that reaches the top (stdout is a closed pipe, ``run --json | head -1``, or a full
    disk, ``> /dev/full``) is one line and exit 1, never a traceback.
    """
    from acagent._allocator import adopt, reexec_daemon

    reexec_daemon()  # `acagent serve` only: returns unless the daemon should run on glibc malloc
    adopt()
    if gc.isenabled():
        gc.disable()
        _gc_held.append(True)
    if "PYDANTIC_DISABLE_PLUGINS" not in os.environ:
        os.environ["PYDANTIC_DISABLE_PLUGINS"] = "__all__"
        ADDED_ENV.add("PYDANTIC_DISABLE_PLUGINS")
        if "pydantic" not in sys.modules:
            sys.modules.setdefault(_PLUGIN_LOADER, _plugin_loader_stand_in())
    _signal.signal(_signal.SIGINT, _quiet_exit)
    _standard_streams()
    from acagent.cli import main as cli_main

    try:
        cli_main()
    except (OSError, BaseExceptionGroup) as exc:
        err = _os_error(exc)
        if err is None:
            raise
        where = f" ({err.filename})" if err.filename else (" (writing the output)" if err.errno == 32 else "")
        os.write(2, f"acagent: error: {err.strerror or err}{where}\n".encode(errors="backslashreplace"))
        # The interpreter's own flush at exit would fail again on the same stream.
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        raise SystemExit(1) from None
