"""F12: a UTF-8 character, JSON escape or SSE line split across network reads — end to end.

Case ``shared/cases/F12-split-utf8.md``. Every split point of both fixtures (S5) and S1–S4 are
swept at the provider level in ``tests/providers/test_openai_stream.py::TestSplitUtf8`` and
``tests/providers/test_anthropic_stream.py::TestSplitUtf8``. Here S1–S4 and a sample of S5 (every
split point within 3 bytes of a multi-byte character or a JSON escape, and a stride through the
rest) run whole turns: the strict mock serves the chunking, the runner streams
``assistant.delta`` events, runs ``read_file`` on ``résumé.txt``, journals, writes the transcript
and sends the history back. Names as in the case (``read_file`` ``path``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from acagent.runner import SessionRegistry
from tests.cases.conftest import all_text, settings_for
from tests.mockprovider import MockProvider, Script, TextReply
from tests.providers.helpers import f12_anthropic_stream, f12_chunkings, f12_openai_stream

pytestmark = pytest.mark.anyio

STREAMS = {"openai": f12_openai_stream, "anthropic": f12_anthropic_stream}
STRIDE = {"openai": 23, "anthropic": 67}


def replayed(provider: str, body: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """``(assistant text, call id, call arguments)`` of the history sent back to the model."""
    if provider == "openai":
        assistant = next(m for m in body["messages"] if m.get("tool_calls"))
        call = assistant["tool_calls"][0]
        return assistant["content"], call["id"], json.loads(call["function"]["arguments"])
    text, use = body["messages"][1]["content"]
    return text["text"], use["id"], use["input"]


def sample(stream: bytes, provider: str) -> dict[str, list[bytes]]:
    """S1–S4 and the sampled S5 split points."""
    chunkings = f12_chunkings(stream)
    hot = {stream.index("é".encode()), stream.index("😀".encode())}
    hot |= {i for i in range(len(stream)) if stream[i : i + 3] == b"\\u0"}
    keep = {i for h in hot for i in range(h - 3, h + 6)} | set(range(1, len(stream), STRIDE[provider]))
    return {
        name: chunks
        for name, chunks in chunkings.items()
        if not name.startswith("S5-") or int(name.split("-")[1]) in keep
    }


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_text_and_arguments_survive_every_sampled_split(
    tmp_path: Path, mock: MockProvider, workspace: Path, provider: str
) -> None:
    """Text ``café 😀``, call ``read_file {"path": "résumé.txt"}`` with its id, no U+FFFD anywhere."""
    (workspace / "résumé.txt").write_text("RÉSUMÉ-CONTENT\n")
    stream = STREAMS[provider]()
    chunkings = sample(stream, provider)
    assert {"S1", "S2", "S3", "S4"} <= set(chunkings) and len(chunkings) > 30
    call_id = "call_U" if provider == "openai" else "toolu_U"
    settings = settings_for(tmp_path / "home", mock, provider, auto_approve=True)
    failures: list[str] = []
    async with SessionRegistry.open(settings) as reg:
        for name, chunks in chunkings.items():
            mock.script(Script(chunks=chunks, sleeps=0.0005 if name == "S4" else 0.001), TextReply("ok"))
            before = len(mock.requests)
            row = await reg.create_session(workspace, model=settings.model)
            runner = await reg.get_runner(row.id)
            await runner.run_turn("read it")
            events = await reg.journal.events(row.id, 0)
            first_step = [e for e in events if e.type == "assistant.delta" and e.payload["text"] != "ok"]
            messages = [e.payload["text"] for e in events if e.type == "assistant.message"]
            calls = [
                (e.payload["tool_call_id"], e.payload["arguments"]) for e in events if e.type == "tool.call"
            ]
            results = [e.payload for e in events if e.type == "tool.result"]
            requests = mock.requests[before:]
            problems = []
            if "".join(e.payload["text"] for e in first_step) != "café 😀":
                problems.append("deltas")
            if messages != ["café 😀", "ok"]:
                problems.append(f"messages {messages!r}")
            if calls != [(call_id, {"path": "résumé.txt"})]:
                problems.append(f"calls {calls!r}")
            if [(r["status"], "RÉSUMÉ-CONTENT" in r["content"]) for r in results] != [("ok", True)]:
                problems.append(f"results {results!r}")
            if [r.status for r in requests] != [200, 200]:
                problems.append(f"requests {[r.error for r in requests]}")
            elif replayed(provider, requests[1].json) != ("café 😀", call_id, {"path": "résumé.txt"}):
                problems.append(f"replay {replayed(provider, requests[1].json)!r}")
            dumped = all_text(e.to_dict() for e in events) + all_text(r.json for r in requests)
            dumped += reg.transcript_path(row).read_text()
            if "\ufffd" in dumped:
                problems.append("U+FFFD")
            if problems:
                failures.append(f"{name}: {', '.join(problems)}")
    assert failures == []
