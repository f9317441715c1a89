"""Process-group cleanup for the shell tool and for crash recovery.

The shell tool starts ``bash -c`` in its own session, so the bash pid is also the id of a
process group (pgid) holding every process the command starts, unless a process leaves the
group on purpose (``setsid``, ``nohup ... &`` with a new session): such deliberate detachment is
out of scope.

A group is killed politely first: SIGTERM (and SIGCONT, so stopped members can act on it), a
grace period, then SIGKILL. A member counts as dead when it no longer exists or is a zombie
(state ``Z`` in ``/proc/<pid>/stat``): a zombie runs no code and only waits for its parent to
reap it.

:func:`kill_process_group` is what recovery calls for groups recorded in the journal
(``on_process_started``) whose owner process died.

**Record and start are one step (F45).** The pgid is only known after the spawn, so a process
killed between the spawn and the commit recording it would leave an orphan nobody can find. So
every tool process is started with :data:`SPAWN_MARKER_VAR` set to :func:`spawn_marker` — a value
derived from the ids of the ``tool_call`` row, which is committed ``running`` *before* the spawn.
Recovery calls :func:`kill_call_processes`, which kills the recorded group (if any) and every
process whose initial environment (``/proc/<pid>/environ``) carries the marker, with its whole
process group. Covered: a crash at any instant around the spawn (the marker is in the environment
``execve`` receives, so the process never runs without it). Not covered: a descendant that both
leaves the group (``setsid``) and execs with a cleared environment (``env -i``) — deliberate
detachment, out of scope as above. After a crash the pgid may have been reused by an unrelated
group: recovery passes the recorded group only while the call's run lease holds
(``ToolCallRow.trusted_pgid``), and relies on the marker alone afterwards.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import anyio

from acagent._pids import pid_alive

__all__ = [
    "SPAWN_MARKER_VAR",
    "group_members",
    "kill_call_processes",
    "kill_process_group",
    "marked_processes",
    "pid_alive",
    "spawn_marker",
]

SPAWN_MARKER_VAR = "ACAGENT_TOOL_CALL"
"""Environment variable every tool process starts with: ``<session_id>/<tool_call_id>`` (F45)."""

_POLL_S = 0.05


def _stat_fields(pid: int) -> tuple[str, int] | None:
    """``(state, pgrp)`` of a pid from ``/proc/<pid>/stat``, or None if it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    except OSError:
        return None
    # "pid (comm) state ppid pgrp ..."; comm may hold spaces and parentheses.
    rest = raw[raw.rfind(b")") + 2 :].split()
    try:
        return rest[0].decode(), int(rest[2])
    except (IndexError, ValueError):
        return None


def group_members(pgid: int) -> list[int]:
    """Pids of the live (non-zombie) members of process group ``pgid``.

    Uses ``/proc`` on Linux; elsewhere returns ``[pgid]`` if ``killpg(pgid, 0)`` succeeds
    (which may count zombies as alive).
    """
    proc = Path("/proc")
    if not (proc / "self" / "stat").exists():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return []
        except PermissionError:
            return [pgid]
        return [pgid]
    members = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        if fields is not None and fields[1] == pgid and fields[0] not in ("Z", "X"):
            members.append(int(entry.name))
    return members


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


async def _wait_group_dead(pgid: int, timeout_s: float) -> bool:
    with anyio.move_on_after(max(timeout_s, 0.0)):
        while group_members(pgid):
            await anyio.sleep(_POLL_S)
    return not group_members(pgid)


async def kill_process_group(pgid: int, grace_s: float) -> bool:
    """Terminate every process of group ``pgid``: SIGTERM + SIGCONT, wait, then SIGKILL.

    Safe to call for a group that is already gone. Runs to completion even if the caller is
    being cancelled (the body is shielded), so it can be awaited from cancel cleanup.

    Args:
        pgid: the process group id (the pid of the shell the tool started).
        grace_s: seconds to wait after SIGTERM before SIGKILL.

    Returns:
        True if no live member remains afterwards; False (and nothing signalled) for a
        ``pgid`` of 0 or 1 or the caller's own process group.
    """
    if pgid <= 1 or pgid == os.getpgrp():  # never our own group (0 means it too) or init's
        return False
    with anyio.CancelScope(shield=True):
        dead = await _terminate(pgid, grace_s)
    return dead


async def _terminate(pgid: int, grace_s: float) -> bool:
    if not group_members(pgid):
        return True
    _signal_group(pgid, signal.SIGTERM)
    _signal_group(pgid, signal.SIGCONT)
    if await _wait_group_dead(pgid, grace_s):
        return True
    _signal_group(pgid, signal.SIGKILL)
    return await _wait_group_dead(pgid, 1.0)


def spawn_marker(session_id: str, tool_call_id: str) -> str:
    """The :data:`SPAWN_MARKER_VAR` value of a tool call's processes."""
    return f"{session_id}/{tool_call_id}"


def marked_processes(marker: str) -> list[int]:
    """Pids of live processes started with ``SPAWN_MARKER_VAR=marker`` (Linux ``/proc``; [] elsewhere)."""
    needle = f"{SPAWN_MARKER_VAR}={marker}".encode()
    found = []
    for entry in Path("/proc").iterdir() if Path("/proc/self/environ").exists() else ():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:  # gone, or another user's
            continue
        if needle in environ.split(b"\0") and pid_alive(int(entry.name)):
            found.append(int(entry.name))
    return found


async def kill_call_processes(session_id: str, tool_call_id: str, pgid: int | None, grace_s: float) -> int:
    """Kill everything a tool call started: its recorded group and every marked process's group.

    Args:
        session_id: the session.
        tool_call_id: the call (with ``session_id`` it makes the :func:`spawn_marker`).
        pgid: the group recorded in the journal, if any.
        grace_s: seconds between SIGTERM and SIGKILL.

    Returns:
        How many process groups were signalled.
    """
    groups = [pgid] if pgid else []
    for pid in marked_processes(spawn_marker(session_id, tool_call_id)):
        fields = _stat_fields(pid)
        if fields is not None and fields[1] not in groups:
            groups.append(fields[1])
    killed = 0
    for group in groups:
        if group_members(group) and await kill_process_group(group, grace_s):
            killed += 1
    for pid in marked_processes(spawn_marker(session_id, tool_call_id)):  # left its group
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return killed
