"""A WHATWG event-stream normaliser in front of the provider SDKs (F21).

OpenAI-compatible servers (and proxies in front of Anthropic) send event streams that are valid
per the WHATWG rules but that the SDKs' own decoders mishandle: a block holding only ``id:`` or
only ``retry:`` is dispatched as an event with empty data (the SDK then fails on
``json.loads("")`` and the stream looks broken), and after one ``id:`` every later blank line
dispatches such an empty event, because the decoders never reset the id they carry. Invalid
UTF-8 makes the SDK's strict ``bytes.decode`` raise mid-stream.

Why our own parser and not ``httpx-sse``: httpx-sse's ``SSEDecoder`` (and the SDKs' copies of
it) has the same empty-dispatch rule, so it would pass exactly these blocks on. The WHATWG
algorithm is short (https://html.spec.whatwg.org/multipage/server-sent-events.html
#event-stream-interpretation) and is implemented here as it is written:

* the byte stream is decoded as UTF-8 with replacement (a leading BOM is dropped);
* lines end with CRLF, LF or CR (a CR at the end of one chunk and an LF at the start of the next
  are one line end);
* a line starting with ``:`` is a comment; ``field:value`` drops one leading space of the value;
  a line without ``:`` is a field with an empty value; unknown fields are ignored;
* ``data`` appends the value and a LF to the data buffer; ``event`` sets the type; ``id``
  (without NUL) and ``retry`` (ASCII digits) only concern reconnection, which acagent does not
  do (a broken stream is retried as a whole step), so they are consumed here;
* a blank line dispatches the event **only if the data buffer is not empty**, with the type
  ``message`` when none was given; a final event not closed by a blank line is discarded.

What reaches the SDK is the canonical form of each dispatched event — ``event: TYPE`` then one
``data: LINE`` per data line, then a blank line, LF line ends, valid UTF-8 — so the SDK's
parser only ever sees input it handles. Comments and keep-alives produce nothing for the SDK
but count as wire activity (:class:`WireActivity`): the idle timeout measures silence on the
wire, not time between model events, so keep-alives minutes apart never look like a stall.

The normaliser is an ``httpx`` transport wrapper (:class:`SSENormalizingTransport`), a public
extension point of both SDKs (``http_client=``), rather than a patch of their private decoders.
It asks for ``Accept-Encoding: identity`` so it sees the body bytes; a response that is encoded
anyway is passed through unchanged.
"""

from __future__ import annotations

import codecs
import re
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio

__all__ = ["SSENormalizer", "SSENormalizingTransport", "WireActivity", "WireStall", "iter_canonical"]

_LINE_END = re.compile(r"\r\n|\r|\n")


class WireStall(Exception):
    """Raised by a normalised body when no byte (not even a keep-alive) arrived within the idle
    timeout; the provider maps it to :class:`~acagent.errors.ProviderConnectionError`."""

    def __init__(self, idle_timeout_s: float) -> None:
        super().__init__(f"sent nothing for {idle_timeout_s:g} s (idle timeout); the stream stalled")
        self.idle_timeout_s = idle_timeout_s


class WireActivity:
    """What arrived on one response: bytes, time of the last byte, the ``[DONE]`` marker."""

    def __init__(self) -> None:
        self.last_s = time.monotonic()
        """``time.monotonic()`` of the last byte, in seconds."""
        self.bytes = 0
        self.done_marker = False
        """True once an event whose data is ``[DONE]`` was dispatched (OpenAI's end marker)."""
        self.items = 0
        """Stream items the SDK gave for this response (counted by ``next_chunk``)."""

    def touch(self, n: int) -> None:
        """Record ``n`` bytes received now."""
        self.last_s = time.monotonic()
        self.bytes += n


