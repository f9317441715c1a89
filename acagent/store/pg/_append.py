"""Fenced appends of :class:`~acagent.store.pg.PostgresJournal`: one statement per commit without ops.

- **Fenced appends in one statement.** :meth:`AppendMixin.commit` without row operations is one
  ``UPDATE session … WHERE id = $1 AND fencing_token = $2 RETURNING`` joined (CTE) to the
  ``INSERT INTO event``: the fence, the seq assignment and the append are one statement, so a
  zombie writer (its lease epoch superseded) writes nothing. With row operations the session row
  is locked (``SELECT … FOR UPDATE``) for the length of one transaction — never across an LLM or
  tool await: the transaction only holds statements.
- **Retry after a lost connection**: a commit carries a commit id on its first event, so a retry
  whose previous attempt did land returns those events instead of appending twice.
- **Hints after commit.** Each commit reports ``(session_id, last_seq)`` to ``on_commit`` (the
  cluster's batched NOTIFY, :mod:`acagent.store.pg._cluster`), never inside the transaction; a
  journal without a cluster sends one ``pg_notify`` itself after the transaction.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import orjson

from acagent.errors import SessionNotFound, StaleLease
from acagent.events import Event, now_ts
from acagent.store import Lease, Op, SetStatus
from acagent.store._numbering import commit_order, fold_events
from acagent.store.pg._conn import NOTIFY_SQL
from acagent.store.pg._ops import PgTx, apply_op

__all__ = ["EVENTS_CHANNEL", "AppendMixin"]

T = TypeVar("T")
log = logging.getLogger("acagent.store.pg")
EVENTS_CHANNEL = "acagent_events"
"""NOTIFY channel: payload ``"sid:seq sid:seq …"`` = "read the journal after seq X" (hints only)."""

_APPEND = """
WITH s AS (
    UPDATE session SET
        last_seq = last_seq + $3,
        updated_at = CASE WHEN $3 > 0 THEN $4 ELSE updated_at END,
        tail_bytes = CASE WHEN $5 > 0 THEN $6 ELSE tail_bytes + $6 END,
        last_message = COALESCE($7, last_message),
        checkpoint_seq = CASE WHEN $12::bigint IS NOT NULL THEN $12::bigint
                              WHEN $5 > 0 THEN last_seq + $5 ELSE checkpoint_seq END,
        checkpoint_bytes = CASE WHEN $5 > 0 THEN $8 ELSE checkpoint_bytes END
    WHERE id = $1 AND ($2::bigint IS NULL OR fencing_token = $2::bigint)
    RETURNING last_seq - $3 AS base
), ins AS (
    INSERT INTO event (session_id, seq, ts, type, payload, commit_id)
    SELECT $1, s.base + e.ord, $4, e.type, e.payload, CASE WHEN e.ord = 1 THEN $9 END
    FROM s, unnest($10::text[], $11::text[]) WITH ORDINALITY AS e(type, payload, ord)
)
SELECT base FROM s
"""


class AppendMixin:
    """Commit methods of :class:`~acagent.store.pg.PostgresJournal` (``_retry``, ``_pool``, ``on_commit``)."""

    _pool: Any
    on_commit: Callable[[str, int], None] | None
    _retry: Callable[..., Awaitable[Any]]

    async def commit(
        self,
        session_id: str,
        events: Sequence[tuple[str, dict[str, Any]]],
        *,
        lease: Lease,
        ops: Sequence[Op] = (),
    ) -> list[Event]:
        """Append ``events`` and apply ``ops`` in one transaction, fenced; return the committed events.

        Same contract as :meth:`Journal.commit <acagent.store.Journal.commit>` (unfenced writes:
        :meth:`commit_unfenced`).
        """
        if not isinstance(lease, Lease):
            raise TypeError("commit needs the writer's Lease; unfenced writes use commit_unfenced")
        return await self._commit(session_id, events, lease=lease, ops=ops)

    async def _commit(
        self,
        session_id: str,
        events: Sequence[tuple[str, dict[str, Any]]],
        *,
        lease: Lease | None,
        ops: Sequence[Op] = (),
    ) -> list[Event]:
        """:meth:`commit` with an optional lease (``None``: unfenced).

        Raises:
            StaleLease: the fencing token was superseded (nothing written).
            InvalidTransition: a guarded operation's precondition failed (nothing written).
            SessionNotFound: no such session.
            JournalError: the server stayed unreachable for ``retry_s``.
        """
        ts = now_ts()
        cid = uuid.uuid4().hex
        token = lease.token if lease is not None else None
        attempts = 0

        async def tx(conn: Any) -> list[Event]:
            nonlocal attempts
            attempts += 1
            if attempts > 1:
                landed = await self._landed(conn, session_id, cid)
                if landed is not None:
                    return landed
            if not ops:
                return await self._append(conn, session_id, token, list(events), ts, cid)
            async with conn.transaction():
                row = await conn.fetchrow(
                    "SELECT fencing_token, status, cancel_requested FROM session WHERE id = $1 FOR UPDATE",
                    session_id,
                )
                if row is None:
                    raise SessionNotFound(f"no session {session_id!r}")
                if token is not None and row[0] != token:
                    raise StaleLease(
                        f"session {session_id!r}: fencing token {token} superseded by {row[0]}; write discarded"
                    )
                tx_state = PgTx(conn, session_id, ts, status=row[1], cancel_requested=row[2])
                extra = [e for op in ops if (e := await apply_op(op, tx_state)) is not None]
                ordered = commit_order(extra, events)  # the same order as SQLite
                return await self._append(conn, session_id, token, ordered, ts, cid)

        committed: list[Event] = await self._retry(tx)
        if committed:
            self._hint(session_id, committed[-1].seq)
            await self._notify_now(session_id, committed[-1].seq)
        return committed

    async def _append(
        self,
        conn: Any,
        session_id: str,
        token: int | None,
        all_events: list[tuple[str, dict[str, Any]]],
        ts: str,
        cid: str,
    ) -> list[Event]:
        """The one fenced append statement (see module docstring)."""
        f = fold_events(all_events)  # the counters a batch moves: the same rules as SQLite's commit
        ckpt_pos, ckpt_bytes = f.checkpoint or (0, 0)
        base = await conn.fetchval(
            _APPEND,
            session_id,
            token,
            len(all_events),
            ts,
            ckpt_pos,
            f.tail_bytes,
            f.last_message,
            ckpt_bytes,
            cid,
            [t for t, _ in all_events],
            f.payloads,
            f.kept_from if f.checkpoint is not None else None,
        )
        if base is None:
            current = await conn.fetchval("SELECT fencing_token FROM session WHERE id = $1", session_id)
            if current is None:
                raise SessionNotFound(f"no session {session_id!r}")
            raise StaleLease(
                f"session {session_id!r}: fencing token {token} superseded by {current}; write discarded"
            )
        return [
            Event(seq=base + i, ts=ts, session_id=session_id, type=typ, payload=payload)
            for i, (typ, payload) in enumerate(all_events, start=1)
        ]

    async def _landed(self, conn: Any, session_id: str, cid: str) -> list[Event] | None:
        """The events of commit ``cid`` if an earlier attempt landed (its first event carries the id)."""
        first = await conn.fetchval(
            "SELECT seq FROM event WHERE session_id = $1 AND commit_id = $2", session_id, cid
        )
        if first is None:
            return None
        rows = await conn.fetch(
            "SELECT seq, ts, type, payload FROM event WHERE session_id = $1 AND seq >= $2 AND seq < COALESCE("
            "(SELECT min(seq) FROM event WHERE session_id = $1 AND seq > $2 AND commit_id IS NOT NULL),"
            " 9223372036854775807) ORDER BY seq",
            session_id,
            first,
        )
        return [
            Event(seq=s, ts=ts, session_id=session_id, type=t, payload=orjson.loads(p))
            for s, ts, t, p in rows
        ]

    def _hint(self, session_id: str, seq: int) -> None:
        """Report a commit to the cluster's batched notifier (after the transaction, never in it)."""
        if self.on_commit is not None:
            self.on_commit(session_id, seq)

    async def _notify_now(self, session_id: str, seq: int) -> None:
        """Without a cluster (``acagent run`` on a shared journal): one NOTIFY after the commit, best effort."""
        if self.on_commit is None:
            try:
                await self._pool.execute(NOTIFY_SQL, EVENTS_CHANNEL, f"{session_id}:{seq}")
            except Exception as exc:  # a hint only: the listeners' 1 s poll covers a lost one
                log.debug("notify failed: %s", exc)

    async def status_transition(
        self,
        session_id: str,
        to: str,
        from_: Sequence[str],
        *,
        reason: str | None = None,
        lease: Lease | None = None,
    ) -> list[Event]:
        """Commit a bare status change (with its ``session.status`` event)."""
        return await self._commit(
            session_id, [], lease=lease, ops=[SetStatus(to, tuple(from_), reason=reason)]
        )
