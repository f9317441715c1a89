"""Helpers shared by the provider tests (requests, stream collection)."""

from __future__ import annotations

from acagent.messages import Message, TextPart
from acagent.providers._base import ModelRequest, Response, StreamEvent, ToolDefinition


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


async def collect(provider: object, request: ModelRequest) -> tuple[list[StreamEvent], Response]:
    """Stream ``request`` to the end; return the events and the final Response."""
    events: list[StreamEvent] = []
    async with provider.request_stream(request) as stream:  # type: ignore[attr-defined]
        async for event in stream:
            events.append(event)
        return events, stream.get()
