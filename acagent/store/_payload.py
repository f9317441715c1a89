"""Event payloads as the SQLite journal stores them: raw deflate with a preset dictionary.

Bytes written per turn (benchmarks figure 3) are dominated by the journal: every payload is
written once into the WAL and once more when the WAL is checkpointed into the database, and the
JSONL transcript holds it a third time. Compressing the journal's copy is the only way to stay
near the transcript's size. Compression uses a preset dictionary of the envelope's keys and
values every event repeats (an event of a few hundred bytes shares no history to compress
against otherwise). Since m016 a commit of two or more events is one row, a *frame*, whose
payloads are compressed together (:mod:`acagent.store._frames`): an assistant reply's text is
in its delta, its message and ``turn.completed``. On the benchmark's non-repetitive events
(figure 3) frames store their payloads' JSON in 4.3× fewer bytes; one event alone was about
2.9× (JSONL envelope bytes over stored bytes).

Stored format, told apart by SQLite's storage class and the format byte:

- ``TEXT``: the payload's JSON text (rows written before ``m007``, and payloads that do not get
  smaller);
- ``BLOB`` :data:`FORMAT_DEFLATE_V1`: one format byte then raw deflate (``wbits=-15``: no zlib
  header or checksum; SQLite pages carry no checksum either, and a corrupt stream fails to
  inflate or to parse) of the payload's JSON with :data:`_DICT_V1`;
- ``BLOB`` :data:`FORMAT_FRAME_V1` (``event_log`` only, m016): one format byte then raw deflate
  with the same :data:`_DICT_V1` of the commit's payloads as one JSON array ``[p1,p2,…]`` in seq
  order (their types are the row's ``type`` letters, their seqs follow the row's key). Always a
  BLOB, even when not smaller: the format byte is what makes it a frame. :func:`decode_payload`
  refuses it (it is no single payload); :func:`inflate` reads both formats. Written only on the
  day frames came (never released): read, never written;
- ``BLOB`` :data:`FORMAT_FRAME_V2` (what frames are written as): one format byte, a CRC32
  (``zlib.crc32``, 4 bytes big-endian) over the row's ``type`` letters (ASCII) then the
  uncompressed JSON array, then the raw deflate of that array as in V1. Raw deflate has no
  checksum and SQLite pages none either: one flipped bit in a V1 frame often inflated to other
  valid JSON (a path in a user message changed, 67 of 300 random flips), and two swapped type
  letters retyped two events; :func:`frame_json` checks the CRC on every read. The byte is 7, at
  two flipped bits from 1 and 2: one flipped bit of it is an unknown format, never another format.

The dictionary is part of the file format: never edit it; a new one takes a new format byte.
It holds only what acagent itself writes (envelope keys, event and status names, acagent's own
tool names, provider prefixes), nothing of the benchmarks' workload.
(stdlib zlib on purpose: zstd would compress ~10 % better but adds a dependency for every user.)
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

from acagent.errors import JournalError

__all__ = [
    "FORMAT_DEFLATE_V1",
    "FORMAT_FRAME_V1",
    "FORMAT_FRAME_V2",
    "FRAME_BYTES",
    "damaged",
    "decode_payload",
    "encode_frame",
    "encode_payload",
    "frame_json",
    "inflate",
    "payload_text",
]

FORMAT_DEFLATE_V1 = 1
"""Format byte of a deflate-with-:data:`_DICT_V1` payload."""
FORMAT_FRAME_V1 = 2
"""Format byte of a frame: a commit's payloads as one JSON array, deflated with :data:`_DICT_V1`
(m016, :mod:`acagent.store._frames`); read only: frames are written as :data:`FORMAT_FRAME_V2`."""
FORMAT_FRAME_V2 = 7
"""Format byte of a frame with a CRC32 over its type letters and its JSON (module docstring)."""
FRAME_BYTES = (bytes((FORMAT_FRAME_V1,)), bytes((FORMAT_FRAME_V2,)))
"""The first byte of a stored frame, either format (``stored[:1] in FRAME_BYTES``)."""

# zlib finds the end of a dictionary cheapest to refer to: the most common strings come last.
_DICT_V1 = (
    b'"cwd":"/","title":null,"reason":"cancelled","error":{"code":"message":"detail":'
    b'"approval":"pending","decision":"allow","always","deny","note":null,"is_error":true,'
    b'"summary":"first_kept_seq":"upto_seq":"messages":[{"role":"user","parts":[{"kind":"text",'
    b'"tool_call","tool_result","arguments":{"path":"command":"content":"output":"exit_code":0,'
    b'"idempotent":true,"read_only":true,"name":"shell","read_file","write_file","edit_file",'
    b'"list_dir","glob","ask_user",'
    b'"cached_input_tokens":0,"reasoning_tokens":0,"cost_usd":null,"finish_reason":"stop",'
    b'"input_tokens":"output_tokens":"total_tokens":"session_input_tokens":'
    b'"session_output_tokens":"model":"anthropic:claude-","openai:gpt-","context_tokens":'
    b'"status":"done","previous":"running","waiting_tool","waiting_user","pending","failed",'
    b'"status":"ok","interrupted":false,"tool_call_id":"call_","arguments":{"text":"'
    b'"message":{"role":"assistant","parts":[{"kind":"text","text":"'
    b'"turn_id":"turn_","step_id":"ses_","request_id":"ses_","attempt":1,'
    b'{"turn_id":"turn_'
)


_DEFLATE_BYTE = bytes((FORMAT_DEFLATE_V1,))
_FRAME_V1_BYTE, _FRAME_V2_BYTE = FRAME_BYTES

_SMALL = 1024
"""Payloads up to this many bytes (most events) are compressed by a copy of :data:`_SMALL_Z`."""
_SMALL_Z = zlib.compressobj(6, zlib.DEFLATED, -12, 4, zdict=_DICT_V1)
"""A compressor primed with the dictionary, with a 4 KiB window and a small hash (``memLevel``
4): copying it costs less than setting up a 32 KiB-window compressor and its dictionary, which
was most of a small commit's Python time (benchmarks figure 3). Same stream format (raw deflate
with :data:`_DICT_V1`; the 32 KiB-window decoder reads it), and for payloads this small the
same bytes as the large compressor in practice (``tests/store/test_payload_format.py``)."""


def _deflate(head: bytes, raw: bytes) -> bytes:
    z = _SMALL_Z.copy() if len(raw) <= _SMALL else zlib.compressobj(6, zlib.DEFLATED, -15, zdict=_DICT_V1)
    return head + z.compress(raw) + z.flush()


def encode_payload(text: str) -> str | bytes:
    """What to store for a payload's JSON ``text``: the compressed BLOB, or ``text`` if not smaller."""
    raw = text.encode()
    packed = _deflate(_DEFLATE_BYTE, raw)
    return packed if len(packed) < len(raw) else text


