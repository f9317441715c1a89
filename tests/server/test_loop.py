"""F35: the daemon never blocks its event loop — a cancel lands while a fresh provider's code loads.

A fresh daemon subprocess whose import of the Anthropic adapter is slow (a ``sitecustomize`` on
its ``PYTHONPATH`` delays that one import by 4 s, as a loaded machine or a cold disk does, as the
``anthropic`` SDK's import did when the adapter used it; nothing in acagent knows about it).
Session B runs a long turn; session A (``anthropic:…``) gets its first message, so its provider
is built now. While that import runs, ``POST
…/cancel`` on B must be answered and B's turn interrupted within 1 s, and a stats request must
be answered within 1 s. Before the fix the provider was built on the event loop: the cancel
waited for the whole import.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import httpx

from tests.mockprovider import MockProvider
from tests.server.conftest import Daemon, daemon_env, wait_for

SLOW_IMPORT = """
import importlib.abc, sys, time

class _Slow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "acagent.providers._anthropic":
            time.sleep(4.0)  # a slow import (loaded machine, cold disk); releases the GIL like real I/O
        return None

sys.meta_path.insert(0, _Slow())
"""


def test_cancel_lands_within_1s_while_a_provider_sdk_loads(tmp_path: Path, mock: MockProvider) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SLOW_IMPORT)
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
    try:
        b = d.create(work)["id"]
        a = d.create(work, model="anthropic:mock")["id"]
        assert d.send(b, "slow 60 never").status_code == 202
        marker = "slow 60 never"
        wait_for(lambda: any(marker in (r.body or b"").decode(errors="replace") for r in mock.requests), 60)
        time.sleep(0.3)  # B's provider (openai) is built and its request is in flight

        posted: list[float] = []

        def first_turn_of_a() -> None:
            with httpx.Client(base_url=d.url, headers=d.auth, timeout=60) as c:
                posted.append(time.monotonic())
                c.post(f"/v1/sessions/{a}/messages", json={"text": "say hi"})

        t = threading.Thread(target=first_turn_of_a, daemon=True)
        t.start()
        time.sleep(0.5)  # A's turn has started building its provider (the 4 s import)
        with httpx.Client(base_url=d.url, headers=d.auth, timeout=30) as c:
            t0 = time.monotonic()
            assert c.get("/v1/debug/stats").status_code == 200
            stats_s = time.monotonic() - t0
            t0 = time.monotonic()
            assert c.post(f"/v1/sessions/{b}/cancel").status_code == 202
            while c.get(f"/v1/sessions/{b}").json()["status"] not in ("cancelled", "done", "failed"):
                time.sleep(0.02)
            cancel_s = time.monotonic() - t0
        assert stats_s < 1.0, f"a stats request took {stats_s:.2f} s while the SDK loaded"
        assert cancel_s < 1.0, f"the cancel took {cancel_s:.2f} s to land while the SDK loaded"
        assert posted and time.monotonic() - posted[0] < 3.5, "the slow import did not overlap the checks"
        t.join(30)
        d.wait_status(a, ("done", "failed"), timeout=30)
    finally:
        d.terminate(15)
    assert not [line for line in d.stderr_lines if "Traceback" in line]
