"""Reading an Anthropic Messages stream: SDK errors, raw stream events → stream events.

Stream events (Anthropic Messages streaming): ``message_start`` (id, input usage),
``content_block_start`` / ``content_block_delta`` / ``content_block_stop`` keyed by the block
``index`` (used as the part index), ``message_delta`` (``stop_reason``, output usage),
``message_stop`` (the terminal marker), ``ping`` (skipped by the SDK) and ``error`` (in-band,
raised by the SDK as an ``APIStatusError`` on the 200 response). ``thinking`` blocks become
:class:`~acagent.messages.ReasoningPart` carrying their ``signature`` in ``provider_metadata``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

from acagent.errors import ProviderConnectionError, UnexpectedModelBehavior
from acagent.providers._base import (
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallArgsDelta,
    ToolCallStart,
    UsageUpdate,
    http_status_error,
    stream_error,
)
from acagent.providers._sdk import load_sdk, transport_errors
from acagent.providers._stream import BaseStreamedResponse

if TYPE_CHECKING:
    import anthropic
    from anthropic.types import RawMessageStreamEvent

__all__ = ["AnthropicStreamedResponse", "map_api_errors"]

_STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
}


def _error_fields(body: Any) -> tuple[str | None, str | None]:
    """``(error.type, error.message)`` from ``{"type": "error", "error": {...}}``."""
    err = body.get("error") if isinstance(body, dict) else None
    if not isinstance(err, dict):
        return None, None
    return err.get("type"), err.get("message")


@contextmanager
def map_api_errors(provider: str, base_url: str) -> Iterator[None]:
    """Translate ``anthropic`` SDK exceptions into :mod:`acagent.errors` (``raise ... from``).

    Raises:
        ProviderHTTPError: a non-2xx answer, or an in-band ``event: error`` inside a 200 stream
            (``status_code`` None; ``overloaded_error`` is retryable).
        ProviderConnectionError: connection refused/reset mid-stream, SDK timeout.
        UnexpectedModelBehavior: an event that is not valid JSON, or a response the SDK rejects.
    """
    anthropic = load_sdk("anthropic")
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
    except transport_errors() as exc:
        raise ProviderConnectionError(f"connection to {provider!r} at {base_url!r} broke: {exc!r}") from exc
    except json.JSONDecodeError as exc:
        raise UnexpectedModelBehavior(
            f"{provider!r} sent a stream event that is not JSON: {exc}", body=exc.doc[:500]
        ) from exc


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


class AnthropicStreamedResponse(BaseStreamedResponse):
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
        super().__init__(
            stream, provider=provider, base_url=base_url, idle_timeout_s=idle_timeout_s, deadline=deadline
        )
        self._tool_inputs: dict[int, Any] = {}
        """Index → ``content_block_start`` input of a tool_use block not yet given a delta."""
        self._stop_reason: str | None = None
        self._final_usage = False
        self._stopped = False

    def _map_errors(self) -> AbstractContextManager[None]:
        return map_api_errors(self._provider, self._base_url)

    def _on_item(self, item: Any) -> Iterator[StreamEvent]:
        return self._on_event(item)

    def _terminal(self) -> bool:
        return self._stopped or (self._stop_reason is not None and self._final_usage)

    def _ended(self) -> bool:
        return self._stopped

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
            self._finish_reason = _STOP_REASONS.get(self._stop_reason or "", self._stop_reason)
            usage = getattr(event, "usage", None)
            if usage is not None:
                self._final_usage = self._stop_reason is not None
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
