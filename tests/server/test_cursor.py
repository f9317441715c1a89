"""F30: a resume cursor above the session's last seq is answered with ``stream.reset``, never silence.

Every path — WebSocket ``?since=``, SSE ``?since=`` and ``Last-Event-ID``, ``acagent attach
--since`` and the in-process client — tells the client the session's last seq; the streams then
continue from it (a new turn's events arrive). The same after the data directory was restored
from an older copy (the client's cursor was valid before the restore).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import websockets

from tests.server.conftest import ACAGENT, Daemon

pytestmark = pytest.mark.anyio

END = ("turn.completed", "turn.failed", "turn.interrupted")


def _turn(d: Daemon, sid: str, text: str) -> int:
    assert d.send(sid, text).status_code == 202
    return int(d.wait_status(sid, ("done",))["last_seq"])


async def _ws_frames(d: Daemon, sid: str, since: int, *, then_send: str | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    with anyio.fail_after(15):
        async with websockets.connect(
            f"{d.ws_url}/v1/sessions/{sid}/attach?since={since}", additional_headers=d.auth
        ) as ws:
            out.append(json.loads(await ws.recv()))
            if then_send is None:
                return out
            async with httpx.AsyncClient(base_url=d.url, headers=d.auth) as http:
                r = await http.post(f"/v1/sessions/{sid}/messages", json={"text": then_send})
                assert r.status_code == 202, r.text
            async for frame in ws:
                out.append(json.loads(frame))
                if out[-1].get("type") in END:
                    return out
    return out


async def _sse_first(d: Daemon, sid: str, *, since: int = 0, last_event_id: str | None = None) -> list[str]:
    """The field lines of the first SSE block after the opening comment."""
    headers = dict(d.auth)
    if last_event_id is not None:
        headers["Last-Event-ID"] = last_event_id
    lines: list[str] = []
    with anyio.fail_after(15):
        async with (
            httpx.AsyncClient(timeout=None) as client,
            client.stream(
                "GET", f"{d.url}/v1/sessions/{sid}/stream", params={"since": since}, headers=headers
            ) as r,
        ):
            assert r.status_code == 200
            async for line in r.aiter_lines():
                if line.startswith(":"):
                    continue
                if line == "" and lines:
                    return lines
                if line:
                    lines.append(line)
    return lines


def _check_reset(frame: dict[str, Any], since: int, last: int) -> None:
    assert frame["type"] == "stream.reset", frame
    assert frame["code"] == "cursor_ahead"
    assert (frame["since"], frame["last_seq"]) == (since, last)
    assert str(last) in frame["message"]
    assert "seq" not in frame  # not an event: a client never stores it as one


async def test_ws_cursor_ahead_gets_reset_then_continues(start_daemon: Any, workspace: Path) -> None:
    d = start_daemon()
    sid = d.create(workspace)["id"]
    last = _turn(d, sid, "say one")
    frames = await _ws_frames(d, sid, last + 50, then_send="say two")
    _check_reset(frames[0], last + 50, last)
    seqs = [f["seq"] for f in frames[1:]]
    assert seqs and seqs[0] == last + 1 and seqs == sorted(set(seqs)), seqs


async def test_sse_cursor_ahead_since_and_last_event_id(start_daemon: Any, workspace: Path) -> None:
    d = start_daemon()
    sid = d.create(workspace)["id"]
    last = _turn(d, sid, "say one")
    for kw in ({"since": last + 1}, {"last_event_id": str(last + 7)}):
        lines = await _sse_first(d, sid, **kw)  # type: ignore[arg-type]
        # The id line moves the browser's Last-Event-ID back to the session's last seq.
        assert lines[0] == f"id: {last}" and lines[1] == "event: stream.reset", lines
        frame = json.loads(lines[2].removeprefix("data: "))
        _check_reset(frame, kw.get("since") or int(kw["last_event_id"]), last)  # type: ignore[call-overload]
    # A cursor equal to last_seq is not ahead: no reset, the stream just waits (live).
    with pytest.raises(TimeoutError):
        with anyio.fail_after(1.0):
            await _sse_first(d, sid, since=last)


def test_attach_since_ahead_one_line_exit_1(start_daemon: Any, workspace: Path) -> None:
    d = start_daemon()
    sid = d.create(workspace)["id"]
    last = _turn(d, sid, "say one")
    for extra in ([], ["--json"]):
        p = subprocess.run(
            [ACAGENT, "attach", sid, "--since", str(last + 3), *extra],
            env=d.env,
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )
        assert p.returncode == 1, (p.stdout, p.stderr)
        err = p.stderr.strip().splitlines()
        assert len(err) == 1 and "Traceback" not in p.stderr, p.stderr
        assert f"last seq {last}" in err[0] and "cursor_ahead" in err[0], err


async def test_restore_of_an_older_copy_resets_the_cursor(
    start_daemon: Any, workspace: Path, tmp_path: Path
) -> None:
    d = start_daemon()
    sid = d.create(workspace)["id"]
    old_last = _turn(d, sid, "say one")
    assert d.terminate() == 0
    backup = tmp_path / "backup"
    backup.mkdir()
    for f in d.home.glob("acagent.db*"):
        shutil.copy2(f, backup / f.name)
    d.start()
    new_last = _turn(d, sid, "say two")
    assert new_last > old_last
    assert d.terminate() == 0
    for f in d.home.glob("acagent.db*"):
        f.unlink()
    for f in backup.iterdir():
        shutil.copy2(f, d.home / f.name)
    d.start()
    restored = int(d.session(sid)["last_seq"])  # old_last, plus what the shutdown committed
    assert old_last <= restored < new_last
    # The client remembers new_last; the restored journal ends at `restored`.
    # (Opening the session may add the transcript_repaired warning: the transcript is newer.)
    frames = await _ws_frames(d, sid, new_last, then_send="say three")
    last = frames[0]["last_seq"]
    assert restored <= last < new_last
    _check_reset(frames[0], new_last, last)
    assert frames[1]["seq"] == last + 1


async def test_in_process_client_cursor_ahead(tmp_path: Path) -> None:
    from acagent.client import LocalSessionClient
    from acagent.errors import CursorAhead
    from acagent.runner import SessionRegistry
    from acagent.settings import Settings

    settings = Settings(home=tmp_path / "home")
    async with SessionRegistry.open(settings) as registry:
        row = await registry.create_session(tmp_path, model="openai:mock")
        client = LocalSessionClient(registry, row.id)
        with anyio.fail_after(5), pytest.raises(CursorAhead) as info:
            async for _ in client.events(row.last_seq + 1):
                pass
        assert info.value.detail == {"since": row.last_seq + 1, "last_seq": row.last_seq}


async def test_in_process_client_marks_re_sent_approvals_as_replays(tmp_path: Path) -> None:
    """The in-process client re-sends a pending approval at or below ``since`` as the daemon does:
    marked ``replay`` (F14), so a front end can tell it from a new request."""
    from acagent.client import LocalSessionClient
    from acagent.runner import SessionRegistry
    from acagent.settings import Settings
    from acagent.store import InsertToolCall

    settings = Settings(home=tmp_path / "home")
    async with SessionRegistry.open(settings) as registry:
        row = await registry.create_session(tmp_path, model="openai:mock")
        lease = await registry.journal.acquire_lease(row.id, "test", ttl_s=30)
        op = InsertToolCall(
            "c1", "t", "s", 0, "shell", {}, idempotent=False, status="waiting_user", approval="pending"
        )
        (request,) = await registry.journal.commit(
            row.id, [("approval.requested", {"tool_call_id": "c1", "name": "shell"})], lease=lease, ops=[op]
        )
        await registry.journal.release_lease(row.id, lease)
        client = LocalSessionClient(registry, row.id)
        with anyio.fail_after(5):
            async for event in client.events(request.seq):
                first = event
                break
        assert first.seq == request.seq and first.to_dict()["replay"] is True
        assert first.to_dict() == {**request.to_dict(), "replay": True}
