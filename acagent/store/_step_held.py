"""An inflight step held in its session's row, not in ``step_log`` (m020, benchmarks figure 3 bytes per turn).

A tool turn is four commits and each rewrote ``step_log``'s last leaf: the accept commit and the
tool result's commit inserted the next step ``inflight``, the two replies' ``FinishStep`` updated
it (a row whose size changes is rewritten whole): 4.6 WAL frames of 512 bytes per benchmark turn.
Every commit rewrites the session's row anyway (``last_seq``), so since m020 an inflight step
whose ids are the runner's (``request_id`` = ``step_id|attempt``, ``step_id`` =
``session|turn|digest16`` with ``turn_<16 hex>`` and a lowercase hex digest: what m012/m015 pack
to nothing) is held there — ``session.step_digest`` (its bytes), ``step_turn`` (the turn's 8
bytes), ``step_attempt``, ``step_at`` (started, INTEGER µs), ~50 bytes of a row the commit
rewrites — and ``FinishStep`` inserts its ``step_log`` row once, finished (m018's usage then sets
that row's usage in the same commit). One step at a time: an ``InsertStep`` while the row holds
one, or of other ids, writes an inflight ``step_log`` row as before, and so did every journal
before m020 (``FinishStep`` updates those rows as before).

Readers see no difference: ``step`` is the view of ``step_log`` rows (``step_row``, m012/m015's
view) and of ``step_held``, one inflight row per session that holds one (key ``((num + 1) << 32)
- 1``, the end of the session's key range; ``rid`` NULL), so a person with ``sqlite3`` reads it as
before. The journal's own reads name the two views (a ``UNION ALL`` view is not flattened: a key
range on ``step`` scanned all of ``step_log``): the step reads of
:mod:`acagent.store._sqlite_read` (recovery's lookup of an inflight attempt among them) read
``step_row`` in the session's key range ``UNION ALL`` ``step_held`` of the session (:data:`STEPS_OF`);
``FinishStep`` of a row, ``record_usage`` and ``usage`` read ``step_row`` (a held step has no usage yet).
A request id stays unique: ``InsertStep`` refuses one equal to the held step's, as it refuses
one of ``step_log`` (:func:`acagent.store._row_ids.claim`); removing a session removes its row.
"""

from __future__ import annotations

import re
from typing import Any

from acagent.store._row_ids import STEPS, claim, known
from acagent.store._step_row import create_step_view, insert_step_row, pack_ts, unpack_ts

__all__ = ["STEPS_OF", "finish_held", "hold_step", "m020_inflight_step_in_session"]

_HEX = re.compile(r"(?:[0-9a-f]{2})+")
_TURN = re.compile(r"turn_[0-9a-f]{16}")
_COLS = ("step_digest", "step_turn", "step_attempt", "step_at")

STEPS_OF = (
    "SELECT {cols} FROM step_row WHERE key > (SELECT num FROM session WHERE id = :sid) << 32"
    " AND key < ((SELECT num FROM session WHERE id = :sid) + 1) << 32 AND session_id = :sid{where}"
    " UNION ALL SELECT {cols} FROM step_held WHERE session_id = :sid{where}"
)
"""The steps of session ``:sid`` (``str.format``: ``cols``; ``where``, more terms, each `` AND …``)."""

Held = tuple[str, str, str, str, int, str]
"""``(request_id, step_id, turn_id, digest, attempt, started_at)`` of the held step."""


def _held(ctx: Any) -> Held | None:
    """The step the session's row holds in this commit (read once, then kept on ``ctx``)."""
    if ctx.held is not False:
        return ctx.held  # type: ignore[no-any-return]
    row = ctx.db.execute(f"SELECT {', '.join(_COLS)} FROM session WHERE num = ?", (ctx.num,)).fetchone()
    held: Held | None = None
    if row is not None and row[0] is not None:
        digest, turn, attempt, at = (
            bytes(row[0]).hex(),
            "turn_" + bytes(row[1]).hex(),
            int(row[2]),
            int(row[3]),
        )
        step_id = f"{ctx.session_id}|{turn}|{digest[:16]}"
        held = (f"{step_id}|{attempt}", step_id, turn, digest, attempt, unpack_ts(at))
    ctx.held = held
    return held


