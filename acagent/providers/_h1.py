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
import time
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import anyio

from acagent.providers._h1_response import (
    Headers,
    Response,
    WireError,
    _Connection,
    read_head,
)
from acagent.providers._h1_send import Spool, write_request

__all__ = ["Client", "Headers", "Request", "Response", "WireError", "usable_for"]

_MAX_IDLE = 8
_PROXY_VARS = ("http_proxy", "all_proxy")


def usable_for(base_url: str, environ: Any = None) -> bool:
    """Whether requests to ``base_url`` go through this client: plain ``http://`` and no
    ``http_proxy``/``all_proxy`` (any case, non-empty) in ``environ`` (default ``os.environ``)."""
    if not base_url.startswith("http://"):
        return False
    env = os.environ if environ is None else environ
    return not any(value and name.lower() in _PROXY_VARS for name, value in env.items())


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


class Client:
    """Requests to plain-http endpoints on kept-alive connections (see the module docstring).

    Args:
        headers: sent with every request (a request's own headers win).
    """

    def __init__(self, headers: dict[str, str]) -> None:
        self.headers = {k.lower(): v for k, v in headers.items()}
        self._idle: list[_Connection] = []
        self.spool = Spool()
        """Large body parts that recur from request to request, sent from memory files
        (:mod:`acagent.providers._h1_send`)."""

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
                await write_request(conn.stream, request.head(), request.parts, self.spool)
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
        return await read_head(conn)

    def _offer(self, conn: _Connection) -> bool:
        """Keep ``conn`` for the next request; False when enough are kept already."""
        if len(self._idle) >= _MAX_IDLE:
            return False
        conn.idle_since = time.monotonic()
        self._idle.append(conn)
        return True

    async def aclose(self) -> None:
        """Close the idle connections and the spool's memory files."""
        idle, self._idle = self._idle, []
        self.spool.close()
        for conn in idle:
            await conn.aclose()
