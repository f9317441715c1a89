"""Cluster membership of one daemon on a shared PostgreSQL journal.

:class:`ClusterMember` runs four loops in the daemon's task group; everything it receives is a
hint that means "read the journal after seq X" — PostgreSQL is the only truth:

- **notifier**: commits report ``(session_id, last_seq)`` (never from inside the append
  transaction); every ``notify_batch_s`` (≈10 ms) the highest seq per session is sent as one
  ``pg_notify('acagent_events', 'sid:seq sid:seq …')`` — ids and seqs only, never bodies, split
  under PostgreSQL's 8000-byte payload limit.
- **listener**: one dedicated connection LISTENs on the events and inbox channels and hands each
  hint to the hooks (:meth:`ClusterHooks.on_commit`, :meth:`ClusterHooks.on_input`). When the
  connection drops it reconnects, re-LISTENs, and then catches up every followed session from the
  journal (hints sent while it was away are lost, the journal is not).
- **poll** (``poll_s``, 1 s): the fallback for sessions with attachers here — their ``last_seq``
  in one query, any advance handed to ``on_commit`` — so a lost notify costs at most a second;
  the same loop sweeps the inbox for rows whose hint was lost (:meth:`ClusterHooks.sweep_inbox`).
- **scan** (``scan_s``, 0.1 s): every scan claims orphaned sessions (dead owner's advisory lock
  free, lease expired, or none) with one ``FOR UPDATE SKIP LOCKED`` statement, up to this
  daemon's free capacity, and resumes each; every ``heartbeat_s`` (1 s) it first beats on the
  liveness connection (re-taking the lock if that connection was lost).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import Any, Protocol

import anyio
from anyio.abc import TaskStatus

from acagent.store.pg._conn import NOTIFY_SQL, TRANSIENT, describe, session_settings
from acagent.store.pg._inbox import INBOX_CHANNEL
from acagent.store.pg._journal import EVENTS_CHANNEL, PostgresJournal

__all__ = ["ClusterHooks", "ClusterMember"]

log = logging.getLogger("acagent.cluster")
_PAYLOAD_MAX = 7900  # bytes; PostgreSQL refuses NOTIFY payloads of 8000 bytes or more


class ClusterHooks(Protocol):
    """What the daemon's registry offers the cluster (see :mod:`acagent.server._cluster`)."""

    def followed(self) -> dict[str, int]:
        """Sessions this daemon shows but does not write: ``{session_id: last published seq}``."""
        ...

    def running(self) -> set[str]:
        """Sessions with a turn running in this process."""
        ...

    def capacity(self) -> int:
        """How many more turns this daemon may start now (``max_sessions`` minus running)."""
        ...

    async def on_commit(self, session_id: str, seq: int) -> None:
        """The journal holds events of ``session_id`` up to at least ``seq``."""
        ...

    async def on_input(self, session_id: str, kind: str, ref: str) -> None:
        """Input (``cancel``; ``approval`` with ``ref`` = tool call id) for ``session_id`` was committed elsewhere."""
        ...

    async def sweep_inbox(self) -> None:
        """Take and apply inbox rows whose hint was missed (every ``poll_s``)."""
        ...

    async def resume(self, session_id: str) -> None:
        """Continue the interrupted turn of a session this daemon just claimed."""
        ...


