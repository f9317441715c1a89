"""RunnerEventBus: synchronous publish, bounded per-subscriber queues, drop-and-count.

One bus per session runner. The journal commits an event first; then the runner calls
:meth:`RunnerEventBus.publish`, which is synchronous and never blocks: each subscriber owns a
bounded ``anyio`` memory object stream, ``send_nowait`` raising ``WouldBlock`` counts a drop for
that subscriber only. A subscriber whose drops reach ``evict_after_drops`` is evicted: its stream
is closed, its iteration ends, and :attr:`Subscription.evicted_reason` tells it to re-attach with
``since=<last seq it saw>`` (the journal fills the gap). :meth:`RunnerEventBus.close` closes every
send side, ending every ``async for``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from acagent.events import Event
from acagent.obs import metrics

__all__ = ["RunnerEventBus", "Subscription"]

EVICT_REASON = "subscriber fell too far behind; re-attach with since=<last seq received>"


@dataclass(eq=False)
class Subscription:
    """A subscriber's view of the bus: async-iterate it for :class:`Event` items."""

    name: str
    _send: MemoryObjectSendStream[Event]
    _recv: MemoryObjectReceiveStream[Event]
    _bus: RunnerEventBus
    dropped: int = 0
    """Events dropped because this subscriber's queue was full."""
    delivered: int = 0
    evicted_reason: str | None = None
    """Set when the bus evicted this subscriber (its iteration then ends)."""
    last_seq: int = 0
    """Highest seq handed to this subscriber's queue."""
    evict_after_drops: int | None = None
    ends_on_halt: bool = False
    """A live view (attach, stream) that :meth:`RunnerEventBus.halt` ends with an error."""
    error: BaseException | None = None
    """Set by :meth:`RunnerEventBus.halt`: why this subscriber's iteration ended."""
    _closed: bool = field(default=False)

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._iter()

    async def _iter(self) -> AsyncIterator[Event]:
        try:
            async for event in self._recv:
                yield event
        finally:
            self.close()

    async def receive(self) -> Event:
        """The next event.

        Raises:
            anyio.EndOfStream: the bus closed or evicted this subscriber.
        """
        return await self._recv.receive()

    def close(self) -> None:
        """Unsubscribe (idempotent)."""
        if not self._closed:
            self._closed = True
            self._bus._remove(self)
            self._send.close()
            self._recv.close()

    @property
    def queued(self) -> int:
        """Events waiting in this subscriber's queue."""
        return self._recv.statistics().current_buffer_used


class RunnerEventBus:
    """Fan-out of one session's committed events to its subscribers.

    Args:
        session_id: the session whose events this bus carries.
    """

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.last_seq = 0
        self.published = 0
        self._subs: list[Subscription] = []
        self._closed = False

    @property
    def subscribers(self) -> list[Subscription]:
        """Live subscriptions (a copy)."""
        return list(self._subs)

    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._closed

    def subscribe(
        self,
        name: str,
        maxsize: int = 256,
        *,
        evict_after_drops: int | None = None,
        ends_on_halt: bool = False,
    ) -> Subscription:
        """Add a subscriber with a bounded queue of ``maxsize`` events.

        Args:
            name: label for logs and statistics.
            maxsize: queue bound, in events.
            evict_after_drops: evict the subscriber once it has dropped this many events
                (``None``: only drop and count). Stream attachers use 1: a gap cannot be
                repaired in-stream, so they are closed and re-attach with ``since``.
            ends_on_halt: :meth:`halt` ends this subscriber with its error (live views); other
                subscribers (the transcript writer) keep their subscription.

        Raises:
            RuntimeError: the bus is closed.
        """
        if self._closed:
            raise RuntimeError(f"bus for session {self.session_id!r} is closed")
        send, recv = anyio.create_memory_object_stream[Event](maxsize)
        sub = Subscription(
            name=name,
            _send=send,
            _recv=recv,
            _bus=self,
            evict_after_drops=evict_after_drops,
            ends_on_halt=ends_on_halt,
        )
        self._subs.append(sub)
        return sub

    def publish(self, event: Event) -> None:
        """Hand a committed event to every subscriber without blocking.

        Raises:
            ValueError: ``event.seq`` is not greater than the last published seq, or the event
                belongs to another session.
        """
        if event.session_id != self.session_id:
            raise ValueError(f"event of session {event.session_id!r} published on bus {self.session_id!r}")
        if event.seq <= self.last_seq:
            raise ValueError(f"seq {event.seq} not after {self.last_seq} on session {self.session_id!r}")
        self.last_seq = event.seq
        self.published += 1
        for sub in list(self._subs):
            try:
                sub._send.send_nowait(event)
            except anyio.WouldBlock:
                sub.dropped += 1
                metrics().bus_dropped()
                if sub.evict_after_drops is not None and sub.dropped >= sub.evict_after_drops:
                    sub.evicted_reason = EVICT_REASON
                    self._remove(sub)
                    sub._send.close()
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._remove(sub)
            else:
                sub.delivered += 1
                sub.last_seq = event.seq

    def _remove(self, sub: Subscription) -> None:
        if sub in self._subs:
            self._subs.remove(sub)

    def halt(self, error: BaseException) -> None:
        """End every ``ends_on_halt`` subscriber after its queued events, with ``error`` set (a
        turn stopped without recording its end: watchers must learn it, not wait forever)."""
        for sub in list(self._subs):
            if sub.ends_on_halt:
                sub.error = error
                self._remove(sub)
                sub._send.close()

    def close(self) -> None:
        """Close the bus; every subscriber's iteration ends after its queued events."""
        self._closed = True
        for sub in list(self._subs):
            sub._send.close()
        self._subs.clear()
