"""The daemon's session, turn and event routes (``/v1/sessions/...``), over one :class:`DaemonState`."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Body, Depends, FastAPI, Header, Query, Request
from fastapi.responses import Response

from acagent.errors import ConfigError, DaemonStopping, UserError
from acagent.server._archive import add_archive_routes, archived_filter
from acagent.server._input import submit
from acagent.server._observe import check_session_limits
from acagent.server._schema import (
    ERRORS,
    Accepted,
    ApprovalAnswer,
    ApprovalResult,
    CancelTurn,
    CreateSession,
    ErrorEnvelope,
    EventsPage,
    PostMessage,
    RenameSession,
    SessionOut,
    Text,
    TurnAccepted,
)
from acagent.server._sse import sse_endpoint
from acagent.server._state import DaemonState
from acagent.server._streams import MAX_SEQ, attach_websocket
from acagent.store._usage import caps_store

__all__ = ["add_session_routes"]


def add_session_routes(app: FastAPI, state: DaemonState) -> None:
    """Sessions (create, list, get, rename), turns (message, cancel, approval) and events
    (history page, SSE, WebSocket)."""
    _add_sessions(app, state)
    _add_turns(app, state)
    _add_events(app, state)


def _add_sessions(app: FastAPI, state: DaemonState) -> None:
    @app.post("/v1/sessions", status_code=201, response_model=SessionOut, responses=ERRORS, tags=["sessions"])
    async def create_session(body: Annotated[CreateSession, Body()]) -> dict[str, Any]:
        """Create a session in ``cwd`` (an absolute path of an existing directory)."""
        if not state.accepting:
            raise DaemonStopping("the daemon is shutting down; retry when it is back")
        if not body.cwd:
            raise UserError("cwd is required: the absolute path of an existing directory")
        from acagent.providers import resolve_model_id

        model = _check_model(body.model or state.settings.model or resolve_model_id(state.settings))
        own = check_session_limits(body.limits)
        row = await state.registry.create_session(body.cwd, model=model, title=body.title)
        if own:
            await caps_store(state.journal).set_session_limits(row.id, own)
        return _session_out(state, row, {})

    @app.get("/v1/sessions", response_model=list[SessionOut], responses=ERRORS, tags=["sessions"])
    async def list_sessions(
        cwd: Annotated[Text | None, Query(max_length=4096)] = None,
        limit: Annotated[int | None, Query(ge=1, le=100_000)] = None,
        archived: bool | None = None,
    ) -> list[dict[str, Any]]:
        """Sessions, newest first (``updated_at``), optionally of one working directory;
        ``archived=false`` leaves archived sessions out, ``archived=true`` lists only them."""
        if cwd is not None:
            from acagent.runner import canonical_cwd

            try:
                cwd = canonical_cwd(cwd)
            except UserError:
                pass  # a directory that is gone: match the stored string as given
        rows = await state.journal.list_sessions(cwd=cwd, limit=limit if archived is None else None)
        rows = archived_filter(rows, archived, limit)
        pending = await _pending_by_session(state)
        return [_session_out(state, row, pending) for row in rows]

    @app.get("/v1/sessions/{session_id}", response_model=SessionOut, responses=ERRORS, tags=["sessions"])
    async def get_session(session_id: str) -> dict[str, Any]:
        """Status, last seq, pending approvals, usage, warnings."""
        row = await state.journal.get_session(session_id)
        return _session_out(state, row, await _pending_by_session(state, session_id))

    add_archive_routes(app, state, get_session, response_model=SessionOut, responses=ERRORS)

    @app.patch("/v1/sessions/{session_id}", response_model=SessionOut, responses=ERRORS, tags=["sessions"])
    async def patch_session(session_id: str, body: RenameSession) -> dict[str, Any]:
        """Rename the session (``{"title": "…"}``; the web page's Rename, ``sessions rename``)."""
        from acagent.store._manage import rename_session

        await rename_session(state.journal, session_id, body.title)
        row = await state.journal.get_session(session_id)
        return _session_out(state, row, await _pending_by_session(state, session_id))


def one_idempotency_key(request: Request) -> None:
    """A request names at most one ``Idempotency-Key`` (the header is a single sf-string in the
    IETF draft). With two, the route's ``Header`` parameter would silently take the first, and a
    client (or a proxy that appended one) could not know which key its retry must repeat.

    Raises:
        UserError: the header is repeated (400 ``bad_request``).
    """
    if len(request.headers.getlist("idempotency-key")) > 1:
        raise UserError("send one Idempotency-Key header, not several: a retry must repeat the one key")


_ONE_KEY = [Depends(one_idempotency_key)]


def _add_turns(app: FastAPI, state: DaemonState) -> None:
    @app.post(
        "/v1/sessions/{session_id}/messages",
        status_code=202,
        response_model=TurnAccepted,
        dependencies=_ONE_KEY,
        responses={
            **ERRORS,
            409: {"model": ErrorEnvelope, "description": "A turn runs (session_busy; detail.turn_id)"},
            429: {"model": ErrorEnvelope, "description": "The instance is full (concurrency_cap)"},
        },
        tags=["turns"],
    )
    async def post_message(
        session_id: str,
        body: Annotated[PostMessage, Body()],
        idempotency_key: Annotated[str | None, Header(min_length=1, max_length=200)] = None,
    ) -> dict[str, Any]:
        """Start a turn. Policy when a turn already runs: reject with 409 ``session_busy``.

        In a cluster an ``Idempotency-Key`` makes a retry (to any daemon) get the first answer."""
        body_in = {"text": body.text, "auto_approve": body.auto_approve}
        return await submit(state, "message", session_id, body_in, idempotency_key)

    @app.post(
        "/v1/sessions/{session_id}/cancel",
        status_code=202,
        response_model=Accepted,
        dependencies=_ONE_KEY,
        responses=ERRORS,
        tags=["turns"],
    )
    async def cancel(
        session_id: str,
        body: Annotated[CancelTurn | None, Body()] = None,
        idempotency_key: Annotated[str | None, Header(min_length=1, max_length=200)] = None,
    ) -> dict[str, Any]:
        """Cancel the running turn (from any state; ``turn_id``: only that turn, never a later
        one); the session ends ``cancelled``."""
        turn_id = body.turn_id if body is not None else None
        return await submit(state, "cancel", session_id, {"turn_id": turn_id}, idempotency_key)

    @app.post(
        "/v1/sessions/{session_id}/approvals/{tool_call_id}",
        response_model=ApprovalResult,
        dependencies=_ONE_KEY,
        responses=ERRORS,
        tags=["turns"],
    )
    async def answer_approval(
        session_id: str,
        tool_call_id: str,
        body: Annotated[ApprovalAnswer, Body()],
        idempotency_key: Annotated[str | None, Header(min_length=1, max_length=200)] = None,
    ) -> dict[str, Any]:
        """Record a decision. 404 for an unknown or already-resolved approval (detail names the winner)."""
        body_in = {"tool_call_id": tool_call_id, "decision": body.decision, "answer": body.answer}
        return await submit(state, "approval", session_id, body_in, idempotency_key)


def _add_events(app: FastAPI, state: DaemonState) -> None:
    @app.get("/v1/sessions/{session_id}/events", response_model=EventsPage, responses=ERRORS, tags=["events"])
    async def events(
        session_id: str,
        since: Annotated[int, Query(ge=0, le=MAX_SEQ)] = 0,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
    ) -> Response:
        """Durable events with seq > ``since`` (exclusive), ascending, at most ``limit``."""
        row = await state.journal.get_session(session_id)
        page = await state.journal.events(session_id, since, limit=limit + 1)
        more = len(page) > limit
        import orjson

        body = orjson.dumps(
            {
                "events": [e.to_dict() for e in page[:limit]],
                "last_seq": max(row.last_seq, page[-1].seq if page else 0),
                "more": more,
            }
        )
        return Response(body, media_type="application/json")

    @app.get(
        "/v1/sessions/{session_id}/stream",
        responses={
            **ERRORS,
            200: {"content": {"text/event-stream": {}}, "description": "Server-Sent Events"},
        },
        response_class=Response,
        tags=["events"],
    )
    async def stream(
        request: Request,
        session_id: str,
        since: Annotated[int, Query(ge=0, le=MAX_SEQ)] = 0,
    ) -> Response:
        """SSE: ``id:`` = seq, ``event:`` = type, ``data:`` = envelope; ``Last-Event-ID`` resumes."""
        return await sse_endpoint(request, session_id)

    app.add_api_websocket_route("/v1/sessions/{session_id}/attach", attach_websocket)


async def _pending_by_session(
    state: DaemonState, session_id: str | None = None
) -> dict[str, list[dict[str, Any]]]:
    """Pending approvals of every session (or one) in one query (:meth:`Journal.pending_approvals`)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for row in await state.journal.pending_approvals(session_id):
        out.setdefault(row.session_id, []).append(row.approval_view())
    return out


def _session_out(state: DaemonState, row: Any, pending: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    data: dict[str, Any] = row.to_public()
    data["pending_approvals"] = pending.get(row.id, [])
    runner = state.registry.runners.get(row.id)
    data["busy"] = bool(runner is not None and runner.is_busy)
    data["subscribers"] = len(runner.bus.subscribers) if runner is not None else 0
    return data


def _check_model(model: str) -> str:
    from acagent.providers import available_providers

    provider, sep, name = model.partition(":")
    if not sep or not provider.strip() or not name.strip():
        raise ConfigError(f"invalid model id {model!r}: expected PROVIDER:MODEL, e.g. 'openai:gpt-4o-mini'")
    if provider.strip().lower() not in available_providers():
        raise ConfigError(
            f"unknown provider {provider!r} in {model!r}; known: {', '.join(available_providers())}"
        )
    return model
