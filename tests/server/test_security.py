"""F16–F18: Host, Origin and credential checks — one guard for every route kind.

Error codes: acagent uses the suggested names ``forbidden_host``, ``forbidden_origin`` and
``unauthorized``; a malformed Host (missing, empty, repeated) is ``400 bad_request``.
Policies asserted here (documented in docs/daemon.md): ``localhost.`` and ``0.0.0.0`` are
refused, ``127.0.0.2`` (another loopback literal) is refused, the port of an accepted Host name is
not compared; the page's credential is an HttpOnly SameSite=Strict cookie (an HMAC of the token);
a handshake offering only ``acagent.bearer.<token>`` (F17 row j) gets 400.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from acagent.server._security import COOKIE_NAME, cookie_value
from tests.server.conftest import Daemon, body_json, header_lines, raw, req, status, ws


@pytest.fixture(scope="module")
def sid(daemon: Daemon, tmp_path_factory: pytest.TempPathFactory) -> str:
    w = tmp_path_factory.mktemp("w")
    return daemon.create(w)["id"]


def _code(resp: bytes) -> str | None:
    try:
        return body_json(resp)["error"]["code"]
    except (ValueError, KeyError, TypeError, IndexError):
        return None


def _normalized(resp: bytes) -> tuple[int, list[str], bytes]:
    head = [h for h in header_lines(resp) if not h.lower().startswith("date:")]
    return status(resp), sorted(head), resp.split(b"\r\n\r\n", 1)[1]


REFUSED_HOSTS = [
    ("rebind.attacker.example:{P}", 403),
    ("rebind.attacker.example", 403),
    ("127.0.0.1.rebind.example:{P}", 403),
    ("localhost.attacker.example:{P}", 403),
    ("127.0.0.1.attacker.example:{P}", 403),
    (":{P}", 403),
    ("localhost.:{P}", 403),
    ("0.0.0.0:{P}", 403),
    ("127.0.0.1:{P}@attacker.example", 403),
    ("attacker.example#@127.0.0.1:{P}", 403),
    ("127.0.0.1:{P}, attacker.example", 403),
    ("127.0.0.2:{P}", 403),
]
ACCEPTED_HOSTS = ["127.0.0.1:{P}", "localhost:{P}", "LOCALHOST:{P}", "[::1]:{P}", "127.0.0.1", "localhost"]


class TestHostCheckUnit:
    """Whole class: every F16 row fed to the Host check itself."""

    @pytest.mark.parametrize(("value", "expected"), REFUSED_HOSTS)
    def test_refused(self, value: str, expected: int) -> None:
        from acagent.server._security import GuardConfig, check_host

        names = GuardConfig(token="t", port=8765).host_names
        refusal = check_host([value.format(P=8765)], names)
        assert refusal is not None and refusal.status == expected and refusal.code == "forbidden_host"

    @pytest.mark.parametrize("value", ACCEPTED_HOSTS)
    def test_accepted(self, value: str) -> None:
        from acagent.server._security import GuardConfig, check_host

        assert check_host([value.format(P=8765)], GuardConfig(token="t", port=8765).host_names) is None

    @pytest.mark.parametrize("values", [[], [""], ["  "], ["127.0.0.1:8765", "attacker.example"]])
    def test_malformed_is_400(self, values: list[str]) -> None:
        from acagent.server._security import GuardConfig, check_host

        refusal = check_host(values, GuardConfig(token="t", port=8765).host_names)
        assert refusal is not None and refusal.status == 400

    @pytest.mark.parametrize(
        "origin",
        [
            "https://evil.example",
            "null",
            "http://127.0.0.1:8765.evil.example",
            "http://127.0.0.1.evil.example:8765",
            "http://localhost.evil.example:8765",
            "http://localhost:5173",
            "http://127.0.0.1",
            "https://127.0.0.1:8765",
            "http://127.0.0.1:8765/",
            "http://127.0.0.1:87650",
        ],
    )
    def test_origin_refused(self, origin: str) -> None:
        from acagent.server._security import GuardConfig, check_origin

        assert check_origin([origin], GuardConfig(token="t", port=8765).origins) is not None

    @pytest.mark.parametrize(
        "origin", ["http://127.0.0.1:8765", "http://localhost:8765", "HTTP://LOCALHOST:8765"]
    )
    def test_origin_accepted(self, origin: str) -> None:
        from acagent.server._security import GuardConfig, check_origin

        assert check_origin([origin], GuardConfig(token="t", port=8765).origins) is None


@pytest.mark.anyio
async def test_route_walk_every_route_passes_the_guard(tmp_path: Path) -> None:
    """F18 whole class: routes come from the router itself; each, in its scope kind, is refused for a
    foreign Host (403), a foreign Origin (403) and a missing credential (401, except the public page
    and login)."""
    from acagent.runner import SessionRegistry
    from acagent.server._app import create_app
    from acagent.server._security import PUBLIC_PATHS, Guard, GuardConfig, guard_of
    from acagent.server._state import DaemonState
    from acagent.settings import load_settings

    settings = load_settings({"home": tmp_path}, env={})
    async with SessionRegistry.open(settings) as registry:
        config = GuardConfig(token="tok", port=8765)
        app = create_app(DaemonState(registry=registry, settings=settings, guard=config))
        stack = app.build_middleware_stack()
        assert isinstance(guard_of(stack), Guard)
        routes: list[tuple[str, str, str]] = []
        for route in app.routes:
            path = route.path.replace("{session_id}", "ses_x").replace("{tool_call_id}", "call_x")  # type: ignore[attr-defined]
            methods = getattr(route, "methods", None)
            if methods is None:
                routes.append(("websocket", "GET", path))
            else:
                routes += [("http", m, path) for m in sorted(methods)]
        assert ("websocket", "GET", "/v1/sessions/ses_x/attach") in routes
        assert len(routes) >= 12

        async def call(kind: str, method: str, path: str, headers: list[tuple[str, str]]) -> int:
            scope: dict[str, Any] = {
                "type": kind,
                "asgi": {"version": "3.0"},
                "http_version": "1.1",
                "method": method,
                "scheme": "http" if kind == "http" else "ws",
                "path": path,
                "raw_path": path.encode(),
                "query_string": b"",
                "root_path": "",
                "client": ("127.0.0.1", 1),
                "server": ("127.0.0.1", 8765),
                "headers": [(k.lower().encode(), v.encode()) for k, v in headers],
                "extensions": {"websocket.http.response": {}},
                "subprotocols": [],
            }
            sent: list[dict[str, Any]] = []
            first = True

            async def receive() -> dict[str, Any]:
                nonlocal first
                if first:
                    first = False
                    return (
                        {"type": "websocket.connect"}
                        if kind == "websocket"
                        else {"type": "http.request", "body": b""}
                    )
                return (
                    {"type": "websocket.disconnect", "code": 1000}
                    if kind == "websocket"
                    else {"type": "http.disconnect"}
                )

            async def send(message: dict[str, Any]) -> None:
                sent.append(message)

            await app(scope, receive, send)
            starts = [
                m for m in sent if m["type"] in ("http.response.start", "websocket.http.response.start")
            ]
            assert not any(m["type"] == "websocket.accept" for m in sent), (method, path)
            return int(starts[0]["status"])

        for kind, method, path in routes:
            base = [("Host", "127.0.0.1:8765")]
            assert await call(kind, method, path, [("Host", "evil.example:8765")]) == 403, (
                kind,
                method,
                path,
            )
            assert await call(kind, method, path, [*base, ("Origin", "https://evil.example")]) == 403, (
                method,
                path,
            )
            expected = 401
            if kind == "http" and method in ("GET", "HEAD") and path in PUBLIC_PATHS:
                expected = 0
            if expected:
                assert await call(kind, method, path, base) == 401, (kind, method, path)


class TestF16Live:
    """F16 against the real daemon, raw bytes."""

    def _requests(self, d: Daemon, sid: str, host: str, token: bool) -> dict[str, bytes]:
        auth = [("Authorization", f"Bearer {d.token}")] if token else []
        base = [("Host", host), *auth, ("Connection", "close")]
        return {
            "list": req("GET", "/v1/sessions", base),
            "create": req("POST", "/v1/sessions", [*base, ("Content-Type", "application/json")], b"{}"),
            "stream": req("GET", f"/v1/sessions/{sid}/stream?since=0", base),
            "ws": ws(f"/v1/sessions/{sid}/attach?since=0", host, None, auth),
            "page": req("GET", "/", base),
            "login": req("GET", f"/login?token={d.token}", base),
            "nope": req("GET", "/no/such/route", base),
        }

    def test_refused_hosts_identical_answers(self, daemon: Daemon, sid: str) -> None:
        before_list = daemon.http.get("/v1/sessions").json()
        before_events = daemon.events(sid)
        P = daemon.port
        for value, expected in REFUSED_HOSTS:
            host = value.format(P=P)
            answers = {}
            for token in (True, False):
                for name, request in self._requests(daemon, sid, host, token).items():
                    resp = raw(P, request)
                    assert status(resp) == expected, (host, name, token, resp[:200])
                    assert _code(resp) == "forbidden_host", (host, name)
                    assert not resp.startswith(b"HTTP/1.1 101")
                    lowered = resp.split(b"\r\n\r\n", 1)[0].lower()
                    assert b"text/event-stream" not in lowered
                    assert b"set-cookie" not in lowered and b"access-control-allow-origin" not in lowered
                    answers[(name, token)] = _normalized(resp)
            plain = {k: v for k, v in answers.items() if k[0] in ("list", "nope", "page", "login")}
            assert len(set(map(repr, plain.values()))) == 1, (host, plain)
        # nothing changed
        assert [r["id"] for r in daemon.http.get("/v1/sessions").json()] == [r["id"] for r in before_list]
        assert daemon.events(sid) == before_events

    def test_malformed_host_rows(self, daemon: Daemon) -> None:
        P = daemon.port
        token = ("Authorization", f"Bearer {daemon.token}")
        empty = raw(P, req("GET", "/v1/sessions", [("Host", ""), token, ("Connection", "close")]))
        assert status(empty) in (400, 403)
        two = raw(
            P, req("GET", "/v1/sessions", [("Host", f"127.0.0.1:{P}"), ("Host", "attacker.example"), token])
        )
        assert status(two) == 400
        none = raw(P, req("GET", "/v1/sessions", [token, ("Connection", "close")]))
        assert status(none) == 400
        old = raw(P, req("GET", "/v1/sessions", [], version="HTTP/1.0"))
        assert status(old) in (400, 401, 403, 404)

    def test_rebinding_pair(self, daemon: Daemon) -> None:
        P = daemon.port
        resp = raw(
            P,
            req(
                "GET",
                "/v1/sessions",
                [
                    ("Host", f"rebind.attacker.example:{P}"),
                    ("Origin", f"http://rebind.attacker.example:{P}"),
                    ("Authorization", f"Bearer {daemon.token}"),
                    ("Connection", "close"),
                ],
            ),
        )
        assert status(resp) == 403 and _code(resp) == "forbidden_host"

    def test_accepted_hosts(self, daemon: Daemon, sid: str) -> None:
        P = daemon.port
        for value in ("127.0.0.1:{P}", "localhost:{P}", "LOCALHOST:{P}"):
            host = value.format(P=P)
            with_token = raw(
                P,
                req(
                    "GET",
                    "/v1/sessions",
                    [("Host", host), ("Authorization", f"Bearer {daemon.token}"), ("Connection", "close")],
                ),
            )
            assert status(with_token) == 200
            without = raw(P, req("GET", "/v1/sessions", [("Host", host), ("Connection", "close")]))
            assert status(without) == 401 and _code(without) == "unauthorized"
            stream = raw(
                P, req("GET", f"/v1/sessions/{sid}/stream", [("Host", host), ("Connection", "close")])
            )
            assert status(stream) == 401
            page = raw(P, req("GET", "/", [("Host", host), ("Connection", "close")]))
            assert status(page) == 200 and b"<html" in page
            login = raw(
                P, req("GET", f"/login?token={daemon.token}", [("Host", host), ("Connection", "close")])
            )
            assert status(login) == 303
            cookie = next(h for h in header_lines(login) if h.lower().startswith("set-cookie:"))
            assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
            assert daemon.token not in cookie
            bad_login = raw(P, req("GET", "/login?token=wrong", [("Host", host), ("Connection", "close")]))
            assert status(bad_login) == 401 and b"set-cookie" not in bad_login.lower()


def _ws_status(resp: bytes) -> int:
    return status(resp)


class TestF17Origin:
    """F17: cross-site WebSocket hijacking and foreign-Origin SSE."""

    def _approval_session(self, daemon: Daemon, tmp: Path) -> tuple[str, Path]:
        w = tmp / "f17"
        w.mkdir(exist_ok=True)
        sid = daemon.create(w)["id"]
        assert daemon.send(sid, "shell touch approved.txt").status_code == 202
        daemon.wait_status(sid, ("waiting_user",))
        return sid, w

    def test_rows(self, daemon: Daemon, tmp_path: Path) -> None:
        sid, w = self._approval_session(daemon, tmp_path)
        P, T = daemon.port, daemon.token
        host = f"127.0.0.1:{P}"
        path = f"/v1/sessions/{sid}/attach?since=0"
        cred = [("Cookie", f"{COOKIE_NAME}={cookie_value(T)}")]
        good = ws(path, host, None, [("Authorization", f"Bearer {T}")])
        before = daemon.events(sid)
        foreign = [
            "https://evil.example",
            "null",
            f"http://127.0.0.1:{P}.evil.example",
            f"http://127.0.0.1.evil.example:{P}",
            f"http://localhost.evil.example:{P}",
            "http://localhost:5173",
        ]
        refused = [ws(path, host, "https://evil.example")]  # row a: no credential
        for origin in foreign:  # rows b-e with the cookie, and with ?token=
            refused.append(ws(path, host, origin, cred))
            refused.append(ws(path + f"&token={T}", host, origin))
        refused.append(
            ws(
                path,
                host,
                "https://evil.example",
                [("Sec-WebSocket-Protocol", f"acagent.v1, acagent.bearer.{T}")],
            )
        )  # k
        for request in refused:
            for _ in range(2):  # step 6: a good connection in between never lets it through
                resp = raw(P, request)
                assert status(resp) == 403 and _code(resp) == "forbidden_origin", resp[:300]
                ok = raw(P, good)
                assert status(ok) == 101
        h = raw(P, ws(path, host, None))  # row h
        assert status(h) == 401 and _code(h) == "unauthorized"
        for origin in (f"http://127.0.0.1:{P}", f"http://localhost:{P}"):  # row f
            assert status(raw(P, ws(path, host, origin, cred))) == 101
        i = raw(
            P,
            ws(
                path,
                host,
                f"http://127.0.0.1:{P}",
                [("Sec-WebSocket-Protocol", f"acagent.v1, acagent.bearer.{T}")],
            ),
        )
        assert status(i) == 101
        assert "sec-websocket-protocol: acagent.v1" in [x.lower() for x in header_lines(i)]
        assert T not in i.decode("latin-1")
        j = raw(
            P, ws(path, host, f"http://127.0.0.1:{P}", [("Sec-WebSocket-Protocol", f"acagent.bearer.{T}")])
        )
        assert status(j) == 400 and T not in j.decode("latin-1")
        # SSE
        sse_cred = [("Host", host), *cred, ("Connection", "close")]
        bad = raw(
            P,
            req("GET", f"/v1/sessions/{sid}/stream?since=0", [*sse_cred, ("Origin", "https://evil.example")]),
        )
        assert status(bad) == 403 and _code(bad) == "forbidden_origin" and b"event-stream" not in bad
        good_sse = raw(
            P,
            req(
                "GET", f"/v1/sessions/{sid}/stream?since=0", [*sse_cred, ("Origin", f"http://127.0.0.1:{P}")]
            ),
            timeout=1.0,
        )
        assert status(good_sse) == 200 and b"text/event-stream" in good_sse
        assert b"approval.requested" in good_sse
        # nothing happened
        after = daemon.events(sid)
        assert [e for e in after if e["type"] in ("user.message", "approval.resolved")] == [
            e for e in before if e["type"] in ("user.message", "approval.resolved")
        ]
        assert daemon.session(sid)["pending_approvals"]
        assert not (w / "approved.txt").exists()
        tcid = daemon.session(sid)["pending_approvals"][0]["tool_call_id"]
        daemon.http.post(f"/v1/sessions/{sid}/approvals/{tcid}", json={"decision": "deny"})
        daemon.wait_status(sid, ("done",))

    def test_good_ws_receives_pending_approval(self, daemon: Daemon, tmp_path: Path) -> None:
        """Rows f, g, i connect and get the session's events, including the pending approval."""
        import websockets.sync.client as wsc

        sid, _ = self._approval_session(daemon, tmp_path)
        for kw in (
            {"additional_headers": daemon.auth},
            {
                "subprotocols": ["acagent.v1", f"acagent.bearer.{daemon.token}"],
                "origin": f"http://127.0.0.1:{daemon.port}",
            },
            {
                "additional_headers": {"Cookie": f"{COOKIE_NAME}={cookie_value(daemon.token)}"},
                "origin": f"http://localhost:{daemon.port}",
            },
        ):
            with wsc.connect(f"{daemon.ws_url}/v1/sessions/{sid}/attach?since=0", **kw) as conn:  # type: ignore[arg-type]
                types = []
                while "approval.requested" not in types:
                    types.append(json.loads(conn.recv(timeout=5))["type"])
        tcid = daemon.session(sid)["pending_approvals"][0]["tool_call_id"]
        daemon.http.post(f"/v1/sessions/{sid}/approvals/{tcid}", json={"decision": "deny"})
        daemon.wait_status(sid, ("done",))


