"""Turn lifecycle seams (issue 11 defects, issue 10 item 19): a real registry, a real SQLite file,
the strict mock provider over HTTP.

- cancelling an idle ``done`` session never appends ``turn.interrupted`` after that turn's
  ``turn.completed`` (F51);
- an interrupt is bound to the turn it was meant for: a cancel racing a new message never leaves
  state behind that cancels later turns (F52);
- the first turn with a provider imports its HTTP stack off the event loop, and no SDK (F53).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest

from acagent.runner import SessionRegistry
from acagent.settings import load_settings
from tests.mockprovider import MockProvider, Script, TextReply, openai_text

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[2]


def _settings(home: Path, mock: MockProvider, **over: Any) -> Any:
    return load_settings(
        {"home": str(home), "base_url": mock.openai_base_url, "model": "openai:mock", **over}, env={}
    )


async def _types(reg: SessionRegistry, sid: str) -> list[str]:
    return [e.type for e in await reg.journal.events(sid, 0)]


async def test_cancel_of_an_idle_done_session_adds_no_turn_interrupted_f51(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    """A finished turn keeps its own end event: cancel afterwards only marks the session cancelled."""
    mock.script(TextReply("done"))
    async with SessionRegistry.open(_settings(tmp_path / "home", mock)) as reg:
        row = await reg.create_session(workspace)
        runner = await reg.get_runner(row.id)
        await runner.run_turn("hi")
        await reg.cancel(row.id)
        snap = await runner.snapshot()
        types = await _types(reg, row.id)
    assert snap["status"] == "cancelled"
    ends = [t for t in types if t in ("turn.completed", "turn.interrupted", "turn.failed")]
    assert ends == ["turn.completed"], types


async def test_interrupt_before_the_turn_task_starts_dies_with_that_turn_f52(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    """A cancel that lands between a message's acceptance and its task's start cancels that turn
    only; the next message runs to ``done`` (before: every later message was cancelled at once)."""
    mock.default = lambda body: openai_text("ok")
    async with SessionRegistry.open(_settings(tmp_path / "home", mock)) as reg:
        row = await reg.create_session(workspace)
        runner = await reg.get_runner(row.id)
        await runner.step("first")
        runner.interrupt("user")  # the turn's task has not entered its cancel scope yet
        await runner.wait()
        assert (await runner.snapshot())["status"] == "cancelled"
        for text in ("second", "third"):
            await runner.run_turn(text)
            assert (await runner.snapshot())["status"] == "done", await _types(reg, row.id)


async def test_cancel_racing_new_messages_never_outlives_its_turn_f52(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    """Many races of ``cancel`` against a new message (both through the registry, as the daemon
    calls them): whichever wins, a later plain message always completes."""
    mock.default = lambda body: Script(chunks=[openai_text("ok")], sleeps=0.01)
    async with SessionRegistry.open(_settings(tmp_path / "home", mock)) as reg:
        row = await reg.create_session(workspace)
        runner = await reg.get_runner(row.id)
        for i in range(12):
            async with anyio.create_task_group() as tg:

                async def send(i: int = i) -> None:
                    try:
                        await reg.start_turn(row.id, f"race {i}")
                    except Exception:  # busy: the cancel's close held the session
                        pass

                tg.start_soon(send)
                for _ in range(i % 4):
                    await anyio.sleep(0)
                tg.start_soon(reg.cancel, row.id)
            await runner.wait()
            await runner.run_turn(f"check {i}")
            snap = await runner.snapshot()
            assert snap["status"] == "done", (i, await _types(reg, row.id))


_PROBE = textwrap.dedent(
    """
    import sys, threading, time, json, anyio
    importers = {}

    class Spy:
        def find_spec(self, name, path=None, target=None):
            if name in ("anthropic", "openai", "httpx") and name not in importers:
                importers[name] = threading.current_thread().name
            return None

    sys.meta_path.insert(0, Spy())
    from acagent.runner import SessionRegistry
    from acagent.settings import load_settings

    async def main():
        provider, base, home, cwd = sys.argv[1:5]
        s = load_settings({"home": home, "base_url": base, "model": provider + ":mock"}, env={})
        lag = 0.0
        async def ticker():
            nonlocal lag
            while True:
                t = time.monotonic()
                await anyio.sleep(0.01)
                lag = max(lag, time.monotonic() - t - 0.01)
        async with SessionRegistry.open(s) as reg:
            async with anyio.create_task_group() as tg:
                tg.start_soon(ticker)
                row = await reg.create_session(cwd)
                runner = await reg.get_runner(row.id)
                await runner.run_turn("hi")
                status = (await runner.snapshot())["status"]
                tg.cancel_scope.cancel()
        print(json.dumps({"importers": importers, "lag": lag, "status": status,
                          "main": threading.main_thread().name}))

    anyio.run(main)
    """
)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_first_turn_imports_the_http_stack_off_the_event_loop_f53(
    tmp_path: Path, mock: MockProvider, workspace: Path, provider: str
) -> None:
    """In a fresh interpreter the SDKs are not imported at all (issue 12: the adapters post and
    parse the wire themselves), and for the mock's plain-http endpoint neither is httpx
    (``acagent/providers/_h1.py``); an https endpoint imports httpx in a worker thread, never
    the loop's (tests/providers/test_registry.py)."""
    from tests.mockprovider import anthropic_text

    mock.default = lambda body: anthropic_text("hi") if provider == "anthropic" else openai_text("hi")
    base = mock.anthropic_base_url if provider == "anthropic" else mock.openai_base_url
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACAGENT_", "OPENAI_", "ANTHROPIC_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, provider, base, str(tmp_path / "home"), str(workspace)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["status"] == "done"
    assert "httpx" not in out["importers"], f"httpx was imported for a plain-http endpoint: {out}"
    assert provider not in out["importers"], f"the {provider} SDK was imported: {out}"
