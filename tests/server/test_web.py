"""The web page in headless Chromium, driven over the DevTools protocol (no browser download needed).

Login URL → session page; send a message and watch the text stream; approve a tool call with the
button; cancel a turn; restart the daemon on the same port (the connection drops) and check the page
reconnects with its cursor: every seq rendered exactly once. Screenshots go to ``docs/screenshots/``
only when ``ACAGENT_SCREENSHOTS=1`` (tests never rewrite tracked files by default).
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets.sync.client as wsc

from tests.mockprovider import MockProvider, TextReply
from tests.server.conftest import Daemon, wait_for

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "screenshots" / "web.png"
SAVE_SCREENSHOTS = os.environ.get("ACAGENT_SCREENSHOTS") == "1"
"""Regenerate docs/screenshots/*.png (off by default: tests must not rewrite tracked files)."""
CORPUS = json.loads((Path(__file__).resolve().parents[1] / "render" / "unsafe_corpus.json").read_text())

pytestmark = [
    pytest.mark.chromium,
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install -y chromium)"),
]


class Browser:
    """A headless Chromium and one page, over CDP."""

    def __init__(self, profile: Path) -> None:
        self.proc = subprocess.Popen(
            [
                CHROMIUM,
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--no-default-browser-check",
                "--remote-debugging-port=0",
                f"--user-data-dir={profile}",
                "--window-size=1280,860",
                "about:blank",
            ],  # type: ignore[list-item]
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port_file = profile / "DevToolsActivePort"
        wait_for(lambda: port_file.exists() and port_file.read_text().strip(), 30, what="DevToolsActivePort")
        port = int(port_file.read_text().split()[0])
        pages = wait_for(
            lambda: [
                t for t in httpx.get(f"http://127.0.0.1:{port}/json/list").json() if t["type"] == "page"
            ],
            10,
        )
        self.conn = wsc.connect(pages[0]["webSocketDebuggerUrl"], max_size=None).__enter__()
        self._ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []
        """CDP events received so far (console messages, exceptions, log entries)."""
        self.call("Page.enable")
        self.call("Runtime.enable")
        self.call("Log.enable")

    def call(self, method: str, **params: Any) -> Any:
        msg_id = next(self._ids)
        self.conn.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.conn.recv(timeout=30))
            if "method" in msg:
                self.events.append(msg)
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result")

    def js(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def goto(self, url: str) -> None:
        self.call("Page.navigate", url=url)
        wait_for(lambda: self.js("document.readyState") == "complete", 15, what=f"load {url}")

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and CSP violations reported so far."""
        out = []
        for e in self.events:
            params = e.get("params", {})
            if e["method"] == "Runtime.exceptionThrown":
                out.append(json.dumps(params.get("exceptionDetails", {}))[:500])
            elif e["method"] == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                out.append(params["entry"].get("text", ""))
            elif e["method"] == "Runtime.consoleAPICalled" and params.get("type") == "error":
                out.append(json.dumps(params.get("args", []))[:500])
        return out

    def screenshot(self, path: Path) -> None:
        """Save a PNG of the page at ``path`` when ``ACAGENT_SCREENSHOTS=1`` (else nothing)."""
        if not SAVE_SCREENSHOTS:
            return
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            self.conn.close()
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_page_streams_approves_cancels_and_reconnects(
    start_daemon: Any, workspace: Path, tmp_path: Path, mock: MockProvider
) -> None:
    port = _free_port()
    d: Daemon = start_daemon("--port", str(port))
    assert d.port == port
    sid = d.create(workspace, title="web demo")["id"]
    browser = Browser(tmp_path / "profile")
    try:
        # login: the cookie is set, then the page lists this directory's sessions and opens ours
        browser.goto(f"{d.url}/login?token={d.token}")
        assert browser.js("location.pathname") == "/"
        browser.goto(f"{d.url}/?cwd={workspace}#{sid}")
        wait_for(
            lambda: (
                browser.js("window.acagent.sid") == sid
                and browser.js("document.getElementById('conn').className") == "up"
            ),
            15,
            what="page attached",
        )
        assert sid[:16] in browser.js("document.getElementById('sessions').innerText")

        def type_and_send(text: str) -> None:
            browser.js(
                f"document.getElementById('text').value = {json.dumps(text)}; "
                "document.getElementById('composer').requestSubmit(); true"
            )

        # 1. streamed text: the partial text grows while the reply streams
        type_and_send("deltas 30 8 80")
        samples: list[str] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            text = browser.js("window.acagent.text") or ""
            if not samples or text != samples[-1]:
                samples.append(text)
            if browser.js("document.querySelector('#log .assistant:not(.streaming)') !== null"):
                break
            time.sleep(0.05)
        assert len({len(s) for s in samples if s}) >= 3, samples  # several partial states were rendered
        d.wait_status(sid, ("done",))
        # 2. approval through the buttons
        type_and_send("shell touch from-web.txt")
        wait_for(
            lambda: browser.js("document.querySelectorAll('#approvals .card').length") == 1,
            15,
            what="approval card",
        )
        browser.screenshot(SCREENSHOT)
        browser.js("document.querySelector('#approvals .card button[data-decision=allow]').click(); true")
        d.wait_status(sid, ("done",))
        assert (workspace / "from-web.txt").exists()
        wait_for(
            lambda: browser.js("document.querySelectorAll('#approvals .card').length") == 0,
            10,
            what="card cleared",
        )
        # 3. cancel
        type_and_send("pause this reply will be cancelled")
        d.wait_event(sid, lambda e: e["type"] == "assistant.delta" and "this reply" in e["payload"]["text"])
        browser.js("document.getElementById('cancel').click(); true")
        d.wait_status(sid, ("cancelled",))
        mock.release(1)
        # 4. drop the connection (restart the daemon on the same port) and restore it
        before = browser.js("window.acagent.reconnects")
        d.terminate()
        d2: Daemon = start_daemon("--port", str(port))
        wait_for(
            lambda: (
                browser.js("window.acagent.reconnects") > before
                and browser.js("document.getElementById('conn').className") == "up"
            ),
            30,
            what="page reconnected",
        )
        assert d2.send(sid, "say back after the restart").status_code == 202
        d2.wait_status(sid, ("done",))
        last = d2.session(sid)["last_seq"]
        wait_for(lambda: browser.js("window.acagent.last") == last, 15, what="page caught up")
        rendered = browser.js("window.acagent.rendered")
        assert rendered == list(range(1, last + 1))  # every seq once, in order, across the drop
        log = browser.js("document.getElementById('log').innerText")
        assert "back after the restart" in log and "turn interrupted" in log
        partial = browser.js(
            "[...document.querySelectorAll('#log .assistant')].filter(e => e.innerText.includes('this reply wil')).length"
        )
        assert partial == 1, log  # the partial text kept after the cancel replaces its streamed bubble
        browser.screenshot(SCREENSHOT.with_name("web-after-reconnect.png"))
    finally:
        browser.close()
    assert not SAVE_SCREENSHOTS or SCREENSHOT.stat().st_size > 10_000


def test_page_has_no_inline_script_and_shows_approvals_faithfully(
    start_daemon: Any, workspace: Path, tmp_path: Path, mock: MockProvider
) -> None:
    """F65/F66: the CSP allows scripts from 'self' only (the page still works under it), and an
    approval card shows hidden characters escaped with a warning, by the rule the terminal uses
    (the shared corpus gives the same text and counts in the page as in Python)."""
    d: Daemon = start_daemon()
    page = httpx.get(f"{d.url}/")
    csp = page.headers["content-security-policy"]
    assert "unsafe-inline" not in csp and "script-src 'self'" in csp
    assert "<script>" not in page.text and " on" not in page.text.split("<body>", 1)[1].split("=", 1)[0]
    for name, kind in (("app.js", "javascript"), ("app.css", "css")):
        r = httpx.get(f"{d.url}/static/{name}")
        assert r.status_code == 200 and kind in r.headers["content-type"], name
    assert httpx.get(f"{d.url}/static/../_app.py").status_code in (401, 404)
    sid = d.create(workspace, title="faithful")["id"]
    browser = Browser(tmp_path / "profile")
    try:
        browser.goto(f"{d.url}/login?token={d.token}")
        browser.goto(f"{d.url}/?cwd={workspace}#{sid}")
        wait_for(lambda: browser.js("window.acagent && window.acagent.sid") == sid, 15, what="page attached")
        for case in CORPUS:
            got = browser.js(f"(() => {{ const r = window.acagentSafe({json.dumps(case['input'])}); "
                             "return [r.text, r.counts]; })()")  # fmt: skip
            assert got == [case["shown"], case["counts"]], case["name"]
        command = "cat notes.txt \u202e;lmth.exe\u202c\x1b[2K\x07rm\u200b -rf ~"  # no line break: the mock reads the last line
        browser.js(
            f"document.getElementById('text').value = {json.dumps('shell ' + command)}; "
            "document.getElementById('composer').requestSubmit(); true"
        )
        wait_for(lambda: browser.js("document.querySelectorAll('#approvals .card').length") == 1, 15)
        card = browser.js("document.querySelector('#approvals .card').innerText")
        for hidden in ("\u202e", "\u202c", "\u200b", "\x1b", "\x07"):
            assert hidden not in card, repr(hidden)
        assert "\\u202e;lmth.exe\\u202c\\x1b[2K\\x07rm\\u200b -rf ~" in card
        assert "⚠ hidden characters shown escaped: 2 bidi control, 2 control, 1 zero-width" in card
        assert "always: this exact command only, for this session" in card  # what 'Always' covers (F93)
        assert browser.js("document.querySelectorAll('#approvals .card .esc').length") == 5
        browser.screenshot(SCREENSHOT.with_name("web-approval-escaped.png"))
        browser.js("document.querySelector('#approvals .card button[data-decision=deny]').click(); true")
        d.wait_status(sid, ("done",))
        assert browser.errors() == []  # no CSP violation, no exception
    finally:
        browser.close()


def test_page_markdown_tools_status_sessions_and_phone(
    start_daemon: Any, workspace: Path, tmp_path: Path, mock: MockProvider
) -> None:
    """Issue 17 (web): markdown (a code block is a <pre><code> with a Copy button), tool cards that
    expand, the live status during a slow turn, full ids in the session list, rename and the
    transcript download, a 390×844 viewport without horizontal scroll, and the reconnect state."""
    port = _free_port()
    d: Daemon = start_daemon("--port", str(port))
    sid = d.create(workspace, title="web features")["id"]
    browser = Browser(tmp_path / "profile")

    def send(text: str) -> None:
        browser.js(
            f"document.getElementById('text').value = {json.dumps(text)}; "
            "document.getElementById('composer').requestSubmit(); true"
        )

    try:
        browser.goto(f"{d.url}/login?token={d.token}")
        browser.goto(f"{d.url}/?cwd={workspace}#{sid}")
        wait_for(lambda: browser.js("document.getElementById('conn').className") == "up", 15, what="attached")
        assert sid in browser.js("document.getElementById('sessions').innerText")  # the whole id
        # markdown
        mock.script(
            TextReply("Here is **bold** and `x`:\n\n```python\nprint('<b>hi</b>')\n```\n- one\n- two")
        )
        send("markdown please")
        wait_for(lambda: browser.js("document.querySelector('#log .assistant pre > code') !== null"), 15)
        assert (
            browser.js("document.querySelector('#log .assistant pre > code').textContent")
            == "print('<b>hi</b>')"
        )
        assert browser.js("document.querySelectorAll('#log .assistant li').length") == 2
        assert browser.js("document.querySelector('#log .assistant strong').textContent") == "bold"
        assert browser.js("document.querySelector('#log .assistant b') === null")  # text, never markup
        assert browser.js("document.querySelector('#log .codeblock button.copy') !== null")
        d.wait_status(sid, ("done",))
        # the live status during a slow turn, gone at the end
        send("slow 2 finally")
        wait_for(
            lambda: (
                "waiting for the model" in (browser.js("document.getElementById('status').innerText") or "")
            ),
            10,
        )
        assert "Cancel to interrupt" in browser.js("document.getElementById('status').innerText")
        d.wait_status(sid, ("done",))
        wait_for(lambda: browser.js("document.getElementById('status').classList.contains('hidden')"), 10)
        # a tool card: collapsed, expands to its output
        send("shell echo from-the-card")
        wait_for(lambda: browser.js("document.querySelectorAll('#approvals .card').length") == 1, 15)
        browser.js("document.querySelector('#approvals .card button[data-decision=allow]').click(); true")
        d.wait_status(sid, ("done",))
        wait_for(
            lambda: "→ ok" in browser.js("document.querySelector('#log details.tool summary').innerText"), 10
        )
        assert browser.js("document.querySelector('#log details.tool').open") is False
        browser.js("document.querySelector('#log details.tool summary').click(); true")
        assert browser.js("document.querySelector('#log details.tool').open") is True
        assert "from-the-card" in browser.js("document.querySelector('#log details.tool .out').innerText")
        # rename (PATCH) shows in the live list; the transcript downloads every event
        assert httpx.patch(f"{d.url}/v1/sessions/{sid}", json={"title": "renamed here"},
                           headers={"authorization": f"Bearer {d.token}"}).status_code == 200  # fmt: skip
        wait_for(lambda: "renamed here" in browser.js("document.getElementById('sessions').innerText"), 10)
        browser.js("document.getElementById('download').click(); true")
        wait_for(lambda: browser.js("window.acagent.downloaded") == d.session(sid)["last_seq"], 10)
        # phone-sized screen: no horizontal scroll
        browser.call(
            "Emulation.setDeviceMetricsOverride", width=390, height=844, deviceScaleFactor=2, mobile=True
        )
        wait_for(lambda: browser.js("window.innerWidth") == 390, 5)
        assert browser.js("document.documentElement.scrollWidth") <= 390
        assert browser.js("document.body.scrollWidth") <= 390
        browser.screenshot(SCREENSHOT.with_name("web-phone.png"))
        assert browser.errors() == []
        # the reconnect state names the cursor
        last = browser.js("window.acagent.last")
        d.terminate()
        wait_for(
            lambda: (
                f"reconnecting… since seq {last}" in browser.js("document.getElementById('conn').innerText")
            ),
            15,
        )
        d2: Daemon = start_daemon("--port", str(port))
        wait_for(
            lambda: browser.js("document.getElementById('conn').className") == "up", 30, what="reconnected"
        )
        assert d2.session(sid)["last_seq"] == last
        assert browser.js("window.acagent.rendered") == list(range(1, last + 1))  # no duplicate bubble
    finally:
        browser.close()


def test_page_archive_filter_and_context_fill(
    start_daemon: Any, workspace: Path, tmp_path: Path, mock: MockProvider
) -> None:
    """Archive from the page: the session leaves the list (archived ones are hidden by default),
    the "archived" filter shows it, Unarchive brings it back; the live status shows the context
    fill of a configured window (``ctx N%``) during a turn."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[models."openai:mock"]\ncontext_window = 50000\n')
    d: Daemon = start_daemon()
    keep = d.create(workspace, title="keep me")["id"]
    gone = d.create(workspace, title="archive me")["id"]
    browser = Browser(tmp_path / "profile")
    listed = "document.getElementById('sessions').innerText"

    def choose(status: str) -> None:  # pick an entry of the status filter, as a click would
        browser.js(f"(() => {{ const f = document.getElementById('sfilter'); f.value = {json.dumps(status)}; "
                   "f.dispatchEvent(new Event('change')); return true; })()")  # fmt: skip

    try:
        browser.goto(f"{d.url}/login?token={d.token}")
        browser.goto(f"{d.url}/?cwd={workspace}#{gone}")
        wait_for(lambda: browser.js("document.getElementById('conn').className") == "up", 15, what="attached")
        assert "archive me" in browser.js(listed) and "keep me" in browser.js(listed)
        assert browser.js("document.getElementById('archive').textContent") == "Archive"
        browser.js("document.getElementById('archive').click(); true")
        wait_for(lambda: "archive me" not in browser.js(listed), 10, what="archived session hidden")
        assert "keep me" in browser.js(listed)
        assert d.session(gone)["archived"] is True and d.session(gone)["status"] == "pending"
        choose("archived")
        wait_for(lambda: "archive me" in browser.js(listed), 10, what="the archived filter")
        assert "keep me" not in browser.js(listed) and "archived" in browser.js(listed)
        assert browser.js("document.getElementById('archive').textContent") == "Unarchive"
        browser.screenshot(SCREENSHOT.with_name("web-archived-filter.png"))
        browser.js("document.getElementById('archive').click(); true")
        wait_for(lambda: "No archived sessions." in browser.js(listed), 10, what="unarchived")
        assert d.session(gone)["archived"] is False
        # an archived session still takes messages and resumes: archive, then send
        assert d.http.post(f"/v1/sessions/{keep}/archive").json()["archived"] is True
        choose("")
        wait_for(lambda: "archive me" in browser.js(listed) and "keep me" not in browser.js(listed), 10)
        browser.goto(f"{d.url}/?cwd={workspace}#{keep}")
        wait_for(lambda: browser.js("window.acagent.sid") == keep, 15)
        wait_for(  # not in the list, yet the page knows it is archived
            lambda: browser.js("document.getElementById('archive').textContent") == "Unarchive", 10
        )
        wait_for(lambda: browser.js("document.getElementById('conn').className") == "up", 15, what="attached")
        browser.js("document.getElementById('text').value = 'slow 2 finally'; "
                   "document.getElementById('composer').requestSubmit(); true")  # fmt: skip
        status = wait_for(
            lambda: (
                t
                if "ctx " in (t := browser.js("document.getElementById('status').innerText") or "")
                else None
            ),
            15,
            what="the context fill in the live status",
        )
        assert "ctx " in status and "%" in status.split("ctx ", 1)[1], status
        browser.screenshot(SCREENSHOT.with_name("web-context-fill.png"))
        d.wait_status(keep, ("done",))
        assert "finally" in browser.js("document.getElementById('log').innerText")
        assert browser.errors() == []
    finally:
        browser.close()
