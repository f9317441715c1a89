"""The daemon's side of a PostgreSQL cluster: the registry as :class:`~acagent.store.pg._cluster.ClusterHooks`.

- **Cross-daemon attach.** A runner here that is not writing its session (another daemon owns
  the turn) is *followed*: each hint ``sid:seq`` (NOTIFY, or the 1 s poll) reads the journal after
  the runner's last published seq and publishes those events, in order, on its local bus — so
  ``attach --since N``, SSE and WebSocket on any daemon see the same seqs with no gap and no
  duplicate (the bus refuses a seq that is not after its last one; publishing stops at the first
  hole and the next hint fills it).
- **Input from any daemon.** Every message, cancel and approval answer is an inbox row first
  (:mod:`acagent.server._inbox`); a hint ``kind:sid:@id`` makes the owner take the row (exactly
  once) and apply it; the older hints (``cancel:sid``, ``approval:sid:call``, sent by the
  journal's cancel flag and approval compare-and-set) wake the owner's turn at once.
- **Failover.** Sessions the cluster claims (dead owner, expired lease) are resumed through
  :meth:`SessionRegistry.start_turn` (``text=None``: finish the interrupted turn).
"""

from __future__ import annotations

import logging
from typing import Any

import anyio

from acagent.errors import AcagentError

__all__ = ["RegistryHooks"]

log = logging.getLogger("acagent.cluster")


class RegistryHooks:
    """Adapts a :class:`~acagent.runner.SessionRegistry` to the cluster's hooks."""

    def __init__(self, registry: Any) -> None:
        self.registry = registry
        self._locks: dict[str, anyio.Lock] = {}
        self.inbox: Any = None
        """The daemon's :class:`~acagent.server._inbox.ClusterInput` (rows hinted ``@id``)."""

    def _follows(self, runner: Any) -> bool:
        return not runner.is_busy and runner.writer.lease is None and not runner.bus.closed

    def followed(self) -> dict[str, int]:
        """Runners shown here whose turns run elsewhere: ``{session_id: bus.last_seq}``."""
        return {sid: r.bus.last_seq for sid, r in list(self.registry.runners.items()) if self._follows(r)}

    def running(self) -> set[str]:
        """Sessions with a turn in this process."""
        return {sid for sid, r in list(self.registry.runners.items()) if r.is_busy}

    def capacity(self) -> int:
        """Free turn slots (``max_sessions`` minus running turns)."""
        return max(0, int(self.registry.settings.max_sessions) - int(self.registry.busy_count()))

    async def on_commit(self, session_id: str, seq: int) -> None:
        """Publish the journal's events after the runner's last seq (up to ``seq``) on its bus."""
        runner = self.registry.runners.get(session_id)
        if runner is None or not self._follows(runner) or seq <= runner.bus.last_seq:
            return
        lock = self._locks.setdefault(session_id, anyio.Lock())
        async with lock:
            while self._follows(runner) and runner.bus.last_seq < seq:
                page = await self.registry.journal.events(
                    session_id, runner.bus.last_seq, until=seq, limit=1000
                )
                if not page:
                    return
                for event in page:  # no await in here: the check and the publish are atomic
                    if not self._follows(runner) or event.seq != runner.bus.last_seq + 1:
                        return
                    runner.bus.publish(event)
                if len(page) < 1000:
                    return

    async def on_input(self, session_id: str, kind: str, ref: str) -> None:
        """Input committed on another daemon: the owner acts on it now (not at its next poll)."""
        if ref.startswith("@") and ref[1:].isdigit():
            if self.inbox is not None:  # an inbox row: take it (exactly once) and apply it
                await self.inbox.on_hint(session_id, kind, int(ref[1:]))
            return
        runner = self.registry.runners.get(session_id)
        if runner is None or not runner.is_busy:
            return
        turn = getattr(runner, "turn", None)  # the flag read next is for this turn (or stale)
        if kind == "cancel" and await self.registry.journal.cancel_requested(session_id):
            runner.on_lease_check(True, True, turn)
        elif kind == "approval" and ref and getattr(runner, "turn", None) is not None:
            runner.turn.wake_approval(ref)

    async def sweep_inbox(self) -> None:
        """Take and apply inbox rows whose hint was missed (see ``ClusterInput.sweep``)."""
        if self.inbox is not None:
            await self.inbox.sweep()

    async def resume(self, session_id: str) -> None:
        """Finish the interrupted turn of a claimed session here."""
        try:
            await self.registry.start_turn(session_id, None)
        except AcagentError as exc:
            log.warning("could not resume claimed session %s: %s", session_id, exc.message)
