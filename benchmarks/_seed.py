"""Seed long sessions quickly: replay one real turn's journal rows N times.

Building a 1,000-turn history by running 1,000 turns would measure the build, not the turn (and
takes minutes where the runtime is O(history) per turn). Instead one turn is run for real through
the registry, its events, ``step`` and ``tool_call`` rows are captured as a template, and copies
(fresh turn, step and tool-call ids) are committed through :meth:`SqliteJournal.commit` — the same
choke point the runtime uses, so ``seq``, ``tail_bytes`` and ``last_message`` are kept by the
journal itself. The runtime writes no periodic checkpoint (the context events are the
incremental checkpoint); with ``checkpoint_ratio`` the previous format's policy is applied after
each copied turn (a full-context checkpoint when the tail > max(4 KiB, ratio × last checkpoint)),
so a journal of the previous format can be measured too.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from acagent.store._rows import TOOL_COLS
from benchmarks._common import USER_TEXT, bench_settings, echo_tools, scripted_factory, tmp_home

__all__ = ["Template", "make_template", "seed_session"]


@dataclass
class Template:
    """One real turn: its events (type, JSON text), step and tool-call rows, and the ids to rename."""

    events: list[tuple[str, str]]
    steps: list[tuple[Any, ...]]
    tool_calls: list[tuple[Any, ...]]
    session_id: str
    turn_id: str
    ids: list[str]
    """Step ids and tool-call ids of the turn (renamed in every copy)."""


async def make_template(*, tool_calls: bool = True) -> Template:
    """Run one real turn (scripted model, echo tool) and capture its rows."""
    from acagent.runner import SessionRegistry
    from acagent.testing import ScriptedModel

    factory = scripted_factory(tool_calls=tool_calls)
    with tmp_home("template") as home:
        settings = bench_settings(home)
        async with SessionRegistry.open(
            settings, provider_factory=lambda m: ScriptedModel(factory=factory), tools_factory=echo_tools
        ) as registry:
            row = await registry.create_session(home, model="test:scripted")
            runner = await registry.get_runner(row.id)
            turn_id = await runner.run_turn(USER_TEXT)
            journal = registry.journal
            events = [
                (e.type, orjson.dumps(e.payload).decode())
                for e in await journal.events(row.id, 1)
                if e.type != "checkpoint"
            ]

            def q(db: Any) -> tuple[list[Any], list[Any]]:
                steps = db.execute(
                    f"SELECT {_STEP_COLS} FROM step WHERE session_id = ?", (row.id,)
                ).fetchall()
                calls = db.execute(
                    f"SELECT {_CALL_COLS} FROM tool_call WHERE session_id = ?", (row.id,)
                ).fetchall()
                return steps, calls

            steps, calls = await journal._run(q)
    ids = sorted({s[2] for s in steps} | {c[1] for c in calls}, key=len, reverse=True)
    return Template(events, steps, calls, row.id, turn_id, ids)


def _renamer(template: Template, session_id: str) -> tuple[str, dict[str, str]]:
    k = uuid.uuid4().hex[:16]
    mapping = {old: f"{session_id}|seed_{k}_{i}" for i, old in enumerate(template.ids)}
    mapping[template.turn_id] = f"turn_{k}"
    mapping[template.session_id] = session_id
    return f"turn_{k}", mapping


def _rename(text: str, mapping: dict[str, str]) -> str:
    for old, new in mapping.items():  # longest ids first (step ids contain the session id)
        text = text.replace(old, new)
    return text


async def seed_session(
    journal: Any, session_id: str, turns: int, template: Template, *, checkpoint_ratio: float | None = None
) -> int:
    """Append ``turns`` copies of the template turn to ``session_id``; return its last seq.

    ``checkpoint_ratio``: write the previous format's full-context checkpoints with that ratio
    (None, the default: none, as the runtime does now).
    """
    from acagent.events import make_payload
    from acagent.runner import ContextBuilder

    builder = ContextBuilder()
    for event in await journal.context_events(session_id):
        builder.apply(event)
    last_turn = None
    for _ in range(turns):
        last_turn, mapping = _renamer(template, session_id)
        events = [(typ, orjson.loads(_rename(text, mapping))) for typ, text in template.events]
        for event in await journal.commit_unfenced(session_id, events, reason="benchmark seed"):
            builder.apply(event)
        steps = [tuple(_rename(v, mapping) if isinstance(v, str) else v for v in r) for r in template.steps]
        calls = [
            tuple(_rename(v, mapping) if isinstance(v, str) else v for v in r) for r in template.tool_calls
        ]

        def insert(db: Any, steps: list[Any] = steps, calls: list[Any] = calls) -> None:
            if steps:
                _insert_steps(db, session_id, steps)
            if calls:
                _insert_calls(db, session_id, calls)

        await journal._run(insert)
        row = await journal.get_session(session_id)
        if checkpoint_ratio is not None and row.tail_bytes > max(
            4096, checkpoint_ratio * row.checkpoint_bytes
        ):
            messages = [m.model_dump(mode="json") for m in builder.messages]
            payload = make_payload("checkpoint", upto_seq=builder.last_seq, messages=messages)
            await journal.commit_unfenced(session_id, [("checkpoint", payload)], reason="benchmark seed")

    def finish(db: Any) -> int:
        db.execute("UPDATE session SET status = 'done', turn_id = ? WHERE id = ?", (last_turn, session_id))
        return int(db.execute("SELECT last_seq FROM session WHERE id = ?", (session_id,)).fetchone()[0])

    return await journal._run(finish)


def events_per_turn(template: Template) -> int:
    """Events one template turn adds."""
    return len(template.events)


_STEP_COLS = (
    "session_id, request_id, step_id, turn_id, digest, attempt, status, error, started_at, finished_at"
)


_CALL_COLS = ", ".join(TOOL_COLS)


def _insert_steps(db: Any, session_id: str, steps: list[Any]) -> None:
    """Insert step rows (``_STEP_COLS`` values) into ``session_id`` as the journal stores them (m012)."""
    from acagent.store._step_row import insert_step_row

    (num,) = db.execute("SELECT num FROM session WHERE id = ?", (session_id,)).fetchone()
    for r in steps:
        insert_step_row(db, num, session_id, tuple(r[1:]))


def _insert_calls(db: Any, session_id: str, calls: list[Any]) -> None:
    """Insert tool-call rows (``_CALL_COLS`` values) into ``session_id`` with their m010 ``key`` and ``tid``."""
    from acagent.store._sqlite_ops import next_key, step_rid

    (num,) = db.execute("SELECT num FROM session WHERE id = ?", (session_id,)).fetchone()
    for r in calls:
        db.execute(
            f"INSERT INTO tool_call (key, tid, {_CALL_COLS}) VALUES (?, ?, {','.join('?' * len(r))})",
            (next_key(db, "tool_call", num), step_rid(r[0], r[1]), *r),
        )


def session_path(home: Path) -> Path:
    """The journal file of a data directory."""
    return home / "acagent.db"


def clone_sessions(db_path: Path, session_id: str, n: int) -> list[str]:
    """Insert ``n`` copies of a session (row, events, steps, tool calls) in one transaction.

    The copies are what ``n`` hibernated sessions look like in the journal: byte-for-byte the
    rows the runtime wrote for ``session_id``, under new session ids. Returns the new ids.
    """
    import sqlite3
    import time

    from acagent.store._frames import stored_events
    from acagent.store._payload import encode_payload, payload_text

    db = sqlite3.connect(db_path, isolation_level=None)
    try:
        session = db.execute("SELECT * FROM session WHERE id = ?", (session_id,)).fetchone()
        events = stored_events(db, session_id)  # frames too (m016)
        steps = db.execute(f"SELECT {_STEP_COLS} FROM step WHERE session_id = ?", (session_id,)).fetchall()
        calls = db.execute(
            f"SELECT {_CALL_COLS} FROM tool_call WHERE session_id = ?", (session_id,)
        ).fetchall()
        ids = [f"ses_{int(time.time() * 1000):011x}{uuid.uuid4().hex[:15]}" for _ in range(n)]

        def sub(row: tuple[Any, ...], new: str) -> tuple[Any, ...]:
            return tuple(v.replace(session_id, new) if isinstance(v, str) else v for v in row)

        cols = [r[1] for r in db.execute("PRAGMA table_info(session)")]
        num_at = cols.index("num")
        old_num = session[num_at]
        side = db.execute(  # last_message, warnings, approval_rules beside the row (m013)
            "SELECT key & 3, value FROM session_text WHERE key >= ? AND key < ?",
            (old_num << 2, (old_num + 1) << 2),
        ).fetchall()
        texts = [(seq, ts, typ, payload_text(p)) for _sid, seq, ts, typ, p in events]
        db.execute("BEGIN IMMEDIATE")
        for new in ids:
            (num,) = db.execute("SELECT COALESCE(MAX(num), 0) + 1 FROM session").fetchone()
            row = list(sub(session, new))
            row[num_at] = num
            db.execute(f"INSERT INTO session VALUES ({','.join('?' * len(row))})", row)
            db.executemany("INSERT INTO session_text VALUES (?, ?)", [(num << 2 | f, v) for f, v in side])
            db.executemany(  # event_log (m007): key = num << 32 | seq, payload stored compressed
                "INSERT INTO event_log (key, ts, type, payload) VALUES (?, ?, ?, ?)",
                [
                    ((num << 32) | seq, ts, typ, encode_payload(p.replace(session_id, new)))
                    for seq, ts, typ, p in texts
                ],
            )
            _insert_steps(db, new, [sub(r, new) for r in steps])
            _insert_calls(db, new, [sub(r, new) for r in calls])
        db.execute("COMMIT")
    finally:
        db.close()
    return ids
