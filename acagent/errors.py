"""The acagent exception tree.

::

    AcagentError                      code="internal"
    ├── UserError                     a caller mistake; the message names the fix   code="bad_request"
    │   ├── ConfigError               settings or config file invalid              code="config_error"
    │   ├── SessionNotFound           unknown session id                           code="session_not_found"
    │   ├── ApprovalNotFound          unknown or already-resolved approval         code="approval_not_found"
    │   ├── DaemonRunning             a live daemon already serves this home       code="daemon_running"
    │   ├── IdempotencyKeyReused      an Idempotency-Key sent again with another body code="idempotency_key_reused"
    │   └── TranscriptError           a transcript line is corrupt (names the line) code="transcript_corrupt"
    ├── SessionBusy                   a turn already runs / another process holds the lease  code="session_busy"
    ├── ConcurrencyCap                the instance runs its maximum number of sessions      code="concurrency_cap"
    ├── StaleLease                    a write carried a fencing token that was superseded   code="stale_lease"
    ├── SubscriberEvicted             a stream subscriber fell too far behind       code="subscriber_evicted"
    ├── TurnHalted                    a turn stopped here and could not record its end  code="turn_halted"
    ├── InvalidTransition             a status change from a state not in its whitelist     code="invalid_transition"
    ├── CursorAhead                   a stream cursor above the session's last seq           code="cursor_ahead"
    ├── DaemonLimit                   a daemon limit refused the request (acagent.server._limits)
    │   ├── BodyTooLarge              a request body above the JSON body limit               code="body_too_large"
    │   └── TooManyAttachers          the per-session or total attacher cap is reached       code="too_many_attachers"
    ├── JournalError                  the journal could not be read/written (disk full, ...) code="journal_error"
    ├── DaemonStopping                a request would start work while the daemon shuts down code="shutting_down"
    ├── DaemonUnavailable             the daemon cannot be reached                          code="daemon_unavailable"
    ├── CompactionFailed              the context could not be made smaller                 code="context_too_large"
    ├── ModelPullError                a model cannot be downloaded or extracted             code="model_pull_failed"
    │   └── ModelIntegrityError       a model file's size or sha256 differs                 code="model_corrupt"
    ├── InvalidHistory                a model context breaks call/result pairing or alternation code="invalid_history"
    └── ProviderError                 the model provider failed                             code="provider_error"
        ├── ProviderHTTPError         a non-2xx answer (status_code, body, headers)
        ├── ProviderConnectionError   the endpoint could not be reached / the stream broke
        │   └── StreamTruncated       the stream ended or broke before its terminal information
        ├── ContextOverflow           the provider refused the request as longer than its context window
        └── UnexpectedModelBehavior   the stream was malformed or ended without its terminal marker

Every error class is defined here (the tool path errors of ``acagent/tools/_paths.py`` aside);
the modules that raise them re-export their names. Every error carries a stable ``code`` that the daemon puts in its error envelope
``{"error": {"code", "message", "detail"}}`` and an HTTP ``status_code``.
"""

from __future__ import annotations

from typing import Any

from acagent._error_helpers import check_session_prefix, find_acagent_error, is_damaged, leaf_exception

__all__ = [
    "AcagentError",
    "ApprovalNotFound",
    "BodyTooLarge",
    "BudgetExceeded",
    "CompactionFailed",
    "ConcurrencyCap",
    "ConfigError",
    "ContextOverflow",
    "CursorAhead",
    "DaemonLimit",
    "DaemonRunning",
    "DaemonStopping",
    "DaemonUnavailable",
    "IdempotencyKeyReused",
    "InvalidHistory",
    "InvalidTransition",
    "JournalError",
    "ModelIntegrityError",
    "ModelPullError",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderHTTPError",
    "SessionBusy",
    "SessionNotFound",
    "StaleLease",
    "StreamTruncated",
    "SubscriberEvicted",
    "TooManyAttachers",
    "TranscriptError",
    "TurnHalted",
    "UnexpectedModelBehavior",
    "UserError",
    "check_session_prefix",
    "find_acagent_error",
    "leaf_exception",
]


