"""F44: a 20 MiB tool output is kept in full on disk, shown and sent as head + tail, never resent
verbatim, and ``acagent export`` streams (and fails in one line when memory runs out)."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

from acagent.store._frames import stored_events
from acagent.store._payload import payload_text
from acagent.tools import ShellTool, validate_arguments
from tests.cases.conftest import journal_events, open_session, session_transcript, settings_for
from tests.mockprovider import MockProvider, TextReply, openai_tool_calls

pytestmark = pytest.mark.anyio

BIG = 20 * 1024 * 1024
BIG_COMMAND = f"echo START-F44; head -c {BIG} /dev/zero | tr '\\0' x; echo; echo END-F44"
BIG_BYTES = len("START-F44\n") + BIG + len("\nEND-F44\n")


async def run_shell(ctx, command: str):
    args, _ = validate_arguments(ShellTool(), {"command": command})
    return await ShellTool().run(args, ctx)


async def test_big_output_is_kept_in_a_blob_and_cut_for_the_model(make_ctx, tmp_path: Path) -> None:
    """The blob holds every byte (sha256 and size in ``output_ref``, mode 0600); the content is
    head + tail within the limit with a note; a small output leaves no file behind."""
    blobs = tmp_path / "ses.blobs"
    ctx = make_ctx(blob_dir=blobs, output_limit_chars=4000, tool_call_id="call/../1")
    result = await run_shell(ctx, BIG_COMMAND)
    assert result.status == "ok"
    assert len(result.content) < 4000 + 400
    assert result.content.startswith("START-F44") and result.content.rstrip().endswith("END-F44")
    assert "is kept by acagent" in result.content
    ref = result.data["output_ref"]
    blob = blobs.parent / ref["path"]
    assert blob.parent == blobs and ref["bytes"] == BIG_BYTES == blob.stat().st_size
    assert hashlib.sha256(blob.read_bytes()).hexdigest() == ref["sha256"]
    assert stat.S_IMODE(blob.stat().st_mode) == 0o600 and stat.S_IMODE(blobs.stat().st_mode) == 0o700
    small = await run_shell(make_ctx(blob_dir=blobs, tool_call_id="call_2"), "seq 1 5000")
    assert "output_ref" not in small.data and sorted(p.name for p in blobs.iterdir()) == [blob.name]


async def test_big_output_through_a_turn_is_never_resent_verbatim(tmp_path: Path, mock: MockProvider) -> None:
    """Through a real turn: the event references the blob, the model gets head + tail now and
    after a restart, live output and the journal stay small."""
    W = Path(os.path.realpath(tmp_path)) / "w"
    W.mkdir()
    settings = settings_for(tmp_path / "state", mock, auto_approve=True, tool_output_limit_chars=8000)
    async with open_session(settings, W) as (_, runner):
        mock.script(openai_tool_calls([("call_big", "shell", {"command": BIG_COMMAND})]), TextReply("done"))
        await runner.run_turn("make a big output")
        events = await journal_events(runner)
        session_id, cwd = runner.session_id, runner.cwd
    (result,) = [e.payload for e in events if e.type == "tool.result"]
    ref = result["output_ref"]
    transcript = session_transcript(settings, cwd, session_id)
    blob = transcript.parent / ref["path"]
    assert ref["bytes"] == BIG_BYTES and blob.stat().st_size == BIG_BYTES
    assert len(result["content"]) < 8400
    live = sum(len(e.payload["text"]) for e in events if e.type == "tool.output")
    assert live <= 1_000_100  # LIVE_OUTPUT_LIMIT_CHARS, then one note
    sent = next(m for m in mock.requests[-1].json["messages"] if m.get("tool_call_id") == "call_big")
    assert sent["content"] == result["content"]
    assert transcript.stat().st_size < 4 * 1024 * 1024
    assert (settings.home / "acagent.db").stat().st_size < 8 * 1024 * 1024
    async with open_session(settings, W) as (reg, _):
        again = await reg.get_runner(session_id)
        mock.script(TextReply("ok"))
        await again.run_turn("and now?")
    assert len(mock.requests[-1].body) < 64 * 1024  # the old output is not in the new request


EXPORT = textwrap.dedent(
    """
    import resource, sys
    from acagent.cli import main
    def vm():
        for line in open("/proc/self/status"):
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    margin = int(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_AS, (vm() + margin, resource.RLIM_INFINITY))
    sys.argv = ["acagent", "export", sys.argv[2]]
    main()
    """
)


def grow_session(db: Path, session_id: str, copies: int) -> int:
    """Append ``copies`` copies of the session's biggest event (raw SQL); returns total bytes."""
    with sqlite3.connect(db) as con:
        stored = [(ts, typ, p) for _, _, ts, typ, p in stored_events(con, session_id)]
        events = [(t, ty, payload_text(p)) for t, ty, p in stored]
        # the biggest one, or else the biggest that can be made big (the reply "done"): a step's
        # events outgrew the one-word reply once step ids carried the turn id
        ts, typ, payload = max(events, key=lambda r: (len(r[2]) > 100_000 or '"done"' in r[2], len(r[2])))
        (last, num) = con.execute("SELECT last_seq, num FROM session WHERE id = ?", (session_id,)).fetchone()
        big = payload if len(payload) > 100_000 else payload.replace('"done"', '"' + "y" * 500_000 + '"', 1)
        rows = [
            ((num << 32) | (last + i), ts, "user.message" if big is not payload else typ, big)
            for i in range(1, copies + 1)
        ]
        # event_log (m007): key = session.num << 32 | seq; a TEXT payload is plain JSON
        con.executemany("INSERT INTO event_log (key, ts, type, payload) VALUES (?, ?, ?, ?)", rows)
        con.execute("UPDATE session SET last_seq = ? WHERE id = ?", (last + copies, session_id))
        return len(big) * copies


def export_under(
    margin: int, session_id: str, env: dict[str, str], out: Path
) -> subprocess.CompletedProcess[str]:
    with out.open("wb") as fh:
        return subprocess.run(
            [sys.executable, "-c", EXPORT, str(margin), session_id],
            stdout=fh,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            timeout=120,
        )


async def test_export_streams_and_fails_in_one_line_when_memory_runs_out(
    tmp_path: Path, mock: MockProvider
) -> None:
    """A ~150 MB session exports under an address-space limit of 256 MiB above the bare
    interpreter (the journal is read a page at a time; the old whole-list export crashed there);
    with a 40 MiB margin it fails with one line naming the session, never a traceback."""
    W = Path(os.path.realpath(tmp_path)) / "w"
    W.mkdir()
    settings = settings_for(tmp_path / "state", mock)
    async with open_session(settings, W) as (_, runner):
        mock.script(TextReply("done"))
        await runner.run_turn("hello")
        session_id = runner.session_id
    await anyio.sleep(0)
    total = grow_session(settings.home / "acagent.db", session_id, 300)
    assert total > 140 * 1024 * 1024
    env = {**os.environ, "ACAGENT_HOME": str(settings.home), "MALLOC_ARENA_MAX": "2"}
    ok = export_under(256 * 1024 * 1024, session_id, env, tmp_path / "out.jsonl")
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert (tmp_path / "out.jsonl").stat().st_size > total
    tight = export_under(40 * 1024 * 1024, session_id, env, tmp_path / "out2.jsonl")
    assert tight.returncode != 0
    assert "Traceback" not in tight.stderr
    lines = [line for line in tight.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and session_id in lines[0] and "memory" in lines[0], tight.stderr[-2000:]
