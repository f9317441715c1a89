"""One LLM reply: stream it from the provider (deltas to the writer), then commit it.

:func:`stream_reply` reads the provider's stream inside the call's timeout, the budget's call
slot and a GenAI span; :func:`commit_reply` commits, in one transaction, the assistant message,
the tool-call intents (``tool_call`` rows ``dispatched``), ``usage``, ``step.finished`` and the
status (invariants 2 and 3). Used by :class:`~acagent.runner._loop.AgenticLoop` only.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import anyio

from acagent.events import make_payload
from acagent.messages import Message, ToolCallPart
from acagent.obs import metrics, provider_of, span
from acagent.providers._base import ModelRequest, Response, TextDelta
from acagent.providers._parts import OUTPUT_LIMIT_ERROR
from acagent.runner._budget import usage_event
from acagent.runner._results import intent_row
from acagent.runner._turn import Turn
from acagent.runner._writer import crash_point
from acagent.store import ACTIVE, FinishStep, InsertToolCall, SetStatus

__all__ = ["commit_reply", "stream_reply"]

Events = list[tuple[str, dict[str, Any]]]


async def stream_reply(turn: Turn, request: ModelRequest, step_id: str, attempt: int) -> Response:
    """Stream ``request`` to its end and return the reply (metrics and a span around it).

    Raises:
        ProviderError: as the provider raised it; TimeoutError past ``llm_timeout_s``.
    """
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
                response = await _read_stream(turn, provider, request, step_id, attempt)
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


async def _read_stream(
    turn: Turn, provider: Any, request: ModelRequest, step_id: str, attempt: int
) -> Response:
    """Read the stream: text deltas go to the writer; the partial text is kept on any exit."""
    settings = turn.settings
    deltas = 0
    with anyio.fail_after(settings.timing.llm_timeout_s):
        turn.partial_text = ""
        async with provider.request_stream(request) as stream:
            turn.current_stream = stream
            try:
                async for event in stream:
                    if isinstance(event, TextDelta) and event.text:
                        turn.writer.delta(
                            "assistant.delta",
                            {
                                "turn_id": turn.turn_id,
                                "text": event.text,
                                "step_id": step_id,
                                "attempt": attempt,
                            },
                        )
                        deltas += 1
                        if deltas == 2 and settings.crash_at == "mid_stream":
                            await turn.writer.flush()
                            crash_point("mid_stream", settings.crash_at)
                        await turn.writer.backpressure()
                response: Response = stream.get()
                return response
            except BaseException:
                turn.partial_text = stream.partial_text()  # what the user saw, kept on cancel
                raise
            finally:
                turn.current_stream = None


async def commit_reply(turn: Turn, step_id: str, request_id: str, attempt: int, response: Response) -> None:
    """Commit the reply of attempt ``attempt`` in one transaction (see the module docstring)."""
    turn_id = turn.turn_id
    message = Message(role="assistant", parts=await _unique_call_ids(turn, response))
    events: Events = []
    ops: list[Any] = [FinishStep(request_id, "done")]
    if message.parts:
        payload = make_payload(
            "assistant.message",
            turn_id=turn_id,
            text=message.text,
            message=message.model_dump(mode="json"),
            step_id=step_id,
        )
        events.append(("assistant.message", payload))
    calls = message.tool_calls
    _add_intents(turn, step_id, calls, events, ops)
    await _add_usage(turn, request_id, response, events, ops)
    events += _cut_off_note(turn_id, response, calls)
    finished = make_payload(
        "step.finished",
        turn_id=turn_id,
        step_id=step_id,
        request_id=request_id,
        attempt=attempt,
        finish_reason=response.finish_reason,
    )
    events.append(("step.finished", finished))
    # A reply without tool calls ends the turn: turn.completed rides in this commit (one
    # transaction fewer per turn, benchmarks figure 3) instead of a commit of its own.
    ends = bool(message.parts) and not calls
    if ends:
        end_events, end_ops = turn.completion(message.text)
        events.extend(end_events)
        ops.extend(end_ops)
    else:
        ops.append(SetStatus("waiting_tool" if calls else "running", ACTIVE, turn_id=turn_id))
    await turn.commit(events, ops)
    if ends:
        turn.completed()
        return
    # the loop's next look at this turn's open calls: exactly the intents just committed
    turn.open_calls = [intent_row(turn.session_id, op) for op in ops if isinstance(op, InsertToolCall)]


async def _unique_call_ids(turn: Turn, response: Response) -> list[Any]:
    """The reply's parts; a tool call without an id, or with one already used, gets a new id."""
    asked = [p.tool_call_id for p in response.parts if isinstance(p, ToolCallPart) and p.tool_call_id]
    known = await turn.journal.existing_tool_call_ids(turn.session_id, asked) if asked else set()
    parts: list[Any] = []
    for part in response.parts:
        if isinstance(part, ToolCallPart):
            if not part.tool_call_id or part.tool_call_id in known:
                part = part.model_copy(update={"tool_call_id": f"call_{uuid.uuid4().hex[:24]}"})
            known.add(part.tool_call_id)
        parts.append(part)
    return parts


def _add_intents(turn: Turn, step_id: str, calls: list[ToolCallPart], events: Events, ops: list[Any]) -> None:
    """A ``tool.call`` event and a ``dispatched`` intent row per call (invariant 3)."""
    for idx, call in enumerate(calls):
        tool = turn.tools.get(call.name)
        payload = make_payload(
            "tool.call",
            turn_id=turn.turn_id,
            tool_call_id=call.tool_call_id,
            name=call.name,
            arguments=call.arguments,
            arguments_error=call.arguments_error,
        )
        events.append(("tool.call", payload))
        ops.append(
            InsertToolCall(
                tool_call_id=call.tool_call_id,
                turn_id=turn.turn_id,
                step_id=step_id,
                idx=idx,
                name=call.name,
                arguments=call.arguments,
                idempotent=bool(tool is not None and tool.idempotent),
                arguments_error=call.arguments_error,
            )
        )


async def _add_usage(turn: Turn, request_id: str, response: Response, events: Events, ops: list[Any]) -> None:
    """The ``usage`` event and row; calibrates the token estimator with the real input count."""
    usage = response.usage
    usage_op, usage_fields = await turn.budget.record(request_id, turn.model, usage)
    if turn.estimator is not None and usage.input_tokens:
        sent = turn.estimator.request_bytes(
            turn.system_prompt, turn.context.messages, await turn.definitions()
        )
        turn.estimator.calibrate(sent, usage.input_tokens)
    turn.usage_totals[0] += usage.input_tokens
    turn.usage_totals[1] += usage.output_tokens
    events.append(
        usage_event(
            turn.turn_id,
            usage,
            session_input_tokens=turn.usage_totals[0],
            session_output_tokens=turn.usage_totals[1],
            **usage_fields,
        )
    )
    ops.append(usage_op)


def _cut_off_note(turn_id: str, response: Response, calls: list[ToolCallPart]) -> Events:
    """An ``error`` event when the reply hit the output limit (F23: a cut call is never run)."""
    cut = [c.name for c in calls if c.arguments_error == OUTPUT_LIMIT_ERROR]
    if response.finish_reason != "length" or not (cut or not calls):
        return []
    where = f" in the middle of the arguments of tool call {cut[0]!r}, which was not run" if cut else ""
    message = f"the reply was cut off at the model's output limit{where}"
    return [("error", make_payload("error", turn_id=turn_id, code="max_tokens", message=message))]
