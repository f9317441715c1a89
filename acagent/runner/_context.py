"""Rebuild the model context from journal events (latest snapshot + tail).

No table stores "the conversation": the context is a fold over ``checkpoint``,
``context.compacted``, ``user.message``, ``assistant.message`` and ``tool.result`` events. A
``checkpoint`` replaces the context by the copy it holds (written by older versions, and by a
compaction whose positions are unknown); a ``context.compacted`` is a position: the messages
from the one whose first event is ``first_kept_seq`` on are kept, the summary merged into the
first of them (:func:`~acagent.runner._cut.merge_summary`), everything before is dropped. Folded
live (right after its commit) or on a rebuild that starts at ``first_kept_seq`` (the journal's
``context_events``), that gives the same messages, byte for byte. The fold keeps the shape every
strict provider accepts:

- tool results are placed in the user message right after the assistant message that asked for
  them, before any user text, in the order of the assistant's tool calls (the loop closes every
  call before a new turn starts);
- an interrupted assistant message with no text is skipped (never an empty message);
- two user messages in a row are merged into one (policy for strict role alternation, F02).

Alongside the messages the builder keeps :attr:`ContextBuilder.seqs`, the seq of the first event
behind each message, so compaction can name the first event it keeps verbatim; checkpoints carry
them (``message_seqs``) so the positions survive a resume, and a rebuild from events has them by
construction.

A session's builder starts *unloaded* (:meth:`ContextBuilder.unload`): opening a session reads no
message at all, and the first turn (or compaction) rebuilds the context from the journal's latest
snapshot plus the context events after it (:meth:`ContextBuilder.rebuild`, run by
``SessionWriter.build_context``). While unloaded, committed events are not folded (the journal
holds them; the rebuild reads them), and reading :attr:`ContextBuilder.messages` is a bug.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

import orjson

from acagent.events import Event
from acagent.messages import (
    MESSAGES_ADAPTER,
    Message,
    TextPart,
    ToolResultPart,
    common_prefix,
    forget_history,
)
from acagent.runner._cut import merge_summary

__all__ = ["ContextBuilder", "ContextNotLoaded", "build_context"]

_FOLDED = frozenset({"checkpoint", "context.compacted", "user.message", "assistant.message", "tool.result"})


class ContextNotLoaded(RuntimeError):
    """The messages of an unloaded context were read before ``SessionWriter.build_context`` (a bug)."""


class ContextBuilder:
    """Incremental fold of events into a list of :class:`Message` (ascending seq)."""

    def __init__(self, messages: list[Message] | None = None) -> None:
        self._messages: list[Message] = list(messages or [])
        self.seqs: list[int] = [0] * len(self._messages)
        """``seqs[i]``: seq of the first event behind ``messages[i]`` (0 when unknown)."""
        self.last_seq = 0
        """Seq of the latest event that changed the context."""
        self.loaded = True
        """False until :meth:`rebuild` after :meth:`unload` (see the module docstring)."""
        self._chain: list[bytes] = []
        """``_chain[i]`` = sha256(_chain[i-1] + JSON of messages[i]); kept in step lazily."""
        self._hashed: list[Message] = []
        """The messages ``_chain`` hashed, one per entry."""
        self.hashed = 0
        """Messages hashed so far (the flatness tests read it)."""

    @property
    def messages(self) -> list[Message]:
        """The context, ascending seq.

        Raises:
            ContextNotLoaded: the builder is unloaded (call ``SessionWriter.build_context`` first).
        """
        if not self.loaded:
            raise ContextNotLoaded("the model context was read before it was rebuilt from the journal")
        return self._messages

    @messages.setter
    def messages(self, value: list[Message]) -> None:
        self._messages = value

    def unload(self) -> None:
        """Forget the context: the next :meth:`rebuild` reads it from the journal (lazy resume)."""
        forget_history(self._messages)  # the history check's memo would keep them alive
        self.loaded = False
        self._messages, self.seqs, self.last_seq = [], [], 0
        self._chain.clear()
        self._hashed.clear()

    def fork(self) -> ContextBuilder:
        """A copy to fold events into ahead of their commit (the messages are shared, immutable;
        the digest chain is copied, so the copy's :meth:`digest` re-hashes only what it changed)."""
        other = ContextBuilder(self.messages)
        other.seqs, other.last_seq = list(self.seqs), self.last_seq
        other._chain, other._hashed = list(self._chain), list(self._hashed)
        return other

    def rebuild(self, events: Iterable[Event]) -> None:
        """Replace the context by the fold of ``events`` (the journal's ``context_events``)."""
        self._messages, self.seqs, self.last_seq = [], [], 0
        self._chain.clear()
        self._hashed.clear()
        self.loaded = True
        for event in events:
            self.apply(event)

    def digest(self, system: str) -> str:
        """:func:`~acagent.messages.context_digest`-like digest of (system, messages), incremental.

        Each message is hashed once into a prefix chain; only messages changed since the last
        call are re-hashed (the last user message grows as tool results arrive), so a step costs
        O(1) hashing instead of serialising the whole context.
        """
        msgs = self.messages
        chain, hashed = self._chain, self._hashed
        # The messages hashed before that are still there (the same objects, or equal ones: the
        # hash is of the value), compared as list slices in C; a Python loop over the ids of a
        # 2,000-message context cost ≈ 0.12 ms per step.
        i = common_prefix(msgs, hashed) if hashed else 0
        del chain[i:]
        del hashed[i:]
        for m in msgs[i:]:
            prev = chain[-1] if chain else b""
            chain.append(
                hashlib.sha256(
                    prev + orjson.dumps(m.model_dump(mode="json"), option=orjson.OPT_SORT_KEYS)
                ).digest()
            )
            hashed.append(m)
            self.hashed += 1
        h = hashlib.sha256(system.encode() + b"\x00" + (chain[-1] if chain else b""))
        return h.hexdigest()

    def apply(self, event: Event) -> None:
        """Fold one event; other event types are ignored (all are while unloaded)."""
        if self.loaded and event.type in _FOLDED:
            self.apply_raw(event.type, event.payload, event.seq)
            self.last_seq = event.seq

    def apply_raw(self, typ: str, payload: dict[str, Any], seq: int = 0) -> None:
        """Fold one ``(type, payload)`` pair (``seq``: its event's seq, 0 when unknown)."""
        if typ == "checkpoint":
            self.messages = MESSAGES_ADAPTER.validate_python(payload["messages"])
            seqs = payload.get("message_seqs")
            self.seqs = list(seqs) if seqs and len(seqs) == len(self.messages) else [0] * len(self.messages)
        elif typ == "context.compacted":
            self._compacted(str(payload["summary"]), int(payload["first_kept_seq"]))
        elif typ == "user.message":
            self._add_user([TextPart(text=payload["text"])], seq)
        elif typ == "assistant.message":
            msg = Message.model_validate(payload["message"])
            if msg.parts:
                self.messages.append(msg)
                self.seqs.append(seq)
        elif typ == "tool.result":
            part = ToolResultPart(
                tool_call_id=payload["tool_call_id"],
                name=payload["name"],
                content=payload["content"] or "(no output)",
                is_error=bool(payload.get("is_error")),
            )
            last = self.messages[-1] if self.messages else None
            if last is not None and last.role == "user":
                results = [p for p in last.parts if isinstance(p, ToolResultPart)] + [part]
                others = [p for p in last.parts if not isinstance(p, ToolResultPart)]
                asked = self.messages[-2] if len(self.messages) >= 2 else None
                if asked is not None and asked.role == "assistant":
                    order = {c.tool_call_id: i for i, c in enumerate(asked.tool_calls)}
                    results.sort(key=lambda r: order.get(r.tool_call_id, len(order)))
                self.messages[-1] = Message(role="user", parts=[*results, *others])
            else:
                self.messages.append(Message(role="user", parts=[part]))
                self.seqs.append(seq)

    def kept_from(self, first_kept_seq: int) -> int:
        """Index of the first message a compaction keeping from ``first_kept_seq`` keeps: the
        first whose seq is at least that (``len(messages)`` when none is)."""
        return next((i for i, s in enumerate(self.seqs) if s >= first_kept_seq > 0), len(self._messages))

    def _compacted(self, summary: str, first_kept_seq: int) -> None:
        """Fold a compaction: keep the messages from the first one whose event seq is at least
        ``first_kept_seq`` (positions increase; unknown ones, 0, are never kept), the summary
        merged into the first of them.

        A compaction written with its ``checkpoint`` (older versions, unknown positions) is
        followed by that checkpoint, which replaces whatever this gives.
        """
        cut = self.kept_from(first_kept_seq)
        kept = merge_summary(summary, self.messages[cut:])
        merged = len(kept) == len(self.messages) - cut  # into the first kept message, not before it
        rest = self.seqs[cut + 1 :] if merged else self.seqs[cut:]
        self.messages, self.seqs = kept, [first_kept_seq, *rest]

    def _add_user(self, parts: list[Any], seq: int) -> None:
        last = self.messages[-1] if self.messages else None
        if last is not None and last.role == "user":
            self.messages[-1] = Message(role="user", parts=[*last.parts, *parts])
        else:
            self.messages.append(Message(role="user", parts=parts))
            self.seqs.append(seq)

    def replace(self, messages: list[Message], seqs: list[int]) -> None:
        """Replace the whole context (compaction): ``seqs`` as :attr:`seqs`, same length."""
        if len(messages) != len(seqs):
            raise ValueError("one seq per message")
        self.messages = list(messages)
        self.seqs = list(seqs)


def build_context(events: Iterable[Event]) -> list[Message]:
    """The model context from ``events`` (a checkpoint resets it)."""
    builder = ContextBuilder()
    for event in events:
        builder.apply(event)
    return builder.messages
