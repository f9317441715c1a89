"""`acagent import` of a big transcript shows a progress bar on a terminal (issue 17: long work)."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from acagent.store._import import import_transcript
from acagent.store._sqlite import SqliteJournal

REPO = Path(__file__).resolve().parents[2]
SID = "ses_1a229337ec8934f35c35c3844c"


def _big_transcript(path: Path, events: int = 900, text_bytes: int = 5000) -> None:
    turn = "turn_9d61e533b9b64a61"
    rows = [
        {"seq": 1, "type": "session.created", "payload": {"cwd": str(path.parent), "model": "openai:mock"}},
        {"seq": 2, "type": "turn.started", "payload": {"turn_id": turn}},
        {"seq": 3, "type": "user.message", "payload": {"turn_id": turn, "text": "write a lot"}},
    ]
    for n in range(4, events + 1):
        rows.append(
            {"seq": n, "type": "assistant.delta", "payload": {"turn_id": turn, "text": "x" * text_bytes}}
        )
    with path.open("w") as f:
        for row in rows:
            f.write(json.dumps({"ts": "2026-11-29T21:26:10.400789Z", "session_id": SID, **row}) + "\n")


def test_import_of_a_big_transcript_shows_a_progress_bar_on_a_terminal(tmp_path: Path) -> None:
    big = tmp_path / "big.jsonl"
    _big_transcript(big)
    assert big.stat().st_size >= 4 << 20
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACAGENT_")}
    env.update(ACAGENT_HOME=str(tmp_path / "home"), PYTHONPATH=str(REPO), COLUMNS="100", TERM="xterm")
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "acagent", "import", str(big)], stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=slave, env=env, cwd=tmp_path,
    )  # fmt: skip
    os.close(slave)
    shown = b""
    try:
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            if select.select([master], [], [], 0.1)[0]:
                try:
                    shown += os.read(master, 65536)
                except OSError:
                    break
        out = proc.communicate(timeout=30)[0].decode()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        os.close(master)
    assert proc.returncode == 0, shown[-500:]
    assert "imported session" in out, out
    text = shown.decode(errors="replace")
    assert "reading big.jsonl" in text or "writing the journal" in text, text[-500:]


@pytest.mark.anyio
async def test_import_progress_reports_both_phases_up_to_their_totals(tmp_path: Path) -> None:
    big = tmp_path / "t.jsonl"
    _big_transcript(big, events=2500, text_bytes=10)
    seen: dict[str, list[tuple[int, int]]] = {"read": [], "journal": []}
    journal = await SqliteJournal.open(tmp_path / "journal.db")
    try:
        result = await import_transcript(
            journal, big, tmp_path / "sessions", lambda p, d, t: seen[p].append((d, t))
        )
    finally:
        await journal.aclose()
    assert result.events >= 2500  # import may close an unfinished turn
    size = big.stat().st_size
    assert seen["read"][-1] == (size, size) and len(seen["read"]) >= 2
    assert seen["journal"][-1] == (result.events, result.events) and [
        d for d, _ in seen["journal"]
    ] == sorted(d for d, _ in seen["journal"])
