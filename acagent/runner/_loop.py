"""AgenticLoop: drive one turn from the journal's state, one LLM step at a time.

The loop holds no session state: every decision is taken from the journal (open tool-call rows,
step attempts) and the in-memory context the :class:`SessionWriter` keeps in step with it. What
this turn's own commits just wrote is not read back (``Turn.open_calls``, ``Turn.fresh_seq``:
under the lease nobody else writes this turn's rows); a resumed turn reads it. The same
:meth:`AgenticLoop.run_turn` therefore runs a fresh turn and finishes a turn a dead process left
behind:

1. open tool calls of the turn → run them (or wait for their approval) until all are terminal
   (invariant 4: the model is woken only when every tool call of the step is terminal);
2. the context ends with an assistant message without tool calls → the turn is complete;
3. otherwise wake the model (:meth:`AgenticLoop.llm_step`): the ``step`` row is written inflight
   before the provider is called (invariant 2), and one transaction commits the assistant message,
   the tool-call intents, ``step.finished`` and the status change.

Recovery rules per step attempt: done with the same context digest → its reply was empty (a
non-empty one would have moved the context on), so the turn completes without a re-wake;
inflight (its process died) → retry with attempt+1 and an ``llm.retry`` event; attempts are
bounded by ``step_max_attempts``.
"""

from __future__ import annotations

import logging
import random
from typing import Any

import anyio

from acagent.errors import ProviderError
from acagent.events import make_payload
from acagent.models._windows import model_window
from acagent.obs import metrics, provider_of
from acagent.providers._base import ModelRequest
from acagent.runner._compact import CompactionFailed
from acagent.runner._fit import fit_context
from acagent.runner._reply import commit_reply, stream_reply
from acagent.runner._stepstart import NOT_CALLED, PlannedStep, intent, legacy_step_id, step_id_for
from acagent.runner._tools import ToolExecutor
from acagent.runner._turn import Turn
from acagent.runner._writer import crash_point
from acagent.store import FinishStep


def is_context_overflow(exc: BaseException) -> bool:
    """True for a provider refusal of a request as longer than the model's context window."""
    from acagent import errors

    overflow = getattr(errors, "ContextOverflow", None)
    if overflow is not None and isinstance(exc, overflow):
        return True
    text = f"{getattr(exc, 'error_type', '')} {getattr(exc, 'message', '')}".lower()
    return (
        "context_length_exceeded" in text or "prompt is too long" in text or "maximum context length" in text
    )


__all__ = ["MAX_CRASHED_ATTEMPTS", "AgenticLoop", "TurnEnded", "is_context_overflow"]

PROCESS_DIED = "process died"
"""``step.error`` of an attempt whose process died mid-call (found inflight on resume)."""
MAX_CRASHED_ATTEMPTS = 10
"""Crash-killed attempts of one step before the turn fails as a crash loop (not a setting:
crashes are not expected; the bound only stops a reply that kills the process every time)."""

log = logging.getLogger("acagent.loop")


class TurnEnded(Exception):
    """Raised inside the loop when the turn reached a terminal event (failed)."""


