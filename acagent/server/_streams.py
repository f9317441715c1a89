"""Event streams: WebSocket ``/attach`` here and SSE ``/stream`` (:mod:`acagent.server._sse`),
both over :meth:`InProcessRunner.subscribe`.

One pump serves both (:func:`pump`). On connect it first re-sends every pending approval whose
``approval.requested`` event is at or below ``since`` (so a replay would not include it, F14) —
the original envelope with an extra top-level ``"replay": true`` (SSE: without an ``id:`` line,
so ``Last-Event-ID`` never moves backwards). A client does not move its cursor on a replayed
event and drops one it has already shown. Then every durable event with seq > ``since`` exactly
once, in order, then live events (the runner's subscription dedupes the replay→live seam).

Slow consumers (F08): the runner's per-subscriber queue is bounded (``queue_events``) and the bus
evicts a subscriber that overflows it, without ever blocking the producer. The one reaper task
(:mod:`acagent.server._reaper`) notices the eviction even while the connection is blocked in a
send, and closes it: WebSocket close code
4008 with reason ``re-attach with since=<last seq sent>``; SSE an ``event: evicted`` whose data
names the seq. Every send has a deadline (``send_timeout_s``): a peer that stops reading is
closed the same way. Server memory per connection is bounded by the queue plus the transport's
write buffer. SSE sends a comment line (``: keep-alive``, no ``id``) after ``keepalive_s``
without an event; WebSocket relies on protocol pings. Admission (attacher caps) and every
other limit: :mod:`acagent.server._limits`.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import cast

import anyio
import orjson
from starlette.responses import JSONResponse
from starlette.websockets import WebSocket, WebSocketDisconnect

from acagent.errors import AcagentError, SessionNotFound, UserError
from acagent.events import Event
from acagent.obs import metrics
from acagent.runner import InProcessRunner, SubscriberEvicted
from acagent.runner._pins import pinned
from acagent.server._limits import FrameRate
from acagent.server._reaper import StreamConn
from acagent.server._security import REFUSED_HANDSHAKE, SUBPROTOCOL
from acagent.server._state import DaemonState, pending_approval_events

__all__ = [
    "CLOSE_ERROR",
    "CLOSE_EVICTED",
    "CLOSE_RESTART",
    "DISCONNECTED",
    "ERROR_TYPE",
    "RESET_TYPE",
    "attach_websocket",
    "error_json",
    "parse_since",
    "pump",
    "reattach_reason",
    "replay_json",
    "reset_json",
]

log = logging.getLogger("acagent.server")

CLOSE_EVICTED = 4008
"""WebSocket close code for a subscriber that fell behind or stalled; the reason names ``since``."""
DISCONNECTED = (OSError, WebSocketDisconnect)
"""What a send or receive raises when the client went away (uvicorn's ``ClientDisconnected`` is an
``OSError``): the end of a stream, never an error to log."""
CLOSE_POLICY = 1008
"""WebSocket close code for a client that floods the daemon with frames (``ws_messages_per_s``)."""
CLOSE_RESTART = 1012
"""WebSocket close code when the daemon shuts down (service restart)."""
CLOSE_ERROR = 1011
"""WebSocket close code after a ``stream.error`` frame: the stream failed (a journal read error,
F148); re-attaching would fail the same way, so a client shows the error and stops."""
CLOSE_NORMAL = 1000
"""WebSocket close code when the session was removed while attached (reason ``session removed``)."""
MAX_SEQ = 2**62


def parse_since(value: str | None, *, name: str = "since") -> int:
    """Parse a ``since`` cursor (a non-negative integer; absent means 0).

    Raises:
        UserError: not a non-negative integer.
    """
    if value is None or value == "":
        return 0
    text = value.strip()
    if not (text.isascii() and text.isdigit()) or len(text) > 19 or int(text) > MAX_SEQ:
        raise UserError(f"{name} must be a non-negative integer seq, got {value[:40]!r}")
    return int(text)


RESET_TYPE = "stream.reset"
"""Type of the frame that answers a cursor above the session's last seq (not an event: no ``seq``)."""


