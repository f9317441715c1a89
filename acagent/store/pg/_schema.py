"""PostgreSQL schema migrations: named, versioned, applied once, never edited once released.

Each migration is ``(name, sql)``; its version is its 1-based position in :data:`PG_MIGRATIONS`.
:func:`migrate_pg` applies the missing ones in one transaction under a transaction-scoped advisory
lock (several daemons starting at once migrate once), and refuses a database whose recorded
migrations include one this acagent does not know (a newer schema): a daemon never writes rows
it does not understand. :func:`check_tables` then proves every table is still there (a dropped
table is one clear error at start-up, not a failure on the first turn).

Columns mirror the SQLite schema (:mod:`acagent.store._migrations`) so rows map to the same
dataclasses; the differences are the cluster's: ``session.lease_daemon`` (the daemon whose worker
holds the lease), lease expiry in database-clock epoch seconds, the ``daemon`` and ``inbox``
tables, and ``tool_call.rowid`` (insertion order, which SQLite gives every row for free).
"""

from __future__ import annotations

from typing import Any

from acagent.errors import JournalError

__all__ = ["ADVISORY_CLASS", "PG_MIGRATIONS", "REQUIRED_TABLES", "check_tables", "migrate_pg"]

ADVISORY_CLASS = 0x61636167  # "acag": the first key of every acagent advisory lock
"""Advisory locks use the two-key form ``(ADVISORY_CLASS, key)``: daemon liveness locks use
``key = hashtext(daemon_id) & 0x7fffffff``; key 0 serialises migrations."""