class AgenticLoop:
    """The stateless turn algorithm (see module docstring).

    Args:
        executor: runs the open tool calls of a step.
    """

    def __init__(self, executor: ToolExecutor | None = None) -> None:
        self.executor = executor or ToolExecutor()

    async def run_turn(self, turn: Turn) -> None:
        """Drive ``turn`` to ``turn.completed`` (or raise :class:`TurnEnded`)."""
        while True:
            await refresh_tools(turn)
            open_calls, turn.open_calls = turn.open_calls, None
            if open_calls is None:  # not known here (a resumed turn): the journal says
                open_calls = await turn.journal.tool_calls(
                    turn.session_id, turn_id=turn.turn_id, open_only=True
                )
            if open_calls:
                await self.executor.run_open_calls(turn, open_calls)
                if all(row.terminal for row in open_calls):
                    turn.open_calls = []
                crash_point("after_tool_result_before_wake", turn.settings.crash_at)
                continue
            messages = turn.context.messages
            last = messages[-1] if messages else None
            if last is not None and last.role == "assistant" and not last.tool_calls:
                await turn.complete(last.text)
                return
            if not await self.llm_step(turn):
                await turn.complete("")
                return
            if turn.outcome == "completed":  # the reply ended the turn in its own commit
                return

    async def llm_step(self, turn: Turn, force_compaction: str | None = None) -> bool:
        """Make (or recover) one LLM call for the current context and commit its result.

        Returns:
            False when the model produced an empty reply (nothing to add to the context).

        Raises:
            TurnEnded: the step failed for good (``turn.failed`` committed).
        """
        settings = turn.settings
        tools = await turn.definitions()
        planned = await _planned(turn, force_compaction)
        if planned is None:
            try:
                est_tokens = await fit_context(turn, tools, force=force_compaction)
            except CompactionFailed as exc:
                # After a provider refusal the turn fails as the refusal it is (context_overflow).
                code = "context_overflow" if force_compaction == "overflow" else exc.code
                await turn.fail(error_type=code, message=exc.message, detail=exc.detail)
                raise TurnEnded from exc
            planned = await _planned(turn, None)  # a compaction's commit carries the intent too
        if planned is not None:  # its intent rode in the commit that made this context
            digest, step_id, est_tokens = planned.digest, planned.step_id, planned.tokens
            attempt, crashed = 1, 0
            crash_point("after_step_inflight", settings.crash_at)
        else:
            digest = turn.context.digest(turn.system_prompt)
            resumed = await _resume_attempts(turn, digest)
            if resumed is None:
                return False
            step_id, attempt, crashed = resumed
        messages = list(turn.context.messages)
        while True:
            request_id = f"{step_id}|{attempt}"
            window = model_window(turn.model, settings.models)
            if planned is None:
                await _check_can_call(turn, attempt, crashed, est_tokens)
                context_window = window.context_window if window.known else None
                await _start_attempt(turn, step_id, request_id, digest, attempt, (est_tokens, context_window))
            planned = None
            request = ModelRequest(
                system=turn.system_prompt,
                messages=messages,
                tools=tools,
                request_id=request_id,
                max_tokens=min(4096, window.max_output_tokens),
            )
            try:
                response = await stream_reply(turn, request, step_id, attempt)
            except ProviderError as exc:
                if is_context_overflow(exc) and force_compaction is None:
                    # The provider refused the request as too long: one compaction, one retry.
                    await turn.writer.commit([], ops=[FinishStep(request_id, "failed", exc.message)])
                    return await self.llm_step(turn, force_compaction="overflow")
                await _retry_or_fail(turn, exc, request_id, attempt, crashed)
                attempt += 1
                continue
            crash_point("before_step_commit", settings.crash_at)
            await commit_reply(turn, step_id, request_id, attempt, response)
            crash_point("after_step_commit", settings.crash_at)
            return bool(response.parts)


def _delay(attempt: int, retry_after_s: float | None, settings: Any) -> float:
    """Seconds before retry ``attempt + 1``: the server's ``retry-after``, else jittered backoff."""
    if retry_after_s is not None and retry_after_s >= 0:
        return float(min(retry_after_s, settings.timing.retry_max_delay_s))
    base = settings.timing.retry_base_delay_s * (2 ** (attempt - 1))
    return float(min(settings.timing.retry_max_delay_s, base * (0.5 + random.random())))


def _retry_payload(
    turn: Turn, attempt: int, reason: str, delay_ms: int, error: str
) -> tuple[str, dict[str, Any]]:
    payload = make_payload(
        "llm.retry", turn_id=turn.turn_id, attempt=attempt, reason=reason, delay_ms=delay_ms, error=error
    )
    return ("llm.retry", payload)


async def _planned(turn: Turn, force_compaction: str | None) -> PlannedStep | None:
    """The attempt whose intent rode in this turn's last waking commit (``Turn.planned_step``,
    ``runner/_stepstart.py``), if it is for the current context; taken once. One planned for a
    context that moved on since (never expected) is closed as not called."""
    planned: PlannedStep | None = turn.planned_step
    turn.planned_step = None
    if planned is None:
        return None
    if force_compaction is None and planned.digest == turn.context.digest(turn.system_prompt):
        return planned
    await turn.writer.commit([], ops=[FinishStep(planned.request_id, "failed", NOT_CALLED)])
    return None