class SSENormalizer:
    """Incremental WHATWG event-stream parser that re-emits canonical events (see module doc).

    ``feed(chunk)`` returns the canonical bytes of every event completed by ``chunk``;
    ``events`` counts the events dispatched so far.
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._first = True
        self._skip_lf = False
        self._data: list[str] = []
        self._event = ""
        self.events = 0
        self.done_marker = False

    def feed(self, chunk: bytes) -> bytes:
        """Parse ``chunk``; return the canonical form of the events it completed (maybe b"")."""
        text = self._decoder.decode(chunk)
        if self._first and text:
            self._first = False
            text = text.removeprefix("\ufeff")
        return self._lines(text)

    def _lines(self, text: str) -> bytes:
        out: list[str] = []
        start = 0
        if self._skip_lf and text:
            self._skip_lf = False
            if text[0] == "\n":
                start = 1
        for match in _LINE_END.finditer(text, start):
            end = match.start()
            line = self._buffer + text[start:end] if self._buffer else text[start:end]
            self._buffer = ""
            start = match.end()
            # a CR at the very end of the text may be the first half of a CRLF split across chunks
            if match.group() == "\r" and start == len(text):
                self._skip_lf = True
            self._line(line, out)
        if start < len(text):
            self._buffer += text[start:]
        return "".join(out).encode("utf-8")

    def _line(self, line: str, out: list[str]) -> None:
        if not line:
            if self._data:
                self.events += 1
                if self._data == ["[DONE]"]:
                    self.done_marker = True
                out.append(f"event: {self._event or 'message'}\n")
                out.extend(f"data: {d}\n" for d in self._data)
                out.append("\n")
            self._data, self._event = [], ""
            return
        if line[0] == ":":
            return  # comment / keep-alive
        name, colon, value = line.partition(":")
        if colon and value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        # "id" and "retry" are reconnection state; unknown fields are ignored (WHATWG)

    def finish(self) -> bytes:
        """End of stream: an event not closed by a blank line is discarded (WHATWG)."""
        self._decoder.decode(b"", final=True)
        self._buffer, self._data, self._event = "", [], ""
        return b""


class _NormalizedStream:
    """The response body of an event stream, normalised (an ``AsyncByteStream``)."""

    def __init__(self, inner: Any, activity: WireActivity, idle_timeout_s: float) -> None:
        self._inner = inner
        self.activity = activity
        self.normalizer = SSENormalizer()
        self._idle_timeout_s = idle_timeout_s

    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunks = self._inner.__aiter__()
        while True:
            # The idle timeout bounds each read of raw bytes: a keep-alive comment resets it.
            try:
                with anyio.fail_after(self._idle_timeout_s):
                    chunk = await chunks.__anext__()
            except StopAsyncIteration:
                break
            except TimeoutError:
                raise WireStall(self._idle_timeout_s) from None
            self.activity.touch(len(chunk))
            out = self.normalizer.feed(chunk)
            if self.normalizer.done_marker:
                self.activity.done_marker = True
            if out:
                yield out
        self.normalizer.finish()

    async def aclose(self) -> None:
        await self._inner.aclose()


class SSENormalizingTransport:
    """An ``httpx`` async transport that normalises ``text/event-stream`` response bodies.

    Args:
        inner: the real transport (``httpx.AsyncHTTPTransport`` of the SDK's httpx flavour).
        httpx_module: the httpx module the SDK uses (``httpx`` or ``httpx2``): its
            ``Response`` is built, and the classes become subclasses of its transport and
            byte-stream bases (the client checks them), made on first use so that importing
            this module imports no httpx.
        idle_timeout_s: maximum silence between two reads of body bytes, in seconds; past it
            the body raises :class:`WireStall`.

    Each normalised response carries its :class:`WireActivity` in
    ``response.extensions["acagent.activity"]``.
    """

    def __new__(cls, inner: Any, httpx_module: Any, *, idle_timeout_s: float = 120.0) -> Any:
        if cls is SSENormalizingTransport:
            cls = _bind(httpx_module)
        return super().__new__(cls)

    def __init__(self, inner: Any, httpx_module: Any, *, idle_timeout_s: float = 120.0) -> None:
        self._inner = inner
        self._httpx = httpx_module
        self._idle_timeout_s = idle_timeout_s
        self._stream_cls = _bind_stream(httpx_module)

    async def handle_async_request(self, request: Any) -> Any:
        """Send ``request``; wrap the body of an uncompressed event-stream response."""
        request.headers["Accept-Encoding"] = "identity"
        response = await self._inner.handle_async_request(request)
        content_type = response.headers.get("content-type", "")
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if not content_type.startswith("text/event-stream") or encoding not in ("", "identity"):
            return response
        activity = WireActivity()
        extensions = dict(response.extensions)
        extensions["acagent.activity"] = activity
        return self._httpx.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=self._stream_cls(response.stream, activity, self._idle_timeout_s),
            extensions=extensions,
        )

    async def aclose(self) -> None:
        """Close the inner transport."""
        await self._inner.aclose()


_BOUND: dict[str, tuple[type, type]] = {}


def _bind_both(httpx_module: Any) -> tuple[type, type]:
    key = httpx_module.__name__
    if key not in _BOUND:
        transport = type(
            "SSENormalizingTransport", (SSENormalizingTransport, httpx_module.AsyncBaseTransport), {}
        )
        stream = type("NormalizedSSEStream", (_NormalizedStream, httpx_module.AsyncByteStream), {})
        _BOUND[key] = (transport, stream)
    return _BOUND[key]


def _bind(httpx_module: Any) -> type:
    return _bind_both(httpx_module)[0]


def _bind_stream(httpx_module: Any) -> type:
    return _bind_both(httpx_module)[1]


def iter_canonical(chunks: Iterator[bytes]) -> bytes:
    """The canonical bytes of a whole stream given as chunks (tests and benchmarks)."""
    normalizer = SSENormalizer()
    out = b"".join(normalizer.feed(c) for c in chunks)
    return out + normalizer.finish()
