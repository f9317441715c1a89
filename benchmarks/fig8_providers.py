"""Figure 8: the provider adapters — CPU per model call vs history, and tool-argument assembly.

- **CPU per call** through the real adapters (``OpenAIProvider``, ``AnthropicProvider``:
  acagent's incrementally encoded body posted by acagent's own HTTP/1.1 client — the mock is a
  plain-http endpoint, `acagent/providers/_h1.py`; https goes through httpx — the WHATWG event
  parser, the stream mapping), against the strict mock (``tests/mockprovider.py``, which closes
  each connection after its answer, so every call connects) answering a short text reply. The
  history has N turns (user 1,000 chars; assistant 200 chars + a tool call with an 800-char
  argument; the tool result; the final 1,000-char answer), kept as the same message objects
  from call to call as the runner's context keeps them, plus one new user message per call.
  CPU is ``time.thread_time()`` of the event-loop thread around ``request_stream`` and reading
  the stream (building the request and its history check are not timed). The model's time is
  excluded and kept the same at every history length: the mock runs in a process of its own
  and answers every request 100 ms after it arrived (``benchmarks/_mock_server.py``: in this
  process it parsed and kept every 2 MB body, and its validation time — ≈ 3 ms at 10 turns,
  ≈ 55 ms at 500 — left the loop thread idle longer at 500 turns, which alone cost ≈ 0.8 ms of
  CPU per call, cold caches after the wait, and made the ratio swing ±0.4 between runs). The
  lengths take turns call by call: 60 timed rounds of one call per length after two warm-up
  rounds, a garbage collection before each round (untimed), median of the 60. The **anchor** is the
  same call made the official SDK's usual way (``create(**params)`` with the mapped messages),
  against the same mock, in the same run.
- **Argument assembly**: 1 MB of ``write_file`` arguments arriving in 9-byte fragments (116,509
  fragments), through each adapter's stream mapping and the shared parts builder, fed with
  the ``(type, data)`` events the event parser gives, built beforehand (parsing the wire is part
  of the first measurement). CPU is ``time.process_time()``.
"""

from __future__ import annotations

import gc
import importlib.util
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from benchmarks._common import (
    ASSISTANT_TEXT,
    PREAMBLE_TEXT,
    TOOL_ARG,
    USER_TEXT,
    Figure,
    Profiled,
    Target,
    stats,
)

ROOT = Path(__file__).resolve().parent.parent
TURNS = (10, 100, 500)
ROUNDS = 60
"""Timed rounds (one call per history length in each)."""
LATENCY_S = 0.1
"""The mock's answer time at every history length (its validation of a 500-turn body takes
≈ 55 ms on an idle machine)."""


