"""Anthropic Messages provider.

Connection and mapping stay apart: :class:`AnthropicProvider` owns the ``AsyncAnthropic``
client (base URL, key, timeouts, SDK retries off); :func:`to_anthropic_messages` /
:func:`to_anthropic_tools` map the provider-neutral context to the wire, and
:class:`AnthropicStreamedResponse` maps the raw stream events (``messages.create(stream=True)``)
back to :data:`~acagent.providers.StreamEvent` items through the shared :class:`PartsBuilder`.

Stream events (Anthropic Messages streaming): ``message_start`` (id, input usage),
``content_block_start`` / ``content_block_delta`` / ``content_block_stop`` keyed by the block
``index`` (used as the part index), ``message_delta`` (``stop_reason``, output usage),
``message_stop`` (the terminal marker), ``ping`` (skipped by the SDK) and ``error`` (in-band,
raised by the SDK as an ``APIStatusError`` on the 200 response). ``thinking`` blocks become
:class:`~acagent.messages.ReasoningPart` carrying their ``signature`` in ``provider_metadata``.

``input_json_delta`` fragments are joined and parsed once, after ``message_stop``; an empty or
absent input is ``{}`` (F11 E1/E2). A stream that ends without ``message_stop`` raises
:class:`~acagent.errors.UnexpectedModelBehavior` (retryable); a partial ``tool_use`` is thus
never returned, so never run.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import anthropic
import anyio

from acagent.errors import ConfigError, ProviderConnectionError, UnexpectedModelBehavior
from acagent.messages import Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from acagent.providers._base import (
    ModelRequest,
    PartsBuilder,
    ReasoningDelta,
    Response,
    StreamEvent,
    TextDelta,
    ToolCallArgsDelta,
    ToolCallStart,
    ToolDefinition,
    UsageUpdate,
    http_status_error,
    next_chunk,
    stream_error,
)

if TYPE_CHECKING:
    from anthropic.types import RawMessageStreamEvent

    from acagent.settings import Settings

__all__ = [
    "AnthropicProvider",
    "AnthropicStreamedResponse",
    "create_provider",
    "to_anthropic_messages",
    "to_anthropic_tools",
]

ANTHROPIC_BASE_URL = "https://api.anthropic.com"
_PLACEHOLDER_KEY = "sk-ant-no-key-needed"
_STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
}


def _transport_errors() -> tuple[type[BaseException], ...]:
    """Raw transport exception types; the SDK does not wrap those raised mid-stream."""
    types: list[type[BaseException]] = []
    for module in ("httpx2", "httpx"):
        with suppress(ImportError):
            types.append(__import__(module).TransportError)
    return tuple(types)


_TRANSPORT_ERRORS = _transport_errors()


def _error_fields(body: Any) -> tuple[str | None, str | None]:
    """``(error.type, error.message)`` from ``{"type": "error", "error": {...}}``."""
    err = body.get("error") if isinstance(body, dict) else None
    if not isinstance(err, dict):
        return None, None
    return err.get("type"), err.get("message")


@contextmanager
def _map_api_errors(provider: str, base_url: str) -> Iterator[None]:
    """Translate ``anthropic`` SDK exceptions into :mod:`acagent.errors` (``raise ... from``).

    Raises:
        ProviderHTTPError: a non-2xx answer, or an in-band ``event: error`` inside a 200 stream
            (``status_code`` None; ``overloaded_error`` is retryable).
        ProviderConnectionError: connection refused/reset mid-stream, SDK timeout.
        UnexpectedModelBehavior: an event that is not valid JSON, or a response the SDK rejects.
    """
    try:
        yield
    except anthropic.APIStatusError as exc:
        error_type, message = _error_fields(exc.body)
        if exc.status_code < 400:  # in-band `event: error` on a 200 stream (F13)
            raise stream_error(provider, error_type=error_type, api_message=message, body=exc.body) from exc
        raise http_status_error(
            provider,
            exc.status_code,
            body=exc.body,
            headers={k.lower(): v for k, v in exc.response.headers.items()},
            error_type=error_type,
            api_message=message,
            key_env="ANTHROPIC_API_KEY",
        ) from exc
    except anthropic.APITimeoutError as exc:
        raise ProviderConnectionError(f"request to {provider!r} at {base_url!r} timed out") from exc
    except anthropic.APIConnectionError as exc:
        cause = exc.__cause__ or exc
        raise ProviderConnectionError(f"cannot reach {provider!r} at {base_url!r}: {cause}") from exc
    except anthropic.APIResponseValidationError as exc:
        raise UnexpectedModelBehavior(f"{provider!r} sent an invalid response: {exc}", body=exc.body) from exc
    except anthropic.APIError as exc:
        error_type, message = _error_fields(exc.body)
        raise stream_error(
            provider, error_type=error_type, api_message=message or str(exc), body=exc.body
        ) from exc
    except _TRANSPORT_ERRORS as exc:
        raise ProviderConnectionError(f"connection to {provider!r} at {base_url!r} broke: {exc!r}") from exc
    except json.JSONDecodeError as exc:
        raise UnexpectedModelBehavior(
            f"{provider!r} sent a stream event that is not JSON: {exc}", body=exc.doc[:500]
        ) from exc


# --------------------------------------------------------------------------- wire mapping


def to_anthropic_tools(tools: list[ToolDefinition]) -> list[dict[str, Any]]:
    """Tool definitions as Messages ``tools`` entries (``name``, ``description``, ``input_schema``)."""
    return [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools]


def _assistant_blocks(message: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, ReasoningPart):
            meta = part.provider_metadata or {}
            if meta.get("redacted_data"):
                blocks.append({"type": "redacted_thinking", "data": meta["redacted_data"]})
            elif meta.get("signature"):
                blocks.append({"type": "thinking", "thinking": part.text, "signature": meta["signature"]})
            # reasoning without a signature (another provider's) cannot be replayed: dropped
        elif isinstance(part, TextPart):
            if part.text.strip():
                blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, ToolCallPart):
            arguments = {} if part.arguments_error else part.arguments
            blocks.append(
                {"type": "tool_use", "id": part.tool_call_id, "name": part.name, "input": arguments}
            )
    return blocks


def _user_blocks(message: Message) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    texts: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, ToolResultPart):
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": part.tool_call_id,
                "content": part.content,
            }
            if part.is_error:
                block["is_error"] = True
            results.append(block)
        elif isinstance(part, TextPart) and part.text.strip():
            texts.append({"type": "text", "text": part.text})
    return results + texts


def to_anthropic_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Map the context to Messages ``messages``.

    * User messages: ``tool_result`` blocks first (one per result, in order; ``is_error`` only
      when set), then text blocks.
    * Assistant messages: blocks in part order; ``thinking`` only with its signature,
      ``tool_use`` with parsed ``input`` (``{}`` for a call whose arguments were invalid).
    * Empty or whitespace-only text is never sent; a message left without blocks is dropped;
      consecutive same-role messages are merged so roles alternate.
    * A message holding a single text block is sent with string ``content``.

    Returns:
        list of wire message dicts, in order.
    """
    out: list[dict[str, Any]] = []
    for message in messages:
        blocks = _assistant_blocks(message) if message.role == "assistant" else _user_blocks(message)
        if not blocks:
            continue
        if out and out[-1]["role"] == message.role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": message.role, "content": blocks})
    for wire in out:
        content = wire["content"]
        if len(content) == 1 and content[0]["type"] == "text":
            wire["content"] = content[0]["text"]
    return out


