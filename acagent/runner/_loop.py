"""AgenticLoop: drive one turn from the journal's state, one LLM step at a time.

The loop holds no session state: every decision is taken from the journal (open tool-call rows,
step attempts) and the in-memory context the :class:`SessionWriter` keeps in step with it. The
same :meth:`AgenticLoop.run_turn` therefore runs a fresh turn and finishes a turn a dead process
left behind:

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
import time
import uuid
from typing import Any

import anyio

from acagent.errors import ProviderError
from acagent.events import make_payload
from acagent.messages import Message, ToolCallPart
from acagent.models._windows import model_window
from acagent.obs import metrics, provider_of, span
from acagent.providers._base import ModelRequest, TextDelta
from acagent.providers._parts import OUTPUT_LIMIT_ERROR
from acagent.runner._budget import usage_event
from acagent.runner._compact import CompactionFailed
from acagent.runner._fit import fit_context
from acagent.runner._tools import ToolExecutor
from acagent.runner._turn import Turn
from acagent.runner._writer import crash_point
from acagent.store import ACTIVE, FinishStep, InsertStep, InsertToolCall, SetStatus


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
            open_calls = await turn.journal.tool_calls(turn.session_id, turn_id=turn.turn_id, open_only=True)
            if open_calls:
                await self.executor.run_open_calls(turn, open_calls)
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
        turn_id = turn.turn_id
        settings = turn.settings
        tools = await turn.definitions()
        try:
            est_tokens = await fit_context(turn, tools, force=force_compaction)
        except CompactionFailed as exc:
            # After a provider refusal the turn fails as the refusal it is (context_overflow).
            code = "context_overflow" if force_compaction == "overflow" else exc.code
            await turn.fail(error_type=code, message=exc.message, detail=exc.detail)
            raise TurnEnded from exc
        messages = list(turn.context.messages)
        digest = turn.context.digest(turn.system_prompt)
        step_id = f"{turn.session_id}|{turn.context.last_seq}|{digest[:16]}"
        attempts = await turn.journal.step_attempts(turn.session_id, step_id)
        attempt = 1
        # A crash-killed attempt is not a provider failure (F56): only provider failures spend
        # ``step_max_attempts``; crashes have their own, larger bound (a crash loop still ends).
        crashed = sum(1 for a in attempts if a.status == "failed" and a.error == PROCESS_DIED)
        if attempts:
            prev = attempts[-1]
            if prev.status == "done":
                # Done for this very context: had the reply added anything (text, tool calls),
                # the context (and so the step id) would have moved on. It was empty; say so, or
                # the turn would ask for the same finished step forever (F50).
                log.info("step %s already done with an empty reply", step_id)
                return False
            attempt = prev.attempt + 1
            if prev.status == "inflight":
                # Its process died mid-call: the retry is counted (as a crash) and visible.
                crashed += 1
                metrics().llm_retry(provider_of(turn.model), "process_died")
                await turn.writer.commit(
                    [
                        (
                            "llm.retry",
                            make_payload(
                                "llm.retry",
                                turn_id=turn_id,
                                attempt=prev.attempt,
                                reason="process_died",
                                delay_ms=0,
                                error="the process making this call stopped before it finished",
                            ),
                        )
                    ],
                    ops=[FinishStep(prev.request_id, "failed", PROCESS_DIED)],
                )
        while True:
            if crashed >= MAX_CRASHED_ATTEMPTS:
                await turn.fail(
                    error_type="crash_loop",
                    message=f"the process making this LLM call died {crashed} times; not trying again",
                    retryable=True,
                )
                raise TurnEnded
            exceeded = await turn.budget.check(
                turn.journal, turn.session_id, turn.model, input_tokens=est_tokens
            )
            if exceeded is not None:  # stop before the call that would break a cap
                await turn.fail(error_type=exceeded.code, message=exceeded.message, detail=exceeded.detail)
                raise TurnEnded
            if attempt - crashed > settings.timing.step_max_attempts:
                await turn.fail(
                    error_type="retries_exhausted",
                    message=f"the LLM step failed after {attempt - 1 - crashed} attempts"
                    + (f" (and {crashed} more cut short by a process crash)" if crashed else ""),
                    retryable=True,
                )
                raise TurnEnded
            request_id = f"{step_id}|{attempt}"
            window = model_window(turn.model, settings.models)
            await turn.writer.commit(
                [
                    (
                        "step.started",
                        make_payload(
                            "step.started",
                            turn_id=turn_id,
                            step_id=step_id,
                            request_id=request_id,
                            attempt=attempt,
                            context_tokens=est_tokens,
                            context_window=window.context_window if window.known else None,
                        ),
                    )
                ],
                ops=[
                    InsertStep(request_id, step_id, turn_id, digest, attempt),
                    SetStatus("running", ACTIVE, turn_id=turn_id),
                ],
            )
            crash_point("after_step_inflight", settings.crash_at)
            request = ModelRequest(
                system=turn.system_prompt,
                messages=messages,
                tools=tools,
                request_id=request_id,
                max_tokens=min(4096, window.max_output_tokens),
            )
            try:
                response = await self._stream(turn, request, turn_id, step_id, attempt)
            except ProviderError as exc:
                if is_context_overflow(exc) and force_compaction is None:
                    # The provider refused the request as too long: one compaction, one retry.
                    await turn.writer.commit([], ops=[FinishStep(request_id, "failed", exc.message)])
                    return await self.llm_step(turn, force_compaction="overflow")
                if exc.retryable and attempt - crashed < settings.timing.step_max_attempts:
                    metrics().llm_retry(provider_of(turn.model), exc.error_type)
                    delay = self._delay(attempt, getattr(exc, "retry_after_s", None), settings)
                    await turn.writer.commit(
                        [
                            (
                                "llm.retry",
                                make_payload(
                                    "llm.retry",
                                    turn_id=turn_id,
                                    attempt=attempt,
                                    reason=exc.error_type,
                                    delay_ms=max(1, int(delay * 1000)),
                                    error=exc.message,
                                ),
                            )
                        ],
                        ops=[FinishStep(request_id, "failed", exc.message)],
                    )
                    await anyio.sleep(delay)
                    attempt += 1
                    continue
                await turn.fail(
                    error_type=exc.error_type,
                    message=exc.message,
                    retryable=exc.retryable,
                    ops=[FinishStep(request_id, "failed", exc.message)],
                )
                raise TurnEnded from exc
            crash_point("before_step_commit", settings.crash_at)
            await self._commit_response(turn, turn_id, step_id, request_id, attempt, response)
            crash_point("after_step_commit", settings.crash_at)
            return bool(response.parts)

    @staticmethod
    def _delay(attempt: int, retry_after_s: float | None, settings: Any) -> float:
        if retry_after_s is not None and retry_after_s >= 0:
            return float(min(retry_after_s, settings.timing.retry_max_delay_s))
        base = settings.timing.retry_base_delay_s * (2 ** (attempt - 1))
        return float(min(settings.timing.retry_max_delay_s, base * (0.5 + random.random())))

    async def _stream(
        self, turn: Turn, request: ModelRequest, turn_id: str, step_id: str, attempt: int
    ) -> Any:
        provider = await turn.provider()
        name = provider_of(turn.model)
        attrs = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": name,
            "gen_ai.request.model": provider.model,
            "acagent.attempt": attempt,
            "acagent.request_id": request.request_id,
        }
        started = time.monotonic()
        outcome = "error"
        try:
            async with turn.budget.llm_slot():
                with span(f"chat {provider.model}", attrs) as sp:
                    response = await self._stream_once(turn, provider, request, turn_id, step_id, attempt)
                    u = response.usage
                    sp.set_attributes(
                        {
                            "gen_ai.usage.input_tokens": u.input_tokens,
                            "gen_ai.usage.output_tokens": u.output_tokens,
                            "gen_ai.response.finish_reasons": [response.finish_reason],
                        }
                    )
            outcome = "ok"
            return response
        except anyio.get_cancelled_exc_class():
            outcome = "cancelled"
            raise
        finally:
            metrics().llm_request(name, outcome, time.monotonic() - started)

    async def _stream_once(
        self, turn: Turn, provider: Any, request: ModelRequest, turn_id: str, step_id: str, attempt: int
    ) -> Any:
        timing = turn.settings.timing
        deltas = 0
        with anyio.fail_after(timing.llm_timeout_s):
            turn.partial_text = ""
            async with provider.request_stream(request) as stream:
                turn.current_stream = stream
                try:
                    async for event in stream:
                        if isinstance(event, TextDelta) and event.text:
                            turn.writer.delta(
                                "assistant.delta",
                                {
                                    "turn_id": turn_id,
                                    "text": event.text,
                                    "step_id": step_id,
                                    "attempt": attempt,
                                },
                            )
                            deltas += 1
                            if deltas == 2 and turn.settings.crash_at == "mid_stream":
                                await turn.writer.flush()
                                crash_point("mid_stream", turn.settings.crash_at)
                            await turn.writer.backpressure()
                    return stream.get()
                except BaseException:
                    turn.partial_text = stream.partial_text()  # what the user saw, kept on cancel
                    raise
                finally:
                    turn.current_stream = None

    async def _commit_response(
        self, turn: Turn, turn_id: str, step_id: str, request_id: str, attempt: int, response: Any
    ) -> None:
        asked = [p.tool_call_id for p in response.parts if isinstance(p, ToolCallPart) and p.tool_call_id]
        known = await turn.journal.existing_tool_call_ids(turn.session_id, asked) if asked else set()
        parts: list[Any] = []
        for part in response.parts:
            if isinstance(part, ToolCallPart) and (not part.tool_call_id or part.tool_call_id in known):
                part = part.model_copy(update={"tool_call_id": f"call_{uuid.uuid4().hex[:24]}"})
            if isinstance(part, ToolCallPart):
                known.add(part.tool_call_id)
            parts.append(part)
        message = Message(role="assistant", parts=parts)
        events: list[tuple[str, dict[str, Any]]] = []
        ops: list[Any] = [FinishStep(request_id, "done")]
        if parts:
            events.append(
                (
                    "assistant.message",
                    make_payload(
                        "assistant.message",
                        turn_id=turn_id,
                        text=message.text,
                        message=message.model_dump(mode="json"),
                        step_id=step_id,
                    ),
                )
            )
        calls = message.tool_calls
        for idx, call in enumerate(calls):
            tool = turn.tools.get(call.name)
            events.append(
                (
                    "tool.call",
                    make_payload(
                        "tool.call",
                        turn_id=turn_id,
                        tool_call_id=call.tool_call_id,
                        name=call.name,
                        arguments=call.arguments,
                        arguments_error=call.arguments_error,
                    ),
                )
            )
            ops.append(
                InsertToolCall(
                    tool_call_id=call.tool_call_id,
                    turn_id=turn_id,
                    step_id=step_id,
                    idx=idx,
                    name=call.name,
                    arguments=call.arguments,
                    idempotent=bool(tool is not None and tool.idempotent),
                    arguments_error=call.arguments_error,
                )
            )
        usage = response.usage
        usage_op, usage_fields = await turn.budget.record(request_id, turn.model, usage)
        if turn.estimator is not None and usage.input_tokens:
            turn.estimator.calibrate(
                turn.estimator.request_bytes(
                    turn.system_prompt, turn.context.messages, await turn.definitions()
                ),
                usage.input_tokens,
            )
        turn.usage_totals[0] += usage.input_tokens
        turn.usage_totals[1] += usage.output_tokens
        events.append(
            usage_event(
                turn_id,
                usage,
                session_input_tokens=turn.usage_totals[0],
                session_output_tokens=turn.usage_totals[1],
                **usage_fields,
            )
        )
        ops.append(usage_op)
        # F23: a call cut by the output limit carries OUTPUT_LIMIT_ERROR and is never run.
        cut = [c.name for c in calls if c.arguments_error == OUTPUT_LIMIT_ERROR]
        if response.finish_reason == "length" and (cut or not calls):
            where = (
                f" in the middle of the arguments of tool call {cut[0]!r}, which was not run" if cut else ""
            )
            events.append(
                (
                    "error",
                    make_payload(
                        "error",
                        turn_id=turn_id,
                        code="max_tokens",
                        message=f"the reply was cut off at the model's output limit{where}",
                    ),
                )
            )
        events.append(
            (
                "step.finished",
                make_payload(
                    "step.finished",
                    turn_id=turn_id,
                    step_id=step_id,
                    request_id=request_id,
                    attempt=attempt,
                    finish_reason=response.finish_reason,
                ),
            )
        )
        # A reply without tool calls ends the turn: turn.completed rides in this commit (one
        # transaction fewer per turn, benchmarks figure 3) instead of a commit of its own.
        ends = bool(parts) and not calls
        if ends:
            end_events, end_ops = turn.completion(message.text)
            events.extend(end_events)
            ops.extend(end_ops)
        else:
            ops.append(SetStatus("waiting_tool" if calls else "running", ACTIVE, turn_id=turn_id))
        await turn.writer.commit(events, ops=ops)
        if ends:
            turn.completed()


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
