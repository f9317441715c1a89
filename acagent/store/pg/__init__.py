"""The PostgreSQL journal and cluster membership (several daemons sharing sessions).

Install with the ``pg`` extra (asyncpg). See docs/scale-out.md.
"""

from __future__ import annotations

from acagent.store.pg._conn import is_pg_url, redact_url
from acagent.store.pg._inbox import INBOX_CHANNEL
from acagent.store.pg._journal import EVENTS_CHANNEL, PostgresJournal

__all__ = ["EVENTS_CHANNEL", "INBOX_CHANNEL", "PostgresJournal", "is_pg_url", "redact_url"]
