"""The seam between journal replay and live events (issue 11 item 6, mutation check; F58).

Many attachers join a real session (real registry, real SQLite file, strict mock over HTTP) at
random moments while a long reply streams and is group-committed. Every attacher must receive
each seq after its cursor exactly once, in order, up to the turn's end: the seqs it gets are
checked raw, before any client-side de-duplication. Removing the seam de-duplication in
``replay_then_live`` makes this test fail (events committed during the replay arrive twice).
"""

from __future__ import annotations

import random
from pathlib import Path

import anyio
import pytest

from acagent.runner import SessionRegistry
from acagent.settings import load_settings
from tests.cli.test_chat_tmux import slow_text
from tests.mockprovider import MockProvider

pytestmark = pytest.mark.anyio


async def test_many_attaches_mid_stream_get_every_seq_exactly_once_f58(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    words = [f"w{i} " for i in range(1500)]
    mock.script(slow_text(words, sleep_s=0.0005), slow_text(words, sleep_s=0.001))
    s = load_settings(
        {"home": str(tmp_path / "home"), "base_url": mock.openai_base_url, "model": "openai:mock"}, env={}
    )
    rng = random.Random(7)
    seen: list[tuple[int, list[int]]] = []
    async with SessionRegistry.open(s) as reg:
        row = await reg.create_session(workspace)
        runner = await reg.get_runner(row.id)

        ended = anyio.Event()
        end_seq = [0]

        async def attach(since: int) -> None:
            got: list[int] = []
            with anyio.fail_after(60):
                async with anyio.create_task_group() as inner:

                    async def stop_if_past_the_end() -> None:
                        # A cursor already at the turn's end (its end published before this
                        # attacher's cursor was read) rightly waits for a next turn: none comes.
                        await ended.wait()
                        if since >= end_seq[0]:
                            inner.cancel_scope.cancel()

                    inner.start_soon(stop_if_past_the_end)
                    async for event in runner.subscribe(f"probe-{len(seen)}", since):
                        got.append(event.seq)
                        if event.type == "turn.completed":
                            break
                    inner.cancel_scope.cancel()
            seen.append((since, got))

        await runner.run_turn("a long history first")  # replays then span several pages
        # An attacher whose cursor is already the turn's end (published while the runner still
        # finishes up, so `is_busy` holds) would wait for a next turn: start none once it is out.
        end_watch = runner.bus.subscribe("end-watch", maxsize=1_000_000)

        async def watch_end() -> None:
            async for event in end_watch:
                if event.type == "turn.completed":
                    end_seq[0] = event.seq
                    ended.set()
                    return

        await runner.step("stream a lot")
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch_end)
            for _ in range(200):
                if not runner.is_busy or ended.is_set():
                    break
                back = rng.choice([0, 5, 40, 1200, runner.bus.last_seq])
                tg.start_soon(attach, max(0, runner.bus.last_seq - back))
                await anyio.sleep(rng.random() * 0.01)
            # the 200 attaches may all be made before the turn's end (replays got cheaper with
            # frames, m016: the loop is no longer slowed down by them): the watch sees the end
            with anyio.fail_after(60):
                await ended.wait()
            end_watch.close()
        await runner.wait()
        last = (await runner.snapshot())["last_seq"]
    assert len(seen) >= 20, "too few attaches landed mid-stream to test the seam"
    bad = []
    for since, got in seen:
        end = got[-1] if got else since
        if got != list(range(since + 1, end + 1)):
            dups = len(got) - len(set(got))
            bad.append(f"since={since}: {dups} duplicates, {len(got)} events, first {got[:5]}")
    assert not bad, f"{len(bad)} of {len(seen)} attachers saw a broken seam: {bad[:5]}"
    # Every attacher from before the turn's end got events up to a turn's end (the first turn's,
    # for a cursor in it); one whose cursor was already at the end got none.
    assert all(got and got[-1] <= last for since, got in seen if since < end_seq[0])
    assert all(not got for since, got in seen if since >= end_seq[0])
