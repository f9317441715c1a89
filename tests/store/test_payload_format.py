"""The stored payload format is a file format: blobs written today decode the same forever.

A raw-deflate payload inflated with another preset dictionary than the one it was written with
decodes to wrong bytes without an error (no checksum), so an edit of ``_DICT_V1`` silently
garbles every journal written before it. These blobs were written by the format-1 encoder; an
edit of its dictionary fails here (a new dictionary takes a new format byte).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson
import pytest

from acagent.errors import JournalError
from acagent.store import SqliteJournal
from acagent.store._payload import decode_payload, encode_payload

GOLDEN_V1 = [
    (
        '{"turn_id":"turn_1","tool_call_id":"call_1","name":"shell","arguments":'
        '{"command":"echo appended >> log.txt"}}',
        "01c3103054c2ee2390385af244f1212223a42667e42b00b33c302c535314ecec1472f2d3f54a803ea8ad0500",
    ),
    (
        '{"status":"waiting_tool","previous":"running","turn_id":"turn_1"}',
        "01ab4678102d68b0061f9a6e43a55a00",
    ),
    (
        '{"turn_id":"turn_1","text":"Appending the line now.","message":{"role":"assistant","parts":'
        '[{"kind":"text","text":"Appending the line now."}]},"model":"openai:gpt-4o-mini"}',
        "01c3103044d8e758000d0f85928c54859cccbc5485bcfc723da0028abc81cbd8dad85a1d78fc23c5b549be6e2e30252ad50200",
    ),
]


@pytest.mark.parametrize(
    ("text", "blob"), GOLDEN_V1, ids=["tool.call", "session.status", "assistant.message"]
)
def test_format_1_blobs_decode_to_their_json_forever(text: str, blob: str) -> None:
    assert decode_payload(bytes.fromhex(blob), "golden") == text.encode()
    assert decode_payload(encode_payload(text), "now") == text.encode()


def test_small_payloads_take_the_primed_compressor_and_stay_the_same_stream() -> None:
    """Payloads up to 1 KiB are compressed by a copy of one primed small-window compressor (a
    Python-time saving per commit): every one decodes with the format-1 decoder, and on real
    prose they are as small as the full-window compressor's (nearly always the same bytes)."""
    import zlib
    from pydoc_data.topics import topics

    from acagent.store._payload import _DICT_V1, _SMALL

    prose = "".join(topics.values())
    sizes = [0, 0]
    for i in range(500):
        n = 5 + (i * 37) % 900
        piece = prose[i * 1013 : i * 1013 + n]
        text = orjson.dumps({"turn_id": f"turn_{i}", "text": piece, "n": i}).decode()[:_SMALL]
        z = zlib.compressobj(6, zlib.DEFLATED, -15, zdict=_DICT_V1)
        full = b"\x01" + z.compress(text.encode()) + z.flush()
        stored = encode_payload(text)
        assert decode_payload(stored, "small") in (text, text.encode())
        sizes[0] += min(len(full), len(text.encode()))
        sizes[1] += len(stored)
    assert sizes[1] <= sizes[0] * 1.01, sizes


@pytest.mark.anyio
async def test_a_stored_payload_that_is_json_but_not_an_object_is_one_clear_error(tmp_path: Path) -> None:
    """Before: a payload that parses to a list, a number or a string (a damaged TEXT row) raised a
    pydantic ValidationError or a TypeError: a traceback in ``sessions show``, and ``export``
    named no seq."""
    path = tmp_path / "a.db"
    j = await SqliteJournal.open(path)
    try:
        row, _ = await j.create_session(cwd="/w", model=None, title=None)
        db = sqlite3.connect(path)
        key = db.execute("SELECT key FROM event_log WHERE key & 4294967295 = 1").fetchone()[0]
        for damaged in (
            "[1,2]",
            "42",
            '"text"',
            "null",
            encode_payload('"a longer string that compresses' + " x" * 40 + '"'),
        ):
            with db:
                db.execute("UPDATE event_log SET payload = ? WHERE key = ?", (damaged, key))
            with pytest.raises(JournalError) as err:
                await j.events(row.id)
            assert err.value.message.startswith(
                f"session {row.id!r} event 1: stored payload is not a JSON object"
            )
        for wrong_class in (42, 4.5):  # a damaged row of another SQLite storage class
            with db:
                db.execute("UPDATE event_log SET payload = ? WHERE key = ?", (wrong_class, key))
            with pytest.raises(JournalError) as err:
                await j.events(row.id)
            assert err.value.message.startswith(f"session {row.id!r} event 1: stored payload is a ")
        db.close()
    finally:
        await j.aclose()


def test_bytes_after_the_end_of_a_compressed_payload_are_corruption() -> None:
    """Before: trailing bytes after the deflate stream were ignored silently."""
    blob = encode_payload('{"text":"' + "a fairly long payload that compresses well " * 4 + '"}')
    assert isinstance(blob, bytes)
    with pytest.raises(JournalError, match=r"corrupt \(3 bytes after its end\)"):
        decode_payload(blob + b"xyz", "session 's' event 7")
