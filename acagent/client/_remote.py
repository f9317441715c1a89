"""Talking to a running daemon: discovery, and a :class:`SessionClient` over HTTP + WebSocket.

:func:`open_remote` is what :func:`acagent.cli._common.open_client` uses when a daemon serves the
data directory (found by :mod:`acagent.client._discovery`, which is cheap): it opens, resumes or
creates the session through the HTTP API and yields the same :class:`~acagent.client.Opened` as the
in-process path, with a :class:`RemoteSessionClient`.

:meth:`RemoteSessionClient.events` reconnects by itself: after a dropped connection (or a 4008
"re-attach" close, or a daemon restart on another port — ``daemon.json`` is read again) it
reconnects with ``since`` = the highest seq it delivered, with exponential backoff capped at 10 s,
and drops duplicates by seq. Re-sent pending approvals (``"replay": true``) are delivered once
and never move the cursor. A 404 from the daemon ends the iteration with
:class:`~acagent.errors.SessionNotFound`; a ``stream.reset`` frame (the cursor is above the
session's last seq) with :class:`~acagent.errors.CursorAhead`; a ``stream.error`` frame (F148) with
the error of its envelope, never a reconnect. Error envelopes are mapped back to the
:mod:`acagent.errors` class of their ``code`` (``session_busy`` → :class:`SessionBusy`, …), and
httpx / websockets exceptions never leave this module untranslated.
"""

from __future__ import annotations

import os
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import orjson

from acagent import errors as E
from acagent._pids import is_stopped
from acagent.client._base import ReplayedEvent
from acagent.client._discovery import DaemonInfo, DaemonUnavailable, check_answering, daemon_info, read_token
from acagent.client._opened import Opened
from acagent.client._remote_errors import cursor_ahead, error_from_envelope, map_http
from acagent.events import Event
from acagent.settings import Settings

__all__ = [
    "DaemonInfo",
    "DaemonUnavailable",
    "RemoteSessionClient",
    "ReplayedEvent",
    "cursor_ahead",
    "daemon_info",
    "error_from_envelope",
    "find_session",
    "open_remote",
    "read_token",
]

MAX_BACKOFF_S = 10.0


STALL_CHECK_S = 2.0
"""Seconds without a stream frame after which the daemon's process state is checked (F137)."""
RETRIES = 2
"""Retries of a request sent with an ``Idempotency-Key`` (:meth:`RemoteSessionClient.request`)."""


