"""Turn: the ports and the state of one turn, and the functions that close it.

A :class:`Turn` is built by the runner when a turn starts (or is resumed) and dropped when it
ends. It carries what the loop (:mod:`acagent.runner._loop`) and the tool executor
(:mod:`acagent.runner._tools`) need — the writer with its lease, the model context, the provider,
the tools, the approval policy, the settings (timing) — and the state that belongs to this turn
alone: the text streamed so far, the current stream, live tool output, answers to questions,
usage totals, the cached tool definitions, the approval wake-ups and the interrupt request.
Nothing of it outlives the turn: a cancel meant for one turn can never reach the next one.

A turn ends in exactly one of three ways, each one journal transaction:
:meth:`Turn.complete` (``turn.completed`` → ``done``), :meth:`Turn.fail` (``turn.failed`` →
``failed``, open calls closed with an error) and :meth:`Turn.finish_cancelled`
(partial text kept, open calls closed, ``turn.interrupted`` → ``cancelled``).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from acagent.events import make_payload
from acagent.obs import metrics
from acagent.providers._base import Provider, ToolDefinition
from acagent.runner._context import ContextBuilder
from acagent.runner._results import close_open_call, close_row, partial_message
from acagent.runner._stepstart import commit_waking
from acagent.runner._turntools import TurnTools, tool_definition
from acagent.runner._writer import SessionWriter
from acagent.settings import Settings
from acagent.store import (
    ACTIVE,
    RESTING,
    STATUSES,
    FinishStep,
    Journal,
    ReleaseLease,
    SetCancel,
    SetStatus,
    SetTitle,
    SetTurn,
    ToolCallRow,
)
from acagent.tools import ApprovalPolicy, Tool, ToolResult

__all__ = ["Turn", "tool_definition"]


@dataclass(eq=False)
class Turn(TurnTools):
    """One turn's ports and state (see module docstring).

    Args:
        turn_id: the turn.
        session_id: its session.
        journal: the journal (reads; writes go through ``writer``).
        settings: resolved settings (``settings.timing`` bounds every wait).
        writer: the session's writer; ``writer.lease`` fences every commit of this turn.
        context: the in-memory model context (kept in step by ``writer``).
        tools: the tools by name.
        policy: the session's approval policy (an ``always`` answer adds to it).
        provider: ``async () -> Provider`` (created on first use by the runner).
        system_prompt: the system prompt of every request.
        cwd: the session's working directory.
        worker_id: this process's lease owner id (recorded on running tool calls).
        interactive: a user can answer questions.
        usage_totals: ``[input, output]`` tokens of the session so far (updated per step).
        tool_definitions: cached definitions offered to the model (None: build on first use).
        on_end: called once the turn's end event is committed.
    """

    turn_id: str
    session_id: str
    journal: Journal
    settings: Settings
    writer: SessionWriter
    context: ContextBuilder
    tools: dict[str, Tool]
    policy: ApprovalPolicy
    provider: Callable[[], Awaitable[Provider]]
    system_prompt: str
    cwd: str
    worker_id: str
    interactive: bool = True
    usage_totals: list[int] = field(default_factory=lambda: [0, 0])
    tool_definitions: list[ToolDefinition] | None = None
    on_end: Callable[[], None] = lambda: None
    partial_text: str = ""
    """Text streamed by the step that was interrupted (kept as the partial assistant message)."""
    current_stream: Any = None
    running_calls: dict[str, ToolCallRow] = field(default_factory=dict)
    tool_output: dict[str, list[str]] = field(default_factory=dict)
    answers: dict[str, str] = field(default_factory=dict)
    interrupt_reason: str | None = None
    """Why this turn was asked to stop (``user``, ``shutdown``, ``lease_lost``), None if not."""
    outcome: str | None = None
    """``completed``, ``failed`` or ``cancelled`` once this turn's end event is committed."""
    scope: anyio.CancelScope | None = None
    model: str = ""
    """``PROVIDER:NAME`` of the session (caps, usage rows, spans)."""
    budget: Any = None
    """The process :class:`~acagent.runner._budget.Budget` (caps, usage rows, LLM-call slots)."""
    estimator: Any = None
    """The session's :class:`~acagent.runner._window.RequestEstimator` (compaction, caps)."""
    started_at: float = field(default_factory=time.monotonic)
    open_calls: list[ToolCallRow] | None = None
    """This turn's open tool calls as this process last committed them, for the loop's next look
    (None: read them from the journal). Under the lease nobody else writes this turn's rows."""
    fresh_seq: int | None = None
    """A context seq produced by this turn's own commit, at which no step has been looked up yet:
    the step for it has no attempts in the journal (its id names this turn and the context's
    digest, and within a turn a context never comes back), so the loop need not read them. Used once."""
    limits: Any = None
    """The session's effective caps (``Budget.effective_limits``), read once per turn."""
    planned_step: Any = None
    """The ``PlannedStep`` whose intent rode in this turn's last waking commit (:meth:`commit`),
    for the loop's next LLM step (taken once)."""
    release_at_end: bool = False
    """The turn's completion commit gives the lease up (``ReleaseLease``): no turn of this
    runner follows under the same lease."""
    lease_released: bool = False
    """The completion commit gave the lease up (the runner releases nothing more)."""
    _approval_wake: dict[str, anyio.Event] = field(default_factory=dict)
    _env: tuple[Path, tuple[str, ...]] | None = None

    # ------------------------------------------------------------------ interrupts

    def interrupt(self, reason: str = "user") -> None:
        """Ask this turn to stop: cancel its scope (provider request, tools) and wake approvals.

        A no-op once the turn's end is committed. Before the turn's scope exists the request is
        remembered on this turn (and only this turn) and applied when it is entered.
        """
        if self.outcome is not None:
            return
        if self.interrupt_reason not in ("lease_lost", "handoff"):  # a stop without writes sticks
            self.interrupt_reason = reason
        if self.scope is not None:
            self.scope.cancel()
        for event in self._approval_wake.values():
            event.set()

    def enter(self, scope: anyio.CancelScope) -> None:
        """Bind the turn to the cancel scope it runs in (cancelled at once if already interrupted)."""
        self.scope = scope
        if self.interrupt_reason is not None:
            scope.cancel()

    def _mark_ended(self, outcome: str) -> None:
        self.outcome = outcome
        metrics().turn_finished(
            {"cancelled": "interrupted"}.get(outcome, outcome), time.monotonic() - self.started_at
        )
        self.on_end()

    # ------------------------------------------------------------------ ports

    async def commit(
        self, events: list[tuple[str, dict[str, Any]]], ops: list[Any], *, wakes: bool = False
    ) -> None:
        """:meth:`SessionWriter.commit`, noting a context seq this commit produced (``fresh_seq``).

        ``wakes``: the model is called right after this commit (the accept, a step's last tool
        result), so the next step's intent rides in it (``runner/_stepstart.py`` ``commit_waking``).
        """
        before = self.context.last_seq
        if wakes:
            self.planned_step = await commit_waking(self, events, ops)
        else:
            await self.writer.commit(events, ops=ops)
        if self.context.last_seq != before:
            self.fresh_seq = self.context.last_seq

    # ------------------------------------------------------------------ opening and closing the turn

    async def accept(
        self, text: str, *, title: str | None = None, idempotency_key: str | None = None
    ) -> None:
        """Open the turn with the user's message: ``turn.started`` + ``user.message`` (with
        ``idempotency_key`` when given), the session's current turn, its cancel flag cleared (a
        cancel meant for an earlier turn never reaches this one), status ``running`` and the
        session's ``title`` if given — one transaction, which also carries the first LLM step's
        intent (``step.started``, the ``step`` row inflight) when :attr:`planner` plans it."""
        ops: list[Any] = [
            SetTurn(self.turn_id),
            SetCancel(False),
            SetStatus("running", RESTING, turn_id=self.turn_id),
        ]
        if title is not None:
            ops.append(SetTitle(title))
        await self.commit(
            [
                ("turn.started", make_payload("turn.started", turn_id=self.turn_id)),
                (
                    "user.message",
                    make_payload(
                        "user.message", turn_id=self.turn_id, text=text, idempotency_key=idempotency_key
                    ),
                ),
            ],
            ops,
            wakes=True,
        )
        self.open_calls = []  # a new turn id: no tool call of it exists

    def completion(self, text: str) -> tuple[list[tuple[str, dict[str, Any]]], list[Any]]:
        """The events and ops that end the turn as completed (``turn.completed``, status ``done``),
        for :meth:`complete` or to ride in the final step's commit (one transaction fewer)."""
        ops: list[Any] = [SetStatus("done", ACTIVE, turn_id=self.turn_id)]
        lease = self.writer.lease
        if self.release_at_end and lease is not None:
            ops.append(ReleaseLease(lease.owner))  # the turn's last write: one transaction fewer
        return (
            [("turn.completed", make_payload("turn.completed", turn_id=self.turn_id, text=text))],
            ops,
        )

    def completed(self) -> None:
        """Record that the commit of :meth:`completion` succeeded (metrics, runner ``finishing``)."""
        self.lease_released = self.release_at_end and self.writer.lease is not None
        self._mark_ended("completed")

    async def complete(self, text: str) -> None:
        """Commit ``turn.completed`` and status ``done``.

        No context checkpoint follows: the journal's context events are the incremental
        checkpoint (docs/architecture.md, "Checkpoints"); the only snapshot is a compaction's
        position.
        """
        events, ops = self.completion(text)
        await self.writer.commit(events, ops=ops)
        self.completed()

    async def fail(
        self,
        *,
        error_type: str,
        message: str,
        retryable: bool = False,
        ops: list[Any] | None = None,
        detail: dict[str, Any] | None = None,
    ) -> None:
        """Commit ``turn.failed`` and status ``failed``; open tool calls are closed with an error.

        ``detail`` adds fields to the event (``budget_exceeded``: ``scope``, ``limit``, ``used``, …).
        """
        events: list[tuple[str, dict[str, Any]]] = []
        all_ops: list[Any] = list(ops or [])
        for row in await self.journal.tool_calls(self.session_id, open_only=True):
            event, op = close_row(
                row.turn_id, row, ToolResult(f"not run: the turn failed ({message})", status="error")
            )
            events.append(event)
            all_ops.append(op)
        events.append(
            (
                "turn.failed",
                make_payload(
                    "turn.failed",
                    turn_id=self.turn_id,
                    type_=error_type,
                    message=message,
                    retryable=retryable,
                    **{k: v for k, v in (detail or {}).items() if k not in ("type", "message", "turn_id")},
                ),
            )
        )
        all_ops.append(SetStatus("failed", ACTIVE, turn_id=self.turn_id, worker=False))
        await self.writer.commit(events, ops=all_ops)
        self._mark_ended("failed")

    async def finish_cancelled(self, reason: str, *, active: bool = True) -> None:
        """Close the turn after a cancel, in one transaction.

        The partial assistant text (what the user saw) is kept, inflight steps are closed, every
        open tool call gets its ``interrupted`` result (pending approvals are resolved
        ``cancelled``), then ``turn.interrupted`` (only when the turn is still ``active``: a turn
        that already ended keeps its own end event) and status ``cancelled``.
        """
        events: list[tuple[str, dict[str, Any]]] = []
        ops: list[Any] = []
        stream = self.current_stream
        partial = stream.partial_text() if stream is not None else self.partial_text
        self.current_stream, self.partial_text = None, ""
        msg = partial_message(partial) if active else None
        if msg is not None:
            events.append(
                (
                    "assistant.message",
                    make_payload(
                        "assistant.message",
                        turn_id=self.turn_id,
                        text=msg.text,
                        message=msg.model_dump(mode="json"),
                        interrupted=True,
                    ),
                )
            )
        for step in await self.journal.steps(self.session_id):
            if step.status == "inflight":
                ops.append(FinishStep(step.request_id, "failed", f"cancelled ({reason})"))
        for row in await self.journal.tool_calls(self.session_id, open_only=True):
            closing, extra = close_open_call(row, reason, self.tool_output.pop(row.tool_call_id, []))
            events.extend(closing)
            ops.extend(extra)
        if active:
            events.append(
                ("turn.interrupted", make_payload("turn.interrupted", turn_id=self.turn_id, reason=reason))
            )
        ops.append(
            SetStatus(
                "cancelled",
                tuple(s for s in STATUSES if s != "cancelled"),
                turn_id=self.turn_id or None,
                worker=False,
            )
        )
        ops.append(SetCancel(False))
        await self.writer.commit(events, ops=ops)
        self._mark_ended("cancelled")
