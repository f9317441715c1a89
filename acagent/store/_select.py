"""Which journal a command opens: SQLite in ``$ACAGENT_HOME`` by default, PostgreSQL for a ``postgresql://`` URL.

The URL comes from :attr:`Settings.journal <acagent.settings.Settings.journal>` (``--journal``,
``ACAGENT_JOURNAL_URL``, config key ``journal``), so ``chat``, ``run``, ``sessions`` and ``serve``
on one machine all use the same store (CLI ≡ serve).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from acagent._pids import pid_alive, runs_acagent
from acagent.errors import ConfigError, JournalError

if TYPE_CHECKING:
    from acagent.settings import Settings
    from acagent.store._protocol import Journal

__all__ = ["open_journal", "refuse_upgrade_under_older_daemon"]


async def open_journal(settings: Settings, *, daemon_id: str | None = None) -> Journal:
    """Open the journal ``settings`` name.

    Args:
        settings: resolved settings (``journal``, ``db_path``, ``durability``, timing).
        daemon_id: the cluster id for a PostgreSQL journal (default ``settings.daemon_id``,
            else ``host:pid``); ignored for SQLite.

    Returns:
        A :class:`~acagent.store.SqliteJournal` or :class:`~acagent.store.pg.PostgresJournal`.

    Raises:
        ConfigError: ``journal`` is neither unset nor a ``postgresql://`` URL.
        JournalError: the journal cannot be opened (the message names the URL, never the password).
    """
    url = settings.journal
    if url:
        try:
            from acagent.store.pg import is_pg_url, redact_url
        except ModuleNotFoundError as exc:
            if exc.name != "asyncpg":
                raise
            from acagent._url import redact_url as without_secrets

            raise ConfigError(
                f"journal {without_secrets(url)!r} needs the PostgreSQL driver: pip install 'acagent[pg]'"
                " (or unset it to use SQLite in ACAGENT_HOME)"
            ) from exc

        if not is_pg_url(url):
            raise ConfigError(
                f"journal {redact_url(url)!r} is not a postgresql:// URL; unset it to use SQLite in ACAGENT_HOME"
            )
        from acagent.store.pg import PostgresJournal

        return await PostgresJournal.open(
            url,
            daemon_id=daemon_id or settings.daemon_id,
            busy_timeout_ms=settings.timing.busy_timeout_ms,
        )
    from acagent.store import SqliteJournal

    refuse_upgrade_under_older_daemon(settings.home, settings.db_path)
    return await SqliteJournal.open(
        settings.db_path, durability=settings.durability, busy_timeout_ms=settings.timing.busy_timeout_ms
    )


def refuse_upgrade_under_older_daemon(home: Path, db_path: Path) -> None:
    """Refuse to migrate the SQLite journal under a live daemon of an older acagent.

    Opening the journal applies pending migrations; an older daemon still serving the file
    cannot write after that (m007 made ``event`` a view: every commit failed with "cannot modify
    event because it is a view", 503 to every message). A journal needing no migration, or no
    other live acagent in ``daemon.json``, passes.

    Raises:
        JournalError: a live daemon (not this process) serves ``home`` and ``db_path`` has
            migrations pending (names the pid and the migrations).
    """
    try:
        pid = int(json.loads((Path(home) / "daemon.json").read_text())["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return
    if pid == os.getpid() or not pid_alive(pid) or not runs_acagent(pid) or not Path(db_path).exists():
        return
    from acagent.store._migrations import MIGRATIONS

    try:
        with contextlib.closing(sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)) as db:
            done = {row[0] for row in db.execute("SELECT name FROM migrations")}
    except sqlite3.Error:
        return  # not a journal acagent wrote yet: opening it says what is wrong
    missing = [fn.__name__ for fn in MIGRATIONS if fn.__name__ not in done]
    if missing:
        raise JournalError(
            f"the daemon serving {str(home)!r} (pid {pid}) is an older acagent: this one would upgrade "
            f"the journal ({', '.join(missing)}) and that daemon could not write after it; stop it "
            "(`acagent serve --stop`), then run this again"
        )
