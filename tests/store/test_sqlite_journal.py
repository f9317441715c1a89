"""SqliteJournal specifics (the shared behaviour is in tests/store/conformance): schema, pragmas,
and the rule that nothing outside acagent/store runs SQL through the journal's private helpers."""

from __future__ import annotations

import ast
import sqlite3
from pathlib import Path

import pytest

from acagent.store import Journal, SqliteJournal
from acagent.store._migrations import MIGRATIONS
from acagent.store._sqlite import PAGE_SIZE

pytestmark = pytest.mark.anyio
ACAGENT = Path(__file__).resolve().parents[2] / "acagent"


async def test_migrate_empty_file_creates_tables_wal_and_small_pages(tmp_path: Path) -> None:
    """An empty file is migrated with WAL and small pages (PAGE_SIZE); the columns exist; re-open is a no-op."""
    j = await SqliteJournal.open(tmp_path / "a.db")
    assert isinstance(j, Journal)
    assert j.info() == {"backend": "sqlite", "path": str(tmp_path / "a.db"), "busy_timeout_ms": 10000}
    await j.aclose()
    await j.aclose()  # idempotent
    db = sqlite3.connect(tmp_path / "a.db")
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA page_size").fetchone()[0] == PAGE_SIZE
    names = [r[0] for r in db.execute("SELECT name FROM migrations")]
    assert names == [m.__name__ for m in MIGRATIONS]
    cols = {r[1] for r in db.execute("PRAGMA table_info(session)")}
    assert {
        "status",
        "lease_owner",
        "fencing_token",
        "cancel_requested",
        "last_seq",
        "transcript_stat",
    } <= cols
    assert {r[1] for r in db.execute("PRAGMA table_info(event_log)")} == {"key", "ts", "type", "payload"}
    assert not list(db.execute("PRAGMA table_info(event)"))  # the view went with m016 (frames)
    db.close()
    j = await SqliteJournal.open(tmp_path / "a.db")
    await j.aclose()


def _private_journal_uses(tree: ast.AST) -> list[int]:
    """Lines that reach a journal's private members: ``<…journal>._x`` (``journal._run``, ``._w``…)."""
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            target = node.value
            name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
            if "journal" in name.lower():
                bad.append(node.lineno)
    return bad


def test_nothing_outside_the_store_uses_private_journal_helpers() -> None:
    """The runner, registry, server and CLI use the Journal protocol only (no SQL through ``_run``)."""
    offenders = []
    for path in sorted(ACAGENT.rglob("*.py")):
        if path.is_relative_to(ACAGENT / "store"):
            continue
        for line in _private_journal_uses(ast.parse(path.read_text(), str(path))):
            offenders.append(f"{path.relative_to(ACAGENT.parent)}:{line}")
    assert offenders == []


def test_the_detector_sees_the_old_pattern() -> None:
    """The check above catches what the daemon did before (``state.journal._run(q, read=True)``)."""
    assert _private_journal_uses(ast.parse("x = await state.journal._run(q, read=True)")) == [1]
    assert _private_journal_uses(ast.parse("journal._w._execute(f)")) == [1]
    assert _private_journal_uses(ast.parse("journal.events(x)")) == []
