"""How a turn that went wrong ends: one ``turn.failed`` when it can be written, else
:class:`~acagent.errors.TurnHalted` for its watchers (F54, F55)."""

from __future__ import annotations

import logging

import anyio

from acagent.errors import (
    AcagentError,
    JournalError,
    StaleLease,
    TurnHalted,
    find_acagent_error,
    leaf_exception,
)
from acagent.runner._turn import Turn

__all__ = ["fail_turn", "halt_error"]

log = logging.getLogger("acagent.runner")


async def fail_turn(turn: Turn, exc: Exception) -> None:
    """Commit ``turn.failed`` for ``exc`` (shielded, bounded to 10 s).

    Known failures are logged in one line (a journal failure at info level: the watchers get it
    as :class:`TurnHalted`); unknown ones with their traceback.

    Raises:
        StaleLease: the turn was fenced (nothing more may be written).
        AcagentError: ``exc`` itself when ``turn.failed`` cannot be written either (it names the
            cause, e.g. the full disk).
    """
    sid = turn.session_id
    err = find_acagent_error(exc)
    if isinstance(err, StaleLease):  # fenced: not ours to write anything more
        raise err from exc
    if isinstance(err, JournalError):
        log.info("session %s: turn %s stopped: %s", sid, turn.turn_id, err.message)
        exc = err
    elif err is not None:  # a known failure (config, provider): no traceback
        log.warning("session %s: turn %s failed: %s", sid, turn.turn_id, err.message)
        exc = err
    else:
        log.exception("session %s: turn %s failed", sid, turn.turn_id)
        leaf = leaf_exception(exc)  # the bug itself, not "unhandled errors in a TaskGroup"
        exc = leaf if isinstance(leaf, Exception) else exc
    with anyio.CancelScope(shield=True), anyio.move_on_after(10) as bound:
        try:
            await turn.fail(
                error_type=exc.code if isinstance(exc, AcagentError) else type(exc).__name__,
                message=exc.message if isinstance(exc, AcagentError) else (str(exc) or repr(exc)),
            )
        except AcagentError as second:
            if isinstance(second, StaleLease) or not isinstance(exc, AcagentError):
                raise
            raise exc from second
    if bound.cancelled_caught and isinstance(exc, AcagentError):
        raise exc  # turn.failed did not land in time (e.g. it waited for disk space): name the cause


def halt_error(session_id: str, turn: Turn | None, error: AcagentError | None) -> TurnHalted | None:
    """The :class:`TurnHalted` for a turn that stopped without its end committed (None if it
    ended, or was handed to another daemon on purpose)."""
    if turn is None or turn.outcome is not None or turn.interrupt_reason == "handoff":
        return None
    sid = session_id
    if isinstance(error, StaleLease) or turn.interrupt_reason == "lease_lost":
        return TurnHalted(
            f"another process took over session {sid} while this one was stopped or stalled past "
            "its lease; this process stopped writing (the other one continues the turn)",
            detail={"session_id": sid, "turn_id": turn.turn_id, "reason": "fenced"},
        )
    why = error.message if error is not None else "the journal did not record the turn's end"
    return TurnHalted(
        f"{why}; session {sid} is unchanged and resumes with `acagent run --resume {sid}`",
        detail={"session_id": sid, "turn_id": turn.turn_id, "reason": "journal"},
    )
