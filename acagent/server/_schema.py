"""The daemon API's request and response models (OpenAPI schema) and the shared error table."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from acagent._text import clean_text

__all__ = [
    "ERRORS",
    "Accepted",
    "ApprovalAnswer",
    "ApprovalResult",
    "CancelTurn",
    "CreateSession",
    "ErrorEnvelope",
    "EventsPage",
    "PostMessage",
    "Prose",
    "RenameSession",
    "SessionOut",
    "Text",
    "TurnAccepted",
]


def _clean(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode (no lone surrogates)") from None
    return value


Text = Annotated[str, AfterValidator(_clean)]

# Free text (messages, answers): pydantic cannot even hold a lone surrogate (its strings are
# UTF-8), so the one text rule (acagent/_text.py, applied again at the journal) runs first here.
Prose = Annotated[str, BeforeValidator(lambda v: clean_text(v) if isinstance(v, str) else v)]


class ErrorBody(BaseModel):
    """The error object."""

    code: str
    """Stable machine-readable code (``session_busy``, ``bad_request``, ``unauthorized``, …)."""
    message: str
    """Human-readable message naming the fix."""
    detail: Any = None
    """Extra data (``turn_id`` for ``session_busy``, the winning decision for a stale approval…)."""


class ErrorEnvelope(BaseModel):
    """Every error answer: ``{"error": {"code", "message", "detail"}}``."""

    error: ErrorBody


class RenameSession(BaseModel):
    """``PATCH /v1/sessions/{id}`` body."""

    title: str


class CreateSession(BaseModel):
    """``POST /v1/sessions`` body."""

    model_config = ConfigDict(extra="forbid")

    cwd: Text | None = Field(None, max_length=4096)
    """Working directory: an absolute path of an existing directory (required)."""
    model: Text | None = Field(None, max_length=200)
    """``PROVIDER:MODEL``; default: the daemon's configured model, else resolved like ``acagent run``."""
    title: Text | None = Field(None, max_length=500)
    limits: dict[str, float] | None = None
    """The session's own caps (``session_usd``, ``session_tokens``, ``session_turns``; docs/limits.md)."""


class PostMessage(BaseModel):
    """``POST /v1/sessions/{id}/messages`` body."""

    model_config = ConfigDict(extra="forbid")

    text: Prose = Field(min_length=1, max_length=1_000_000)
    """Any text: NUL and lone surrogates are accepted and mapped by the one rule of
    ``acagent/_text.py`` (F25), never refused with 422."""
    auto_approve: bool = False
    """Run this turn's tools without asking (``acagent run --yes`` through the daemon)."""


class ApprovalAnswer(BaseModel):
    """``POST /v1/sessions/{id}/approvals/{tool_call_id}`` body."""

    model_config = ConfigDict(extra="forbid")

    decision: Literal["allow", "deny", "always"]
    answer: Prose | None = Field(None, max_length=100_000)
    """The answer text for an ``ask_user`` question (its decision is then recorded as ``answered``)."""


class Usage(BaseModel):
    """Token usage of a session."""

    input_tokens: int
    output_tokens: int
    total_tokens: int
    llm_calls: int
    llm_retries: int


class PendingApproval(BaseModel):
    """A tool call waiting for the user's decision."""

    tool_call_id: str
    name: str
    arguments: Any
    turn_id: str | None = None


class SessionOut(BaseModel):
    """A session as the API shows it."""

    id: str
    status: str
    cwd: str
    title: str | None
    model: str | None
    created_at: str
    updated_at: str
    last_seq: int
    turn_id: str | None
    last_message: str | None
    usage: Usage
    warnings: list[Any]
    pending_approvals: list[PendingApproval]
    busy: bool = False
    """A turn runs in the daemon right now."""
    subscribers: int = 0
    """Live bus subscribers (attached clients + the transcript writer)."""
    archived: bool = False
    """Archived: left out of ``GET /v1/sessions?archived=false`` (the web page's default list)."""
    archived_at: str | None = None


class TurnAccepted(BaseModel):
    """``202`` answer to a message."""

    turn_id: str
    session_id: str


class CancelTurn(BaseModel):
    """Optional body of a cancel: the turn the client saw running."""

    model_config = ConfigDict(extra="forbid")

    turn_id: str | None = None
    """Cancel only this turn; a turn that is already over is left alone (``cancelled`` false)."""


class Accepted(BaseModel):
    """``202`` answer to a cancel."""

    session_id: str
    status: str
    cancelled: bool = True
    """False when the targeted turn was already over: nothing was cancelled."""


class ApprovalResult(BaseModel):
    """Answer to a recorded decision."""

    tool_call_id: str
    decision: str


class EventOut(BaseModel):
    """The event envelope."""

    seq: int
    ts: str
    session_id: str
    type: str
    payload: dict[str, Any]


class EventsPage(BaseModel):
    """``GET /v1/sessions/{id}/events`` answer."""

    events: list[EventOut]
    last_seq: int
    """The session's last seq (the page may end before it: see ``more``)."""
    more: bool
    """True when more events follow the page (ask again with ``since`` = the page's last seq)."""


ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorEnvelope, "description": text}
    for code, text in [
        (400, "Bad request (bad_request)"),
        (401, "Missing or wrong credential (unauthorized)"),
        (403, "Foreign Host or Origin (forbidden_host, forbidden_origin)"),
        (404, "Unknown session or approval"),
        (422, "The request failed validation (bad_request)"),
    ]
}
