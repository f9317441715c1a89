"""The payload of every event type: what each one's fields are (:mod:`acagent.events` builds
the pydantic model of a type from its class here the first time the type is used).

These are plain classes — field annotations, defaults and docs — not models: building a
pydantic model class costs about a millisecond of CPU, and a one-shot ``acagent run`` uses
about half of the 22 event types; :data:`acagent.events.EVENT_TYPES` maps a type to its model,
built once, on first use (a model inherits the fields of its class's bases here, in their
order, and keeps extra fields). Each class's ``type`` default is its event type.

Unlike the other modules, this one does not open with ``from __future__ import annotations``:
its field annotations are the objects themselves, not strings, so building a model does not
compile and evaluate each annotation (a quarter of the CPU of building the eleven models a
one-shot tool-call turn journals). Every annotation here must therefore name something defined
above it (``tests/cli/test_startup.py`` pins that the annotations stay objects).
"""

from typing import Any, Literal

from pydantic import Field

__all__ = ["SPECS", "SessionStatus"]

SessionStatus = Literal["pending", "running", "waiting_tool", "waiting_user", "done", "cancelled", "failed"]


class _P:
    """Every payload: fields the model does not name are kept (``extra="allow"``)."""


class _TurnP(_P):
    turn_id: str | None = None


class SessionCreated(_P):
    """A session was created (always seq 1)."""

    type: Literal["session.created"] = "session.created"
    cwd: str
    model: str | None = None
    title: str | None = None


class SessionStatusChanged(_TurnP):
    """The session status changed (only through the journal's guarded transition)."""

    type: Literal["session.status"] = "session.status"
    status: SessionStatus
    previous: SessionStatus | None = None
    reason: str | None = None


class TurnStarted(_TurnP):
    """A turn began (a user message was accepted)."""

    type: Literal["turn.started"] = "turn.started"


class UserMessage(_TurnP):
    """The user's message text."""

    type: Literal["user.message"] = "user.message"
    text: str
    idempotency_key: str | None = None
    """A hash of the client's ``Idempotency-Key`` for this message, when it sent one (a retry
    after a daemon restart is recognised by it: :mod:`acagent.server._idempotency`)."""


class AssistantDelta(_TurnP):
    """A fragment of streamed assistant text (durable, batched)."""

    type: Literal["assistant.delta"] = "assistant.delta"
    text: str
    step_id: str | None = None
    attempt: int = 1
    kind: Literal["text", "reasoning"] = "text"


class AssistantMessage(_TurnP):
    """The final assistant message of a step, what clients reconcile against."""

    type: Literal["assistant.message"] = "assistant.message"
    text: str
    message: dict[str, Any]
    """The full :class:`~acagent.messages.Message` (parts, tool calls) as JSON."""
    interrupted: bool = False
    """True when this is the partial text kept after a cancel."""
    step_id: str | None = None


class ToolCallEvent(_TurnP):
    """The model asked for a tool call; its intent row is durable."""

    type: Literal["tool.call"] = "tool.call"
    tool_call_id: str
    name: str
    arguments: dict[str, Any]


class ToolStarted(_TurnP):
    """A tool call started running."""

    type: Literal["tool.started"] = "tool.started"
    tool_call_id: str
    name: str
    pid: int | None = None


class ToolOutput(_TurnP):
    """A chunk of a running tool's live output."""

    type: Literal["tool.output"] = "tool.output"
    tool_call_id: str
    text: str


class ToolResultEvent(_TurnP):
    """A tool call reached a terminal state; ``content`` is what the model gets."""

    type: Literal["tool.result"] = "tool.result"
    tool_call_id: str
    name: str
    status: Literal["ok", "error", "interrupted", "denied"]
    content: str
    is_error: bool
    exit_code: int | None = None
    output_ref: dict[str, Any] | None = None
    """When ``content`` is a head + tail cut: the full output on disk, ``{"path", "bytes",
    "sha256"}`` with ``path`` relative to the transcript's directory (docs/approvals.md, F44)."""


class ApprovalRequested(_TurnP):
    """A tool call waits for the user's decision."""

    type: Literal["approval.requested"] = "approval.requested"
    tool_call_id: str
    name: str
    arguments: dict[str, Any]
    command: str | None = None
    """For ``shell``: the command byte for byte as it would run."""
    kind: Literal["tool", "question"] = "tool"
    question: str | None = None
    notes: list[str] = Field(default_factory=list)
    """Warnings to show with the request (``ApprovalPolicy.approval_notes``): workspace code will
    run and ``always`` holds only until a workspace file changes; a protected path is written."""
    always: str | None = None
    """What an ``always`` answer will cover (``ApprovalPolicy.always_covers``), e.g. ``always: any
    `git status …` in this workspace …``; None for a question."""


