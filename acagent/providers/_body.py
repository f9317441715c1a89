"""Request bodies encoded incrementally (F26: CPU per model call flat in history).

Profiled through the real adapters, the cost of a call grew with the history: the SDK's
``create(**params)`` walks every message of the params through its TypedDict transform
(``async_maybe_transform``) and then serialises the whole body again — 15 → 137 → 880 ms at
10 / 100 / 500 turns, while ``orjson`` encodes the same body in 0.04–1 ms. The adapters
therefore post a body that is already JSON (:mod:`acagent.providers._http`), built here: each
context message is mapped and encoded **once** (messages are immutable, so their identity is
their cache key, as :class:`acagent.runner._context.ContextBuilder` does for its digest).

What still grew after that was the body itself (≈ 2 MB at 500 turns): joining every cached item
again on each call cost ≈ 1.5–2 ms of the loop thread's CPU, most of it the page faults of a
fresh 2 MB allocation, not the copy. So the items a call shares with the previous one are kept
joined between calls (:class:`_Runs`: O(log n) runs, each byte copied O(log n) times over the
history's life) and the body is sent as its parts (:meth:`BodyEncoder.parts`, posted as a
Content-Length body by :class:`~acagent.providers._http.BodyParts`). The body is a pure function
of the request, so a retried step sends the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

from acagent.messages import Message, common_prefix

__all__ = ["SEPARATE_PART", "BodyEncoder", "EncodedArray", "wire_messages"]

SEPARATE_PART = 65_536
"""Bytes from which an encoded member is sent as a body part of its own (:meth:`BodyEncoder.parts`)."""

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

    ``encoded`` counts messages mapped and encoded, ``joined`` the bytes copied into joined runs
    (the flatness tests read both).
    """

    def __init__(self, wire_messages: WireMessages, merge: Merge) -> None:
        self._wire = wire_messages
        self._merge = merge
        self._cache: dict[int, tuple[Message, list[tuple[dict[str, Any], bytes]]]] = {}
        self._tools: tuple[object, bytes] | None = None
        # The previous call, kept and updated in place (a call with one new message touches
        # only what changed: copying these per call was O(history), each entry a cache miss).
        self._msgs: list[Message] = []
        """The previous call's messages."""
        self._items: list[tuple[dict[str, Any], bytes]] = []
        """Its wire items (the prefix's first)."""
        self._marks: list[int] = []
        """Per message, the item count after it."""
        self._merged: list[bool] = []
        """Per message, whether its first wire item merged into the item before."""
        self._runs = _Runs()
        self.encoded = 0

    @property
    def joined(self) -> int:
        """Bytes copied into joined runs so far (amortised O(log n) copies per byte)."""
        return self._runs.copied

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

        The previous call's result is reused up to the first message that differs (the same
        object, or an equal one: :func:`~acagent.messages.common_prefix`): a call with one new
        message maps, merges and encodes only that message, and the items both calls share are
        sent as runs joined before (:class:`_Runs`), not joined again.
        """
        head = [(d, orjson.dumps(d)) for d in prefix]
        items, marks, merged_flags = self._items, self._marks, self._merged
        same = 0
        if marks and [d for d, _ in head] == [d for d, _ in items[: len(head)]]:
            same = _shared(messages, self._msgs)
        # Restart at a message that did not merge into the one before it: the items before it
        # are then exactly what the previous call built for those messages.
        while 0 < same < len(merged_flags) and merged_flags[same]:
            same -= 1
        keep = marks[same - 1] if same else 0
        """Items identical to the previous call's (a merge into the last of them lowers it)."""
        if same:
            del items[keep:]
        else:
            items[:] = head
        del marks[same:], merged_flags[same:], self._msgs[same:]
        new = messages[same:]
        for message in new:
            first = True
            merged_here = False
            for item in self._entry(message):
                merged = self._merge(items[-1][0], item[0]) if items else None
                if merged is not None:
                    keep = min(keep, len(items) - 1)
                    items[-1] = (merged, orjson.dumps(merged))
                    merged_here = merged_here or first
                else:
                    items.append(item)
                first = False
            marks.append(len(items))
            merged_flags.append(merged_here)
        self._msgs.extend(new)
        if len(self._cache) > 2 * len(messages) + 64:  # forget messages no longer sent
            keep_ids = {id(m) for m in messages}
            self._cache = {k: v for k, v in self._cache.items() if k in keep_ids}
        return EncodedArray(self._runs.parts(items, keep))  # joined once, in body()

    def tools(self, tools: object, encode: Callable[[], list[dict[str, Any]]]) -> bytes:
        """The JSON of the tool list ``tools`` (encoded once per list object)."""
        if self._tools is None or self._tools[0] is not tools:
            self._tools = (tools, orjson.dumps(encode()))
        return self._tools[1]

    @staticmethod
    def parts(head: dict[str, Any], raw: Mapping[str, bytes | EncodedArray]) -> list[bytes]:
        """``head`` as a JSON object with the pre-encoded members ``raw`` spliced in, in order,
        as the byte strings to send one after the other (``b"".join(parts)`` is the body).

        A 500-turn history is ≈ 2 MB, and a fresh copy of it costs the loop thread more than the
        copying (page faults of a new large allocation): members of at least
        :data:`SEPARATE_PART` bytes (the cached runs) are parts of their own, the pieces between
        them are joined."""
        start = orjson.dumps(head)
        out: list[bytes] = []
        pieces: list[bytes] = [start[:-1]] if start != b"{}" else [b"{"]
        for n, (key, value) in enumerate(raw.items()):
            pieces.append((b',"' if n or start != b"{}" else b'"') + key.encode() + b'":')
            if not isinstance(value, EncodedArray):
                pieces.append(value)
                continue
            pieces.append(b"[")
            for i, member in enumerate(value.items):
                if i:
                    pieces.append(b",")
                if len(member) < SEPARATE_PART:
                    pieces.append(member)
                else:
                    out += (b"".join(pieces), member)
                    pieces = []
            pieces.append(b"]")
        pieces.append(b"}")
        out.append(b"".join(pieces))
        return out


