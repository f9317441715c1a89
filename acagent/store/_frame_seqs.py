"""The check of a read's ``event_log`` rows against each other and the session's ``last_seq``.

A row's seqs come from its key (``num << 32 | first_seq``) and, for a frame (m016), the count of
its type letters: no checksum covers the key (it is the b-tree's own), so one flipped key bit
moved a frame's events to other seqs, silently — a gap, later events relabelled, duplicates, a
seq past ``session.last_seq``. What the layout makes checkable is checked as the rows are read,
O(1) a row: the rows must continue exactly (each row's first
seq is the last seq of the row before + 1, from the row before the read's first one, to
``last_seq`` when read to the end; a read filtered by type reads every row's key and type too, and
decodes only the rows of its types); no row may end past
``last_seq`` (re-read once before saying so: a commit may have landed since it was read, and
``last_seq`` only grows). A violation is a :class:`~acagent.errors.JournalError` naming the
session and the row's seqs, its ``detail`` ``{"session_id", "first_seq", "last_seq", "reason":
"corrupt"}`` (damaged data: ``errors.JournalError`` is not retryable then).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from acagent.errors import JournalError
from acagent.store._payload import FRAME_BYTES

__all__ = ["SeqCheck", "row_span", "seq_error"]


def row_span(typ: Any, head: Any) -> int:
    """How many events a row holds: a frame's type letters (``head`` its payload, or the payload's
    first byte, is a frame's), else 1."""
    if type(head) is bytes and head[:1] in FRAME_BYTES and isinstance(typ, str):
        return len(typ)
    return 1


def seq_error(session_id: str, first: int, last: int, what: str) -> JournalError:
    """The JournalError of seqs ``first``…``last`` of a session (``detail`` names them)."""
    seqs = f"event {first}" if first == last else f"events {first}-{last}"
    return JournalError(
        f"session {session_id!r} {seqs}: {what}",
        detail={"session_id": session_id, "first_seq": first, "last_seq": last, "reason": "corrupt"},
    )


class SeqCheck:
    """The seqs of one read's rows, in the read's order (module docstring).

    Args:
        last_seq: the session's, read before the rows.
        floor: the last seq of the row before the row holding the read's first seq (0: none;
            None: not known, that row is not checked against it).
        top: the read's highest seq (``until``).
        descending: the rows come newest first.
    """

    __slots__ = ("_db", "_sid", "_unchecked", "descending", "edge", "first_last", "floor", "last_seq", "top")

    def __init__(
        self,
        db: sqlite3.Connection,
        session_id: str,
        last_seq: int,
        *,
        floor: int | None,
        top: int,
        descending: bool,
    ) -> None:
        self._db, self._sid, self.last_seq = db, session_id, last_seq
        self.first_last = last_seq
        """``last_seq`` as read before the rows: what the rows must reach (a re-read may be newer
        than them)."""
        self.floor, self.top, self.descending = floor, top, descending
        self.edge: int | None = None if descending else floor
        self._unchecked = not descending and floor is None
        """Ascending, the last seq of the row before; descending, the first seq of the row after."""

    def row(self, first: int, n: int) -> None:
        """Check the next row, holding seqs ``first`` … ``first + n - 1``.

        Raises:
            JournalError: it does not follow the row before, or ends past ``last_seq``, or (the
                first row of a descending read) ends before the read's top.
        """
        end = first + n - 1
        if end > self.last_seq and end > self._reread(gone=end):
            raise seq_error(self._sid, first, end, f"a row ends past the session's last seq {self.last_seq}")
        edge = self.edge
        if self._unchecked:  # ascending from a row before that is not known to be right
            self._unchecked = False
        elif edge is None:  # descending, the newest row: it holds the top seq (or the last)
            want = min(self.top, self.first_last)
            if end < want and self._exists():
                raise seq_error(self._sid, end + 1, want, "no row holds these events")
        elif (end != edge - 1) if self.descending else (first != edge + 1):
            what = f"begins after seq {edge}" if self.descending else f"ends at seq {edge}"
            raise seq_error(
                self._sid, first, end, f"a row's seqs do not follow the row next to it, which {what}"
            )
        self.edge = first if self.descending else end

    def end(self, since: int) -> None:
        """Check a read after ``since`` that read every row of its range.

        Raises:
            JournalError: ascending, its rows stop before ``min(top, last_seq)`` (events missing at
                the end); descending, its oldest row does not follow the row before it.
        """
        if self.descending:
            if self.edge is not None and self.floor is not None and self.edge != self.floor + 1:
                lo, hi = sorted((self.floor + 1, self.edge))
                raise seq_error(
                    self._sid,
                    lo,
                    hi,
                    f"a row beginning at seq {self.edge} does not follow the row ending at {self.floor}",
                )
            got = since if self.edge is None else self.top
        else:
            got = self.edge if self.edge is not None else since
        want = min(self.top, self.first_last)
        if got < want and self._exists():
            gap = max(got, since) + 1
            raise seq_error(self._sid, gap, max(gap, want), "no row holds these events")

    def _exists(self) -> bool:
        """The session is still there (a session removed since its rows were read: nothing to say)."""
        return self._db.execute("SELECT 1 FROM session WHERE id = ?", (self._sid,)).fetchone() is not None

    def _reread(self, *, gone: int) -> int:
        row = self._db.execute("SELECT last_seq FROM session WHERE id = ?", (self._sid,)).fetchone()
        self.last_seq = gone if row is None else row[0]  # a session removed since: nothing to say
        return self.last_seq