class ClusterMember:
    """See the module docstring. Start with ``await task_group.start(member.run, hooks)``.

    Args:
        journal: this daemon's journal (its ``daemon_id`` and liveness lock).
        url: the journal URL (the listener opens its own connection).
        lease_ttl_s: the lease TTL used for claims, seconds.
        scan_s: seconds between claim scans: the failover delay after a process death is at
            most one scan plus the claim and the new runner's start (docs/scale-out.md).
        heartbeat_s: seconds between heartbeats on the liveness connection (a scan finding
            that connection closed re-takes the lock at once).
        poll_s: seconds between fallback polls of followed sessions.
        notify_batch_s: seconds commits are gathered into one NOTIFY.
    """

    def __init__(
        self,
        journal: PostgresJournal,
        url: str,
        *,
        lease_ttl_s: float,
        scan_s: float = 0.1,
        heartbeat_s: float = 1.0,
        poll_s: float = 1.0,
        notify_batch_s: float = 0.01,
    ) -> None:
        self.journal = journal
        self.url = url
        self.lease_ttl_s = lease_ttl_s
        self.scan_s = scan_s
        self.heartbeat_s = heartbeat_s
        self.poll_s = poll_s
        self.notify_batch_s = notify_batch_s
        self.draining = False
        """Set on SIGTERM: no more claims (peers take the released sessions)."""
        self.stats = {"notifies": 0, "hints_sent": 0, "hints_received": 0, "reconnects": 0, "claimed": 0}
        self._pending: dict[str, int] = {}
        self._wake = anyio.Event()
        self._listening = anyio.Event()

    # -------------------------------------------------------------- commits → NOTIFY

    def hint(self, session_id: str, seq: int) -> None:
        """Called after each commit (sync, never blocks): queue the hint for the next batch."""
        if seq > self._pending.get(session_id, 0):
            self._pending[session_id] = seq
        self._wake.set()

    async def _notifier(self) -> None:
        while True:
            await self._wake.wait()
            await anyio.sleep(self.notify_batch_s)
            self._wake = anyio.Event()
            pending, self._pending = self._pending, {}
            chunks: list[str] = []
            for sid, seq in pending.items():
                item = f"{sid}:{seq}"
                if chunks and len(chunks[-1]) + len(item) + 1 < _PAYLOAD_MAX:
                    chunks[-1] += " " + item
                else:
                    chunks.append(item)
            for chunk in chunks:
                try:
                    await self.journal._pool.execute(NOTIFY_SQL, EVENTS_CHANNEL, chunk)
                    self.stats["notifies"] += 1
                    self.stats["hints_sent"] += chunk.count(" ") + 1
                except Exception as exc:  # hints only: the listeners' poll covers a lost one
                    log.info("notify failed (%s); listeners catch up by polling", describe(exc))

    # -------------------------------------------------------------- LISTEN

    async def _listener(self, hooks: ClusterHooks) -> None:
        import asyncpg

        send, receive = anyio.create_memory_object_stream[tuple[str, str]](10000)
        first = True
        while True:
            try:
                conn = await asyncpg.connect(
                    self.url,
                    timeout=10,
                    server_settings=session_settings(
                        self.journal.daemon_id, self.journal.busy_timeout_ms, "listen"
                    ),
                )
            except (TimeoutError, *TRANSIENT, asyncpg.PostgresError) as exc:
                log.warning(
                    "listener: cannot connect to %s (%s); retrying", self.journal.where, describe(exc)
                )
                await anyio.sleep(0.5)
                continue
            lost = anyio.Event()
            conn.add_termination_listener(lambda _c, lost=lost: lost.set())

            def on_notify(_c: Any, _pid: int, channel: str, payload: str) -> None:
                try:
                    send.send_nowait((channel, payload))
                except anyio.WouldBlock:  # overflow: the poll (and catch-up) covers it
                    pass

            try:
                await conn.add_listener(EVENTS_CHANNEL, on_notify)
                await conn.add_listener(INBOX_CHANNEL, on_notify)
                if not first:
                    self.stats["reconnects"] += 1
                    await self._catch_up(hooks)  # hints sent while we were away are lost; the journal is not
                first = False
                self._listening.set()
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._dispatch, receive, hooks)
                    while not lost.is_set() and not conn.is_closed():
                        with anyio.move_on_after(2):
                            await lost.wait()
                        if not lost.is_set():
                            try:
                                with anyio.fail_after(5):
                                    await conn.fetchval("SELECT 1")  # a blackholed server shows up here
                            except Exception:
                                lost.set()
                    tg.cancel_scope.cancel()
                log.warning("listener: connection to %s lost; reconnecting", self.journal.where)
            except (TimeoutError, *TRANSIENT, asyncpg.PostgresError) as exc:
                log.warning("listener: %s; reconnecting", describe(exc))
            finally:
                conn.terminate()
            await anyio.sleep(0.2)

    async def _dispatch(self, receive: Any, hooks: ClusterHooks) -> None:
        async for channel, payload in receive:
            if channel == INBOX_CHANNEL:
                kind, _, rest = payload.partition(":")
                sid, _, ref = rest.partition(":")
                await self._guard(hooks.on_input(sid, kind, ref))
                continue
            for item in payload.split():
                sid, _, seq = item.rpartition(":")
                if sid and seq.isdigit():
                    self.stats["hints_received"] += 1
                    await self._guard(hooks.on_commit(sid, int(seq)))

    async def _guard(self, work: Awaitable[None]) -> None:
        try:
            await work
        except Exception as exc:
            log.warning("cluster hook failed: %s", describe(exc))

    async def _catch_up(self, hooks: ClusterHooks) -> None:
        followed = hooks.followed()
        if not followed:
            return
        rows = await self.journal._fetch(
            "SELECT id, last_seq FROM session WHERE id = ANY($1::text[])", list(followed)
        )
        for sid, last_seq in rows:
            if last_seq > followed.get(sid, 0):
                await self._guard(hooks.on_commit(sid, last_seq))

    async def _poller(self, hooks: ClusterHooks) -> None:
        while True:
            await anyio.sleep(self.poll_s)
            try:
                await self._catch_up(hooks)
                await hooks.sweep_inbox()
            except Exception as exc:
                log.info("poll failed: %s", describe(exc))

    # -------------------------------------------------------------- liveness and claims

    async def scan_once(self, hooks: ClusterHooks, *, beat: bool = True) -> list[str]:
        """One claim pass (after a heartbeat when ``beat``, or when the liveness connection is
        gone); returns the sessions claimed (and resumed)."""
        if (beat or not self.journal.live) and not await self.journal.heartbeat():
            log.error("daemon id %r was taken by another process; not claiming", self.journal.daemon_id)
            return []
        if self.draining:
            return []
        claimed = await self.journal.claim_orphans(
            limit=hooks.capacity(), ttl_s=self.lease_ttl_s, exclude=sorted(hooks.running())
        )
        for sid in claimed:
            log.warning("claimed session %s (its owner is gone); resuming it", sid)
            self.stats["claimed"] += 1
            await self._guard(hooks.resume(sid))
        return claimed

    async def _scanner(self, hooks: ClusterHooks) -> None:
        last_beat = -self.heartbeat_s
        while True:
            beat = anyio.current_time() - last_beat >= self.heartbeat_s
            try:
                await self.scan_once(hooks, beat=beat)
                if beat:
                    last_beat = anyio.current_time()
            except Exception as exc:
                log.warning("claim scan failed: %s", describe(exc))
            await anyio.sleep(self.scan_s)

    async def run(
        self, hooks: ClusterHooks, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Run every loop until cancelled; ``task_status.started()`` once LISTENing."""
        self.journal.on_commit = self.hint
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._notifier)
                tg.start_soon(self._listener, hooks)
                with anyio.move_on_after(10):
                    await self._listening.wait()
                tg.start_soon(self._poller, hooks)
                tg.start_soon(self._scanner, hooks)
                task_status.started()
        finally:
            self.journal.on_commit = None
