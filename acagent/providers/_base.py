"""The provider seam: one normalized stream for every wire API.

A provider adapts one wire API (OpenAI-compatible Chat Completions, Anthropic Messages). The loop
calls :meth:`Provider.request_stream`, an async context manager yielding a
:class:`StreamedResponse`: iterate it for :data:`StreamEvent` items (text deltas, tool-call starts
and argument fragments, usage), then call :meth:`StreamedResponse.get` for the final
:class:`Response`, the same object a non-streamed call would return. Parts are assembled by the
shared :class:`PartsBuilder`, keyed by the part ``index`` the wire format gives.

Providers never retry by themselves (SDK retries are off): they raise
:class:`~acagent.errors.ProviderError` with ``retryable`` set, and the loop retries, journals the
attempt and publishes ``llm.retry``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar

import anyio

from acagent.errors import ProviderConnectionError, ProviderHTTPError, UnexpectedModelBehavior
from acagent.messages import Message, Part, ReasoningPart, TextPart, ToolCallPart

__all__ = [
    "ModelRequest",
    "PartsBuilder",
    "Provider",
    "ReasoningDelta",
    "Response",
    "StreamEvent",
    "StreamedResponse",
    "TextDelta",
    "ToolCallArgsDelta",
    "ToolCallStart",
    "ToolDefinition",
    "Usage",
    "UsageUpdate",
    "http_status_error",
    "is_retryable_status",
    "next_chunk",
    "parse_tool_arguments",
    "stream_error",
]


@dataclass(frozen=True)
class ToolDefinition:
    """A tool offered to the model."""

    name: str
    description: str
    parameters: dict[str, Any]
    """JSON schema of the arguments object (from the tool's pydantic argument model)."""


@dataclass(frozen=True)
class ModelRequest:
    """One LLM call."""

    system: str
    messages: list[Message]
    tools: list[ToolDefinition]
    request_id: str
    """Step request id, sent as the ``Idempotency-Key`` header."""
    max_tokens: int = 4096


@dataclass
class Usage:
    """Token usage of one step (``input_tokens``, ``output_tokens``)."""

    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """``input_tokens + output_tokens``."""
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class TextDelta:
    """A fragment of the text part at ``index``."""

    index: int
    text: str
    kind: Literal["text"] = "text"


@dataclass(frozen=True)
class ReasoningDelta:
    """A fragment of the reasoning part at ``index``."""

    index: int
    text: str
    kind: Literal["reasoning"] = "reasoning"


@dataclass(frozen=True)
class ToolCallStart:
    """A new tool call begins at ``index``."""

    index: int
    tool_call_id: str
    name: str
    kind: Literal["tool_call_start"] = "tool_call_start"


@dataclass(frozen=True)
class ToolCallArgsDelta:
    """A fragment of the JSON argument text of the tool call at ``index``."""

    index: int
    args_text: str
    kind: Literal["tool_call_args"] = "tool_call_args"


@dataclass(frozen=True)
class UsageUpdate:
    """Usage so far (absolute values, not increments); ``None`` fields are unknown."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    kind: Literal["usage"] = "usage"


StreamEvent = TextDelta | ReasoningDelta | ToolCallStart | ToolCallArgsDelta | UsageUpdate


@dataclass
class Response:
    """A complete assistant reply."""

    parts: list[Part]
    usage: Usage
    finish_reason: str
    """Normalized: ``stop``, ``tool_calls``, ``length``, or the provider's own value."""
    provider_response_id: str | None = None

    @property
    def message(self) -> Message:
        """The reply as an assistant :class:`Message`."""
        return Message(role="assistant", parts=list(self.parts))


@dataclass
class _Slot:
    kind: Literal["text", "reasoning", "tool_call"]
    text: list[str] = field(default_factory=list)
    tool_call_id: str = ""
    name: str = ""
    metadata: dict[str, Any] | None = None


class PartsBuilder:
    """Assembles streamed fragments into parts, keyed by the wire ``index``.

    Fragments are routed by index only. Tool-call argument text is joined and parsed once,
    in :meth:`build` (after the terminal marker), never per fragment. Feeding the builder an
    event returns the same event, so providers can ``yield builder.feed(ev)``.
    """

    def __init__(self) -> None:
        self._slots: dict[int, _Slot] = {}
        self._order: list[int] = []
        self.usage = Usage()

    def _slot(self, index: int, kind: Literal["text", "reasoning", "tool_call"]) -> _Slot:
        slot = self._slots.get(index)
        if slot is None:
            slot = _Slot(kind=kind)
            self._slots[index] = slot
            self._order.append(index)
        return slot

    def feed(self, event: StreamEvent) -> StreamEvent:
        """Record one stream event and return it."""
        if isinstance(event, TextDelta):
            self._slot(event.index, "text").text.append(event.text)
        elif isinstance(event, ReasoningDelta):
            self._slot(event.index, "reasoning").text.append(event.text)
        elif isinstance(event, ToolCallStart):
            slot = self._slot(event.index, "tool_call")
            slot.tool_call_id, slot.name = event.tool_call_id, event.name
        elif isinstance(event, ToolCallArgsDelta):
            self._slot(event.index, "tool_call").text.append(event.args_text)
        elif isinstance(event, UsageUpdate):
            if event.input_tokens is not None:
                self.usage.input_tokens = event.input_tokens
            if event.output_tokens is not None:
                self.usage.output_tokens = event.output_tokens
        return event

    def set_metadata(
        self,
        index: int,
        metadata: dict[str, Any],
        kind: Literal["text", "reasoning", "tool_call"] | None = None,
    ) -> None:
        """Attach provider metadata (e.g. a thinking signature) to the part at ``index``.

        Args:
            index: part index.
            metadata: merged into the part's ``provider_metadata``.
            kind: when given, the part is created if it does not exist yet (a thinking block
                whose signature arrives before, or without, any text).
        """
        slot = self._slots.get(index)
        if slot is None and kind is not None:
            slot = self._slot(index, kind)
        if slot is not None:
            slot.metadata = {**(slot.metadata or {}), **metadata}

    def partial_text(self) -> str:
        """All text streamed so far, in part order (what the user saw)."""
        return "".join("".join(self._slots[i].text) for i in self._order if self._slots[i].kind == "text")

    def build(self) -> list[Part]:
        """The finished parts, in index order; empty text parts are dropped."""
        parts: list[Part] = []
        for i in self._order:
            slot = self._slots[i]
            text = "".join(slot.text)
            if slot.kind == "text":
                if text:
                    parts.append(TextPart(text=text))
            elif slot.kind == "reasoning":
                if text or slot.metadata:
                    parts.append(ReasoningPart(text=text, provider_metadata=slot.metadata))
            else:
                if not slot.name:
                    raise UnexpectedModelBehavior(f"tool call at index {i} has no name", body=text)
                args, error = parse_tool_arguments(text)
                parts.append(
                    ToolCallPart(
                        tool_call_id=slot.tool_call_id, name=slot.name, arguments=args, arguments_error=error
                    )
                )
        return parts


def parse_tool_arguments(text: str | None) -> tuple[dict[str, Any], str | None]:
    """Parse streamed tool-call argument text.

    Returns:
        ``(arguments, error)``: empty/null/whitespace text is ``({}, None)``; a JSON object is
        ``(obj, None)``; anything else is ``({}, "<reason>")`` and the call must not run.
    """
    if text is None or not text.strip():
        return {}, None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return {}, f"invalid JSON arguments ({exc.msg} at char {exc.pos}): {text[:200]!r}"
    if not isinstance(value, dict):
        return {}, f"arguments must be a JSON object, got {type(value).__name__}"
    return value, None


class StreamedResponse(Protocol):
    """A reply being streamed: iterate for events, then :meth:`get` the :class:`Response`."""

    def __aiter__(self) -> AsyncIterator[StreamEvent]:
        """Yield normalized stream events until the terminal marker.

        Raises:
            ProviderError: on an HTTP error, an in-band error event, a broken connection, or a
                stream that ends without its terminal marker.
        """
        ...

    def get(self) -> Response:
        """The complete reply; valid only after iteration finished without error."""
        ...

    def partial_text(self) -> str:
        """Text streamed so far (used to record partial output on cancel)."""
        ...


class Provider(Protocol):
    """One wire API bound to one model."""

    name: str
    """Provider id, e.g. ``openai``, ``anthropic``, ``ollama``, ``local``."""
    model: str
    """Model name sent to the API."""
    supports_tools: bool

    def request_stream(self, request: ModelRequest) -> AbstractAsyncContextManager[StreamedResponse]:
        """Open a streamed request; leaving the context closes the HTTP response (aborting it)."""
        ...

    async def aclose(self) -> None:
        """Release the HTTP client (and any embedded server)."""
        ...


# --------------------------------------------------------------------------- shared by adapters

RETRYABLE_ERROR_TYPES = frozenset(
    {
        "overloaded_error",
        "api_error",
        "rate_limit_error",
        "timeout_error",
        "server_error",
        "internal_error",
        "internal_server_error",
        "service_unavailable",
        "rate_limit_exceeded",
    }
)
"""Error ``type`` values (OpenAI ``error.type``/``error.code``, Anthropic ``error.type``) that a
retry may cure."""


def is_retryable_status(status_code: int) -> bool:
    """True for 408, 409, 429 and every 5xx (Anthropic's 529 "overloaded" included)."""
    return status_code in (408, 409, 429) or status_code >= 500


def _retry_after_s(headers: Mapping[str, str]) -> float | None:
    """Seconds from ``retry-after-ms`` / ``retry-after`` (delta-seconds form only)."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value:
            try:
                return max(0.0, float(value) * scale)
            except ValueError:
                continue
    return None


def http_status_error(
    provider: str,
    status_code: int,
    *,
    body: Any,
    headers: Mapping[str, str],
    error_type: str | None,
    api_message: str | None,
    key_env: str | None,
) -> ProviderHTTPError:
    """Build the :class:`ProviderHTTPError` for a non-2xx answer.

    Args:
        provider: provider id, quoted in the message.
        status_code: HTTP status.
        body: decoded error body (as the SDK gives it).
        headers: response headers (lower-case names); ``retry-after(-ms)`` is honoured.
        error_type: the API's error type (``overloaded_error``, ``invalid_request_error``...).
        api_message: the API's human message.
        key_env: env var holding the key (named in the 401/403 message), None if keyless.

    Returns:
        The error; retryable for 408/409/429/5xx/529 and overloaded errors, never for 401/403.
    """
    detail = api_message or str(body)[:500]
    etype = error_type or f"http_{status_code}"
    if status_code in (401, 403):
        fix = f"set {key_env} to a valid key" if key_env else "check the server's credentials"
        return ProviderHTTPError(
            f"{provider!r} rejected the API key (HTTP {status_code}): {detail}; {fix}",
            status_code=status_code,
            body=body,
            headers=dict(headers),
            retryable=False,
            error_type=etype,
        )
    retryable = is_retryable_status(status_code) or etype in RETRYABLE_ERROR_TYPES or "overloaded" in etype
    return ProviderHTTPError(
        f"{provider!r} answered HTTP {status_code} ({etype}): {detail}",
        status_code=status_code,
        body=body,
        headers=dict(headers),
        retryable=retryable,
        error_type=etype,
        retry_after_s=_retry_after_s(headers),
    )


def stream_error(
    provider: str, *, error_type: str | None, api_message: str | None, body: Any
) -> ProviderHTTPError:
    """Build the error for an in-band error event inside a 200 stream (``status_code`` None).

    Retryable when ``error_type`` is in :data:`RETRYABLE_ERROR_TYPES` (``overloaded_error``...).
    """
    etype = error_type or "stream_error"
    return ProviderHTTPError(
        f"{provider!r} stream failed mid-way ({etype}): {api_message or body}",
        status_code=None,
        body=body,
        retryable=etype in RETRYABLE_ERROR_TYPES or "overloaded" in etype,
        error_type=etype,
    )


_T = TypeVar("_T")


async def next_chunk(
    iterator: AsyncIterator[_T], *, provider: str, idle_timeout_s: float, deadline: float
) -> _T | None:
    """Await the next stream item under the idle timeout and the call's overall deadline.

    Args:
        iterator: the SDK's event iterator.
        provider: provider id, quoted in messages.
        idle_timeout_s: maximum silence before this item, in seconds.
        deadline: absolute ``anyio.current_time()`` by which the whole call must end.

    Returns:
        The item, or None when the iterator is exhausted.

    Raises:
        ProviderConnectionError: no item within ``idle_timeout_s`` or past ``deadline``
            (retryable).
    """
    remaining = deadline - anyio.current_time()
    timeout = min(idle_timeout_s, remaining)
    try:
        with anyio.fail_after(max(timeout, 0.0)):
            return await iterator.__anext__()
    except StopAsyncIteration:
        return None
    except TimeoutError as exc:
        if remaining <= idle_timeout_s:
            raise ProviderConnectionError(f"{provider!r} call exceeded its overall timeout") from exc
        raise ProviderConnectionError(
            f"{provider!r} sent nothing for {idle_timeout_s:g} s (idle timeout); the stream stalled"
        ) from exc
