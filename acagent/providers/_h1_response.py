"""The response side of :mod:`acagent.providers._h1`: one kept-alive connection's buffer, the
response head (:func:`read_head`), and :class:`Response`, whose body is read as it arrives,
strictly (framing per RFC 9112 section 6.3, chunked bodies, ``gzip``/``deflate``).

Every way the server's answer breaks HTTP/1.1, and every failed read, is a :class:`WireError`
(a transport error, like httpx's). :mod:`acagent.providers._h1` re-exports the public names.
"""

from __future__ import annotations

import re
import select
import time
import zlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

if TYPE_CHECKING:
    from acagent.providers._h1 import Client

__all__ = ["Headers", "Response", "WireError", "read_head"]

_HEAD_END = re.compile(rb"\r?\n\r?\n")
_MAX_HEAD = 65536
"""Longest response head (status line and headers) read, in bytes."""
_READ = 65536
_KEEPALIVE_S = 5.0
"""An idle connection older than this is closed, not reused (httpx's ``keepalive_expiry``)."""
_DIGITS = re.compile(r"[0-9]{3}")
_LENGTH = re.compile(r"[0-9]{1,19}")
_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,16}")
"""What RFC 9112 allows (str.isdigit and int() also take "²", "+1", "0x1f", "1_0")."""


class WireError(Exception):
    """The connection failed, or the server's answer broke HTTP/1.1 (a transport error)."""


class Headers:
    """Response headers in wire order; :meth:`get` is case-insensitive (repeated names: the
    values joined with ``", "``)."""

    def __init__(self, items: list[tuple[str, str]]) -> None:
        self._items = items
        self._map: dict[str, str] = {}
        for name, value in items:
            key = name.lower()
            self._map[key] = f"{self._map[key]}, {value}" if key in self._map else value

    def get(self, name: str, default: str | None = None) -> str | None:
        """The value of header ``name``, or ``default``."""
        return self._map.get(name.lower(), default)

    def items(self) -> list[tuple[str, str]]:
        """``(name, value)`` pairs as received."""
        return list(self._items)


class _Connection:
    """One TCP connection and the bytes read from it but not consumed yet."""

    def __init__(self, stream: anyio.abc.SocketStream) -> None:
        self.stream = stream
        self.buffer = bytearray()
        self.idle_since = 0.0

    async def fill(self) -> bool:
        """Read more bytes into :attr:`buffer`; False at the end of the stream."""
        try:
            self.buffer += await self.stream.receive(_READ)
        except anyio.EndOfStream:
            return False
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise WireError(f"reading the response failed: {exc!r}") from exc
        return True

    def take(self, n: int) -> bytes:
        data = bytes(self.buffer[:n])
        del self.buffer[:n]
        return data

    def reusable_now(self) -> bool:
        """Idle, not expired, and the server has neither closed it nor sent anything since."""
        if self.buffer or time.monotonic() - self.idle_since > _KEEPALIVE_S:
            return False
        sock = self.stream.extra(anyio.abc.SocketAttribute.raw_socket, None)
        if sock is None:
            return False
        poll = select.poll()  # not select(): a descriptor above FD_SETSIZE is fine
        poll.register(sock, select.POLLIN)
        return not poll.poll(0)

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            await self.stream.aclose()


def _parse_head(raw: bytes) -> tuple[str, int, Headers]:
    """``(http_version, status, headers)`` of a response head (without its blank line)."""
    lines = raw.decode("latin-1").split("\n")
    version, _, rest = lines[0].rstrip("\r").partition(" ")
    code = rest[:3]
    if not version.startswith("HTTP/1.") or not _DIGITS.fullmatch(code) or rest[3:4] not in ("", " "):
        raise WireError(f"malformed status line {lines[0][:100]!r}")
    items: list[tuple[str, str]] = []
    for line in lines[1:]:
        if line[:1] in (" ", "\t") and items:  # obs-fold: the previous value goes on (as h11 reads it)
            name, value = items.pop()
            items.append((name, f"{value} {line.strip()}".strip()))
            continue
        name, colon, value = line.rstrip("\r").partition(":")
        if not colon or not name or name != name.strip() or " " in name:
            raise WireError(f"malformed header line {line[:100]!r}")
        items.append((name, value.strip()))
    return version, int(code), Headers(items)


async def read_head(conn: _Connection) -> tuple[str, int, Headers]:
    """Read one response head from ``conn``: ``(http_version, status, headers)``.

    Raises:
        WireError: the head is too long or malformed, or the connection ended before it.
    """
    while (match := _HEAD_END.search(conn.buffer)) is None:
        if len(conn.buffer) > _MAX_HEAD:
            raise WireError("the response head is too long")
        if not await conn.fill():
            raise WireError("the server closed the connection without sending a response")
    raw = conn.take(match.end())[: match.start()]
    return _parse_head(raw)


