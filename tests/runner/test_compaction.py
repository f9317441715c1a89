"""Compaction through real turns against the strict mock with a small context window.

The mock validates every request as strictly as the real endpoints (tool call ↔ result pairing,
role alternation); the model's window is 4,000 tokens by config, so a long scripted session
must compact again and again to keep every request inside it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from acagent.runner import SessionRegistry
from acagent.runner._cut import SUMMARY_MARK, SUMMARY_SYSTEM
from acagent.runner._window import bytes_to_tokens
from acagent.settings import load_settings
from tests.mockprovider import MockProvider, openai_text, openai_tool_calls

pytestmark = pytest.mark.anyio

WINDOW = 4000
MODELS = {"openai:mock": {"context_window": WINDOW, "max_output_tokens": 400}}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if isinstance(b, dict))


def responder(body: dict[str, Any]) -> Any:
    """A summary for summary requests; else a tool call per user turn, then an answer."""
    msgs = body["messages"]
    seen = len(json.dumps(body)) // 4  # what a real tokenizer would count, roughly
    if msgs and msgs[0]["role"] == "system" and msgs[0]["content"] == SUMMARY_SYSTEM:
        n = _text(msgs[-1]["content"]).count("User:")
        return openai_text(
            f"Earlier the user asked for {n} numbered turns; each ran echo and was answered.",
            usage=(seen, 30),
        )
    last = msgs[-1]
    if last["role"] == "tool":
        return openai_text("done " + _text(last["content"]).strip()[:12], usage=(seen, 5))
    n = _text(last["content"]).split()[-1]
    return openai_tool_calls([(f"call_{n}", "shell", {"command": f"echo turn-{n}-" + "x" * 200})])


def _settings(home: Path, mock: MockProvider, **over: Any) -> Any:
    return load_settings(
        {
            "home": str(home),
            "base_url": mock.openai_base_url,
            "model": "openai:mock",
            "auto_approve": True,
            "models": MODELS,
            **over,
        },
        env={},
    )


async def test_long_session_stays_inside_the_window_and_every_request_is_valid(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    mock.default = responder
    turns = 40
    async with SessionRegistry.open(_settings(tmp_path / "home", mock)) as reg:
        row = await reg.create_session(workspace, model="openai:mock")
        runner = await reg.get_runner(row.id)
        for i in range(turns):
            await runner.run_turn(f"please run turn {i}")
            assert (await runner.snapshot())["status"] == "done", i
        events = await runner.journal.events(row.id, 0)
    requests = mock.requests
    assert all(r.status == 200 for r in requests), [r.error for r in requests if r.status != 200][:3]
    for r in requests:
        assert bytes_to_tokens(len(r.body)) <= WINDOW, len(r.body)
    summaries = [r for r in requests if r.json["messages"][0]["content"] == SUMMARY_SYSTEM]
    compactions = [e.payload for e in events if e.type == "context.compacted"]
    assert len(compactions) == len(summaries) >= 2
    for c in compactions:
        assert c["tokens_after"] < c["tokens_before"] and c["model"] == "openai:mock"
        kept = next(e for e in events if e.seq == c["first_kept_seq"])
        assert kept.type == "user.message"  # the cut falls on a turn start
    # The full history stays in the journal: every turn's user message and answer.
    assert sum(e.type == "user.message" for e in events) == turns
    last = requests[-1].json["messages"]
    assert _text(last[-1]["content"]).startswith("turn-39-")  # the final tool result reached the model
    assert any(SUMMARY_MARK in _text(m.get("content")) for m in last if m["role"] == "user")


async def test_summary_that_does_not_shrink_fails_the_turn_clearly(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    def verbose(body: dict[str, Any]) -> Any:
        if body["messages"][0]["content"] == SUMMARY_SYSTEM:
            return openai_text("y" * 20_000)
        return responder(body)

    mock.default = verbose
    async with SessionRegistry.open(_settings(tmp_path / "home", mock)) as reg:
        row = await reg.create_session(workspace, model="openai:mock")
        runner = await reg.get_runner(row.id)
        status = "done"
        for i in range(30):
            await runner.run_turn(f"please run turn {i}")
            status = (await runner.snapshot())["status"]
            if status == "failed":
                break
        events = await runner.journal.events(row.id, 0)
    assert status == "failed"
    failed = [e.payload for e in events if e.type == "turn.failed"][-1]
    assert failed["type"] == "context_too_large" and "does not shrink" in failed["message"]
    assert not any(e.type == "context.compacted" for e in events)
    summaries = [r for r in mock.requests if r.json["messages"][0]["content"] == SUMMARY_SYSTEM]
    assert len(summaries) == 1, [
        (e.seq, e.type, str(e.payload)[:150])
        for e in events
        if e.type in ("llm.retry", "step.started", "usage", "turn.failed", "error", "turn.completed")
    ][-14:]  # no loop


async def test_provider_overflow_compacts_once_then_retries(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    from tests.mockprovider import Script

    overflow = Script(
        status=400,
        body={
            "error": {
                "message": "This model's maximum context length is 4000 tokens",
                "type": "invalid_request_error",
                "code": "context_length_exceeded",
            }
        },
    )
    mock.default = responder
    big = _settings(tmp_path / "home", mock, models={"openai:mock": {"context_window": 100_000}})
    async with SessionRegistry.open(big) as reg:
        row = await reg.create_session(workspace, model="openai:mock")
        runner = await reg.get_runner(row.id)
        for i in range(3):
            await runner.run_turn(f"please run turn {i}")
        mock.script(overflow)
        await runner.run_turn("please run turn 3")
        events = await runner.journal.events(row.id, 0)
        snap = await runner.snapshot()
    assert snap["status"] == "done"
    compactions = [e.payload for e in events if e.type == "context.compacted"]
    assert len(compactions) == 1 and compactions[0]["reason"] == "overflow"
    assert not any(e.type == "llm.retry" and e.payload["reason"] == "invalid_request_error" for e in events)


@pytest.mark.parametrize("point", ["compact_before_call", "compact_mid_summary", "compact_before_commit"])
def test_sigkill_during_compaction_resumes_with_exactly_one_compaction(
    point: str, tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    mock.default = responder
    home = tmp_path / "home"
    code = (
        "import sys, anyio\n"
        "from acagent.settings import load_settings\n"
        "from acagent.runner import SessionRegistry\n"
        "async def main():\n"
        f"    s = load_settings({{'home': {str(home)!r}, 'base_url': {mock.openai_base_url!r}, 'model': 'openai:mock',"
        f" 'auto_approve': True, 'models': {MODELS!r}, 'crash_at': sys.argv[2] or None}}, env={{}})\n"
        "    async with SessionRegistry.open(s) as reg:\n"
        "        sid = sys.argv[1]\n"
        "        if sid == 'new':\n"
        f"            sid = (await reg.create_session({str(workspace)!r}, model='openai:mock')).id\n"
        "            print(sid, flush=True)\n"
        "        runner = await reg.get_runner(sid)\n"
        "        for i in range(int(sys.argv[3])):\n"
        "            await runner.run_turn(f'please run turn {i}')\n"
        "        if sys.argv[3] == '0':\n"
        "            await runner.run_turn(None)\n"
        "anyio.run(main)\n"
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    first = subprocess.run(
        [sys.executable, "-c", code, "new", point, "30"], capture_output=True, text=True, timeout=120, env=env
    )
    assert first.returncode == -9, first.stderr[-2000:]  # killed at the crash point
    sid = first.stdout.split()[0]
    second = subprocess.run(
        [sys.executable, "-c", code, sid, "", "0"], capture_output=True, text=True, timeout=120, env=env
    )
    assert second.returncode == 0, second.stderr[-2000:]
    import sqlite3

    db = sqlite3.connect(home / "acagent.db")
    types = [r[0] for r in db.execute("SELECT type FROM event WHERE session_id = ? ORDER BY seq", (sid,))]
    assert types.count("context.compacted") == 1
    assert types[-1] == "turn.completed"
    steps = db.execute(
        "SELECT step_id, attempt, status FROM step WHERE session_id = ? AND step_id LIKE '%|compact|%'",
        (sid,),
    ).fetchall()
    summaries = [r for r in mock.requests if r.json["messages"][0]["content"] == SUMMARY_SYSTEM]
    # Every summary call the mock saw is a recorded attempt: none was paid silently.
    assert len(summaries) == len(steps) - (1 if point == "compact_before_call" else 0)
    assert [s[2] for s in steps].count("done") == 1
    retries = [
        json.loads(r[0])
        for r in db.execute("SELECT payload FROM event WHERE session_id = ? AND type = 'llm.retry'", (sid,))
    ]
    assert any(r["reason"] == "process_died" for r in retries)


async def test_model_of_unknown_window_is_never_compacted_on_a_guess(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    """A custom model without a configured window: a big context is sent as is (no paid summary)."""
    mock.default = lambda body: openai_text("ok")
    s = load_settings(
        {"home": str(tmp_path / "home"), "base_url": mock.openai_base_url, "model": "openai:mock"}, env={}
    )
    async with SessionRegistry.open(s) as reg:
        row = await reg.create_session(workspace, model="openai:mock")
        runner = await reg.get_runner(row.id)
        await runner.run_turn("x" * 150_000)  # ~50,000 tokens by the estimate: over the assumed window
        await runner.run_turn("and again")
        events = await runner.journal.events(row.id, 0)
    assert not any(r.json["messages"][0]["content"] == SUMMARY_SYSTEM for r in mock.requests)
    assert not any(e.type == "context.compacted" for e in events)
    assert [e.type for e in events].count("turn.completed") == 2
