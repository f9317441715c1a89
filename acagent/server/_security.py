"""The daemon's one choke point: Host, Origin and credential checks for every request.

:class:`Guard` is a pure ASGI middleware that handles the ``http`` *and* the ``websocket``
scope (a middleware written for ``http`` only would leave every WebSocket route open, F18). It
runs before authentication and routing, in this order:

1. **Host** (DNS-rebinding defence, F16): exactly one ``Host`` header whose name is
   ``127.0.0.1``, ``localhost`` or ``[::1]`` (or the bound host when it is a concrete
   address), with an optional numeric port. Anything else is ``403 forbidden_host``; a missing,
   empty or repeated ``Host`` header is ``400 bad_request``. Names are compared whole and
   lower-cased, never by prefix; ``localhost.`` (trailing dot), ``0.0.0.0`` and other loopback
   literals such as ``127.0.0.2`` are refused (policy: no legitimate client sends them). The
   port is not compared: a request that reached this socket under a loopback name involves no
   DNS, and a port-forwarding proxy in front of the daemon keeps working.
2. **Origin** (cross-site WebSocket hijacking, F17): when an ``Origin`` header is present it
   must equal one of the daemon's own origins exactly (``http://127.0.0.1:PORT``,
   ``http://localhost:PORT``, ``http://[::1]:PORT``), lower-cased; ``null``, another port or a
   look-alike is ``403 forbidden_origin``. Terminal clients send no ``Origin``.
3. **Credential**: ``Authorization: Bearer <token>``; or the login cookie (an HMAC of the token,
   so the token itself never appears in a response header); or, on a WebSocket handshake, the
   query parameter ``?token=`` or the subprotocol ``acagent.bearer.<token>`` (also accepted as
   ``bearer.<token>``). Anything else is ``401 unauthorized``. A handshake that offers a bearer
   subprotocol must also offer ``acagent.v1`` (the protocol the daemon selects), otherwise it is
   ``400 bad_request`` — the daemon never selects the token as the protocol (F17 row j).
   A ``401`` carries ``WWW-Authenticate: Bearer realm="acagent"``. The login cookie acts only
   for the daemon's own page: a request without another credential that carries the cookie
   and a ``Sec-Fetch-Site`` other than ``same-origin`` or ``none`` (a URL the user typed) —
   ``same-site`` (another port or subdomain), ``cross-site`` or anything unknown — is ``403
   forbidden_cross_site``. A bearer credential is not affected (a browser cannot forge it).

Only ``GET /`` (the static page, which holds no data) and ``GET /login`` (which checks the token
it is given) skip step 3. A refused request gets the same answer on every path, with and
without a token: the rebound page learns nothing, not even which routes exist. Tokens are
compared with :func:`secrets.compare_digest`.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from collections.abc import Iterable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = [
    "COOKIE_NAME",
    "PUBLIC_PATHS",
    "SUBPROTOCOL",
    "Guard",
    "GuardConfig",
    "Refusal",
    "RefusedHandshakeLogFilter",
    "check_host",
    "check_origin",
    "cookie_value",
]

COOKIE_NAME = "acagent_session"
SUBPROTOCOL = "acagent.v1"
"""The WebSocket subprotocol the daemon selects when a client offers it."""
BEARER_PROTOCOL_PREFIXES = ("acagent.bearer.", "bearer.")
PUBLIC_PATHS = frozenset({"/", "/login", "/static/app.js", "/static/app.css", "/static/md.js"})
"""The page and its static files (no data), and the login URL: served without a credential."""
"""Paths served without a credential (Host and Origin are still checked)."""

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})
WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::", "[::]"})


@dataclass(frozen=True)
class Refusal:
    """Why a request was refused: HTTP status and error code."""

    status: int
    code: str
    message: str

    def body(self) -> bytes:
        """The error envelope."""
        return orjson.dumps({"error": {"code": self.code, "message": self.message, "detail": None}})

    def headers(self) -> list[tuple[bytes, bytes]]:
        """Response headers: the same for every refused request (no cookie, no CORS)."""
        body = self.body()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"cache-control", b"no-store"),
        ]
        if self.status == 401:  # RFC 9110 §11.6.1: a 401 names the scheme it wants
            headers.append((b"www-authenticate", b'Bearer realm="acagent"'))
        return headers


BAD_HOST = Refusal(400, "bad_request", "exactly one non-empty Host header is required")
FORBIDDEN_HOST = Refusal(
    403, "forbidden_host", "requests must be addressed to 127.0.0.1 or localhost (DNS-rebinding protection)"
)
FORBIDDEN_ORIGIN = Refusal(
    403, "forbidden_origin", "cross-origin requests are refused; use the daemon's own page"
)
UNAUTHORIZED = Refusal(
    401,
    "unauthorized",
    "missing or wrong credential: send 'Authorization: Bearer <token>' ($ACAGENT_HOME/token)",
)
FORBIDDEN_CROSS_SITE = Refusal(
    403,
    "forbidden_cross_site",
    "only the daemon's own page may use the login cookie (Sec-Fetch-Site must be same-origin or none);"
    " use the daemon's own page or a bearer token",
)
COOKIE_SITES = frozenset({"same-origin", "none"})
"""``Sec-Fetch-Site`` values under which the login cookie may act (module docstring, step 3)."""
BEARER_PROTOCOL_ONLY = Refusal(
    400, "bad_request", f"a bearer subprotocol must come with the {SUBPROTOCOL!r} subprotocol"
)


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


@dataclass
class GuardConfig:
    """What the guard compares against.

    Args:
        token: the bearer token (``$ACAGENT_HOME/token``).
        port: the port the daemon listens on (set once bound; origins include it).
        bound_host: the ``--host`` the daemon bound.
    """

    token: str
    port: int = 0
    bound_host: str = "127.0.0.1"
    _names: frozenset[str] = field(init=False, default=frozenset())

    def __post_init__(self) -> None:
        names = set(LOOPBACK_NAMES)
        bound = self.bound_host.strip().lower()
        if bound not in WILDCARD_HOSTS:
            names.add(_bracket(bound))
        self._names = frozenset(names)

    @property
    def host_names(self) -> frozenset[str]:
        """Accepted Host names (lower-case, IPv6 bracketed)."""
        return self._names

    @property
    def origins(self) -> frozenset[str]:
        """The daemon's own origins: ``http://NAME:PORT`` for each accepted name."""
        return frozenset(f"http://{name}:{self.port}" for name in self._names)

    @property
    def cookie(self) -> str:
        """The login cookie's value (derived from the token)."""
        return cookie_value(self.token)


