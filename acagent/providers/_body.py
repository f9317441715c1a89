"""Request bodies encoded incrementally (F26: CPU per model call flat in history).

Profiled through the real adapters, the cost of a call grew with the history: the SDK's
``create(**params)`` walks every message of the params through its TypedDict transform
(``async_maybe_transform``) and then serialises the whole body again — 15 → 137 → 880 ms at
10 / 100 / 500 turns, while ``orjson`` encodes the same body in 0.04–1 ms. The adapters
therefore keep the official SDKs for the wire (auth, headers, HTTP, error types, stream
decoding) but hand them a body that is already JSON (``client.post(..., content=bytes)``), built
here: each context message is mapped and encoded **once** (messages are immutable, so their
identity is their cache key, as :class:`acagent.runner._context.ContextBuilder` does for its
digest), and a call only joins the cached bytes. The body is a pure function of the request,
so a retried step sends the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

from acagent.messages import Message

__all__ = ["BodyEncoder", "EncodedArray", "wire_messages"]

WireMessages = Callable[[Message], list[dict[str, Any]]]
"""``message -> wire dicts`` (one context message may become several wire messages)."""
Merge = Callable[[dict[str, Any], dict[str, Any]], dict[str, Any] | None]
"""``(previous, next) -> merged`` when two adjacent wire messages must be one, else None."""


def wire_messages(
    messages: Sequence[Message], to_wire: WireMessages, merge: Merge, prefix: Sequence[dict[str, Any]] = ()
) -> list[dict[str, Any]]:
    """``prefix`` + the wire messages of ``messages`` (each mapped by ``to_wire``), adjacent ones
    joined where ``merge`` says so: the adapters' ``to_*_messages`` (:class:`BodyEncoder` builds
    the same list incrementally)."""
    out = list(prefix)
    for message in messages:
        for wire in to_wire(message):
            merged = merge(out[-1], wire) if out else None
            if merged is not None:
                out[-1] = merged
            else:
                out.append(wire)
    return out


class BodyEncoder:
    """Encodes JSON request bodies, caching each message's wire JSON by identity.

    Args:
        wire_messages: the adapter's per-message mapping.
        merge: the adapter's rule for adjacent wire messages that must be merged (same role
            where roles must alternate); merged messages are re-encoded (rare: the context
            already merges consecutive user messages).

    ``encoded`` counts messages mapped and encoded (the flatness test reads it).
    """

    def __init__(self, wire_messages: WireMessages, merge: Merge) -> None:
        self._wire = wire_messages
        self._merge = merge
        self._cache: dict[int, tuple[Message, list[tuple[dict[str, Any], bytes]]]] = {}
        self._tools: tuple[object, bytes] | None = None
        self._last: tuple[list[Message], list[tuple[dict[str, Any], bytes]], list[int]] = ([], [], [])
        """The previous call: its messages, its wire items, and per message the item count so far."""
        self._merged: list[bool] = []
        """Per message of the previous call: its first wire item merged into the item before."""
        self.encoded = 0

    def _entry(self, message: Message) -> list[tuple[dict[str, Any], bytes]]:
        hit = self._cache.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        self.encoded += 1
        wire = [(d, orjson.dumps(d)) for d in self._wire(message)]
        self._cache[id(message)] = (message, wire)
        return wire

    def messages(self, messages: Sequence[Message], prefix: Sequence[dict[str, Any]] = ()) -> EncodedArray:
        """The JSON array of the wire messages of ``prefix`` + ``messages``.

        The previous call's result is reused up to the first message that differs (compared by
        identity): a call with one new message maps, merges and encodes only that message.
        """
        head = [(d, orjson.dumps(d)) for d in prefix]
        last_msgs, last_out, last_marks = self._last
        same = 0
        if [d for d, _ in head] == [d for d, _ in last_out[: len(head)]] and len(last_marks) > 0:
            limit = min(len(messages), len(last_msgs))
            while same < limit and messages[same] is last_msgs[same]:
                same += 1
        # Restart at a message that did not merge into the one before it: the items before it
        # are then exactly what the previous call built for those messages.
        last_merged = self._merged
        while 0 < same < len(last_merged) and last_merged[same]:
            same -= 1
        out = head if same == 0 else list(last_out[: last_marks[same - 1]])
        marks = [] if same == 0 else list(last_marks[:same])
        merged_flags = [] if same == 0 else list(last_merged[:same])
        for message in messages[same:]:
            first = True
            merged_here = False
            for item in self._entry(message):
                merged = self._merge(out[-1][0], item[0]) if out else None
                if merged is not None:
                    out[-1] = (merged, orjson.dumps(merged))
                    merged_here = merged_here or first
                else:
                    out.append(item)
                first = False
            marks.append(len(out))
            merged_flags.append(merged_here)
        self._last = (list(messages), out, marks)
        self._merged = merged_flags
        if len(self._cache) > 2 * len(messages) + 64:  # forget messages no longer sent
            keep = {id(m) for m in messages}
            self._cache = {k: v for k, v in self._cache.items() if k in keep}
        return EncodedArray([b for _, b in out])  # joined once, in body()

    def tools(self, tools: object, encode: Callable[[], list[dict[str, Any]]]) -> bytes:
        """The JSON of the tool list ``tools`` (encoded once per list object)."""
        if self._tools is None or self._tools[0] is not tools:
            self._tools = (tools, orjson.dumps(encode()))
        return self._tools[1]

    @staticmethod
    def body(head: dict[str, Any], raw: Mapping[str, bytes | EncodedArray]) -> bytes:
        """``head`` as a JSON object with the pre-encoded members ``raw`` spliced in, in order.

        The body is joined once (a 500-turn history is megabytes: every extra copy shows)."""
        start = orjson.dumps(head)
        pieces: list[bytes] = [start[:-1]] if start != b"{}" else [b"{"]
        for n, (key, value) in enumerate(raw.items()):
            pieces.append((b',"' if n or start != b"{}" else b'"') + key.encode() + b'":')
            if isinstance(value, EncodedArray):
                pieces.append(b"[")
                for i, item in enumerate(value.items):
                    if i:
                        pieces.append(b",")
                    pieces.append(item)
                pieces.append(b"]")
            else:
                pieces.append(value)
        pieces.append(b"}")
        return b"".join(pieces)


class EncodedArray:
    """A JSON array kept as its encoded items until the body is joined (joined once there);
    ``bytes(array)`` is the array on its own."""

    __slots__ = ("items",)

    def __init__(self, items: list[bytes]) -> None:
        self.items = items

    def __bytes__(self) -> bytes:
        return b"[" + b",".join(self.items) + b"]"