async def _resume_attempts(turn: Turn, digest: str) -> tuple[str, int, int] | None:
    """``(step id, next attempt, crash-killed attempts so far)`` of the step for the current
    context, or None when it is already done for this very context (its reply was empty, F50).

    The step id is :func:`step_id_for` the turn and ``digest``; a step an older acagent recorded
    under its old id (:func:`legacy_step_id`) goes on under that id.
    """
    step_id = step_id_for(turn.session_id, turn.turn_id, digest)
    fresh, turn.fresh_seq = turn.fresh_seq, None
    if fresh is not None and fresh == turn.context.last_seq:
        return step_id, 1, 0  # this turn's own commit made this context: no attempt of its step exists
    attempts = await turn.journal.step_attempts(turn.session_id, step_id)
    if not attempts:
        legacy = legacy_step_id(turn.session_id, turn.context.last_seq, digest)
        attempts = await turn.journal.step_attempts(turn.session_id, legacy)
        if attempts:
            step_id = legacy
    # A crash-killed attempt is not a provider failure (F56): only provider failures spend
    # ``step_max_attempts``; crashes have their own, larger bound (a crash loop still ends).
    crashed = sum(1 for a in attempts if a.status == "failed" and a.error == PROCESS_DIED)
    if not attempts:
        return step_id, 1, crashed
    prev = attempts[-1]
    if prev.status == "done":
        # Done for this very context: had the reply added anything (text, tool calls), the
        # context (and so the step id) would have moved on. It was empty; say so, or the turn
        # would ask for the same finished step forever (F50).
        log.info("step %s already done with an empty reply", step_id)
        return None
    if prev.status == "inflight":
        # Its process died mid-call: the retry is counted (as a crash) and visible.
        crashed += 1
        metrics().llm_retry(provider_of(turn.model), "process_died")
        error = "the process making this call stopped before it finished"
        await turn.writer.commit(
            [_retry_payload(turn, prev.attempt, "process_died", 0, error)],
            ops=[FinishStep(prev.request_id, "failed", PROCESS_DIED)],
        )
    return step_id, prev.attempt + 1, crashed


async def _check_can_call(turn: Turn, attempt: int, crashed: int, est_tokens: int | None) -> None:
    """Fail the turn (raise :class:`TurnEnded`) on a crash loop, a cap the call would break, or
    exhausted retries."""
    if crashed >= MAX_CRASHED_ATTEMPTS:
        message = f"the process making this LLM call died {crashed} times; not trying again"
        await turn.fail(error_type="crash_loop", message=message, retryable=True)
        raise TurnEnded
    if turn.limits is None:
        turn.limits = await turn.budget.effective_limits(turn.journal, turn.session_id)
    exceeded = await turn.budget.check(
        turn.journal, turn.session_id, turn.model, input_tokens=est_tokens, limits=turn.limits
    )
    if exceeded is not None:  # stop before the call that would break a cap
        await turn.fail(error_type=exceeded.code, message=exceeded.message, detail=exceeded.detail)
        raise TurnEnded
    if attempt - crashed > turn.settings.timing.step_max_attempts:
        await turn.fail(
            error_type="retries_exhausted",
            message=f"the LLM step failed after {attempt - 1 - crashed} attempts"
            + (f" (and {crashed} more cut short by a process crash)" if crashed else ""),
            retryable=True,
        )
        raise TurnEnded


async def _start_attempt(
    turn: Turn, step_id: str, request_id: str, digest: str, attempt: int, context: tuple[Any, int | None]
) -> None:
    """The step intent (invariant 2): ``step.started`` and the ``inflight`` row, before the call.

    ``context``: the request's estimated tokens and the model's window (None when unknown).
    """
    events, ops = intent(turn, step_id, request_id, digest, attempt, context)
    await turn.writer.commit(events, ops=ops)
    crash_point("after_step_inflight", turn.settings.crash_at)


async def _retry_or_fail(turn: Turn, exc: ProviderError, request_id: str, attempt: int, crashed: int) -> None:
    """After a failed attempt: wait out the retry delay (``llm.retry`` committed), or fail the
    turn (raise :class:`TurnEnded`) when the error is final or the attempts are spent."""
    settings = turn.settings
    if exc.retryable and attempt - crashed < settings.timing.step_max_attempts:
        metrics().llm_retry(provider_of(turn.model), exc.error_type)
        delay = _delay(attempt, getattr(exc, "retry_after_s", None), settings)
        await turn.writer.commit(
            [_retry_payload(turn, attempt, exc.error_type, max(1, int(delay * 1000)), exc.message)],
            ops=[FinishStep(request_id, "failed", exc.message)],
        )
        await anyio.sleep(delay)
        return
    await turn.fail(
        error_type=exc.error_type,
        message=exc.message,
        retryable=exc.retryable,
        ops=[FinishStep(request_id, "failed", exc.message)],
    )
    raise TurnEnded from exc


async def refresh_tools(turn: Turn) -> None:
    """Bring a live tool set (``acagent.mcp.ToolSet``: MCP tools) up to date before tools run or
    the model is called; its notices (a server failed, crashed, changed its tools) are recorded
    once each as ``error`` events. A plain ``dict`` of tools has no ``refresh`` and is left alone.
    """
    refresh = getattr(turn.tools, "refresh", None)
    if refresh is None:
        return
    changed, notices = await refresh()
    if changed:
        turn.tool_definitions = None
    if notices:
        events = [
            ("error", make_payload("error", turn_id=turn.turn_id, code=c, message=m)) for c, m in notices
        ]
        await turn.writer.commit(events)