class RemoteSessionClient:
    """A :class:`~acagent.client.SessionClient` for one session served by a daemon.

    Args:
        home: the data directory (``daemon.json`` is re-read after a failed connection).
        info: the daemon found at open time.
        session_id: the session.
        auto_approve: send ``auto_approve`` with each message (``--yes``).
        http: a shared ``httpx.AsyncClient`` (created when None).
    """

    def __init__(
        self,
        home: Path,
        info: DaemonInfo,
        session_id: str,
        *,
        auto_approve: bool = False,
        http: httpx.AsyncClient | None = None,
        token: str | None = None,
    ) -> None:
        self.home = Path(home)
        self.info = info
        self.session_id = session_id
        self.auto_approve = auto_approve
        self.token = token or read_token(self.home)
        self._own_http = http is None
        self.http = http or httpx.AsyncClient(timeout=httpx.Timeout(30.0, connect=5.0))
        self.reconnects = 0
        """How many times :meth:`events` reconnected (for tests and the UI)."""

    # ------------------------------------------------------------------ HTTP

    def _headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.token}"}

    async def request(self, method: str, path: str, *, idempotent: bool = False, **kw: Any) -> Any:
        """One API call; returns the decoded JSON answer.

        ``idempotent``: the request carries a fresh ``Idempotency-Key`` and is retried with the
        same key (up to :data:`RETRIES` more times, 0.5 s then 1 s apart, re-reading
        ``daemon.json`` in case the daemon restarted) when the daemon could not be reached or its
        answer was lost: the daemon answers a retry with the first answer, so a lost answer never
        starts a second turn.

        Raises:
            AcagentError: the daemon's error envelope, mapped by ``code``.
            DaemonUnavailable: the daemon cannot be reached (a daemon stopped meanwhile by
                SIGSTOP is named so, at the first failed attempt).
        """
        headers = self._headers()
        if idempotent:
            headers["idempotency-key"] = f"cli-{os.urandom(12).hex()}"
        for attempt in range(RETRIES + 1 if idempotent else 1):
            try:
                with map_http():
                    resp = await self.http.request(method, self.info.url + path, headers=headers, **kw)
                break
            except DaemonUnavailable:
                if is_stopped(self.info.pid):  # stopped after it was found: say so, no retry (F137)
                    check_answering(self.info)
                if attempt >= RETRIES or not idempotent:
                    raise
                await anyio.sleep(0.5 * 2**attempt)
                self._refresh_info()
        try:
            body = resp.json()
        except ValueError:
            body = None
        if resp.status_code >= 400:
            raise error_from_envelope(resp.status_code, body)
        return body

    async def send(self, text: str | None) -> str:
        """See :meth:`SessionClient.send` (``text=None`` is not supported through the daemon: it
        continues interrupted turns by itself)."""
        if text is None:
            snap = await self.snapshot()
            for _ in range(50):  # the daemon's recovery pass picks an orphaned turn up within ~2 s
                if snap.get("busy") and snap.get("turn_id"):
                    return str(snap["turn_id"])
                if snap.get("status") not in ("running", "waiting_tool", "waiting_user"):
                    break
                await anyio.sleep(0.2)
                snap = await self.snapshot()
            raise E.UserError(
                f"session {self.session_id} has no interrupted turn to finish (it is {snap.get('status')!r})"
            )
        body = {"text": text, "auto_approve": self.auto_approve}
        data = await self.request(
            "POST", f"/v1/sessions/{self.session_id}/messages", json=body, idempotent=True
        )
        return str(data["turn_id"])

    async def cancel(self, *, turn_id: str | None = None) -> None:
        """See :meth:`SessionClient.cancel`."""
        body = {"turn_id": turn_id} if turn_id else None
        await self.request("POST", f"/v1/sessions/{self.session_id}/cancel", json=body, idempotent=True)

    async def answer(self, tool_call_id: str, decision: str, *, answer: str | None = None) -> None:
        """See :meth:`SessionClient.answer`."""
        body: dict[str, Any] = {"decision": "allow" if decision == "answered" else decision}
        if answer is not None:
            body["answer"] = answer
        from urllib.parse import quote

        await self.request(
            "POST",
            f"/v1/sessions/{self.session_id}/approvals/{quote(tool_call_id, safe='')}",
            json=body,
            idempotent=True,
        )

    async def snapshot(self) -> dict[str, Any]:
        """See :meth:`SessionClient.snapshot`."""
        data: dict[str, Any] = await self.request("GET", f"/v1/sessions/{self.session_id}")
        return data

    async def wait_idle(self) -> None:
        """Wait until no turn runs on the session in the daemon."""
        while (await self.snapshot()).get("busy"):
            await anyio.sleep(0.1)

    # ------------------------------------------------------------------ events

    def _refresh_info(self) -> None:
        info = daemon_info(self.home)
        if info is not None:
            self.info = info

    async def events(self, since: int = 0) -> AsyncIterator[Event]:
        """See :meth:`SessionClient.events` and the module docstring.

        Raises:
            SessionNotFound: the daemon answered 404 for the session.
            AcagentError: the daemon refused the credential (401/403), or ended the stream with
                a ``stream.error`` frame / close code 1011 (e.g. ``JournalError`` for a stored
                event that does not decode, F148): never retried.
        """
        import websockets
        from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

        start = since
        last = since
        replayed: set[int] = set()
        delay = 0.0
        while True:
            if delay:
                await anyio.sleep(delay * (0.75 + random.random() / 2))
            url = f"{self.info.ws_url}/v1/sessions/{self.session_id}/attach?since={last}"
            got_any = False
            connected = False
            try:
                async with websockets.connect(
                    url,
                    additional_headers=self._headers(),
                    subprotocols=["acagent.v1"],  # type: ignore[list-item]
                    max_size=64 * 1024 * 1024,
                    open_timeout=10,
                    ping_interval=20,
                    ping_timeout=20,
                    compression=None,
                ) as ws:
                    connected = True
                    while True:
                        frame = await self._next_frame(ws)
                        if frame is None:
                            break
                        data = orjson.loads(frame)
                        if data.get("type") == "stream.reset":
                            raise cursor_ahead(self.session_id, data.get("since"), data.get("last_seq"))
                        if data.get("type") == "stream.error":  # not retried: it would fail again (F148)
                            raise error_from_envelope(500, data)
                        seq = int(data["seq"])
                        if data.pop("replay", False):
                            if (start < seq <= last) or seq in replayed:
                                continue
                            replayed.add(seq)
                            yield ReplayedEvent(**data)
                            continue
                        if seq <= last:
                            continue
                        last = seq
                        got_any = True
                        delay = 0.0
                        yield Event(**data)
            except InvalidStatus as exc:
                status = exc.response.status_code
                try:
                    body = orjson.loads(exc.response.body or b"null")
                except orjson.JSONDecodeError:
                    body = None
                err = error_from_envelope(status, body)
                if status in (400, 401, 403, 404):
                    raise err from None
            except ConnectionClosed as exc:
                if exc.rcvd is not None and exc.rcvd.code == 1011:  # the daemon's stream failed (F148)
                    raise E.AcagentError(
                        f"the daemon ended the stream with an error: {exc.rcvd.reason}"
                    ) from None
            except (InvalidHandshake, OSError, TimeoutError, orjson.JSONDecodeError):
                pass
            if is_stopped(self.info.pid):  # a connection lost to a stopped daemon (F137)
                check_answering(self.info)
            self.reconnects += 1
            if not connected:  # the daemon may have restarted on another port
                self._refresh_info()
            delay = min(MAX_BACKOFF_S, 0.2 if got_any or not delay else delay * 2)

    async def _next_frame(self, ws: Any) -> Any:
        """The next frame of ``ws``, or None once it closed normally.

        A daemon stopped (SIGSTOP, Ctrl-Z) while a stream is open sends nothing and its socket
        stays open: the WebSocket ping would notice only after ``ping_interval + ping_timeout``
        (40 s), and the reconnects after it would wait on for ever, a frozen screen with no word
        (F137's stream case). So every :data:`STALL_CHECK_S` seconds without a frame the daemon's
        process state is read (``/proc``, no request) and a stopped daemon ends the stream with
        F137's one line. ``recv`` is cancellation-safe in websockets' asyncio client (a cancelled
        call loses no message).

        Raises:
            DaemonUnavailable: the daemon's process is stopped.
        """
        from websockets.exceptions import ConnectionClosedOK

        while True:
            with anyio.move_on_after(STALL_CHECK_S):
                try:
                    return await ws.recv()
                except ConnectionClosedOK:
                    return None
            if is_stopped(self.info.pid):
                check_answering(self.info)

    async def aclose(self) -> None:
        """Close the HTTP client (if this object created it)."""
        if self._own_http:
            await self.http.aclose()


