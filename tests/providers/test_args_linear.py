"""F24: assembling a tool call's arguments from fragments is linear in their size.

Counted, not timed: every ``json.loads`` the adapters make is wrapped, and the characters it is
given must stay within a small multiple of the argument size (the old code re-parsed everything
received so far on every fragment: n²/18 characters for 9-byte fragments).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from acagent.providers._anthropic import AnthropicStreamedResponse
from acagent.providers._openai import OpenAIStreamedResponse
from acagent.providers._parts import ArgsBuffer
from tests.providers.helpers import EventList

pytestmark = pytest.mark.anyio

SIZE = 60_000


def big_arguments(size: int) -> str:
    """A ``write_file`` argument object of about ``size`` characters, with escapes and braces."""
    line = 'def f(x):\n    return {"a": [x, "\\"q\\""]}  # é\n'
    content = (line * (size // len(line) + 1))[:size]
    return json.dumps({"path": "big.py", "content": content})


def openai_chunks(args: str, fragment: int = 9) -> Iterator[tuple[str, str]]:
    """Chat Completions events (``(type, data)`` as the event source gives them) streaming ``args``."""

    def chunk(delta: Any, finish: str | None = None, usage: Any = None) -> tuple[str, str]:
        choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
        return "message", json.dumps({"id": "c", "usage": usage, "choices": choices})

    def call(i: int, text: str) -> dict[str, Any]:
        fn = {"name": "write_file" if i == 0 else None, "arguments": text}
        return {"index": 0, "id": "call_1" if i == 0 else None, "function": fn}

    for n, i in enumerate(range(0, len(args), fragment)):
        yield chunk({"content": None, "tool_calls": [call(n, args[i : i + fragment])]})
    yield chunk({}, "tool_calls")
    yield chunk(None, usage={"prompt_tokens": 1, "completion_tokens": 2})


def anthropic_events(args: str, fragment: int = 9) -> Iterator[tuple[str, str]]:
    """Messages stream events (``(type, data)``) streaming ``args`` as ``input_json_delta``."""

    def event(data: dict[str, Any]) -> tuple[str, str]:
        return data["type"], json.dumps(data)

    yield event(
        {"type": "message_start", "message": {"id": "m", "usage": {"input_tokens": 1, "output_tokens": 1}}}
    )
    block = {"type": "tool_use", "id": "toolu_1", "name": "write_file", "input": {}}
    yield event({"type": "content_block_start", "index": 0, "content_block": block})
    for i in range(0, len(args), fragment):
        delta = {"type": "input_json_delta", "partial_json": args[i : i + fragment]}
        yield event({"type": "content_block_delta", "index": 0, "delta": delta})
    yield event({"type": "content_block_stop", "index": 0})
    yield event(
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 5}}
    )
    yield event({"type": "message_stop"})


def streamed(api: str, args: str, fragment: int = 9) -> Any:
    """A real adapter StreamedResponse over an in-memory stream of ``args`` in fragments."""
    kw = {"provider": api, "base_url": "mem", "idle_timeout_s": 60.0, "deadline": 1e12}
    if api == "openai":
        return OpenAIStreamedResponse(EventList(openai_chunks(args, fragment)), **kw)  # type: ignore[arg-type]
    return AnthropicStreamedResponse(EventList(anthropic_events(args, fragment)), **kw)  # type: ignore[arg-type]


async def drain(response: Any) -> Any:
    async for _ in response:
        pass
    return response.get()


@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_json_parsing_work_is_linear(monkeypatch: pytest.MonkeyPatch, api: str) -> None:
    args = big_arguments(SIZE)
    parsed = {"chars": 0}
    real = json.loads

    def counting(text: Any, *a: Any, **k: Any) -> Any:
        parsed["chars"] += len(text)
        if parsed["chars"] > 4 * len(args):
            raise AssertionError(f"quadratic: {parsed['chars']} characters parsed for {len(args)}")
        return real(text, *a, **k)

    monkeypatch.setattr(json, "loads", counting)
    response = await drain(streamed(api, args))
    (call,) = response.message.tool_calls
    assert call.arguments == real(args) and call.arguments_error is None
    assert parsed["chars"] <= 4 * len(args)


def test_args_buffer_scans_each_character_once() -> None:
    args = big_arguments(20_000)
    buffer = ArgsBuffer()
    for i in range(0, len(args), 9):
        buffer.append(args[i : i + 9])
        assert buffer.complete is (i + 9 >= len(args))
    assert buffer.scanned == len(args) and buffer.text == args


@pytest.mark.parametrize(
    ("text", "complete"),
    [
        ('{"a": "}"}', True),
        ('{"a": "\\\\"}', True),
        ('{"a": "\\"}', False),
        ('{"a": [1, {"b": 2}]}  ', True),
        ('{"a": 1}{"b": 2}', False),
        ('{"a": 1', False),
        ("[1]", False),
        ("{nope}", False),
        ('{"a": "\\\\\\"}"}', True),  # an escaped backslash, then an escaped quote, in the string
        ('{"a": "\\u0022}"}', True),
        ('{"a": "}\\\\"', False),
        ('{"a": "\\n{", "b": ["]"]}', True),
    ],
)
def test_args_buffer_completeness(text: str, complete: bool) -> None:
    for size in (1, 2, len(text)):
        buffer = ArgsBuffer()
        for i in range(0, len(text), size):
            buffer.append(text[i : i + size])
        assert buffer.complete is complete, (text, size)
