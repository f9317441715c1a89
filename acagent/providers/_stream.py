"""Streaming scaffolding shared by the HTTP adapters (OpenAI, Anthropic).

:class:`BaseStreamedResponse` owns what every wire API has in common (pydantic-ai's
``StreamedResponse`` plays this role there): reading the response's events
(:class:`~acagent.providers._http.EventSource`) under the call's deadline, translating
transport errors, feeding the shared :class:`~acagent.providers.PartsBuilder`, deciding whether
the stream is complete, and building the final :class:`~acagent.providers.Response`. An adapter
implements :meth:`~BaseStreamedResponse._on_item` (one ``(type, data)`` event → stream events)
and the two questions about its end markers.

Completion policy (F22):

* a stream is **complete** once it delivered its terminal information — the finish reason
  together with the final usage (OpenAI: ``finish_reason`` and the usage chunk, or the
  ``[DONE]`` marker; Anthropic: ``message_delta`` with ``stop_reason`` and usage, or
  ``message_stop``). A connection that breaks after that point (inside ``[DONE]`` or
  ``message_stop``) changes nothing: the reply is returned, no retry, no second payment;
* a stream that ends or breaks **before** that point raises
  :class:`~acagent.errors.StreamTruncated` (retryable): the loop retries the step with the same
  request body and journals ``llm.retry`` with ``reason: "stream_truncated"``;
* silence on the wire longer than the idle timeout (keep-alive comments count as activity, see
  :mod:`acagent.providers._sse`) raises :class:`~acagent.errors.ProviderConnectionError`
  (a stall), unless the terminal information had already arrived.
"""

from __future__ import annotations

import json
import logging
import re
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterable
from json.decoder import scanstring as _scanstring  # type: ignore[attr-defined]
from typing import Any, TypeVar

import anyio
import orjson

from acagent.errors import ProviderConnectionError, StreamTruncated, UnexpectedModelBehavior
from acagent.providers._base import Response, StreamEvent
from acagent.providers._parts import PartsBuilder
from acagent.providers._sse import WireActivity, WireStall


def transport_errors() -> tuple[type[BaseException], ...]:
    """The transport error types: :class:`acagent.providers._h1.WireError`, and httpx's once
    httpx is imported (nothing imports it for this): ``TransportError`` and ``DecodingError``."""
    import sys

    from acagent.providers._h1 import WireError

    httpx = sys.modules.get("httpx")
    if httpx is None:
        return (WireError,)
    # DecodingError (a body its content-encoding does not decode) is no TransportError in
    # httpx, but the same fault as _h1's WireError for it: a broken answer, not a bug.
    return (WireError, httpx.TransportError, httpx.DecodingError)


__all__ = ["BaseStreamedResponse", "FragmentTemplate", "next_chunk", "parse_data"]

log = logging.getLogger("acagent.providers")

_T = TypeVar("_T")


def parse_data(provider: str, data: str) -> Any:
    """One event's data as JSON.

    Raises:
        UnexpectedModelBehavior: the data is not JSON (retryable, like a broken stream).
    """
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise UnexpectedModelBehavior(
            f"{provider!r} sent a stream event that is not JSON: {exc}", body=data[:500]
        ) from exc


_SURROGATE = re.compile("[\ud800-\udfff]")
"""A lone surrogate, which the strict decoder refuses (the string scanner accepts it)."""


