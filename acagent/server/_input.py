"""Input to a session — a message, an approval answer, a cancel — as the HTTP routes submit it.

:func:`submit` is the one entry: on a single daemon (SQLite) it applies the input here; in a
cluster (PostgreSQL) it goes through the journal's inbox (:class:`~acagent.server._inbox.ClusterInput`),
which applies it on the daemon that owns the session with the same functions below
(:func:`local_input`). Each returns the route's response body.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import anyio

from acagent.errors import DaemonStopping
from acagent.server._idempotency import journaled_turn, key_digest
from acagent.store import RESTING

if TYPE_CHECKING:
    from acagent.server._inbox import LocalInput
    from acagent.server._state import DaemonState

__all__ = ["DaemonStopping", "local_input", "submit"]


async def submit(
    state: DaemonState, kind: str, session_id: str, body: dict[str, Any], key: str | None = None
) -> dict[str, Any]:
    """Apply ``kind`` input (``message``, ``approval``, ``cancel``) — through the cluster's inbox
    when there is one, else here. ``key`` (the client's ``Idempotency-Key``): a retry gets the
    first answer, on both paths."""
    if kind == "message" and not state.accepting:
        raise DaemonStopping("the daemon is shutting down; retry when it is back")
    if state.inbox is not None:
        result: dict[str, Any] = await state.inbox.post(kind, session_id, body, key)
        return result
    if key is not None:  # a retry gets the first answer (never a second turn)
        if kind == "message":
            fn = functools.partial(start_message, state, session_id, body, key)
        else:
            fn = functools.partial(_LOCAL[kind], state, session_id, body)
        return await state.idempotency.apply((session_id, kind, key), fn, body)
    return await _LOCAL[kind](state, session_id, body)


async def start_message(
    state: DaemonState, session_id: str, body: dict[str, Any], key: str | None = None
) -> dict[str, Any]:
    """Start a turn here. Policy when a turn already runs: :class:`SessionBusy` (409).

    ``key`` (the client's ``Idempotency-Key``): stored with the message; a message the journal
    already accepted with it (the daemon that accepted it stopped before answering) is answered
    with that turn's id instead of being applied again.

    Raises:
        IdempotencyKeyReused: the journal's message with ``key`` had another text or
            ``auto_approve``.
    """
    if not state.accepting:
        raise DaemonStopping("the daemon is shutting down; retry when it is back")
    # One accept at a time per session, so a concurrent POST sees the running turn's id.
    async with state.turn_lock(session_id):
        if key is not None:
            ttl_s = state.limits.idempotency_ttl_s
            auto_flag = bool(body.get("auto_approve"))
            first = await journaled_turn(
                state.journal, session_id, key, body["text"], ttl_s=ttl_s, auto_approve=auto_flag
            )
            if first is not None:
                return {"turn_id": first, "session_id": session_id}
        runner = await state.registry.get_runner(session_id)
        if runner.is_busy and (await state.journal.get_session(session_id)).status in RESTING:
            # The turn already ended (turn.completed is committed with status done); the runner
            # is only finishing up (checkpoint, lease release): a message sent right after the
            # end is accepted, not refused as busy.
            with anyio.move_on_after(10):
                await runner.wait()
        if not runner.is_busy:
            auto = bool(body.get("auto_approve")) or state.settings.auto_approve
            if runner.settings.auto_approve != auto:
                runner.settings = state.settings.model_copy(update={"auto_approve": auto})
        digest = key_digest(key, bool(body.get("auto_approve"))) if key is not None else None
        _, turn_id = await state.registry.start_turn(session_id, body["text"], idempotency_key=digest)
    return {"turn_id": turn_id, "session_id": session_id}


async def cancel(state: DaemonState, session_id: str, body: dict[str, Any]) -> dict[str, Any]:
    """Cancel the running turn (from any state; ``turn_id``: only that turn); the session ends
    ``cancelled``."""
    done = await state.registry.cancel(session_id, turn_id=body.get("turn_id"))
    row = await state.journal.get_session(session_id)
    return {"session_id": session_id, "status": row.status, "cancelled": done}


async def answer(state: DaemonState, session_id: str, body: dict[str, Any]) -> dict[str, Any]:
    """Record an approval decision (404 ``approval_not_found`` when unknown or already resolved)."""
    runner = await state.registry.get_runner(session_id)
    row = await runner.answer_approval(body["tool_call_id"], body["decision"], answer=body.get("answer"))
    return {"tool_call_id": row.tool_call_id, "decision": row.approval}


_LOCAL = {"message": start_message, "cancel": cancel, "approval": answer}


def local_input(state: DaemonState) -> dict[str, LocalInput]:
    """The functions above bound to ``state``: how this daemon applies input itself."""
    return {kind: functools.partial(fn, state) for kind, fn in _LOCAL.items()}
