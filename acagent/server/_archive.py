"""``POST /v1/sessions/{id}/archive`` and ``/unarchive``: hide a session from lists, or bring it back.

Archiving sets the session row's ``archived_at`` (:func:`acagent.store._manage.archive_session`)
and nothing else: a running turn, the lease and resume are untouched; ``GET /v1/sessions
?archived=false`` (what the web page asks by default) leaves archived sessions out.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI

__all__ = ["add_archive_routes", "archived_filter"]


def archived_filter(rows: list[Any], archived: bool | None, limit: int | None) -> list[Any]:
    """Session rows kept by ``?archived=`` (None: all), newest first, at most ``limit``."""
    if archived is not None:
        rows = [r for r in rows if (r.archived_at is not None) == archived]
    return rows[:limit] if limit is not None else rows


def add_archive_routes(
    app: FastAPI, state: Any, view: Callable[[str], Awaitable[dict[str, Any]]], **route: Any
) -> None:
    """Register the two routes on ``app``; each answers 200 with the session as ``view`` shows it.

    Args:
        view: the session's API view (``GET /v1/sessions/{id}``).
        route: FastAPI route options (``response_model``, ``responses``).
    """
    from acagent.store._manage import archive_session

    @app.post("/v1/sessions/{session_id}/archive", tags=["sessions"], **route)
    async def archive(session_id: str) -> dict[str, Any]:
        """Archive the session: hidden from session lists (``?archived=false``), still resumable."""
        return await view(await archive_session(state.journal, session_id, True))

    @app.post("/v1/sessions/{session_id}/unarchive", tags=["sessions"], **route)
    async def unarchive(session_id: str) -> dict[str, Any]:
        """Bring an archived session back into the session lists."""
        return await view(await archive_session(state.journal, session_id, False))
