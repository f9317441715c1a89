"""uvicorn as the daemon runs it: the h11 protocol with the edge rules, and a server without its
own signal handling (:func:`~acagent.server._daemon.serve` owns SIGTERM/SIGINT)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson

from acagent.server._limits import (
    ConnectionTracker,
    Limits,
    header_timeout_response,
    header_too_large_response,
    request_head_bytes,
)

__all__ = ["make_server"]


def _http_protocol(limits: Limits, tracker: ConnectionTracker) -> type:
    """uvicorn's h11 protocol with the edge rules, applied before the app runs.

    - Only a ``GET`` may upgrade to a WebSocket (uvicorn hands any request with ``Upgrade:
      websocket`` to the WebSocket protocol, which answers a ``POST`` with a bare 405); other
      methods stay plain HTTP and meet the guard (F18). Other upgrades (``h2c``) are ignored.
    - A request h11 cannot parse (e.g. HTTP/1.1 without ``Host``) gets 400 in the error envelope;
      a request head above ``max_header_bytes`` gets ``431 header_too_large``.
    - ``max_connections_per_client``: a connection beyond the cap gets ``429
      too_many_connections`` and is closed before anything is parsed.
    - ``header_timeout_s``: a request head not complete within it (from connect, and again
      after each response) gets ``408 header_timeout`` and the connection is closed.
    """
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    body = orjson.dumps(
        {
            "error": {
                "code": "bad_request",
                # h11 does not say what was wrong; these are the usual causes.
                "message": "malformed HTTP request: not HTTP/1.1, a bad request line, header or "
                "Content-Length, or no Host header",
                "detail": None,
            }
        }
    )

    class AcagentH11Protocol(H11Protocol):
        _head_timer: Any = None
        _client_key = ""

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._client_key = str(self.client[0]) if self.client else ""
            if not tracker.admit(self._client_key, transport):
                transport.write(tracker.refusal())
                transport.close()
                return
            self._arm_head_timer()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm_head_timer()
            if self.transport.get_protocol() is self:  # not upgraded: the connection ends here
                tracker.release(self._client_key, self.transport)
            super().connection_lost(exc)

        def _arm_head_timer(self) -> None:
            self._disarm_head_timer()
            self._head_timer = self.loop.call_later(limits.header_timeout_s, self._head_timeout)

        def _disarm_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_timeout(self) -> None:
            self._head_timer = None
            transport: Any = self.transport  # uvicorn's stubs make is_closing() look always false
            if transport.is_closing() or transport.get_protocol() is not self:
                return  # closed, or upgraded to a WebSocket
            if self.conn.their_state is h11.IDLE and (self.cycle is None or self.cycle.response_complete):
                self.transport.write(header_timeout_response(limits))
                self.transport.close()

        def data_received(self, data: bytes) -> None:
            if self.conn.their_state is h11.IDLE:  # a request head is being received
                size = request_head_bytes(self.conn.trailing_data[0], data)
                if size > limits.max_header_bytes:
                    self.transport.write(header_too_large_response(limits, size))
                    self.transport.close()
                    return
            super().data_received(data)

        def handle_events(self) -> None:
            super().handle_events()
            if self._head_timer is not None and self.conn.their_state is not h11.IDLE:
                self._disarm_head_timer()  # the head is complete

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm_head_timer()

        def _should_upgrade(self) -> bool:
            if self._get_upgrade() != b"websocket":
                return False
            return self.scope.get("method") == "GET" and self._should_upgrade_to_ws()

        def send_400_response(self, msg: str) -> None:
            buffered = len(self.conn.trailing_data[0])  # only an unfinished head grows this
            if buffered > limits.max_header_bytes:
                self.transport.write(header_too_large_response(limits, buffered))
                self.transport.close()
                return
            _send_bad_request(self.conn, self.transport, body)

    return AcagentH11Protocol


def _send_bad_request(conn: Any, transport: Any, body: bytes) -> None:
    """Answer 400 with ``body`` (the error envelope) through h11, then close the connection."""
    import h11

    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    try:
        for event in (
            h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
            h11.Data(data=body),
            h11.EndOfMessage(),
        ):
            transport.write(conn.send(event))
    except h11.LocalProtocolError:  # pragma: no cover - h11 refuses to answer this request at all
        pass
    transport.close()


def _ws_protocol(tracker: ConnectionTracker) -> Any:
    """uvicorn's sans-io WebSocket protocol, releasing its connection from ``tracker`` when it closes.

    Without this a closed WebSocket's transport (and through it the protocol, its ASGI scope and
    buffers) stayed in the tracker's set until the same client address reached its cap and the
    set was pruned: up to ``max_connections_per_client`` dead connections held per address.
    """
    from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

    class AcagentWSProtocol(WebSocketsSansIOProtocol):
        def connection_lost(self, exc: Exception | None) -> None:
            try:
                super().connection_lost(exc)
            finally:
                tracker.release(str(self.client[0]) if self.client else "", self.transport)

    return AcagentWSProtocol


def make_server(app: Any, limits: Limits, tracker: ConnectionTracker) -> Any:
    import uvicorn

    class _Server(uvicorn.Server):
        """uvicorn without its own signal handling: :func:`serve` owns SIGTERM/SIGINT."""

        @contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="off",
        ws=_ws_protocol(tracker),
        http=_http_protocol(limits, tracker),
        ws_max_size=limits.ws_max_message_bytes,
        h11_max_incomplete_event_size=limits.max_header_bytes,
        ws_ping_interval=20.0,
        ws_ping_timeout=20.0,
        ws_per_message_deflate=False,
        timeout_graceful_shutdown=5,
        server_header=False,
        proxy_headers=False,
    )
    from acagent.server._security import ClientFaultLogFilter, RefusedHandshakeLogFilter

    error_log = logging.getLogger("uvicorn.error")  # after Config: it configures uvicorn's loggers
    for kind in (RefusedHandshakeLogFilter, ClientFaultLogFilter):
        if not any(isinstance(f, kind) for f in error_log.filters):
            error_log.addFilter(kind())
    return _Server(config)
