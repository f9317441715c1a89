"""F15: concurrent writers never hit "database is locked" — journal and registry level.

Case ``shared/cases/F15-sqlite-contention.md`` without the daemon (the daemon runs the same
registry; its HTTP side is another engineer's ``tests/server``): one in-process registry runs 6
sessions at once, each streaming 2,000 ``assistant.delta`` events 1 ms apart from the strict
mock (OpenAI format), while 6 readers replay each session from seq 0 to its end in a loop (what
``attach --since 0 --json`` does: journal replay, then live), ``list_sessions`` runs 20 times a
second, an external ``sqlite3`` process holds ``BEGIN IMMEDIATE`` for 3 s mid-run, and a seventh
session runs in a separate ``acagent run`` process (a CLI command that writes the journal
directly) at the same time.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest

from acagent.client import LocalSessionClient
from acagent.runner import SessionRegistry
from acagent.store._frames import stored_events
from tests.cases.conftest import open_session, settings_for
from tests.mockprovider import MockProvider, Script

pytestmark = pytest.mark.anyio

SESSIONS = 6
DELTAS = 2000
SEVENTH_DELTAS = 300


def delta_stream(n: int) -> list[bytes]:
    """An OpenAI stream of ``n`` one-word content deltas, one chunk each."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        body = {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return ("data: " + json.dumps(body) + "\n\n").encode()

    return (
        [chunk({"role": "assistant", "content": "d0 "})]
        + [chunk({"content": f"d{i} "}) for i in range(1, n)]
        + [chunk({}, "stop") + b"data: [DONE]\n\n"]
    )


def committed_events(db: Path) -> int:
    """Events committed so far (a WAL reader is never blocked by the writer's lock)."""
    conn = sqlite3.connect(db)
    try:
        return len(stored_events(conn))
    finally:
        conn.close()


async def lock_externally(db: Path, seconds: float, go: Path) -> anyio.abc.Process:
    """Start ``sqlite3 db`` holding ``BEGIN IMMEDIATE`` for ``seconds`` and until ``go`` exists;
    return once it holds it.

    The CLI waits (``.timeout``) for the lock if a writer of ours has it, then prints ``LOCKED``
    through ``.shell`` (unbuffered), sleeps, waits for ``go``, and commits. The test creates
    ``go`` once it has read what it checks while the lock is held: with a plain ``sleep`` the lock
    could end before a loaded machine got there.
    """
    proc = await anyio.open_process(["sqlite3", str(db)])
    assert proc.stdin is not None and proc.stdout is not None
    wait = f"sleep {seconds}; while [ ! -e '{go}' ]; do sleep 0.01; done"
    script = f".timeout 30000\nBEGIN IMMEDIATE;\n.shell echo LOCKED\n.shell {wait}\nCOMMIT;\n"
    await proc.stdin.send(script.encode())
    await proc.stdin.aclose()
    seen = b""
    with anyio.fail_after(30):
        while b"LOCKED" not in seen:
            seen += await proc.stdout.receive()
    return proc


