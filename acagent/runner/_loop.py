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

Recovery rules per step attempt: done with the same context digest → no-op (no re-wake);
inflight (its process died) → retry with attempt+1 and an ``llm.retry`` event; attempts are
bounded by ``step_max_attempts``.
"""

from __future__ import annotations

import json
import logging
import random
import uuid
from typing import TYPE_CHECKING, Any

import anyio

from acagent.errors import ProviderError
from acagent.events import make_payload
from acagent.messages import Message, TextPart, ToolCallPart
from acagent.providers._base import ModelRequest, TextDelta, ToolDefinition
from acagent.runner._writer import crash_point
from acagent.store import (
    ACTIVE,
    AddUsage,
    FinishStep,
    InsertStep,
    InsertToolCall,
    SetStatus,
    ToolCallRow,
)

if TYPE_CHECKING:
    from acagent.runner._runner import InProcessRunner

__all__ = ["AgenticLoop", "TurnEnded"]

log = logging.getLogger("acagent.loop")


class TurnEnded(Exception):
    """Raised inside the loop when the turn reached a terminal event (failed)."""


class AgenticLoop:
    """The stateless turn algorithm (see module docstring)."""

    async def run_turn(self, rt: InProcessRunner, turn_id: str) -> None:
        """Drive the turn ``turn_id`` to ``turn.completed`` (or raise :class:`TurnEnded`)."""
        while True:
            await refresh_tools(rt, turn_id)
            open_calls = await rt.journal.tool_calls(rt.session_id, turn_id=turn_id, open_only=True)
            if open_calls:
                await rt.tools_runner.run_open_calls(rt, turn_id, open_calls)
                crash_point("after_tool_result_before_wake", rt.settings.crash_at)
                continue
            messages = rt.context.messages
            last = messages[-1] if messages else None
            if last is not None and last.role == "assistant" and not last.tool_calls:
                await self._complete(rt, turn_id, last.text)
                return
            if not await self.llm_step(rt, turn_id):
                await self._complete(rt, turn_id, "")
                return

    async def _complete(self, rt: InProcessRunner, turn_id: str, text: str) -> None:
        await rt.writer.commit(
            [("turn.completed", make_payload("turn.completed", turn_id=turn_id, text=text))],
            ops=[SetStatus("done", ACTIVE, turn_id=turn_id)],
        )
        rt.mark_finishing()
        await self.maybe_checkpoint(rt)

    async def maybe_checkpoint(self, rt: InProcessRunner) -> bool:
        """Write a ``checkpoint`` (full context) when the tail outgrew the last one.

        Policy: checkpoint when the context bytes committed since the last checkpoint exceed
        ``checkpoint_ratio`` × that checkpoint's size (and 4 KiB). Each checkpoint is then at
        least (1 + ratio) × the previous one, so their total size is linear in the session
        length (amortised O(1) per event), and resume reads one checkpoint plus a bounded tail.
        """
        row = await rt.journal.get_session(rt.session_id)
        if row.tail_bytes <= max(4096, rt.settings.checkpoint_ratio * row.checkpoint_bytes):
            return False
        messages = [m.model_dump(mode="json") for m in rt.context.messages]
        await rt.writer.commit(
            [("checkpoint", make_payload("checkpoint", upto_seq=rt.context.last_seq, messages=messages))]
        )
        return True

    def _tool_definitions(self, rt: InProcessRunner) -> list[ToolDefinition]:
        if not rt.tools_enabled:
            return []
        if rt.tool_definitions is None:  # JSON schemas are built once per runner
            rt.tool_definitions = [
                ToolDefinition(t.name, t.description, t.parameters_schema()) for t in rt.tools.values()
            ]
        return rt.tool_definitions

    async def llm_step(self, rt: InProcessRunner, turn_id: str) -> bool:
        """Make (or recover) one LLM call for the current context and commit its result.

        Returns:
            False when the model produced an empty reply (nothing to add to the context).

        Raises:
            TurnEnded: the step failed for good (``turn.failed`` committed).
        """
        settings = rt.settings
        messages = list(rt.context.messages)
        digest = rt.context.digest(rt.system_prompt)
        step_id = f"{rt.session_id}|{rt.context.last_seq}|{digest[:16]}"
        attempts = await rt.journal.step_attempts(rt.session_id, step_id)
        attempt = 1
        if attempts:
            prev = attempts[-1]
            if prev.status == "done":
                log.info("step %s already done; early wake is a no-op", step_id)
                return True
            attempt = prev.attempt + 1
            if prev.status == "inflight":
                # Its process died mid-call: the retry is counted and visible.
                await rt.writer.commit(
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
                    ops=[FinishStep(prev.request_id, "failed", "process died")],
                )
        tools = self._tool_definitions(rt)
        while True:
            if attempt > settings.timing.step_max_attempts:
                await rt.fail_turn(
                    turn_id,
                    error_type="retries_exhausted",
                    message=f"the LLM step failed after {attempt - 1} attempts",
                    retryable=True,
                )
                raise TurnEnded
            request_id = f"{step_id}|{attempt}"
            await rt.writer.commit(
                [
                    (
                        "step.started",
                        make_payload(
                            "step.started",
                            turn_id=turn_id,
                            step_id=step_id,
                            request_id=request_id,
                            attempt=attempt,
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
                system=rt.system_prompt, messages=messages, tools=tools, request_id=request_id
            )
            try:
                response = await self._stream(rt, request, turn_id, step_id, attempt)
            except ProviderError as exc:
                if exc.retryable and attempt < settings.timing.step_max_attempts:
                    delay = self._delay(attempt, getattr(exc, "retry_after_s", None), settings)
                    await rt.writer.commit(
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
                await rt.fail_turn(
                    turn_id,
                    error_type=exc.error_type,
                    message=exc.message,
                    retryable=exc.retryable,
                    ops=[FinishStep(request_id, "failed", exc.message)],
                )
                raise TurnEnded from exc
            crash_point("before_step_commit", settings.crash_at)
            await self._commit_response(rt, turn_id, step_id, request_id, attempt, response)
            crash_point("after_step_commit", settings.crash_at)
            return bool(response.parts)

    @staticmethod
    def _delay(attempt: int, retry_after_s: float | None, settings: Any) -> float:
        if retry_after_s is not None and retry_after_s >= 0:
            return float(min(retry_after_s, settings.timing.retry_max_delay_s))
        base = settings.timing.retry_base_delay_s * (2 ** (attempt - 1))
        return float(min(settings.timing.retry_max_delay_s, base * (0.5 + random.random())))

    async def _stream(
        self, rt: InProcessRunner, request: ModelRequest, turn_id: str, step_id: str, attempt: int
    ) -> Any:
        timing = rt.settings.timing
        provider = await rt.get_provider()
        deltas = 0
        with anyio.fail_after(timing.llm_timeout_s):
            rt.partial_text = ""
            async with provider.request_stream(request) as stream:
                rt.current_stream = stream
                try:
                    async for event in stream:
                        if isinstance(event, TextDelta) and event.text:
                            rt.writer.delta(
                                "assistant.delta",
                                {
                                    "turn_id": turn_id,
                                    "text": event.text,
                                    "step_id": step_id,
                                    "attempt": attempt,
                                },
                            )
                            deltas += 1
                            if deltas == 2 and rt.settings.crash_at == "mid_stream":
                                await rt.writer.flush()
                                crash_point("mid_stream", rt.settings.crash_at)
                            await rt.writer.backpressure()
                    return stream.get()
                except BaseException:
                    rt.partial_text = stream.partial_text()  # what the user saw, kept on cancel
                    raise
                finally:
                    rt.current_stream = None

    async def _commit_response(
        self, rt: InProcessRunner, turn_id: str, step_id: str, request_id: str, attempt: int, response: Any
    ) -> None:
        asked = [p.tool_call_id for p in response.parts if isinstance(p, ToolCallPart) and p.tool_call_id]
        known = await rt.journal.existing_tool_call_ids(rt.session_id, asked) if asked else set()
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
            tool = rt.tools.get(call.name)
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
        rt.usage_totals[0] += usage.input_tokens
        rt.usage_totals[1] += usage.output_tokens
        events.append(
            (
                "usage",
                make_payload(
                    "usage",
                    turn_id=turn_id,
                    input_tokens=usage.input_tokens,
                    output_tokens=usage.output_tokens,
                    total_tokens=usage.input_tokens + usage.output_tokens,
                    session_input_tokens=rt.usage_totals[0],
                    session_output_tokens=rt.usage_totals[1],
                ),
            )
        )
        ops.append(AddUsage(usage.input_tokens, usage.output_tokens))
        if response.finish_reason == "length" and not calls:
            events.append(
                (
                    "error",
                    make_payload(
                        "error",
                        turn_id=turn_id,
                        code="max_tokens",
                        message="the reply was cut off at the model's output limit",
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
        ops.append(SetStatus("waiting_tool" if calls else "running", ACTIVE, turn_id=turn_id))
        await rt.writer.commit(events, ops=ops)


async def refresh_tools(rt: InProcessRunner, turn_id: str) -> None:
    """Bring a live tool set (``acagent.mcp.ToolSet``: MCP tools) up to date before tools run or
    the model is called; its notices (a server failed, crashed, changed its tools) are recorded
    once each as ``error`` events. A plain ``dict`` of tools has no ``refresh`` and is left alone.
    """
    refresh = getattr(rt.tools, "refresh", None)
    if refresh is None:
        return
    changed, notices = await refresh()
    if changed:
        rt.tool_definitions = None
    if notices:
        events = [("error", make_payload("error", turn_id=turn_id, code=c, message=m)) for c, m in notices]
        await rt.writer.commit(events)


def tool_call_arguments(row: ToolCallRow) -> dict[str, Any]:
    """The parsed JSON arguments of a tool-call row."""
    value = json.loads(row.arguments)
    return value if isinstance(value, dict) else {}


def partial_message(text: str) -> Message | None:
    """The assistant message kept after an interrupted stream (text only), or None if empty."""
    return Message(role="assistant", parts=[TextPart(text=text)]) if text else None
