"""Token accounting of a request: estimates before each call, calibrated by the provider's usage.

Why not tiktoken: its encodings are downloaded on first use (this agent must work offline), and
Anthropic models use another tokenizer anyway. Instead every message is sized once (its JSON
bytes, cached by identity — messages are immutable) and bytes are turned into tokens at a
conservative 3 bytes per token until the provider reports a real ``input_tokens`` for this
context; from then on the estimate is that count plus the new bytes at 3 bytes per token. The
cost per call is O(new messages), flat in history.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from acagent.messages import Message, common_prefix

__all__ = ["BYTES_PER_TOKEN", "MAX_BYTES_PER_TOKEN", "RequestEstimator", "bytes_to_tokens"]

BYTES_PER_TOKEN = 3
"""Conservative: English prose and code average 3.5–4.5 bytes per token on current tokenizers."""

MAX_BYTES_PER_TOKEN = 8
"""A reported ``input_tokens`` below ``request bytes / 8`` is not a token count of this request
(a server reporting only the uncached part, a placeholder ``1``): calibrating with it would let
requests grow far past the window, so it is ignored."""


def bytes_to_tokens(n: int) -> int:
    """A conservative token count for ``n`` bytes of JSON or text."""
    return n // BYTES_PER_TOKEN + 1


class RequestEstimator:
    """Estimate the input tokens of a request; one per session runner (holds a size cache)."""

    def __init__(self) -> None:
        self._sizes: dict[int, tuple[Message, int]] = {}
        self._calibration: tuple[int, int] | None = None
        """``(request bytes, reported input tokens)`` of the last call that reported usage."""
        self._sized: list[Message] = []
        """The messages last sized: the next request shares a prefix with them (the same list
        plus new messages, or with its last message replaced), so only the rest is looked at."""
        self._totals: list[int] = []
        """``_totals[i]``: bytes of ``_sized[: i + 1]`` (both kept in place, not copied per call)."""

    def message_bytes(self, message: Message) -> int:
        """JSON size of one message, computed once per message object."""
        key = id(message)
        hit = self._sizes.get(key)
        if hit is not None and hit[0] is message:
            return hit[1]
        size = len(orjson.dumps(message.model_dump(mode="json", exclude_none=True)))
        if len(self._sizes) > 50_000:  # compaction or a rebuilt context dropped old objects
            self._sizes.clear()
        self._sizes[key] = (message, size)
        return size

    def request_bytes(self, system: str, messages: Sequence[Message], tools: Sequence[Any] = ()) -> int:
        """Bytes of the system prompt, the messages and the tool definitions."""
        total = len(system.encode()) + self._messages_bytes(messages)
        for t in tools:
            total += len(orjson.dumps(getattr(t, "parameters", None) or {})) + len(
                getattr(t, "description", "") or ""
            )
        return total

    def _messages_bytes(self, messages: Sequence[Message]) -> int:
        """Total :meth:`message_bytes` of ``messages``, O(messages after the prefix shared with
        the last list sized).

        The shared prefix is found by list comparison in C (:func:`~acagent.messages.common_prefix`:
        identity first, the context hands out the same message objects; an equal but different
        message has the same size anyway); a replaced last message (the last user message grows
        as tool results and queued input are merged into it) no longer sizes the whole list.
        """
        sized, totals = self._sized, self._totals
        same = (
            common_prefix(messages if isinstance(messages, list) else list(messages), sized) if sized else 0
        )
        del sized[same:], totals[same:]
        total = totals[-1] if totals else 0
        for message in messages[same:]:
            total += self.message_bytes(message)
            sized.append(message)
            totals.append(total)
        return total

    def estimate(self, system: str, messages: Sequence[Message], tools: Sequence[Any] = ()) -> int:
        """Estimated input tokens of the request."""
        size = self.request_bytes(system, messages, tools)
        cal = self._calibration
        if cal is not None and size >= cal[0]:
            delta = size - cal[0]
            return cal[1] + (bytes_to_tokens(delta) if delta else 0)
        return bytes_to_tokens(size)

    def calibrate(self, request_bytes: int, input_tokens: int) -> None:
        """Record what the provider reported for a request of ``request_bytes`` bytes.

        An implausibly low count (under ``request_bytes / MAX_BYTES_PER_TOKEN``) is ignored.
        """
        if input_tokens > 0 and request_bytes > 0 and input_tokens * MAX_BYTES_PER_TOKEN >= request_bytes:
            self._calibration = (request_bytes, input_tokens)

    def reset(self) -> None:
        """Forget the calibration (after compaction the context is a different one)."""
        self._calibration = None