def _set(ctx: Any, values: tuple[Any, ...]) -> None:
    for column, value in zip(_COLS, values, strict=True):
        ctx.sets[column] = ("?", (value,))


def hold_step(ctx: Any, request_id: str, step_id: str, turn_id: str, digest: str, attempt: int) -> bool:
    """Hold the inflight step in the session's row (module docstring); False: the caller writes
    its ``step_log`` row (after the same uniqueness check against the held step, done here).

    Raises:
        sqlite3.IntegrityError: the request id is the held step's, or one of ``step_log``'s.
    """
    import sqlite3

    from acagent.store._sqlite_ops import step_rid  # (it imports this module)

    held = _held(ctx)
    if held is not None and held[0] == request_id:
        raise sqlite3.IntegrityError(f"UNIQUE constraint failed: {STEPS.label}")
    at = pack_ts(ctx.ts)
    ours = (
        held is None
        and isinstance(at, int)
        and _HEX.fullmatch(digest) is not None
        and _TURN.fullmatch(turn_id) is not None
        and step_id == f"{ctx.session_id}|{turn_id}|{digest[:16]}"
        and request_id == f"{step_id}|{attempt}"
    )
    if not ours:
        return False
    if known(ctx.db, STEPS, ctx.num, step_rid(ctx.session_id, request_id)):
        raise sqlite3.IntegrityError(f"UNIQUE constraint failed: {STEPS.label}")
    _set(ctx, (bytes.fromhex(digest), bytes.fromhex(turn_id[5:]), attempt, at))
    ctx.held = (request_id, step_id, turn_id, digest, attempt, ctx.ts)
    return True


def finish_held(ctx: Any, request_id: str, status: str, error: str | None) -> bool:
    """Finish the held step if it is ``request_id``: its ``step_log`` row, inserted finished, and
    the session's row cleared. False: no such held step (the caller updates ``step_log``)."""
    from acagent.store._sqlite_ops import next_key, step_rid

    held = _held(ctx)
    if held is None or held[0] != request_id:
        return False
    key = next_key(ctx.db, "step_log", ctx.num)
    claim(ctx.db, STEPS, ctx.num, key, step_rid(ctx.session_id, request_id))  # moves a full window
    row = (*held[:5], status, error, held[5], ctx.ts)
    insert_step_row(ctx.db, ctx.num, ctx.session_id, row, key=key)
    _set(ctx, (None, None, None, None))
    ctx.held = None
    return True


def m020_inflight_step_in_session(db: Any) -> None:
    """The session's held step columns; ``step`` becomes ``step_row`` (m015's view) plus the held
    steps; ``usage`` reads ``step_row`` (:func:`acagent.store._usage_step.create_usage_view`)."""
    from acagent.store._usage_step import create_usage_view

    for column, kind in zip(_COLS, ("BLOB", "BLOB", "INTEGER", "INTEGER"), strict=True):
        db.execute(f"ALTER TABLE session ADD COLUMN {column} {kind}")  # NULL: no step held
    db.execute("DROP VIEW usage")  # (and its trigger) it reads the view replaced here
    db.execute("DROP VIEW step")
    create_step_view(db, by_turn=True, name="step_row")
    digest = "lower(hex(s.step_digest))"
    turn = "'turn_' || lower(hex(s.step_turn))"
    step_id = f"s.id || '|' || {turn} || '|' || substr({digest}, 1, 16)"
    at = (
        "strftime('%Y-%m-%dT%H:%M:%S', s.step_at / 1000000, 'unixepoch')"
        " || printf('.%06dZ', s.step_at % 1000000)"
    )
    cols = "key, rid, session_id, request_id, step_id, turn_id, digest, attempt, status, error, started_at, finished_at"
    db.execute(
        f"CREATE VIEW step_held ({cols}) AS"
        f" SELECT ((s.num + 1) << 32) - 1, NULL, s.id, {step_id} || '|' || s.step_attempt, {step_id}, {turn},"
        f" {digest}, s.step_attempt, 'inflight', NULL, {at}, NULL FROM session s WHERE s.step_digest IS NOT NULL"
    )
    db.execute(f"CREATE VIEW step ({cols}) AS SELECT * FROM step_row UNION ALL SELECT * FROM step_held")
    create_usage_view(db, steps="step_row")