class FragmentTemplate:
    """One stream's recurring event — the same JSON but for one string value — as the text
    around that value, so the next such events are read without decoding them (F24).

    Why: 1 MB of tool arguments in 9-byte fragments is 116,509 events, identical but for the
    fragment; decoding each into dicts and walking them cost more than everything else done per
    fragment. :meth:`learn` derives the template from an event already decoded and checked, and
    proves it (the text around the value, with another value in its place, decodes to the same
    event); :meth:`match` gives the value of an event with exactly that text around one JSON
    string literal, or None — anything else (another shape, an invalid literal) is decoded in
    full by the caller, with the same errors as before.
    """

    __slots__ = ("prefix", "suffix")

    def __init__(self, prefix: str, suffix: str) -> None:
        self.prefix, self.suffix = prefix, suffix

    @classmethod
    def learn(cls, data: str, event: dict[str, Any], path: tuple[str | int, ...]) -> FragmentTemplate | None:
        """The template of ``data`` around the string at ``path`` in ``event`` (its decoding,
        which this changes), or None when that string's place in the text is not certain."""
        *parents, key = path
        holder: Any = event
        for step in parents:
            holder = holder[step]
        value = holder[key]
        found = []
        for m in re.finditer(re.escape(json.dumps(key)) + r'\s*:\s*"', data):
            try:
                decoded, end = _scanstring(data, m.end())
            except ValueError:
                continue
            if decoded == value:
                found.append((m.end() - 1, end))
        if len(found) != 1:
            return None
        start, end = found[0]
        template = cls(data[:start], data[end:])
        holder[key] = value + "\x01é"
        try:
            proof = orjson.loads(template.prefix + orjson.dumps(holder[key]).decode() + template.suffix)
        except orjson.JSONDecodeError:
            return None
        return template if proof == event else None

    def match(self, data: str) -> str | None:
        """The string value of ``data`` when it is this template's text around one valid JSON
        string literal, else None (the caller then decodes ``data`` in full)."""
        if not data.startswith(self.prefix) or not data.endswith(self.suffix):
            return None
        start = len(self.prefix)
        if data[start : start + 1] != '"':
            return None
        value: str
        try:  # the C string scanner: strict (control characters, bad escapes are errors)
            value, end = _scanstring(data, start + 1)
        except ValueError:
            return None
        if end != len(data) - len(self.suffix) or _SURROGATE.search(value):
            return None
        return value


async def next_chunk(
    iterator: AsyncIterator[_T],
    *,
    provider: str,
    idle_timeout_s: float,
    deadline: float,
    activity: WireActivity | None = None,
) -> _T | None:
    """Await the next stream item under the call's overall deadline.

    Args:
        iterator: the response's event iterator.
        provider: provider id, quoted in messages.
        idle_timeout_s: maximum silence before this item, in seconds — enforced here only when
            ``activity`` is None; with a normalised body the byte reader enforces it, so
            keep-alives reset it.
        deadline: absolute ``anyio.current_time()`` by which the whole call must end.
        activity: the response's :class:`WireActivity`, when its body is normalised.

    Returns:
        The item, or None when the iterator is exhausted.

    Raises:
        ProviderConnectionError: past ``deadline``, or no item within ``idle_timeout_s``
            (retryable).
    """
    if activity is not None:
        # A normalised body enforces the idle timeout per read of raw bytes, and the loop bounds
        # the whole call (``llm_timeout_s``); no timer per item here: items can arrive 100,000
        # times a second and a cancel scope each cost more than the item itself.
        activity.items += 1
        if not activity.items % 256 and deadline <= anyio.current_time():  # a clock read costs µs
            raise ProviderConnectionError(f"{provider!r} call exceeded its overall timeout")
        try:
            return await iterator.__anext__()
        except StopAsyncIteration:
            return None
        except WireStall as exc:
            raise ProviderConnectionError(f"{provider!r} {exc}") from exc
    remaining = deadline - anyio.current_time()
    timeout = min(idle_timeout_s, remaining)
    try:
        with anyio.fail_after(max(timeout, 0.0)):
            return await iterator.__anext__()
    except StopAsyncIteration:
        return None
    except WireStall as exc:
        raise ProviderConnectionError(f"{provider!r} {exc}") from exc
    except TimeoutError as exc:
        if remaining <= idle_timeout_s:
            raise ProviderConnectionError(f"{provider!r} call exceeded its overall timeout") from exc
        raise ProviderConnectionError(
            f"{provider!r} sent nothing for {idle_timeout_s:g} s (idle timeout); the stream stalled"
        ) from exc