def _shared(messages: Sequence[Message], last: list[Message]) -> int:
    """How many leading messages ``messages`` shares with the previous call's ``last``
    (:func:`~acagent.messages.common_prefix`), trying first the two usual cases with one list
    slice each: ``messages`` extends ``last``, or replaces its last message."""
    n = len(last)
    if not isinstance(messages, list):
        messages = list(messages)
    if len(messages) >= n and messages[n - 1 : n] == last[n - 1 :]:
        if messages[:n] == last:
            return n
    elif n > 1 and messages[n - 2 : n - 1] == last[n - 2 : n - 1] and messages[: n - 1] == last[: n - 1]:
        return n - 1
    return common_prefix(messages, last)


class EncodedArray:
    """A JSON array kept as its encoded members until the body is joined (joined once there);
    a member is one item or a run of items already joined with commas. ``bytes(array)`` is the
    array on its own."""

    __slots__ = ("items",)

    def __init__(self, items: list[bytes]) -> None:
        self.items = items

    def __bytes__(self) -> bytes:
        return b"[" + b",".join(self.items) + b"]"


class _Runs:
    """The encoded items two consecutive calls share, kept joined as ``b","``-separated runs.

    A 500-turn history is ≈ 2 MB of items; joining all of them again on every call was the part
    of a call's CPU that grew with the history. Runs are only appended or dropped at the end:
    the items a call shares with the previous call and no run covers yet become a new run (the
    newest items, which the next call may replace, are not joined yet), and adjacent runs are
    merged while the older one is at most twice the newer (binary-counter style), so there are
    O(log n) runs and every byte is copied O(log n) times over the history's life.
    """

    def __init__(self) -> None:
        self._runs: list[bytes] = []
        self._ends: list[int] = []
        """Per run, the index of the item after its last one."""
        self.copied = 0
        """Bytes copied into runs so far."""

    def parts(self, items: list[tuple[dict[str, Any], bytes]], keep: int) -> list[bytes]:
        """The array members of ``items``: runs, then single items.

        Args:
            items: this call's ``(wire dict, encoding)`` items.
            keep: ``items[:keep]`` are the previous call's items (same objects, same places).
        """
        runs, ends = self._runs, self._ends
        while ends and ends[-1] > keep:
            runs.pop()
            ends.pop()
        covered = ends[-1] if ends else 0
        if keep > covered:
            self._push(b",".join([b for _, b in items[covered:keep]]), keep)
            covered = keep
        return [*runs, *(b for _, b in items[covered:])]

    def _push(self, run: bytes, end: int) -> None:
        runs, ends = self._runs, self._ends
        self.copied += len(run)
        runs.append(run)
        ends.append(end)
        while len(runs) > 1 and len(runs[-2]) <= 2 * len(runs[-1]):
            newer, end = runs.pop(), ends.pop()
            ends[-1] = end
            runs[-1] = b",".join((runs[-1], newer))
            self.copied += len(runs[-1])
