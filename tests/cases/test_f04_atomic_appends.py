"""F04: transcript appends never interleave or tear mid-file.

Case ``shared/cases/F04-atomic-appends.md``, run against the real ``acagent run`` (no daemon: the
CLI then runs the registry, the runner and the transcript writer in its own process). Names: the
case's ``S.jsonl`` is ``$ACAGENT_HOME/sessions/<cwd bucket>/<session id>.jsonl``; the shell
tool's argument is ``command``.

Scaled to keep the module fast while keeping the shape: (a) 8 parallel shell calls in one
assistant message, each printing 40 chunks of 10 B to 32 KiB from ``random.seed(N)`` — records
of up to 64 KiB (the shell tool's read size), far above ``PIPE_BUF`` and Python's 8 KiB buffer —
and below the shell tool's 1,000,000-character live-output cap, so the joined ``tool.output``
payloads equal the command's stdout; (c) 5 SIGKILLs at random moments instead of 20.

Policy (docs/field-cases.md): a second process that opens a session another live process holds
never writes its transcript — not even to repair or complete it — and its turn is refused with
``session_busy`` naming the holder's pid and ``acagent attach``.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from acagent.runner import SessionRegistry
from acagent.settings import load_settings
from acagent.store._frames import stored_events
from acagent.store._payload import payload_text
from tests.cases.conftest import parse_lines
from tests.mockprovider import MockProvider, Script, openai_text, openai_tool_calls

CHUNKS = 40
MAX_CHUNK = 32768


def command(n: int, chunks: int = CHUNKS) -> str:
    return (
        f'{sys.executable} -c "import os,random;random.seed({n});'
        f"[os.write(1,b'x'*random.randint(10,{MAX_CHUNK})+b'\\n') for _ in range({chunks})]\""
    )


def expected_stdout(n: int, chunks: int = CHUNKS) -> bytes:
    random.seed(n)
    return b"".join(b"x" * random.randint(10, MAX_CHUNK) + b"\n" for _ in range(chunks))


def responder(chunks: int = CHUNKS) -> Any:
    """A user message → 8 parallel shell calls; after the tool results → ``done``."""

    def answer(body: dict[str, Any]) -> Any:
        if body["messages"][-1]["role"] == "user" and body.get("tools"):  # a summary request has none
            return openai_tool_calls(
                [(f"call_{n}", "shell", {"command": command(n, chunks)}) for n in range(1, 9)]
            )
        return openai_text("done")

    return answer


def journal(home: Path) -> sqlite3.Connection:
    return sqlite3.connect(home / "acagent.db")


def transcript(home: Path) -> Path:
    (path,) = (home / "sessions").rglob("*.jsonl")
    return path


def test_eight_parallel_streams_every_line_parses(cli: Any, mock: MockProvider, workspace: Path) -> None:
    """(a): every line parses; tool.output count file == journal; per-call sha256 == stdout."""
    for n in range(1, 9):
        assert len(expected_stdout(n)) < 1_000_000  # under the live-output cap
    mock.default = responder()
    run = cli(
        "run",
        "--yes",
        "--model",
        "openai:mock",
        "--base-url",
        mock.openai_base_url,
        "stress",
        cwd=workspace,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "done"
    db = journal(cli.home)
    rows = [(seq, typ, p) for _, seq, _, typ, p in stored_events(db)]
    records, bad = parse_lines(transcript(cli.home))
    assert bad == []
    assert [(r["seq"], r["type"]) for r in records] == [(seq, typ) for seq, typ, _ in rows]
    outputs = [r for r in records if r["type"] == "tool.output"]
    assert len(outputs) == sum(1 for _, typ, _ in rows if typ == "tool.output")
    sizes = [len(json.dumps(r)) for r in outputs]
    assert max(sizes) > 8192 and sum(s > 4096 for s in sizes) > 20  # records above PIPE_BUF
    for n in range(1, 9):
        joined = "".join(r["payload"]["text"] for r in outputs if r["payload"]["tool_call_id"] == f"call_{n}")
        assert (
            hashlib.sha256(joined.encode()).hexdigest() == hashlib.sha256(expected_stdout(n)).hexdigest()
        ), n
    results = [json.loads(payload_text(p)) for _, typ, p in rows if typ == "tool.result"]
    assert [r["status"] for r in results] == ["ok"] * 8
    assert all(r.status == 200 for r in mock.requests)


def _wait(predicate: Any, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError
        time.sleep(0.05)


def test_second_process_is_refused_and_never_writes(cli: Any, mock: MockProvider, workspace: Path) -> None:
    """(b): ``run --resume S`` while another process runs S → session_busy; the file is untouched.

    The transcript is made to lag the journal first (its last record removed), which a second
    writer would "repair" by appending; the holder completes it itself.
    """
    body = openai_text("first done")
    cut = body.index(b"\n\n") + 2
    mock.script(Script(chunks=[body[:cut], body[cut:]], pause_after=1))
    base = ["--model", "openai:mock", "--base-url", mock.openai_base_url]
    first = cli.popen("run", *base, "slow", cwd=workspace)
    try:
        mock.wait_paused(timeout=30)
        db = journal(cli.home)
        sid, pid = db.execute("SELECT id, lease_pid FROM session").fetchone()
        assert pid == first.pid
        path = transcript(cli.home)
        _wait(lambda: b'"assistant.delta"' in path.read_bytes())
        data = path.read_bytes()
        lagging = data[: data.rstrip(b"\n").rindex(b"\n") + 1]
        path.write_bytes(lagging)
        before = os.stat(path)

        second = cli("run", *base, "--resume", sid, "hello", cwd=workspace)
        assert second.returncode == 1
        assert "session_busy" in second.stderr
        assert f"pid {first.pid}" in second.stderr and f"acagent attach {sid}" in second.stderr
        after = os.stat(path)
        assert path.read_bytes() == lagging
        assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
            before.st_ino,
            before.st_size,
            before.st_mtime_ns,
        )
        assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no .corrupt, no .tmp
    finally:
        mock.release(2)
        out, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    assert out.strip() == "first done"
    assert len(mock.requests) == 1  # the refused run never reached the provider
    rows = [(seq, typ) for _, seq, _, typ, _ in stored_events(journal(cli.home), sid)]
    records, bad = parse_lines(path)
    assert bad == []
    assert [(r["seq"], r["type"]) for r in records] == [tuple(r) for r in rows]
    assert "hello" not in path.read_text()


def _only_last_line_may_be_torn(path: Path) -> None:
    data = path.read_bytes()
    lines = data.split(b"\n")
    for number, raw in enumerate(lines[:-1], start=1):
        json.loads(raw)  # every newline-terminated line is a whole record
        assert raw, f"empty line {number}"
    # the unterminated rest (if any) is the only place a tear can be


def test_sigkill_at_random_moments_tears_only_the_last_line(
    cli: Any, mock: MockProvider, workspace: Path
) -> None:
    """(c): SIGKILL mid-run, five times; only the last line can be torn; each restart repairs it."""
    mock.default = responder(chunks=25)
    base = ["--yes", "--model", "openai:mock", "--base-url", mock.openai_base_url]
    rng = random.Random(4)
    sid: str | None = None
    for i in range(5):
        args = [*base, "--resume", sid] if sid else base
        db = journal(cli.home)

        def outputs() -> int:
            try:
                return [e[3] for e in stored_events(db)].count("tool.output")
            except sqlite3.OperationalError:  # not created yet
                return 0

        seen = outputs() if sid else 0
        proc = cli.popen("run", *args, f"round {i}", cwd=workspace)
        try:
            _wait(lambda: outputs() > seen, 60)  # the run is streaming tool output
            time.sleep(rng.uniform(0.0, 1.5))
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=30)
        sid = sid or journal(cli.home).execute("SELECT id FROM session").fetchone()[0]
        _only_last_line_may_be_torn(transcript(cli.home))
    final = cli("run", *base, "--resume", sid, "last round", cwd=workspace, timeout=120)
    assert final.returncode == 0, final.stderr
    path = transcript(cli.home)
    records, bad = parse_lines(path)
    assert bad == []
    rows = [(seq, typ) for _, seq, _, typ, _ in stored_events(journal(cli.home))]
    assert [(r["seq"], r["type"]) for r in records] == [tuple(r) for r in rows]
    assert all(r.status == 200 for r in mock.requests), [r.error for r in mock.requests]


@pytest.mark.anyio
async def test_writers_in_two_registries_never_duplicate_or_interleave(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    """Two processes' writers on one file, taking turns (an idle ``chat`` and a ``run``):
    each resyncs with the file under the lock, so no seq is written twice and none is skipped."""
    mock.default = lambda body: openai_text("ok")
    settings = load_settings(
        {"home": str(tmp_path / "home"), "base_url": mock.openai_base_url, "model": "openai:mock"}, env={}
    )
    async with SessionRegistry.open(settings) as one, SessionRegistry.open(settings) as two:
        row = await one.create_session(workspace)
        a = await one.get_runner(row.id)
        b = await two.get_runner(row.id)
        for i in range(6):
            runner = a if i % 2 == 0 else b
            await runner.run_turn(f"turn {i}")
            await anyio.sleep(0.05)  # let the pump write
        path = one.transcript_path(row)
        events = await one.journal.events(row.id, 0)
    records, bad = parse_lines(path)
    assert bad == []
    assert [r["seq"] for r in records] == [e.seq for e in events] == list(range(1, len(events) + 1))
