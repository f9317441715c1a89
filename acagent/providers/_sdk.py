"""The connection half shared by the SDK-backed adapters (OpenAI, Anthropic).

:class:`SDKProvider` owns what both adapters did twice: the SDK client, built lazily in a
worker thread on the first request (importing an SDK takes 0.5–8 s under load and must never
run on the event loop, nor just to check a model id), with SDK retries off and the
:mod:`~acagent.providers._sse` normaliser as its transport; posting a pre-encoded body
(:mod:`~acagent.providers._body`) as a stream under the first-byte timeout; and closing the
response when the caller leaves the context. An adapter supplies its SDK, its client class,
its body, its stream types, its error mapping and its :class:`BaseStreamedResponse` subclass.
"""

from __future__ import annotations

import importlib
import threading
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from contextlib import AbstractContextManager, asynccontextmanager, suppress
from typing import Any, ClassVar

import anyio
import anyio.to_thread

from acagent.errors import ProviderConnectionError
from acagent.providers._base import ModelRequest
from acagent.providers._sse import SSENormalizingTransport
from acagent.providers._stream import BaseStreamedResponse

__all__ = ["SDKProvider", "load_sdk", "transport_errors"]

_SDK_LOCK = threading.Lock()
_LOADED: dict[str, Any] = {}


def load_sdk(name: str) -> Any:
    """Import the SDK module ``name`` (``openai``, ``anthropic``) and its ``types``; returns it.

    Blocking (0.5–8 s cold): call it from a worker thread (:func:`anyio.to_thread.run_sync`)
    when an event loop runs; :class:`SDKProvider` does so on the first request.
    """
    module = _LOADED.get(name)
    if module is None:
        with _SDK_LOCK:
            module = importlib.import_module(name)
            importlib.import_module(f"{name}.types")
            _LOADED[name] = module
    return module


class SDKProvider(ABC):
    """Base of the SDK-backed providers (implements most of ``Provider``).

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
    """Request path relative to the SDK's base URL (``/chat/completions``, ``/v1/messages``)."""
    sdk_module: ClassVar[str]
    """The SDK's module name (``openai``, ``anthropic``)."""
    client_class: ClassVar[str]
    """The SDK's async client class (``AsyncOpenAI``, ``AsyncAnthropic``)."""

    def __init__(
        self, model: str, *, name: str, base_url: str, api_key: str, timeout_s: float, idle_timeout_s: float
    ) -> None:
        self.name = name
        self.model = model
        self.base_url = base_url
        self.timeout_s = timeout_s
        self.idle_timeout_s = idle_timeout_s
        self._api_key = api_key
        self._client: Any = None
        self._client_lock = anyio.Lock()

    # -- what an adapter provides ----------------------------------------------
    @abstractmethod
    def _stream_types(self, sdk: Any) -> tuple[Any, Any]:
        """``(cast_to, stream_cls)`` for ``client.post(..., stream=True)``."""

    @abstractmethod
    def encode_body(self, request: ModelRequest) -> bytes:
        """The JSON request body (deterministic: a retry sends the same bytes)."""

    @abstractmethod
    def _map_errors(self) -> AbstractContextManager[None]:
        """Translate the SDK's exceptions into :mod:`acagent.errors`."""

    @abstractmethod
    def _streamed(self, stream: Any, deadline: float) -> BaseStreamedResponse:
        """The adapter's streamed response over the SDK stream."""

    # -- shared ----------------------------------------------------------------
    def _make_client(self) -> Any:
        """Import the SDK and build the client (blocking: runs in a worker thread)."""
        sdk = load_sdk(self.sdk_module)
        import httpx2  # the SDKs' httpx flavour; imported with them

        transport = SSENormalizingTransport(
            httpx2.AsyncHTTPTransport(), httpx2, idle_timeout_s=self.idle_timeout_s
        )
        return getattr(sdk, self.client_class)(
            api_key=self._api_key,
            base_url=self.base_url,
            max_retries=0,  # the loop retries, journaled and visible (llm.retry)
            timeout=self.timeout_s,
            http_client=sdk.DefaultAsyncHttpxClient(transport=transport, timeout=self.timeout_s),
        )

    async def _get_client(self) -> Any:
        if self._client is None:
            async with self._client_lock:
                if self._client is None:
                    self._client = await anyio.to_thread.run_sync(self._make_client)
        return self._client

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
        body = self.encode_body(request)  # before any await: the request as it is now
        client = await self._get_client()
        cast_to, stream_cls = self._stream_types(load_sdk(self.sdk_module))
        with self._map_errors():
            try:
                with anyio.fail_after(min(self.idle_timeout_s, self.timeout_s)):
                    stream = await client.post(
                        self.path,
                        cast_to=cast_to,
                        content=body,
                        options={"headers": {"Idempotency-Key": request.request_id}},
                        stream=True,
                        stream_cls=stream_cls,
                    )
            except TimeoutError as exc:
                raise ProviderConnectionError(
                    f"{self.name!r} at {self.base_url!r} did not answer within {self.idle_timeout_s:g} s"
                ) from exc
        try:
            yield self._streamed(stream, deadline)
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(5.0), suppress(Exception):
                await stream.close()

    async def aclose(self) -> None:
        """Close the HTTP client (if one was built)."""
        if self._client is not None:
            await self._client.close()


def transport_errors() -> tuple[type[BaseException], ...]:
    """Raw transport exception types that may escape an SDK's own wrapping mid-stream."""
    types: list[type[BaseException]] = []
    for module in ("httpx2", "httpx"):
        with suppress(ImportError):
            types.append(__import__(module).TransportError)
    return tuple(types)