def reset_json(since: int, last_seq: int) -> bytes:
    """The ``stream.reset`` frame: the client's cursor ``since`` is above ``last_seq``.

    ``{"type": "stream.reset", "code": "cursor_ahead", "since": S, "last_seq": L, "message": …}``.
    The stream continues with the events after ``last_seq``; the client sets its cursor to
    ``last_seq`` (events it holds above it are not in this session's journal).
    """
    return orjson.dumps(
        {
            "type": RESET_TYPE,
            "code": "cursor_ahead",
            "since": since,
            "last_seq": last_seq,
            "message": (
                f"cursor {since} is ahead of the session's last seq {last_seq} (restored from an older"
                f" copy?); continuing from {last_seq}"
            ),
        }
    )


ERROR_TYPE = "stream.error"
"""Type of the WebSocket frame that ends a stream with an error (not an event: no ``seq``)."""


def error_json(exc: AcagentError) -> bytes:
    """The error envelope of ``exc``: ``{"error": {"code", "message", "detail"}}`` as the HTTP API
    answers it (the SSE ``event: error`` data; the WebSocket ``stream.error`` frame adds
    ``"type": "stream.error"``)."""
    return orjson.dumps(exc.to_envelope(), default=str)


def replay_json(event: Event) -> bytes:
    """A re-sent pending approval: the original envelope plus ``"replay": true``."""
    return orjson.dumps({**event.to_dict(), "replay": True})


async def pump(
    state: DaemonState,
    conn: StreamConn,
    *,
    send_event: Callable[[Event, bool], Awaitable[None]],
    send_reset: Callable[[int, int], Awaitable[None]],
    wait_disconnect: Callable[[], Awaitable[None]],
    keepalive: Callable[[], Awaitable[None]] | None = None,
) -> tuple[str, int]:
    """Stream a session to one connection until it ends.

    The connection was admitted by :meth:`Reaper.open`; the reaper ends it (cancelling its task
    group through ``conn.scope``) on eviction, a blocked send or shutdown, and wakes the
    keep-alive. This function unregisters it when it returns.

    Args:
        state: the daemon.
        conn: the admitted connection (its ``since`` is the exclusive cursor).
        send_event: ``(event, replay)`` → sends one event on the connection.
        send_reset: ``(since, last_seq)`` → tells the client its cursor is above the session's
            last seq (``stream.reset``); the stream then continues from ``last_seq``.
        wait_disconnect: returns when the peer went away.
        keepalive: sends a keep-alive (SSE), or None.

    Returns:
        ``(end, last_seq_sent)`` where end is ``disconnected``, ``evicted``, ``timeout``,
        ``shutdown``, ``closed``, ``removed`` or ``error`` (an :class:`AcagentError` such as a
        journal read that failed, kept in ``conn.error``: the front sends it as an error frame,
        never as a restart, F148).
    """
    session_id = conn.session_id
    lock = anyio.Lock() if keepalive is not None else None

    async def timed(fn: Callable[[], Awaitable[None]]) -> None:
        # The send deadline is enforced by the reaper: the hot path only stamps the time, with
        # the clock anyio.current_time() reads on asyncio (loop.time() is time.monotonic()),
        # without its backend lookup on every event.
        if lock is None:
            conn.sending_since = time.monotonic()
            await fn()
        else:
            async with lock:
                conn.sending_since = time.monotonic()
                await fn()
        conn.sending_since = None
        conn.last_activity = time.monotonic()

    try:
        async with anyio.create_task_group() as tg:
            conn.scope = tg.cancel_scope

            async def on_disconnect() -> None:
                with contextlib.suppress(*DISCONNECTED):
                    await wait_disconnect()
                conn.finish("disconnected")

            async def keepalives() -> None:
                assert keepalive is not None
                while True:
                    conn.keepalive_due = due = anyio.Event()
                    await due.wait()
                    try:
                        await timed(keepalive)
                    except DISCONNECTED:
                        conn.finish("disconnected")
                        return

            async def main() -> None:
                try:
                    await _stream(state, conn, send_event, send_reset, timed)
                except SubscriberEvicted:
                    conn.finish("evicted")
                except SessionNotFound:  # removed while attached (F122): its clients are told
                    conn.finish("removed")
                except DISCONNECTED:  # the client went away mid-send: not an error
                    conn.finish("disconnected")
                except AcagentError as exc:  # a journal read failed (F148): an error, never a restart
                    log.warning("%s stream of session %s ended: %s", conn.kind, session_id, exc)
                    if not conn.end:
                        conn.error = exc
                    conn.finish("error")
                except TimeoutError:
                    conn.finish("timeout")
                except RuntimeError:  # the bus closed under us (shutdown)
                    conn.finish("closed")
                else:
                    conn.finish("closed")

            tg.start_soon(on_disconnect)
            if keepalive is not None:
                tg.start_soon(keepalives)
            tg.start_soon(main)
            if state.shutting_down.is_set():
                conn.finish("shutdown")
    finally:
        state.reaper.close(conn)
    _log_end(state, conn)
    return conn.end or "closed", conn.last_seq