class AcagentError(Exception):
    """Base of every error acagent raises on purpose."""

    code: str = "internal"
    status_code: int = 500

    def __init__(self, message: str, *, detail: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail

    def to_envelope(self) -> dict[str, Any]:
        """The JSON error envelope ``{"error": {"code", "message", "detail"}}``."""
        return {"error": {"code": self.code, "message": self.message, "detail": self.detail}}


class UserError(AcagentError):
    """Raised for a caller mistake (bad flag, bad request body); the message names the fix."""

    code = "bad_request"
    status_code = 400


class ConfigError(UserError):
    """Raised when settings, env vars or the config file are invalid or inconsistent."""

    code = "config_error"


class SessionNotFound(UserError):
    """Raised when a session id is not in the journal."""

    code = "session_not_found"
    status_code = 404


class ApprovalNotFound(UserError):
    """Raised when an approval answer names an unknown or already-resolved tool call."""

    code = "approval_not_found"
    status_code = 404


class TranscriptError(UserError):
    """Raised when a transcript cannot be imported; the message names file and line number."""

    code = "transcript_corrupt"
    status_code = 422


class SessionBusy(AcagentError):
    """Raised when a turn already runs on the session, here or in another process."""

    code = "session_busy"
    status_code = 409


class ConcurrencyCap(AcagentError):
    """Raised when the registry already runs ``max_concurrent_sessions`` turns."""

    code = "concurrency_cap"
    status_code = 429


class BudgetExceeded(AcagentError):
    """Raised when a cost/token/turn cap (``[limits]``) is reached.

    ``detail`` is ``{"scope": "session"|"daily", "limit": <cap>, "used": <spent so far>,
    "unit": "usd"|"tokens"|"turns", "cap": <config key>}`` (see docs/limits.md).
    """

    code = "budget_exceeded"
    status_code = 429


class StaleLease(AcagentError):
    """Raised when a worker's write carries a fencing token that another worker superseded.

    The zombie's write is discarded (the transaction rolls back).
    """

    code = "stale_lease"
    status_code = 409


class InvalidTransition(AcagentError):
    """Raised when a status change is attempted from a state outside its whitelist."""

    code = "invalid_transition"
    status_code = 409


class JournalError(AcagentError):
    """Raised when the journal cannot be read or written: 503 if busy/locked/full, 500 if damaged (F148)."""

    code = "journal_error"
    status_code = 503

    def __init__(self, message: str, *, detail: Any = None) -> None:
        super().__init__(message, detail=detail)  # damaged data: a retry would fail the same way
        self.status_code = 500 if is_damaged(detail) else 503


class InvalidHistory(AcagentError):
    """Raised before a provider request whose history cannot be repaired (``acagent.messages.check_history``).

    ``detail`` is ``{"index": <message index>, "problem": <what is wrong>}``.
    """

    code = "invalid_history"
    status_code = 500


class ProviderError(AcagentError):
    """Raised when the model provider fails."""

    code = "provider_error"
    status_code = 502
    retryable: bool = False
    error_type: str = "provider_error"


class ProviderHTTPError(ProviderError):
    """Raised for a non-2xx provider answer, or an in-band stream error event."""

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None,
        body: Any = None,
        headers: dict[str, str] | None = None,
        retryable: bool = False,
        error_type: str = "http_error",
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message, detail={"status_code": status_code, "type": error_type})
        self.http_status = status_code
        self.body = body
        self.headers = headers or {}
        self.retryable = retryable
        self.error_type = error_type
        self.retry_after_s = retry_after_s


class ProviderConnectionError(ProviderError):
    """Raised when the provider endpoint cannot be reached or the connection breaks mid-stream."""

    retryable = True
    error_type = "connection_error"


class StreamTruncated(ProviderConnectionError):
    """Raised when a stream ends or breaks before its terminal information arrived (F22).

    Terminal information is the finish reason (OpenAI ``finish_reason``, Anthropic
    ``stop_reason``) together with the final usage. A stream cut before it is retried by the loop
    with an identical request body; its ``llm.retry`` event has ``reason: "stream_truncated"``.
    A stream that delivered it is complete even if the connection then breaks (no retry).

    Attributes:
        received_bytes: body bytes received before the cut.
    """

    retryable = True
    error_type = "stream_truncated"

    def __init__(self, message: str, *, received_bytes: int = 0) -> None:
        super().__init__(message, detail={"type": self.error_type, "received_bytes": received_bytes})
        self.received_bytes = received_bytes


