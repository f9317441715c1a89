"""``Idempotency-Key`` on a single daemon: a retried POST gets the first answer, not a second turn.

A client that lost the answer to ``POST /v1/sessions/{id}/messages`` (a timeout, a reset
connection) cannot know whether the turn started; retrying without a key would start a second
turn and pay for a second LLM call. With the same ``Idempotency-Key`` the retry gets the answer
of the first request (the same ``turn_id``), whether the first is still being applied or done.
The semantics follow the IETF draft "The Idempotency-Key HTTP Header Field"
(https://datatracker.ietf.org/doc/draft-ietf-httpapi-idempotency-key-header/): a key is scoped to
the request (here: session, kind of input and key), and only a successful answer is kept (a
refusal such as 409 ``session_busy`` is answered again by re-applying the request). A key sent
again with a different body (another text, another tool call's approval) is refused with 422
``idempotency_key_reused``, as the draft says: answering it with the first answer would report a
message as accepted that was never applied.

In a cluster (PostgreSQL) the journal's inbox rows give the same guarantee across daemons
(:mod:`acagent.server._inbox`); this cache is the single-daemon path. Keys live in memory for
``idempotency_ttl_s`` (at most ``idempotency_keys`` answered ones, oldest dropped first; a key
still in flight is never dropped for a newer one). Both bounds are daemon limits
(:class:`~acagent.server._limits.Limits`).

A message's key also goes into the journal, hashed, in its ``user.message`` event
(:func:`key_digest`), in the transaction that accepts the message. So when the daemon that
accepted a message stops before its answer reaches the client (killed, crashed, restarted), the
client's retry to the next daemon is recognised (:func:`journaled_turn`) and gets the first
turn's id — not a 409 while the recovered turn runs, and not a second turn (and LLM call) once it
has ended. The lookup reads the session's newest :data:`JOURNALED_KEYS` user messages, within
``idempotency_ttl_s``.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio

from acagent.errors import IdempotencyKeyReused

if TYPE_CHECKING:
    from acagent.store import Journal

__all__ = ["JOURNALED_KEYS", "IdempotencyCache", "journaled_turn", "key_digest"]

#: How many of a session's newest user messages :func:`journaled_turn` looks a key up in.
JOURNALED_KEYS = 32


def key_digest(key: str, auto_approve: bool = False) -> str:
    """The form of an ``Idempotency-Key`` the journal stores: 32 hex digits of its blake2b hash
    (the key itself is the client's and never stored). The message's other body field,
    ``auto_approve``, is folded in when true (so a digest written without it reads as false), and
    :func:`journaled_turn` tells a retry with another ``auto_approve`` from a new key (F135)."""
    material = key + "\x00auto_approve" if auto_approve else key
    return hashlib.blake2b(material.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def _reused(key: str) -> IdempotencyKeyReused:
    return IdempotencyKeyReused(
        f"Idempotency-Key {key!r} was first sent with a different request body; a new request needs a new key"
    )


async def journaled_turn(
    journal: Journal, session_id: str, key: str, text: str, *, ttl_s: float, auto_approve: bool = False
) -> str | None:
    """The id of the turn the journal accepted with message key ``key`` in the last ``ttl_s``
    seconds (among the session's newest :data:`JOURNALED_KEYS` user messages), or None.

    Raises:
        IdempotencyKeyReused: that message had another text or another ``auto_approve`` (what the
            in-memory cache refuses too, so a restart does not change the answer).
    """
    flags = {key_digest(key, False): False, key_digest(key, True): True}
    now = time.time()
    for event in await journal.last_events(session_id, ("user.message",), JOURNALED_KEYS):
        flag = flags.get(event.payload.get("idempotency_key"))  # type: ignore[arg-type]
        if flag is None:
            continue
        if now - _epoch(event.ts) > ttl_s:
            return None  # expired, as in the cache: the request is new
        if event.payload.get("text") != text or flag != auto_approve:
            raise _reused(key)
        turn_id = event.payload.get("turn_id")
        return turn_id if isinstance(turn_id, str) else None
    return None


def _epoch(ts: str) -> float:
    """Seconds since the epoch of an event's ISO 8601 ``ts`` (UTC when it names no zone)."""
    try:
        when = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        return 0.0  # unreadable: treated as expired
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


class _Entry:
    __slots__ = ("answer", "body", "done", "expires_at")

    def __init__(self, expires_at: float, body: object) -> None:
        self.done = anyio.Event()
        self.answer: dict[str, Any] | None = None
        self.expires_at = expires_at
        self.body = body


class IdempotencyCache:
    """First answers by ``(session_id, kind, key)``.

    Args:
        max_keys: how many answered keys are kept (the oldest is dropped beyond it; keys in
            flight are kept too).
        ttl_s: how long a key is kept, seconds.
    """

    def __init__(self, max_keys: int, ttl_s: float) -> None:
        self.max_keys = max_keys
        self.ttl_s = ttl_s
        self._entries: OrderedDict[tuple[str, str, str], _Entry] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    async def apply(
        self,
        scope: tuple[str, str, str],
        fn: Callable[[], Awaitable[dict[str, Any]]],
        body: object = None,
    ) -> dict[str, Any]:
        """``fn()``'s answer, or the first answer for ``scope`` when there is one.

        A request with a key already in flight waits for it and gets its answer; if the first one
        failed (raised), the waiter applies the request itself. Errors raised by ``fn`` propagate
        and are not kept. ``body``: what the request asks (compared with ``==``).

        Raises:
            IdempotencyKeyReused: ``scope``'s key was first sent with another ``body``.
        """
        while True:
            self._expire(time.monotonic())
            entry = self._entries.get(scope)
            if entry is None:
                break
            if entry.body != body:
                raise _reused(scope[2])
            await entry.done.wait()
            if entry.answer is not None:
                return dict(entry.answer)
            # the first attempt failed and was forgotten: apply it now (loop: another may have)
        entry = _Entry(time.monotonic() + self.ttl_s, body)
        self._entries[scope] = entry
        self._drop_oldest_done()
        try:
            entry.answer = await fn()
        except BaseException:
            if self._entries.get(scope) is entry:
                del self._entries[scope]
            raise
        finally:
            entry.done.set()
        return dict(entry.answer)

    def _drop_oldest_done(self) -> None:
        """Drop the oldest answered keys beyond ``max_keys``. A key still in flight is kept (moved
        to the newest end): dropping it would let its retry apply the request a second time."""
        for _ in range(len(self._entries)):
            if len(self._entries) <= self.max_keys:
                return
            scope, entry = self._entries.popitem(last=False)
            if not entry.done.is_set():
                self._entries[scope] = entry

    def _expire(self, now: float) -> None:
        while self._entries:
            oldest = next(iter(self._entries.values()))
            if oldest.expires_at > now:
                return
            self._entries.popitem(last=False)
