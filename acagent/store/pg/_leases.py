"""Leases, claims and daemon liveness on PostgreSQL — all on the database's clock.

The fencing rule: a session row carries ``lease_owner`` (a worker id), ``lease_daemon``,
``fencing_token`` (the lease epoch) and ``lease_expires_at`` =
``extract(epoch from clock_timestamp()) + ttl`` — computed by the server, never by a host. A lease
is free when it has no owner, has expired, is held by this daemon (a restarted daemon with the
same id — another process, as only one can hold the id — takes its sessions back at once), is a
claim made by this daemon, or is held by a dead
daemon. A daemon is alive while it holds its advisory lock ``(ADVISORY_CLASS, hashtext(id))`` on a
dedicated connection: a crashed process loses its connection, so the lock is free at once; a
frozen or cut-off host keeps it until its TCP connection dies, and is caught by lease expiry.

Taking a lease is one conditional ``UPDATE`` that bumps the token; renewing every lease of a
daemon is one ``UPDATE … FROM unnest(…)`` per tick (a session missing from its result is lost);
claiming orphans is one ``UPDATE … FROM (SELECT … FOR UPDATE SKIP LOCKED)`` so two daemons never
claim the same session. Every append checks the token in the same statement
(:meth:`PostgresJournal.commit`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from acagent.errors import JournalError, SessionBusy, SessionNotFound
from acagent.obs import metrics
from acagent.store import Lease, SessionRow
from acagent.store.pg._schema import ADVISORY_CLASS

if TYPE_CHECKING:
    from collections.abc import Awaitable

__all__ = ["LeaseMixin"]

_NOW = "extract(epoch from clock_timestamp())"
_LIVE = f"""(SELECT objid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2
    AND classid = {ADVISORY_CLASS}::oid AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))"""
"""The liveness locks held now — an uncorrelated subquery, so one ``pg_locks`` read per statement
(``acagent_daemon_alive`` per row would read it once per candidate session)."""
_FREE = f"""(lease_owner IS NULL OR lease_expires_at < {_NOW}
    OR (lease_daemon = $D AND (lease_pid IS DISTINCT FROM $P OR lease_host IS DISTINCT FROM $H))
    OR (lease_daemon IS NOT NULL AND (hashtext(lease_daemon) & 2147483647)::oid NOT IN {_LIVE}))"""
_ACTIVE = "('running', 'waiting_tool', 'waiting_user')"


def _taken(owner: str, row: Any) -> Lease:
    """The lease from ``acquire_lease``'s row ``(token, took_over)``; a takeover is counted."""
    if row[1]:
        metrics().lease_takeover()
    return Lease(owner=owner, token=row[0])


