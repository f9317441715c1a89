"""A journal file as an older acagent left it: the migrations up to a named one, nothing after."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from acagent.store import _migrations as migrations
from acagent.store._sqlite import PAGE_SIZE


def journal_upto(path: Path, last: str, ts: str) -> sqlite3.Connection:
    """A new journal at ``path`` with the migrations up to and including ``last`` applied (each
    recorded at ``ts``), in autocommit mode; the caller adds its rows and closes it."""
    names = [fn.__name__ for fn in migrations.MIGRATIONS]
    upto = names.index(last) + 1
    db = sqlite3.connect(path, isolation_level=None)
    db.execute(f"PRAGMA page_size = {PAGE_SIZE}")
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    for fn in migrations.MIGRATIONS[:upto]:
        db.execute("BEGIN")
        fn(db)
        db.execute("INSERT INTO migrations VALUES (?, ?)", (fn.__name__, ts))
        db.execute("COMMIT")
    return db
