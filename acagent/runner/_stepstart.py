"""The step intent, and how it rides in the commit before it (benchmarks figure 3, issue 12).

Invariant 2: a step's intent — ``step.started`` and its ``step`` row ``inflight`` — is durable
before the provider is called. After the accept commit (the user's message) and after the commit
of a step's last tool result, nothing external happens before the next call, so
:func:`plan_step` prepares that intent before the commit and the commit carries it (one journal
transaction fewer per LLM step: every WAL commit rewrites the session's page, page 1 and the
event b-tree's last leaf). :meth:`AgenticLoop.llm_step` then takes the planned attempt
(``Turn.planned_step``) instead of committing one of its own. When something must come first — a
compaction, a cap the call would break, an interrupt — no intent is planned and the loop goes the
usual way; the intent is then exactly what it would have committed a moment later.

Step ids: ``session|turn|digest16`` (:func:`step_id_for`), "the LLM call of this turn for this
context". It was ``session|context seq|digest16``, but the context's seq is assigned by the journal
in the very commit the intent now rides in, so the runner cannot name it before that commit.
The turn id is known before it, and within one turn the context only moves on (each reply and
each tool result adds to it, a compaction replaces it by a shorter one with a summary), so the
digest never repeats inside a turn and (turn, digest) names one step — across turns the turn id
keeps ids apart, as the seq did. Recovery rebuilds the context from the journal (same digest) and
resumes the turn the session row names (same turn id), so it finds the inflight attempt and
records ``llm.retry`` ``process_died`` as before; a step an older acagent wrote is found by its old
id (:func:`legacy_step_id`, an upgrade mid-crash pays no call twice). ``step_log`` packs the new id
to nothing (m015: the view rebuilds it from the session, turn and digest columns).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

from acagent._text import clean_value
from acagent.errors import InvalidTransition
from acagent.events import make_payload
from acagent.models._windows import model_window
from acagent.runner._compact import ports_of
from acagent.runner._fit import needs_compaction
from acagent.store import ACTIVE, InsertStep, SetStatus

__all__ = [
    "NOT_CALLED",
    "PlannedStep",
    "commit_waking",
    "intent",
    "legacy_step_id",
    "plan_step",
    "step_id_for",
]

NOT_CALLED = "not called: the context changed after its intent was committed"
"""``step.error`` of a planned attempt whose context moved on before the call (never expected)."""

Events = list[tuple[str, dict[str, Any]]]

log = logging.getLogger("acagent.loop")


def step_id_for(session_id: str, turn_id: str, digest: str) -> str:
    """The id of turn ``turn_id``'s LLM step for the context whose digest is ``digest`` (hex)."""
    return f"{session_id}|{turn_id}|{digest[:16]}"


def legacy_step_id(session_id: str, last_seq: int, digest: str) -> str:
    """The id an older acagent gave the same step (its context's last seq instead of the turn)."""
    return f"{session_id}|{last_seq}|{digest[:16]}"


def intent(
    turn: Any, step_id: str, request_id: str, digest: str, attempt: int, context: tuple[Any, int | None]
) -> tuple[Events, list[Any]]:
    """``step.started`` and the ops writing the ``inflight`` row (status ``running``) of one attempt.

    ``context``: the request's estimated tokens and the model's window (None when unknown).
    """
    payload = make_payload(
        "step.started",
        turn_id=turn.turn_id,
        step_id=step_id,
        request_id=request_id,
        attempt=attempt,
        context_tokens=context[0],
        context_window=context[1],
    )
    ops = [
        InsertStep(request_id, step_id, turn.turn_id, digest, attempt),
        SetStatus("running", ACTIVE, turn_id=turn.turn_id),
    ]
    return [("step.started", payload)], ops


@dataclass(frozen=True)
class PlannedStep:
    """The first attempt of a step whose intent rides in the commit that makes its context."""

    step_id: str
    request_id: str
    digest: str
    """Digest of the context the commit makes (checked again before the call)."""
    tokens: int
    """Estimated input tokens of the request."""
    events: Events
    ops: list[Any]


async def plan_step(turn: Any, events: Events) -> PlannedStep | None:
    """The intent of the LLM step that follows the commit of ``events``, or None.

    ``events`` are the commit's events (the context events among them make the step's context).
    None when the model may not be called right after that commit: the request is over
    ``[context] compact_at`` (a compaction comes first, with its own intent; right after one,
    ``fit_context`` may still refuse the call), the call would break a cap, the turn was asked to
    stop. ``events`` may be a compaction's (``context.compacted``: ``fit_context`` wakes with it).

    Raises:
        whatever the provider's creation or the cap check raise (``commit_waking`` then commits
        without an intent: the loop makes the same calls and fails the turn with the error).
    """
    settings = turn.settings
    if (
        turn.interrupt_reason is not None
        or not turn.model
        or turn.budget is None
        or not turn.context.loaded
        or settings.timing.step_max_attempts < 1
    ):
        return None
    tools = await turn.definitions()  # may create the provider (once per session runner)
    ahead = turn.context.fork()
    for typ, payload in events:
        ahead.apply_raw(typ, clean_value(payload))  # what SessionWriter.commit will fold
    over, tokens, _ = needs_compaction(replace(ports_of(turn, tools), context=ahead), turn.model)
    if over:  # a compaction comes first, or (right after one) fit_context may still refuse the call
        return None
    if turn.limits is None:
        turn.limits = await turn.budget.effective_limits(turn.journal, turn.session_id)
    starting = any(typ == "turn.started" for typ, _ in events)  # not yet counted by the journal
    exceeded = await turn.budget.check(
        turn.journal,
        turn.session_id,
        turn.model,
        input_tokens=tokens,
        turn_starting=starting,
        limits=turn.limits,
    )
    if exceeded is not None:  # the loop fails the turn with it, before any intent
        return None
    digest = ahead.digest(turn.system_prompt)
    step_id = step_id_for(turn.session_id, turn.turn_id, digest)
    request_id = f"{step_id}|1"
    window = model_window(turn.model, settings.models)
    extra, ops = intent(
        turn, step_id, request_id, digest, 1, (tokens, window.context_window if window.known else None)
    )
    return PlannedStep(step_id, request_id, digest, tokens, extra, ops)


async def commit_waking(turn: Any, events: Events, ops: list[Any]) -> PlannedStep | None:
    """Commit ``events`` and ``ops`` of a commit after which the model is called, with the next
    step's intent (:func:`plan_step`) when there is one; returns it (None: committed without).

    A pending cross-process cancel refuses the intent's status change (a worker's): the commit is
    then made without the intent, so a tool result that happened is kept, and the loop's own step
    start meets the cancel as it always did.

    Raises:
        StaleLease, InvalidTransition, JournalError: from ``SessionWriter.commit``.
    """
    try:
        planned = await plan_step(turn, events)
    except Exception:  # the loop meets it again right after (same calls) and fails the turn with it
        log.debug("session %s: no step intent planned", turn.session_id, exc_info=True)
        planned = None
    if planned is not None:
        try:
            await turn.writer.commit([*events, *planned.events], ops=[*ops, *planned.ops])
            return planned
        except InvalidTransition as exc:
            if not (exc.detail or {}).get("cancel_requested"):
                raise
    await turn.writer.commit(events, ops=ops)
    return None
