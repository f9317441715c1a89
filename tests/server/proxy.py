"""A TCP proxy for the F09 tests: cuts connections on command, can duplicate one WebSocket frame and
can lose HTTP answers."""

from __future__ import annotations

import contextlib
import socket
import struct
from dataclasses import dataclass, field

import anyio
from anyio.abc import SocketAttribute, SocketStream, TaskStatus


@dataclass
class CutProxy:
    """Forward ``127.0.0.1:port`` → ``127.0.0.1:target``.

    Attributes:
        request_lines: the first line of every request that came through (``GET /…?since=N``).
        bytes_to_client: total bytes forwarded from the daemon.
        dup_next_frame: when set, the next server→client WebSocket text frame is sent twice.
        drop_answers: how many plain HTTP answers to lose: the request reaches the daemon, its
            answer never reaches the client (the client's connection is reset instead).
    """

    target: int
    port: int = 0
    request_lines: list[str] = field(default_factory=list)
    bytes_to_client: int = 0
    dup_next_frame: bool = False
    duplicated: int = 0
    drop_answers: int = 0
    dropped: int = 0
    _scopes: set[anyio.CancelScope] = field(default_factory=set)
    _streams: list[tuple[SocketStream, SocketStream]] = field(default_factory=list)

    @property
    def live(self) -> int:
        return len(self._scopes)

    async def run(self, *, task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED) -> None:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        self.port = listener.extra(SocketAttribute.local_port)
        task_status.started(self.port)
        await listener.serve(self._handle)

    def cut(self, rst: bool = False) -> int:
        """Drop every live connection (FIN, or RST with ``rst``); returns how many."""
        n = len(self._scopes)
        if rst:
            for a, b in self._streams:
                for s in (a, b):
                    try:
                        s.extra(SocketAttribute.raw_socket).setsockopt(
                            socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                        )
                    except OSError:
                        pass
        for scope in list(self._scopes):
            scope.cancel()
        return n

    async def _handle(self, client: SocketStream) -> None:
        try:
            upstream = await anyio.connect_tcp("127.0.0.1", self.target)
        except OSError:
            await client.aclose()
            return
        pair = (client, upstream)
        self._streams.append(pair)
        with anyio.CancelScope() as scope:
            self._scopes.add(scope)
            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._up, client, upstream, tg.cancel_scope)
                    tg.start_soon(self._down, upstream, client, tg.cancel_scope)
            finally:
                self._scopes.discard(scope)
        self._streams.remove(pair)
        with anyio.CancelScope(shield=True):
            for s in pair:
                await s.aclose()

    async def _up(self, src: SocketStream, dst: SocketStream, scope: anyio.CancelScope) -> None:
        first = True
        try:
            async for data in src:
                if first:
                    self.request_lines.append(data.split(b"\r\n", 1)[0].decode("latin-1"))
                    first = False
                await dst.send(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        scope.cancel()

    async def _down(self, src: SocketStream, dst: SocketStream, scope: anyio.CancelScope) -> None:
        buf = b""
        in_frames = passthrough = False
        try:
            async for data in src:
                self.bytes_to_client += len(data)
                buf += data
                if passthrough:
                    await dst.send(buf)
                    buf = b""
                    continue
                if not in_frames:
                    head, sep, rest = buf.partition(b"\r\n\r\n")
                    if not sep:
                        continue
                    if not head.startswith(b"HTTP/1.1 101") and self.drop_answers > 0:
                        self.drop_answers -= 1
                        self.dropped += 1
                        with contextlib.suppress(OSError):
                            dst.extra(SocketAttribute.raw_socket).setsockopt(
                                socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                            )
                        break
                    if not head.startswith(b"HTTP/1.1 101"):
                        await dst.send(buf)
                        buf, passthrough = b"", True
                        continue
                    await dst.send(head + sep)
                    buf, in_frames = rest, True
                out, buf = self._frames(buf)
                if out:
                    await dst.send(out)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        scope.cancel()

    def _frames(self, buf: bytes) -> tuple[bytes, bytes]:
        out = b""
        while len(buf) >= 2:
            opcode = buf[0] & 0x0F
            length = buf[1] & 0x7F
            pos = 2
            if length == 126:
                if len(buf) < 4:
                    break
                length, pos = struct.unpack("!H", buf[2:4])[0], 4
            elif length == 127:
                if len(buf) < 10:
                    break
                length, pos = struct.unpack("!Q", buf[2:10])[0], 10
            if len(buf) < pos + length:
                break
            frame, buf = buf[: pos + length], buf[pos + length :]
            out += frame
            if self.dup_next_frame and opcode == 1:
                out += frame
                self.dup_next_frame = False
                self.duplicated += 1
        return out, buf
