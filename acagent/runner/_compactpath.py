"""The on-demand compaction of a runner (``/compact``, ``acagent compact``, the HTTP route).

:class:`CompactPath` is the part of :class:`~acagent.runner._runner.InProcessRunner` that runs
one compaction like a turn: the same busy rule, under the session lease, as one journaled
summary step (:func:`~acagent.runner._compact.compact_now`), cancellable like a turn (F123).
"""

from __future__ import annotations

import uuid
from typing import Any

import anyio

from acagent._pids import pid_is_dead
from acagent.errors import CompactionFailed, UserError
from acagent.events import make_payload
from acagent.runner._cancel import RunnerParts, RunnerState
from acagent.runner._compact import compact_now
from acagent.store import ACTIVE

__all__ = ["CompactPath"]


class CompactPath(RunnerParts):
    """``compact()`` of :class:`~acagent.runner._runner.InProcessRunner` (a mixin)."""

    async def compact(self) -> dict[str, Any]:
        """Compact the context now (``/compact``, ``acagent compact``, the HTTP route).

        Runs like a turn for the busy rule (a message meanwhile gets ``session_busy``), under the
        session lease, as one journaled summary step (:mod:`acagent.runner._compact`).

        Returns:
            The ``context.compacted`` payload.

        Raises:
            SessionBusy: a turn runs (here or in another live process).
            UserError: a turn was interrupted and must be finished first.
            CompactionFailed: nothing older than the last turn to summarise, a useless summary, or
                a cancel (``detail.cancelled``) reached it: the context is unchanged.
        """
        self.check_free(finishing_is_free=False)
        self.state = RunnerState.ACCEPTING
        self._turn_done = anyio.Event()
        try:
            self.writer.lease = await self.journal.acquire_lease(
                self.session_id, self.worker_id, ttl_s=self.settings.timing.lease_ttl_s, is_dead=pid_is_dead
            )
            await self.load_context()
            if self.row.status in ACTIVE:
                raise UserError(
                    f"session {self.session_id} has an interrupted turn; finish it first (run --resume)"
                )
            turn = self._new_turn(f"compact_{uuid.uuid4().hex[:12]}")
            self.turn, self.state = turn, RunnerState.RUNNING
            with anyio.CancelScope() as scope:
                turn.enter(scope)  # a cancel reaches the summary call like a turn's (F123)
                try:
                    return await compact_now(turn)  # every turn but the last is summarised
                except CompactionFailed as exc:
                    # A caller that got its 202 (HTTP) learns why from the stream, not only the log.
                    failure = make_payload(
                        "error", turn_id=turn.turn_id, code=exc.code, message=exc.message, detail=exc.detail
                    )
                    await self.writer.commit([("error", failure)])
                    raise
            with anyio.CancelScope(shield=True), anyio.move_on_after(15):
                await turn.finish_cancelled(turn.interrupt_reason or "user", active=False)
            raise CompactionFailed(
                f"the compaction of session {self.session_id} was cancelled; the context is unchanged",
                detail={"cancelled": True},
            )
        finally:
            await self._release()
