"""Driving one turn to a resting state: its cancel scope, the writer's flush loop, the
``invoke_agent`` span, and what a turn that stopped early writes.

:func:`drive_turn` is the part of :class:`~acagent.runner._runner.InProcessRunner` that runs a
:class:`~acagent.runner._turn.Turn` through the :class:`~acagent.runner._loop.AgenticLoop`
(it never imports the runner). A failure ends the turn with ``turn.failed``
(:func:`~acagent.runner._ending.fail_turn`); a cancel with ``turn.interrupted`` (shielded,
bounded in time); a stop in :data:`NO_WRITE_STOPS` writes nothing.
"""

from __future__ import annotations

import anyio

from acagent.errors import InvalidTransition, StaleLease
from acagent.obs import span
from acagent.runner._ending import fail_turn
from acagent.runner._loop import AgenticLoop, TurnEnded
from acagent.runner._turn import Turn

__all__ = ["NO_WRITE_STOPS", "drive_turn"]

NO_WRITE_STOPS = ("lease_lost", "handoff")
"""Interrupt reasons that stop a turn without writing anything: the lease is gone (a zombie) or
is being handed to another daemon of a cluster (SIGTERM drain: the turn stays active and a peer
continues it)."""


async def drive_turn(loop: AgenticLoop, turn: Turn) -> bool:
    """Run ``turn`` to a resting state inside its own cancel scope.

    Returns:
        True if it completed normally (or its committed end says ``completed``), else False.

    Raises:
        StaleLease: the turn was fenced (nothing more may be written).
        AcagentError: the turn's end could not be recorded (see :func:`fail_turn`).
    """
    completed = False
    with anyio.CancelScope() as scope:
        turn.enter(scope)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(turn.writer.flush_loop)
                try:
                    with span(
                        "invoke_agent acagent",
                        {
                            "gen_ai.operation.name": "invoke_agent",
                            "gen_ai.agent.name": "acagent",
                            "gen_ai.conversation.id": turn.session_id,
                            "gen_ai.request.model": turn.model.partition(":")[2],
                            "acagent.turn_id": turn.turn_id,
                        },
                    ):
                        await loop.run_turn(turn)
                    completed = True
                except TurnEnded:
                    pass
                except InvalidTransition as exc:
                    if not (exc.detail or {}).get("cancel_requested"):
                        raise
                    turn.interrupt("user")  # a cancel arrived from another process
                tg.cancel_scope.cancel()
        except StaleLease:
            raise
        except Exception as exc:
            await fail_turn(turn, exc)
            return False
    if turn.outcome is not None:  # its end is committed (a late cancel changes nothing)
        return turn.outcome == "completed"
    reason = turn.interrupt_reason
    if not completed and (scope.cancelled_caught or reason in NO_WRITE_STOPS):
        if reason not in NO_WRITE_STOPS:
            with anyio.CancelScope(shield=True), anyio.move_on_after(15):
                await turn.finish_cancelled(reason or "user")
        return False
    return completed