class Response:
    """A response whose body is read as it arrives (see the module docstring)."""

    def __init__(
        self, client: Client, conn: _Connection, version: str, status: int, headers: Headers
    ) -> None:
        self.status_code = status
        self.headers = headers
        self.http_version = version
        self._client = client
        self._conn: _Connection | None = conn
        self._kind, self._length = self._framing()  # a framing error is the head's (as httpx's)
        self._body = self._raw_body()
        self._reusable = False

    # -- framing -----------------------------------------------------------------
    def _framing(self) -> tuple[str, int]:
        """``("chunked" | "length" | "close", length)`` per RFC 9112 section 6.3."""
        coding = (self.headers.get("transfer-encoding") or "").lower()
        if coding:
            return ("chunked", 0) if coding.rsplit(",", 1)[-1].strip() == "chunked" else ("close", 0)
        if self.status_code in (204, 304):
            return "length", 0
        length = self.headers.get("content-length")
        if length is None:
            return "close", 0
        values = {v.strip() for v in length.split(",")}
        value = values.pop() if len(values) == 1 else ""
        if not _LENGTH.fullmatch(value):
            raise WireError(f"malformed content-length {length[:50]!r}")
        return "length", int(value)

    async def _raw_body(self) -> AsyncIterator[bytes]:
        conn = self._conn
        assert conn is not None
        kind, length = self._kind, self._length
        if kind == "length":
            while length:
                if not conn.buffer and not await conn.fill():
                    raise WireError(f"the server closed the connection {length} bytes before the body's end")
                piece = conn.take(length)
                length -= len(piece)
                yield piece
        elif kind == "close":
            while conn.buffer or await conn.fill():
                yield conn.take(len(conn.buffer))
            return
        else:
            async for piece in self._chunks(conn):
                yield piece
        connection = (self.headers.get("connection") or "").lower()
        self._reusable = self.http_version == "HTTP/1.1" and "close" not in connection and not conn.buffer

    async def _line(self, conn: _Connection) -> bytes:
        while (end := conn.buffer.find(b"\n")) < 0:
            if len(conn.buffer) > _MAX_HEAD:
                raise WireError("a chunk header line is too long")
            if not await conn.fill():
                raise WireError("the server closed the connection inside a chunked body")
        return conn.take(end + 1).rstrip(b"\r\n")

    async def _chunks(self, conn: _Connection) -> AsyncIterator[bytes]:
        while True:
            size_text = (await self._line(conn)).split(b";", 1)[0].strip(b" \t")
            if not _CHUNK_SIZE.fullmatch(size_text):
                raise WireError(f"malformed chunk size {size_text[:20]!r}")
            size = int(size_text, 16)
            if size == 0:
                while await self._line(conn):  # trailer fields, up to the blank line
                    pass
                return
            while size:
                if not conn.buffer and not await conn.fill():
                    raise WireError("the server closed the connection inside a chunked body")
                piece = conn.take(size)
                size -= len(piece)
                yield piece
            if await self._line(conn):
                raise WireError("a chunk's data is longer than its size")

    # -- httpx's surface ---------------------------------------------------------
    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The body as it arrives, decoded per ``content-encoding`` (gzip, deflate)."""
        codings = [c.strip() for c in (self.headers.get("content-encoding") or "").lower().split(",")]
        coding = ", ".join(c for c in codings if c not in ("", "identity")) or "identity"
        decoder: Any = None
        if coding in ("gzip", "x-gzip"):
            decoder = zlib.decompressobj(zlib.MAX_WBITS | 16)
        elif coding == "deflate":
            decoder = _Deflate()
        elif coding != "identity":
            await self.aclose()
            raise WireError(f"unsupported content-encoding {coding[:30]!r}")
        try:
            async for piece in self._body:
                data = decoder.decompress(piece) if decoder is not None else piece
                if data:
                    yield data
            if decoder is not None and (tail := decoder.flush()):
                yield tail
        except zlib.error as exc:
            raise WireError(f"the {coding} body does not decode: {exc}") from exc
        finally:
            await self._finish()

    async def aread(self) -> bytes:
        """The whole (decoded) body."""
        return b"".join([piece async for piece in self.aiter_bytes()])

    async def _finish(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if not (self._reusable and self._client._offer(conn)):
            await conn.aclose()

    async def aclose(self) -> None:
        """Close the response; a body not read to its end closes the connection."""
        await self._finish()


class _Deflate:
    """``deflate`` as servers send it: zlib-wrapped, or raw deflate (what httpx also accepts)."""

    def __init__(self) -> None:
        self._obj = zlib.decompressobj()
        self._first = True

    def decompress(self, data: bytes) -> bytes:
        if self._first:
            self._first = False
            try:
                return self._obj.decompress(data)
            except zlib.error:
                self._obj = zlib.decompressobj(-zlib.MAX_WBITS)
        return self._obj.decompress(data)

    def flush(self) -> bytes:
        return self._obj.flush()
