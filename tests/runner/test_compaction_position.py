"""A compaction is a position, not a copy (issue 12, figure 3: bytes written per turn).

``context.compacted`` names ``first_kept_seq``; the compacted context is its summary merged into
the first kept message plus the fold of the journal's events from there on. These tests check
that a compaction commits no copy of the kept messages, that a rebuild from the journal (in this
process, in a fresh one, after a SIGKILL right after a compaction) gives the live context byte
for byte — the step id carries its digest, so a different rebuild would pay an LLM call twice —
and that journals and transcripts holding the previous format's compaction checkpoints still load.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from acagent.runner import ContextBuilder, SessionRegistry, _compact
from acagent.runner._cut import SUMMARY_SYSTEM
from acagent.store._frames import stored_events
from tests.mockprovider import MockProvider
from tests.runner.test_compaction import MODELS, _settings, notes, responder

pytestmark = pytest.mark.anyio

TURNS = 30


def _dump(ctx: ContextBuilder) -> bytes:
    return orjson.dumps([m.model_dump(mode="json") for m in ctx.messages])


async def _check_rebuild(runner: Any, sid: str) -> None:
    """A context rebuilt from the journal is the live one: same bytes, seqs, last seq, digest."""
    fresh = ContextBuilder()
    fresh.rebuild(await runner.journal.context_events(sid))
    live = runner.context
    assert _dump(fresh) == _dump(live)
    assert (fresh.seqs, fresh.last_seq) == (live.seqs, live.last_seq)
    assert fresh.digest(runner.system_prompt) == live.digest(runner.system_prompt)


async def _run(home: Path, mock: MockProvider, workspace: Path, turns: int) -> tuple[str, list[Any], bytes]:
    """A session of ``turns`` turns that compacts several times; the rebuild is checked after each."""
    async with SessionRegistry.open(_settings(home, mock)) as reg:
        row = await reg.create_session(workspace, model="openai:mock")
        runner = await reg.get_runner(row.id)
        for i in range(turns):
            await runner.run_turn(f"please run turn {i}")
            assert (await runner.snapshot())["status"] == "done", i
            await _check_rebuild(runner, row.id)
        return row.id, await runner.journal.events(row.id, 0), _dump(runner.context)


async def test_a_compaction_commits_a_position_and_the_rebuild_is_the_live_context(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    """No compaction copies the kept messages (the previous format committed a ``checkpoint`` of
    the whole compacted context, ~34 KB every ~10 turns in figure 3): what a compaction commits
    is its step's end, its usage and ``context.compacted``, and the session row's snapshot
    position is the first kept event. After every turn — right after each compaction too — the
    context rebuilt from the journal is the live one, byte for byte."""
    mock.default = responder
    notes(workspace, TURNS)
    sid, events, live = await _run(tmp_path / "home", mock, workspace, TURNS)
    compactions = [e for e in events if e.type == "context.compacted"]
    assert len(compactions) >= 3
    assert not [e for e in events if e.type == "checkpoint"], "a compaction copied the context"
    kept_bytes = sum(
        len(e.to_json_bytes()) for e in events if e.seq >= compactions[-1].payload["first_kept_seq"]
    )
    for c in compactions:
        commit = [
            e for e in events if e.ts == c.ts and e.type in ("step.finished", "usage", "context.compacted")
        ]
        written = sum(len(e.to_json_bytes()) for e in commit)
        assert written < 2000 + len(c.payload["summary"]) * 2, written  # no copy of the kept part
    assert kept_bytes > 4000  # what a copy would have cost at least
    from acagent.store import SqliteJournal

    journal = await SqliteJournal.open(tmp_path / "home" / "acagent.db")
    try:
        row = await journal.get_session(sid)
        assert row.checkpoint_seq == compactions[-1].payload["first_kept_seq"]
        fresh = ContextBuilder()
        fresh.rebuild(await journal.context_events(sid))  # another journal connection, cold
        assert _dump(fresh) == live
    finally:
        await journal.aclose()


_CRASH_AFTER_COMPACTION = """
import sys, anyio
from acagent.settings import load_settings
from acagent.runner import SessionRegistry
import acagent.runner._fit as fit
real = fit.compact_context
async def compact_then_arm(ports, **kw):
    out = await real(ports, **kw)
    if sys.argv[3]:  # armed: the process dies at that point after this (first) compaction
        ports.settings.crash_at = sys.argv[3]
    return out
fit.compact_context = compact_then_arm
async def main():
    s = load_settings({"home": HOME, "base_url": URL, "model": "openai:mock", "auto_approve": True,
                       "models": MODELS}, env={})
    async with SessionRegistry.open(s) as reg:
        sid = sys.argv[1]
        if sid == "new":
            sid = (await reg.create_session(WORKSPACE, model="openai:mock")).id
            print(sid, flush=True)
        runner = await reg.get_runner(sid)
        for i in range(int(sys.argv[2])):
            await runner.run_turn(f"please run turn {i}")
        if sys.argv[2] == "0":
            await runner.run_turn(None)
