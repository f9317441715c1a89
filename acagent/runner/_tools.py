"""ToolExecutor: run a step's tool calls from their intent rows, one at a time, in order.

Invariant 3 (tool intent first): a ``tool_call`` row exists (``dispatched``) before a tool runs;
the row goes ``dispatched → running → done|failed`` (or through ``waiting_user`` for approval), and
terminal rows never change. What a dead process left behind is resolved here too:

- ``dispatched`` (never started) → run it;
- ``waiting_user`` → keep waiting (the pending approval survives restarts; a decision recorded
  before the crash is honoured);
- ``running`` → kill its recorded process group; re-run only if the tool is idempotent, otherwise
  close it with an ``interrupted`` result saying it may or may not have taken effect.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import anyio

from acagent.events import make_payload
from acagent.runner._loop import tool_call_arguments
from acagent.runner._writer import crash_point
from acagent.store import ACTIVE, SetApprovalRules, SetStatus, ToolCallRow, UpdateToolCall
from acagent.tools import ToolContext, ToolResult, kill_process_group, validate_arguments

if TYPE_CHECKING:
    from acagent.runner._runner import InProcessRunner

__all__ = ["ToolExecutor", "result_event"]

INTERRUPTED_BY_CRASH = (
    "interrupted: the process running this call stopped before it finished; "
    "the call may or may not have taken effect"
)


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


class ToolExecutor:
    """Runs tool calls for one runner (see module docstring)."""

    async def run_open_calls(self, rt: InProcessRunner, turn_id: str, rows: list[ToolCallRow]) -> None:
        """Bring every row to a terminal state, in order."""
        for row in rows:
            await self._run_one(rt, turn_id, row)

    async def _finish(self, rt: InProcessRunner, turn_id: str, row: ToolCallRow, result: ToolResult) -> None:
        event, op = close_row(turn_id, row, result)
        await rt.writer.commit([event], ops=[op])

    async def _run_one(self, rt: InProcessRunner, turn_id: str, row: ToolCallRow) -> None:
        timing = rt.settings.timing
        if row.status == "running":
            if row.pid:
                await kill_process_group(row.pid, timing.tool_kill_grace_s)
            if not row.idempotent:
                await self._finish(rt, turn_id, row, ToolResult(INTERRUPTED_BY_CRASH, status="interrupted"))
                return
            await rt.writer.commit([], ops=[UpdateToolCall(row.tool_call_id, "dispatched", ("running",))])
            row.status = "dispatched"
        tool = rt.tools.get(row.name)
        args: Any = None
        if row.status == "dispatched":
            crash_point("after_tool_intent", rt.settings.crash_at)
            error = None
            if tool is None:
                error = f"unknown tool {row.name!r}; available: {', '.join(sorted(rt.tools))}"
            elif row.arguments_error:
                error = (
                    f"the tool call's arguments were not valid JSON, so it was not run: {row.arguments_error}"
                )
            else:
                args, error = validate_arguments(tool, tool_call_arguments(row))
            if error is not None or tool is None:
                await self._finish(rt, turn_id, row, ToolResult(error or "invalid call", status="error"))
                return
            ctx = rt.tool_context(row)
            interactive = getattr(tool, "interactive", False)
            if interactive and not rt.interactive:
                await self._finish(
                    rt, turn_id, row, ToolResult("no interactive user is attached to answer", status="error")
                )
                return
            if interactive or rt.policy.needs_approval(tool, args, ctx, rt.settings.auto_approve):
                summary = tool.approval_summary(args)
                payload = make_payload(
                    "approval.requested",
                    turn_id=turn_id,
                    tool_call_id=row.tool_call_id,
                    name=row.name,
                    arguments=tool_call_arguments(row),
                    command=summary.get("command") if row.name == "shell" else None,
                    kind="question" if interactive else "tool",
                    question=summary.get("question") if interactive else None,
                    notes=[] if interactive else rt.policy.approval_notes(tool, args, ctx),
                )
                await rt.writer.commit(
                    [("approval.requested", payload)],
                    ops=[
                        UpdateToolCall(
                            row.tool_call_id, "waiting_user", ("dispatched",), (("approval", "pending"),)
                        ),
                        SetStatus("waiting_user", ACTIVE, turn_id=turn_id),
                    ],
                )
                row.status, row.approval = "waiting_user", "pending"
        if row.status == "waiting_user":
            crash_point("waiting_approval", rt.settings.crash_at)
            decision, note = await rt.wait_for_approval(row)
            resolved = (
                "approval.resolved",
                make_payload(
                    "approval.resolved",
                    turn_id=turn_id,
                    tool_call_id=row.tool_call_id,
                    decision=decision
                    if decision in ("allow", "deny", "always", "timeout", "answered")
                    else "allow",
                    reason=note if decision != "answered" else None,
                ),
            )
            if decision in ("deny", "timeout"):
                text = "not run: denied by the user" if decision == "deny" else "not run: approval timed out"
                result = ToolResult(
                    text + (f" ({note})" if note and decision == "deny" else ""), status="denied"
                )
                event, op = close_row(turn_id, row, result)
                await rt.writer.commit(
                    [resolved, event], ops=[op, SetStatus("waiting_tool", ACTIVE, turn_id=turn_id)]
                )
                return
            ops: list[Any] = [
                UpdateToolCall(row.tool_call_id, "dispatched", ("waiting_user",)),
                SetStatus("waiting_tool", ACTIVE, turn_id=turn_id),
            ]
            if decision == "always" and tool is not None:
                rule = rt.policy.rule_for_always(
                    tool, args if args is not None else tool_call_arguments(row), rt.tool_context(row)
                )
                if rule is not None:
                    rt.policy.add_rule(rule)
                    ops.append(SetApprovalRules(rt.policy.to_json()))
            await rt.writer.commit([resolved], ops=ops)
            row.status = "dispatched"
            if decision == "answered":
                rt.answers[row.tool_call_id] = note or ""
        if tool is None:  # pragma: no cover  # rows reach here only with a known tool
            return
        if args is None:
            args, error = validate_arguments(tool, tool_call_arguments(row))
            if args is None:
                await self._finish(rt, turn_id, row, ToolResult(error or "invalid call", status="error"))
                return
        await self._execute(rt, turn_id, row, tool, args)

    async def _execute(
        self, rt: InProcessRunner, turn_id: str, row: ToolCallRow, tool: Any, args: Any
    ) -> None:
        timing = rt.settings.timing
        started = make_payload("tool.started", turn_id=turn_id, tool_call_id=row.tool_call_id, name=row.name)
        # The workspace-write generation advances in the same commit (F40): durable before the
        # call can write anything, so a crash or cancel mid-call never loses it.
        generation: list[Any] = []
        if rt.policy.before_run(tool, args, rt.tool_context(row)):
            generation.append(SetApprovalRules(rt.policy.to_json()))
        await rt.writer.commit(
            [("tool.started", started)],
            ops=[
                *generation,
                UpdateToolCall(
                    row.tool_call_id,
                    "running",
                    ("dispatched",),
                    (
                        ("runner", rt.worker_id),
                        ("run_expires_at", time.time() + timing.tool_redelivery_idle_s),
                    ),
                ),
                SetStatus("waiting_tool", ACTIVE, turn_id=turn_id),
            ],
        )
        row.status = "running"
        rt.running_calls[row.tool_call_id] = row
        pid_box: list[int] = []
        pid_ready = anyio.Event()

        def on_pid(pid: int) -> None:
            pid_box.append(pid)
            pid_ready.set()

        ctx: ToolContext = rt.tool_context(row, on_process_started=on_pid)
        try:
            async with anyio.create_task_group() as tg:

                async def record_pid() -> None:
                    await pid_ready.wait()
                    await rt.writer.commit(
                        [],
                        ops=[
                            UpdateToolCall(row.tool_call_id, "running", ("running",), (("pid", pid_box[0]),))
                        ],
                    )
                    crash_point("mid_tool", rt.settings.crash_at)

                tg.start_soon(record_pid)
                result = await tool.run(args, ctx)
                tg.cancel_scope.cancel()
        finally:
            rt.running_calls.pop(row.tool_call_id, None)
        await rt.writer.flush()
        await self._finish(rt, turn_id, row, result)
        rt.tool_output.pop(row.tool_call_id, None)
