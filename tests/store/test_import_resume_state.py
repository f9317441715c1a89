"""An imported session opens as cheaply as one acagent wrote itself (issue 10 item 2, F60): the
import records the transcript's stat, the checkpoint position and last_seq, so the first open
neither rescans the transcript nor rebuilds more than the latest checkpoint and its tail."""

from __future__ import annotations

from pathlib import Path

import pytest

from acagent.runner import SessionRegistry
from acagent.settings import load_settings
from acagent.store import SqliteJournal
from acagent.store._import import import_transcript
from acagent.store._transcript_writer import TranscriptWriter
from acagent.testing import Reply, ScriptedModel

pytestmark = pytest.mark.anyio


async def test_first_open_of_an_imported_session_skips_the_transcript_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = tmp_path / "w"
    ws.mkdir()
    model = ScriptedModel(factory=lambda req: Reply(text="answer"))
    src = load_settings({"home": str(tmp_path / "src")}, env={})
    async with SessionRegistry.open(src, provider_factory=lambda m: model) as reg:
        row = await reg.create_session(ws)
        runner = await reg.get_runner(row.id)
        for i in range(4):
            await runner.run_turn(f"message {i} " + "x" * 1500)
        exported = reg.transcript_path(row)

    dst = load_settings({"home": str(tmp_path / "dst")}, env={})
    journal = await SqliteJournal.open(dst.db_path)
    try:
        result = await import_transcript(journal, exported, dst.sessions_dir)
        imported = await journal.get_session(result.session_id)
    finally:
        await journal.aclose()
    assert imported.transcript_stat is not None
    assert imported.last_seq == result.events

    reads: list[Path] = []
    monkeypatch.setattr(TranscriptWriter, "read", lambda self: reads.append(self.path) or None)
    async with SessionRegistry.open(dst, provider_factory=lambda m: model) as reg:
        runner = await reg.get_runner(result.session_id)
        await runner.run_turn("after import")
        events = await reg.journal.events(result.session_id, imported.last_seq)
    assert reads == [], "the imported transcript was scanned in full on its first open"
    assert [e.type for e in events][-1] == "turn.completed", [
        e.payload for e in events if e.type == "turn.failed"
    ]
    # the transcript the import wrote continues seamlessly (no repair, no duplicate seq)
    seqs = [int(line.split(b",", 1)[0].split(b":")[1]) for line in result.path.read_bytes().splitlines()]
    assert seqs == list(range(1, len(seqs) + 1)) and seqs[-1] == events[-1].seq
