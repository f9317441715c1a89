"""F03: a torn or NUL-padded transcript line never truncates the resumed context silently.

Case ``shared/cases/F03-torn-transcript.md``. Names: the case's "warning" is acagent's ``error``
event with code ``transcript_repaired`` (journal-backed path: the transcript is rewritten from
the journal, the damaged file kept as ``<id>.jsonl.corrupt``) or ``transcript_damaged``
(transcript-only path, ``acagent import``), plus the same entry in the session's ``warnings``
field (``GET /v1/sessions/{id}``, ``sessions list --json``). Its ``detail`` names the ``file``,
each damaged line (``line``, byte ``offset``, ``reason``, ``kept`` records) and
``skipped_lines``. The daemon steps of the case (``GET /v1/sessions``, ``attach``) are run here
through the CLI without a daemon (``run --json`` prints the same envelopes ``attach`` would) and
through the registry.

Policies (docs/field-cases.md): a complete record that lacks only its final newline is kept
silently; a transcript that merely lags the journal (cut at a record boundary) is completed
without a warning; every other damage is reported and never refuses the session; records glued
after NULs or after a torn fragment on the same line are recovered.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from acagent.errors import TranscriptError
from acagent.events import make_payload
from acagent.messages import Message, TextPart
from acagent.providers._anthropic import to_anthropic_messages
from acagent.providers._openai import to_openai_messages
from acagent.runner import SessionRegistry
from acagent.runner._context import build_context
from acagent.store import SqliteJournal
from acagent.store._frames import stored_events
from acagent.store._import import import_transcript, plan_import
from acagent.store._ops import CONTEXT_TYPES
from acagent.store._payload import payload_text
from acagent.store._transcript import parse_transcript, read_transcript
from acagent.store._transcript_writer import TranscriptWriter
from tests.cases.conftest import journal_events, open_session, parse_lines, session_transcript, settings_for
from tests.mockprovider import MockProvider, TextReply, openai_tool_calls, validate_anthropic, validate_openai

pytestmark = pytest.mark.anyio

FIXTURE_SHA256 = "891e8f1ad618165decf6ea1a5663fe28dd13be273201f0ee41a6b0a9fd1896dc"
QA = ["first question", "first answer", "second question", "second answer"]


def _rec(seq: int, typ: str, payload: dict[str, Any], sid: str = "ses_f03") -> bytes:
    env = {"seq": seq, "ts": f"2026-01-01T00:00:0{seq}Z", "session_id": sid, "type": typ, "payload": payload}
    return (json.dumps(env, separators=(",", ":")) + "\n").encode()


def fixture_bytes() -> bytes:
    """The case's snippet (byte-exact)."""
    return b"".join(
        [
            _rec(1, "session.created", {"cwd": "/tmp/w", "model": "anthropic:mock", "title": "torn"}),
            _rec(2, "user.message", {"text": "first question"}),
            _rec(3, "assistant.message", {"text": "first answer"}),
            b"\x00" * 512 + b"\n",
            _rec(4, "user.message", {"text": "second question"}),
            _rec(5, "assistant.message", {"text": "second answer"}),
            b'{"seq":6,"ts":"2026-01-01T00:00:06Z","session_id":"ses_f03","type":"user.message",'
            b'"payload":{"text":"third qu',
        ]
    )


def sent_text(request_json: dict[str, Any]) -> str:
    return json.dumps(request_json["messages"], ensure_ascii=False)


# --------------------------------------------------------------------------- damage


@dataclass
class Damage:
    """A damaged transcript and the damaged lines the warning must name."""

    data: bytes
    expected: list[tuple[int, int, int]]
    """``(line, byte offset, records kept)`` per damaged line."""


def _lines(data: bytes) -> list[tuple[int, bytes]]:
    """``(offset, line without newline)`` of each complete line."""
    out, offset = [], 0
    for raw in data.split(b"\n")[:-1]:
        out.append((offset, raw))
        offset += len(raw) + 1
    return out