def encode_frame(texts: Sequence[str], codes: str) -> bytes:
    """The stored frame of a commit's payload JSON ``texts`` (in seq order) whose type letters are
    ``codes``: :data:`FORMAT_FRAME_V2`, the CRC32 of ``codes`` then ``[text1,text2,…]``, then the
    raw deflate of that array with :data:`_DICT_V1` (always a BLOB: the format byte says "frame")."""
    raw = b"[" + ",".join(texts).encode() + b"]"
    crc = zlib.crc32(raw, zlib.crc32(codes.encode()))
    return _deflate(_FRAME_V2_BYTE + crc.to_bytes(4, "big"), raw)


def frame_json(stored: bytes, codes: str, where: str) -> bytes:
    """The JSON array of a stored frame (``stored[:1] in FRAME_BYTES``) whose row's ``type`` is
    ``codes``; a V2 frame's CRC is checked against ``codes`` and the inflated JSON.

    Raises:
        JournalError: it does not inflate, or the CRC does not match (names ``where``).
    """
    if stored[:1] == _FRAME_V1_BYTE:
        return inflate(stored, where)
    if len(stored) < 6:
        raise damaged(f"{where}: stored frame is corrupt (truncated)")
    raw = inflate(stored, where, 5)
    if zlib.crc32(raw, zlib.crc32(codes.encode())) != int.from_bytes(stored[1:5], "big"):
        raise damaged(
            f"{where}: stored frame is corrupt (its checksum does not match its types and payloads)"
        )
    return raw


def damaged(message: str) -> JournalError:
    """The :class:`JournalError` of damaged stored data (``detail.reason`` ``"corrupt"``): not
    retryable, so the daemon answers 500, not 503 (F148, ``acagent._error_helpers.is_damaged``)."""
    return JournalError(message, detail={"reason": "corrupt"})


def inflate(stored: bytes, where: str, start: int = 1) -> bytes:
    """The inflated body of a stored BLOB (the deflate stream from ``start``: after the format
    byte, and after a V2 frame's CRC).

    Raises:
        JournalError: the stream does not inflate, is truncated or has bytes after its end
            (names ``where``).
    """
    try:
        z = zlib.decompressobj(-15, zdict=_DICT_V1)
        out = z.decompress(stored[start:]) + z.flush()
    except zlib.error as exc:
        raise damaged(f"{where}: stored payload is corrupt ({exc})") from exc
    if not z.eof:
        raise damaged(f"{where}: stored payload is corrupt (truncated)")
    if z.unused_data:  # bytes after the end of the stream: not something this format writes
        raise damaged(f"{where}: stored payload is corrupt ({len(z.unused_data)} bytes after its end)")
    return out


def decode_payload(stored: str | bytes, where: str) -> bytes | str:
    """The JSON of a stored value (:func:`encode_payload`'s output, or a pre-m007 row).

    Args:
        where: what the value is, for the error (``"session 'ses_…' event 12"``).

    Raises:
        JournalError: an unknown format byte or a stream that does not inflate (names ``where``;
            the rest of the session stays readable).
    """
    if isinstance(stored, str):
        return stored
    if not isinstance(stored, bytes):  # a damaged row of another storage class (INTEGER, REAL)
        raise damaged(f"{where}: stored payload is a {type(stored).__name__}, not JSON text or a blob")
    if not stored or stored[0] != FORMAT_DEFLATE_V1:
        fmt = stored[0] if stored else None
        raise JournalError(
            f"{where}: stored payload has unknown format {fmt!r} (written by a newer acagent?)"
        )
    return inflate(stored, where)


def payload_text(stored: str | bytes) -> str:
    """The JSON text of a stored payload, for code that reads the file with plain sqlite3
    (the ``event`` view's ``payload``, ``tool_call.arguments``): ``json.loads(payload_text(p))``.

    Raises:
        JournalError: the stored value does not decode.
    """
    out = decode_payload(stored, "a stored payload")
    return out if isinstance(out, str) else out.decode()
