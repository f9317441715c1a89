"""``GET /metrics``: the daemon's Prometheus metrics, behind the same bearer guard as the API.

The counters and histograms are the process recorder's (:mod:`acagent.obs._metrics`); the
``acagent_sessions{status}`` gauge is read from the journal at scrape time, so it counts every
session of this data directory, not only those this daemon has loaded.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Response

from acagent.obs import enable_metrics

__all__ = ["add_metrics_route"]


def add_metrics_route(app: FastAPI, state: Any) -> None:
    """Register ``GET /metrics`` on ``app`` (Prometheus text format 0.0.4)."""
    recorder = enable_metrics()

    @app.get("/metrics", include_in_schema=True, tags=["observability"])
    async def metrics_endpoint() -> Response:
        """Prometheus text exposition of this daemon's metrics."""
        counts = await state.journal.session_counts()
        body, content_type = recorder.render(counts)
        return Response(body, media_type=content_type)
