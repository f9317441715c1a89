"""What drives a session (the :class:`AgentRunner` protocol) and the lease holder liveness check."""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator
from typing import Any, Protocol

from acagent.events import Event

__all__ = ["AgentRunner", "pid_is_dead"]


def pid_is_dead(host: str | None, pid: int | None) -> bool:
    """True if ``pid`` on this host no longer exists or is a zombie (a crashed lease holder).

    Another host's pid, pid 0/None and this process's own pid are never "dead" (unknowable, or
    alive). A pid this user may not signal (``EPERM``) exists.
    """
    if host != socket.gethostname() or not pid:
        return False
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:  # a zombie is dead too
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


class AgentRunner(Protocol):
    """What the registry, the CLI and the daemon use to drive a session."""

    session_id: str

    async def step(self, user_input: str | None) -> str:
        """Start a turn with ``user_input`` (or finish an interrupted one with ``None``); return its turn id."""
        ...

    def interrupt(self, reason: str = "user", *, turn_id: str | None = None) -> None:
        """Cancel the running turn (only ``turn_id`` when given; no-op when idle)."""
        ...

    async def stop(self) -> None:
        """Interrupt (reason ``shutdown``) and wait for the turn to end."""
        ...

    async def snapshot(self) -> dict[str, Any]:
        """Status, last seq, pending approvals, usage."""
        ...

    def subscribe(self, name: str, since: int = 0) -> AsyncIterator[Event]:
        """Committed events with seq > ``since`` (journal replay), then live events."""
        ...

    @property
    def is_busy(self) -> bool:
        """True while a turn runs in this process."""
        ...