class ContextOverflow(ProviderError):
    """Raised when the provider refuses a request as longer than the model's context window (F28).

    OpenAI answers 400 with ``error.code == "context_length_exceeded"``; Anthropic answers 400
    ``invalid_request_error`` with a message starting ``prompt is too long``. Never retried as
    is (``retryable`` False): the same request would be refused again; the caller must shrink
    the context first (compaction).

    Attributes:
        http_status: the HTTP status (400, or 413 for a body the server refused by size).
        body: the decoded error body.
    """

    code = "context_overflow"
    status_code = 400
    retryable = False
    error_type = "context_overflow"

    def __init__(self, message: str, *, http_status: int | None = 400, body: Any = None) -> None:
        super().__init__(message, detail={"status_code": http_status, "type": self.error_type})
        self.http_status = http_status
        self.body = body


class UnexpectedModelBehavior(ProviderError):
    """Raised when the stream is malformed or ends without its terminal marker."""

    error_type = "unexpected_model_behavior"

    def __init__(self, message: str, *, body: Any = None, retryable: bool = True) -> None:
        super().__init__(message, detail={"body": body})
        self.body = body
        self.retryable = retryable


class SubscriberEvicted(AcagentError):
    """Raised to a subscriber that fell too far behind; re-attach with ``since=last_seq``."""

    code = "subscriber_evicted"
    status_code = 409

    def __init__(self, last_seq: int, *, dropped: int = 0) -> None:
        super().__init__(
            f"subscriber fell too far behind ({dropped} events dropped); re-attach with since={last_seq}",
            detail={"last_seq": last_seq, "dropped": dropped},
        )
        self.last_seq = last_seq
        self.dropped = dropped
        """Events the bus dropped for this subscriber (what it missed; the journal has them)."""


class CursorAhead(AcagentError):
    """Raised when a stream cursor (``since``, ``Last-Event-ID``) is above the session's last seq.

    It happens after the data directory was restored from an older copy, or when a client
    mixes up sessions. ``detail``: ``{"since": N, "last_seq": L}``; the daemon's streams tell the
    client with a ``stream.reset`` frame and continue from ``last_seq`` (docs/daemon.md).
    """

    code = "cursor_ahead"
    status_code = 409


class DaemonLimit(AcagentError):
    """Base of the daemon's resource limits (one place: ``acagent.server._limits``)."""

    code = "limit_exceeded"
    status_code = 429


class BodyTooLarge(DaemonLimit):
    """Raised when a request body exceeds the daemon's JSON body limit (``detail.limit_bytes``)."""

    code = "body_too_large"
    status_code = 413


class TooManyAttachers(DaemonLimit):
    """Raised when a session (or the daemon) already has its maximum of stream attachers."""

    code = "too_many_attachers"
    status_code = 429


class TurnHalted(AcagentError):
    """Raised to a session's live subscribers when its turn stopped in this process without its
    end being recorded: the journal cannot be written (disk full, read-only) or another process
    took the lease over (this one was frozen past the lease TTL). Nothing committed is lost; the
    session stays active and resumable (``acagent run --resume ID``). ``detail``:
    ``{"session_id", "turn_id", "reason": "journal"|"fenced"}``.
    """

    code = "turn_halted"
    status_code = 503


class IdempotencyKeyReused(UserError):
    """Raised when a request reuses an ``Idempotency-Key`` with a different body (IETF draft: 422)."""

    code = "idempotency_key_reused"
    status_code = 422


class DaemonRunning(UserError):
    """Raised by ``serve`` when a live daemon already serves this ``ACAGENT_HOME``."""

    code = "daemon_running"
    status_code = 409


class DaemonStopping(AcagentError):
    """Raised when a request would start work while the daemon shuts down."""

    code = "shutting_down"
    status_code = 503


class CompactionFailed(AcagentError):
    """The context could not be made smaller (nothing older to summarise, or a useless summary)."""

    code = "context_too_large"
    status_code = 422


class ModelPullError(AcagentError):
    """Raised when a model cannot be downloaded or extracted; the message says what to run by hand."""

    code = "model_pull_failed"
    status_code = 503


class ModelIntegrityError(ModelPullError):
    """Raised when a model file's size or sha256 differs from the pinned value."""

    code = "model_corrupt"


class DaemonUnavailable(AcagentError):
    """Raised when the daemon cannot be reached (it stopped, or its address changed)."""

    code = "daemon_unavailable"
    status_code = 503