async def _stream(
    state: DaemonState,
    conn: StreamConn,
    send_event: Callable[[Event, bool], Awaitable[None]],
    send_reset: Callable[[int, int], Awaitable[None]],
    timed: Callable[[Callable[[], Awaitable[None]]], Awaitable[None]],
) -> None:
    """The stream proper: reset (F30), re-sent approvals (F14), journal replay, then live.

    The runner (an attach's: no transcript read, no context build) is pinned for the whole
    stream, so a hibernation pass between the attach and the subscription cannot close it (F12).
    """
    async with pinned(state.registry, conn.session_id, attach=True) as runner:
        await _stream_runner(state, conn, runner, send_event, send_reset, timed)


async def _stream_runner(
    state: DaemonState,
    conn: StreamConn,
    runner: InProcessRunner,
    send_event: Callable[[Event, bool], Awaitable[None]],
    send_reset: Callable[[int, int], Awaitable[None]],
    timed: Callable[[Callable[[], Awaitable[None]]], Awaitable[None]],
) -> None:
    session_id, since = conn.session_id, conn.since
    cursor = since
    if since > runner.bus.last_seq:
        # A cursor above the session's last seq (a data dir restored from an older copy, a
        # client that mixed up sessions): tell the client where the session stands, then
        # continue from there — never silence.
        cursor = runner.bus.last_seq
        await timed(lambda: send_reset(since, cursor))
        conn.last_seq = cursor
    for event in await pending_approval_events(state.journal, session_id):
        if event.seq <= cursor:
            await timed(lambda e=event: send_event(e, True))  # type: ignore[misc]
    agen = cast(
        AsyncGenerator[Event, None],
        runner.subscribe(conn.name, conn.last_seq, maxsize=state.limits.queue_events),
    )
    try:
        async for event in agen:
            if conn.sub is None:
                # The bus subscription exists once the first event arrives: found once (O(N)
                # once per connection), then the reaper checks it in O(1) each tick.
                conn.sub = next((s for s in runner.bus.subscribers if s.name == conn.name), False)
            await timed(lambda e=event: send_event(e, False))  # type: ignore[misc]
            conn.last_seq = event.seq
            conn.sent += 1
    finally:
        conn.sub = None
        await agen.aclose()