class LeaseMixin:
    """Lease, claim and liveness methods of :class:`~acagent.store.pg.PostgresJournal`."""

    daemon_id: str
    where: str
    host: str
    pid: int
    _liveness: Any
    _retry: Callable[..., Awaitable[Any]]
    _fetch: Callable[..., Awaitable[list[Any]]]
    get_session: Callable[[str], Awaitable[SessionRow]]

    async def _take_liveness(self, url: str, settings: dict[str, str]) -> None:
        """Open the dedicated liveness connection and take this daemon's advisory lock.

        Raises:
            JournalError: another live process holds the same daemon id.
        """
        import asyncpg

        conn = await asyncpg.connect(url, server_settings=settings, timeout=10, command_timeout=10)
        got = await conn.fetchval(
            "SELECT pg_try_advisory_lock($1, hashtext($2) & 2147483647)", ADVISORY_CLASS, self.daemon_id
        )
        if not got:
            await conn.close()
            raise JournalError(
                f"daemon id {self.daemon_id!r} is already live on the journal at {self.where};"
                " give this daemon another --daemon-id"
            )
        await conn.execute(
            f"INSERT INTO daemon (id, host, pid, started_at, heartbeat_at) VALUES ($1, $2, $3, {_NOW}, {_NOW})"
            " ON CONFLICT (id) DO UPDATE SET host = $2, pid = $3, started_at = EXCLUDED.started_at,"
            " heartbeat_at = EXCLUDED.heartbeat_at",
            self.daemon_id,
            self.host,
            self.pid,
        )
        self._liveness = conn
        self._liveness_url = url
        self._liveness_settings = settings

    async def heartbeat(self, url: str | None = None, *, timeout_s: float = 5.0) -> bool:
        """Beat on the liveness connection; reconnect (re-taking the lock) if it was lost.

        A beat unanswered within ``timeout_s`` (a blackholed network) drops the connection; the
        reconnect then fails or finds the lock still held by the old backend until the server
        ends it (keepalives, or the network coming back and resetting it).

        Returns:
            True if the lock is held now; False if another process took this id meanwhile (or,
            after a lost connection, the old backend still holds it).
        """
        conn = self._liveness
        if conn is not None and not conn.is_closed():
            try:
                await conn.execute(
                    f"UPDATE daemon SET heartbeat_at = {_NOW} WHERE id = $1",
                    self.daemon_id,
                    timeout=timeout_s,
                )
                return True
            except Exception:
                conn.terminate()
        self._liveness = None
        try:
            await self._take_liveness(self._liveness_url, self._liveness_settings)
        except JournalError:
            return False
        return True

    @property
    def live(self) -> bool:
        """True while the liveness connection (and so the advisory lock) is open."""
        return self._liveness is not None and not self._liveness.is_closed()

    @staticmethod
    def _sql(sql: str, daemon: int, pid: int, host: int) -> str:
        """Put the parameter numbers of this daemon's id, pid and host into ``_FREE``."""
        return sql.replace("$D", f"${daemon}").replace("$P", f"${pid}::int").replace("$H", f"${host}::text")

    async def acquire_lease(
        self,
        session_id: str,
        owner: str,
        *,
        ttl_s: float,
        pid: int | None = None,
        host: str | None = None,
        is_dead: Callable[[str | None, int | None], bool] | None = None,
    ) -> Lease:
        """Take the session's lease if it is free (see module docstring) — one conditional UPDATE.

        Raises:
            SessionBusy: a live holder has it (the message names its daemon and points to attach).
            SessionNotFound: no such session.
        """
        sql = self._sql(
            "UPDATE session SET lease_owner = $2, lease_host = $3, lease_pid = $4, lease_daemon = $8,"
            f" lease_expires_at = {_NOW} + $5, fencing_token = fencing_token + 1"
            f" WHERE id = $1 AND ($6::bigint IS NULL OR fencing_token = $6::bigint) AND ($7::bool OR lease_owner = $2"
            f" OR lease_owner = 'claim:' || $8 OR {_FREE}) RETURNING fencing_token,"
            # the statement's snapshot: the holder before this update (a takeover if it was another)
            " COALESCE((SELECT p.lease_owner FROM session p WHERE p.id = $1), '') NOT IN ('', $2, 'claim:' || $8)",
            8,
            9,
            10,
        )
        args = (session_id, owner, host or self.host, pid or self.pid, ttl_s)
        rows = await self._fetch(sql, *args, None, False, self.daemon_id, self.pid, self.host)
        if rows:
            return _taken(owner, rows[0])
        current = await self._fetch(
            "SELECT lease_owner, lease_host, lease_pid, lease_daemon, fencing_token FROM session WHERE id = $1",
            session_id,
        )
        if not current:
            raise SessionNotFound(f"no session {session_id!r}")
        _, cur_host, cur_pid, cur_daemon, token = current[0]
        if is_dead is not None and is_dead(cur_host, cur_pid):
            rows = await self._fetch(sql, *args, token, True, self.daemon_id, self.pid, self.host)
            if rows:
                return _taken(owner, rows[0])
        where = f"daemon {cur_daemon!r}" if cur_daemon else f"pid {cur_pid} on {cur_host}"
        raise SessionBusy(
            f"session {session_id} is open in {where}; use `acagent attach {session_id}`",
            detail={"holder_pid": cur_pid, "holder_host": cur_host, "holder_daemon": cur_daemon},
        )

    async def lease_session(
        self,
        session_id: str,
        owner: str,
        *,
        ttl_s: float,
        pid: int | None = None,
        host: str | None = None,
        is_dead: Callable[[str | None, int | None], bool] | None = None,
    ) -> tuple[Lease, SessionRow, dict[str, Any]]:
        """:meth:`acquire_lease`, then the session row and its own caps (three statements: no
        saving here yet)."""
        lease = await self.acquire_lease(session_id, owner, ttl_s=ttl_s, pid=pid, host=host, is_dead=is_dead)
        limits = await self.session_limits(session_id)  # type: ignore[attr-defined]  # UsageQueries
        return lease, await self.get_session(session_id), limits

    async def renew_lease(self, session_id: str, lease: Lease, *, ttl_s: float) -> tuple[bool, bool]:
        """Extend one lease by ``ttl_s`` seconds. Returns ``(still_held, cancel_requested)``."""
        return (await self.keep_leases([(session_id, lease)], ttl_s=ttl_s, renew=True))[session_id]

    async def keep_leases(
        self, leases: Sequence[tuple[str, Lease]], *, ttl_s: float, renew: bool
    ) -> dict[str, tuple[bool, bool]]:
        """Renew (``renew=True``) or check every lease of this process in one statement.

        Returns:
            ``{session_id: (still_held, cancel_requested)}``; a session missing from the
            statement's result is lost (``(False, False)``): its runner must stop at once.
        """
        budget = max(0.5, ttl_s / 2)  # an unanswered renewal must not outlive the lease it renews
        ids = [sid for sid, _ in leases]
        owners = [lease.owner for _, lease in leases]
        tokens = [lease.token for _, lease in leases]
        if renew:
            sql = (
                f"UPDATE session s SET lease_expires_at = {_NOW} + $4"
                " FROM unnest($1::text[], $2::text[], $3::bigint[]) AS l(id, owner, token)"
                " WHERE s.id = l.id AND s.lease_owner = l.owner AND s.fencing_token = l.token"
                " RETURNING s.id, s.cancel_requested"
            )
            rows = await self._fetch(sql, ids, owners, tokens, ttl_s, budget_s=budget)
        else:
            rows = await self._fetch(
                "SELECT s.id, s.cancel_requested FROM session s"
                " JOIN unnest($1::text[], $2::text[], $3::bigint[]) AS l(id, owner, token)"
                " ON s.id = l.id AND s.lease_owner = l.owner AND s.fencing_token = l.token",
                ids,
                owners,
                tokens,
                budget_s=budget,
            )
        held = {r[0]: bool(r[1]) for r in rows}
        return {sid: ((sid in held), held.get(sid, False)) for sid in ids}

    async def release_lease(self, session_id: str, lease: Lease) -> None:
        """Give the lease up (no-op if it was superseded)."""
        await self._retry(
            lambda c: c.execute(
                "UPDATE session SET lease_owner = NULL, lease_expires_at = NULL, lease_daemon = NULL"
                " WHERE id = $1 AND lease_owner = $2 AND fencing_token = $3",
                session_id,
                lease.owner,
                lease.token,
            )
        )

    async def claim_orphans(self, *, limit: int, ttl_s: float, exclude: Sequence[str] = ()) -> list[str]:
        """Claim up to ``limit`` active sessions whose lease is free (dead owner, expired, none).

        One statement: ``FOR UPDATE SKIP LOCKED`` over the runnable sessions, so concurrent
        daemons split them and never both claim one. The claim (owner ``claim:<daemon>``) bumps
        the token at once — the dead owner's late writes are fenced from here on — and lets only
        this daemon's runner take the lease within ``ttl_s``.

        Returns:
            The claimed session ids.
        """
        if limit <= 0:
            return []
        sql = self._sql(
            "UPDATE session s SET lease_owner = 'claim:' || $6, lease_daemon = $6, lease_host = $2,"
            f" lease_pid = $3, lease_expires_at = {_NOW} + $4, fencing_token = s.fencing_token + 1"
            f" FROM (SELECT id FROM session WHERE status IN {_ACTIVE} AND NOT (id = ANY($5::text[]))"
            f" AND {_FREE} ORDER BY updated_at LIMIT $1 FOR UPDATE SKIP LOCKED) c"
            " WHERE s.id = c.id RETURNING s.id",
            6,
            3,
            2,
        )
        rows = await self._fetch(sql, limit, self.host, self.pid, ttl_s, list(exclude), self.daemon_id)
        for _ in rows:  # each claim takes a dead or expired holder's lease over
            metrics().lease_takeover()
        return [r[0] for r in rows]

    async def daemons(self) -> list[dict[str, Any]]:
        """Every known daemon with ``alive`` (its advisory lock is held) and heartbeat age in seconds."""
        rows = await self._fetch(
            f"SELECT id, host, pid, acagent_daemon_alive(id), {_NOW} - heartbeat_at FROM daemon ORDER BY id"
        )
        return [{"id": r[0], "host": r[1], "pid": r[2], "alive": r[3], "heartbeat_age_s": r[4]} for r in rows]
