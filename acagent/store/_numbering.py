"""How a commit numbers its events and keeps the session's counters: shared by every backend.

A commit appends events with ``seq = last_seq + 1, + 2, …`` and, in the same transaction, updates
the session row: ``last_seq``, ``updated_at``, ``tail_bytes`` (context bytes committed after the
latest snapshot event), ``checkpoint_seq`` / ``checkpoint_bytes`` (where the latest snapshot puts the
start of a context rebuild, and its event's payload bytes) and ``last_message`` (the latest user or
assistant text, cut to 500 characters). Both snapshot events reset ``tail_bytes``: a ``checkpoint``
(a full copy of the context) is its own start, a ``context.compacted`` (a summary and a position)
starts the rebuild at its ``first_kept_seq`` — the kept messages are the events from there on,
already in the journal, so a compaction copies none of them (docs/context.md). Backends call
:func:`number_events` under their write lock and store what it returns, so the bookkeeping is the
same on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from acagent._value import Record
from acagent.events import Event
from acagent.store._ops import CONTEXT_TYPES, SNAPSHOT_TYPES

__all__ = [
    "LAST_MESSAGE_CHARS",
    "Folded",
    "Numbered",
    "commit_order",
    "fold_events",
    "make_events",
    "number_events",
]

LAST_MESSAGE_CHARS = 500

_RESTING = ("done", "cancelled", "failed")
_TURN_ENDS = ("turn.completed", "turn.failed", "turn.interrupted")


def commit_order(
    extra: Sequence[tuple[str, dict[str, Any]]], events: Sequence[tuple[str, dict[str, Any]]]
) -> list[tuple[str, dict[str, Any]]]:
    """The order of one commit's events: the ops' events (``extra``) and the commit's own.

    Status changes lead their commit, except a change into a resting state (``done``,
    ``cancelled``, ``failed``): it goes right before the commit's turn-end event, or last when
    there is none. So a client that stops reading at the resting status has seen every event of
    the transaction that led to it (the closing ``tool.result`` of a cancel above all), and the
    turn's end event is still the commit's last.
    """
    lead: list[tuple[str, dict[str, Any]]] = []
    rest: list[tuple[str, dict[str, Any]]] = []
    for e in extra:
        (rest if e[0] == "session.status" and e[1].get("status") in _RESTING else lead).append(e)
    out = [*lead, *events]
    if not rest:
        return out
    end = len(out) - 1 if out and out[-1][0] in _TURN_ENDS else len(out)
    return [*out[:end], *rest, *out[end:]]


@dataclass(repr=False, eq=False)  # eq and repr: acagent._value.Record
class Folded(Record):
    """What one commit's events add to the session counters, before they have seqs."""

    payloads: list[str] = field(default_factory=list)
    """The JSON text of each event's payload (what the backend stores), in order."""
    tail_bytes: int = 0
    """Context bytes after the commit's last checkpoint (all of them when there is none)."""
    last_message: str | None = None
    """New ``last_message`` (already cut), or None when the commit carries no text."""
    last_message_at: int | None = None
    """1-based position in the commit of the event ``last_message`` comes from, or None."""
    checkpoint: tuple[int, int] | None = None
    """``(1-based position in the commit, payload bytes)`` of its last snapshot event
    (:data:`~acagent.store._ops.SNAPSHOT_TYPES`), or None."""
    kept_from: int | None = None
    """That snapshot's ``first_kept_seq`` when it is a ``context.compacted``, else None."""

    def snapshot_seq(self, last_seq: int) -> int:
        """``checkpoint_seq`` after this commit (which follows ``last_seq``): where a context
        rebuild starts. Only meaningful when :attr:`checkpoint` is set."""
        if self.kept_from is not None:
            return self.kept_from
        assert self.checkpoint is not None
        return last_seq + self.checkpoint[0]


def fold_events(events: Sequence[tuple[str, dict[str, Any]]]) -> Folded:
    """The payload texts and counters of ``events`` (see the module docstring)."""
    out = Folded()
    for i, (typ, payload) in enumerate(events, start=1):
        text = orjson.dumps(payload).decode()
        out.payloads.append(text)
        if typ in CONTEXT_TYPES:
            out.tail_bytes += len(text)
            if typ != "tool.result" and payload.get("text"):
                out.last_message = str(payload["text"])[:LAST_MESSAGE_CHARS]
                out.last_message_at = i
        elif typ in SNAPSHOT_TYPES:
            out.checkpoint = (i, len(text))
            out.kept_from = int(payload.get("first_kept_seq") or 0) if typ == "context.compacted" else None
            out.tail_bytes = 0
    return out


def make_events(
    session_id: str, last_seq: int, ts: str, events: Sequence[tuple[str, dict[str, Any]]]
) -> list[Event]:
    """``events`` as :class:`Event` envelopes numbered ``last_seq + 1, + 2, …``."""
    return [
        Event.trusted(seq, ts, session_id, typ, dict(payload))  # a copy, as validation made
        for seq, (typ, payload) in enumerate(events, start=last_seq + 1)
    ]


@dataclass(repr=False, eq=False)  # eq and repr: acagent._value.Record
class Numbered(Record):
    """The events of one commit with their seqs, and the session counters after it."""

    events: list[Event] = field(default_factory=list)
    payloads: list[str] = field(default_factory=list)
    """The JSON text of each event's payload (what the backend stores), same order."""
    last_seq: int = 0
    tail_bytes: int = 0
    last_message: str | None = None
    """New ``last_message`` (already cut), or None when the commit carries no text."""
    last_message_seq: int | None = None
    """Seq of the event ``last_message`` comes from, or None."""
    checkpoint: tuple[int, int] | None = None
    """``(checkpoint_seq, payload bytes)`` of the commit's last snapshot event, or None
    (:meth:`Folded.snapshot_seq`)."""


def number_events(
    session_id: str,
    last_seq: int,
    tail_bytes: int,
    ts: str,
    events: Sequence[tuple[str, dict[str, Any]]],
) -> Numbered:
    """Number ``events`` after ``last_seq`` (see the module docstring)."""
    f = fold_events(events)
    return Numbered(
        events=make_events(session_id, last_seq, ts, events),
        payloads=f.payloads,
        last_seq=last_seq + len(events),
        tail_bytes=f.tail_bytes if f.checkpoint is not None else tail_bytes + f.tail_bytes,
        last_message=f.last_message,
        last_message_seq=None if f.last_message_at is None else last_seq + f.last_message_at,
        checkpoint=None if f.checkpoint is None else (f.snapshot_seq(last_seq), f.checkpoint[1]),
    )