class BaseStreamedResponse(ABC):
    """A reply being streamed (implements ``StreamedResponse``).

    Args:
        stream: the response's events, ``(type, data)`` pairs
            (:class:`~acagent.providers._http.EventSource`, or any async iterator of pairs whose
            ``activity`` attribute is a :class:`WireActivity` or None).
        provider: provider id, quoted in messages.
        base_url: endpoint, quoted in messages.
        idle_timeout_s: maximum silence on the wire, in seconds.
        deadline: absolute ``anyio.current_time()`` by which the call must end.
    """

    def __init__(
        self, stream: Any, *, provider: str, base_url: str, idle_timeout_s: float, deadline: float
    ) -> None:
        self._stream = stream
        self._provider, self._base_url = provider, base_url
        self._idle_timeout_s, self._deadline = idle_timeout_s, deadline
        self._activity: WireActivity | None = getattr(stream, "activity", None)
        self._builder = PartsBuilder()
        self._finish_reason: str | None = None
        """Normalised finish reason (``stop``, ``tool_calls``, ``length``, or the API's own)."""
        self._response_id: str | None = None
        self._response: Response | None = None

    # -- what an adapter provides ----------------------------------------------
    @abstractmethod
    def _on_item(self, item: tuple[str, str]) -> Iterable[StreamEvent]:
        """Map one ``(event type, data)`` to stream events (and record end markers).

        Raises:
            ProviderHTTPError: an in-band error event; UnexpectedModelBehavior: data that is
                not the JSON the API sends.
        """

    @abstractmethod
    def _terminal(self) -> bool:
        """True once the finish reason and the final usage arrived (see module docstring)."""

    def _ended(self) -> bool:
        """True once the explicit end marker arrived (reading stops)."""
        return False

    def _check_complete(self) -> None:  # noqa: B027 - optional hook
        """Raise if a terminal stream is still unusable (e.g. nameless tool calls)."""

    # -- shared scaffolding ------------------------------------------------------
    @property
    def received_bytes(self) -> int:
        """Body bytes received so far (0 when the body is not normalised)."""
        return self._activity.bytes if self._activity is not None else 0

    async def __aiter__(self) -> AsyncIterator[StreamEvent]:
        """Yield events until the end marker / end of stream, then build the response.

        Raises:
            ProviderError: HTTP or in-band error; :class:`~acagent.errors.StreamTruncated`
                when the stream ended or broke before its terminal information; a stall.
        """
        try:
            while not self._ended():
                try:
                    item = await next_chunk(
                        self._stream,
                        provider=self._provider,
                        idle_timeout_s=self._idle_timeout_s,
                        deadline=self._deadline,
                        activity=self._activity,
                    )
                except transport_errors() as exc:
                    raise ProviderConnectionError(
                        f"connection to {self._provider!r} at {self._base_url!r} broke: {exc!r}"
                    ) from exc
                if item is None:
                    break
                for event in self._on_item(item):
                    yield self._builder.feed(event)
        except ProviderConnectionError as exc:
            if not self._terminal():
                if isinstance(exc.__cause__, WireStall) or isinstance(exc, StreamTruncated):
                    raise
                raise StreamTruncated(
                    f"{self._provider!r} stream was truncated: the connection broke after "
                    f"{self.received_bytes} bytes, before the reply's finish reason ({exc.message})",
                    received_bytes=self.received_bytes,
                ) from exc
            log.info("%s: stream broke after its terminal information; the reply is complete", self._provider)
        if not self._terminal():
            raise StreamTruncated(
                f"{self._provider!r} stream was truncated: it ended after {self.received_bytes} bytes, "
                "before the reply's finish reason and final usage",
                received_bytes=self.received_bytes,
            )
        self._check_complete()
        self._response = Response(
            parts=self._builder.build(self._finish_reason),
            usage=self._builder.usage,
            finish_reason=self._finish_reason or "stop",
            provider_response_id=self._response_id,
        )

    def get(self) -> Response:
        """The complete reply.

        Raises:
            RuntimeError: the stream was not read to its end.
        """
        if self._response is None:
            raise RuntimeError("get() called before the stream finished")
        return self._response

    def partial_text(self) -> str:
        """Text streamed so far, in part order."""
        return self._builder.partial_text()
