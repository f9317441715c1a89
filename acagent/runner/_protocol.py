"""What drives a session: the :class:`AgentRunner` protocol."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol

from acagent.events import Event

__all__ = ["AgentRunner"]


class AgentRunner(Protocol):
    """What the registry, the CLI and the daemon use to drive a session."""

    session_id: str

    async def step(self, user_input: str | None, *, idempotency_key: str | None = None) -> str:
        """Start a turn with ``user_input`` (or finish an interrupted one with ``None``); return its
        turn id. ``idempotency_key``: stored with the user message (a hash of the client's key)."""
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