class ApprovalResolved(_TurnP):
    """An approval was decided (first committed decision wins)."""

    type: Literal["approval.resolved"] = "approval.resolved"
    tool_call_id: str
    decision: Literal["allow", "deny", "always", "timeout", "cancelled", "answered"]
    reason: str | None = None


class StepStarted(_TurnP):
    """An LLM call is about to be made; its ``step`` row is inflight."""

    type: Literal["step.started"] = "step.started"
    step_id: str
    request_id: str
    attempt: int
    context_tokens: int | None = None
    """Estimated input tokens of this request (``runner/_window.py``), the context fill so far."""
    context_window: int | None = None
    """The model's context window in tokens; absent when the window is unknown (only assumed)."""


class StepFinished(_TurnP):
    """An LLM call finished and its result is committed."""

    type: Literal["step.finished"] = "step.finished"
    step_id: str
    request_id: str
    attempt: int
    finish_reason: str


class LlmRetry(_TurnP):
    """A failed LLM attempt will be retried; drop its partial text."""

    type: Literal["llm.retry"] = "llm.retry"
    attempt: int
    """The attempt that failed (1-based)."""
    reason: str
    delay_ms: int
    error: str | None = None


class UsagePayload(_TurnP):
    """Token usage of one step and the session totals."""

    type: Literal["usage"] = "usage"
    input_tokens: int
    output_tokens: int
    total_tokens: int
    session_input_tokens: int = 0
    session_output_tokens: int = 0
    model: str | None = None
    """``PROVIDER:NAME`` of the call."""
    cached_input_tokens: int | None = None
    """Part of ``input_tokens`` read from the provider's prompt cache, when reported."""
    reasoning_tokens: int | None = None
    """Part of ``output_tokens`` spent on reasoning, when reported."""
    cost_usd: float | None = None
    """Price of the call when it was looked up at call time (docs/limits.md); absent = not priced then."""
    purpose: str | None = None
    """``compaction`` for a summary call; absent for ordinary steps."""


class ErrorPayload(_TurnP):
    """A warning or error worth showing (e.g. skipped transcript lines)."""

    type: Literal["error"] = "error"
    code: str
    message: str
    detail: Any = None


class TurnCompleted(_TurnP):
    """The turn finished with a final answer."""

    type: Literal["turn.completed"] = "turn.completed"
    text: str = ""


class TurnInterrupted(_TurnP):
    """The turn was cancelled (``reason``: ``user``, ``shutdown``, ``timeout``)."""

    type: Literal["turn.interrupted"] = "turn.interrupted"
    reason: str = "user"


class TurnFailed(_TurnP):
    """The turn failed (provider errors after retries, invalid state)."""

    type: Literal["turn.failed"] = "turn.failed"
    error_type: str = Field(alias="type_", default="error")
    message: str
    retryable: bool = False


class ContextCompacted(_P):
    """The older part of the context was replaced by a summary (docs/context.md).

    A position, not a copy: the model context is rebuilt from the latest compaction (its summary
    merged into the first kept message, then the fold of every context event with
    ``seq >= first_kept_seq``). Compactions of older versions (and one whose positions were
    unknown) also committed a ``checkpoint`` embedding that context right after it. The full
    history stays in the journal and the transcript.
    """

    type: Literal["context.compacted"] = "context.compacted"
    summary: str
    first_kept_seq: int
    """Seq of the first event kept verbatim (a turn's ``user.message``)."""
    tokens_before: int
    """Estimated tokens of the request before compaction."""
    tokens_after: int
    """Estimated tokens of the request after compaction."""
    model: str
    """Model that wrote the summary (``PROVIDER:NAME``)."""
    reason: str = "threshold"
    """``threshold`` (compact_at reached), ``overflow`` (the provider refused) or ``manual``."""


class Checkpoint(_P):
    """The full model context up to ``upto_seq`` (resume = last checkpoint + tail)."""

    type: Literal["checkpoint"] = "checkpoint"
    upto_seq: int
    messages: list[dict[str, Any]]
    message_seqs: list[int] | None = None
    """Seq of the first event behind each message (None in checkpoints older than compaction)."""


SPECS: dict[str, type] = {
    spec.type: spec
    for spec in (
        SessionCreated,
        SessionStatusChanged,
        TurnStarted,
        UserMessage,
        AssistantDelta,
        AssistantMessage,
        ToolCallEvent,
        ToolStarted,
        ToolOutput,
        ToolResultEvent,
        ApprovalRequested,
        ApprovalResolved,
        StepStarted,
        StepFinished,
        LlmRetry,
        UsagePayload,
        ErrorPayload,
        TurnCompleted,
        TurnInterrupted,
        TurnFailed,
        ContextCompacted,
        Checkpoint,
    )
}
"""Event type → the class of its payload's fields."""