class TestF18Parity:
    """F18: every route kind answers bad requests the same way."""

    def test_parity_matrix(self, daemon: Daemon, sid: str) -> None:
        P, T = daemon.port, daemon.token
        host = f"127.0.0.1:{P}"

        def kinds(headers: list[tuple[str, str]], query: str = "") -> dict[str, bytes]:
            h = [("Connection", "close"), *headers]
            return {
                "list": raw(P, req("GET", "/v1/sessions" + query, h)),
                "get": raw(P, req("GET", f"/v1/sessions/{sid}" + query, h)),
                "events": raw(
                    P, req("GET", f"/v1/sessions/{sid}/events?since=0" + query.replace("?", "&"), h)
                ),
                "sse": raw(
                    P,
                    req("GET", f"/v1/sessions/{sid}/stream?since=0" + query.replace("?", "&"), h),
                    timeout=1.0,
                ),
                "ws": raw(
                    P,
                    ws(
                        f"/v1/sessions/{sid}/attach?since=0" + query.replace("?", "&"),
                        next(v for k, v in headers if k == "Host"),
                        None,
                        [x for x in headers if x[0] != "Host"],
                    ),
                ),
            }

        def expect(answers: dict[str, bytes], code: int, err: str) -> None:
            for name, resp in answers.items():
                assert status(resp) == code, (name, resp[:200])
                assert _code(resp) == err, (name, resp[:200])
                assert b"text/event-stream" not in resp.split(b"\r\n\r\n")[0]

        auth = ("Authorization", f"Bearer {T}")
        for value, _ in REFUSED_HOSTS:
            expect(kinds([("Host", value.format(P=P)), auth]), 403, "forbidden_host")
        for origin in [
            "https://evil.example",
            "null",
            f"http://127.0.0.1.evil.example:{P}",
            "http://localhost:5173",
        ]:
            answers = kinds(
                [("Host", host), ("Cookie", f"{COOKIE_NAME}={cookie_value(T)}"), ("Origin", origin)]
            )
            expect({k: v for k, v in answers.items() if k in ("sse", "ws")}, 403, "forbidden_origin")
        bad_creds: list[list[tuple[str, str]]] = [
            [],
            [("Authorization", "Bearer wrong")],
            [("Authorization", "Bearer " + T[:-1] + ("A" if T[-1] != "A" else "B"))],
            [("Authorization", "Basic " + __import__("base64").b64encode(f"user:{T}".encode()).decode())],
            [("Cookie", f"{COOKIE_NAME}=made-up")],
        ]
        for cred in bad_creds:
            expect(kinds([("Host", host), *cred]), 401, "unauthorized")
        wrong_query = kinds([("Host", host)], query="?token=" + T[:-1] + ("A" if T[-1] != "A" else "B"))
        expect(wrong_query, 401, "unauthorized")
        good = kinds([("Host", host), auth])
        for name in ("list", "get", "events"):
            assert status(good[name]) == 200 and b"application/json" in good[name].split(b"\r\n\r\n")[0]
        assert status(good["sse"]) == 200 and b"text/event-stream" in good["sse"]
        assert status(good["ws"]) == 101

    def test_path_method_variants_and_unknown_session(self, daemon: Daemon, sid: str) -> None:
        P, T = daemon.port, daemon.token
        host = ("Host", f"127.0.0.1:{P}")
        for leaf in ("attach", "stream"):
            for path in [
                f"//v1/sessions/{sid}/{leaf}",
                f"/v1/sessions/{sid}/{leaf}/",
                f"/V1/sessions/{sid}/{leaf}",
                f"/v1/sessions/{sid}/./{leaf}",
                f"/v1/sessions/{sid}/x/../{leaf}",
                f"/v1/sessions/{sid}%2F{leaf}",
                f"/v1/sessions/{sid}/{leaf};x=1",
                f"/v1/sessions/{sid}/{leaf}%00",
            ]:
                plain = raw(P, req("GET", path, [host, ("Connection", "close")]), timeout=1.0)
                hs = raw(P, ws(path, host[1], None))
                for resp in (plain, hs):
                    assert status(resp) in (400, 401, 403, 404), (path, resp[:200])
                    assert b"event-stream" not in resp
        handshake = [
            ("Upgrade", "websocket"),
            ("Connection", "Upgrade"),
            ("Sec-WebSocket-Version", "13"),
            ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ]
        variants = [
            req("HEAD", f"/v1/sessions/{sid}/stream", [host, ("Connection", "close")]),
            req("OPTIONS", f"/v1/sessions/{sid}/attach", [host, ("Connection", "close")]),
            req("GET", f"/v1/sessions/{sid}/stream", [host, *handshake]),
            req("POST", f"/v1/sessions/{sid}/messages", [host, *handshake]),
            req(
                "GET",
                "/v1/sessions",
                [
                    host,
                    ("Upgrade", "h2c"),
                    ("Connection", "Upgrade, HTTP2-Settings"),
                    ("HTTP2-Settings", "AAMAAABkAAQAAP__"),
                ],
            ),
            req("GET", "/v1/sessions", [], version="HTTP/1.0"),
        ]
        for request in variants:
            resp = raw(P, request, timeout=1.0)
            assert status(resp) in (400, 401, 403, 404), (request[:60], resp[:200])
            assert b"event-stream" not in resp
        head = raw(P, variants[0], timeout=1.0)
        assert status(head) == 401

        # unknown session: same answer as a real one without credentials, 404 with them
        def unknown(path: str, auth: bool) -> bytes:
            extra = [("Authorization", f"Bearer {T}")] if auth else []
            if path.endswith("attach"):
                return raw(P, ws(path + "?since=0", host[1], None, extra))
            return raw(P, req("GET", path + "?since=0", [host, *extra, ("Connection", "close")]), timeout=1.0)

        for leaf in ("attach", "stream"):
            missing = unknown(f"/v1/sessions/does-not-exist/{leaf}", False)
            real = unknown(f"/v1/sessions/{sid}/{leaf}", False)
            assert _normalized(missing) == _normalized(real) and status(missing) == 401
            found = unknown(f"/v1/sessions/does-not-exist/{leaf}", True)
            assert status(found) == 404 and _code(found) == "session_not_found"
