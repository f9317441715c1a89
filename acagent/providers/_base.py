"""The provider seam: one normalized stream for every wire API.

A provider adapts one wire API (OpenAI-compatible Chat Completions, Anthropic Messages). The loop
calls :meth:`Provider.request_stream`, an async context manager yielding a
:class:`StreamedResponse`: iterate it for :data:`StreamEvent` items (text deltas, tool-call starts
and argument fragments, usage), then call :meth:`StreamedResponse.get` for the final
:class:`Response`, the same object a non-streamed call would return. Parts are assembled by the
shared :class:`PartsBuilder`, keyed by the part ``index`` the wire format gives.

The data types are dataclasses over :mod:`acagent._value`'s bases, their ``__init__`` written
out (no per-class code generation at import: issue 12, the one-shot ``run``'s start-up).

Providers never retry by themselves (SDK retries are off): they raise
:class:`~acagent.errors.ProviderError` with ``retryable`` set, and the loop retries, journals the
attempt and publishes ``llm.retry``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from acagent._value import Frozen, Record, init_fields
from acagent.errors import ContextOverflow, ProviderError, ProviderHTTPError
from acagent.messages import Message, Part, check_history
from acagent.providers._error_text import error_text

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
    "is_context_overflow",
    "is_retryable_status",
    "next_chunk",
    "one_line",
    "parse_tool_arguments",
    "stream_error",
]


@dataclass(init=False, repr=False, eq=False)
class ToolDefinition(Frozen):
    """A tool offered to the model."""

    name: str
    description: str
    parameters: dict[str, Any]
    """JSON schema of the arguments object (from the tool's pydantic argument model)."""

    def __init__(self, name: str, description: str, parameters: dict[str, Any]) -> None:
        init_fields(self, name=name, description=description, parameters=parameters)


@dataclass(init=False, repr=False, eq=False)
class ModelRequest(Frozen):
    """One LLM call; building one checks its history (:func:`~acagent.messages.check_history`)."""

    system: str
    messages: list[Message]
    tools: list[ToolDefinition]
    request_id: str
    """Step request id, sent as the ``Idempotency-Key`` header."""
    max_tokens: int = 4096

    def __init__(
        self,
        system: str,
        messages: list[Message],
        tools: list[ToolDefinition],
        request_id: str,
        max_tokens: int = 4096,
    ) -> None:
        """Check (and deterministically repair) the history: the one check before every request.

        Raises:
            InvalidHistory: a history no rule repairs (:func:`acagent.messages.check_history`).
        """
        init_fields(
            self,
            system=system,
            messages=check_history(messages),
            tools=tools,
            request_id=request_id,
            max_tokens=max_tokens,
        )


@dataclass(repr=False, eq=False)
class Usage(Record):
    """Token usage of one step (``input_tokens``, ``output_tokens``)."""

    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """``input_tokens + output_tokens``."""
        return self.input_tokens + self.output_tokens


@dataclass(init=False, repr=False, eq=False)
class TextDelta(Frozen):
    """A fragment of the text part at ``index``."""

    index: int
    text: str
    kind: Literal["text"] = "text"

    def __init__(self, index: int, text: str, kind: Literal["text"] = "text") -> None:
        init_fields(self, index=index, text=text, kind=kind)


@dataclass(init=False, repr=False, eq=False)
class ReasoningDelta(Frozen):
    """A fragment of the reasoning part at ``index``."""

    index: int
    text: str
    kind: Literal["reasoning"] = "reasoning"

    def __init__(self, index: int, text: str, kind: Literal["reasoning"] = "reasoning") -> None:
        init_fields(self, index=index, text=text, kind=kind)


@dataclass(init=False, repr=False, eq=False)
class ToolCallStart(Frozen):
    """A new tool call begins at ``index``."""

    index: int
    tool_call_id: str
    name: str
    kind: Literal["tool_call_start"] = "tool_call_start"

    def __init__(
        self, index: int, tool_call_id: str, name: str, kind: Literal["tool_call_start"] = "tool_call_start"
    ) -> None:
        init_fields(self, index=index, tool_call_id=tool_call_id, name=name, kind=kind)


@dataclass(init=False, repr=False, eq=False)
class ToolCallArgsDelta(Frozen):
    """A fragment of the JSON argument text of the tool call at ``index``."""

    index: int
    args_text: str
    kind: Literal["tool_call_args"] = "tool_call_args"

    def __init__(
        self, index: int, args_text: str, kind: Literal["tool_call_args"] = "tool_call_args"
    ) -> None:
        init_fields(self, index=index, args_text=args_text, kind=kind)


@dataclass(init=False, repr=False, eq=False)
class UsageUpdate(Frozen):
    """Usage so far (absolute values, not increments); ``None`` fields are unknown."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    kind: Literal["usage"] = "usage"

    def __init__(
        self,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        kind: Literal["usage"] = "usage",
    ) -> None:
        init_fields(self, input_tokens=input_tokens, output_tokens=output_tokens, kind=kind)


StreamEvent = TextDelta | ReasoningDelta | ToolCallStart | ToolCallArgsDelta | UsageUpdate


@dataclass(repr=False, eq=False)
class Response(Record):
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


_OVERFLOW_MESSAGES = (
    "prompt is too long",  # Anthropic invalid_request_error
    "maximum context length",  # OpenAI and vLLM wording
    "context length exceeded",
    "context_length_exceeded",
    "exceeds the context window",
)


def is_context_overflow(
    status_code: int | None, *, error_type: str | None, error_code: str | None, message: str | None
) -> bool:
    """True when a refusal means "the request is longer than the context window" (F29).

    OpenAI: ``error.code == "context_length_exceeded"`` (HTTP 400); Anthropic: HTTP 400
    ``invalid_request_error`` whose message starts ``prompt is too long``, or 413
    ``request_too_large``; compatible servers: the same wordings in the message of a 400.
    """
    if error_code == "context_length_exceeded" or error_type == "context_length_exceeded":
        return True
    if status_code == 413 or error_type == "request_too_large":
        return True
    if status_code != 400 or not message:
        return False
    lowered = message.lower()
    return any(m in lowered for m in _OVERFLOW_MESSAGES)


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (line breaks included) as one space, stripped.

    A proxy's error page (nginx's ``502 Bad Gateway`` HTML) is many lines; the user gets one.
    """
    return " ".join(text.split())


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
    error_code: str | None = None,
) -> ProviderError:
    """Build the error for a non-2xx answer.

    Args:
        provider: provider id, quoted in the message.
        status_code: HTTP status.
        body: decoded error body (as the SDK gives it).
        headers: response headers (lower-case names); ``retry-after(-ms)`` is honoured.
        error_type: the API's error type (``overloaded_error``, ``invalid_request_error``...).
        api_message: the API's human message.
        key_env: env var holding the key (named in the 401/403 message), None if keyless.
        error_code: the API's error code (OpenAI ``error.code``), when it has one.

    Returns:
        :class:`~acagent.errors.ContextOverflow` when :func:`is_context_overflow` says so (never
        retried); else a :class:`ProviderHTTPError`, retryable for 408/409/429/5xx/529 and
        overloaded errors, never for 401/403.
    """
    content_type = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
    detail = error_text(api_message, page=False) if api_message else error_text(body, content_type)
    etype = error_type or f"http_{status_code}"
    if is_context_overflow(status_code, error_type=error_type, error_code=error_code, message=api_message):
        return ContextOverflow(
            f"{provider!r} refused the request: it is longer than the model's context window "
            f"(HTTP {status_code}: {detail})",
            http_status=status_code,
            body=body,
        )
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
        f"{provider!r} stream failed mid-way ({etype}): "
        + (error_text(api_message, page=False) if api_message else error_text(body)),
        status_code=None,
        body=body,
        retryable=etype in RETRYABLE_ERROR_TYPES or "overloaded" in etype,
        error_type=etype,
    )


# Re-exported for the adapters and acagent.testing (defined in their own modules).
from acagent.providers._parts import PartsBuilder, parse_tool_arguments  # noqa: E402
from acagent.providers._stream import next_chunk  # noqa: E402
