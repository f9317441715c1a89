"""Helpers shared by the provider tests (requests, stream collection)."""

from __future__ import annotations

import hashlib
import itertools
import json
from collections import deque
from collections.abc import Iterable
from typing import Any

from acagent.messages import Message, TextPart, ToolCallPart, ToolResultPart
from acagent.providers._base import ModelRequest, Response, StreamEvent, ToolDefinition
from acagent.providers._sse import WireActivity


def user(text: str) -> Message:
    return Message(role="user", parts=[TextPart(text=text)])


def make_request(
    messages: list[Message] | None = None,
    *,
    system: str = "",
    tools: list[ToolDefinition] | None = None,
    request_id: str = "sess|1|digest|1",
    max_tokens: int = 1024,
) -> ModelRequest:
    return ModelRequest(
        system=system,
        messages=messages if messages is not None else [user("hi")],
        tools=tools or [],
        request_id=request_id,
        max_tokens=max_tokens,
    )


def history(turns: int) -> list[Message]:
    """``turns`` tool-call turns: question, a call (ids ``c0``, ``c1``, …), its result, the answer."""
    out: list[Message] = []
    for i in range(turns):
        call = ToolCallPart(tool_call_id=f"c{i}", name="echo", arguments={"t": f"é{i}"})
        out += [
            Message(role="user", parts=[TextPart(text=f"question {i}")]),
            Message(role="assistant", parts=[TextPart(text="let me see"), call]),
            Message(role="user", parts=[ToolResultPart(tool_call_id=f"c{i}", name="echo", content=f"é{i}")]),
            Message(role="assistant", parts=[TextPart(text=f"answer {i}")]),
        ]
    return out


async def collect(provider: object, request: ModelRequest) -> tuple[list[StreamEvent], Response]:
    """Stream ``request`` to the end; return the events and the final Response."""
    events: list[StreamEvent] = []
    async with provider.request_stream(request) as stream:  # type: ignore[attr-defined]
        async for event in stream:
            events.append(event)
        return events, stream.get()


# --------------------------------------------------------------------------- F12 byte streams


def f12_openai_stream() -> bytes:
    """The F12 OpenAI stream, regenerated from the case's snippet (330 bytes)."""
    ev1 = 'data: {"choices":[{"index":0,"delta":{"content":"caf\u00e9 \U0001f600"}}]}\n\n'.encode()
    ev2 = (
        'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_U","type":"function",'
        '"function":{"name":"read_file","arguments":"{\\"path\\": \\"r\u00e9sum\u00e9.txt\\"}"}}]}}]}\n\n'
    ).encode()
    ev3 = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\n'
    ev4 = b"data: [DONE]\n\n"
    return ev1 + ev2 + ev3 + ev4


def f12_anthropic_stream() -> bytes:
    """The F12 Anthropic stream, regenerated from the case's snippet (1,259 bytes)."""

    def ev(name: str, data: dict[str, Any]) -> bytes:
        body = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
        return f"event: {name}\ndata: {body}\n\n".encode()

    def delta(i: int, d: dict[str, Any]) -> bytes:
        return ev("content_block_delta", {"type": "content_block_delta", "index": i, "delta": d})

    return b"".join(
        [
            ev(
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": "msg_f12",
                        "type": "message",
                        "role": "assistant",
                        "content": [],
                        "model": "mock",
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": {"input_tokens": 10, "output_tokens": 1},
                    },
                },
            ),
            ev(
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            ),
            delta(0, {"type": "text_delta", "text": "caf\u00e9 \U0001f600"}),
            ev("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ev(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 1,
                    "content_block": {"type": "tool_use", "id": "toolu_U", "name": "read_file", "input": {}},
                },
            ),
            delta(1, {"type": "input_json_delta", "partial_json": '{"path": "r\\u00'}),
            delta(1, {"type": "input_json_delta", "partial_json": 'e9sum\\u00e9.txt"}'}),
            ev("content_block_stop", {"type": "content_block_stop", "index": 1}),
            ev(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                    "usage": {"output_tokens": 20},
                },
            ),
            ev("message_stop", {"type": "message_stop"}),
        ]
    )


F12_SHA256 = {
    "openai": "79a003f0a9a5316ee6906f4561a805b58f828f1e8d3f1a8af471728be68417ca",
    "anthropic": "159fa47cfb8906973c68f7467b324643f13899cd82771aaea5cbd1fca51c71ec",
}


def _split_at(stream: bytes, offsets: list[int]) -> list[bytes]:
    cuts = [0, *sorted(set(offsets)), len(stream)]
    return [stream[a:b] for a, b in itertools.pairwise(cuts) if b > a]


def f12_chunkings(stream: bytes) -> dict[str, list[bytes]]:
    """S1–S5 of F12 for ``stream``: name → chunk list.

    S1 splits inside the first ``é`` and inside the emoji; S2 after ``data: {"cho`` of the first
    data line; S3 between the two LF bytes of every event terminator; S4 one byte per chunk;
    S5 ``[stream[:i], stream[i:]]`` for every ``i``.
    """
    e_acute = stream.index("é".encode())
    emoji = stream.index("😀".encode())
    data = stream.index(b"data: ")
    out = {
        "S1": _split_at(stream, [e_acute + 1, emoji + 2]),
        "S2": _split_at(stream, [data + 11]),
        "S3": _split_at(stream, [k for k in range(1, len(stream)) if stream[k - 1 : k + 1] == b"\n\n"]),
        "S4": [stream[i : i + 1] for i in range(len(stream))],
    }
    for i in range(1, len(stream)):
        out[f"S5-{i}"] = [stream[:i], stream[i:]]
    return out


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------- F21 quirky streams


def quirky(stream: bytes, eol: bytes = b"\n") -> bytes:
    """``stream`` rewritten with every WHATWG-valid quirk the SDKs mishandle (F21).

    A BOM; a comment, a ``retry:``-only block and an ``id:``-only block before the first event;
    ``data:`` without its space; an ``id:`` line inside events; a keep-alive comment block and
    an ``id:``-only block between events; unknown fields; ``eol`` (LF, CR or CRLF) as line end.
    """
    events = [e for e in stream.split(b"\n\n") if e]
    out: list[list[bytes]] = [[b": welcome"], [b"retry: 3000"], [b"id: 0"]]
    for n, event in enumerate(events):
        lines = [line.replace(b"data: ", b"data:", 1) for line in event.split(b"\n")]
        out.append([*lines, f"id: {n + 1}".encode(), b"x-unknown-field: 1"])
        out.append([b": keep-alive"])
        out.append([f"id: {n + 1}".encode()])
    body = (eol + eol).join(eol.join(lines) for lines in out) + eol + eol
    return b"\xef\xbb\xbf" + body


class EventList:
    """An event source stand-in over ``(type, data)`` events built beforehand, carrying a
    ``WireActivity`` like a real one (what the adapters' stream mapping reads)."""

    def __init__(self, items: Iterable[tuple[str, str]]) -> None:
        self._items = deque(items)
        self.activity = WireActivity()

    async def __anext__(self) -> tuple[str, str]:
        if not self._items:
            raise StopAsyncIteration
        return self._items.popleft()
