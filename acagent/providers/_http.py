"""The connection half shared by the HTTP adapters (OpenAI-compatible, Anthropic).

:class:`HTTPProvider` posts a body the adapter encoded itself (:mod:`~acagent.providers._body`)
with ``httpx``, or to a plain-http endpoint without a proxy with acagent's small HTTP/1.1 client
(:mod:`~acagent.providers._h1`: httpx's import is a tenth of a one-shot turn), and reads the event stream with acagent's own WHATWG parser
(:mod:`~acagent.providers._sse`); an adapter supplies its path, headers, body, error-body
reading and its :class:`~acagent.providers._stream.BaseStreamedResponse` subclass.

Why not the official SDKs (they were the wire until issue 12): the adapters already encoded the
body, parsed the event stream (F21) and mapped every stream item themselves, so the SDKs only
added their import and a pydantic object per stream item. Importing ``openai`` costs 0.7–0.9 s
of CPU and ``anthropic`` 2.2 s on this machine (``/usr/bin/time python -c "import openai"``) —
more than a whole one-shot tool-call turn of Codex (0.59 s) — and building the SDK's objects
for each delta was a large share of the daemon's CPU per streamed delta. What the SDKs did
besides is small and kept here: the auth headers, ``Idempotency-Key``, status errors with their
JSON body and headers (``retry-after``), transport errors as
:class:`~acagent.errors.ProviderConnectionError`.

``httpx`` is imported on the first request that needs it, in a worker thread (it costs ~0.15 s):
building a provider, and so checking a model id, imports nothing of the network stack (F27, F53).
"""

from __future__ import annotations

import sys
import threading
import types
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from typing import Any, ClassVar

import anyio
import anyio.to_thread
import orjson

from acagent._url import redact_url
from acagent.errors import (
    ConfigError,
    ContextOverflow,
    ProviderConnectionError,
    ProviderError,
    ProviderHTTPError,
)
from acagent.providers import _h1
from acagent.providers._base import ModelRequest
from acagent.providers._sse import SSENormalizer, WireActivity, WireStall
from acagent.providers._stream import BaseStreamedResponse, transport_errors

__all__ = ["BodyParts", "EventSource", "HTTPProvider", "api_key_or_placeholder", "load_httpx"]

_LOCK = threading.Lock()
_HTTPX: list[Any] = []


def load_httpx() -> Any:
    """Import ``httpx`` (blocking, ~0.15 s cold: call it from a worker thread) and return it.

    ``httpx/__init__.py`` imports its command-line tool (``httpx._main``: click, rich,
    pygments — about a third of httpx's import time) whenever click is installed, which typer
    guarantees. acagent never runs that tool, so when nothing imported httpx yet a placeholder
    ``httpx._main`` is registered first; its ``main`` names the real entry point.
    """
    if not _HTTPX:
        with _LOCK:
            if not _HTTPX:
                if "httpx" not in sys.modules and "httpx._main" not in sys.modules:
                    sys.modules["httpx._main"] = _placeholder_main()
                import httpx

                _HTTPX.append(httpx)
    return _HTTPX[0]


def _placeholder_main() -> types.ModuleType:
    module = types.ModuleType("httpx._main", "Placeholder: acagent does not load httpx's CLI.")

    def main() -> None:
        """httpx's command-line tool is not loaded in acagent's processes; run ``httpx``."""
        raise SystemExit("httpx's command-line tool is not loaded here; run the `httpx` command")

    module.main = main  # type: ignore[attr-defined]
    return module


class EventSource:
    """The events of one streamed response body: ``(type, data)`` pairs, WHATWG-parsed (F21).

    Args:
        response: an ``httpx.Response`` opened with ``stream=True``.
        idle_timeout_s: maximum silence between two reads of body bytes, in seconds; any byte
            (a keep-alive comment included) resets it.

    Iterating raises :class:`WireStall` after ``idle_timeout_s`` of silence and lets transport
    errors (``httpx.TransportError``) through for the adapter's mapping.
    """

    def __init__(self, response: Any, idle_timeout_s: float) -> None:
        self.response = response
        self.activity = WireActivity()
        # aiter_bytes: a server that compresses despite ``accept-encoding: identity`` is decoded
        # (an identity body passes through as it came).
        self._raw = response.aiter_bytes()
        self._parser = SSENormalizer()
        self._pending: deque[tuple[str, str]] = deque()
        self._idle_timeout_s = idle_timeout_s

    def __aiter__(self) -> EventSource:
        return self

    async def __anext__(self) -> tuple[str, str]:
        pending = self._pending
        while not pending:
            try:
                with anyio.fail_after(self._idle_timeout_s):
                    chunk = await self._raw.__anext__()
            except StopAsyncIteration:
                self._parser.finish()
                raise
            except TimeoutError:
                raise WireStall(self._idle_timeout_s) from None
            self.activity.touch(len(chunk))
            pending.extend(self._parser.feed_events(chunk))
            if self._parser.done_marker:
                self.activity.done_marker = True
        return pending.popleft()

    async def finish(self, *, wait_s: float = 0.05, max_bytes: int = 65536) -> None:
        """Close the response of a stream the adapter read to its end, reading first what is left
        of the body (after ``[DONE]`` or ``message_stop`` that is the last chunk's terminator, or
        nothing) for at most ``wait_s`` seconds and ``max_bytes`` bytes.

        A response read to its end hands its connection back to the client's pool (httpx's and
        :mod:`acagent.providers._h1`'s alike); closed before, the connection is dropped, and the
        next call paid a new TCP connect — over https a new TLS handshake — every time. A body
        that does not end within the bounds is closed as before.
        """
        left = max_bytes
        with anyio.move_on_after(wait_s):
            try:
                async for chunk in self._raw:
                    left -= len(chunk)
                    if left < 0:
                        break
            except Exception:  # a broken tail only costs the connection: it is closed below
                pass
        await self.response.aclose()


