"""The transcript pump's append: one lock per batch, and a gap is never papered over."""

from __future__ import annotations

import fcntl
from pathlib import Path
from typing import Any

import pytest

from acagent.events import Event
from acagent.store._transcript import read_transcript
from acagent.store._transcript_writer import TranscriptWriter


def _ev(seq: int) -> Event:
    return Event(
        seq=seq,
        ts="2026-12-02T00:00:00.000Z",
        session_id="ses_t",
        type="user.message",
        payload={"text": f"m{seq}"},
    )


def test_append_next_takes_one_lock_per_batch_and_refuses_a_gap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: the pump called ``sync()`` and then ``write()``: two exclusive locks and two checks
    of the file for every batch (figures 1 and 5 name it)."""
    writer = TranscriptWriter(tmp_path / "t.jsonl")
    locks: list[Any] = []
    real = fcntl.flock
    monkeypatch.setattr(fcntl, "flock", lambda fd, op: (locks.append(op), real(fd, op))[1])
    assert writer.append_next([_ev(1), _ev(2)])
    assert locks.count(fcntl.LOCK_EX) == 1
    assert not writer.append_next([_ev(4)])  # seq 3 is missing: nothing written
    assert writer.append_next([_ev(2), _ev(3)])  # what the file holds is skipped
    assert writer.append_next([])
    writer.close()
    assert [e.seq for e in read_transcript(tmp_path / "t.jsonl").events] == [1, 2, 3]


def test_append_next_sees_another_writers_records(tmp_path: Path) -> None:
    a = TranscriptWriter(tmp_path / "t.jsonl")
    b = TranscriptWriter(tmp_path / "t.jsonl")
    assert a.append_next([_ev(1)])
    assert b.append_next([_ev(1), _ev(2)])  # b re-reads the file's tail under the lock
    assert not a.append_next([_ev(4)])
    assert a.append_next([_ev(3)])
    a.close()
    b.close()
    assert [e.seq for e in read_transcript(tmp_path / "t.jsonl").events] == [1, 2, 3]


def test_append_next_checks_the_file_once_per_batch_and_still_sees_other_writers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The size the lock's check read (one fstat) is the one the tail check uses: no second fstat
    under the same lock, and a record another writer appended in between is still seen."""
    import os

    a = TranscriptWriter(tmp_path / "t.jsonl")
    b = TranscriptWriter(tmp_path / "t.jsonl")
    assert a.append_next([_ev(1)])
    fstats: list[int] = []
    real = os.fstat
    monkeypatch.setattr(os, "fstat", lambda fd: (fstats.append(fd), real(fd))[1])
    assert a.append_next([_ev(2)])
    assert len(fstats) == 1
    assert b.append_next([_ev(3)])  # b: a's records seen
    assert a.append_next([_ev(3), _ev(4)])  # a: b's record 3 seen (the size moved), not written twice
    monkeypatch.undo()
    a.close()
    b.close()
    assert [e.seq for e in read_transcript(tmp_path / "t.jsonl").events] == [1, 2, 3, 4]
