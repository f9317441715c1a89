"""Compaction through real turns against the strict mock with a small context window.

The mock validates every request as strictly as the real endpoints (tool call ↔ result pairing,
role alternation); the model's window is 4,000 tokens by config, so a long scripted session
must compact again and again to keep every request inside it.
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from acagent.models._windows import UNKNOWN_WINDOW
from acagent.runner import SessionRegistry
from acagent.runner._cut import SUMMARY_MARK, SUMMARY_SYSTEM
from acagent.runner._window import bytes_to_tokens
from acagent.settings import load_settings
from acagent.store._frames import stored_events
from acagent.store._payload import payload_text
from tests.mockprovider import MockProvider, Script, openai_text, openai_tool_calls

pytestmark = pytest.mark.anyio

WINDOW = 4000
TURNS = 200
MODELS = {"openai:mock": {"context_window": WINDOW, "max_output_tokens": 400}}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if isinstance(b, dict))


def _overflow(tokens: int) -> Script:
    return Script(
        status=400,
        body={
            "error": {
                "message": f"This model's maximum context length is {WINDOW} tokens. However, your messages "
                f"resulted in {tokens} tokens.",
                "type": "invalid_request_error",
                "code": "context_length_exceeded",
            }
        },
    )


def responder(body: dict[str, Any]) -> Any:
    """Like a model with a 4,000-token window: refuses longer requests; summarises summary requests
    (keeping which turn came first); else tool calls per user turn, then an answer."""
    msgs = body["messages"]
    seen = len(json.dumps(body)) // 4  # what a real tokenizer would count, roughly
    if seen > WINDOW:
        return _overflow(seen)
    if msgs and msgs[0]["role"] == "system" and msgs[0]["content"] == SUMMARY_SYSTEM:
        text = _text(msgs[-1]["content"])
        turns = [int(n) for n in re.findall(r"(?:run turn|first turn was turn) (\d+)", text)]
        return openai_text(
            f"The first turn was turn {min(turns, default=-1)}. Later turns each read a file and were answered.",
            usage=(seen, 30),
        )
    last = msgs[-1]
    if last["role"] == "tool":
        return openai_text("done " + _text(last["content"]).split("\t")[-1][:12], usage=(seen, 5))
    asked = _text(last["content"])
    if asked.startswith("which turn came first"):
        everything = " ".join(_text(m.get("content")) for m in msgs)
        first = re.search(r"The first turn was turn (\d+)", everything)
        return openai_text(f"the first turn was turn {first.group(1) if first else '?'}", usage=(seen, 8))
    n = int(asked.split()[-1])
    calls = [(f"call_{n}", "read_file", {"path": f"notes/turn-{n}.txt"})]
    if n % 10 == 0:  # two calls in one step: both results come back, in order
        calls.append((f"call_{n}b", "list_dir", {"path": "notes/sub"}))
    if n % 40 == 0:
        calls.append((f"call_{n}c", "shell", {"command": f"echo shell-{n}"}))
    return openai_tool_calls(calls)


def notes(workspace: Path, turns: int) -> None:
    """The files the responder's ``read_file`` and ``list_dir`` calls read."""
    (workspace / "notes" / "sub").mkdir(parents=True)
    for n in range(turns):
        (workspace / "notes" / f"turn-{n}.txt").write_text(f"turn-{n}-" + "x" * 200 + "\n")


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