def _find(data: bytes, predicate: Any) -> int:
    """Index (0-based) of the first line whose record satisfies ``predicate``."""
    for i, (_, raw) in enumerate(_lines(data)):
        if predicate(json.loads(raw)):
            return i
    raise AssertionError("no such record")


def _is_msg(typ: str, text: str) -> Any:
    return lambda r: r["type"] == typ and r["payload"].get("text", "").startswith(text)


TORN = b'{"seq":99,"ts":"2026-01-01T00:00:06Z","session_id":"x","type":"user.message","payload":{"text":"third qu'


def damage(clean: bytes, variant: str) -> Damage:
    """Inject the case's two defects (or a variant's) into a real transcript."""
    lines = _lines(clean)
    if variant == "nul-line":  # the fixture's shape: a NUL line after the first answer, a torn tail
        i = _find(clean, _is_msg("assistant.message", "first answer"))
        at = lines[i + 1][0]
        data = clean[:at] + b"\x00" * 512 + b"\n" + clean[at:] + TORN
        return Damage(data, [(i + 2, at, 0), (len(lines) + 2, len(clean) + 513, 0)])
    if variant == "nul-glued":  # 300 NULs glued onto the "second question" record, a torn tail
        i = _find(clean, _is_msg("user.message", "second question"))
        at = lines[i][0]
        data = clean[:at] + b"\x00" * 300 + clean[at:] + TORN
        return Damage(data, [(i + 1, at, 1), (len(lines) + 1, len(clean) + 300, 0)])
    if variant == "trailing-nuls":  # an otherwise valid file ending in a NUL run
        return Damage(clean + b"\x00" * 512, [(len(lines) + 1, len(clean), 0)])
    if variant == "checkpoint":  # a NUL run inside a checkpoint record, and a torn checkpoint at the end
        i = _find(clean, lambda r: r["type"] == "checkpoint")
        at, raw = lines[i]
        mid = len(raw) // 2
        hole = raw[:mid] + b"\x00" * 512 + raw[mid + 512 :]
        data = clean[:at] + hole + clean[at + len(raw) :] + raw[: len(raw) // 2]
        return Damage(data, [(i + 1, at, 0), (len(lines) + 1, len(clean), 0)])
    raise AssertionError(variant)


VARIANTS = ["nul-line", "nul-glued", "trailing-nuls", "checkpoint"]


async def two_turn_session(home: Path, mock: MockProvider, cwd: Path, *, big: bool) -> tuple[Any, str, Path]:
    """A real session with two completed turns (``big``: large replies, and after the first turn a
    full-context checkpoint as the previous format wrote them; compaction writes the same record)."""
    pad = " " + "x" * 3000 if big else ""
    mock.script(
        openai_tool_calls([("call_1", "read_file", {"path": "notes.txt"})]),
        TextReply("first answer" + pad),
        TextReply("second answer" + pad),
    )
    (cwd / "notes.txt").write_text("notes\n")
    settings = settings_for(home, mock)
    async with open_session(settings, cwd) as (_, runner):
        await runner.run_turn("first question")
        if big:
            messages = [m.model_dump(mode="json") for m in runner.context.messages]
            payload = make_payload("checkpoint", upto_seq=runner.context.last_seq, messages=messages)
            await runner.writer.commit_unfenced([("checkpoint", payload)], reason="test: a full checkpoint")
        await runner.run_turn("second question")
        sid, row_cwd = runner.session_id, runner.cwd
        types = [e.type for e in await journal_events(runner)]
    assert types.count("turn.completed") == 2
    assert ("checkpoint" in types) == big
    return settings, sid, session_transcript(settings, row_cwd, sid)


def assert_warning(
    message: str, detail: dict[str, Any], path: Path | str, expected: list[tuple[int, int, int]]
) -> None:
    assert str(path) in message and detail["file"] == str(path)
    got = [(d["line"], d["offset"], d["kept"]) for d in detail["damaged"]]
    assert got == expected
    for line, offset, _ in expected:
        assert f"line {line} at byte offset {offset}" in message
    skipped = sum(1 for _, _, kept in expected if not kept)
    assert detail["skipped_lines"] == skipped
    if skipped:
        assert f"skipped {skipped} damaged line" in message


def assert_transcript_matches_journal(path: Path, events: list[Any]) -> None:
    records, bad = parse_lines(path)
    assert bad == []
    assert [r["seq"] for r in records] == [e.seq for e in events] == list(range(1, len(events) + 1))
    assert [r["type"] for r in records] == [e.type for e in events]
    assert not [r for r in records if r["payload"].get("text") == "third qu"]


# --------------------------------------------------------------------------- fixture, through the CLI


def test_fixture_import_keeps_second_turn_and_reports_lines_4_and_7(
    cli: Any, mock: MockProvider, cases: Path
) -> None:
    """Transcript-only path: ``acagent import`` of the fixture, then a turn against the mock."""
    fixture = cases / "F03-torn-transcript.jsonl"
    data = fixture.read_bytes()
    assert data == fixture_bytes() and len(data) == 1259
    import hashlib

    assert hashlib.sha256(data).hexdigest() == FIXTURE_SHA256
    imported = cli("import", str(fixture), check=True)
    warning = imported.stderr
    assert str(fixture) in warning
    assert "line 4 at byte offset 394" in warning and "line 7 at byte offset 1150" in warning
    assert "skipped 2 damaged lines" in warning

    listed = json.loads(cli("sessions", "list", "--all", "--json", check=True).stdout)
    (row,) = listed
    assert row["id"] == "ses_f03" and row["status"] == "done"
    assert row["last_message"] == "second answer"  # = the last message of the model context
    (warn,) = row["warnings"]
    assert warn["code"] == "transcript_damaged" and "line 7 at byte offset 1150" in warn["message"]

    mock.script(TextReply("third answer"))
    run = cli(
        "run",
        "--resume",
        "ses_f03",
        "--model",
        "anthropic:mock",
        "--base-url",
        mock.anthropic_base_url,
        "--json",
        "third question",
    )
    assert run.returncode == 0, run.stderr
    (request,) = mock.requests
    assert request.status == 200, request.error
    text = sent_text(request.json)
    for expected in [*QA, "third question"]:
        assert expected in text
    assert '"third qu"' not in text

    db = sqlite3.connect(cli.home / "acagent.db")
    payloads = [json.loads(payload_text(p)) for _, _, _, typ, p in stored_events(db) if typ == "error"]
    (error,) = payloads
    assert error["code"] == "transcript_damaged"
    assert_warning(error["message"], error["detail"], fixture, [(4, 394, 0), (7, 1150, 0)])
    # the clean copy parses line by line and the torn tail went to the sidecar
    (copy,) = (cli.home / "sessions").rglob("ses_f03.jsonl")
    records, bad = parse_lines(copy)
    assert bad == [] and [r["seq"] for r in records] == list(range(1, len(records) + 1))
    assert copy.with_suffix(".jsonl.corrupt").read_bytes().startswith(b'{"seq":6,')
    assert not [r for r in records if r["payload"].get("text") == "third qu"]
    listed = json.loads(cli("sessions", "list", "--all", "--json", check=True).stdout)
    assert listed[0]["last_message"] == "third answer"


def test_journal_backed_repair_through_run_continue(cli: Any, mock: MockProvider, workspace: Path) -> None:
    """Two real turns, the case's two defects injected, then ``acagent run --continue``."""
    base = ["--model", "openai:mock", "--base-url", mock.openai_base_url]
    mock.script(TextReply("first answer"), TextReply("second answer"), TextReply("third answer"))
    cli("run", *base, "first question", cwd=workspace, check=True)
    cli("run", *base, "--continue", "second question", cwd=workspace, check=True)
    (path,) = (cli.home / "sessions").rglob("*.jsonl")
    broken = damage(path.read_bytes(), "nul-line")
    path.write_bytes(broken.data)

    run = cli("run", *base, "--continue", "--json", "third question", cwd=workspace)
    assert run.returncode == 0, run.stderr
    events = [json.loads(line) for line in run.stdout.splitlines()]
    (error,) = [e for e in events if e["type"] == "error"]
    assert error["payload"]["code"] == "transcript_repaired"
    assert_warning(error["payload"]["message"], error["payload"]["detail"], path, broken.expected)
    assert events[-1]["type"] == "turn.completed"
    assert "rewritten from the journal" in error["payload"]["message"]

    third = mock.requests[-1]
    assert third.status == 200 and all(q in sent_text(third.json) for q in QA)
    listed = json.loads(cli("sessions", "list", "--json", cwd=workspace, check=True).stdout)
    sid, last_message = listed[0]["id"], listed[0]["last_message"]  # (the texts sit beside the row, m013)
    (warn,) = listed[0]["warnings"]
    db = sqlite3.connect(cli.home / "acagent.db")
    assert warn["code"] == "transcript_repaired" and warn["file"] == str(path)
    assert [(d["line"], d["offset"]) for d in warn["damaged"]] == [
        (line, off) for line, off, _ in broken.expected
    ]
    assert last_message == "third answer"
    assert path.with_suffix(".jsonl.corrupt").read_bytes() == broken.data
    rows = [(seq, typ) for _, seq, _, typ, _ in stored_events(db, sid)]
    records, bad = parse_lines(path)
    assert bad == [] and [(r["seq"], r["type"]) for r in records] == [tuple(r) for r in rows]


# --------------------------------------------------------------------------- variants, in process


@pytest.mark.parametrize("variant", VARIANTS)
async def test_journal_backed_repair_keeps_context_and_warns(
    tmp_path: Path, mock: MockProvider, workspace: Path, variant: str
) -> None:
    """Reopening through the registry rewrites the damaged file from the journal, with a warning."""
    settings, sid, path = await two_turn_session(
        tmp_path / "home", mock, workspace, big=variant == "checkpoint"
    )
    broken = damage(path.read_bytes(), variant)
    path.write_bytes(broken.data)
    mock.script(TextReply("third answer"))
    async with SessionRegistry.open(settings) as reg:
        runner = await reg.get_runner(sid)
        events = await journal_events(runner)
        (error,) = [e for e in events if e.type == "error"]
        assert error.payload["code"] == "transcript_repaired"
        assert_warning(error.payload["message"], error.payload["detail"], path, broken.expected)
        snap = await runner.snapshot()
        assert [w["code"] for w in snap["warnings"]] == ["transcript_repaired"]
        assert snap["status"] == "done"
        # the next append lands on a fresh line of the rewritten file
        await runner.run_turn("third question")
        events = await journal_events(runner)
    assert_transcript_matches_journal(path, events)
    assert path.with_suffix(".jsonl.corrupt").read_bytes() == broken.data
    request = mock.requests[-1]
    assert request.status == 200, request.error
    assert all(q in sent_text(request.json) for q in QA)


@pytest.mark.parametrize("variant", VARIANTS)
async def test_transcript_only_import_keeps_context_and_warns(
    tmp_path: Path, mock: MockProvider, workspace: Path, variant: str
) -> None:
    """The damaged transcript of a real session imported into an empty home, then a turn."""
    _, sid, path = await two_turn_session(tmp_path / "home", mock, workspace, big=variant == "checkpoint")
    broken = damage(path.read_bytes(), variant)
    damaged_file = tmp_path / "damaged.jsonl"
    damaged_file.write_bytes(broken.data)
    settings = settings_for(tmp_path / "home2", mock)
    journal = await SqliteJournal.open(settings.db_path)
    try:
        result = await import_transcript(journal, damaged_file, settings.sessions_dir)
    finally:
        await journal.aclose()
    assert result.session_id == sid and result.warning is not None
    mock.script(TextReply("third answer"))
    async with SessionRegistry.open(settings) as reg:
        runner = await reg.get_runner(sid)
        events = await journal_events(runner)
        (error,) = [e for e in events if e.type == "error"]
        assert error.payload["code"] == "transcript_damaged"
        assert_warning(error.payload["message"], error.payload["detail"], damaged_file, broken.expected)
        snap = await runner.snapshot()
        assert snap["last_message"].startswith("second answer")  # = the last message of the context
        await runner.run_turn("third question")
        events = await journal_events(runner)
    request = mock.requests[-1]
    assert request.status == 200, request.error
    assert all(q in sent_text(request.json) for q in QA)
    assert_transcript_matches_journal(result.path, events)


async def test_lagging_transcript_is_completed_without_a_warning(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    """Policy: a transcript cut at a record boundary (a crash before the view caught up) is not damage."""
    settings, sid, path = await two_turn_session(tmp_path / "home", mock, workspace, big=False)
    clean = path.read_bytes()
    lines = _lines(clean)
    cut = lines[len(lines) // 2][0]
    path.write_bytes(clean[:cut])
    async with SessionRegistry.open(settings) as reg:
        runner = await reg.get_runner(sid)
        events = await journal_events(runner)
    assert not [e for e in events if e.type == "error"]
    assert path.read_bytes() == clean
    assert not path.with_suffix(".jsonl.corrupt").exists()
    # a complete last record without its newline is kept as is, and the next append starts a line
    path.write_bytes(clean[:-1])
    mock.script(TextReply("third answer"))
    async with SessionRegistry.open(settings) as reg:
        runner = await reg.get_runner(sid)
        events = await journal_events(runner)
        assert not [e for e in events if e.type == "error"]
        await runner.run_turn("third question")
        events = await journal_events(runner)
    assert_transcript_matches_journal(path, events)


# --------------------------------------------------------------------------- the whole class


def _context_is_accepted(events: list[Any]) -> list[Message]:
    """Fold like ``context_events`` (last checkpoint + tail) and check both strict validators."""
    start = max((i for i, e in enumerate(events) if e.type == "checkpoint"), default=0)
    tail = [e for e in events[start:] if e.type in ("checkpoint", *CONTEXT_TYPES)]
    messages = build_context(tail)
    messages.append(Message(role="user", parts=[TextPart(text="next")]))
    if messages[-2:-1] and messages[-2].role == "user":
        messages[-2:] = [Message(role="user", parts=[*messages[-2].parts, *messages[-1].parts])]
    validate_openai({"model": "m", "messages": to_openai_messages("sys", messages)})
    validate_anthropic({"model": "m", "max_tokens": 5, "messages": to_anthropic_messages(messages)})
    return messages


def _same_records(kept: list[Any], original: list[dict[str, Any]]) -> bool:
    return [(e.type, e.payload) for e in kept] == [(r["type"], r["payload"]) for r in original]


async def test_tear_at_every_offset_of_the_last_record_then_import(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    """Whole class: every tear (and every tear NUL-padded back to length) imports cleanly.

    Every earlier record is kept, the context a strict provider gets is valid, and the import
    never raises; the torn record is reported unless the tear fell on its boundary.
    """
    _, _, path = await two_turn_session(tmp_path / "home", mock, workspace, big=False)
    clean = path.read_bytes()
    lines = _lines(clean)
    last_start = lines[-1][0]
    earlier = [json.loads(raw) for _, raw in lines[:-1]]
    journal = await SqliteJournal.open(tmp_path / "sweep.db")
    sessions = tmp_path / "sweep-sessions"
    file = tmp_path / "torn.jsonl"
    failures: list[str] = []
    try:
        for k in range(last_start, len(clean)):
            for pad in (False, True):
                data = clean[:k] + (b"\x00" * (len(clean) - k) if pad else b"")
                file.write_bytes(data)
                result = await import_transcript(journal, file, sessions)
                got = await journal.events(result.session_id, 0)
                kept = [e for e in got if e.type not in ("error", "turn.interrupted")]
                if not _same_records(kept[: len(earlier)], earlier):
                    failures.append(f"offset {k} pad={pad}: earlier records changed")
                # policy: a complete record lacking only its newline is kept silently
                torn = last_start < k < len(clean) - 1 or pad
                if torn != (result.warning is not None):
                    failures.append(f"offset {k} pad={pad}: warning {result.warning!r}")
                elif torn:
                    (error,) = [e for e in got if e.type == "error"]
                    (d,) = error.payload["detail"]["damaged"]
                    if (d["line"], d["offset"]) != (len(lines), last_start):
                        failures.append(f"offset {k} pad={pad}: damaged {d}")
                _context_is_accepted(got)
    finally:
        await journal.aclose()
    assert failures == []


async def test_tear_any_record_never_breaks_import_or_context(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    """Whole class, every record as the last one: a transcript cut anywhere (sampled offsets in
    each record) plans an import that keeps the earlier records and a valid context."""
    _, _, path = await two_turn_session(tmp_path / "home", mock, workspace, big=True)
    clean = path.read_bytes()
    lines = _lines(clean)
    records = [json.loads(raw) for _, raw in lines]
    checked = 0
    for i, (start, raw) in enumerate(lines):
        offsets = {start + j for j in range(min(12, len(raw)))} | set(range(start, start + len(raw), 11))
        offsets |= {start + len(raw) - 2, start + len(raw) - 1}
        for k in sorted(o for o in offsets if start <= o < start + len(raw)):
            read = parse_transcript(clean[:k])
            if i == 0 and k < start + len(raw):
                with pytest.raises(TranscriptError):
                    plan_import(read, "f.jsonl")
                continue
            plan = plan_import(read, "f.jsonl")
            kept = [e for e in plan.events if e.type not in ("error", "turn.interrupted", "tool.result")]
            originals = [r for r in records[:i] if r["type"] != "tool.result"]
            assert _same_records(kept[: len(originals)], originals), (i, k)
            assert (plan.warning is not None) == (k > start), (i, k)
            _context_is_accepted(plan.events)
            checked += 1
    assert checked > 500


def test_import_refuses_garbage_with_a_clean_error(tmp_path: Path) -> None:
    """Nothing recoverable, or no session.created first: a TranscriptError naming the file."""
    for data in (b"", b"\x00" * 100, b"not json\n{}\n", _rec(2, "user.message", {"text": "hi"})):
        read = parse_transcript(data)
        with pytest.raises(TranscriptError, match=r"f\.jsonl"):
            plan_import(read, "f.jsonl")


def test_reader_recovers_records_glued_after_damage() -> None:
    """A torn fragment or NULs with the next record glued on the same line: the record is kept."""
    one = _rec(1, "session.created", {"cwd": "/w"})
    two = _rec(2, "user.message", {"text": "a"})
    three = _rec(3, "user.message", {"text": "b"})
    data = one + two[:40] + b"\x00" * 7 + three + b"\x00" * 9
    read = parse_transcript(data)
    assert [e.seq for e in read.events] == [1, 3]
    assert [(s["line"], s["offset"], s["kept"]) for s in read.skipped] == [
        (2, len(one), 1),
        (3, len(data) - 9, 0),
    ]
    duplicate = parse_transcript(one + two + two)
    assert [e.seq for e in duplicate.events] == [1, 2]
    assert duplicate.skipped[0]["line"] == 3 and "does not follow" in duplicate.skipped[0]["reason"]


def test_writer_never_glues_a_record_onto_a_torn_fragment(tmp_path: Path) -> None:
    """The next append after a torn last line starts on a fresh line, in this or another writer."""
    from acagent.events import Event

    path = tmp_path / "s.jsonl"
    path.write_bytes(_rec(1, "session.created", {"cwd": "/w"}, sid="s") + TORN)
    writer = TranscriptWriter(path)
    try:
        assert writer.sync() == 1  # what the registry's writer task does before each write
        writer.write([Event(seq=2, ts="t", session_id="s", type="user.message", payload={"text": "x"})])
        path.write_bytes(path.read_bytes() + b'{"seq":3,"ts":"t"')  # another process tore a record
        writer.write([Event(seq=3, ts="t", session_id="s", type="user.message", payload={"text": "y"})])
    finally:
        writer.close()
    read = read_transcript(path)
    assert [e.seq for e in read.events] == [1, 2, 3]
    assert [s["line"] for s in read.skipped] == [2, 4]
    assert path.read_bytes().endswith(b"\n")
