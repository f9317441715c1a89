"""A TCP proxy between one daemon and PostgreSQL that can blackhole: the fault "the network stops
delivering, nothing is closed".

Written here (asyncio, ~100 lines) rather than with toxiproxy or iptables: the tests must run
unprivileged in CI without an extra service, and a blackhole is exactly what the kernel cannot
simulate on loopback without root. (``tests/server/proxy.py`` ``CutProxy`` cuts connections from
inside an async test's task group; these tests are synchronous and drive daemon subprocesses, so
this proxy runs its own event loop in a thread.) While blackholed the proxy keeps every connection open and
keeps *reading* from both sides (so the kernel ACKs, keepalives are answered, and a peer sees a
live but silent socket), but forwards nothing; new connections are accepted and blackholed too.
:meth:`BlackholeProxy.heal` ends the partition the way a real one usually ends: every connection
is reset (the bytes sent meanwhile are lost), new connections are forwarded again.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading

__all__ = ["BlackholeProxy"]


class BlackholeProxy:
    """Forward ``127.0.0.1:port`` → ``target_host:target_port`` in a background thread.

    Use as a context manager (the thread and every connection end on exit).
    """

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self.blackholed = False
        self.dropped_bytes = 0
        """Bytes read while blackholed and never forwarded (proof the daemon kept sending)."""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    def __enter__(self) -> BlackholeProxy:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        self._call(self._close_all)
        if self._server is not None:
            self._loop.call_soon_threadsafe(self._server.close)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def url(self, url: str) -> str:
        """``url`` (a journal URL on the target) rewritten to go through the proxy."""
        host, port = self.target
        return url.replace(f"@{host}:{port}/", f"@127.0.0.1:{self.port}/")

    def blackhole(self) -> None:
        """From now on forward nothing (connections stay open and keep being read)."""
        self.blackholed = True

    def heal(self) -> None:
        """Reset every connection (RST) and forward new ones again."""
        self._call(self._close_all)
        self.blackholed = False

    def _call(self, fn: object) -> None:
        async def run() -> None:
            fn()  # type: ignore[operator]

        asyncio.run_coroutine_threadsafe(run(), self._loop).result(10)

    async def _start(self) -> asyncio.Server:
        return await asyncio.start_server(self._accept, "127.0.0.1", 0)

    def _close_all(self) -> None:
        for w in list(self._writers):
            sock = w.get_extra_info("socket")
            if sock is not None:  # linger 0: close sends RST, as a broken path does
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            w.transport.abort()
        self._writers.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self._writers.update((writer, up_writer))
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                if self.blackholed:
                    self.dropped_bytes += len(data)
                    continue
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self._writers.discard(writer)
            writer.transport.abort()