async def find_session(client: RemoteSessionClient, prefix: str) -> dict[str, Any]:
    """The session row for an id or unique prefix.

    Raises:
        SessionNotFound: no session, an ambiguous prefix, or one no id can start with (empty, or
            with a ``/`` or ``?`` that would reach another route: ``errors.check_session_prefix``).
    """
    E.check_session_prefix(prefix)
    try:
        data: dict[str, Any] = await client.request("GET", f"/v1/sessions/{prefix}")
        return data
    except E.SessionNotFound:
        rows = await client.request("GET", "/v1/sessions")
        matches = [r for r in rows if str(r["id"]).startswith(prefix)]
        if len(matches) != 1:
            what = "is ambiguous" if matches else "matches no session"
            raise E.SessionNotFound(
                f"session id {prefix!r} {what}; `acagent sessions list --all` lists them"
            ) from None
        return dict(matches[0])


@asynccontextmanager
async def open_remote(
    settings: Settings,
    info: DaemonInfo,
    *,
    resume: str | None = None,
    continue_: bool = False,
    cwd: str | None = None,
    title: str | None = None,
) -> AsyncIterator[Any]:
    """Open (or create) a session through the daemon; yields :class:`~acagent.cli._common.Opened`.

    Raises:
        SessionNotFound: unknown id, or nothing to continue in ``cwd``.
        DaemonUnavailable: the daemon cannot be reached.
    """
    client = RemoteSessionClient(settings.home, info, "", auto_approve=settings.auto_approve)
    try:
        if resume:
            row = await find_session(client, resume)
            created = False
        elif continue_:
            rows = await client.request("GET", "/v1/sessions", params={"cwd": cwd or os.getcwd(), "limit": 1})
            if not rows:
                raise E.SessionNotFound(f"no session to continue in {cwd!r}; start one with `acagent chat`")
            row, created = rows[0], False
        else:
            body: dict[str, Any] = {"cwd": cwd or os.getcwd(), "title": title}
            if settings.model:
                body["model"] = settings.model
            row = await client.request("POST", "/v1/sessions", json=body)
            created = True
        client.session_id = str(row["id"])
        yield Opened(
            client=client,
            session_id=client.session_id,
            created=created,
            last_seq=int(row["last_seq"]),
            remote=True,
            model=row.get("model"),
        )
    finally:
        await client.aclose()
