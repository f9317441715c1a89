"""Provider-neutral model context: messages made of parts.

The loop, the journal and the transcript only ever see these types; each provider adapter maps
them to and from its wire format (OpenAI Chat Completions `messages`, Anthropic Messages
`messages`). One word per idea: Anthropic's "thinking" becomes :class:`ReasoningPart`.

A *message* is a role plus an ordered list of *parts*:

- ``user``: :class:`TextPart` items, and :class:`ToolResultPart` items answering the previous
  assistant message's tool calls (results always come first, in tool-call order);
- ``assistant``: :class:`TextPart`, :class:`ReasoningPart` and :class:`ToolCallPart` items.

The system prompt is not a message; it is passed separately to the provider.

:func:`check_history` is the one place that checks this shape: every provider request passes
through it (``ModelRequest`` calls it when it is built), whoever built the messages.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import OrderedDict
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

__all__ = [
    "INTERRUPTED_RESULT",
    "Message",
    "Part",
    "ReasoningPart",
    "TextPart",
    "ToolCallPart",
    "ToolResultPart",
    "check_history",
    "common_prefix",
    "context_digest",
    "forget_history",
]

log = logging.getLogger("acagent.messages")


class _Base(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TextPart(_Base):
    """Plain text; never empty when sent to a provider."""

    part_kind: Literal["text"] = "text"
    text: str
    """The text, UTF-8."""


class ReasoningPart(_Base):
    """Model reasoning ("thinking" in Anthropic's API)."""

    part_kind: Literal["reasoning"] = "reasoning"
    text: str
    provider_metadata: dict[str, Any] | None = None
    """Data the API needs echoed back (Anthropic: the thinking `signature`)."""


class ToolCallPart(_Base):
    """One tool call the model asked for."""

    part_kind: Literal["tool_call"] = "tool_call"
    tool_call_id: str
    """Provider id (OpenAI `tool_calls[].id`, Anthropic `tool_use.id`), or a generated one."""
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    """Parsed JSON arguments; ``{}`` when the model sent empty/null or invalid arguments."""
    arguments_error: str | None = None
    """Set when the streamed argument text was not a JSON object; the call is then not run."""


class ToolResultPart(_Base):
    """The result of one tool call, sent back to the model."""

    part_kind: Literal["tool_result"] = "tool_result"
    tool_call_id: str
    name: str
    content: str
    is_error: bool = False


Part = Annotated[TextPart | ReasoningPart | ToolCallPart | ToolResultPart, Field(discriminator="part_kind")]


class Message(_Base):
    """One message of the model context."""

    role: Literal["user", "assistant"]
    parts: list[Part]

    @property
    def text(self) -> str:
        """Concatenated text of the message's :class:`TextPart` items."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> list[ToolCallPart]:
        """The message's tool calls, in the order the model emitted them."""
        return [p for p in self.parts if isinstance(p, ToolCallPart)]


MESSAGES_ADAPTER: TypeAdapter[list[Message]] = TypeAdapter(list[Message])


def context_digest(system: str, messages: list[Message]) -> str:
    """Stable sha256 hex digest of a model context (system prompt + messages).

    Used in the step ``request_id`` so a recovered step with an unchanged context is recognised.
    """
    h = hashlib.sha256()
    h.update(system.encode())
    h.update(b"\x00")
    h.update(
        json.dumps(
            [m.model_dump(mode="json") for m in messages], sort_keys=True, separators=(",", ":")
        ).encode()
    )
    return h.hexdigest()


INTERRUPTED_RESULT = "interrupted: no result was recorded for this call; it may or may not have taken effect"
"""Content of the result :func:`check_history` gives a tool call that has none."""


def _fail(index: int, problem: str) -> None:
    from acagent.errors import InvalidHistory

    raise InvalidHistory(
        f"the model context is invalid at message {index}: {problem}",
        detail={"index": index, "problem": problem},
    )


def _answer(asked: Message, reply: Message | None, index: int) -> Message:
    """``reply`` (a user message, or None) with one result per call of ``asked``, first, in call order."""
    calls = asked.tool_calls
    order = {c.tool_call_id: i for i, c in enumerate(calls)}
    parts = reply.parts if reply is not None else []
    results = [p for p in parts if isinstance(p, ToolResultPart)]
    for r in results:
        if r.tool_call_id not in order:
            _fail(index, f"tool result {r.tool_call_id!r} answers no call of the previous assistant message")
    if len({r.tool_call_id for r in results}) != len(results):
        _fail(index, "two tool results answer the same call")
    answered = {r.tool_call_id for r in results}
    missing = [
        ToolResultPart(tool_call_id=c.tool_call_id, name=c.name, content=INTERRUPTED_RESULT, is_error=True)
        for c in calls
        if c.tool_call_id not in answered
    ]
    if missing:
        log.warning("closing %d tool call(s) without a result before the request", len(missing))
    ordered = sorted([*results, *missing], key=lambda r: order[r.tool_call_id])
    others = [p for p in parts if not isinstance(p, ToolResultPart)]
    if reply is not None and not missing and all(a is b for a, b in zip(parts, ordered, strict=False)):
        return reply
    return Message(role="user", parts=[*ordered, *others])


def check_history(messages: Sequence[Message]) -> list[Message]:
    """The history a provider may be sent: every tool call answered right after it, roles alternating.

    Repairs, deterministically (the same input always gives the same output, so a recovered
    step's request is the same): a tool call without a result gets an error result
    (:data:`INTERRUPTED_RESULT`), in a new user message when none follows; results are moved
    first in their user message, in the assistant's call order; two user messages in a row are
    merged; a message with no parts, or only empty text, is dropped (F02). Returns ``messages``
    itself (as a list) when nothing needed repair.

    Raises:
        InvalidHistory: what no rule repairs — two (non-empty) assistant messages in a row,
            a tool result that answers no call of the previous assistant message (or answers one
            twice), a tool call id used twice.
    """
    start, out, seen = _valid_prefix(messages)
    changed, i = False, start
    while i < len(messages):
        msg = messages[i]
        if all(isinstance(p, TextPart) and not p.text for p in msg.parts):
            changed = True  # nothing was streamed (F02): never an empty message
            i += 1
            continue
        prev = out[-1] if out else None
        if msg.role == "assistant":
            if prev is not None and prev.role == "assistant":
                _fail(i, "two assistant messages in a row")
            for call in msg.tool_calls:
                if call.tool_call_id in seen:
                    _fail(i, f"tool call id {call.tool_call_id!r} is used twice")
                seen.add(call.tool_call_id)
            out.append(msg)
            if msg.tool_calls:
                reply = messages[i + 1] if i + 1 < len(messages) and messages[i + 1].role == "user" else None
                fixed = _answer(msg, reply, i + 1)
                changed |= fixed is not reply
                out.append(fixed)
                i += 2 if reply is not None else 1
                continue
        elif prev is not None and prev.role == "user":
            if any(isinstance(p, ToolResultPart) for p in msg.parts):
                _fail(i, "tool results that follow no assistant message")
            out[-1] = Message(role="user", parts=[*prev.parts, *msg.parts])
            changed = True
        else:
            if any(isinstance(p, ToolResultPart) for p in msg.parts):
                _fail(i, "tool results that follow no assistant tool call")
            out.append(msg)
        i += 1
    if changed:
        return out
    _remember(messages, seen)
    return list(messages)


_VALID: OrderedDict[int, tuple[list[Message], frozenset[str]]] = OrderedDict()
"""Histories that needed no repair, by ``id`` of their first message (a few sessions' worth):
the runner sends the same message objects again plus new ones, so only the messages after the
part shared with the remembered history go through the checks (the shared part is found by
:func:`common_prefix`, in C; before, every message was checked on every request: ≈ 7–8 ms at 500
turns, and any difference — a replaced last message — meant a full check again). The result is
the same: the check at a message depends only on the messages before it, and a history that
needed no repair has no open call."""
_VALID_SIZE = 64


def common_prefix(a: Sequence[Message], b: Sequence[Message]) -> int:
    """How many leading messages of ``a`` and ``b`` are equal (lists, or both tuples: a slice of
    a list never equals a slice of a tuple).

    Compared as list slices, in C: the same object is equal at once (the runner sends the same
    message objects again), others by value (what is derived from a message — its checks, its
    wire encoding — depends only on its value). The whole common length and one less are tried
    first (a grown history; a replaced last message), then a binary search. A Python loop over a
    2,000-message history cost ≈ 0.2 ms per request.
    """
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    if n and a[: n - 1] == b[: n - 1]:
        return n - 1
    low, high = 0, n - 1  # a[:low] == b[:low]; a[:high] != b[:high]
    while high - low > 1:
        mid = (low + high) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid
    return low


def _valid_prefix(messages: Sequence[Message]) -> tuple[int, list[Message], set[str]]:
    """``(index to check from, the checked messages, their tool call ids)`` (0, [], {} if none).

    The remembered history's messages that ``messages`` begins with are not checked again, also
    when the rest differs (a replaced last message): the check restarts where the full check
    would be between two steps (before an assistant message with calls, which is checked with
    its reply)."""
    if messages:
        hit = _VALID.get(id(messages[0]))
        if hit is not None:
            prefix, seen = hit
            n = common_prefix(prefix, messages if isinstance(messages, list) else list(messages))
            if 0 < n < len(prefix) and prefix[n - 1].role == "assistant" and prefix[n - 1].tool_calls:
                n -= 1
            if n:
                _VALID.move_to_end(id(messages[0]))
                dropped = {c.tool_call_id for m in prefix[n:] for c in m.tool_calls}
                return n, list(prefix[:n]), set(seen) - dropped
    return 0, [], set()


def forget_history(messages: Sequence[Message]) -> None:
    """Drop the remembered check of a history that begins with ``messages[0]`` (a no-op if none).

    A runner calls it when it closes (hibernates): the memo held the session's whole history,
    so up to 64 hibernated sessions' histories stayed in memory (issue 12 item 6).
    """
    if messages:
        _VALID.pop(id(messages[0]), None)


def _remember(messages: Sequence[Message], seen: set[str]) -> None:
    if messages:
        _VALID[id(messages[0])] = (list(messages), frozenset(seen))
        _VALID.move_to_end(id(messages[0]))
        while len(_VALID) > _VALID_SIZE:
            _VALID.popitem(last=False)
