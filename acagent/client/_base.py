"""SessionClient: what a front end (``run``, ``chat``, ``attach``, the web page's server side)
needs from a session, whether the session runs in this process or in a daemon.

Both implementations deliver the same :class:`~acagent.events.Event` envelopes, so the terminal
renderer and ``--json`` output are identical in-process and through ``acagent serve``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol

import orjson
from pydantic import ConfigDict

from acagent.events import Event

__all__ = ["ReplayedEvent", "SessionClient"]


class ReplayedEvent(Event):
    """A pending ``approval.requested`` re-sent on (re)connect (F14); its seq may be ≤ ``since``."""

    model_config = ConfigDict(defer_build=True)  # built on the first replay, not at every start
    replay: bool = True

    def to_dict(self) -> dict[str, Any]:
        """The envelope plus ``"replay": true``."""
        return {**super().to_dict(), "replay": True}

    def to_json_bytes(self) -> bytes:
        """Compact JSON of :meth:`to_dict`."""
        return orjson.dumps(self.to_dict())


class SessionClient(Protocol):
    """One session, seen from a front end."""

    session_id: str

    async def send(self, text: str | None) -> str:
        """Start a turn with ``text`` (``None``: finish an interrupted turn); return the turn id.

        Raises:
            SessionBusy: a turn is running.
            ConcurrencyCap: the instance is full.
        """
        ...

    async def cancel(self, *, turn_id: str | None = None) -> None:
        """Cancel the running turn (from any state); ``turn_id``: only that turn — a turn that is
        over by the time the request lands is left alone, and so is any later turn."""
        ...

    async def answer(self, tool_call_id: str, decision: str, *, answer: str | None = None) -> None:
        """Answer an approval (``allow``/``deny``/``always``) or a question (``answer``).

        Raises:
            ApprovalNotFound: unknown or already resolved.
        """
        ...

    def events(self, since: int = 0) -> AsyncIterator[Event]:
        """Every event with seq > ``since`` exactly once, in order, then live events (forever;
        a remote client reconnects by itself with its last seq)."""
        ...

    async def snapshot(self) -> dict[str, Any]:
        """``GET /v1/sessions/{id}``: status, last_seq, pending_approvals, usage, …"""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...