async def test_six_streaming_sessions_readers_and_an_external_lock(
    cli: Any, mock: MockProvider, workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """No lock error, no failed turn, exactly 12,000 deltas, no seq gap; WAL; busy_timeout >= 5000."""
    caplog.set_level(logging.ERROR, logger="acagent")
    streams = {DELTAS: delta_stream(DELTAS), SEVENTH_DELTAS: delta_stream(SEVENTH_DELTAS)}

    def answer(body: dict[str, Any]) -> Script:
        n = SEVENTH_DELTAS if "seventh" in json.dumps(body["messages"]) else DELTAS
        return Script(chunks=streams[n], sleeps=0.001)

    mock.default = answer
    settings = settings_for(cli.home, mock)
    reader_errors: list[str] = []
    lock_holder: dict[str, Any] = {}
    async with SessionRegistry.open(settings) as reg:
        runners = []
        for _ in range(SESSIONS):
            row = await reg.create_session(workspace, model=settings.model)
            runners.append(await reg.get_runner(row.id))
        seventh = cli.popen(
            "run",
            "--model",
            "openai:mock",
            "--base-url",
            mock.openai_base_url,
            "the seventh session",
            cwd=workspace,
        )
        done = anyio.Event()

        async def reader(runner: Any) -> None:
            # what `attach --since 0 --json` does: replay then live; an evicted (slow) subscriber
            # re-attaches from its last seq (LocalSessionClient.events)
            client = LocalSessionClient(reg, runner.session_id)
            while not done.is_set():
                last = 0
                try:
                    async for event in client.events(0):
                        if event.seq != last + 1:
                            reader_errors.append(f"{runner.session_id}: gap {last} -> {event.seq}")
                        last = event.seq
                        if event.type == "turn.completed" or done.is_set():
                            break
                except Exception as exc:
                    reader_errors.append(f"{runner.session_id}: {exc!r}")

        async def lister() -> None:
            while not done.is_set():
                try:
                    await reg.journal.list_sessions()
                except Exception as exc:
                    reader_errors.append(f"list_sessions: {exc!r}")
                await anyio.sleep(0.05)

        async def external_lock() -> None:
            # mid-run: once every session has streamed a few hundred deltas
            while min(r.bus.last_seq for r in runners) < 300:
                await anyio.sleep(0.05)
            go = settings.db_path.with_name("unlock")
            proc = await lock_externally(settings.db_path, 3, go)
            lock_holder["held_from"] = committed_events(settings.db_path)
            await anyio.sleep(1.5)
            lock_holder["held_to"] = committed_events(settings.db_path)
            go.touch()
            lock_holder["rc"] = await proc.wait()

        async with anyio.create_task_group() as tg:
            for runner in runners:
                tg.start_soon(reader, runner)
            tg.start_soon(lister)
            tg.start_soon(external_lock)
            for i, runner in enumerate(runners):
                await runner.step(f"stream {i}")
            with anyio.fail_after(120):
                for runner in runners:
                    await runner.wait()
            done.set()
        pragmas = [
            await reg.journal._run(lambda db: db.execute("PRAGMA busy_timeout").fetchone()[0], read=read)
            for read in (False, True)
        ]
        snapshots = [await r.snapshot() for r in runners]
        per_session = [await reg.journal.events(r.session_id, 0) for r in runners]
    _, err = seventh.communicate(timeout=60)
    assert seventh.returncode == 0, err
    assert lock_holder.get("rc") == 0  # the external process did get (and release) the write lock
    assert lock_holder["held_from"] == lock_holder["held_to"]  # nothing committed while it was held
    assert reader_errors == []
    assert [s["status"] for s in snapshots] == ["done"] * SESSIONS
    total = 0
    for events in per_session:
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        assert not [e for e in events if e.type in ("turn.failed", "error", "llm.retry")]
        deltas = [e for e in events if e.type == "assistant.delta"]
        assert len(deltas) == DELTAS
        assert "".join(e.payload["text"] for e in deltas) == "".join(f"d{i} " for i in range(DELTAS))
        total += len(deltas)
    assert total == SESSIONS * DELTAS == 12000
    assert all(p >= 5000 for p in pragmas), pragmas
    db = sqlite3.connect(settings.db_path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    (seventh_id,) = [
        sid for (sid,) in db.execute("SELECT id FROM session") if sid not in {r.session_id for r in runners}
    ]
    seventh_deltas = [e[3] for e in stored_events(db, seventh_id)].count("assistant.delta")
    assert seventh_deltas == SEVENTH_DELTAS
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert "locked" not in err
    assert all(r.status == 200 for r in mock.requests)


async def test_backpressure_bounds_buffered_deltas_while_the_lock_is_held(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    """While another process holds the write lock, a fast stream waits instead of buffering
    without bound (the writer's bound is lowered to 200 here, from 5,000); nothing is lost."""
    n = 3000
    mock.script(Script(chunks=delta_stream(n), sleeps=0.0005))
    settings = settings_for(tmp_path / "home", mock)
    peak = 0
    async with open_session(settings, workspace) as (_, runner):
        runner.writer._max_buffered = 200  # the bound under test (SessionWriter(max_buffered=...))
        await runner.step("stream fast")
        while runner.bus.last_seq < 50:
            await anyio.sleep(0.005)
        go = settings.db_path.with_name("unlock")
        proc = await lock_externally(settings.db_path, 2, go)
        held_from = committed_events(settings.db_path)
        with anyio.fail_after(60):  # the producer fills the buffer (however loaded the machine)...
            while peak <= 150:
                peak = max(peak, runner.writer.buffered)
                await anyio.sleep(0.005)
        with anyio.move_on_after(0.5):  # ... and then waits at its bound instead of buffering on
            while True:
                peak = max(peak, runner.writer.buffered)
                await anyio.sleep(0.005)
        held_to = committed_events(settings.db_path)
        go.touch()
        assert await proc.wait() == 0
        with anyio.fail_after(60):
            await runner.wait()
        events = await runner.journal.events(runner.session_id, 0)
        status = (await runner.snapshot())["status"]
    assert held_from == held_to < n  # nothing committed while the lock was held, the stream not over
    assert 150 < peak <= 201  # the producer filled the buffer to its bound, then waited
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert sum(1 for e in events if e.type == "assistant.delta") == n
    assert status == "done" and [e.type for e in events].count("turn.completed") == 1