def cookie_value(token: str) -> str:
    """The login cookie for ``token``: ``HMAC-SHA256(token, "acagent-login-cookie")``, hex."""
    return hmac.new(token.encode(), b"acagent-login-cookie", hashlib.sha256).hexdigest()


def _same(a: str, b: str) -> bool:
    return secrets.compare_digest(a.encode("utf-8", "replace"), b.encode("utf-8", "replace"))


def check_host(values: list[str], names: Iterable[str]) -> Refusal | None:
    """Check the ``Host`` header values of one request (F16).

    Args:
        values: every ``Host`` header value, in order (duplicates kept).
        names: accepted names, lower-case (IPv6 in brackets).

    Returns:
        None when accepted, else the refusal.
    """
    if len(values) != 1:
        return BAD_HOST
    value = values[0].strip().lower()
    if not value:
        return BAD_HOST
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return FORBIDDEN_HOST
        name, rest = value[: end + 1], value[end + 1 :]
    else:
        name, sep, port = value.partition(":")
        rest = sep + port
    if rest and not (rest.startswith(":") and rest[1:].isdigit() and rest[1:].isascii() and len(rest) <= 6):
        return FORBIDDEN_HOST
    if name not in set(names):
        return FORBIDDEN_HOST
    return None


def check_origin(values: list[str], origins: Iterable[str]) -> Refusal | None:
    """Check the ``Origin`` header values of one request (F17): absent, or exactly ours."""
    if not values:
        return None
    if len(values) != 1:
        return FORBIDDEN_ORIGIN
    if values[0].strip().lower() in set(origins):
        return None
    return FORBIDDEN_ORIGIN


def _headers(scope: Scope) -> dict[bytes, list[str]]:
    out: dict[bytes, list[str]] = {}
    for key, value in scope.get("headers", []):
        out.setdefault(key.lower(), []).append(value.decode("latin-1"))
    return out


