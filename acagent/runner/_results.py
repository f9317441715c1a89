"""Small pure helpers shared by the loop, the tool executor and the turn: tool results, partial text."""

from __future__ import annotations

import json
from typing import Any

import orjson

from acagent._text import clean_value
from acagent.events import make_payload
from acagent.messages import Message, TextPart
from acagent.store import InsertToolCall, ToolCallRow, UpdateToolCall
from acagent.tools import ToolResult

__all__ = [
    "MAX_TOOL_OUTPUT_KEPT",
    "close_open_call",
    "close_row",
    "intent_row",
    "partial_message",
    "result_event",
    "tool_call_arguments",
]

MAX_TOOL_OUTPUT_KEPT = 64 * 1024
"""Bytes of live tool output kept per call for the partial result of an interrupted call."""


def tool_call_arguments(row: ToolCallRow) -> dict[str, Any]:
    """The parsed JSON arguments of a tool-call row (``{}`` when they are not an object)."""
    value = json.loads(row.arguments)
    return value if isinstance(value, dict) else {}


def partial_message(text: str) -> Message | None:
    """The assistant message kept after an interrupted stream (text only), or None if empty."""
    return Message(role="assistant", parts=[TextPart(text=text)]) if text else None


def result_event(turn_id: str, row: ToolCallRow, result: ToolResult) -> tuple[str, dict[str, Any]]:
    """The ``tool.result`` event for a row and its result."""
    return (
        "tool.result",
        make_payload(
            "tool.result",
            turn_id=turn_id,
            tool_call_id=row.tool_call_id,
            name=row.name,
            status=result.status,
            content=result.content,
            is_error=result.is_error,
            exit_code=result.exit_code,
            output_ref=result.data.get("output_ref"),
        ),
    )


def close_row(
    turn_id: str, row: ToolCallRow, result: ToolResult
) -> tuple[tuple[str, dict[str, Any]], UpdateToolCall]:
    """Event and op that move a row to its terminal state with ``result``."""
    return result_event(turn_id, row, result), UpdateToolCall(
        row.tool_call_id,
        "done" if result.status == "ok" else "failed",
        (row.status,),
        (("result_status", result.status),),
    )


def intent_row(session_id: str, op: InsertToolCall) -> ToolCallRow:
    """The row that committing ``op`` wrote, as :meth:`Journal.tool_calls` would read it back
    (the text rule applied, as the commit applies it), so the loop need not read it back."""
    op = clean_value(op)
    return ToolCallRow(
        session_id=session_id,
        tool_call_id=op.tool_call_id,
        turn_id=op.turn_id,
        step_id=op.step_id,
        idx=op.idx,
        name=op.name,
        arguments=orjson.dumps(op.arguments).decode(),
        arguments_error=op.arguments_error,
        status=op.status,
        approval=op.approval,
        approval_note=None,
        runner=None,
        pid=None,
        run_expires_at=None,
        idempotent=int(op.idempotent),
        result_status=None,
    )


def close_open_call(
    row: ToolCallRow, reason: str, output: list[str]
) -> tuple[list[tuple[str, dict[str, Any]]], list[Any]]:
    """Events and ops that close one open call of a cancelled turn (``output``: its live output)."""
    events: list[tuple[str, dict[str, Any]]] = []
    ops: list[Any] = []
    if row.status == "running":
        partial = "".join(output) or "(none)"
        if len(partial) > 4000:
            partial = partial[:1000] + "\n[...]\n" + partial[-2000:]
        text = f"interrupted by user after start; partial output: {partial}"
        if reason == "shutdown":
            text = f"interrupted when acagent shut down; it may or may not have taken effect; partial output: {partial}"
    elif row.status == "waiting_user":
        text = "not run: the turn was cancelled while waiting for approval"
        events.append(
            (
                "approval.resolved",
                make_payload(
                    "approval.resolved",
                    turn_id=row.turn_id,
                    tool_call_id=row.tool_call_id,
                    decision="cancelled",
                    reason="the turn was cancelled",
                ),
            )
        )
        ops.append(
            UpdateToolCall(row.tool_call_id, "waiting_user", ("waiting_user",), (("approval", "cancelled"),))
        )
    else:
        text = "not started: the turn was cancelled"
    event, op = close_row(row.turn_id, row, ToolResult(text, status="interrupted"))
    events.append(event)
    ops.append(op)
    return events, ops