anyio.run(main)
"""


@pytest.mark.parametrize(
    "point", ["after_step_inflight", "compact_before_call", "compact_mid_summary", "compact_before_commit"]
)
def test_sigkill_after_a_compaction_resumes_the_same_step_in_a_fresh_process(
    point: str, tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    """After a compaction, the process is SIGKILLed at ``point``: right after the intent row of
    the next LLM step, or in the next compaction (its step id also carries the context's
    digest). Each step id was made from the live context (folded from the compaction's
    position). A fresh process rebuilds the context from that position and finds that very step
    inflight: it retries it as attempt 2 (``llm.retry`` ``process_died``), so the digests agree
    and no call is paid twice silently."""
    mock.default = responder
    notes(workspace, TURNS)
    home = tmp_path / "home"
    code = (
        f"HOME = {str(home)!r}\nURL = {mock.openai_base_url!r}\nMODELS = {MODELS!r}\n"
        f"WORKSPACE = {str(workspace)!r}\n" + _CRASH_AFTER_COMPACTION
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    first = subprocess.run(
        [sys.executable, "-c", code, "new", str(TURNS), point],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert first.returncode == -9, first.stderr[-2000:]  # killed after the step's intent
    sid = first.stdout.split()[0]
    db = sqlite3.connect(home / "acagent.db")
    try:
        inflight = db.execute(
            "SELECT step_id FROM step WHERE session_id = ? AND status = 'inflight'", (sid,)
        ).fetchall()
        assert len(inflight) == 1 and ("|compact|" in inflight[0][0]) == point.startswith("compact")
        step_id = inflight[0][0]
        types = [e[3] for e in stored_events(db, sid)]
        assert types.count("context.compacted") == 1 and "checkpoint" not in types
        asked = len(mock.requests)
        second = subprocess.run(
            [sys.executable, "-c", code, sid, "0", ""], capture_output=True, text=True, timeout=120, env=env
        )
        assert second.returncode == 0, second.stderr[-2000:]
        attempts = db.execute(
            "SELECT attempt, status FROM step WHERE session_id = ? AND step_id = ? ORDER BY attempt",
            (sid, step_id),
        ).fetchall()
        last = (stored_events(db, sid)[-1][3],)
    finally:
        db.close()
    assert attempts == [(1, "failed"), (2, "done")], attempts  # the same digest after the rebuild
    assert last == ("turn.completed",)
    summaries = [r for r in mock.requests[asked:] if r.json["messages"][0]["content"] == SUMMARY_SYSTEM]
    assert len(summaries) == point.startswith("compact")  # the resumed compaction's one call
    assert all(r.status == 200 for r in mock.requests)


async def test_old_compaction_checkpoints_and_new_positions_mix(
    tmp_path: Path, mock: MockProvider, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A journal whose first compactions were written the previous way (``context.compacted`` +
    a full ``checkpoint``) goes on with position compactions: the rebuild gives the live context
    after every turn."""
    mock.default = responder
    notes(workspace, TURNS)
    copies = [2]  # the first two compactions commit a copy, as every compaction did before

    def known(*a: Any) -> bool:
        copies[0] -= 1
        return copies[0] < 0

    monkeypatch.setattr(_compact, "_positions_known", known)
    _, events, _ = await _run(tmp_path / "home", mock, workspace, TURNS)
    types = [e.type for e in events]
    assert types.count("checkpoint") == 2 and types.count("context.compacted") >= 3


def _user(text: str) -> tuple[str, dict[str, Any]]:
    return ("user.message", {"turn_id": "t", "text": text})


def _assistant(text: str) -> tuple[str, dict[str, Any]]:
    message = {"role": "assistant", "parts": [{"part_kind": "text", "text": text}]}
    return ("assistant.message", {"turn_id": "t", "text": text, "message": message})


def _compaction(summary: str, first_kept_seq: int) -> tuple[str, dict[str, Any]]:
    return (
        "context.compacted",
        {
            "summary": summary,
            "first_kept_seq": first_kept_seq,
            "tokens_before": 9,
            "tokens_after": 3,
            "model": "m:x",
        },
    )


async def test_a_position_before_an_old_checkpoint_rebuilds_the_live_context(tmp_path: Path) -> None:
    """A position compaction whose first kept event lies before the previous format's checkpoint
    (a larger ``keep_recent`` than the old compaction's): the rebuild reads from there, the old
    checkpoint resets what it read before it, and the new compaction cuts its messages by their
    ``message_seqs`` — the live fold's result, byte for byte."""
    from acagent.runner._cut import merge_summary
    from acagent.store import SqliteJournal

    journal = await SqliteJournal.open(tmp_path / "acagent.db")
    try:
        row, _ = await journal.create_session(cwd="/tmp", model=None, title=None)
        live = ContextBuilder()
        for e in await journal.commit_unfenced(
            row.id,
            [_user("u1"), _assistant("a1"), _user("u2"), _assistant("a2"), _user("u3"), _assistant("a3")],
            reason="test",
        ):
            live.apply(e)
        assert live.seqs == [2, 3, 4, 5, 6, 7]
        old = merge_summary("S1", live.messages[2:])
        checkpoint = {
            "upto_seq": 7,
            "messages": [m.model_dump(mode="json") for m in old],
            "message_seqs": [4, 5, 6, 7],
        }
        batches = [
            [_compaction("S1", 4), ("checkpoint", checkpoint)],  # seqs 8, 9: the previous format
            [_user("u4"), _assistant("a4")],  # 10, 11
            [_compaction("S2", 6)],  # 12: keeps from u3, before the checkpoint
            [_user("u5")],
        ]
        for batch in batches:
            for e in await journal.commit_unfenced(row.id, batch, reason="test"):
                live.apply(e)
            fresh = ContextBuilder()
            fresh.rebuild(await journal.context_events(row.id))
            assert _dump(fresh) == _dump(live) and fresh.seqs == live.seqs
        assert (await journal.get_session(row.id)).checkpoint_seq == 6
        texts = [[p.text for p in m.parts if hasattr(p, "text")] for m in live.messages]
        assert texts[1:] == [["a3"], ["u4"], ["a4"], ["u5"]] and "S2" in texts[0][0] and texts[0][1] == "u3"
    finally:
        await journal.aclose()
