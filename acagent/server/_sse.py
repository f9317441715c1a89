"""SSE ``/stream``: the Server-Sent Events front of :func:`acagent.server._streams.pump`.

The pump, the cursor rules, replayed approvals, eviction and keep-alives are shared with the
WebSocket stream (:mod:`acagent.server._streams`); this module frames them as an event stream:
``id: <seq>``, ``event: <type>``, ``data: <envelope JSON>``.
"""

from __future__ import annotations

import anyio
import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from acagent.errors import AcagentError
from acagent.events import Event
from acagent.server._reaper import StreamConn
from acagent.server._state import DaemonState
from acagent.server._streams import (
    DISCONNECTED,
    RESET_TYPE,
    error_json,
    parse_since,
    pump,
    reattach_reason,
    replay_json,
    reset_json,
)

__all__ = ["SSEStream", "sse_endpoint"]


class SSEStream(Response):
    """``GET /v1/sessions/{id}/stream?since=N`` (Server-Sent Events).

    Each event: ``id: <seq>``, ``event: <type>``, ``data: <envelope JSON>``. A re-sent pending
    approval carries ``"replay": true`` and no ``id:``. Keep-alives are comment lines. When the
    subscriber is evicted: ``event: evicted`` with ``data: {"last_seq": N, "message": "re-attach
    with since=N"}``, then the response ends. When the stream fails (a journal read error):
    ``event: error`` with the error envelope as data, then the response ends (F148).
    """

    media_type = "text/event-stream"

    def __init__(self, state: DaemonState, session_id: str, since: int) -> None:
        super().__init__(
            content=None,
            status_code=200,
            headers={"cache-control": "no-store", "x-accel-buffering": "no"},
            media_type="text/event-stream",
        )
        self.raw_headers = [
            (k, v) for k, v in self.raw_headers if k != b"content-length"
        ]  # a stream has none
        self.state = state
        self.session_id = session_id
        self.since = since

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            conn = self.state.reaper.open("sse", self.session_id, self.since)
        except AcagentError as exc:
            await JSONResponse(exc.to_envelope(), status_code=exc.status_code)(scope, receive, send)
            return
        try:
            await self._serve(conn, receive, send)
        except DISCONNECTED:
            return  # the client went away: not an error
        finally:
            self.state.reaper.close(conn)

    async def _serve(self, conn: StreamConn, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        await send({"type": "http.response.body", "body": b": stream open\n\n", "more_body": True})

        async def send_event(event: Event, replay: bool) -> None:
            if replay:
                chunk = b"event: " + event.type.encode() + b"\ndata: " + replay_json(event) + b"\n\n"
            else:
                chunk = b"id: %d\nevent: %s\ndata: %s\n\n" % (
                    event.seq,
                    event.type.encode(),
                    event.to_json_bytes(),
                )
            await send({"type": "http.response.body", "body": chunk, "more_body": True})

        async def send_reset(since: int, last_seq: int) -> None:
            # The id line moves the browser's Last-Event-ID back to the session's last seq.
            chunk = b"id: %d\nevent: %s\ndata: %s\n\n" % (
                last_seq,
                RESET_TYPE.encode(),
                reset_json(since, last_seq),
            )
            await send({"type": "http.response.body", "body": chunk, "more_body": True})

        async def keepalive() -> None:
            await send({"type": "http.response.body", "body": b": keep-alive\n\n", "more_body": True})

        async def wait_disconnect() -> None:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return

        try:
            end, last = await pump(
                self.state,
                conn,
                send_event=send_event,
                send_reset=send_reset,
                wait_disconnect=wait_disconnect,
                keepalive=keepalive,
            )
        except DISCONNECTED:
            return
        if end == "disconnected":
            return
        tail = b""
        if end == "error" and conn.error is not None:  # F148: the error, never "daemon stopping"
            tail = b"event: error\ndata: " + error_json(conn.error) + b"\n\n"
        elif end in ("evicted", "timeout"):
            data = orjson.dumps({"last_seq": last, "message": reattach_reason(last)})
            tail = b"event: evicted\ndata: " + data + b"\n\n"
        elif end in ("shutdown", "closed", "removed"):
            why = "session removed" if end == "removed" else f"daemon stopping; {reattach_reason(last)}"
            data = orjson.dumps({"last_seq": last, "message": why})
            tail = b"event: closed\ndata: " + data + b"\n\n"
        grace = self.state.limits.close_grace_s
        with anyio.move_on_after(grace):
            try:
                await send({"type": "http.response.body", "body": tail, "more_body": False})
            except Exception:
                return


async def sse_endpoint(request: Request, session_id: str) -> Response:
    """Build the SSE response after checking the cursor and the session (plain HTTP errors)."""
    state: DaemonState = request.app.state.daemon
    last_event_id = request.headers.get("last-event-id")
    if last_event_id is not None and last_event_id.strip():
        since = parse_since(last_event_id, name="Last-Event-ID")
    else:
        since = parse_since(request.query_params.get("since"))
    await state.journal.get_session(session_id)
    return SSEStream(state, session_id, since)
