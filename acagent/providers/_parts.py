"""The shared parts builder: streamed fragments → message parts, in linear time (F24, F23).

Every adapter feeds its normalised :data:`~acagent.providers.StreamEvent` items to one
:class:`PartsBuilder` (pydantic-ai's parts manager plays this role). Fragments are appended to
lists and joined and parsed once, at :meth:`PartsBuilder.build`. Where an adapter must know
while streaming whether a call's text is already a complete JSON object (the OpenAI id-less
policy, F10), it keeps an :class:`ArgsBuffer`: each fragment is scanned once by a small
structural scanner (string/escape state and bracket depth), so the question costs O(fragment)
per fragment and the text is parsed once, when the top-level object closes. Before this, every
fragment re-parsed everything received so far (quadratic: 100 KB of arguments cost ~12 s).

A reply cut by the output limit (``finish_reason`` ``length``) whose tool-call arguments are
incomplete gets :data:`OUTPUT_LIMIT_ERROR` as the call's ``arguments_error`` (never "invalid
JSON"): the call is journaled but never run (F23).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from acagent._value import Record
from acagent.errors import UnexpectedModelBehavior
from acagent.messages import Part, ReasoningPart, TextPart, ToolCallPart
from acagent.providers._base import Usage

__all__ = ["OUTPUT_LIMIT_ERROR", "ArgsBuffer", "PartsBuilder", "parse_tool_arguments"]

OUTPUT_LIMIT_ERROR = (
    "not run: the reply hit the model's output limit (max_tokens) while writing this call's "
    "arguments, so they are incomplete"
)
"""``arguments_error`` of a tool call cut by the output limit."""

_STRING_BODY = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*', re.DOTALL)
"""The rest of a string value: characters and escapes, up to its closing quote (or a backslash
ending the fragment), skipped in one match."""
_OUTSIDE = re.compile(r'[{}\[\]"]')
_NON_WS = re.compile(r"\S")


class ArgsBuffer:
    """The argument text of one tool call, joined from fragments; knows when it is complete.

    ``append`` scans each fragment once (regular expressions find the next quote, backslash or
    bracket, so long string values are skipped at C speed). ``scanned`` counts the characters
    examined: it equals the total text length, which the linearity test checks.
    """

    def __init__(self) -> None:
        self._chunks: list[str] = []
        self._text: str | None = ""
        self.size = 0
        self.scanned = 0
        self._depth = 0
        self._in_string = False
        self._escape = False
        self._state: Literal["empty", "object", "closed", "other"] = "empty"
        self._complete: bool | None = None

    def append(self, text: str) -> None:
        """Add one fragment."""
        if not text:
            return
        self._chunks.append(text)
        self._text = None
        self.size += len(text)
        self.scanned += len(text)
        if self._in_string and not self._escape and _STRING_BODY.match(text).end() == len(text):  # type: ignore[union-attr]
            return  # the commonest fragment: inside a string value, which it does not end
        self._complete = None if self._state in ("object", "empty") else self._complete
        self._scan(text)

    def _scan(self, text: str) -> None:
        i, n = 0, len(text)
        while i < n:
            if self._state == "other":
                return
            if self._state == "closed":
                if _NON_WS.search(text, i):
                    self._state, self._complete = "other", False  # text after the object
                return
            if self._escape:
                self._escape = False
                i += 1
                continue
            if self._in_string:
                i = _STRING_BODY.match(text, i).end()  # type: ignore[union-attr]
                if i == n:
                    return
                if text[i] == "\\":  # a backslash ending the fragment: its escape follows
                    self._escape = True
                else:
                    self._in_string = False
                i += 1
                continue
            if self._state == "empty":
                m = _NON_WS.search(text, i)
                if m is None:
                    return
                self._state = "object" if m.group() == "{" else "other"
                self._depth, i = 1, m.end()
                continue
            m = _OUTSIDE.search(text, i)
            if m is None:
                return
            ch, i = m.group(), m.end()
            if ch == '"':
                self._in_string = True
            elif ch in "{[":
                self._depth += 1
            elif ch in "}]":
                self._depth -= 1
                if self._depth == 0:
                    self._state = "closed"

    @property
    def text(self) -> str:
        """The joined text (joined once, cached until the next fragment)."""
        if self._text is None:
            self._text = "".join(self._chunks)
            self._chunks = [self._text]
        return self._text

    @property
    def complete(self) -> bool:
        """True when the text is one complete JSON object (parsed once when it closes)."""
        if self._state != "closed":
            return False
        if self._complete is None:
            try:
                self._complete = isinstance(json.loads(self.text), dict)
            except ValueError:
                self._complete = False
        return self._complete


@dataclass(repr=False, eq=False)  # eq and repr: acagent._value.Record
class _Slot(Record):
    kind: Literal["text", "reasoning", "tool_call"]
    text: list[str] = field(default_factory=list)
    """Fragments, joined once at :meth:`PartsBuilder.build` (tool-call argument text too)."""
    tool_call_id: str = ""
    name: str = ""
    metadata: dict[str, Any] | None = None


class PartsBuilder:
    """Assembles streamed fragments into parts, keyed by the part ``index``.

    Fragments are routed by index only. Feeding the builder an event returns the same event,
    so adapters can ``yield builder.feed(ev)``. Tool-call argument text is assembled in linear
    time (:class:`ArgsBuffer`) and parsed once.
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

    def feed(self, event: Any) -> Any:
        """Record one stream event and return it."""
        kind = event.kind
        if kind == "text":
            self._slot(event.index, "text").text.append(event.text)
        elif kind == "reasoning":
            self._slot(event.index, "reasoning").text.append(event.text)
        elif kind == "tool_call_start":
            slot = self._slot(event.index, "tool_call")
            slot.tool_call_id, slot.name = event.tool_call_id, event.name
        elif kind == "tool_call_args":
            self._slot(event.index, "tool_call").text.append(event.args_text)
        elif kind == "usage":
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

    def build(self, finish_reason: str | None = None) -> list[Part]:
        """The finished parts, in index order; empty text parts are dropped.

        Args:
            finish_reason: the normalised finish reason; with ``length``, a tool call whose
                arguments do not parse gets :data:`OUTPUT_LIMIT_ERROR`.

        Raises:
            UnexpectedModelBehavior: a tool call without a name.
        """
        parts: list[Part] = []
        for i in self._order:
            slot = self._slots[i]
            text = "".join(slot.text)
            if slot.kind == "tool_call":
                if not slot.name:
                    raise UnexpectedModelBehavior(f"tool call at index {i} has no name", body=text[:500])
                args, error = parse_tool_arguments(text)
                if error is not None and finish_reason == "length":
                    error = OUTPUT_LIMIT_ERROR
                parts.append(
                    ToolCallPart(
                        tool_call_id=slot.tool_call_id, name=slot.name, arguments=args, arguments_error=error
                    )
                )
                continue
            if slot.kind == "text":
                if text:
                    parts.append(TextPart(text=text))
            elif text or slot.metadata:
                parts.append(ReasoningPart(text=text, provider_metadata=slot.metadata))
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
