"""Figure 10's workload: one long session on the strict mock with compaction on (see
:mod:`benchmarks.fig10_context`), copies of it at given sizes, timed turns and resumes on them."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path
from typing import Any

from benchmarks._common import (
    ASSISTANT_TEXT,
    PREAMBLE_TEXT,
    TOOL_ARG,
    USER_TEXT,
    bench_settings,
    echo_tools,
    tmp_home,
)

WINDOW = 16_000
MODEL = "openai:mock"
SUMMARY = (
    "The user keeps asking about the flaky test in the build script. Each time the assistant ran "
    "echo on tests/test_server.py::test_reconnect and explained that the test starts a server on a "
    "random port and races the client against it; the fix discussed is to wait for the port to be "
    "bound before connecting, and to retry the first connect with a short backoff. "
) * 3


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if isinstance(b, dict))


def provider_tokens(body: dict[str, Any]) -> int:
    """What the mock's "tokenizer" counts for a request: a quarter of its JSON bytes (English text
    and code average about 4 bytes per token on current tokenizers)."""
    return len(json.dumps(body)) // 4


def responder(body: dict[str, Any]) -> Any:
    """The model: refuses a request over the window; summarises; one echo call per user turn."""
    from acagent.runner._cut import SUMMARY_SYSTEM
    from tests.mockprovider import Script, _oa_usage, openai_text, openai_tool_calls

    msgs = body["messages"]
    seen = provider_tokens(body)
    if seen > WINDOW:
        return Script(
            status=400,
            body={
                "error": {
                    "message": f"maximum context length is {WINDOW} tokens, got {seen}",
                    "type": "invalid_request_error",
                    "code": "context_length_exceeded",
                }
            },
        )
    if msgs[0]["content"] == SUMMARY_SYSTEM:
        turns = re.findall(r"(?:User: turn|first turn was turn) (\d+)", _text(msgs[-1]["content"]))
        first = min((int(t) for t in turns), default=-1)
        return openai_text(f"The first turn was turn {first}. {SUMMARY}", usage=(seen, 300))
    last = msgs[-1]
    if last["role"] == "tool":
        return openai_text(ASSISTANT_TEXT, usage=(seen, 250))
    asked = _text(last["content"])
    if asked.startswith("which turn came first"):
        found = re.search(r"The first turn was turn (\d+)", json.dumps(msgs))
        return openai_text(f"the first turn was turn {found.group(1) if found else '?'}", usage=(seen, 8))
    n = asked.split()[1].rstrip(".")
    done = b"data: [DONE]\n\n"
    calls = openai_tool_calls([(f"call_{n}_{len(msgs)}", "echo", {"text": TOOL_ARG})], text=PREAMBLE_TEXT)
    return calls[: -len(done)] + _oa_usage(seen, 220) + done


def _settings(home: Path, mock: Any) -> Any:
    return bench_settings(
        home,
        base_url=mock.openai_base_url,
        model=MODEL,
        models={MODEL: {"context_window": WINDOW, "max_output_tokens": 2048}},
    )


def _user(i: int) -> str:
    return f"turn {i}. {USER_TEXT}"[:1000]


class _History:
    """The full history's size, folded turn by turn (checkpoints ignored): what would be sent
    without compaction."""

    def __init__(self) -> None:
        from acagent.runner import ContextBuilder
        from acagent.runner._window import RequestEstimator

        self.builder = ContextBuilder()
        self.sizes = RequestEstimator()

    def add(self, events: list[Any]) -> int:
        for e in events:
            if e.type != "checkpoint":
                self.builder.apply(e)
        return self.sizes.request_bytes("", self.builder.messages)


async def long_session(home: Path, mock: Any, sizes: list[int], snaps: Path) -> dict[str, Any]:
    """Run turns until the session has ``sizes[-1]`` events; copy its home at each size."""
    from acagent.runner import SessionRegistry
    from acagent.runner._cut import SUMMARY_SYSTEM

    rows: list[dict[str, Any]] = []
    history = _History()
    snapshots: dict[int, dict[str, Any]] = {}
    sid, seq, seen, i = "", 0, 0, 0
    pending = list(sizes)
    while pending:
        async with SessionRegistry.open(_settings(home, mock), tools_factory=echo_tools) as reg:
            if not sid:
                sid = (await reg.create_session(home, model=MODEL)).id
            runner = await reg.get_runner(sid)
            while pending and seq < pending[0]:
                t0 = time.perf_counter()
                await runner.run_turn(_user(i))
                wall = (time.perf_counter() - t0) * 1000
                new = await runner.journal.events(sid, seq)
                seq = new[-1].seq
                requests = mock.requests[seen:]
                seen += len(requests)
                rows.append(
                    {
                        "turn": i + 1,
                        "events": seq,
                        "ms": wall,
                        "sent": sum(len(r.body) for r in requests),
                        "largest": max(len(r.body) for r in requests),
                        "largest_tokens": max(provider_tokens(r.json) for r in requests),
                        "summaries": sum(
                            r.json["messages"][0]["content"] == SUMMARY_SYSTEM for r in requests
                        ),
                        "rejected": sum(r.status != 200 for r in requests),
                        "full": history.add(new),
                        "status": (await runner.snapshot())["status"],
                    }
                )
                i += 1
        # closed: the data directory is consistent on disk; keep a copy of it at this size
        snapshots[pending.pop(0)] = {"home": _copy(home, snaps / f"s{seq}"), "events": seq}
    async with SessionRegistry.open(_settings(home, mock), tools_factory=echo_tools) as reg:
        runner = await reg.get_runner(sid)
        await runner.run_turn("which turn came first?")
        final = [e for e in await runner.journal.events(sid, seq) if e.type == "turn.completed"]
        compactions = [e for e in await runner.journal.events(sid, 0) if e.type == "context.compacted"]
    return {
        "sid": sid,
        "rows": rows,
        "snapshots": snapshots,
        "answer": final[-1].payload["text"] if final else "",
        "compactions": len(compactions),
        "requests": mock.requests,
    }


def _copy(home: Path, dest: Path) -> Path:
    shutil.copytree(home, dest)
    return dest


async def overhead_turns(snapshot: Path, sid: str, mock: Any, turns: int, first: int) -> list[dict[str, Any]]:
    """``turns`` timed turns on a fresh copy of ``snapshot`` (one untimed warm-up turn first)."""
    from acagent.runner import SessionRegistry
    from acagent.runner._cut import SUMMARY_SYSTEM

    out = []
    with tmp_home("f10t") as tmp:
        home = _copy(snapshot, tmp / "home")
        async with SessionRegistry.open(_settings(home, mock), tools_factory=echo_tools) as reg:
            runner = await reg.get_runner(sid)
            await runner.run_turn(_user(first))
            for k in range(turns):
                seen = len(mock.requests)
                t0, c0 = time.perf_counter(), time.process_time()
                await runner.run_turn(_user(first + 1 + k))
                wall, cpu = (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000
                compacted = any(
                    r.json["messages"][0]["content"] == SUMMARY_SYSTEM for r in mock.requests[seen:]
                )
                out.append({"ms": wall, "cpu": cpu, "compacted": compacted})
    return out


async def resume_once(home: Path, sid: str) -> dict[str, Any]:
    from acagent.runner import SessionRegistry

    t0 = time.perf_counter()
    async with SessionRegistry.open(bench_settings(home), tools_factory=echo_tools) as reg:
        t1 = time.perf_counter()
        runner = await reg.get_runner(sid)
        t2 = time.perf_counter()
        await runner.load()
        t3 = time.perf_counter()
        await runner.load_context()  # what the first turn pays (opening reads no message)
        t4 = time.perf_counter()
        return {
            "open": (t1 - t0) * 1000,
            "get_runner": (t2 - t1) * 1000,
            "load": (t3 - t2) * 1000,
            "build": (t4 - t3) * 1000,
            "messages": len(runner.context.messages),
        }
