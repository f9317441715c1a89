"""Reopening a session whose transcript is unchanged since its writer closed it skips the full
scan (resume stays cheap); any change to the file brings the full check and repair back."""

from __future__ import annotations

from pathlib import Path

import pytest

from acagent.runner import SessionRegistry
from acagent.settings import load_settings
from acagent.store._transcript_writer import TranscriptWriter
from acagent.testing import Reply, ScriptedModel

pytestmark = pytest.mark.anyio


async def test_unchanged_transcript_is_not_rescanned_but_damage_is_repaired(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = load_settings({"home": str(tmp_path / "h")}, env={})
    ws = tmp_path / "w"
    ws.mkdir()
    model = ScriptedModel(factory=lambda req: Reply(text="answer"))
    async with SessionRegistry.open(s, provider_factory=lambda m: model) as reg:
        row = await reg.create_session(ws)
        runner = await reg.get_runner(row.id)
        await runner.run_turn("one")
        await runner.run_turn("two")
        path = reg.transcript_path(row)

    reads: list[Path] = []
    real_read = TranscriptWriter.read

    def counting_read(self: TranscriptWriter):  # type: ignore[no-untyped-def]
        reads.append(self.path)
        return real_read(self)

    monkeypatch.setattr(TranscriptWriter, "read", counting_read)
    async with SessionRegistry.open(s, provider_factory=lambda m: model) as reg:
        runner = await reg.get_runner(row.id)
        await runner.run_turn("three")
    assert reads == [], "an unchanged transcript is trusted without a full scan"

    lines = path.read_bytes().split(b"\n")
    path.write_bytes(b"\n".join([*lines[:3], b"\x00" * 64, *lines[3:]]))
    async with SessionRegistry.open(s, provider_factory=lambda m: model) as reg:
        runner = await reg.get_runner(row.id)
        snap = await runner.snapshot()
    assert reads == [path]
    assert snap["warnings"] and snap["warnings"][-1]["code"] == "transcript_repaired"
    assert b"\x00" not in path.read_bytes()
