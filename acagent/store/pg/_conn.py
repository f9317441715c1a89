"""Connecting to the PostgreSQL journal: URL redaction, error translation, retry on a lost connection.

asyncpg errors stay in this package: :func:`pg_errors` turns them into
:class:`~acagent.errors.JournalError` whose message names the URL without its password. Writes
are retried by their callers only where a retry is safe (see ``PostgresJournal.commit``: a commit
carries a commit id so a retry after an unknown outcome finds the commit that did land).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

from acagent.errors import AcagentError, JournalError

__all__ = [
    "NOTIFY_SQL",
    "TRANSIENT",
    "TRANSIENT_OR_TIMEOUT",
    "describe",
    "is_pg_url",
    "no_reset",
    "pg_errors",
    "redact_url",
    "session_settings",
]


def is_pg_url(url: str | None) -> bool:
    """True for ``postgresql://`` / ``postgres://`` URLs."""
    return bool(url) and str(url).split("://", 1)[0] in ("postgresql", "postgres")


def redact_url(url: str) -> str:
    """``postgresql://user:secret@host:5432/db?x`` → ``postgresql://user@host:5432/db`` (no password, no query)."""
    try:
        parts = urlsplit(url)
        netloc = parts.hostname or ""
        if ":" in netloc:
            netloc = f"[{netloc}]"
        if parts.port:
            netloc += f":{parts.port}"
        if parts.username:
            netloc = f"{parts.username}@{netloc}"
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    except ValueError:
        return "postgresql://(unparseable URL)"


def _transient() -> tuple[type[BaseException], ...]:
    import asyncpg

    return (
        OSError,
        ConnectionError,
        asyncpg.ConnectionDoesNotExistError,
        asyncpg.InterfaceError,
        asyncpg.CannotConnectNowError,
        asyncpg.AdminShutdownError,
        asyncpg.CrashShutdownError,
        asyncpg.ConnectionFailureError,
        asyncpg.TooManyConnectionsError,
    )


TRANSIENT: tuple[type[BaseException], ...] = _transient()
"""Errors after which the server may be back shortly (restart, terminated backend, network)."""
TRANSIENT_OR_TIMEOUT: tuple[type[BaseException], ...] = (TimeoutError, *TRANSIENT)


def session_settings(daemon_id: str, busy_timeout_ms: int, role: str = "") -> dict[str, str]:
    """Server settings of every connection of a daemon (pool, liveness, listener).

    - ``application_name`` ``acagent:<id>[:role]``: operators (and the fault tests) find a
      daemon's backends by it;
    - ``lock_timeout`` = the busy timeout (the client bounds each call: ``PostgresJournal._retry``);
    - ``idle_in_transaction_session_timeout``: a client that vanished mid-transaction (blackholed
      network, frozen host) has its backend ended, so its row locks (``FOR UPDATE`` in a commit)
      never hold a session away from the claim scan (``SKIP LOCKED`` would skip it forever);
    - ``tcp_keepalives_*``: the server probes an idle client after 5 s, every 2 s, 3 times: a
      lost host's connections (and its advisory liveness lock) are dropped in ≈11 s, not after
      the kernel default of two hours.
    """
    return {
        "application_name": f"acagent:{daemon_id}{':' + role if role else ''}"[:63],
        "lock_timeout": str(int(busy_timeout_ms)),
        "idle_in_transaction_session_timeout": "5000",
        "tcp_keepalives_idle": "5",
        "tcp_keepalives_interval": "2",
        "tcp_keepalives_count": "3",
    }


NOTIFY_SQL = "SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, $2)"
"""A hint in one statement whose commit does not wait for the WAL flush: ``NOTIFY`` gives its
transaction an xid, so with ``synchronous_commit`` on each hint would cost an fsync — for a
message that is only ever a hint (the journal is the truth, a lost one is covered by the poll)."""


async def no_reset(conn: object) -> None:
    """The pool's reset on release: nothing beyond asyncpg's own rollback of a stray transaction.

    asyncpg's default reset runs ``pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL``
    — one more round trip per journal call. Pool connections never hold session state (the
    advisory liveness lock and LISTEN have their own connections; nothing issues a session
    ``SET``), so there is nothing to reset.
    """


def describe(exc: BaseException) -> str:
    """``str(exc)``, or the class name when the message is empty."""
    return str(exc) or type(exc).__name__


@contextlib.contextmanager
def pg_errors(where: str, what: str = "journal error") -> Iterator[None]:
    """Translate asyncpg / socket errors into :class:`JournalError` naming ``where`` (a redacted URL)."""
    import asyncpg

    try:
        yield
    except AcagentError:
        raise
    except asyncpg.InvalidPasswordError as exc:
        raise JournalError(
            f"PostgreSQL refused the credentials for the journal at {where}: {exc}; check the user and password"
        ) from exc
    except asyncpg.InvalidCatalogNameError as exc:
        raise JournalError(f"the journal database at {where} does not exist: {exc}; create it first") from exc
    except asyncpg.UndefinedTableError as exc:
        raise JournalError(
            f"the journal at {where} is missing a table ({exc}); restore the database from a backup"
        ) from exc
    except TRANSIENT_OR_TIMEOUT as exc:
        raise JournalError(
            f"cannot reach the PostgreSQL journal at {where}: {describe(exc)}; is the server up?"
        ) from exc
    except asyncpg.PostgresError as exc:
        raise JournalError(f"{what} on {where}: {exc}") from exc
