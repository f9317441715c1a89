"""Reading an Anthropic Messages stream: status errors, raw stream events → stream events.

Stream events (Anthropic Messages streaming): ``message_start`` (id, input usage),
``content_block_start`` / ``content_block_delta`` / ``content_block_stop`` keyed by the block
``index`` (used as the part index), ``message_delta`` (``stop_reason``, output usage),
``message_stop`` (the terminal marker), ``ping`` (skipped) and ``error`` (in-band on the 200
response: a :func:`~acagent.providers._base.stream_error`, retryable when overloaded). ``thinking`` blocks become
:class:`~acagent.messages.ReasoningPart` carrying their ``signature`` in ``provider_metadata``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from acagent.errors import ProviderError, UnexpectedModelBehavior
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
from acagent.providers._stream import BaseStreamedResponse, parse_data

__all__ = ["AnthropicStreamedResponse", "anthropic_status_error"]

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


def anthropic_status_error(provider: str, status: int, body: Any, headers: dict[str, str]) -> ProviderError:
    """The error of a non-2xx Messages answer (``body`` decoded JSON, or text)."""
    error_type, message = _error_fields(body)
    return http_status_error(
        provider,
        status,
        body=body,
        headers=headers,
        error_type=error_type,
        api_message=message,
        key_env="ANTHROPIC_API_KEY",
    )


# --------------------------------------------------------------------------- stream mapping


def _input_tokens(usage: dict[str, Any]) -> int | None:
    """Input tokens including cache writes and reads (all three are prompt tokens)."""
    base = usage.get("input_tokens")
    if base is None:
        return None
    extra = (usage.get("cache_creation_input_tokens") or 0) + (usage.get("cache_read_input_tokens") or 0)
    return int(base) + int(extra)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


class AnthropicStreamedResponse(BaseStreamedResponse):
    """A Messages stream being read (implements ``StreamedResponse``).

    Part indexes are the wire's content block ``index``. Iterate for :data:`StreamEvent`
    items, then :meth:`get` the :class:`Response`.
    """

    def __init__(
        self,
        stream: Any,
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

    def _on_item(self, item: tuple[str, str]) -> Iterable[StreamEvent]:
        kind, data = item
        if kind == "ping":
            return iter(())
        event = parse_data(self._provider, data)
        if not isinstance(event, dict):
            raise UnexpectedModelBehavior(
                f"{self._provider!r} sent a stream event that is not an object", body=data[:500]
            )
        if kind == "error" or event.get("type") == "error":  # in-band, on the 200 response (F13)
            error_type, message = _error_fields(event)
            raise stream_error(self._provider, error_type=error_type, api_message=message, body=event)
        if event.get("type") == "content_block_delta":  # the commonest event, without a generator
            return self._on_block_delta(event.get("index", 0), _dict(event.get("delta")))
        return self._on_event(event)

    def _terminal(self) -> bool:
        return self._stopped or (self._stop_reason is not None and self._final_usage)

    def _ended(self) -> bool:
        return self._stopped

    def _on_event(self, event: dict[str, Any]) -> Iterator[StreamEvent]:
        kind = event.get("type")
        if kind == "message_start":
            message = _dict(event.get("message"))
            self._response_id = message.get("id")
            usage = message.get("usage")
            if isinstance(usage, dict):
                yield UsageUpdate(input_tokens=_input_tokens(usage), output_tokens=usage.get("output_tokens"))
        elif kind == "content_block_start":
            yield from self._on_block_start(event.get("index", 0), _dict(event.get("content_block")))
        elif kind == "content_block_delta":
            yield from self._on_block_delta(event.get("index", 0), _dict(event.get("delta")))
        elif kind == "content_block_stop":
            start_input = self._tool_inputs.pop(event.get("index", 0), None)
            if start_input:  # a complete input given at block start and no delta
                yield ToolCallArgsDelta(event.get("index", 0), json.dumps(start_input))
        elif kind == "message_delta":
            self._stop_reason = _dict(event.get("delta")).get("stop_reason") or self._stop_reason
            self._finish_reason = _STOP_REASONS.get(self._stop_reason or "", self._stop_reason)
            usage = event.get("usage")
            if isinstance(usage, dict):
                self._final_usage = self._stop_reason is not None
                yield UsageUpdate(input_tokens=_input_tokens(usage), output_tokens=usage.get("output_tokens"))
        elif kind == "message_stop":
            self._stopped = True

    def _on_block_start(self, index: int, block: dict[str, Any]) -> Iterator[StreamEvent]:
        kind = block.get("type")
        if kind == "text":
            if block.get("text"):
                yield TextDelta(index, block["text"])
        elif kind == "tool_use":
            yield ToolCallStart(index, block.get("id") or "", block.get("name") or "")
            self._tool_inputs[index] = block.get("input")
        elif kind == "thinking":
            if block.get("thinking"):
                yield ReasoningDelta(index, block["thinking"])
            if block.get("signature"):
                self._builder.set_metadata(index, {"signature": block["signature"]}, kind="reasoning")
        elif kind == "redacted_thinking":
            self._builder.set_metadata(index, {"redacted_data": block.get("data")}, kind="reasoning")
        # server tool blocks (web search, ...) are not supported: ignored

    def _on_block_delta(self, index: int, delta: dict[str, Any]) -> tuple[StreamEvent, ...]:
        """One ``content_block_delta`` (a tuple, not a generator: 1 MB of arguments in 9-byte
        fragments is 116,509 of them, each one layer of generator less)."""
        kind = delta.get("type")
        if kind == "input_json_delta":
            if index in self._tool_inputs:
                self._tool_inputs[index] = None  # streamed input wins over the start input
            if delta.get("partial_json"):  # "" (F11 E2) adds nothing
                return (ToolCallArgsDelta(index, delta["partial_json"]),)
        elif kind == "text_delta":
            if delta.get("text"):
                return (TextDelta(index, delta["text"]),)
        elif kind == "thinking_delta":
            if delta.get("thinking"):
                return (ReasoningDelta(index, delta["thinking"]),)
        elif kind == "signature_delta":
            self._builder.set_metadata(index, {"signature": delta.get("signature")}, kind="reasoning")
        return ()