def _log_end(state: DaemonState, conn: StreamConn) -> None:
    lim = state.limits
    if conn.end == "evicted":
        state.evictions += 1
        metrics().client_evicted()
        log.warning(
            "%s subscriber %s of session %s evicted (fell %d+ events behind); told to re-attach with since=%d",
            conn.kind,
            conn.name,
            conn.session_id,
            lim.queue_events,
            conn.last_seq,
        )
    elif conn.end == "timeout":
        state.send_timeouts += 1
        log.warning(
            "%s subscriber %s of session %s stalled (a send blocked > %.0f s); closed at since=%d",
            conn.kind,
            conn.name,
            conn.session_id,
            lim.send_timeout_s,
            conn.last_seq,
        )


def reattach_reason(last_seq: int) -> str:
    return f"re-attach with since={last_seq}"


async def attach_websocket(websocket: WebSocket, session_id: str) -> None:
    """``GET /v1/sessions/{id}/attach?since=N`` (WebSocket): one JSON text frame per envelope.

    The handshake is answered with a plain HTTP error (never a ``101`` followed by a close) for a
    bad ``since`` (400) or an unknown session (404). Frames from the client are ignored.
    """
    state: DaemonState = websocket.app.state.daemon
    try:
        since = parse_since(websocket.query_params.get("since"))
        await state.journal.get_session(session_id)
        conn = state.reaper.open("ws", session_id, since)
    except AcagentError as exc:
        REFUSED_HANDSHAKE.set(True)  # a client's mistake: no uvicorn ERROR line (as for the guard's, F102)
        with contextlib.suppress(*DISCONNECTED):
            await websocket.send_denial_response(JSONResponse(exc.to_envelope(), status_code=exc.status_code))
        return
    try:
        await _serve_websocket(state, websocket, conn)
    except DISCONNECTED:
        return  # the client went away: not an error
    finally:
        state.reaper.close(conn)


async def _serve_websocket(state: DaemonState, websocket: WebSocket, conn: StreamConn) -> None:
    offered = websocket.scope.get("subprotocols", [])
    try:
        await websocket.accept(subprotocol=SUBPROTOCOL if SUBPROTOCOL in offered else None)
    except DISCONNECTED:
        return  # the client left during the handshake: not an error
    rate = FrameRate(state.limits.ws_messages_per_s, state.limits.ws_burst)

    async def send_event(event: Event, replay: bool) -> None:
        data = replay_json(event) if replay else event.to_json_bytes()
        await websocket.send({"type": "websocket.send", "text": data.decode()})

    async def send_reset(since: int, last_seq: int) -> None:
        await websocket.send({"type": "websocket.send", "text": reset_json(since, last_seq).decode()})

    async def wait_disconnect() -> None:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            if not rate.take():  # frames are ignored, but a flood costs CPU: close it
                conn.finish("flood")
                return

    try:
        end, last = await pump(
            state,
            conn,
            send_event=send_event,
            send_reset=send_reset,
            wait_disconnect=wait_disconnect,
        )
    except DISCONNECTED:
        return
    if end == "disconnected":
        return
    if end == "error" and conn.error is not None:
        with anyio.move_on_after(2.0):
            with contextlib.suppress(Exception):
                frame = orjson.dumps({"type": ERROR_TYPE, **conn.error.to_envelope()}, default=str)
                await websocket.send({"type": "websocket.send", "text": frame.decode()})
                await websocket.close(CLOSE_ERROR, f"{conn.error.code}; not retried")
        return
    code, reason, grace = CLOSE_EVICTED, reattach_reason(last), state.limits.close_grace_s
    if end == "flood":
        code, reason, grace = CLOSE_POLICY, f"too many frames from the client; {reattach_reason(last)}", 2.0
    elif end in ("shutdown", "closed"):
        code, reason, grace = CLOSE_RESTART, f"daemon stopping; {reattach_reason(last)}", 2.0
    elif end == "removed":  # a re-attach gets 404 session_not_found
        code, reason, grace = CLOSE_NORMAL, "session removed", 2.0
    with anyio.move_on_after(grace):
        try:
            await websocket.close(code, reason)
        except Exception:
            return