def _cookies(values: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for header in values:
        for part in header.split(";"):
            name, sep, value = part.strip().partition("=")
            if sep:
                out.setdefault(name.strip(), []).append(value.strip().strip('"'))
    return out


def authenticated(scope: Scope, headers: dict[bytes, list[str]], config: GuardConfig) -> bool:
    """True when the request carries a valid credential (module docstring, step 3)."""
    if _bearer(scope, headers, config):
        return True
    return any(_same(v, config.cookie) for v in _cookies(headers.get(b"cookie", [])).get(COOKIE_NAME, []))


def _bearer(scope: Scope, headers: dict[bytes, list[str]], config: GuardConfig) -> bool:
    """True when the request carries the token itself (header, or a handshake's query/subprotocol)."""
    for value in headers.get(b"authorization", []):
        scheme, _, credential = value.strip().partition(" ")
        if scheme.lower() == "bearer" and credential and _same(credential.strip(), config.token):
            return True
    if scope["type"] == "websocket":
        query = scope.get("query_string", b"").decode("latin-1")
        for key, value in parse_qsl(query, keep_blank_values=True):
            if key == "token" and _same(value, config.token):
                return True
        for proto in scope.get("subprotocols", []):
            for prefix in BEARER_PROTOCOL_PREFIXES:
                if proto.startswith(prefix) and _same(proto[len(prefix) :], config.token):
                    return True
    return False


def evaluate(scope: Scope, config: GuardConfig) -> Refusal | None:
    """Run the three checks on one ``http`` or ``websocket`` scope; None means let it through."""
    headers = _headers(scope)
    refusal = check_host(headers.get(b"host", []), config.host_names)
    if refusal is not None:
        return refusal
    refusal = check_origin(headers.get(b"origin", []), config.origins)
    if refusal is not None:
        return refusal
    if scope["type"] == "websocket":
        offered = list(scope.get("subprotocols", []))
        if any(p.startswith(BEARER_PROTOCOL_PREFIXES) for p in offered) and SUBPROTOCOL not in offered:
            return BEARER_PROTOCOL_ONLY
    if (
        scope["type"] == "http"
        and scope.get("method") in ("GET", "HEAD")
        and scope.get("path") in PUBLIC_PATHS
    ):
        return None
    sites = [v.strip().lower() for v in headers.get(b"sec-fetch-site", [])]
    if (
        any(site not in COOKIE_SITES for site in sites)
        and _cookies(headers.get(b"cookie", [])).get(COOKIE_NAME)
        and not _bearer(scope, headers, config)
    ):
        # A browser says something other than the daemon's own page (or a typed URL) made this
        # request and it carries the login cookie: the cookie never acts for it — not for
        # another site, nor for a sibling port or subdomain (SameSite treats those as the same
        # site, so the cookie is sent). Belt and braces to SameSite=Strict + Origin.
        return FORBIDDEN_CROSS_SITE
    if not authenticated(scope, headers, config):
        return UNAUTHORIZED
    return None


REFUSED_HANDSHAKE: ContextVar[bool] = ContextVar("acagent_refused_handshake", default=False)
"""True in the task of a WebSocket handshake answered with a refusal, by this guard or by the
attach route (``server/_streams.py``: 400 bad ``since``, 404, 429 ``too_many_attachers``); see
:class:`RefusedHandshakeLogFilter`."""


CLIENT_FAULT_LINES = ("Invalid HTTP request received.", "Unsupported upgrade request.")
"""uvicorn's WARNING lines for a malformed request; the client already got a 400 (or plain HTTP)."""


class ClientFaultLogFilter(logging.Filter):
    """Drops uvicorn's warnings about a client's malformed request (:data:`CLIENT_FAULT_LINES`).

    Any local process can send bytes to the daemon's port, so a line per bad request would let it
    fill the daemon's log (the same class as F102). The client gets the 400 error envelope; the
    daemon's log keeps only faults of its own.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return str(record.msg) not in CLIENT_FAULT_LINES


class RefusedHandshakeLogFilter(logging.Filter):
    """Drops uvicorn's "ASGI callable returned without completing handshake." for a refusal.

    uvicorn's websockets-sansio protocol logs that line at ERROR after any app that answered a
    handshake through the denial-response extension (our 401/403/429), so every refused client
    could add an ERROR line to the daemon's log. The line is dropped only in the task whose
    handshake :func:`send_refusal` (or the attach route) refused; for any other handshake it still
    shows (a real fault).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return not (
            REFUSED_HANDSHAKE.get()
            and str(record.msg).startswith("ASGI callable returned without completing")
        )


async def send_refusal(scope: Scope, receive: Receive, send: Send, refusal: Refusal) -> None:
    """Answer ``refusal`` as a plain HTTP response (also for a WebSocket handshake: never a 101)."""
    if scope["type"] == "websocket":
        message = await receive()
        if message.get("type") != "websocket.connect":
            return
        REFUSED_HANDSHAKE.set(True)  # the same task logs uvicorn's line after the app returns
        if "websocket.http.response" in scope.get("extensions", {}):
            await send(
                {
                    "type": "websocket.http.response.start",
                    "status": refusal.status,
                    "headers": refusal.headers(),
                }
            )
            await send({"type": "websocket.http.response.body", "body": refusal.body()})
        else:  # pragma: no cover - uvicorn supports the denial-response extension
            await send({"type": "websocket.close", "code": 1008})
        return
    await send({"type": "http.response.start", "status": refusal.status, "headers": refusal.headers()})
    body = b"" if scope.get("method") == "HEAD" else refusal.body()
    await send({"type": "http.response.body", "body": body})


class Guard:
    """The ASGI middleware (module docstring). Wraps the whole application.

    Args:
        app: the application behind the guard.
        config: token, port and bound host.
    """

    def __init__(self, app: ASGIApp, config: GuardConfig) -> None:
        self.app = app
        self.config = config

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        refusal = evaluate(scope, self.config)
        if refusal is not None:
            await send_refusal(scope, receive, send, refusal)
            return
        scope.setdefault("state", {})
        await self.app(scope, receive, send)


def guard_of(app: Any) -> Guard | None:
    """The :class:`Guard` in a built middleware stack, if any (for tests)."""
    node = app
    seen = 0
    while node is not None and seen < 50:
        if isinstance(node, Guard):
            return node
        node = getattr(node, "app", None)
        seen += 1
    return None
