"""``GET /metrics`` (Prometheus metrics, behind the same bearer guard as the API), ``POST
/v1/sessions/{id}/compact`` and the check of a session's own caps.

The counters and histograms are the process recorder's (:mod:`acagent.obs._metrics`); the
``acagent_sessions{status}`` gauge is read from the journal at scrape time, so it counts every
session of this data directory, not only those this daemon has loaded.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import BackgroundTasks, FastAPI, Response

from acagent.errors import AcagentError, CompactionFailed, UserError
from acagent.obs import enable_metrics
from acagent.usage import Limits

__all__ = ["add_compact_route", "add_metrics_route", "check_session_limits"]

log = logging.getLogger("acagent.server")


def check_session_limits(limits: dict[str, float] | None) -> dict[str, float]:
    """Validate ``POST /v1/sessions`` ``limits`` (session caps only).

    Raises:
        UserError: an unknown key or a negative value (400 with the reason).
    """
    if not limits:
        return {}
    try:
        Limits().for_session(limits)
    except ValueError as exc:
        errors = getattr(exc, "errors", None)  # a pydantic ValidationError: name the field
        if callable(errors) and errors():
            first = errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ()))
            raise UserError(
                f"invalid limits.{where} = {first.get('input')!r}: {first.get('msg')}",
                detail={"key": f"limits.{where}"},
            ) from None
        raise UserError(f"invalid limits: {str(exc).splitlines()[0]}") from None
    return dict(limits)


def add_compact_route(app: FastAPI, state: Any) -> None:
    """Register ``POST /v1/sessions/{id}/compact`` → 202; the compaction runs in the background.

    An empty session gets 422 ``context_too_large`` at once; a compaction that fails later is an
    ``error`` event in the session's stream (and a log line).
    """

    async def run(session_id: str) -> None:
        try:
            await state.registry.compact(session_id)
        except AcagentError as exc:  # recorded nowhere else: the caller got its 202 already
            log.warning("session %s: compaction failed: %s", session_id, exc.message)

    @app.post("/v1/sessions/{session_id}/compact", status_code=202, tags=["sessions"])
    async def compact(session_id: str, background: BackgroundTasks) -> dict[str, Any]:
        """Summarise the session's older turns now (409 session_busy while a turn runs)."""
        runner = await state.registry.get_runner(session_id)
        runner.check_free(finishing_is_free=False)
        row = await state.registry.journal.get_session(session_id)
        if row is None or row.last_message is None:  # answered now: a 202 would hide it in the stream
            raise CompactionFailed(f"session {session_id} has no history to compact yet")
        background.add_task(run, session_id)
        return {"session_id": session_id, "status": "compacting"}


def add_metrics_route(app: FastAPI, state: Any) -> None:
    """Register ``GET /metrics`` on ``app`` (Prometheus text format 0.0.4)."""
    recorder = enable_metrics()

    @app.get("/metrics", include_in_schema=True, tags=["observability"])
    async def metrics_endpoint() -> Response:
        """Prometheus text exposition of this daemon's metrics."""
        counts = await state.journal.session_counts()
        body, content_type = recorder.render(counts)
        return Response(body, media_type=content_type)
