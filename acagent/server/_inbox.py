"""Input from any daemon of a cluster: every message, approval answer and cancel goes through the
journal's inbox (:mod:`acagent.store.pg._inbox`).

The receiving daemon decides the row's target and commits it before anything acts on it:

=============  ===============================  ==============================================
input          session state (database)         target → who applies it
=============  ===============================  ==============================================
message        a live daemon holds the lease    none: 409 ``session_busy`` (recorded as outcome)
message        free, this daemon has a slot     this daemon: it claims the session (the lease)
message        free, this daemon is full        NULL: the first peer with a free slot takes it;
                                                429 ``concurrency_cap`` when the cluster is full
cancel         a live daemon holds the lease    that owner: it interrupts its turn
approval       a live daemon holds the lease    that owner: compare-and-set + wakes its turn
cancel/approv  free                             this daemon (closes it / records the decision)
=============  ===============================  ==============================================

The owner is hinted (``pg_notify``) and takes the row exactly once (compare-and-set on
``consumed_at``), applies it with the same local code as a single daemon, and records the
outcome; the receiver waits for that outcome (``handoff_s``) and answers its client with it. A
target that does not take the row in time (frozen, partitioned, just died) loses it: the receiver
takes it back with the same compare-and-set and applies it itself — a cancel then sets the
durable cancel flag (whoever runs the turn next sees it), an approval is the journal's
compare-and-set (the turn's owner, or its successor, finds it decided), a message finds no slot
(429). A retry with the same ``Idempotency-Key`` (to any daemon) gets the first answer.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from acagent.errors import AcagentError, ConcurrencyCap, JournalError, SessionBusy

__all__ = ["ClusterInput", "LocalInput"]

log = logging.getLogger("acagent.cluster")

SWEEP_MAX_AGE_S = 60.0
"""A sweep takes rows at most this old: older ones were answered (or given up) by their receiver."""

LocalInput = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]
"""How this daemon applies one kind of input itself: ``(session_id, body) -> response body``."""


def _error(outcome: dict[str, Any]) -> AcagentError:
    """The :class:`AcagentError` a recorded error outcome stands for (same code, status, detail)."""
    err = outcome["error"]
    exc = AcagentError(err["message"], detail=err.get("detail"))
    exc.code = err["code"]
    exc.status_code = int(err.get("status", 500))
    return exc


class ClusterInput:
    """See the module docstring.

    Args:
        journal: the daemon's :class:`~acagent.store.pg.PostgresJournal`.
        local: ``{"message" | "approval" | "cancel": LocalInput}`` — the single-daemon code.
        capacity: free turn slots of this daemon now.
        running: sessions with a turn in this process now.
        max_sessions: this daemon's cap (for the 429 detail).
        handoff_s: how long the receiver waits for the target to take the row, seconds.
    """

    def __init__(
        self,
        journal: Any,
        local: dict[str, LocalInput],
        *,
        capacity: Callable[[], int],
        running: Callable[[], set[str]],
        max_sessions: int = 0,
        handoff_s: float = 3.0,
    ) -> None:
        self.max_sessions = max_sessions
        self.journal = journal
        self.local = local
        self.capacity = capacity
        self.running = running
        self.handoff_s = handoff_s
        self.stats = {"posted": 0, "applied": 0, "handed_off": 0, "taken_back": 0, "replayed": 0}

    # ------------------------------------------------------------------ receiver

    async def post(self, kind: str, session_id: str, body: dict[str, Any], key: str | None) -> dict[str, Any]:
        """Commit the input, have it applied exactly once, and return the response body.

        Raises:
            AcagentError: what applying it raised (``session_busy``, ``concurrency_cap``,
                ``approval_not_found``, …), the same on every retry of ``key``.
        """
        j = self.journal
        await j.get_session(session_id)  # an unknown id is a 404 before anything is written
        me = j.daemon_id
        owner = await j.session_owner(session_id)
        busy_elsewhere = owner is not None and owner != me and session_id not in self.running()
        if kind == "message":  # busy before the cap, as on one daemon (its own turn: check_free here)
            mine = owner == me or session_id in self.running()
            free_here = owner is None and self.capacity() > 0
            target: str | None = me if mine or free_here or busy_elsewhere else None
        else:
            target = owner if busy_elsewhere else me
        item, created = await j.post_inbox(session_id, kind, key or uuid.uuid4().hex, body, target=target)
        self.stats["posted"] += created
        if not created:
            self.stats["replayed"] += 1
            return self._answer(await self._wait(item.id, self.handoff_s + 15))
        if kind == "message" and busy_elsewhere:  # refused here (the row is ours: nobody else takes it)
            await j.take_inbox(item_id=item.id, any_target=True)
            outcome = self._refusal(
                item.id,
                SessionBusy(
                    f"session {session_id} is running a turn on daemon {owner!r}; wait for it or cancel it",
                    detail={"holder_daemon": owner},
                ),
            )
            await j.finish_inbox(item.id, outcome)
            return self._answer(outcome)
        if target == me:
            taken = await j.take_inbox(item_id=item.id, any_target=True)
            if taken:
                return self._answer(await self.apply(taken[0]))
        self.stats["handed_off"] += 1
        return self._answer(await self._handoff(item.id, kind, session_id))

    async def _handoff(self, item_id: int, kind: str, session_id: str) -> dict[str, Any] | None:
        """Wait for the target's outcome; take the row back if nobody took it in time."""
        j = self.journal
        if kind == "message":
            running, cap = await j.cluster_capacity()
            if running >= cap:  # the cluster is full: no peer will take it
                back = await self._take_back(item_id, kind, session_id, (running, cap))
                return back or await self._wait(item_id, 15.0)
        outcome = await self._wait(item_id, self.handoff_s, untaken_only=True)
        if outcome is not None:
            return outcome
        back = await self._take_back(item_id, kind, session_id, None)
        if back:
            return back
        return await self._wait(item_id, 15.0)  # taken meanwhile: its taker answers

    async def _take_back(
        self, item_id: int, kind: str, session_id: str, load: tuple[int, int] | None
    ) -> dict[str, Any]:
        taken = await self.journal.take_inbox(item_id=item_id, any_target=True)
        if not taken:
            return {}
        self.stats["taken_back"] += 1
        if kind != "message":
            return await self.apply(taken[0])
        running, cap = load if load is not None else await self.journal.cluster_capacity()
        outcome = self._refusal(
            item_id,
            ConcurrencyCap(
                f"every daemon of the cluster is running its maximum of turns ({running} of {cap});"
                " retry when one finishes",
                detail={
                    "max_sessions": self.max_sessions,
                    "cluster_running": running,
                    "cluster_capacity": cap,
                },
            ),
        )
        await self.journal.finish_inbox(item_id, outcome)
        return outcome

    async def _wait(
        self, item_id: int, timeout: float, *, untaken_only: bool = False
    ) -> dict[str, Any] | None:
        """The row's outcome once recorded; None after ``timeout`` (or, with ``untaken_only``,
        as soon as it is clear nobody took the row within ``timeout``)."""
        delay, deadline = 0.005, anyio.current_time() + timeout
        while True:
            item = await self.journal.inbox_by_id(item_id)
            if item is not None and item.outcome is not None:
                outcome: dict[str, Any] = item.outcome
                return outcome
            if anyio.current_time() >= deadline:
                if untaken_only and item is not None and item.consumed_by is not None:
                    return await self._wait(item_id, 15.0)  # taken: its taker is applying it
                if untaken_only:
                    return None
                raise JournalError(
                    f"daemon {item.consumed_by if item else '?'!r} took the input but recorded no outcome"
                    f" within {timeout:.0f} s; check the session's events"
                )
            await anyio.sleep(delay)
            delay = min(delay * 2, 0.1)

    @staticmethod
    def _refusal(item_id: int, exc: AcagentError) -> dict[str, Any]:
        return {"error": {**exc.to_envelope()["error"], "status": exc.status_code}}

    @staticmethod
    def _answer(outcome: dict[str, Any] | None) -> dict[str, Any]:
        if outcome is None:
            raise JournalError("the input was recorded but no daemon applied it")
        if "error" in outcome:
            raise _error(outcome)
        return dict(outcome["ok"])

    # ------------------------------------------------------------------ applying (owner or receiver)

    async def apply(self, item: Any) -> dict[str, Any]:
        """Apply a row this daemon took (exactly once) with the local code; record the outcome."""
        try:
            outcome: dict[str, Any] = {"ok": await self.local[item.kind](item.session_id, item.body)}
        except AcagentError as exc:
            outcome = self._refusal(item.id, exc)
        except Exception as exc:  # a bug: recorded so the receiver's client is not left waiting
            log.exception("applying inbox row %s failed", item.id)
            outcome = {"error": {"code": "internal", "message": repr(exc), "detail": None, "status": 500}}
        self.stats["applied"] += 1
        await self.journal.finish_inbox(item.id, outcome)
        return outcome

    async def on_hint(self, session_id: str, kind: str, item_id: int) -> None:
        """A row was committed for this daemon (or for any daemon): take it and apply it."""
        if kind == "message" and self.capacity() <= 0:
            return  # no slot here: another daemon (or the receiver, with a 429) takes it
        for item in await self.journal.take_inbox(item_id=item_id, session_ids=sorted(self.running())):
            await self.apply(item)

    async def sweep(self) -> int:
        """Take what hints missed: rows for this daemon, rows for sessions it runs now (their old
        owner died), and — with a free slot — messages for any daemon. Returns how many."""
        kinds = ("message", "approval", "cancel") if self.capacity() > 0 else ("approval", "cancel")
        items = await self.journal.take_inbox(
            session_ids=sorted(self.running()), kinds=kinds, limit=20, max_age_s=SWEEP_MAX_AGE_S
        )
        for item in items:
            await self.apply(item)
        return len(items)
