"""Which journal a command opens: SQLite in ``$ACAGENT_HOME`` by default, PostgreSQL for a ``postgresql://`` URL.

The URL comes from :attr:`Settings.journal <acagent.settings.Settings.journal>` (``--journal``,
``ACAGENT_JOURNAL_URL``, config key ``journal``), so ``chat``, ``run``, ``sessions`` and ``serve``
on one machine all use the same store (CLI ≡ serve).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from acagent.errors import ConfigError

if TYPE_CHECKING:
    from acagent.settings import Settings
    from acagent.store._protocol import Journal

__all__ = ["open_journal"]


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
        from acagent.store.pg import is_pg_url, redact_url

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

    return await SqliteJournal.open(
        settings.db_path, durability=settings.durability, busy_timeout_ms=settings.timing.busy_timeout_ms
    )
