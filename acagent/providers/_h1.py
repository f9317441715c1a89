"""A small HTTP/1.1 client for plain-http model endpoints (local servers, a mock, a gateway).

:class:`~acagent.providers._http.HTTPProvider` posts through :class:`Client` when the endpoint is
``http://`` and no proxy is configured (:func:`usable_for`); an ``https://`` endpoint, or an
``http_proxy``/``all_proxy`` in the environment, goes through ``httpx`` as before (TLS, the CA
bundle, proxies and ``NO_PROXY`` stay with it).

Why our own and not httpx (or h11) here: a provider call is one request at a time on a
kept-alive connection and a response read as it comes, and that is all this module does, with
the standard library and anyio that are loaded anyway. httpx with its stack (httpcore, h11, the
cookie jar with urllib.request, idna, zstandard) costs ≈45 ms of CPU to import in each process,
about a tenth of a one-shot ``acagent run`` turn, and h11 alone ≈12 ms (its grammar's regular
expressions and event dataclasses are built at import). The response is read strictly:
a malformed status line or header, a bad chunk size, an unknown content coding or a body cut
short of its ``Content-Length`` is a :class:`WireError` (a transport error, like httpx's).

The surface is the part of httpx's that ``_http.py`` uses: :meth:`Client.build_request`,
:meth:`Client.send` (always streamed), :class:`Response` with ``status_code``, ``headers``,
``aiter_bytes`` (decoded: ``gzip``/``deflate``), ``aread`` and ``aclose``.
"""

from __future__ import annotations

import base64
import os
import re
import select
import time
import zlib
from collections.abc import AsyncIterator, Iterable
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import anyio
import anyio.abc

__all__ = ["Client", "Headers", "Request", "Response", "WireError", "usable_for"]

_HEAD_END = re.compile(rb"\r?\n\r?\n")
_MAX_HEAD = 65536
"""Longest response head (status line and headers) read, in bytes."""
_READ = 65536
_KEEPALIVE_S = 5.0
"""An idle connection older than this is closed, not reused (httpx's ``keepalive_expiry``)."""
_MAX_IDLE = 8
_PROXY_VARS = ("http_proxy", "all_proxy")


class WireError(Exception):
    """The connection failed, or the server's answer broke HTTP/1.1 (a transport error)."""


def usable_for(base_url: str, environ: Any = None) -> bool:
    """Whether requests to ``base_url`` go through this client: plain ``http://`` and no
    ``http_proxy``/``all_proxy`` (any case, non-empty) in ``environ`` (default ``os.environ``)."""
    if not base_url.startswith("http://"):
        return False
    env = os.environ if environ is None else environ
    return not any(value and name.lower() in _PROXY_VARS for name, value in env.items())


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


class Request:
    """One request to send: ``method``, an ``http://`` ``url``, headers and the body's parts."""

    def __init__(self, method: str, url: str, headers: dict[str, str], parts: list[bytes]) -> None:
        split = urlsplit(url)
        if split.scheme != "http" or not split.hostname:
            raise WireError(f"not a plain-http URL: {url!r}")
        self.method = method
        self.url = url
        self.host = split.hostname
        self.port = split.port or 80
        # As httpx does: a space or a non-ASCII character in the path is percent-encoded.
        target = (split.path or "/") + (f"?{split.query}" if split.query else "")
        self.target = quote(target, safe=_TARGET_SAFE)
        self.headers = {"host": split.netloc.rpartition("@")[2], **headers}
        if split.username is not None or split.password is not None:
            # As httpx does: the URL's user information is sent as Basic credentials, in place of
            # any other ``authorization`` (a gateway behind basic auth at http://user:pw@host).
            userinfo = f"{unquote(split.username or '')}:{unquote(split.password or '')}"
            self.headers["authorization"] = "Basic " + base64.b64encode(userinfo.encode()).decode()
        self.headers["content-length"] = str(sum(map(len, parts)))
        self.headers = {name: _field(name, value) for name, value in self.headers.items()}
        self.parts = parts

    def head(self) -> bytes:
        """The request line and headers, ending with the blank line."""
        lines = [f"{self.method} {self.target} HTTP/1.1", *(f"{k}: {v}" for k, v in self.headers.items())]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