async def test_200_turn_session_stays_inside_the_window_and_every_request_is_valid(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    """Issue 13's check: 200 turns with tool calls on the strict mock with a 4,000-token window."""
    notes(workspace, TURNS)
    mock.default = responder
    async with SessionRegistry.open(_settings(tmp_path / "home", mock)) as reg:
        row = await reg.create_session(workspace, model="openai:mock")
        runner = await reg.get_runner(row.id)
        for i in range(TURNS):
            await runner.run_turn(f"please run turn {i}")
            assert (await runner.snapshot())["status"] == "done", i
        await runner.run_turn("which turn came first?")
        events = await runner.journal.events(row.id, 0)
    requests = mock.requests
    assert all(r.status == 200 for r in requests), [r.error for r in requests if r.status != 200][:3]
    for r in requests:
        assert bytes_to_tokens(len(r.body)) <= WINDOW, len(r.body)  # acagent's own, stricter count
    summaries = [r for r in requests if r.json["messages"][0]["content"] == SUMMARY_SYSTEM]
    compactions = [e.payload for e in events if e.type == "context.compacted"]
    assert len(compactions) == len(summaries) >= 20  # the summary requests are in the mock's log
    for c in compactions:
        assert c["tokens_after"] < c["tokens_before"] and c["model"] == "openai:mock"
        kept = next(e for e in events if e.seq == c["first_kept_seq"])
        assert kept.type == "user.message"  # the cut falls on a turn start
    # The full history stays in the journal: every turn's user message, tool result and answer.
    assert sum(e.type == "user.message" for e in events) == TURNS + 1
    assert sum(e.type == "tool.result" for e in events) == TURNS + TURNS // 10 + TURNS // 40
    answers = [e.payload["text"] for e in events if e.type == "turn.completed"]
    assert answers[-2] == "done turn-199-xxx"  # the last tool result reached the model
    # The fact of the first turn went through every summary: the final answer is right.
    assert answers[-1] == "the first turn was turn 0"
    last = requests[-1].json["messages"]
    assert any(SUMMARY_MARK in _text(m.get("content")) for m in last if m["role"] == "user")


def anthropic_responder(body: dict[str, Any]) -> Any:
    """:func:`responder` in the Messages API's wire format; usage as the mock's helpers report it
    (``input_tokens: 1``), which must not become the estimate's calibration."""
    from tests.mockprovider import anthropic_text, anthropic_tool_calls

    seen = len(json.dumps(body)) // 4
    if seen > WINDOW:
        return Script(
            status=400,
            body={
                "type": "error",
                "error": {"type": "invalid_request_error", "message": "prompt is too long"},
            },
        )
    system = body.get("system")
    system = system if isinstance(system, str) else _text(system)
    msgs = body["messages"]
    if system == SUMMARY_SYSTEM:
        turns = [
            int(n) for n in re.findall(r"(?:run turn|first turn was turn) (\d+)", _text(msgs[-1]["content"]))
        ]
        return anthropic_text(f"The first turn was turn {min(turns, default=-1)}. Each turn read a file.")
    blocks = msgs[-1]["content"]
    results = (
        [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
        if isinstance(blocks, list)
        else []
    )
    if results:
        return anthropic_text("done " + _text(results[-1]["content"]).split("\t")[-1][:12])
    asked = _text(blocks)
    if asked.startswith("which turn came first"):
        first = re.search(r"The first turn was turn (\d+)", json.dumps(msgs))
        return anthropic_text(f"the first turn was turn {first.group(1) if first else '?'}")
    n = int(asked.split()[-1])
    calls = [(f"toolu_{n}", "read_file", {"path": f"notes/turn-{n}.txt"})]
    if n % 10 == 0:
        calls.append((f"toolu_{n}b", "list_dir", {"path": "notes/sub"}))
    return anthropic_tool_calls("Reading it.", calls)


async def test_long_anthropic_session_keeps_alternation_and_the_window(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    """The Messages API refuses consecutive same-role messages: the compacted context (summary
    merged into the first kept user message) alternates; a placeholder usage count
    (``input_tokens: 1``) does not let requests grow past the window."""
    turns = 60
    notes(workspace, turns)
    mock.default = anthropic_responder
    s = _settings(
        tmp_path / "home", mock, model="anthropic:mock", models={"anthropic:mock": MODELS["openai:mock"]}
    )
    async with SessionRegistry.open(s) as reg:
        row = await reg.create_session(workspace, model="anthropic:mock")
        runner = await reg.get_runner(row.id)
        for i in range(turns):
            await runner.run_turn(f"please run turn {i}")
        await runner.run_turn("which turn came first?")
        events = await runner.journal.events(row.id, 0)
    requests = mock.requests
    assert all(r.api == "anthropic" and r.status == 200 for r in requests), [
        r.error for r in requests if r.status != 200
    ][:3]
    assert all(bytes_to_tokens(len(r.body)) <= WINDOW for r in requests)
    assert [e.type for e in events].count("context.compacted") >= 5
    answers = [e.payload["text"] for e in events if e.type == "turn.completed"]
    assert answers[-2] == "done turn-59-xxxx" and answers[-1] == "the first turn was turn 0"


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
    assert "4,000-token window of openai:mock" in failed["message"]
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
    overflow = _overflow(5000)
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


async def test_a_second_overflow_after_compaction_fails_the_turn_once(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    """The provider refuses the request again after the one compaction: the turn fails as
    context_overflow, with no third request and no blind retry."""
    refusing = {"on": False}

    def model(body: dict[str, Any]) -> Any:
        if refusing["on"] and body["messages"][0]["content"] != SUMMARY_SYSTEM:
            return _overflow(5000)
        return responder(body)

    mock.default = model
    notes(workspace, 10)
    big = _settings(tmp_path / "home", mock, models={"openai:mock": {"context_window": 100_000}})
    async with SessionRegistry.open(big) as reg:
        row = await reg.create_session(workspace, model="openai:mock")
        runner = await reg.get_runner(row.id)
        for i in range(3):
            await runner.run_turn(f"please run turn {i}")
        before, refusing["on"] = len(mock.requests), True
        await runner.run_turn("please run turn 3")
        events = await runner.journal.events(row.id, 0)
        snap = await runner.snapshot()
    sent = mock.requests[before:]
    assert [r.json["messages"][0]["content"] == SUMMARY_SYSTEM for r in sent] == [False, True, False]
    assert snap["status"] == "failed"
    failed = [e.payload for e in events if e.type == "turn.failed"]
    assert len(failed) == 1 and failed[0]["type"] == "context_overflow"
    assert [e.payload["reason"] for e in events if e.type == "context.compacted"] == ["overflow"]
    assert not any(e.type == "llm.retry" for e in events)


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
    types = [e[3] for e in stored_events(db, sid)]
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
    retries = [json.loads(payload_text(r[4])) for r in stored_events(db, sid) if r[3] == "llm.retry"]
    assert any(r["reason"] == "process_died" for r in retries)


async def test_model_of_unknown_window_is_compacted_at_the_assumed_window_with_one_warning(
    tmp_path: Path, mock: MockProvider, workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A custom model without a configured window: compacted against the conservative default
    (32,768 tokens), warned once per session — an event, the session's warnings, one log line."""
    model = f"openai:custom-{uuid.uuid4().hex[:8]}"  # this process has not warned about it yet

    def answer(body: dict[str, Any]) -> Any:
        if body["messages"][0]["content"] == SUMMARY_SYSTEM:
            return openai_text("The user sent long texts; each was acknowledged.")
        return openai_text("ok")

    mock.default = answer
    s = load_settings(
        {"home": str(tmp_path / "home"), "base_url": mock.openai_base_url, "model": model}, env={}
    )
    with caplog.at_level(logging.WARNING, logger="acagent.models"):
        async with SessionRegistry.open(s) as reg:
            row = await reg.create_session(workspace, model=model)
            runner = await reg.get_runner(row.id)
            for i in range(3):  # ~13,000 tokens each by the estimate: two fill 80 % of 32,768
                await runner.run_turn(f"text {i} " + "x" * 40_000)
        async with SessionRegistry.open(s) as reg:  # a later process: still one warning
            runner = await reg.get_runner(row.id)
            await runner.run_turn("text 3 " + "x" * 40_000)
            events = await runner.journal.events(row.id, 0)
            info = (await runner.journal.get_session(row.id)).to_public()
    assert [e.type for e in events].count("turn.completed") == 4
    compactions = [e.payload for e in events if e.type == "context.compacted"]
    assert len(compactions) >= 3 and all(c["reason"] == "threshold" for c in compactions)
    warned = [
        e.payload for e in events if e.type == "error" and e.payload["code"] == "context_window_unknown"
    ]
    assert (
        len(warned) == 1
        and "32,768" in warned[0]["message"]
        and f'[models."{model}"]' in warned[0]["message"]
    )
    assert [w["code"] for w in info["warnings"]] == ["context_window_unknown"]
    assert caplog.text.count("context window of") == 1
    assert all(r.status == 200 and bytes_to_tokens(len(r.body)) <= UNKNOWN_WINDOW for r in mock.requests)


def test_unknown_window_warning_shows_in_acagent_run(cli: Any, mock: MockProvider, workspace: Path) -> None:
    mock.default = lambda body: openai_text("ok")
    base = ["--model", "openai:custom-run", "--base-url", mock.openai_base_url]
    proc = cli("run", "x" * 85_000, *base, cwd=workspace)  # past 80 % of the assumed window
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout + proc.stderr
    assert "context window of openai:custom-run is unknown" in out and "context_window" in out
    assert "Traceback" not in out
    sid = json.loads(cli("sessions", "list", "--json", cwd=workspace, check=True).stdout)[0]["id"]
    shown = cli("sessions", "show", sid, cwd=workspace, check=True).stdout
    assert "context window of openai:custom-run is unknown" in shown and "[context_window_unknown]" in shown
    assert "{'code'" not in shown  # the session's warning is shown as its message, not as a dict


async def test_empty_summary_fails_the_turn_clearly_and_the_session_goes_on(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    empty = {"on": True}

    def model(body: dict[str, Any]) -> Any:
        if body["messages"][0]["content"] == SUMMARY_SYSTEM and empty["on"]:
            return openai_text("")
        return responder(body)

    mock.default = model
    notes(workspace, 30)
    async with SessionRegistry.open(_settings(tmp_path / "home", mock)) as reg:
        row = await reg.create_session(workspace, model="openai:mock")
        runner = await reg.get_runner(row.id)
        status, i = "done", 0
        while status != "failed" and i < 30:
            await runner.run_turn(f"please run turn {i}")
            status, i = (await runner.snapshot())["status"], i + 1
        empty["on"] = False
        await runner.run_turn(f"please run turn {i}")
        after = (await runner.snapshot())["status"]
        events = await runner.journal.events(row.id, 0)
    assert status == "failed"
    failed = [e.payload for e in events if e.type == "turn.failed"]
    assert len(failed) == 1 and failed[0]["type"] == "context_too_large"
    assert (
        "empty summary" in failed[0]["message"]
        and "4,000-token window of openai:mock" in failed[0]["message"]
    )
    summaries = [r for r in mock.requests if r.json["messages"][0]["content"] == SUMMARY_SYSTEM]
    assert len(summaries) == 2  # one per turn: the failed one did not loop
    assert after == "done" and [e.type for e in events].count("context.compacted") == 1
    usage = [e.payload for e in events if e.type == "usage" and e.payload.get("purpose") == "compaction"]
    assert len(usage) == 2  # the useless summary was paid: its usage is kept


@pytest.mark.parametrize("refusal", ["refused", "unavailable"])
async def test_provider_refusing_the_summary_request_fails_the_turn_clearly(
    refusal: str, tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    if refusal == "refused":
        answer = Script(
            status=400,
            body={
                "error": {"message": "Invalid prompt: flagged by the policy", "type": "invalid_request_error"}
            },
        )
    else:
        answer = Script(status=503, body={"error": {"message": "overloaded", "type": "server_error"}})

    def model(body: dict[str, Any]) -> Any:
        return answer if body["messages"][0]["content"] == SUMMARY_SYSTEM else responder(body)

    mock.default = model
    notes(workspace, 30)
    timing = {"retry_base_delay_s": 0.01, "retry_max_delay_s": 0.05}
    async with SessionRegistry.open(_settings(tmp_path / "home", mock, timing=timing)) as reg:
        row = await reg.create_session(workspace, model="openai:mock")
        runner = await reg.get_runner(row.id)
        for i in range(30):
            await runner.run_turn(f"please run turn {i}")
            if (await runner.snapshot())["status"] == "failed":
                break
        events = await runner.journal.events(row.id, 0)
        steps = [s for s in await runner.journal.steps(row.id) if "|compact|" in s.step_id]
    failed = [e.payload for e in events if e.type == "turn.failed"]
    assert len(failed) == 1 and failed[0]["type"] == "context_too_large", failed
    message = failed[0]["message"]
    assert "4,000-token window of openai:mock" in message
    summaries = [r for r in mock.requests if r.json["messages"][0]["content"] == SUMMARY_SYSTEM]
    if refusal == "refused":  # not retryable: one request, the provider's words in the error
        assert "refused the summary request" in message and "flagged by the policy" in message
        assert len(summaries) == 1
    else:  # retryable: step_max_attempts recorded attempts, each retry visible, then the error
        assert "the summary request failed 3 times" in message and "503" in message
        assert len(summaries) == 3
        assert sum(e.type == "llm.retry" for e in events) == 2
    assert len(steps) == len(summaries) and all(s.status == "failed" for s in steps)
    assert not any(e.type == "context.compacted" for e in events)
