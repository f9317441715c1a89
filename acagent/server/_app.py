"""The daemon's ASGI application: HTTP API, streams, the login URL and the web page.

Every route sits behind one :class:`~acagent.server._security.Guard` (Host, Origin, credential),
added as the innermost user middleware so it sees both the ``http`` and the ``websocket`` scope
before routing. Every error — an :class:`~acagent.errors.AcagentError`, an unknown route (404),
a wrong method (405), a request that fails validation (422, code ``bad_request``), a bug (500) —
is answered with the one envelope ``{"error": {"code", "message", "detail"}}``.
"""

from __future__ import annotations

import logging
from importlib import resources
from typing import Annotated, Any, Literal

from fastapi import Body, FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse, Response
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket

from acagent._text import clean_text
from acagent.errors import AcagentError, ConfigError, DaemonStopping, UserError
from acagent.server._archive import add_archive_routes, archived_filter
from acagent.server._input import submit
from acagent.server._limits import BodyLimit
from acagent.server._observe import add_compact_route, add_metrics_route, check_session_limits
from acagent.server._security import COOKIE_NAME, Guard, _same
from acagent.server._sse import sse_endpoint
from acagent.server._state import DaemonState, hibernate
from acagent.server._streams import MAX_SEQ, attach_websocket
from acagent.store._usage import caps_store

__all__ = ["DaemonStopping", "create_app"]

log = logging.getLogger("acagent.server")


# ---------------------------------------------------------------------------------------- models


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


# ---------------------------------------------------------------------------------------- helpers


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


def _envelope(status: int, code: str, message: str, detail: Any = None, headers: Any = None) -> JSONResponse:
    return JSONResponse(
        {"error": {"code": code, "message": message, "detail": detail}}, status_code=status, headers=headers
    )


_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "too_large",
}


def _validation_detail(errors: Any) -> list[dict[str, Any]]:
    out = []
    for err in errors:
        out.append(
            {
                "loc": [str(p) for p in err.get("loc", ())],
                "msg": str(err.get("msg", "")),
                "type": err.get("type"),
            }
        )
    return out


def _page_html() -> bytes:
    return resources.files("acagent.server").joinpath("static/index.html").read_bytes()


STATIC_TYPES = {
    "app.js": "text/javascript; charset=utf-8",
    "md.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
}
"""The page's static files (``acagent/server/static/``) and their media types: nothing else is served."""

PAGE_HEADERS = {
    # No inline script or style: the page loads /static/app.js and /static/app.css only.
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
}


# ---------------------------------------------------------------------------------------- app


