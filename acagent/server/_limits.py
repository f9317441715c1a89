"""Every resource limit of the daemon, in one place (docs/daemon.md "Limits" lists them).

:class:`Limits` is a frozen dataclass of defaults; ``acagent serve --limit NAME=VALUE`` (any
number of times) overrides one field (:meth:`Limits.with_overrides`). The pieces that enforce
them live here too, so a limit and its enforcement are read together:

- :class:`ConnectionTracker` — concurrent TCP connections per client address (checked in the
  HTTP protocol's ``connection_made``, before any byte is parsed) and the header read timeout;
- :class:`BodyLimit` — an ASGI middleware that refuses a request body above ``max_body_bytes``
  with ``413 body_too_large``: from ``Content-Length`` without reading the body, or while reading
  a chunked body incrementally (at most the limit is ever buffered);
- :class:`FrameRate` — a token bucket for frames a WebSocket client sends (the message size is
  uvicorn's ``ws_max_size``, set from ``ws_max_message_bytes``);
- the attacher caps (``max_attachers_per_session``, ``max_attachers_total``) are checked by
  :meth:`acagent.server._reaper.Reaper.admit` when a stream connects (``429 too_many_attachers``).

The bucket and the counters are a few lines each; a library (``limits``, ``slowapi``) would add a
dependency for per-request rate limiting, which is not what is limited here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "BodyLimit",
    "ConnectionTracker",
    "FrameRate",
    "Limits",
    "envelope_bytes",
    "header_timeout_response",
    "header_too_large_response",
    "raise_open_files_limit",
    "request_head_bytes",
]


@dataclass(frozen=True)
class Limits:
    """The daemon's limits (seconds, bytes or counts as the name says). Defaults in docs/daemon.md.

    Attributes:
        header_timeout_s: a connection must deliver a complete request head within this time
            (from connect, and again after each response); else ``408`` and close (slowloris).
        max_connections_per_client: concurrent TCP connections from one client address;
            beyond it a new connection is answered ``429 too_many_connections`` and closed.
        max_body_bytes: a request body above this is refused with ``413 body_too_large``
            (the API's bodies are JSON; 1 MiB).
        max_header_bytes: a request head (request line and header fields) above this is
            refused with ``431 header_too_large`` and the connection closed (h11's incomplete
            event bound, so at most this much of a head is ever buffered).
        max_attachers_per_session: stream connections (WebSocket + SSE) on one session.
        max_attachers_total: stream connections on the whole daemon.
        ws_max_message_bytes: a larger frame from a WebSocket client closes it (1009).
        ws_messages_per_s: sustained frames per second a WebSocket client may send (the daemon
            ignores their content); beyond the burst the connection is closed (1008).
        ws_burst: frames a client may send at once before the rate applies.
        queue_events: bound of each attacher's bus queue (F08): larger than the writer's
            largest group commit (5,000 deltas published at once); an overflow evicts.
        send_timeout_s: a send blocked longer than this closes the stream (a stalled peer).
        keepalive_s: SSE comment interval without events (WebSocket uses protocol pings).
        close_grace_s: how long a close frame / final SSE event may wait for a stalled peer.
        reaper_tick_s: how often the one reaper task checks every stream (evictions, send
            deadlines, keep-alives): the only periodic per-connection work.
        idempotency_keys: ``Idempotency-Key`` answers a single daemon keeps (the oldest is
            dropped beyond it; :mod:`acagent.server._idempotency`).
        idempotency_ttl_s: how long such an answer is kept.
    """

    header_timeout_s: float = 10.0
    max_connections_per_client: int = 1024
    max_body_bytes: int = 1024 * 1024
    max_header_bytes: int = 64 * 1024
    max_attachers_per_session: int = 256
    max_attachers_total: int = 2048
    ws_max_message_bytes: int = 64 * 1024
    ws_messages_per_s: float = 20.0
    ws_burst: int = 100
    queue_events: int = 8192
    send_timeout_s: float = 30.0
    keepalive_s: float = 15.0
    close_grace_s: float = 30.0
    reaper_tick_s: float = 0.25
    idempotency_keys: int = 10_000
    idempotency_ttl_s: float = 24 * 3600.0

    def with_overrides(self, pairs: Iterable[str]) -> Limits:
        """A copy with ``NAME=VALUE`` overrides (``--limit``), each converted to the field's type.

        Raises:
            ValueError: unknown name, missing ``=``, a value of the wrong type, or not positive.
        """
        fields = {f.name: f for f in dataclasses.fields(self)}
        changes: dict[str, Any] = {}
        for pair in pairs:
            name, sep, value = pair.partition("=")
            name = name.strip().replace("-", "_")
            if not sep or name not in fields:
                raise ValueError(
                    f"--limit {pair!r}: expected NAME=VALUE with NAME one of {', '.join(fields)}"
                )
            kind = int if isinstance(getattr(self, name), int) else float
            try:
                number = kind(value)
            except ValueError:
                what = "a whole number" if kind is int else "a number"
                raise ValueError(f"--limit {pair!r}: {name} takes {what}") from None
            if not math.isfinite(number) or number <= 0:  # nan / inf switched the limit off (F125)
                raise ValueError(f"--limit {pair!r}: {name} must be a positive finite number")
            changes[name] = number
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        """Every limit by name (``GET /v1/debug/stats`` shows them)."""
        return dataclasses.asdict(self)


def envelope_bytes(code: str, message: str, detail: Any = None) -> bytes:
    """The error envelope as JSON bytes."""
    return orjson.dumps({"error": {"code": code, "message": message, "detail": detail}})


def raw_response(status: int, reason: str, body: bytes) -> bytes:
    """A complete ``Connection: close`` HTTP/1.1 answer written before any request is parsed."""
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


class ConnectionTracker:
    """Concurrent connections per client address (``max_connections_per_client``).

    A connection counts from ``connection_made`` until its transport closes, whatever protocol
    then owns it (an upgraded WebSocket keeps counting): the HTTP protocol and the WebSocket
    protocol each call :meth:`release` from ``connection_lost``, and closing transports are also
    pruned when the address reaches its cap, so a close path that slips past both still frees
    its slot.
    """

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._by_client: dict[str, set[Any]] = {}
        self.refused = 0
        """Connections refused by the per-client cap (``GET /v1/debug/stats``)."""

    def admit(self, client: str, transport: Any) -> bool:
        """Count ``transport`` for ``client``; False (and not counted) when the cap is reached."""
        live = self._by_client.setdefault(client, set())
        if len(live) >= self.limits.max_connections_per_client:
            for t in [t for t in live if t.is_closing()]:
                live.discard(t)
            if len(live) >= self.limits.max_connections_per_client:
                self.refused += 1
                return False
        live.add(transport)
        return True

    def release(self, client: str, transport: Any) -> None:
        """Stop counting ``transport`` (called when it closes as plain HTTP)."""
        live = self._by_client.get(client)
        if live is not None:
            live.discard(transport)
            if not live:
                self._by_client.pop(client, None)

    def count(self, client: str) -> int:
        """Open connections of ``client`` (prunes closed ones)."""
        live = self._by_client.get(client, set())
        for t in [t for t in live if t.is_closing()]:
            live.discard(t)
        return len(live)

    def tracked(self) -> int:
        """Connections held in the count, every address (no pruning: what the sets hold now)."""
        return sum(len(live) for live in self._by_client.values())

    def refusal(self) -> bytes:
        """The ``429 too_many_connections`` answer."""
        n = self.limits.max_connections_per_client
        body = envelope_bytes(
            "too_many_connections",
            f"this client already has {n} connections open to the daemon; close some and retry",
            {"limit": n},
        )
        return raw_response(429, "Too Many Requests", body)


def header_timeout_response(limits: Limits) -> bytes:
    """The ``408 header_timeout`` answer of a connection that did not send its request head."""
    body = envelope_bytes(
        "header_timeout",
        f"the request head was not received within {limits.header_timeout_s:g} s",
        {"limit_s": limits.header_timeout_s},
    )
    return raw_response(408, "Request Timeout", body)


def header_too_large_response(limits: Limits, received: int) -> bytes:
    """The ``431 header_too_large`` answer of a request whose head outgrew ``max_header_bytes``."""
    body = envelope_bytes(
        "header_too_large",
        f"the request head is larger than {limits.max_header_bytes} bytes (max_header_bytes):"
        " send fewer or smaller header fields (a large cookie?)",
        {"limit_bytes": limits.max_header_bytes, "received_bytes": received},
    )
    return raw_response(431, "Request Header Fields Too Large", body)


def raise_open_files_limit(ceiling: int = 65536) -> int:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit (at most ``ceiling``); return the new soft limit.

    The usual soft limit (1,024) is no higher than ``max_connections_per_client``: a connection
    flood made ``accept()`` fail with EMFILE (one asyncio traceback per attempt in the log) before
    the cap could answer ``429 too_many_connections``. What the hard limit allows is the user's
    own choice, so only the soft one is raised (as Go's runtime does for every program).
    """
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = ceiling if hard == resource.RLIM_INFINITY else min(hard, ceiling)
    if soft != resource.RLIM_INFINITY and soft < target:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            return target
    return soft


_HEAD_END = re.compile(b"\n\r?\n")  # where h11 ends a request head (it accepts bare LF too)


def request_head_bytes(pending: bytes | bytearray, data: bytes) -> int:
    """Length in bytes of the request head in ``pending + data`` (all of it if the head goes on).

    ``pending`` is what the parser holds of an unfinished head, ``data`` what just arrived. Only
    ``data`` and the last 3 pending bytes are searched, so a head trickled in many reads costs
    O(size) in total. h11's own limit (``max_incomplete_event_size``) only applies to a head that
    is still incomplete after a read: a 100 KB head arriving in one read was parsed whole.
    """
    keep = bytes(pending[-3:])
    found = _HEAD_END.search(keep + data)
    seen = len(keep) + len(data)
    return len(pending) - len(keep) + (found.end() if found else seen)


_BODYLESS = frozenset({"GET", "HEAD", "OPTIONS", "DELETE"})


class BodyLimit:
    """ASGI middleware: request bodies above ``limit`` get ``413 body_too_large`` (module docstring).

    A declared ``Content-Length`` above the limit is refused before a byte of the body is read.
    Otherwise the body is read incrementally up to the limit (a chunked upload that goes past it
    is refused at that point) and replayed to the application. Answers carry ``Connection:
    close``, so the rest of an oversized upload is never read.
    """

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def _refuse(self, send: Send) -> None:
        body = envelope_bytes(
            "body_too_large",
            f"the request body exceeds the daemon's limit of {self.limit} bytes",
            {"limit_bytes": self.limit},
        )
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") in _BODYLESS:
            await self.app(scope, receive, send)
            return
        for key, value in scope.get("headers", []):
            if key == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = 0  # h11 refuses a malformed Content-Length before this runs
                if declared > self.limit:
                    await self._refuse(send)
                    return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away while sending
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await self._refuse(send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        replay: list[Message] = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]

        async def replay_receive() -> Message:
            if replay:
                return replay.pop()
            return await receive()

        await self.app(scope, replay_receive, send)


class FrameRate:
    """A token bucket: ``rate`` frames per second sustained, ``burst`` at once.

    Args:
        rate: tokens added per second.
        burst: bucket size.
    """

    __slots__ = ("_last", "_tokens", "burst", "rate")

    def __init__(self, rate: float, burst: int) -> None:
        self.rate = rate
        self.burst = float(burst)
        self._tokens = float(burst)
        self._last = time.monotonic()

    def take(self) -> bool:
        """Spend one token; False when the bucket is empty (the client sends too fast)."""
        now = time.monotonic()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
        self._last = now
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        return True
