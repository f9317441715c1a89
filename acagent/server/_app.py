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
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket

from acagent.errors import AcagentError, DaemonStopping
from acagent.server._limits import BodyLimit
from acagent.server._observe import add_compact_route, add_metrics_route
from acagent.server._routes import add_session_routes
from acagent.server._schema import ERRORS
from acagent.server._security import COOKIE_NAME, Guard, _same
from acagent.server._state import DaemonState, hibernate

__all__ = ["DaemonStopping", "create_app"]

log = logging.getLogger("acagent.server")


# ---------------------------------------------------------------------------------------- helpers


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
    _add_error_handlers(app)
    add_metrics_route(app, state)
    add_compact_route(app, state)
    _add_page(app, state)
    add_session_routes(app, state)
    _add_debug(app, state)
    return app


def _add_error_handlers(app: FastAPI) -> None:
    """Every error answered with the one envelope (module docstring)."""

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


def _add_page(app: FastAPI, state: DaemonState) -> None:
    """The web page, its static files and the login URL."""
    page = _page_html()

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


def _add_debug(app: FastAPI, state: DaemonState) -> None:
    """Debug and MCP status routes."""

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