def create_app(state: DaemonState) -> FastAPI:
    """Build the daemon's application over ``state`` (see module docstring)."""
    app = FastAPI(
        title="acagent daemon",
        version="1",
        description=(
            "Sessions of one ACAGENT_HOME: create, list, message, cancel, approve, history, and live "
            "streams (WebSocket /attach, SSE /stream). Every request needs `Authorization: Bearer <token>`."
        ),
        docs_url=None,
        redoc_url=None,
        redirect_slashes=False,
    )
    app.state.daemon = state
    # Starlette runs the last added middleware first: Guard, then the body limit, then routing.
    app.add_middleware(BodyLimit, limit=state.limits.max_body_bytes)
    app.add_middleware(Guard, config=state.guard)
    page = _page_html()

    # ------------------------------------------------------------------ errors

    @app.exception_handler(AcagentError)
    async def _acagent_error(request: Request, exc: AcagentError) -> JSONResponse:
        return JSONResponse(exc.to_envelope(), status_code=exc.status_code)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        message = str(exc.detail) if exc.detail else code
        if exc.status_code == 404:
            message = f"no route {request.method} {request.url.path!r}; see /openapi.json"
        elif exc.status_code == 405:
            message = f"method {request.method} is not allowed on {request.url.path!r}"
        return _envelope(exc.status_code, code, message, headers=getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        detail = _validation_detail(exc.errors())
        first = detail[0] if detail else {"loc": [], "msg": "invalid request", "type": None}
        loc = first["loc"]
        if first.get("type") == "json_invalid":
            message = f"the request body is not valid JSON: {first['msg']}"
        elif loc:
            field = ".".join(loc[1:])
            message = f"invalid {loc[0]}" + (f" field {field!r}" if field else "") + f": {first['msg']}"
        else:
            message = f"invalid request: {first['msg']}"
        return _envelope(422, "bad_request", message, detail)

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> JSONResponse:  # pragma: no cover - bugs only
        log.exception("internal error on %s %s", request.method, request.url.path)
        return _envelope(500, "internal", f"internal error: {type(exc).__name__}")

    async def _not_found(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            websocket = WebSocket(scope, receive, send)
            await websocket.send_denial_response(
                _envelope(404, "not_found", f"no WebSocket route {scope.get('path', '')!r}")
            )
            return
        raise StarletteHTTPException(404)

    app.router.default = _not_found
    add_metrics_route(app, state)
    add_compact_route(app, state)

    # ------------------------------------------------------------------ page and login

    @app.get("/", include_in_schema=False)
    async def index() -> Response:
        return Response(page, media_type="text/html; charset=utf-8", headers=PAGE_HEADERS)

    static = {
        name: resources.files("acagent.server").joinpath(f"static/{name}").read_bytes()
        for name in STATIC_TYPES
        if resources.files("acagent.server").joinpath(f"static/{name}").is_file()
    }

    @app.get("/static/{name}", include_in_schema=False)
    async def static_file(name: str) -> Response:
        if name not in static:
            return _envelope(404, "not_found", f"no static file {name!r}")
        return Response(static[name], media_type=STATIC_TYPES[name], headers=PAGE_HEADERS)

    @app.get("/login", include_in_schema=False)
    async def login(token: str = "") -> Response:
        if not token or not _same(token, state.guard.token):
            return _envelope(401, "unauthorized", "wrong login token; use the URL `acagent serve` printed")
        response = RedirectResponse(
            "/", status_code=303, headers={"cache-control": "no-store", "referrer-policy": "no-referrer"}
        )
        response.set_cookie(COOKIE_NAME, state.guard.cookie, httponly=True, samesite="strict", path="/")
        return response

    # ------------------------------------------------------------------ sessions

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

    @app.post(
        "/v1/sessions/{session_id}/messages",
        status_code=202,
        response_model=TurnAccepted,
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
        idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
    ) -> dict[str, Any]:
        """Start a turn. Policy when a turn already runs: reject with 409 ``session_busy``.

        In a cluster an ``Idempotency-Key`` makes a retry (to any daemon) get the first answer."""
        body_in = {"text": body.text, "auto_approve": body.auto_approve}
        return await submit(state, "message", session_id, body_in, idempotency_key)

    @app.post(
        "/v1/sessions/{session_id}/cancel",
        status_code=202,
        response_model=Accepted,
        responses=ERRORS,
        tags=["turns"],
    )
    async def cancel(
        session_id: str,
        body: Annotated[CancelTurn | None, Body()] = None,
        idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
    ) -> dict[str, Any]:
        """Cancel the running turn (from any state; ``turn_id``: only that turn, never a later
        one); the session ends ``cancelled``."""
        turn_id = body.turn_id if body is not None else None
        return await submit(state, "cancel", session_id, {"turn_id": turn_id}, idempotency_key)

    @app.post(
        "/v1/sessions/{session_id}/approvals/{tool_call_id}",
        response_model=ApprovalResult,
        responses=ERRORS,
        tags=["turns"],
    )
    async def answer_approval(
        session_id: str,
        tool_call_id: str,
        body: Annotated[ApprovalAnswer, Body()],
        idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
    ) -> dict[str, Any]:
        """Record a decision. 404 for an unknown or already-resolved approval (detail names the winner)."""
        body_in = {"tool_call_id": tool_call_id, "decision": body.decision, "answer": body.answer}
        return await submit(state, "approval", session_id, body_in, idempotency_key)

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

    # ------------------------------------------------------------------ debug

    @app.get("/v1/debug/stats", tags=["debug"], responses=ERRORS)
    async def stats() -> dict[str, Any]:
        """Live runners, subscribers per session, stream connections, busy_timeout_ms (F08, F15)."""
        return state.stats()

    @app.get("/v1/mcp", tags=["mcp"], responses=ERRORS)
    async def mcp_servers(cwd: str | None = None) -> dict[str, Any]:
        """MCP servers started by this daemon (per session cwd): state, error, pid, restarts,
        tools with annotations and approval (docs/mcp.md). ``cwd`` filters by directory."""
        status = getattr(state.registry.tool_source, "status", None)
        servers = status() if status is not None else []
        return {"servers": [s for s in servers if cwd is None or s.get("cwd") == cwd]}

    @app.post("/v1/debug/hibernate", tags=["debug"], responses=ERRORS)
    async def hibernate_now() -> dict[str, Any]:
        """Drop idle runners without attachers from memory now (normally every 30 s)."""
        return {"dropped": await hibernate(state), "runners": len(state.registry.runners)}

    return app
