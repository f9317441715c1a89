"""``context.compacted`` in transcripts: export → import keeps it (and the compacted context),
and ``sessions show --full`` prints the whole history, the summarised part included."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

from acagent.runner import SessionRegistry
from acagent.runner._cut import SUMMARY_MARK, SUMMARY_SYSTEM
from tests.conftest import Cli
from tests.mockprovider import MockProvider
from tests.runner.test_compaction import _settings, _text, notes, responder

pytestmark = pytest.mark.anyio


async def _session(home: Path, mock: MockProvider, workspace: Path, turns: int) -> tuple[str, list, list]:
    async with SessionRegistry.open(_settings(home, mock)) as reg:
        row = await reg.create_session(workspace, model="openai:mock")
        runner = await reg.get_runner(row.id)
        for i in range(turns):
            await runner.run_turn(f"please run turn {i}")
        await runner.load_context()
        return row.id, await runner.journal.events(row.id, 0), list(runner.context.messages)


async def test_compaction_survives_export_and_import_and_show_full_prints_everything(
    cli: Cli, tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    mock.default = responder
    notes(workspace, 30)
    sid, events, context = await _session(cli.home, mock, workspace, 24)
    compacted = [e.payload for e in events if e.type == "context.compacted"]
    assert len(compacted) >= 2

    exported = cli("export", sid, check=True).stdout
    lines = [orjson.loads(line) for line in exported.splitlines()]
    assert [r["payload"] for r in lines if r["type"] == "context.compacted"] == compacted
    path = tmp_path / "export.jsonl"
    path.write_text(exported)
    other = Cli(home=tmp_path / "home2", env={**cli.env, "ACAGENT_HOME": str(tmp_path / "home2")})
    other.home.mkdir()
    out = other("import", str(path), check=True).stdout
    new_id = out.split()[2]

    async with SessionRegistry.open(_settings(other.home, mock)) as reg:
        runner = await reg.get_runner(new_id)
        await runner.load_context()
        imported = await runner.journal.events(new_id, 0)
        assert [e.payload for e in imported if e.type == "context.compacted"] == compacted
        by_seq = {e.seq: e for e in imported}
        assert all(by_seq[c["first_kept_seq"]].type == "user.message" for c in compacted)
        # The imported session's model context is the compacted one, message for message.
        assert [m.model_dump() for m in runner.context.messages] == [m.model_dump() for m in context]
        before = len(mock.requests)
        await runner.run_turn("please run turn 24")  # and it goes on against the strict mock
        assert (await runner.snapshot())["status"] == "done"
    sent = [r for r in mock.requests[before:] if r.json["messages"][0]["content"] != SUMMARY_SYSTEM]
    assert sent and all(r.status == 200 for r in mock.requests[before:])
    first = sent[0].json["messages"]
    assert SUMMARY_MARK in _text(first[1]["content"]) and "please run turn 0" not in str(first)

    shown = other("sessions", "show", new_id, check=True).stdout
    assert "please run turn 3" not in shown and "--full" in shown  # (turn 0 is the title)
    full = other("sessions", "show", new_id, "--full", check=True).stdout
    for i in range(25):
        assert re.search(rf"please run turn {i}\b", full), i  # every turn, the summarised ones too


@pytest.mark.parametrize("form", ["position", "copy"])
async def test_import_of_a_damaged_transcript_keeps_compaction_positions(
    tmp_path: Path, mock: MockProvider, workspace: Path, monkeypatch: pytest.MonkeyPatch, form: str
) -> None:
    """Skipped lines renumber the events: ``first_kept_seq`` and a checkpoint's ``message_seqs``
    follow the new numbering, so they still point at the turn start they named, and the imported
    session's context is the exported one. ``copy``: a transcript of the previous format, whose
    every compaction committed a ``checkpoint`` of the compacted context."""
    from acagent.runner import ContextBuilder, _compact
    from acagent.store import SqliteJournal
    from acagent.store._import import import_transcript

    if form == "copy":
        monkeypatch.setattr(_compact, "_positions_known", lambda *a: False)
    mock.default = responder
    notes(workspace, 30)
    _, events, context = await _session(tmp_path / "home", mock, workspace, 24)
    by_seq = {e.seq: e for e in events}
    kept_texts = [
        by_seq[e.payload["first_kept_seq"]].payload["text"] for e in events if e.type == "context.compacted"
    ]
    lines = [e.to_json_bytes() for e in events]
    usage = next(i for i, e in enumerate(events) if e.type == "usage")  # an early, harmless line
    lines[usage] = b'{"seq": 9, "torn'
    path = tmp_path / "damaged.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    journal = await SqliteJournal.open(tmp_path / "home3" / "acagent.db")
    try:
        result = await import_transcript(journal, path, tmp_path / "home3" / "sessions")
        imported = await journal.events(result.session_id, 0)
        rebuilt = ContextBuilder()
        rebuilt.rebuild(await journal.context_events(result.session_id))
    finally:
        await journal.aclose()
    assert result.warning  # the damaged line is reported
    new = {e.seq: e for e in imported}
    compacted = [e.payload for e in imported if e.type == "context.compacted"]
    assert [new[c["first_kept_seq"]].payload.get("text") for c in compacted] == kept_texts
    assert [m.model_dump() for m in rebuilt.messages] == [m.model_dump() for m in context]
    checkpoints = [e.payload for e in imported if e.type == "checkpoint" and e.payload.get("message_seqs")]
    assert (len(checkpoints) == len(compacted)) == (form == "copy") and len(compacted) >= 2
    for cp in checkpoints:
        for seq, message in zip(cp["message_seqs"], cp["messages"], strict=True):
            if not seq:
                continue
            kind = new[seq].type
            assert (
                kind == "assistant.message" if message["role"] == "assistant" else kind != "assistant.message"
            )
            if kind == "user.message":
                assert new[seq].payload["text"] in orjson.dumps(message).decode()
