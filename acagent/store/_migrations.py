"""Schema migrations: named functions, applied once, recorded in ``migrations``, never edited.

Every column is commented. ``event`` is append-only; the mutable rows (``session``, ``step``,
``tool_call``) change only through the guarded ops of :mod:`acagent.store._ops` (applied in :mod:`acagent.store._sqlite_ops`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime

from acagent.errors import JournalError
from acagent.store._migrations_later import LATER
from acagent.store._sqlite_lease import live_lease_holder

__all__ = ["MIGRATIONS", "migrate"]


def m001_initial(db: sqlite3.Connection) -> None:
    """Sessions, events, LLM steps and tool calls."""
    _execute_script(
        db,
        """
        CREATE TABLE session (
            id               TEXT PRIMARY KEY,      -- ses_<hex>
            cwd              TEXT NOT NULL,         -- absolute canonical workspace root
            title            TEXT,                  -- user title or first message (truncated)
            model            TEXT,                  -- PROVIDER:MODEL of the session
            status           TEXT NOT NULL,         -- pending|running|waiting_tool|waiting_user|done|cancelled|failed
            created_at       TEXT NOT NULL,         -- RFC 3339 UTC
            updated_at       TEXT NOT NULL,         -- RFC 3339 UTC, last event commit
            last_seq         INTEGER NOT NULL DEFAULT 0,  -- highest committed event seq
            turn_id          TEXT,                  -- the current (or last) turn
            lease_owner      TEXT,                  -- worker id holding the lease (NULL = free)
            lease_host       TEXT,                  -- hostname of the lease holder
            lease_pid        INTEGER,               -- pid of the lease holder
            lease_expires_at REAL,                  -- unix seconds
            fencing_token    INTEGER NOT NULL DEFAULT 0,  -- bumped on every lease acquisition
            cancel_requested INTEGER NOT NULL DEFAULT 0,  -- 1 = cancel asked (any process may set it)
            input_tokens     INTEGER NOT NULL DEFAULT 0,  -- session total, tokens
            output_tokens    INTEGER NOT NULL DEFAULT 0,  -- session total, tokens
            llm_calls        INTEGER NOT NULL DEFAULT 0,  -- LLM requests made (all attempts)
            llm_retries      INTEGER NOT NULL DEFAULT 0,  -- attempts beyond the first
            approval_rules   TEXT NOT NULL DEFAULT '{}',  -- JSON: what `always` answers remembered
            last_message     TEXT,                  -- text of the latest user/assistant message
            checkpoint_seq   INTEGER NOT NULL DEFAULT 0,  -- seq of the latest checkpoint event
            checkpoint_bytes INTEGER NOT NULL DEFAULT 0,  -- its payload size, bytes
            tail_bytes       INTEGER NOT NULL DEFAULT 0,  -- context bytes committed since it
            warnings         TEXT                   -- JSON list of warnings (e.g. transcript repair)
        );
        CREATE INDEX session_cwd ON session (cwd, updated_at);
        CREATE TABLE event (
            session_id TEXT NOT NULL,               -- session.id
            seq        INTEGER NOT NULL,            -- per-session, strictly increasing from 1
            ts         TEXT NOT NULL,               -- commit time, RFC 3339 UTC
            type       TEXT NOT NULL,               -- dotted event type
            payload    TEXT NOT NULL,               -- JSON payload
            PRIMARY KEY (session_id, seq)
        ) WITHOUT ROWID;
        CREATE TABLE step (
            session_id  TEXT NOT NULL,              -- session.id
            request_id  TEXT NOT NULL,              -- session|context seq|context digest|attempt
            step_id     TEXT NOT NULL,              -- session|context seq|digest (same for every attempt)
            turn_id     TEXT NOT NULL,
            digest      TEXT NOT NULL,              -- sha256 of system prompt + messages
            attempt     INTEGER NOT NULL,           -- 1-based
            status      TEXT NOT NULL,              -- inflight|done|failed
            error       TEXT,                       -- why it failed
            started_at  TEXT NOT NULL,
            finished_at TEXT,
            PRIMARY KEY (session_id, request_id)
        );
        CREATE INDEX step_by_digest ON step (session_id, step_id, attempt);
        CREATE TABLE tool_call (
            session_id     TEXT NOT NULL,           -- session.id
            tool_call_id   TEXT NOT NULL,           -- provider id (unique per session)
            turn_id        TEXT NOT NULL,
            step_id        TEXT NOT NULL,           -- the step that asked for it
            idx            INTEGER NOT NULL,        -- position in the assistant message
            name           TEXT NOT NULL,           -- tool name
            arguments      TEXT NOT NULL,           -- JSON arguments
            arguments_error TEXT,                   -- why the streamed arguments were unusable
            status         TEXT NOT NULL,           -- dispatched|waiting_user|running|done|failed
            approval       TEXT NOT NULL,           -- none|pending|allow|deny|always|timeout|cancelled
            approval_note  TEXT,                    -- who/why the approval was resolved
            runner         TEXT,                    -- worker id running it
            pid            INTEGER,                 -- process group of a shell tool
            run_expires_at REAL,                    -- unix seconds; run lease
            idempotent     INTEGER NOT NULL,        -- 1 = safe to re-run after a crash
            result_status  TEXT,                    -- ok|error|interrupted|denied
            PRIMARY KEY (session_id, tool_call_id)
        );
        """,
    )


def _execute_script(db: sqlite3.Connection, script: str) -> None:
    """Run ``;``-separated statements inside the caller's transaction.

    (``sqlite3.Connection.executescript`` would COMMIT first, breaking the migration's
    transaction.)
    """
    buf = ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            db.execute(buf)
            buf = ""
    if buf.strip():
        raise ValueError(f"incomplete SQL statement in migration: {buf[:80]!r}")


def m002_transcript_stat(db: sqlite3.Connection) -> None:
    """Remember the transcript file as its writer last closed it, so reopening can skip a full scan."""
    # transcript_stat: JSON {ino, size, mtime_ns, last_seq} of the transcript when its writer
    # closed it (SQLite cannot keep a comment on an added column).
    db.execute("ALTER TABLE session ADD COLUMN transcript_stat TEXT")


def m003_usage(db: sqlite3.Connection) -> None:
    """Per-call usage rows and per-session caps (defined in :mod:`acagent.store._usage`)."""
    from acagent.store._usage import m003_usage as create

    create(db)


def m004_archived(db: sqlite3.Connection) -> None:
    """``session.archived_at``: when the session was archived (NULL: not archived)."""
    db.execute("ALTER TABLE session ADD COLUMN archived_at TEXT")


def m005_fewer_index_writes(db: sqlite3.Connection) -> None:
    """Drop the index entries every commit rewrote (benchmarks figure 3, bytes per turn).

    ``session_cwd`` indexed ``(cwd, updated_at)``: every commit moves ``updated_at``, so every
    commit deleted and re-inserted an index entry (a WAL page per commit); listings of one cwd
    sort its few rows instead. ``step_by_digest`` duplicated the primary key: ``request_id`` is
    ``step_id|attempt``, so a step's attempts are a range of the key (``_sqlite_read.step_attempts``).
    """
    db.execute("DROP INDEX IF EXISTS session_cwd")
    db.execute("CREATE INDEX session_by_cwd ON session (cwd)")
    db.execute("DROP INDEX IF EXISTS step_by_digest")


def m006_tool_call_host(db: sqlite3.Connection) -> None:
    """Which host and acagent process ran each tool call (``tool_call.host``, ``runner_pid``)."""
    db.execute("ALTER TABLE tool_call ADD COLUMN host TEXT")
    db.execute("ALTER TABLE tool_call ADD COLUMN runner_pid INTEGER")


def m007_compact_journal(db: sqlite3.Connection) -> None:
    """One b-tree per table, compressed payloads (benchmarks figure 3, bytes per turn).

    - ``session.num``: a small per-session number (unique, never reused while the row exists);
      ``event_log.key = num << 32 | seq``, so a session's events are one range of an INTEGER
      PRIMARY KEY, appended at its right edge — no second b-tree (the ``(session_id, seq)`` key of
      the old ``event`` table was one more page per commit) and no session id in every row.
    - ``event_log.payload``: TEXT (JSON, rows copied from before) or a compressed BLOB
      (:mod:`acagent.store._payload`); every reader decodes both.
    - ``event``: a read-only view with the old columns, for people reading the file with sqlite3
      (``payload`` is the stored value: JSON text, or a compressed BLOB since m007).
    - Measured and not done: ``WITHOUT ROWID`` on the event key wrote more pages (a full leaf of
      an index b-tree is rebalanced across three siblings; an INTEGER PRIMARY KEY appended at
      its right edge just starts a new leaf), and so did ``step`` / ``tool_call`` / ``usage``
      rebuilt ``WITHOUT ROWID`` on their text keys (65 WAL frames per benchmark turn against 62).
    """
    db.execute("ALTER TABLE session ADD COLUMN num INTEGER")
    db.execute("UPDATE session SET num = rowid")
    db.execute("CREATE UNIQUE INDEX session_num ON session (num)")
    db.execute(
        "CREATE TABLE event_log (key INTEGER PRIMARY KEY, ts TEXT NOT NULL, type TEXT NOT NULL, payload NOT NULL)"
    )
    db.execute(
        "INSERT INTO event_log (key, ts, type, payload) SELECT (s.num << 32) | e.seq, e.ts, e.type, e.payload"
        " FROM event e JOIN session s ON s.id = e.session_id ORDER BY 1"
    )
    db.execute("DROP TABLE event")
    db.execute(
        "CREATE VIEW event (session_id, seq, ts, type, payload) AS SELECT s.id, e.key & 4294967295,"
        " e.ts, e.type, e.payload FROM event_log e JOIN session s ON s.num = e.key >> 32"
    )


def m008_usage_by_session(db: sqlite3.Connection) -> None:
    """``usage`` keyed by ``session.num << 32 | n``: one b-tree, no ``(session_id, request_id)`` index.

    The primary-key index was one more b-tree written per LLM call, with ~100-byte text keys
    that split a 512-byte page every few inserts (benchmarks figure 3: ~8 WAL frames per turn).
    A session's rows are now one key range (what the per-session caps read); ``usage_day``
    stays for the daily cap. A request id is recorded once by construction: ``RecordUsage``
    rides in the commit of the step's ``FinishStep``, which fails unless the step is inflight.
    Rows of removed sessions (kept: caps count what was spent) get ``num`` 0.
    """
    cols = [r[1] for r in db.execute("PRAGMA table_info(usage)")]
    names = ", ".join(cols)
    db.execute(
        """CREATE TABLE usage_m008 (
            key INTEGER PRIMARY KEY,  -- session.num << 32 | n (n = 1, 2, … per session)
            session_id TEXT NOT NULL,
            request_id TEXT NOT NULL,
            ts TEXT NOT NULL,
            day TEXT NOT NULL,
            model TEXT NOT NULL,
            input_tokens INTEGER NOT NULL,
            cached_input_tokens INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL,
            reasoning_tokens INTEGER NOT NULL DEFAULT 0,
            cost_usd REAL
        )"""
    )
    db.execute(
        f"INSERT INTO usage_m008 (key, {names}) SELECT (COALESCE(s.num, 0) << 32)"
        " | ROW_NUMBER() OVER (PARTITION BY COALESCE(s.num, 0) ORDER BY u.rowid),"
        f" {', '.join('u.' + c for c in cols)} FROM usage u LEFT JOIN session s ON s.id = u.session_id"
    )
    db.execute("DROP TABLE usage")
    db.execute("ALTER TABLE usage_m008 RENAME TO usage")
    db.execute("CREATE INDEX usage_day ON usage (day)")


def m009_step_by_session(db: sqlite3.Connection) -> None:
    """``step`` keyed by ``session.num << 32 | n``, its request id unique through a compact index.

    The ``(session_id, request_id)`` primary-key index held ~100-byte text keys that split a
    512-byte page every few inserts (~9 WAL frames per benchmark turn, figure 3). Now a session's
    steps are one key range, appended at its end, and ``rid`` — 64 bits of a hash of
    ``(session_id, request_id)``, :func:`acagent.store._sqlite_ops.step_rid` — carries the
    uniqueness (a duplicate request id still fails the commit) in 8-byte index entries. Two
    different ids colliding on 64 bits (about one in 10^8 across a million steps) would fail
    that insert as a duplicate.
    """
    from acagent.store._sqlite_ops import step_rid

    db.create_function("acagent_step_rid", 2, step_rid, deterministic=True)
    cols = [r[1] for r in db.execute("PRAGMA table_info(step)")]
    db.execute(
        """CREATE TABLE step_m009 (
            key         INTEGER PRIMARY KEY,        -- session.num << 32 | n (n = 1, 2, … per session)
            rid         INTEGER NOT NULL,           -- step_rid(session_id, request_id)
            session_id  TEXT NOT NULL,
            request_id  TEXT NOT NULL,
            step_id     TEXT NOT NULL,
            turn_id     TEXT NOT NULL,
            digest      TEXT NOT NULL,
            attempt     INTEGER NOT NULL,
            status      TEXT NOT NULL,
            error       TEXT,
            started_at  TEXT NOT NULL,
            finished_at TEXT
        )"""
    )
    db.execute(
        f"INSERT INTO step_m009 (key, rid, {', '.join(cols)}) SELECT (s.num << 32)"
        " | ROW_NUMBER() OVER (PARTITION BY s.num ORDER BY t.rowid), acagent_step_rid(t.session_id, t.request_id),"
        f" {', '.join('t.' + c for c in cols)} FROM step t JOIN session s ON s.id = t.session_id"
    )
    db.execute("DROP TABLE step")
    db.execute("ALTER TABLE step_m009 RENAME TO step")
    db.execute("CREATE UNIQUE INDEX step_rid ON step (rid)")


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [
    m001_initial,
    m002_transcript_stat,
    m003_usage,
    m004_archived,
    m005_fewer_index_writes,
    m006_tool_call_host,
    m007_compact_journal,
    m008_usage_by_session,
    m009_step_by_session,
    *LATER,  # m010 onwards (store/_migrations_later.py)
]


def migrate(db: sqlite3.Connection) -> list[str]:
    """Apply pending migrations in order, each in its own transaction.

    Returns:
        Names of the migrations applied now.

    Raises:
        JournalError: the journal records a migration this code does not know (a newer acagent
            changed its layout: reading it as the current one would fail on the first changed row),
            or a migration is pending while a live older acagent runs a turn (F130).
    """
    db.execute("CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    db.execute("BEGIN")  # the migrations and the leases in one snapshot
    try:
        done = {row[0] for row in db.execute("SELECT name FROM migrations")}
        pending = [fn.__name__ for fn in MIGRATIONS if fn.__name__ not in done]
        holder = live_lease_holder(db) if pending and "m001_initial" in done else None
    finally:
        db.execute("COMMIT")
    path = db.execute("PRAGMA database_list").fetchone()[2]
    unknown = sorted(done - {fn.__name__ for fn in MIGRATIONS})
    if unknown:
        raise JournalError(
            f"{path!r} was upgraded by a newer acagent (migration {', '.join(unknown)}, unknown to "
            "this one): run that newer acagent, or open another ACAGENT_HOME"
        )
    if holder is not None:
        raise JournalError(
            f"an older acagent (pid {holder[1]}) is running a turn of session {holder[0]} in {path!r}: "
            f"this one would upgrade the journal ({', '.join(pending)}) and that turn could not be "
            "recorded after it; let it finish (or stop it), then run this again"
        )
    applied = []
    for fn in MIGRATIONS:
        if fn.__name__ in done:
            continue
        db.execute("BEGIN IMMEDIATE")
        try:
            # Re-check under the write lock: another process may have migrated meanwhile.
            if db.execute("SELECT 1 FROM migrations WHERE name = ?", (fn.__name__,)).fetchone():
                db.execute("COMMIT")
                continue
            fn(db)
            db.execute(
                "INSERT INTO migrations (name, applied_at) VALUES (?, ?)",
                (fn.__name__, datetime.now(UTC).isoformat()),
            )
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:  # SQLite already rolled back on SQLITE_FULL/IOERR; keep that error
                db.execute("ROLLBACK")
            raise
        applied.append(fn.__name__)
    return applied