M001 = """
CREATE TABLE session (
    id               TEXT PRIMARY KEY,
    cwd              TEXT NOT NULL,
    title            TEXT,
    model            TEXT,
    status           TEXT NOT NULL,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    last_seq         BIGINT NOT NULL DEFAULT 0,
    turn_id          TEXT,
    lease_owner      TEXT,
    lease_host       TEXT,
    lease_pid        INTEGER,
    lease_expires_at DOUBLE PRECISION,
    fencing_token    BIGINT NOT NULL DEFAULT 0,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    input_tokens     BIGINT NOT NULL DEFAULT 0,
    output_tokens    BIGINT NOT NULL DEFAULT 0,
    llm_calls        INTEGER NOT NULL DEFAULT 0,
    llm_retries      INTEGER NOT NULL DEFAULT 0,
    approval_rules   TEXT NOT NULL DEFAULT '{}',
    last_message     TEXT,
    checkpoint_seq   BIGINT NOT NULL DEFAULT 0,
    checkpoint_bytes BIGINT NOT NULL DEFAULT 0,
    tail_bytes       BIGINT NOT NULL DEFAULT 0,
    warnings         TEXT,
    transcript_stat  TEXT,
    lease_daemon     TEXT,
    limits           TEXT
);
COMMENT ON COLUMN session.limits IS 'JSON of the session''s own caps, NULL = config defaults';
COMMENT ON COLUMN session.lease_owner IS 'worker id holding the lease (NULL = free; claim:<daemon> = claimed, runner starting)';
COMMENT ON COLUMN session.lease_expires_at IS 'database-clock epoch seconds (extract(epoch from clock_timestamp()) + ttl)';
COMMENT ON COLUMN session.fencing_token IS 'lease epoch: bumped on every acquisition; every fenced write names it';
COMMENT ON COLUMN session.lease_daemon IS 'daemon id of the lease holder; its liveness is its advisory lock';
COMMENT ON COLUMN session.status IS 'pending|running|waiting_tool|waiting_user|done|cancelled|failed';
CREATE INDEX session_cwd ON session (cwd, updated_at);
CREATE INDEX session_active ON session (status) WHERE status IN ('running', 'waiting_tool', 'waiting_user');
CREATE TABLE event (
    session_id TEXT NOT NULL,
    seq        BIGINT NOT NULL,
    ts         TEXT NOT NULL,
    type       TEXT NOT NULL,
    payload    TEXT NOT NULL,
    commit_id  TEXT,
    PRIMARY KEY (session_id, seq)
);
COMMENT ON COLUMN event.commit_id IS 'on the first event of each commit: lets a retry after a lost connection find a commit that did land';
CREATE INDEX event_commit ON event (session_id, commit_id) WHERE commit_id IS NOT NULL;
COMMENT ON TABLE event IS 'append-only; seq per session strictly increasing from 1, never reused';
CREATE TABLE step (
    session_id  TEXT NOT NULL,
    request_id  TEXT NOT NULL,
    step_id     TEXT NOT NULL,
    turn_id     TEXT NOT NULL,
    digest      TEXT NOT NULL,
    attempt     INTEGER NOT NULL,
    status      TEXT NOT NULL,
    error       TEXT,
    started_at  TEXT NOT NULL,
    finished_at TEXT,
    PRIMARY KEY (session_id, request_id)
);
CREATE INDEX step_by_digest ON step (session_id, step_id, attempt);
CREATE TABLE tool_call (
    rowid          BIGINT GENERATED ALWAYS AS IDENTITY,
    session_id     TEXT NOT NULL,
    tool_call_id   TEXT NOT NULL,
    turn_id        TEXT NOT NULL,
    step_id        TEXT NOT NULL,
    idx            INTEGER NOT NULL,
    name           TEXT NOT NULL,
    arguments      TEXT NOT NULL,
    arguments_error TEXT,
    status         TEXT NOT NULL,
    approval       TEXT NOT NULL,
    approval_note  TEXT,
    runner         TEXT,
    pid            INTEGER,
    run_expires_at DOUBLE PRECISION,
    idempotent     INTEGER NOT NULL,
    result_status  TEXT,
    PRIMARY KEY (session_id, tool_call_id)
);
CREATE TABLE usage (
    session_id          TEXT NOT NULL,
    request_id          TEXT NOT NULL,
    ts                  TEXT NOT NULL,
    day                 TEXT NOT NULL,
    model               TEXT NOT NULL,
    input_tokens        BIGINT NOT NULL,
    cached_input_tokens BIGINT NOT NULL DEFAULT 0,
    output_tokens       BIGINT NOT NULL,
    reasoning_tokens    BIGINT NOT NULL DEFAULT 0,
    cost_usd            DOUBLE PRECISION,
    PRIMARY KEY (session_id, request_id)
);
COMMENT ON TABLE usage IS 'one row per paid LLM attempt, committed with its usage event (see acagent/store/_usage.py)';
CREATE INDEX usage_day ON usage (day);
CREATE TABLE daemon (
    id           TEXT PRIMARY KEY,
    host         TEXT NOT NULL,
    pid          INTEGER NOT NULL,
    url          TEXT,
    started_at   DOUBLE PRECISION NOT NULL,
    heartbeat_at DOUBLE PRECISION NOT NULL
);
COMMENT ON TABLE daemon IS 'one row per daemon id; heartbeat_at is database-clock epoch seconds (informational: liveness is the advisory lock)';
CREATE TABLE inbox (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id      TEXT NOT NULL,
    kind            TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    body            TEXT NOT NULL,
    received_by     TEXT,
    created_at      DOUBLE PRECISION NOT NULL,
    UNIQUE (session_id, idempotency_key)
);
COMMENT ON TABLE inbox IS 'input posted to any daemon (message|approval|cancel), committed before the owner is hinted';
CREATE FUNCTION acagent_daemon_alive(daemon_id TEXT) RETURNS BOOLEAN LANGUAGE sql STABLE AS $$
    SELECT EXISTS (
        SELECT 1 FROM pg_locks
        WHERE locktype = 'advisory' AND granted AND objsubid = 2
          AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND classid = 1633902951::oid AND objid = (hashtext(daemon_id) & 2147483647)::oid)
$$;
"""

M002 = """
ALTER TABLE session ADD COLUMN archived_at TEXT;
"""
"""``session.archived_at``: when the session was archived (NULL: not archived); SQLite's ``m004_archived``."""