class BodyParts:
    """A request body given as its parts (:meth:`HTTPProvider.encode_parts`), for httpx's
    ``content=``: each part is written as it is, so a large cached part is never copied into a
    joined body (for a 500-turn history that copy, a fresh 2 MB allocation, cost ≈ 1.5 ms of CPU
    per call). Iterable again (a retried send gets the same bytes). The request must carry its
    ``content-length``: httpx then sends the parts as a Content-Length body, not chunked."""

    def __init__(self, parts: list[bytes]) -> None:
        self.parts = parts

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for part in self.parts:
            yield part


def _not_a_stream(content_type: str) -> str:
    """The media type of an answer that is certainly not an event stream (JSON, HTML), else "".

    A missing or other type is read as a stream (some local servers send ``text/plain``).
    """
    media = content_type.partition(";")[0].strip().lower()
    return media if media in ("application/json", "text/html") or media.endswith("+json") else ""


def _not_a_stream_error(error: ProviderError, media: str) -> ProviderError:
    """A 2xx answer with a JSON or HTML body instead of the stream (a gateway's error, a captive
    portal): the body's own message, retryable only if its error type is (it was retried as a
    "truncated stream" and reported as such, hiding the body)."""
    if isinstance(error, ContextOverflow):
        return error
    return ProviderHTTPError(
        f"{error.message} (a {media} body instead of an event stream)",
        status_code=getattr(error, "http_status", None),
        body=getattr(error, "body", None),
        retryable=error.retryable,
        error_type=error.error_type,
    )


