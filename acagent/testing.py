"""Fakes acagent ships for tests and benchmarks (like pydantic-ai's ``TestModel``).

:class:`ScriptedModel` is an in-process :class:`~acagent.providers.Provider` that replays scripted
replies and records every request it received, so runner tests and benchmarks exercise the real
loop, journal and bus without a network.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio

from acagent.errors import ProviderError
from acagent.providers._base import (
    ModelRequest,
    PartsBuilder,
    Response,
    StreamEvent,
    TextDelta,
    ToolCallArgsDelta,
    ToolCallStart,
    UsageUpdate,
)

__all__ = ["Reply", "ScriptedModel", "ToolCallSpec"]


@dataclass
class ToolCallSpec:
    """A scripted tool call."""

    name: str
    arguments: dict[str, Any]
    tool_call_id: str | None = None


@dataclass
class Reply:
    """A scripted assistant reply: text (streamed in ``chunks`` pieces) and tool calls."""

    text: str = ""
    tool_calls: list[ToolCallSpec] = field(default_factory=list)
    chunks: int = 1
    delay_s: float = 0.0
    """Wait before the first chunk (model latency)."""
    chunk_delay_s: float = 0.0
    error: ProviderError | None = None
    """Raise this after streaming the text (in-band error)."""
    input_tokens: int = 10
    output_tokens: int = 5


ReplyFactory = Callable[[ModelRequest], Reply]


class _Stream:
    def __init__(self, reply: Reply) -> None:
        self._reply = reply
        self._builder = PartsBuilder()
        self._done = False

    def __aiter__(self) -> AsyncIterator[StreamEvent]:
        return self._gen()

    async def _gen(self) -> AsyncIterator[StreamEvent]:
        r = self._reply
        if r.delay_s:
            await anyio.sleep(r.delay_s)
        if r.text:
            n = max(1, r.chunks)
            size = max(1, -(-len(r.text) // n))
            for i in range(0, len(r.text), size):
                if r.chunk_delay_s:
                    await anyio.sleep(r.chunk_delay_s)
                yield self._builder.feed(TextDelta(index=0, text=r.text[i : i + size]))
        if r.error is not None:
            raise r.error
        for i, call in enumerate(r.tool_calls, start=1):
            cid = call.tool_call_id or f"call_{id(self):x}_{i}"
            yield self._builder.feed(ToolCallStart(index=i, tool_call_id=cid, name=call.name))
            yield self._builder.feed(ToolCallArgsDelta(index=i, args_text=json.dumps(call.arguments)))
        yield self._builder.feed(UsageUpdate(input_tokens=r.input_tokens, output_tokens=r.output_tokens))
        self._done = True

    def get(self) -> Response:
        return Response(
            parts=self._builder.build(),
            usage=self._builder.usage,
            finish_reason="tool_calls" if self._reply.tool_calls else "stop",
        )

    def partial_text(self) -> str:
        return self._builder.partial_text()


class ScriptedModel:
    """A provider that replays :class:`Reply` items (or a factory) and records requests.

    Args:
        replies: replies in order; or pass ``factory`` to compute each reply from the request.
        supports_tools: whether tools are offered.
    """

    name = "test"

    def __init__(
        self,
        replies: list[Reply] | None = None,
        *,
        factory: ReplyFactory | None = None,
        model: str = "scripted",
        supports_tools: bool = True,
    ) -> None:
        self.replies = list(replies or [])
        self.factory = factory
        self.model = model
        self.supports_tools = supports_tools
        self.requests: list[ModelRequest] = []

    @asynccontextmanager
    async def request_stream(self, request: ModelRequest) -> AsyncIterator[_Stream]:
        """Record the request and stream the next reply."""
        self.requests.append(request)
        if self.factory is not None:
            reply = self.factory(request)
        elif self.replies:
            reply = self.replies.pop(0)
        else:
            raise ProviderError("ScriptedModel has no reply left for this request")
        yield _Stream(reply)

    async def aclose(self) -> None:
        """Nothing to release."""
