"""LocalSessionClient: a :class:`SessionClient` over an in-process :class:`SessionRegistry`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from acagent.client._base import ReplayedEvent
from acagent.errors import CursorAhead
from acagent.events import Event
from acagent.runner import SessionRegistry, SubscriberEvicted

__all__ = ["LocalSessionClient"]


class LocalSessionClient:
    """Drive a session through the registry of this process.

    Args:
        registry: the process's registry.
        session_id: the session.
    """

    def __init__(self, registry: SessionRegistry, session_id: str) -> None:
        self.registry = registry
        self.session_id = session_id

    async def send(self, text: str | None) -> str:
        """See :meth:`SessionClient.send`."""
        _, turn_id = await self.registry.start_turn(self.session_id, text)
        return turn_id

    async def cancel(self, reason: str = "user", *, turn_id: str | None = None) -> None:
        """See :meth:`SessionClient.cancel`; ``reason`` goes to ``turn.interrupted``."""
        await self.registry.cancel(self.session_id, reason, turn_id=turn_id)

    async def answer(self, tool_call_id: str, decision: str, *, answer: str | None = None) -> None:
        """See :meth:`SessionClient.answer`."""
        runner = await self.registry.get_runner(self.session_id)
        await runner.answer_approval(tool_call_id, decision, answer=answer)

    async def events(self, since: int = 0) -> AsyncIterator[Event]:
        """See :meth:`SessionClient.events`; re-subscribes from the last seq if evicted.

        Raises:
            CursorAhead: ``since`` is above the session's last seq (same policy as the daemon).

        Approvals still pending whose request is at or before ``since`` are sent first, so a
        client that attaches late can still answer them (F14).
        """
        last = since
        runner = await self.registry.get_runner(self.session_id)
        if since > runner.bus.last_seq:
            raise CursorAhead(
                f"cursor {since} is ahead of session {self.session_id}'s last seq {runner.bus.last_seq}",
                detail={"since": since, "last_seq": runner.bus.last_seq},
            )
        for event in await self.registry.journal.pending_approval_events(self.session_id):
            if event.seq <= since:
                yield ReplayedEvent(**event.model_dump())
        while True:
            runner = await self.registry.get_runner(self.session_id)
            try:
                async for event in runner.subscribe("local-client", last):
                    last = event.seq
                    yield event
                return
            except SubscriberEvicted as exc:
                last = exc.last_seq

    async def wait_idle(self) -> None:
        """Wait until no turn runs on the session in this process."""
        runner = await self.registry.get_runner(self.session_id)
        await runner.wait()

    async def snapshot(self) -> dict[str, Any]:
        """See :meth:`SessionClient.snapshot`."""
        runner = await self.registry.get_runner(self.session_id)
        return await runner.snapshot()

    async def aclose(self) -> None:
        """Nothing to release (the registry owns the runner)."""
