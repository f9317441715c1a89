"""RunnerEventBus: synchronous publish, bounded per-subscriber queues, drop-and-count.

One bus per session runner. The journal commits an event first; then the runner calls
:meth:`RunnerEventBus.publish`, which is synchronous and never blocks: each subscriber owns a
bounded queue (a ``deque`` and a wake-up event); a full queue counts a drop for that subscriber
only. A subscriber takes what is queued without a trip through the event loop per event (as
``asyncio.Queue.get`` does; an anyio memory stream checkpoints on every receive, which held a
burst to ~17 % of a raw ``asyncio.Queue`` fan-out) and sleeps only when its queue is empty. A subscriber whose drops reach ``evict_after_drops`` is evicted: its stream
is closed, its iteration ends, and :attr:`Subscription.evicted_reason` tells it to re-attach with
``since=<last seq it saw>`` (the journal fills the gap). :meth:`RunnerEventBus.close` closes every
send side, ending every ``async for``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import anyio

from acagent.events import Event
from acagent.obs import metrics

__all__ = ["RunnerEventBus", "Subscription"]

EVICT_REASON = "subscriber fell too far behind; re-attach with since=<last seq received>"


@dataclass(eq=False)
class Subscription:
    """A subscriber's view of the bus: async-iterate it for :class:`Event` items."""

    name: str
    maxsize: int
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
    _ended: bool = field(default=False)
    """No more events will be queued (bus closed, evicted, halted, unsubscribed)."""
    _queue: deque[Event] = field(default_factory=deque)
    _waiter: anyio.Event | None = None

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._iter()

    async def _iter(self) -> AsyncIterator[Event]:
        try:
            while True:
                yield await self.receive()
        except anyio.EndOfStream:
            return
        finally:
            self.close()

    async def receive(self) -> Event:
        """The next event (at once when one is queued).

        Raises:
            anyio.EndOfStream: the bus closed or evicted this subscriber and its queue is empty.
        """
        while not self._queue:
            if self._ended:
                raise anyio.EndOfStream
            self._waiter = waiter = anyio.Event()
            await waiter.wait()
        return self._queue.popleft()

    async def receive_batch(self, limit: int = 1024) -> list[Event]:
        """Every queued event, at most ``limit`` (waits while none is queued): a consumer that
        handles a burst at once (one transcript write for many deltas) takes it in one call.

        Raises:
            anyio.EndOfStream: the bus closed or evicted this subscriber and its queue is empty.
        """
        queue = self._queue
        while not queue:
            if self._ended:
                raise anyio.EndOfStream
            self._waiter = waiter = anyio.Event()
            await waiter.wait()
        if len(queue) <= limit:
            batch = list(queue)
            queue.clear()
            return batch
        return [queue.popleft() for _ in range(limit)]

    def _put(self, event: Event) -> bool:
        """Queue ``event`` (False when the queue is full)."""
        if len(self._queue) >= self.maxsize:
            return False
        self._queue.append(event)
        self._wake()
        return True

    def _wake(self) -> None:
        if self._waiter is not None:
            self._waiter.set()
            self._waiter = None

    def _end(self) -> None:
        """No more events: the iteration ends once the queue is drained."""
        self._ended = True
        self._wake()

    def close(self) -> None:
        """Unsubscribe (idempotent); anything still queued is discarded."""
        if not self._closed:
            self._closed = True
            self._bus._remove(self)
            self._queue.clear()
            self._end()

    @property
    def queued(self) -> int:
        """Events waiting in this subscriber's queue."""
        return len(self._queue)


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
        sub = Subscription(
            name=name,
            maxsize=maxsize,
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
            if sub._put(event):
                sub.delivered += 1
                sub.last_seq = event.seq
                continue
            sub.dropped += 1
            metrics().bus_dropped()
            if sub.evict_after_drops is not None and sub.dropped >= sub.evict_after_drops:
                sub.evicted_reason = EVICT_REASON
                self._remove(sub)
                sub._end()

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
                sub._end()

    def close(self) -> None:
        """Close the bus; every subscriber's iteration ends after its queued events."""
        self._closed = True
        for sub in list(self._subs):
            sub._end()
        self._subs.clear()
