"""F148: a stream that fails (a stored event row that does not decode) ends with the error, never
as a restart.

Before, a journal read error inside the stream pump ended as "closed" and both fronts sent the
restart close (WebSocket 1012 ``daemon stopping; re-attach with since=0``, SSE ``event: closed``):
``acagent attach --json`` re-attached every ~2 s for ever, printing nothing. Now the WebSocket gets
a ``stream.error`` frame with the error envelope and close code 1011, SSE an ``event: error``, the
CLI prints the same one line as plain ``attach`` and exits 1, and POST answers a non-retryable 500.

One real daemon on a real SQLite file whose first frame row's compressed payload is damaged.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import websockets

from tests.server.conftest import ACAGENT, Daemon, wait_for

pytestmark = pytest.mark.anyio


def _damage_first_frame(db: Path) -> None:
    """Damage the first frame row's payload so that it can never decode: its format byte, then a
    deflate block of the reserved type 3 (flipped bytes in a raw deflate stream may still inflate
    to valid JSON)."""
    con = sqlite3.connect(db)
    try:
        key, payload = con.execute(
            "SELECT key, payload FROM event_log WHERE type GLOB '[A-Z][A-Z]*' ORDER BY key LIMIT 1"
        ).fetchone()
        damaged = bytes(payload[:1]) + b"\x07" + bytes(len(payload))
        con.execute("UPDATE event_log SET payload = ? WHERE key = ?", (damaged, key))
        con.commit()
    finally:
        con.close()


@pytest.fixture
def corrupt(start_daemon: Callable[..., Daemon], workspace: Path) -> tuple[Daemon, str]:
    """A daemon serving a session whose first stored frame is damaged."""
    d = start_daemon()
    sid = d.create(workspace)["id"]
    assert d.send(sid, "say hello").status_code == 202
    d.wait_status(sid, ("done",))
    assert d.terminate(15) == 0
    _damage_first_frame(d.home / "acagent.db")
    return start_daemon(), sid


def _cli(d: Daemon, *args: str) -> subprocess.CompletedProcess[str]:
    # The timeout bounds a hang (the fault); it is not a speed assertion.
    return subprocess.run(
        [ACAGENT, *args],
        env=d.env,
        cwd=str(d.home),
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_attach_json_on_a_corrupt_session_exits_with_one_line(corrupt: tuple[Daemon, str]) -> None:
    d, sid = corrupt
    plain = _cli(d, "attach", sid, "--since", "0")
    as_json = _cli(d, "attach", sid, "--since", "0", "--json")
    assert as_json.returncode == plain.returncode == 1, (as_json, plain)
    line = as_json.stderr.strip()
    assert len(line.splitlines()) == 1 and "[journal_error]" in line and "Traceback" not in line, line
    assert line == plain.stderr.strip().splitlines()[-1]
    assert as_json.stdout == ""


async def test_websocket_gets_the_error_frame_not_the_restart(corrupt: tuple[Daemon, str]) -> None:
    d, sid = corrupt
    frames: list[dict[str, Any]] = []
    with anyio.fail_after(30):
        async with websockets.connect(
            f"{d.ws_url}/v1/sessions/{sid}/attach?since=0", additional_headers=d.auth
        ) as ws:
            with contextlib.suppress(websockets.ConnectionClosed):  # 1011 is an error close: it raises
                async for frame in ws:
                    frames.append(json.loads(frame))
    assert ws.close_code == 1011, (ws.close_code, ws.close_reason)
    assert ws.close_reason is not None and "daemon stopping" not in ws.close_reason
    assert frames and frames[-1]["type"] == "stream.error", frames
    assert frames[-1]["error"]["code"] == "journal_error"
    assert "stored" in frames[-1]["error"]["message"]


async def test_sse_gets_event_error_not_closed(corrupt: tuple[Daemon, str]) -> None:
    d, sid = corrupt
    text = ""
    with anyio.fail_after(30):
        async with (
            httpx.AsyncClient(timeout=None) as client,
            client.stream(
                "GET", f"{d.url}/v1/sessions/{sid}/stream", params={"since": 0}, headers=d.auth
            ) as r,
        ):
            assert r.status_code == 200
            async for chunk in r.aiter_text():  # the response ends after the error block
                text += chunk
    assert "event: closed" not in text and "daemon stopping" not in text, text
    block = text.split("event: error\n", 1)[1]
    envelope = json.loads(block.split("data: ", 1)[1].split("\n", 1)[0])
    assert envelope["error"]["code"] == "journal_error"


def test_run_through_the_daemon_on_a_corrupt_session_is_one_line(corrupt: tuple[Daemon, str]) -> None:
    d, sid = corrupt
    for args in (("run", "--resume", sid, "say again"), ("run", "--resume", sid, "--json", "say again")):
        done = _cli(d, *args)
        assert done.returncode == 1, done
        line = done.stderr.strip()
        assert len(line.splitlines()) == 1 and "[journal_error]" in line and "Traceback" not in line, line


def test_message_to_a_corrupt_session_is_a_500_not_a_503(corrupt: tuple[Daemon, str]) -> None:
    d, sid = corrupt
    r = d.send(sid, "say again")
    assert r.status_code == 500, r.text
    assert r.json()["error"]["code"] == "journal_error"


@pytest.mark.chromium
@pytest.mark.slow
def test_web_page_shows_the_stream_error_and_does_not_reconnect(
    corrupt: tuple[Daemon, str], workspace: Path, tmp_path: Path
) -> None:
    from tests.server.test_web import CHROMIUM, Browser

    if CHROMIUM is None:
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    d, sid = corrupt
    browser = Browser(tmp_path / "profile")
    try:
        browser.goto(f"{d.url}/login?token={d.token}")
        browser.goto(f"{d.url}/?cwd={workspace}#{sid}")
        wait_for(
            lambda: "stream failed" in browser.js("document.getElementById('conn').innerText"),
            30,
            what="error shown",
        )
        shown = browser.js("document.getElementById('conn').innerText")
        assert "journal_error" in shown and "daemon stopping" not in shown, shown
        assert browser.js("window.acagent.reconnects") == 0
    finally:
        browser.close()