def decode_body(raw: bytes) -> Any:
    """An error body as JSON when it is JSON, else its text (at most 2,000 characters)."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw[:2000].decode("utf-8", "replace")


def api_key_or_placeholder(api_key: str | None, *, official: bool, placeholder: str, missing: str) -> str:
    """The key to send: ``api_key``, or ``placeholder`` for a keyless compatible server.

    Raises:
        ConfigError: no key for the provider's official endpoint (``missing`` is the message).
    """
    if api_key:
        return api_key
    if official:
        raise ConfigError(missing)
    return placeholder


class HTTPProvider(ABC):
    """Base of the HTTP providers (implements most of ``Provider``).

    Args:
        model: model name sent as ``model``.
        name: provider id used in messages and model ids.
        base_url: endpoint root (no trailing slash).
        api_key: the key sent (a placeholder for keyless local servers).
        timeout_s: maximum duration of one call, connect to last byte, in seconds.
        idle_timeout_s: maximum silence on the wire, in seconds (keep-alives count as bytes).
    """

    supports_tools: bool = True
    path: ClassVar[str]
    """Request path appended to the base URL (``/chat/completions``, ``/v1/messages``)."""
    response_class: ClassVar[type[BaseStreamedResponse]]
    """The adapter's streamed response (built over each request's event source)."""

    def __init__(
        self, model: str, *, name: str, base_url: str, api_key: str, timeout_s: float, idle_timeout_s: float
    ) -> None:
        self.name = name
        self.model = model
        self.base_url = base_url
        self.shown_url = redact_url(base_url)
        """``base_url`` as messages show it (no user information, query or fragment)."""
        self.timeout_s = timeout_s
        self.idle_timeout_s = idle_timeout_s
        self._api_key = api_key
        self._client: Any = None
        self._client_lock = anyio.Lock()

    # -- what an adapter provides ----------------------------------------------
    @abstractmethod
    def _headers(self) -> dict[str, str]:
        """Authentication and API headers of every request."""

    @abstractmethod
    def encode_parts(self, request: ModelRequest) -> list[bytes]:
        """The JSON request body as the byte strings to send in order (deterministic: a retry
        sends the same bytes; ``b"".join`` of them is the body)."""

    def encode_body(self, request: ModelRequest) -> bytes:
        """The JSON request body (``b"".join`` of :meth:`encode_parts`)."""
        return b"".join(self.encode_parts(request))

    @abstractmethod
    def _status_error(self, status: int, body: Any, headers: dict[str, str]) -> ProviderError:
        """The error of a non-2xx answer (``body`` decoded by :func:`decode_body`)."""

    def _streamed(self, events: EventSource, deadline: float) -> BaseStreamedResponse:
        """The adapter's :attr:`response_class` over the event source."""
        return self.response_class(
            events,
            provider=self.name,
            base_url=self.shown_url,
            idle_timeout_s=self.idle_timeout_s,
            deadline=deadline,
        )

    # -- shared ----------------------------------------------------------------
    def _make_client(self) -> Any:
        """Build the client: :class:`acagent.providers._h1.Client` for a plain-http endpoint
        without a proxy (:func:`~acagent.providers._h1.usable_for`), else an ``httpx`` one
        (importing httpx blocks: then this runs in a worker thread)."""
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream",
            "accept-encoding": "identity",  # the parser reads the body bytes as they come
            "user-agent": "acagent",
            **self._headers(),
        }
        if _h1.usable_for(self.base_url):
            return _h1.Client(headers)
        httpx = load_httpx()
        # A plain-http endpoint (a local server, the mock) never does TLS (no redirects are
        # followed), so it skips loading the CA bundle (~15 ms of CPU per process).
        tls = not self.base_url.startswith("http://")
        return httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(self.timeout_s), verify=tls)

    async def _get_client(self) -> Any:
        if self._client is None:
            async with self._client_lock:
                if self._client is None:
                    if _h1.usable_for(self.base_url):
                        self._client = self._make_client()  # imports nothing: on the loop
                    else:
                        self._client = await anyio.to_thread.run_sync(self._make_client)
        return self._client

    @contextmanager
    def _transport_errors(self, stage: str) -> Iterator[None]:
        """Timeouts and transport errors (httpx's, :class:`~acagent.providers._h1.WireError`) as
        :class:`ProviderConnectionError`."""
        try:
            yield
        except transport_errors() as exc:
            httpx = sys.modules.get("httpx")
            if httpx is not None and isinstance(exc, httpx.TimeoutException):
                raise ProviderConnectionError(
                    f"request to {self.name!r} at {self.shown_url!r} timed out"
                ) from exc
            if stage == "connect":
                raise ProviderConnectionError(
                    f"cannot reach {self.name!r} at {self.shown_url!r}: {exc!r}"
                ) from exc
            raise ProviderConnectionError(
                f"connection to {self.name!r} at {self.shown_url!r} broke: {exc!r}"
            ) from exc

    @asynccontextmanager
    async def request_stream(self, request: ModelRequest) -> AsyncIterator[BaseStreamedResponse]:
        """Open a streamed ``POST``; leaving the context closes the response (aborting it).

        Yields:
            The adapter's streamed response, to iterate.

        Raises:
            ProviderError: on entry, for an HTTP error (``ContextOverflow`` for a context-length
                refusal) or an endpoint that does not answer within the idle timeout.
        """
        deadline = anyio.current_time() + self.timeout_s
        parts = self.encode_parts(request)  # before any await: the request as it is now
        client = await self._get_client()
        headers = {"idempotency-key": request.request_id}
        if len(parts) > 1:  # a Content-Length body, never chunked (not every endpoint takes that)
            headers["content-length"] = str(sum(map(len, parts)))
        post = client.build_request(
            "POST",
            self.base_url + self.path,
            content=parts[0] if len(parts) == 1 else BodyParts(parts),
            headers=headers,
        )
        try:
            with (
                self._transport_errors("connect"),
                anyio.fail_after(min(self.idle_timeout_s, self.timeout_s)),
            ):
                response = await client.send(post, stream=True)
                media = _not_a_stream(response.headers.get("content-type", ""))
                if response.status_code >= 300 or media:
                    try:
                        raw = await response.aread()
                    finally:
                        await response.aclose()
                    headers = {k.lower(): v for k, v in response.headers.items()}
                    error = self._status_error(response.status_code, decode_body(raw), headers)
                    raise error if response.status_code >= 300 else _not_a_stream_error(error, media)
        except TimeoutError as exc:
            raise ProviderConnectionError(
                f"{self.name!r} at {self.shown_url!r} did not answer within {self.idle_timeout_s:g} s"
            ) from exc
        source = EventSource(response, self.idle_timeout_s)
        try:
            yield self._streamed(source, deadline)
        except BaseException:
            with anyio.CancelScope(shield=True), anyio.move_on_after(5.0), suppress(Exception):
                await response.aclose()  # aborted: the connection is closed, never reused
            raise
        with anyio.CancelScope(shield=True), anyio.move_on_after(5.0), suppress(Exception):
            await source.finish()

    async def aclose(self) -> None:
        """Close the HTTP client (if one was built)."""
        if self._client is not None:
            await self._client.aclose()
