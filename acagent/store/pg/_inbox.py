"""The inbox: input posted to any daemon, committed before anyone acts on it, consumed exactly once.

A message, an approval answer or a cancel that reaches a daemon is first one ``inbox`` row,
unique per ``(session_id, idempotency_key)``: a client that retries (to the same daemon or to
another one) with the same key gets the first attempt's answer, never a second effect. The row
names its ``target``: the daemon that owns the session's live lease (it applies cancels and
approvals to the turn it runs), the receiving daemon itself (nobody owns the session: the
receiver claims it), or nobody (``NULL``: a message any daemon with free capacity may start).
The owner is hinted with ``pg_notify('acagent_inbox', 'kind:session:@id')`` after the row is
committed — a hint only: the scan of each daemon takes what is left over.

**Exactly once.** :meth:`InboxMixin.take_inbox` is one ``UPDATE … WHERE consumed_at IS NULL``
over ``FOR UPDATE SKIP LOCKED`` rows: of all the daemons that try, one takes a row; the taker
applies it and records the ``outcome`` (JSON: ``{"ok": …}`` or ``{"error": {code, message,
detail}}``) that the receiver returns to its client. A receiver whose target did not take the
row in time takes it back itself (the same compare-and-set), so the owner and the receiver never
both apply it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from acagent.store.pg._conn import NOTIFY_SQL

__all__ = ["INBOX_CHANNEL", "InboxItem", "InboxMixin"]

INBOX_CHANNEL = "acagent_inbox"
"""NOTIFY channel for committed input: ``"kind:session_id[:ref]"`` (``ref`` ``@<inbox id>``)."""

_NOW = "extract(epoch from clock_timestamp())"
_COLS = "id, session_id, kind, idempotency_key, body, received_by, target, consumed_by, outcome"


@dataclass
class InboxItem:
    """One ``inbox`` row.

    Attributes:
        body: the input (``{"text"}``, ``{"tool_call_id", "decision", "answer"}``, ``{}``).
        target: the daemon meant to apply it (None: any daemon with capacity).
        consumed_by: the daemon that took it (None: not yet).
        outcome: what applying it gave (None: not applied yet).
    """

    id: int
    session_id: str
    kind: str
    key: str
    body: dict[str, Any]
    received_by: str | None
    target: str | None
    consumed_by: str | None
    outcome: dict[str, Any] | None


def _item(r: Any) -> InboxItem:
    return InboxItem(
        r[0], r[1], r[2], r[3], orjson.loads(r[4]), r[5], r[6], r[7], orjson.loads(r[8]) if r[8] else None
    )


class InboxMixin:
    """Inbox methods of :class:`~acagent.store.pg.PostgresJournal` (see module docstring)."""

    daemon_id: str
    _retry: Callable[..., Awaitable[Any]]
    _fetch: Callable[..., Awaitable[list[Any]]]

    async def notify_inbox(self, session_id: str, kind: str, ref: str = "") -> None:
        """Hint the owner of ``session_id`` that input of ``kind`` was committed (payload
        ``kind:session_id[:ref]``)."""
        payload = f"{kind}:{session_id}" + (f":{ref}" if ref else "")
        await self._retry(lambda c: c.execute(NOTIFY_SQL, INBOX_CHANNEL, payload))

    async def post_inbox(
        self, session_id: str, kind: str, key: str, body: dict[str, Any], *, target: str | None
    ) -> tuple[InboxItem, bool]:
        """Commit input received here (idempotent on ``key``) and hint its target.

        Returns:
            ``(row, created)``; ``created`` is False when the key was already recorded (the row
            returned is the first one, with its outcome once applied).
        """
        rows = await self._fetch(
            f"INSERT INTO inbox (session_id, kind, idempotency_key, body, received_by, target, created_at)"
            f" VALUES ($1, $2, $3, $4, $5, $6, {_NOW}) ON CONFLICT (session_id, idempotency_key) DO NOTHING"
            f" RETURNING {_COLS}",
            session_id,
            kind,
            key,
            orjson.dumps(body).decode(),
            self.daemon_id,
            target,
        )
        if not rows:
            existing = await self.inbox_item(session_id, key)
            assert existing is not None  # a conflicting row exists: inbox rows are never deleted
            return existing, False
        item = _item(rows[0])
        if target != self.daemon_id:
            await self.notify_inbox(session_id, kind, f"@{item.id}")
        return item, True

    async def inbox_item(self, session_id: str, key: str) -> InboxItem | None:
        """The row recorded for ``key`` (None if none)."""
        rows = await self._fetch(
            f"SELECT {_COLS} FROM inbox WHERE session_id = $1 AND idempotency_key = $2", session_id, key
        )
        return _item(rows[0]) if rows else None

    async def inbox_by_id(self, item_id: int) -> InboxItem | None:
        """The row ``item_id`` (None if none)."""
        rows = await self._fetch(f"SELECT {_COLS} FROM inbox WHERE id = $1", item_id)
        return _item(rows[0]) if rows else None

    async def take_inbox(
        self,
        *,
        item_id: int | None = None,
        session_ids: Sequence[str] = (),
        kinds: Sequence[str] = ("message", "approval", "cancel"),
        any_target: bool = False,
        limit: int = 100,
        max_age_s: float | None = None,
    ) -> list[InboxItem]:
        """Take unconsumed rows for this daemon to apply — exactly once across daemons.

        A row is takeable by this daemon when it is row ``item_id`` (its receiver taking it back,
        ``any_target``), is targeted at this daemon or at nobody, or belongs to one of
        ``session_ids`` (the sessions this daemon runs now: a peer that took a session over takes
        the input meant for its dead owner); with ``max_age_s`` only rows that recent.

        Returns:
            The rows taken, in id order.
        """
        rows = await self._fetch(
            f"UPDATE inbox i SET consumed_by = $1, consumed_at = {_NOW}"
            " FROM (SELECT id FROM inbox WHERE consumed_at IS NULL AND kind = ANY($2::text[])"
            " AND ($3::bigint IS NULL OR id = $3::bigint)"
            " AND ($4::bool OR target IS NULL OR target = $1 OR session_id = ANY($5::text[]))"
            f" AND ($7::float8 IS NULL OR created_at > {_NOW} - $7::float8)"
            " ORDER BY id LIMIT $6 FOR UPDATE SKIP LOCKED) t"
            f" WHERE i.id = t.id RETURNING {', '.join('i.' + c for c in _COLS.split(', '))}",
            self.daemon_id,
            list(kinds),
            item_id,
            any_target,
            list(session_ids),
            limit,
            max_age_s,
        )
        return sorted((_item(r) for r in rows), key=lambda it: it.id)

    async def finish_inbox(self, item_id: int, outcome: dict[str, Any]) -> None:
        """Record what applying row ``item_id`` gave (the receiver answers its client with it).

        A row with an outcome is consumed (if nobody took it, this daemon did): nothing applies
        it again."""
        text = orjson.dumps(outcome).decode()
        await self._retry(
            lambda c: c.execute(
                f"UPDATE inbox SET outcome = $2, consumed_by = COALESCE(consumed_by, $3),"
                f" consumed_at = COALESCE(consumed_at, {_NOW}) WHERE id = $1 AND outcome IS NULL",
                item_id,
                text,
                self.daemon_id,
            )
        )

    async def session_owner(self, session_id: str) -> str | None:
        """The daemon whose live lease holds the session now (None: nobody; the session is free)."""
        rows = await self._fetch(
            f"SELECT lease_daemon FROM session WHERE id = $1 AND lease_owner IS NOT NULL"
            f" AND lease_expires_at > {_NOW} AND lease_daemon IS NOT NULL AND acagent_daemon_alive(lease_daemon)",
            session_id,
        )
        return rows[0][0] if rows else None

    async def cluster_capacity(self) -> tuple[int, int]:
        """``(running, capacity)`` of the live daemons: sessions under a live lease, and the sum
        of every live daemon's ``max_sessions`` (recorded when it joined)."""
        rows = await self._fetch(
            f"SELECT (SELECT count(*) FROM session WHERE lease_owner IS NOT NULL AND lease_expires_at > {_NOW}"
            "   AND lease_daemon IS NOT NULL AND acagent_daemon_alive(lease_daemon)),"
            " (SELECT COALESCE(sum(max_sessions), 0) FROM daemon WHERE acagent_daemon_alive(id))"
        )
        return int(rows[0][0]), int(rows[0][1])

    async def set_max_sessions(self, max_sessions: int) -> None:
        """Record this daemon's turn cap (read by :meth:`cluster_capacity` of every daemon)."""
        await self._retry(
            lambda c: c.execute(
                "UPDATE daemon SET max_sessions = $2 WHERE id = $1", self.daemon_id, int(max_sessions)
            )
        )
