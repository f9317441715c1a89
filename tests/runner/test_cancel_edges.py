"""Every cancel request is bound to the turn it targets (issue 10 item 19, F88).

A real ``SessionRegistry`` in a child process runs turns back to back against the strict mock;
this process (another process, as ``acagent attach`` without a daemon is) cancels the turn it
sees running after a random delay, so its request often lands after that turn ended and the next
one began. A cancel meant for a turn that is over must never cancel a later turn — before, the
cross-process flag was a bare boolean the next turn inherited.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest

from acagent.runner import SessionRegistry
from acagent.settings import load_settings
from tests.mockprovider import MockProvider, Script, openai_text, openai_tool_calls, split_every

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[2]
FAST_LEASE = {"ACAGENT_TIMING_LEASE_TTL_S": "2", "ACAGENT_TIMING_LEASE_RENEW_S": "0.1"}

_DRIVER = textwrap.dedent(
    """
    import json, sys, anyio
    from acagent.runner import SessionRegistry
    from acagent.settings import load_settings

    async def main():
        home, base, cwd, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
        env = {"ACAGENT_TIMING_LEASE_TTL_S": "2", "ACAGENT_TIMING_LEASE_RENEW_S": "0.1"}
        s = load_settings({"home": home, "base_url": base, "model": "openai:mock"}, env=env)
        async with SessionRegistry.open(s) as reg:
            row = await reg.create_session(cwd)
            print(json.dumps({"sid": row.id}), flush=True)
            runner = await reg.get_runner(row.id)
            for i in range(n):
                turn = await runner.run_turn(f"message {i}")
                print(json.dumps({"turn": turn, "status": (await runner.snapshot())["status"]}), flush=True)

    anyio.run(main)
    """
)


async def test_cancel_from_another_process_never_reaches_a_later_turn_f88(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    turns = 24
    mock.default = lambda body: Script(
        chunks=split_every(openai_text("a reply in pieces " * 4), 24), sleeps=0.02
    )
    home = tmp_path / "home"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    driver = subprocess.Popen(
        [sys.executable, "-c", _DRIVER, str(home), mock.openai_base_url, str(workspace), str(turns)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    targeted: set[str] = set()
    late: list[str] = []
    rng = random.Random(7)
    try:
        assert driver.stdout is not None
        sid = json.loads(await anyio.to_thread.run_sync(driver.stdout.readline))["sid"]
        settings = load_settings(
            {"home": str(home), "base_url": mock.openai_base_url, "model": "openai:mock"}, env=FAST_LEASE
        )
        async with SessionRegistry.open(settings) as reg:
            seen: set[str] = set()
            while driver.poll() is None:
                row = await reg.journal.get_session(sid)
                if row.status != "running" or row.turn_id in seen or row.turn_id is None:
                    await anyio.sleep(0.005)
                    continue
                seen.add(row.turn_id)
                if len(seen) % 2:  # every other turn: let some turns complete untouched
                    continue
                await anyio.sleep(rng.uniform(0.2, 1.2))  # often after that turn ended
                targeted.add(row.turn_id)
                if not await reg.cancel(sid, turn_id=row.turn_id):
                    late.append(row.turn_id)
        out, err = await anyio.to_thread.run_sync(driver.communicate)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    assert driver.returncode == 0, err
    ended = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert len(ended) == turns, (out, err)
    wrongly = [e["turn"] for e in ended if e["status"] == "cancelled" and e["turn"] not in targeted]
    assert not wrongly, f"cancelled turns nobody targeted: {wrongly}"
    assert any(e["status"] == "cancelled" for e in ended), "no cancel landed: the race was not exercised"
    assert late, ("no cancel landed after its turn: the race was not exercised", ended)


async def _read_until_resting(runner: Any, since: int) -> list[Any]:
    """The live stream from ``since`` up to and including the first resting ``session.status``:
    what a client that stops reading there has seen."""
    seen = []
    with anyio.fail_after(30):
        async for event in runner.subscribe("stops-at-status", since):
            seen.append(event)
            if event.type == "session.status" and event.payload["status"] in ("done", "cancelled", "failed"):
                return seen
    raise AssertionError("the stream ended before a resting status")


@pytest.mark.parametrize("where", ["mid_tool", "waiting_approval"])
async def test_cancel_results_come_before_the_cancelled_status_on_the_stream_f89(
    tmp_path: Path, mock: MockProvider, workspace: Path, where: str
) -> None:
    """A client that stops reading at ``session.status: cancelled`` has seen a ``tool.result``
    for every ``tool.call`` (and the partial text): the cancel's transaction orders the closing
    results first, the status, then ``turn.interrupted``."""
    auto = where == "mid_tool"
    calls = [("call_A", "shell", {"command": "sleep 30"}), ("call_B", "shell", {"command": "echo b"})]
    mock.script(openai_tool_calls(calls, text="Running both."))
    settings = load_settings(
        {
            "home": str(tmp_path / "home"),
            "base_url": mock.openai_base_url,
            "model": "openai:mock",
            "auto_approve": auto,
        },
        env={},
    )
    async with SessionRegistry.open(settings) as reg:
        row = await reg.create_session(workspace)
        runner = await reg.get_runner(row.id)
        await runner.step("run both")
        wanted = "tool.started" if auto else "approval.requested"
        with anyio.fail_after(30):
            async for event in runner.subscribe("wait", 0):
                if event.type == wanted:
                    break
        async with anyio.create_task_group() as tg:
            got: list[Any] = []

            async def reader() -> None:
                got.extend(await _read_until_resting(runner, event.seq))

            tg.start_soon(reader)
            await anyio.sleep(0.1)
            await reg.cancel(row.id)
        await runner.wait()
        everything = await reg.journal.events(row.id, 0)
    types = [e.type for e in got]
    assert got[-1].payload["status"] == "cancelled", types
    results = {e.payload["tool_call_id"] for e in got if e.type == "tool.result"}
    assert results == {"call_A", "call_B"}, types
    tail = [e.type for e in everything if e.seq > got[-1].seq]
    assert tail == ["turn.interrupted"], tail


@pytest.mark.parametrize("where", ["this_process", "another_process"])
async def test_cancel_reaches_a_manual_compaction_f123(
    tmp_path: Path, mock: MockProvider, workspace: Path, where: str
) -> None:
    """A cancel during ``/compact`` (``acagent compact``, ``POST …/compact``) ended nothing: the
    compaction turn had no cancel scope, so the summary call ran on (up to ``llm_timeout_s``), the
    cancel answered ``cancelled: true`` and every message got ``session_busy`` meanwhile (F123)."""
    env = FAST_LEASE if where == "another_process" else {}
    settings = load_settings(
        {"home": str(tmp_path / "home"), "base_url": mock.openai_base_url, "model": "openai:mock"}, env=env
    )
    async with SessionRegistry.open(settings) as reg:
        row = await reg.create_session(workspace)
        runner = await reg.get_runner(row.id)
        for text in ("one", "two"):
            mock.script(openai_text(f"answer {text}"))
            await runner.run_turn(text)
        body = openai_text("a summary that never comes")
        mock.script(Script(chunks=split_every(body, len(body) // 2), pause_after=1))
        async with anyio.create_task_group() as tg:
            failures: list[BaseException] = []

            async def compact() -> None:
                try:
                    await reg.compact(row.id)
                except Exception as exc:
                    failures.append(exc)

            tg.start_soon(compact)
            await anyio.to_thread.run_sync(lambda: mock.wait_paused(1, 30))
            if where == "this_process":
                assert await reg.cancel(row.id)
            else:  # as another process does: the journal's flag, read on the next lease renewal
                async with SessionRegistry.open(settings) as other:
                    assert await other.cancel(row.id)
            with anyio.fail_after(10):
                while not failures:
                    await anyio.sleep(0.02)
        mock.release(5)
        assert [getattr(e, "detail", None) for e in failures] == [{"cancelled": True}], failures
        assert not [s for s in await reg.journal.steps(row.id) if s.status == "inflight"]
        types = [e.type for e in await reg.journal.events(row.id, 0)]
        assert "context.compacted" not in types
        mock.script(openai_text("after"))
        await runner.run_turn("three")
        assert (await runner.snapshot())["status"] == "done"
        last = mock.requests[-1]
        assert last.status == 200, last.error
        assert len(last.json["messages"]) == 6  # system + 5: nothing was compacted: the whole history is sent