M003 = """
ALTER TABLE tool_call ADD COLUMN host TEXT, ADD COLUMN runner_pid INTEGER;
COMMENT ON COLUMN tool_call.host IS 'hostname of the daemon that ran the tool (recovery signals pid only there)';
COMMENT ON COLUMN tool_call.runner_pid IS 'pid of the acagent process that ran the tool';
"""
"""Which host and acagent process ran each tool call; SQLite's ``m006_tool_call_host``."""

M004 = """
ALTER TABLE inbox ADD COLUMN target TEXT, ADD COLUMN consumed_by TEXT,
    ADD COLUMN consumed_at DOUBLE PRECISION, ADD COLUMN outcome TEXT;
COMMENT ON COLUMN inbox.target IS 'daemon meant to apply the input (the session''s owner, or the receiver); NULL = any daemon with capacity';
COMMENT ON COLUMN inbox.consumed_by IS 'daemon that took the row (UPDATE ... WHERE consumed_at IS NULL: exactly one)';
COMMENT ON COLUMN inbox.outcome IS 'JSON {"ok": ...} or {"error": {code, message, detail}}: what the receiver answers';
CREATE INDEX inbox_open ON inbox (id) WHERE consumed_at IS NULL;
ALTER TABLE daemon ADD COLUMN max_sessions INTEGER NOT NULL DEFAULT 0;
COMMENT ON COLUMN daemon.max_sessions IS 'the daemon''s turn cap; the cluster''s capacity is the sum over live daemons';
"""

M005 = """
DROP INDEX session_cwd;
CREATE INDEX session_cwd ON session (cwd);
ALTER TABLE session SET (fillfactor = 70);
COMMENT ON INDEX session_cwd IS 'cwd only: updated_at (moved by every append) in no index keeps the append''s session update HOT (no index writes)';
"""
"""Every append updates its session row (``last_seq``, ``updated_at``, …). With ``updated_at`` in
an index each update wrote a new entry into every index of the table; without it, and with room
left on each page (fillfactor 70), the update is HOT: one heap record in the WAL instead of
three more index records — the append's commit flushes less."""

PG_MIGRATIONS: list[tuple[str, str]] = [
    ("m001_initial", M001),
    ("m002_archived", M002),
    ("m003_tool_call_host", M003),
    ("m004_inbox_delivery", M004),
    ("m005_session_hot_update", M005),
]
"""``(name, sql)`` in order; append only."""

REQUIRED_TABLES = ("session", "event", "step", "tool_call", "usage", "daemon", "inbox")


async def migrate_pg(conn: Any, where: str) -> list[str]:
    """Apply missing migrations (one transaction, serialised by an advisory lock).

    Args:
        conn: an asyncpg connection.
        where: the redacted URL, for messages.

    Returns:
        Names applied now.

    Raises:
        JournalError: the database records a migration this acagent does not know.
    """
    known = [name for name, _ in PG_MIGRATIONS]
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1, 0)", ADVISORY_CLASS)
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY,"
            " name TEXT NOT NULL UNIQUE, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        rows = await conn.fetch("SELECT version, name FROM schema_migrations ORDER BY version")
        unknown = [(r["version"], r["name"]) for r in rows if r["name"] not in known]
        if unknown:
            version, name = unknown[-1]
            raise JournalError(
                f"the journal at {where} has schema version {version} ({name}), newer than this acagent"
                f" knows ({len(known)}); upgrade acagent before pointing it at this database"
            )
        done = {r["name"] for r in rows}
        applied = []
        for version, (name, sql) in enumerate(PG_MIGRATIONS, start=1):
            if name in done:
                continue
            await conn.execute(sql)
            await conn.execute("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", version, name)
            applied.append(name)
    return applied


async def check_tables(conn: Any, where: str) -> None:
    """Raise :class:`JournalError` naming the first missing table (e.g. dropped by hand)."""
    for table in REQUIRED_TABLES:
        if await conn.fetchval("SELECT to_regclass($1)", table) is None:
            raise JournalError(
                f"the journal at {where} is missing table {table!r} although its migrations are recorded;"
                " restore the database from a backup (acagent will not recreate it over live data)"
            )