# --------------------------------------------------------------------------- stream mapping


def _input_tokens(usage: Any) -> int | None:
    """Input tokens including cache writes and reads (all three are prompt tokens)."""
    base = getattr(usage, "input_tokens", None)
    if base is None:
        return None
    extra = (getattr(usage, "cache_creation_input_tokens", None) or 0) + (
        getattr(usage, "cache_read_input_tokens", None) or 0
    )
    return int(base) + int(extra)


class AnthropicStreamedResponse:
    """A Messages stream being read (implements ``StreamedResponse``).

    Part indexes are the wire's content block ``index``. Iterate for :data:`StreamEvent`
    items, then :meth:`get` the :class:`Response`.
    """

    def __init__(
        self,
        stream: anthropic.AsyncStream[RawMessageStreamEvent],
        *,
        provider: str,
        base_url: str,
        idle_timeout_s: float,
        deadline: float,
    ) -> None:
        self._stream = stream
        self._provider, self._base_url = provider, base_url
        self._idle_timeout_s, self._deadline = idle_timeout_s, deadline
        self._builder = PartsBuilder()
        self._tool_inputs: dict[int, Any] = {}
        """Index → ``content_block_start`` input of a tool_use block not yet given a delta."""
        self._stop_reason: str | None = None
        self._stopped = False
        self._response_id: str | None = None
        self._response: Response | None = None

    async def __aiter__(self) -> AsyncIterator[StreamEvent]:
        """Yield events until ``message_stop``.

        Raises:
            ProviderError: HTTP or in-band error, broken or stalled connection, or (as
                UnexpectedModelBehavior) a stream without ``message_stop``.
        """
        iterator = self._stream  # its own __anext__; closing the response (request_stream) ends it
        while not self._stopped:
            with _map_api_errors(self._provider, self._base_url):
                event = await next_chunk(
                    iterator,
                    provider=self._provider,
                    idle_timeout_s=self._idle_timeout_s,
                    deadline=self._deadline,
                )
            if event is None:
                break
            for item in self._on_event(event):
                yield self._builder.feed(item)
        if not self._stopped:
            raise UnexpectedModelBehavior(
                f"{self._provider!r} stream ended without message_stop (cut off mid-reply)",
                body=self._builder.partial_text(),
            )
        self._response = Response(
            parts=self._builder.build(),
            usage=self._builder.usage,
            finish_reason=_STOP_REASONS.get(self._stop_reason or "", self._stop_reason or "stop"),
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

    def _on_event(self, event: Any) -> Iterator[StreamEvent]:
        kind = getattr(event, "type", None)
        if kind == "message_start":
            message = event.message
            self._response_id = getattr(message, "id", None)
            usage = getattr(message, "usage", None)
            if usage is not None:
                yield UsageUpdate(
                    input_tokens=_input_tokens(usage), output_tokens=getattr(usage, "output_tokens", None)
                )
        elif kind == "content_block_start":
            yield from self._on_block_start(event.index, event.content_block)
        elif kind == "content_block_delta":
            yield from self._on_block_delta(event.index, event.delta)
        elif kind == "content_block_stop":
            start_input = self._tool_inputs.pop(event.index, None)
            if start_input:  # a complete input given at block start and no delta
                yield ToolCallArgsDelta(event.index, json.dumps(start_input))
        elif kind == "message_delta":
            self._stop_reason = getattr(event.delta, "stop_reason", None) or self._stop_reason
            usage = getattr(event, "usage", None)
            if usage is not None:
                yield UsageUpdate(
                    input_tokens=_input_tokens(usage), output_tokens=getattr(usage, "output_tokens", None)
                )
        elif kind == "message_stop":
            self._stopped = True
        elif kind == "error":  # the SDK raises these itself; kept for other transports
            error = getattr(event, "error", None)
            raise stream_error(
                self._provider,
                error_type=getattr(error, "type", None),
                api_message=getattr(error, "message", None),
                body=event,
            )

    def _on_block_start(self, index: int, block: Any) -> Iterator[StreamEvent]:
        kind = getattr(block, "type", None)
        if kind == "text":
            if block.text:
                yield TextDelta(index, block.text)
        elif kind == "tool_use":
            yield ToolCallStart(index, block.id, block.name)
            self._tool_inputs[index] = getattr(block, "input", None)
        elif kind == "thinking":
            if getattr(block, "thinking", None):
                yield ReasoningDelta(index, block.thinking)
            if getattr(block, "signature", None):
                self._builder.set_metadata(index, {"signature": block.signature}, kind="reasoning")
        elif kind == "redacted_thinking":
            self._builder.set_metadata(index, {"redacted_data": block.data}, kind="reasoning")
        # server tool blocks (web search, ...) are not supported: ignored

    def _on_block_delta(self, index: int, delta: Any) -> Iterator[StreamEvent]:
        kind = getattr(delta, "type", None)
        if kind == "text_delta":
            if delta.text:
                yield TextDelta(index, delta.text)
        elif kind == "input_json_delta":
            if index in self._tool_inputs:
                self._tool_inputs[index] = None  # streamed input wins over the start input
            if delta.partial_json:  # "" (F11 E2) adds nothing
                yield ToolCallArgsDelta(index, delta.partial_json)
        elif kind == "thinking_delta":
            if delta.thinking:
                yield ReasoningDelta(index, delta.thinking)
        elif kind == "signature_delta":
            self._builder.set_metadata(index, {"signature": delta.signature}, kind="reasoning")


# --------------------------------------------------------------------------- provider


class AnthropicProvider:
    """The Anthropic Messages API bound to one model (implements ``Provider``).

    Args:
        model: model name sent as ``model``.
        base_url: endpoint root without ``/v1`` (None: ``https://api.anthropic.com``).
        api_key: the key; None is allowed only with a custom ``base_url`` (a placeholder is sent).
        timeout_s: maximum duration of one call, connect to last byte, in seconds.
        idle_timeout_s: maximum silence between two stream events, in seconds.
        name: provider id used in messages.

    Raises:
        ConfigError: no key for the official endpoint.
    """

    supports_tools: bool = True

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None,
        api_key: str | None,
        timeout_s: float = 300.0,
        idle_timeout_s: float = 120.0,
        name: str = "anthropic",
    ) -> None:
        self.name = name
        self.model = model
        self.base_url = (base_url or ANTHROPIC_BASE_URL).rstrip("/")
        self.timeout_s = timeout_s
        self.idle_timeout_s = idle_timeout_s
        if not api_key:
            if (urlsplit(self.base_url).hostname or "") == "api.anthropic.com":
                raise ConfigError(f"no API key for {name!r}: set ANTHROPIC_API_KEY")
            api_key = _PLACEHOLDER_KEY
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key, base_url=self.base_url, max_retries=0, timeout=timeout_s
        )

    def _request_kwargs(self, request: ModelRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_tokens,
            "messages": to_anthropic_messages(request.messages),
            "stream": True,
            "extra_headers": {"Idempotency-Key": request.request_id},
        }
        if request.system.strip():
            kwargs["system"] = request.system
        if request.tools:
            kwargs["tools"] = to_anthropic_tools(request.tools)
        return kwargs

    @asynccontextmanager
    async def request_stream(self, request: ModelRequest) -> AsyncIterator[AnthropicStreamedResponse]:
        """Open a streamed ``POST /v1/messages``; leaving the context closes the response.

        Yields:
            The :class:`AnthropicStreamedResponse` to iterate.

        Raises:
            ProviderError: on entry, for an HTTP error or an unreachable endpoint.
        """
        deadline = anyio.current_time() + self.timeout_s
        kwargs = self._request_kwargs(request)
        with _map_api_errors(self.name, self.base_url):
            try:
                with anyio.fail_after(min(self.idle_timeout_s, self.timeout_s)):
                    stream = await self._client.messages.create(**kwargs)
            except TimeoutError as exc:
                raise ProviderConnectionError(
                    f"{self.name!r} at {self.base_url!r} did not answer within {self.idle_timeout_s:g} s"
                ) from exc
        try:
            yield AnthropicStreamedResponse(
                stream,
                provider=self.name,
                base_url=self.base_url,
                idle_timeout_s=self.idle_timeout_s,
                deadline=deadline,
            )
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(5.0), suppress(Exception):
                await stream.close()

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._client.close()


def create_provider(model: str, settings: Settings) -> AnthropicProvider:
    """Entry point ``anthropic``.

    Base URL: ``settings.providers.base_url`` (``--base-url``), else ``anthropic_base_url``
    (``ANTHROPIC_BASE_URL``), else api.anthropic.com. Key: ``anthropic_api_key``
    (``ANTHROPIC_API_KEY``).

    Raises:
        ConfigError: no key for the official endpoint.
    """
    p = settings.providers
    return AnthropicProvider(
        model,
        base_url=p.base_url or p.anthropic_base_url,
        api_key=p.anthropic_api_key,
        timeout_s=settings.timing.llm_timeout_s,
        idle_timeout_s=settings.timing.llm_idle_timeout_s,
    )
