"""Attach to a session: the journal replay, then the live bus, joined at a seam without gaps or repeats."""

from __future__ import annotations

from collections.abc import AsyncIterator

from acagent.bus import RunnerEventBus
from acagent.errors import SubscriberEvicted
from acagent.events import Event
from acagent.store import Journal

__all__ = ["replay_then_live"]

PAGE = 1000
"""Events read from the journal per replay query."""


async def replay_then_live(
    journal: Journal,
    bus: RunnerEventBus,
    session_id: str,
    name: str,
    since: int = 0,
    *,
    maxsize: int = 1024,
) -> AsyncIterator[Event]:
    """Every committed event of ``session_id`` with seq > ``since`` exactly once, in order, then
    live events from ``bus``.

    The bus subscription is taken before the journal replay, so nothing committed meanwhile is
    missed; events already replayed are skipped by seq at the seam (the de-duplication the
    attach tests check on raw frames).

    Raises:
        TurnHalted: the session's turn stopped in this process without recording its end.
        SubscriberEvicted: the subscriber fell more than ``maxsize`` events behind (re-attach
            with its last seq).
    """
    sub = bus.subscribe(name, maxsize=maxsize, evict_after_drops=1, ends_on_halt=True)
    last = since
    try:
        while True:
            page = await journal.events(session_id, last, limit=PAGE)
            for event in page:
                yield event
                last = event.seq
            if len(page) < PAGE:
                break
        async for event in sub:
            if event.seq <= last:
                continue
            yield event
            last = event.seq
        if sub.error is not None:
            raise sub.error
        if sub.evicted_reason:
            raise SubscriberEvicted(last, dropped=sub.dropped)
    finally:
        sub.close()
