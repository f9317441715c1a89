"""ToolExecutor: run a step's tool calls from their intent rows, one at a time, in order.

Approvals of one step are requested all at once (F46): the user answers them in any order, and
each call runs, in order, only after its own decision.

Invariant 3 (tool intent first): a ``tool_call`` row exists (``dispatched``) before a tool runs;
the row goes ``dispatched → running → done|failed`` (or through ``waiting_user`` for approval), and
terminal rows never change. What a dead process left behind is resolved here too:

- ``dispatched`` (never started) → run it;
- ``waiting_user`` → keep waiting (the pending approval survives restarts; a decision recorded
  before the crash is honoured);
- ``running`` → kill its recorded process group and every process started with its spawn marker; re-run only if the tool is idempotent, otherwise
  close it with an ``interrupted`` result saying it may or may not have taken effect.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from typing import Any

import anyio

from acagent.events import make_payload
from acagent.obs import metrics, span
from acagent.providers._parts import OUTPUT_LIMIT_ERROR
from acagent.runner._results import close_row, result_event, tool_call_arguments
from acagent.runner._turn import Turn
from acagent.runner._writer import crash_point
from acagent.store import ACTIVE, SetApprovalRules, SetStatus, ToolCallRow, UpdateToolCall
from acagent.tools import ToolContext, ToolResult, kill_call_processes, validate_arguments

__all__ = ["ToolExecutor", "close_row", "result_event"]

INTERRUPTED_BY_CRASH = (
    "interrupted: the process running this call stopped before it finished; "
    "the call may or may not have taken effect"
)


class ToolExecutor:
    """Runs the tool calls of a turn (see module docstring)."""

    async def run_open_calls(self, turn: Turn, rows: list[ToolCallRow]) -> None:
        """Bring every row of ``turn`` to a terminal state (F46: approvals asked all at once).

        First every call is checked and every approval it needs is requested, so the user sees all
        of a step's requests together and may answer them in any order; then the calls are run in
        order, each only after its own decision. A call admitted without asking is judged again
        right before it runs (an earlier call of the step may have written the workspace, F40).
        """
        # ``wakes``: the step's last open call, the others terminal: the model is woken right
        # after its result's commit, which carries the next step's intent (Turn.commit)
        prepared = []
        for i, row in enumerate(rows):
            wakes = i == len(rows) - 1 and all(r.terminal for r in rows[:i])
            prepared.append((row, await self._prepare(turn, turn.turn_id, row, wakes=wakes)))
        for i, (row, ready) in enumerate(prepared):
            if ready is not None:
                wakes = i == len(prepared) - 1 and all(r.terminal for r, _ in prepared[:i])
                attrs = {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": row.name,
                    "gen_ai.tool.call.id": row.tool_call_id,
                    "gen_ai.tool.type": "extension" if row.name.startswith("mcp__") else "function",
                }
                with span(f"execute_tool {row.name}", attrs):
                    await self._settle(turn, turn.turn_id, row, *ready, wakes=wakes)

    async def _finish(
        self,
        turn: Turn,
        turn_id: str,
        row: ToolCallRow,
        result: ToolResult,
        *,
        first: tuple[list[Any], list[Any]] = ([], []),
        wakes: bool = False,
    ) -> None:
        """Commit the call's result (after ``first``: events and ops of the same transaction;
        ``wakes``: the step's last result, which carries the next step's intent: ``Turn.commit``)."""
        event, op = close_row(turn_id, row, result)
        await turn.commit([*first[0], event], [*first[1], op], wakes=wakes)
        row.status = op.to
        metrics().tool_call(row.name, result.status)
        if result.status == "interrupted":
            metrics().tool_interrupted(row.name)

    async def _prepare(
        self, turn: Turn, turn_id: str, row: ToolCallRow, *, wakes: bool = False
    ) -> tuple[Any, Any] | None:
        """Recover a ``running`` row, validate a ``dispatched`` one and request its approval
        (``wakes``: a result given here is the step's last, see :meth:`_finish`).

        Returns:
            ``(tool, args)`` to settle, or None once the row is terminal (args may be None for a
            row already waiting since an earlier process).
        """
        timing = turn.settings.timing
        if row.status == "running":
            # the recorded group (while the run lease holds), and every process carrying the call's
            # spawn marker (F45) — only on the host that ran it: a pid recorded by another
            # daemon's host means nothing here
            if row.host in (None, socket.gethostname()):
                await kill_call_processes(
                    turn.session_id, row.tool_call_id, row.trusted_pgid(), timing.tool_kill_grace_s
                )
            if not row.idempotent:
                result = ToolResult(INTERRUPTED_BY_CRASH, status="interrupted")
                await self._finish(turn, turn_id, row, result, wakes=wakes)
                return None
            await turn.writer.commit([], ops=[UpdateToolCall(row.tool_call_id, "dispatched", ("running",))])
            row.status = "dispatched"
        tool = turn.tools.get(row.name)
        if row.status != "dispatched":
            return (tool, None) if tool is not None else None
        crash_point("after_tool_intent", turn.settings.crash_at)
        error = None
        args: Any = None
        if tool is None:
            error = f"unknown tool {row.name!r}; available: {', '.join(sorted(turn.tools))}"
        elif row.arguments_error == OUTPUT_LIMIT_ERROR:  # F23: cut by the output limit
            error = f"the tool call was {OUTPUT_LIMIT_ERROR}"
        elif row.arguments_error:
            error = f"the tool call's arguments were not valid JSON, so it was not run: {row.arguments_error}"
        else:
            args, error = validate_arguments(tool, tool_call_arguments(row))
        if error is not None or tool is None:
            await self._finish(
                turn, turn_id, row, ToolResult(error or "invalid call", status="error"), wakes=wakes
            )
            return None
        interactive = getattr(tool, "interactive", False)
        if interactive and not turn.interactive:
            result = ToolResult("no interactive user is attached to answer", status="error")
            await self._finish(turn, turn_id, row, result, wakes=wakes)
            return None
        if interactive or turn.policy.needs_approval(
            tool, args, turn.tool_context(row), turn.settings.auto_approve
        ):
            await self._request(turn, turn_id, row, tool, args)
        return tool, args

    async def _request(self, turn: Turn, turn_id: str, row: ToolCallRow, tool: Any, args: Any) -> None:
        """Commit ``approval.requested`` and move the row (and the session) to ``waiting_user``."""
        interactive = getattr(tool, "interactive", False)
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
            notes=[] if interactive else turn.policy.approval_notes(tool, args, turn.tool_context(row)),
            always=None if interactive else turn.policy.always_covers(tool, args, turn.tool_context(row)),
        )
        await turn.writer.commit(
            [("approval.requested", payload)],
            ops=[
                UpdateToolCall(row.tool_call_id, "waiting_user", ("dispatched",), (("approval", "pending"),)),
                SetStatus("waiting_user", ACTIVE, turn_id=turn_id),
            ],
        )
        row.status, row.approval = "waiting_user", "pending"

    async def _settle(
        self, turn: Turn, turn_id: str, row: ToolCallRow, tool: Any, args: Any, *, wakes: bool = False
    ) -> None:
        """Wait for the row's own decision if it needs one, then run it (or close it denied);
        ``wakes``: its result is the step's last (see :meth:`_finish`)."""
        judge = row.status == "dispatched" and args is not None and not getattr(tool, "interactive", False)
        if judge and turn.policy.needs_approval(
            tool, args, turn.tool_context(row), turn.settings.auto_approve
        ):
            await self._request(turn, turn_id, row, tool, args)  # judged again: see run_open_calls
        if row.status == "waiting_user":
            await self._admit_if_covered(turn, row, tool, args)
            if not await self._decide(turn, turn_id, row, tool, args):
                return
        if args is None:
            args, error = validate_arguments(tool, tool_call_arguments(row))
            if args is None:
                result = ToolResult(error or "invalid call", status="error")
                await self._finish(turn, turn_id, row, result, wakes=wakes)
                return
        await self._execute(turn, turn_id, row, tool, args, wakes=wakes)

    async def _admit_if_covered(self, turn: Turn, row: ToolCallRow, tool: Any, args: Any) -> None:
        """Allow a call still waiting for its answer that a rule now admits: an ``always`` given
        to an earlier call of the step covers it (F131; before, the user was asked again for what
        the prompt had said ``always`` would cover). An answer already given stands."""
        if args is None or getattr(tool, "interactive", False) or row.approval != "pending":
            return
        if turn.policy.needs_approval(tool, args, turn.tool_context(row), turn.settings.auto_approve):
            return
        from acagent.errors import ApprovalNotFound

        try:
            await turn.journal.resolve_approval(
                turn.session_id, row.tool_call_id, "allow", note="covered by an earlier `always` answer"
            )
        except ApprovalNotFound:
            pass  # answered meanwhile: that decision is what _decide reads

    async def _decide(self, turn: Turn, turn_id: str, row: ToolCallRow, tool: Any, args: Any) -> bool:
        """Wait for the decision on a ``waiting_user`` row; True if it may run."""
        crash_point("waiting_approval", turn.settings.crash_at)
        if (await turn.journal.get_session(turn.session_id)).status != "waiting_user":
            # an earlier call of the step ran meanwhile (waiting_tool): the session waits again
            await turn.writer.commit([], ops=[SetStatus("waiting_user", ACTIVE, turn_id=turn_id)])
        decision, note = await turn.wait_for_approval(row)
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
            result = ToolResult(text + (f" ({note})" if note and decision == "deny" else ""), status="denied")
            event, op = close_row(turn_id, row, result)
            await turn.commit([resolved, event], [op, SetStatus("waiting_tool", ACTIVE, turn_id=turn_id)])
            row.status = op.to
            return False
        ops: list[Any] = [
            UpdateToolCall(row.tool_call_id, "dispatched", ("waiting_user",)),
            SetStatus("waiting_tool", ACTIVE, turn_id=turn_id),
        ]
        if decision == "always":
            rule = turn.policy.rule_for_always(
                tool, args if args is not None else tool_call_arguments(row), turn.tool_context(row)
            )
            if rule is not None:
                turn.policy.add_rule(rule)
                ops.append(SetApprovalRules(turn.policy.to_json()))
        await turn.writer.commit([resolved], ops=ops)
        row.status = "dispatched"
        if decision == "answered":
            turn.answers[row.tool_call_id] = note or ""
        return True

    async def _execute(
        self, turn: Turn, turn_id: str, row: ToolCallRow, tool: Any, args: Any, *, wakes: bool = False
    ) -> None:
        timing = turn.settings.timing
        started = make_payload("tool.started", turn_id=turn_id, tool_call_id=row.tool_call_id, name=row.name)
        # The workspace-write generation advances in the same commit (F40): durable before the
        # call can write anything, so a crash or cancel mid-call never loses it.
        generation: list[Any] = []
        if turn.policy.before_run(tool, args, turn.tool_context(row)):
            generation.append(SetApprovalRules(turn.policy.to_json()))
        start = _Start(
            turn,
            row,
            [("tool.started", started)],
            [
                *generation,
                UpdateToolCall(
                    row.tool_call_id,
                    "running",
                    ("dispatched",),
                    (
                        ("runner", turn.worker_id),
                        ("host", socket.gethostname()),
                        ("runner_pid", os.getpid()),
                        ("run_expires_at", time.time() + timing.tool_redelivery_idle_s),
                    ),
                ),
                SetStatus("waiting_tool", ACTIVE, turn_id=turn_id),
            ],
        )
        deferred = not generation and may_defer_start(tool)
        if not deferred:
            await start.commit()
        turn.running_calls[row.tool_call_id] = row
        pid_box: list[int] = []
        pid_ready = anyio.Event()

        def on_pid(pid: int) -> None:
            pid_box.append(pid)
            pid_ready.set()
            start.now()

        ctx: ToolContext = turn.tool_context(row, on_process_started=on_pid)
        ctx.emit_output = start.hold(ctx.emit_output)
        try:
            async with anyio.create_task_group() as tg:

                async def record_pid() -> None:
                    await pid_ready.wait()
                    await start.committed.wait()
                    await turn.writer.commit(
                        [],
                        ops=[
                            UpdateToolCall(row.tool_call_id, "running", ("running",), (("pid", pid_box[0]),))
                        ],
                    )
                    crash_point("mid_tool", turn.settings.crash_at)

                tg.start_soon(record_pid)
                if deferred:
                    tg.start_soon(start.commit_after, turn.writer.frame_s)
                result = await tool.run(args, ctx)
                tg.cancel_scope.cancel()
        finally:
            turn.running_calls.pop(row.tool_call_id, None)
        await turn.writer.flush()
        # A start not committed yet rides in the result's transaction (one commit fewer), without
        # its status change: the session already waits on its tools, and a worker status change
        # would make a pending cross-process cancel refuse the result of a call that did run.
        first: tuple[list[Any], list[Any]] = ([], [])
        if not start.committed.is_set():
            first = (start.events, [op for op in start.ops if not isinstance(op, SetStatus)])
        if first[1]:
            row.status = "running"
        await self._finish(turn, turn_id, row, result, first=first, wakes=wakes)
        turn.tool_output.pop(row.tool_call_id, None)


def may_defer_start(tool: Any) -> bool:
    """Whether ``tool.started`` of a call may wait for its result's commit (if the call ends within
    a frame): an in-process tool that reads only and may run again after a crash — invariant 3
    only needs its ``dispatched`` intent row, and a crash before the result re-runs it either way
    (``dispatched`` → run, ``running`` + idempotent → run again). Not for a shell, an MCP
    server's tool or an interactive one (they start processes, stream output or wait)."""
    return bool(
        tool.read_only and tool.idempotent and not tool.interactive and not tool.name.startswith("mcp__")
    )


class _Start:
    """The ``tool.started`` commit of one call: at once, or deferred (:func:`may_defer_start`).

    A deferred start is committed once the call has run for a frame (watchers see it running),
    or at once when the call streams output or starts a process (the output waits for it, so the
    journal never holds a call's output before its start); otherwise it rides in the result's
    commit.
    """

    def __init__(self, turn: Turn, row: ToolCallRow, events: list[Any], ops: list[Any]) -> None:
        self.turn, self.row, self.events, self.ops = turn, row, events, ops
        self.committed = anyio.Event()
        self._now = anyio.Event()
        self._held: list[str] = []
        self._emit: Callable[[str], None] = lambda text: None

    async def commit(self) -> None:
        """Commit the start now (the row goes ``running``)."""
        await self.turn.writer.commit(self.events, ops=self.ops)
        self.row.status = "running"
        self.committed.set()
        held, self._held = self._held, []
        for text in held:
            self._emit(text)

    async def commit_after(self, delay_s: float) -> None:
        """The deferred start: committed after ``delay_s`` or on :meth:`now` (cancelled when the
        call ends first)."""
        with anyio.move_on_after(delay_s):
            await self._now.wait()
        await self.commit()

    def now(self) -> None:
        """Commit a deferred start without waiting for the frame to pass."""
        self._now.set()

    def hold(self, emit: Callable[[str], None]) -> Callable[[str], None]:
        """``emit`` (live output), holding the output until the start is committed."""
        self._emit = emit

        def emit_after_start(text: str) -> None:
            if self.committed.is_set():
                emit(text)
            else:
                self._held.append(text)
                self.now()

        return emit_after_start