_TARGET_SAFE = "/%!$&'()*+,;=:@~-._?"
_FIELD_VALUE = re.compile(r"[\x21-\x7e\x80-\xff]([\t\x20-\x7e\x80-\xff]*[\x21-\x7e\x80-\xff])?|")
_FIELD_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_DIGITS = re.compile(r"[0-9]{3}")
_LENGTH = re.compile(r"[0-9]{1,19}")
_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,16}")
"""What RFC 9112 allows (str.isdigit and int() also take "²", "+1", "0x1f", "1_0")."""


def _field(name: str, value: str) -> str:
    """``value`` without white space at its ends, once HTTP/1.1 allows it (RFC 9110 section 5.5):
    a line break would end the header and start another one (F120), and a character beyond
    Latin-1 cannot be sent.

    Raises:
        ConfigError: naming the header and the character, never the value (it may be a key).
    """
    value = value.strip(" \t")
    if _FIELD_NAME.fullmatch(name) and _FIELD_VALUE.fullmatch(value):
        return value
    from acagent.errors import ConfigError

    bad = next((ch for ch in value if not ("\x20" <= ch <= "\x7e" or "\x80" <= ch <= "\xff")), "?")
    raise ConfigError(
        f"the {name!r} header of a request has a character HTTP does not allow (U+{ord(bad):04X}); "
        "check the setting or variable that gives it"
    )


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


class Client:
    """Requests to plain-http endpoints on kept-alive connections (see the module docstring).

    Args:
        headers: sent with every request (a request's own headers win).
    """

    def __init__(self, headers: dict[str, str]) -> None:
        self.headers = {k.lower(): v for k, v in headers.items()}
        self._idle: list[_Connection] = []

    def build_request(
        self, method: str, url: str, *, content: bytes | Any, headers: dict[str, str]
    ) -> Request:
        """A request; ``content`` is the body, or an object with ``parts`` (its byte strings).

        Raises:
            WireError: ``url`` is not ``http://``.
        """
        parts: Iterable[bytes] = [content] if isinstance(content, bytes) else content.parts
        return Request(
            method, url, {**self.headers, **{k.lower(): v for k, v in headers.items()}}, list(parts)
        )

    async def _connect(self, request: Request) -> _Connection:
        while self._idle:
            conn = self._idle.pop()
            if conn.reusable_now():
                return conn
            await conn.aclose()
        try:
            return _Connection(await anyio.connect_tcp(request.host, request.port))
        except OSError as exc:
            raise WireError(f"cannot connect to {request.host}:{request.port}: {exc}") from exc

    async def send(self, request: Request, *, stream: bool = True) -> Response:
        """Send ``request`` and read the response's head (the body is read from the response).

        Raises:
            WireError: the connection failed or the response head is malformed.
        """
        conn = await self._connect(request)
        try:
            try:
                await conn.stream.send(request.head())
                for part in request.parts:
                    await conn.stream.send(part)
            except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                raise WireError(f"sending the request failed: {exc!r}") from exc
            while True:
                version, status, headers = await self._head(conn)
                if not 100 <= status < 200 or status == 101:
                    return Response(self, conn, version, status, headers)
        except BaseException:
            await conn.aclose()
            raise

    async def _head(self, conn: _Connection) -> tuple[str, int, Headers]:
        while (match := _HEAD_END.search(conn.buffer)) is None:
            if len(conn.buffer) > _MAX_HEAD:
                raise WireError("the response head is too long")
            if not await conn.fill():
                raise WireError("the server closed the connection without sending a response")
        raw = conn.take(match.end())[: match.start()]
        return _parse_head(raw)

    def _offer(self, conn: _Connection) -> bool:
        """Keep ``conn`` for the next request; False when enough are kept already."""
        if len(self._idle) >= _MAX_IDLE:
            return False
        conn.idle_since = time.monotonic()
        self._idle.append(conn)
        return True

    async def aclose(self) -> None:
        """Close the idle connections."""
        idle, self._idle = self._idle, []
        for conn in idle:
            await conn.aclose()
