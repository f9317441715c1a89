"""The WHATWG event-stream parser the HTTP adapters read provider streams with (F21).

OpenAI-compatible servers (and proxies in front of Anthropic) send event streams that are valid
per the WHATWG rules but that common decoders (the SDKs', httpx-sse) mishandle: a block holding
only ``id:`` or only ``retry:`` is dispatched as an event with empty data (``json.loads("")``
then fails and the stream looks broken), and after one ``id:`` every later blank line
dispatches such an empty event, because the decoders never reset the id they carry. Invalid
UTF-8 makes a strict ``bytes.decode`` raise mid-stream.

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

The adapters get each dispatched event as ``(type, data)``
(:class:`~acagent.providers._http.EventSource`); ``feed`` gives the canonical form instead —
``event: TYPE`` then one ``data: LINE`` per data line, then a blank line, LF line ends, valid
UTF-8 — which the tests compare. Comments and keep-alives produce no event but count as wire
activity (:class:`WireActivity`): the idle timeout measures silence on the wire, not time
between model events, so keep-alives minutes apart never look like a stall.
"""

from __future__ import annotations

import codecs
import re
import time
from collections.abc import Iterator

__all__ = ["SSENormalizer", "WireActivity", "WireStall", "iter_canonical"]

_LINE_END = re.compile(r"\r\n|\r|\n")


class WireStall(Exception):
    """Raised by an event source when no byte (not even a keep-alive) arrived within the idle
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
        """Stream events read from this response (counted by ``next_chunk``)."""

    def touch(self, n: int) -> None:
        """Record ``n`` bytes received now."""
        self.last_s = time.monotonic()
        self.bytes += n


class SSENormalizer:
    """Incremental WHATWG event-stream parser (see module doc).

    ``feed_events(chunk)`` returns the ``(type, data)`` of every event completed by ``chunk``
    (data lines joined with LF, type ``message`` when none was given); ``feed(chunk)`` returns
    their canonical bytes instead. ``events`` counts the events dispatched so far.
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._first = True
        self._skip_lf = False
        self._data: list[str] = []
        self._event = ""
        self._out: list[tuple[str, str]] = []
        self.events = 0
        self.done_marker = False

    def feed_events(self, chunk: bytes) -> list[tuple[str, str]]:
        """Parse ``chunk``; return the events it completed (maybe none)."""
        text = self._decoder.decode(chunk)
        if self._first and text:
            self._first = False
            text = text.removeprefix("\ufeff")
        self._lines(text)
        out, self._out = self._out, []
        return out

    def feed(self, chunk: bytes) -> bytes:
        """Parse ``chunk``; return the canonical form of the events it completed (maybe b"")."""
        return "".join(
            f"event: {kind}\n" + "".join(f"data: {d}\n" for d in data.split("\n")) + "\n"
            for kind, data in self.feed_events(chunk)
        ).encode("utf-8")

    def _lines(self, text: str) -> None:
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
            self._line(line)
        if start < len(text):
            self._buffer += text[start:]

    def _line(self, line: str) -> None:
        if not line:
            if self._data:
                self.events += 1
                if self._data == ["[DONE]"]:
                    self.done_marker = True
                self._out.append((self._event or "message", "\n".join(self._data)))
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


def iter_canonical(chunks: Iterator[bytes]) -> bytes:
    """The canonical bytes of a whole stream given as chunks (tests and benchmarks)."""
    normalizer = SSENormalizer()
    out = b"".join(normalizer.feed(c) for c in chunks)
    return out + normalizer.finish()
