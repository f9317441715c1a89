"""The daemon's memory allocator: glibc ``malloc``, so the memory of hibernated runners goes back.

CPython's own small-object allocator (pymalloc) carves 1 MiB arenas into 16 KiB pools and
returns an arena to the system only when every block in it is free. A daemon that wakes
thousands of sessions fills new arenas with their runners; when the runners hibernate, a few
longer-lived objects made meanwhile (a timer, a cache entry, a free-list tuple) keep nearly
every one of those arenas, and the process stays at its high-water mark. Measured with
``python -m benchmarks.daemon_stream`` (issue 12, target 6; 10,000 sessions woken by an attach,
all in memory at once, then hibernated): the pymalloc daemon kept 22.8 MB (2.3 KB a session,
the pools of each arena empty, the arena held by a handful of blocks); with
``PYTHONMALLOC=malloc``, glibc's ``malloc_trim`` (called after each hibernation pass,
``server/_state.py`` :func:`release_memory`) hands the free pages back whatever is left around
them: 8.8 MB (0.9 KB a session, about a third of it SQLite's page cache filling up).

The allocator is chosen when the interpreter starts, so ``acagent serve`` re-executes itself
once, first thing (:func:`reexec_daemon`, called by ``acagent/_entry.py`` before anything else
is imported), with ``PYTHONMALLOC=malloc``: same process id, same arguments, same descriptors.
The re-executed daemon removes the variable from its environment at once (:func:`adopt`), so
the commands its tools run and the MCP servers it starts inherit the user's environment
unchanged. (A larger glibc per-thread cache, ``GLIBC_TUNABLES=glibc.malloc.tcache_count=1024``,
won back some CPU but the cached chunks are never trimmed: 34 MB kept in the same run.)

Only on glibc Linux (``malloc_trim`` is glibc's); ``ACAGENT_DAEMON_ALLOCATOR=pymalloc`` keeps
CPython's default, and a ``PYTHONMALLOC`` the user set is always left alone. The cost is CPU:
glibc ``malloc`` is slower than pymalloc for Python's small objects, about 20 % more daemon CPU
per streamed delta in the same benchmark (0.046 against 0.038 ms, under its 0.1 ms target).
Reported as ``allocator`` in ``GET /v1/debug/stats``.
"""

from __future__ import annotations

import os
import sys

__all__ = ["ALLOCATOR_ENV", "adopt", "allocator", "reexec_daemon"]

ALLOCATOR_ENV = "ACAGENT_DAEMON_ALLOCATOR"
"""``malloc`` (default on glibc Linux) or ``pymalloc``: the allocator of ``acagent serve``."""

_ADDED = "ACAGENT_ALLOCATOR_ADDED"
"""Set by :func:`reexec_daemon` for the re-executed process: the variables it added, comma-separated."""

_chosen: list[str] = []
"""The allocator :func:`adopt` found (empty before it ran)."""


def _glibc() -> bool:
    try:
        return sys.platform.startswith("linux") and (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith(
            "glibc"
        )
    except (ValueError, OSError):  # no such confstr name: not glibc
        return False


def _serving(argv: list[str]) -> bool:
    """``acagent serve ...`` that will serve (not ``--stop``, not ``--help``), started as the
    console script or ``python -m acagent``: what :data:`sys.orig_argv` can start again. A program
    read from stdin (``python -``) or given with ``-c`` cannot be re-run (tester F8)."""
    args = argv[1:]
    if not args or args[0] != "serve" or {"--stop", "--help", "-h"} & set(args[1:]):
        return False
    orig = list(sys.orig_argv)
    if "-c" in orig or "-" in orig:
        return False
    return ("-m" in orig and "acagent" in orig) or os.path.isfile(argv[0])


def reexec_daemon(argv: list[str] | None = None) -> None:
    """Re-execute this process with glibc ``malloc`` when it is a daemon that should have it.

    Returns (doing nothing) unless ``argv`` (default ``sys.argv``) is a serving ``acagent serve``
    on glibc Linux, ``PYTHONMALLOC`` is unset, ``ACAGENT_DAEMON_ALLOCATOR`` is not ``pymalloc``
    and this process is not already the re-executed one. Otherwise it does not return: the
    process image is replaced (``os.execv``; an ``OSError`` there is ignored and the daemon runs
    on pymalloc).
    """
    argv = sys.argv if argv is None else argv
    env = os.environ
    if (
        _ADDED in env
        or "PYTHONMALLOC" in env
        or env.get(ALLOCATOR_ENV, "malloc") == "pymalloc"
        or not _serving(argv)
        or not _glibc()
        or not sys.executable
        or not sys.orig_argv
        or sys.flags.ignore_environment  # `python -E`/`-I`: PYTHONMALLOC would not be read
    ):
        return
    new_env = dict(env, PYTHONMALLOC="malloc")
    new_env[_ADDED] = "PYTHONMALLOC"
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
    try:
        os.execve(sys.executable, list(sys.orig_argv), new_env)
    except OSError:
        return


def adopt() -> str:
    """Record this process's allocator and remove what :func:`reexec_daemon` added to the environment.

    Returns:
        ``"malloc"`` or ``"pymalloc"`` (what ``PYTHONMALLOC`` chose when this interpreter started).
    """
    added = os.environ.pop(_ADDED, None)
    chosen = _started_with()
    for name in (added or "").split(","):
        if name == "PYTHONMALLOC":
            os.environ.pop(name, None)
    _chosen[:] = [chosen]
    return chosen


def _started_with() -> str:
    """What this environment's ``PYTHONMALLOC`` chooses: ``"malloc"`` or ``"pymalloc"``."""
    return "malloc" if os.environ.get("PYTHONMALLOC", "") in ("malloc", "malloc_debug") else "pymalloc"


def allocator() -> str:
    """``"malloc"`` or ``"pymalloc"``: the allocator this process runs on."""
    return _chosen[0] if _chosen else _started_with()