def _load(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _history(turns: int) -> list[Any]:
    from acagent.messages import Message, TextPart, ToolCallPart, ToolResultPart

    out: list[Any] = []
    for i in range(turns):
        call = ToolCallPart(tool_call_id=f"call_{i}", name="echo", arguments={"text": TOOL_ARG})
        out += [
            Message(role="user", parts=[TextPart(text=USER_TEXT)]),
            Message(role="assistant", parts=[TextPart(text=PREAMBLE_TEXT), call]),
            Message(
                role="user", parts=[ToolResultPart(tool_call_id=f"call_{i}", name="echo", content=TOOL_ARG)]
            ),
            Message(role="assistant", parts=[TextPart(text=ASSISTANT_TEXT)]),
        ]
    return out


def _tools() -> list[Any]:
    from acagent.providers import ToolDefinition

    schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    return [ToolDefinition("echo", "Echo the text back.", schema)]


_SDK_CLIENTS: dict[int, Any] = {}


async def _sdk_client(provider: Any) -> Any:
    """The official SDK's client for ``provider``'s endpoint (built once, off the event loop)."""
    if id(provider) not in _SDK_CLIENTS:

        def build() -> Any:
            if provider.name == "openai":
                import openai

                return openai.AsyncOpenAI(api_key="k", base_url=provider.base_url, max_retries=0)
            import anthropic

            return anthropic.AsyncAnthropic(api_key="k", base_url=provider.base_url, max_retries=0)

        _SDK_CLIENTS[id(provider)] = await anyio.to_thread.run_sync(build)
    return _SDK_CLIENTS[id(provider)]


async def _sdk_way(provider: Any, request: Any) -> None:
    """The anchor: the SDK's own ``create(**params)`` (it transforms and re-encodes everything)."""
    from acagent.providers._anthropic import to_anthropic_messages, to_anthropic_tools
    from acagent.providers._openai import to_openai_messages, to_openai_tools

    client = await _sdk_client(provider)
    if provider.name == "openai":
        stream = await client.chat.completions.create(
            model=provider.model,
            messages=to_openai_messages(request.system, request.messages),
            tools=to_openai_tools(request.tools),
            stream=True,
            max_tokens=request.max_tokens,
        )
    else:
        stream = await client.messages.create(
            model=provider.model,
            system=request.system,
            messages=to_anthropic_messages(request.messages),
            tools=to_anthropic_tools(request.tools),
            stream=True,
            max_tokens=request.max_tokens,
        )
    async for _ in stream:
        pass


def _provider(api: str, url: str) -> Any:
    from acagent.providers import AnthropicProvider, OpenAIProvider

    if api == "openai":
        return OpenAIProvider("m", base_url=url + "/v1", api_key="k")
    return AnthropicProvider("m", base_url=url, api_key="k")


def _request(history: list[Any], tools: list[Any], i: int) -> Any:
    from acagent.messages import Message, TextPart
    from acagent.providers import ModelRequest

    messages = [*history, Message(role="user", parts=[TextPart(text=f"question {i}")])]
    return ModelRequest(system="You are a bench.", messages=messages, tools=tools, request_id=f"r{i}")


async def _one_call(provider: Any, request: Any, *, sdk_way: bool = False) -> float:
    """CPU ms of the loop thread for one call (building the request is not timed)."""
    t0 = time.thread_time()
    if sdk_way:
        await _sdk_way(provider, request)
    else:
        async with provider.request_stream(request) as stream:
            async for _ in stream:
                pass
    return (time.thread_time() - t0) * 1000


async def _interleaved(api: str, url: str, rounds: int) -> dict[int, list[float]]:
    """CPU ms per call at each history length, one call per length in each of ``rounds`` rounds
    (the lengths take turns call by call, so a change of the machine's load falls on all of
    them alike), each length on its own provider (its encoder keeps that history); two first
    rounds warm up, untimed."""
    providers = {turns: _provider(api, url) for turns in TURNS}
    histories = {turns: _history(turns) for turns in TURNS}
    tools, samples, i = _tools(), {turns: [] for turns in TURNS}, 0
    for r in range(rounds + 2):
        gc.collect()  # the garbage of building histories and requests is not the calls'
        for turns in TURNS:
            i += 1
            ms = await _one_call(providers[turns], _request(histories[turns], tools, i))
            if r >= 2:
                samples[turns].append(ms)
    for provider in providers.values():
        await provider.aclose()
    return samples


async def _calls(api: str, turns: int, n: int, url: str, *, sdk_way: bool = False) -> list[float]:
    """CPU ms of the loop thread per call, ``n`` calls at ``turns`` turns of history."""
    provider = _provider(api, url)
    history, tools, samples = _history(turns), _tools(), []
    for i in range(n + 2):  # two warm-up calls (SDK import, client, connection pool)
        ms = await _one_call(provider, _request(history, tools, i), sdk_way=sdk_way)
        if i >= 2:
            samples.append(ms)
    await provider.aclose()
    return samples


@contextmanager
def _mock_process(latency_s: float) -> Iterator[str]:
    """The strict mock in its own process (``benchmarks/_mock_server.py``), answering every
    request ``latency_s`` after it arrived; yields its base URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmarks._mock_server", str(latency_s)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        yield f"http://127.0.0.1:{port}"
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _assembly_s(api: str) -> float:
    tests = _load("bench_args_linear", ROOT / "tests" / "providers" / "test_args_linear.py")
    args = tests.big_arguments(1_000_000)
    response = tests.streamed(api, args, 9)  # its stream's items are built here: only assembly is timed

    async def go() -> float:
        t0 = time.process_time()
        async for _ in response:
            pass
        elapsed = time.process_time() - t0
        (call,) = response.get().message.tool_calls
        assert len(call.arguments["content"]) == 1_000_000
        assert call.arguments_error is None
        return elapsed

    return anyio.run(go)


def run(quick: bool) -> Figure:
    """Measure both parts (see the module docstring)."""
    fig = Figure(8, "Provider adapters: CPU per model call vs history; tool-argument assembly")
    fig.text.append(__doc__.split("\n\n", 1)[1])
    rounds = 6 if quick else ROUNDS
    rows, ratios = [], {}
    with _mock_process(LATENCY_S) as url:
        for api in ("openai", "anthropic"):
            ours = {t: stats(s) for t, s in anyio.run(_interleaved, api, url, rounds).items()}
            for turns in TURNS:
                sdk = stats(anyio.run(partial(_calls, api, turns, 2 if quick else 5, url, sdk_way=True)))
                rows.append(
                    [
                        api,
                        turns,
                        f"{ours[turns].median:.2f}",
                        f"{ours[turns].p95:.2f}",
                        f"{sdk.median:.2f}",
                        f"{sdk.median / ours[turns].median:.1f}×",
                    ]
                )
            ratios[api] = ours[500].median / ours[10].median
        fig.table(
            [
                "adapter",
                "turns",
                "acagent ms CPU/call (median)",
                "p95",
                "SDK create() ms CPU/call (anchor)",
                "anchor / acagent",
            ],
            rows,
        )
        for api, ratio in ratios.items():
            fig.targets.append(
                Target(
                    f"{api} CPU per call flat in history",
                    "500 turns ≤ 2× 10 turns",
                    f"{ratio:.2f}×",
                    ratio <= 2.0,
                )
            )
            if ratio > 2.0 and not quick:
                with Profiled() as prof:
                    anyio.run(_calls, api, 500, 3, url)
                fig.profiles.append((f"{api} call at 500 turns", prof.text))
    asm = {api: _assembly_s(api) for api in ("openai", "anthropic")}
    fig.table(
        ["adapter", "1 MB in 9-byte fragments: CPU s"],
        [[api, f"{s:.3f}"] for api, s in asm.items()],
        "Tool-argument assembly (116,509 fragments):",
    )
    worst = max(asm.values())
    fig.targets.append(
        Target("1 MB of arguments in 9-byte fragments", "< 1 s CPU", f"{worst:.3f} s", worst < 1.0)
    )
    return fig
