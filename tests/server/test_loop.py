"""F35: the daemon never blocks its event loop — a cancel lands while a fresh provider's code loads.

A fresh daemon subprocess whose import of the Anthropic adapter is slow (a ``sitecustomize`` on
its ``PYTHONPATH`` holds that one import, as a loaded machine or a cold disk does, as the
``anthropic`` SDK's import did when the adapter used it; nothing in acagent knows about it).
Session B runs a long turn; session A (``anthropic:…``) gets its first message, so its provider
is built now. While that import is held, ``POST …/cancel`` on B must be answered and B's turn
interrupted, and a stats request must be answered. The import is held until the test lets it go
(a file), not for a time: before the fix the provider was built on the event loop, so the stats
request and the cancel could not be answered at all until then (the test fails on their
timeouts). A fixed 4 s import with "answered within 1 s" also failed on a loaded machine.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import httpx

from tests.mockprovider import MockProvider
from tests.server.conftest import Daemon, daemon_env, wait_for

SLOW_IMPORT = """
import importlib.abc, os, sys, time

HELD, GO = {held!r}, {go!r}

class _Slow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "acagent.providers._anthropic":
            open(HELD, "w").close()
            deadline = time.monotonic() + 120
            while not os.path.exists(GO) and time.monotonic() < deadline:
                time.sleep(0.01)  # a slow import (cold disk); releases the GIL like real I/O
        return None

sys.meta_path.insert(0, _Slow())
"""


def test_cancel_lands_while_a_provider_sdk_loads(tmp_path: Path, mock: MockProvider) -> None:
    site = tmp_path / "site"
    site.mkdir()
    held, go = tmp_path / "import-held", tmp_path / "import-go"
    (site / "sitecustomize.py").write_text(SLOW_IMPORT.format(held=str(held), go=str(go)))
    home = tmp_path / "home"
    home.mkdir()
    work = tmp_path / "w"
    work.mkdir()
    env = daemon_env(
        home,
        mock,
        PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
        ANTHROPIC_API_KEY="test-key",
        ANTHROPIC_BASE_URL=mock.anthropic_base_url,
    )
    d = Daemon(home=home, env=env, args=["--yes"]).start()
    t: threading.Thread | None = None
    try:
        b = d.create(work)["id"]
        a = d.create(work, model="anthropic:mock")["id"]
        assert d.send(b, "slow 60 never").status_code == 202
        marker = "slow 60 never"
        # B's provider (openai) is built and its request is in flight
        wait_for(lambda: any(marker in (r.body or b"").decode(errors="replace") for r in mock.requests), 60)

        def first_turn_of_a() -> None:
            with httpx.Client(base_url=d.url, headers=d.auth, timeout=60) as c:
                c.post(f"/v1/sessions/{a}/messages", json={"text": "say hi"})

        t = threading.Thread(target=first_turn_of_a, daemon=True)
        t.start()
        wait_for(held.exists, 60, what="A's provider import to start")
        # Held until `go` exists: on a blocked loop neither answer could come (10 s timeouts).
        with httpx.Client(base_url=d.url, headers=d.auth, timeout=10) as c:
            assert c.get("/v1/debug/stats").status_code == 200
            assert c.post(f"/v1/sessions/{b}/cancel").status_code == 202
            wait_for(
                lambda: c.get(f"/v1/sessions/{b}").json()["status"] in ("cancelled", "done", "failed"),
                10,
                what="B's turn to end",
            )
        assert d.session(b)["status"] == "cancelled"
        assert not go.exists()
        go.touch()
        t.join(30)
        d.wait_status(a, ("done", "failed"), timeout=30)
    finally:
        go.touch()
        d.terminate(15)
        if t is not None:
            t.join(30)
    assert not [line for line in d.stderr_lines if "Traceback" in line]
