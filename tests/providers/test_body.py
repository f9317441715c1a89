"""F26: request bodies are encoded incrementally — each context message once, however long
the history — and say exactly what the documented wire mapping says (both adapters)."""

from __future__ import annotations

import json

import pytest

from acagent.messages import Message, TextPart, ToolResultPart
from acagent.providers import AnthropicProvider, OpenAIProvider, ToolDefinition
from acagent.providers._anthropic import to_anthropic_messages, to_anthropic_tools
from acagent.providers._openai import to_openai_messages, to_openai_tools
from tests.mockprovider import MockProvider, TextReply
from tests.providers.helpers import collect, history, make_request

pytestmark = pytest.mark.anyio

TOOLS = [ToolDefinition("echo", "Echo.", {"type": "object", "properties": {"t": {"type": "string"}}})]


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_each_message_is_encoded_once(api: str) -> None:
    provider = (OpenAIProvider if api == "openai" else AnthropicProvider)(
        "m", base_url="http://127.0.0.1:9", api_key="k"
    )
    past = history(50)
    for i in range(5):
        messages = [*past, Message(role="user", parts=[TextPart(text=f"new {i}")])]
        body = provider.encode_body(make_request(messages, system="sys", tools=TOOLS))
        assert body == provider.encode_body(
            make_request(messages, system="sys", tools=TOOLS)
        )  # deterministic
        past = [*messages, Message(role="assistant", parts=[TextPart(text=f"reply {i}")])]
    # 200 history messages once, then 2 new ones per call (the question and the reply)
    assert provider._encoder.encoded == 201 + 2 * 4


@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_the_body_sent_is_the_documented_mapping(mock: MockProvider, api: str) -> None:
    messages = [*history(3), Message(role="user", parts=[TextPart(text="last")])]
    request = make_request(messages, system="be brief", tools=TOOLS, max_tokens=77)
    mock.script(TextReply("ok"))
    if api == "openai":
        provider: object = OpenAIProvider("m", base_url=mock.openai_base_url, api_key="k")
        expected = {
            "model": "m",
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_tokens": 77,
            "messages": to_openai_messages("be brief", messages),
            "tools": to_openai_tools(TOOLS),
        }
    else:
        provider = AnthropicProvider("m", base_url=mock.anthropic_base_url, api_key="k")
        expected = {
            "model": "m",
            "max_tokens": 77,
            "stream": True,
            "system": "be brief",
            "messages": to_anthropic_messages(messages),
            "tools": to_anthropic_tools(TOOLS),
        }
    _, response = await collect(provider, request)
    await provider.aclose()  # type: ignore[attr-defined]
    assert response.message.text == "ok"
    (sent,) = mock.requests
    assert sent.status == 200 and sent.json == expected
    assert sent.headers["content-type"] == "application/json"
    assert json.loads(sent.body) == expected


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_reused_prefix_gives_the_mapping_for_any_sequence(api: str) -> None:
    """Growing, shrinking and edited histories (same-role runs that must merge included): every
    body equals the documented mapping, whatever the previous call left cached."""
    import random

    rng = random.Random(7)
    pool = [
        Message(role="user", parts=[TextPart(text="u1")]),
        Message(role="user", parts=[TextPart(text="u2")]),
        Message(role="assistant", parts=[TextPart(text="a1")]),
        Message(role="assistant", parts=[TextPart(text="a2")]),
        Message(role="user", parts=[ToolResultPart(tool_call_id="c", name="echo", content="r")]),
    ]
    provider = (OpenAIProvider if api == "openai" else AnthropicProvider)(
        "m", base_url="http://127.0.0.1:9", api_key="k"
    )
    messages: list[Message] = []
    for _ in range(300):
        op = rng.random()
        if op < 0.6 or not messages:
            messages = [*messages, rng.choice(pool)]
        elif op < 0.8:
            messages = messages[: rng.randrange(len(messages))]
        else:
            i = rng.randrange(len(messages))
            messages = [*messages[:i], rng.choice(pool), *messages[i + 1 :]]
        request = make_request(system="s")
        # The encoder maps any sequence; the history check (which a request built from these random
        # sequences would fail) is tested in test_history.py.
        object.__setattr__(request, "messages", messages)
        sent = json.loads(provider.encode_body(request))["messages"]
        expected = to_openai_messages("s", messages) if api == "openai" else to_anthropic_messages(messages)
        assert sent == expected


def _provider(api: str) -> OpenAIProvider | AnthropicProvider:
    return (OpenAIProvider if api == "openai" else AnthropicProvider)(
        "m", base_url="http://127.0.0.1:9", api_key="k"
    )


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_body_parts_equal_a_fresh_encoding_and_shared_items_are_joined_once(api: str) -> None:
    """The items two calls share are kept joined between calls (F26, figure 8): after any
    number of appends, and after a replaced last message, the parts are byte for byte the body
    a fresh encoder builds; the joined bytes stay O(log n) copies of the history and the parts
    O(log n) in number (before, every call re-joined every item)."""
    import math

    provider = _provider(api)
    past = history(20)
    sizes = []
    for i in range(60):
        last = Message(role="user", parts=[TextPart(text=f"new {i} " + "x" * 3000)])
        messages = [*past, last]
        request = make_request(messages, system="sys", tools=TOOLS)
        parts = provider.encode_parts(request)
        assert b"".join(parts) == _provider(api).encode_body(request)
        assert len(parts) <= 2 * math.log2(len(messages)) + 4
        sizes.append(len(b"".join(parts)))
        if i % 3 == 2:  # the last message replaced (a retried or edited question)
            continue
        past = [*messages, Message(role="assistant", parts=[TextPart(text=f"reply {i}")])]
    assert provider._encoder.joined <= 3 * sizes[-1] * math.log2(len(sizes))
    assert provider._encoder.joined >= sizes[-1] // 2  # the shared history is sent as runs


@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_a_body_in_parts_is_sent_with_its_content_length(mock: MockProvider, api: str) -> None:
    """A body sent as several parts (cached runs of at least 64 KB) arrives whole, as a
    Content-Length body (never chunked: not every endpoint accepts that)."""
    mock.script(TextReply("ok"), TextReply("ok"))
    if api == "openai":
        provider: OpenAIProvider | AnthropicProvider = OpenAIProvider(
            "m", base_url=mock.openai_base_url, api_key="k"
        )
    else:
        provider = AnthropicProvider("m", base_url=mock.anthropic_base_url, api_key="k")
    past = [*history(30), Message(role="user", parts=[TextPart(text="big " + "y" * 70_000)])]
    past.append(Message(role="assistant", parts=[TextPart(text="seen")]))
    for i in range(2):
        request = make_request([*past, Message(role="user", parts=[TextPart(text=f"q{i}")])], tools=TOOLS)
        await collect(provider, request)
    await provider.aclose()
    assert len(provider.encode_parts(request)) > 1
    sent = mock.requests[-1]
    assert sent.body == _provider(api).encode_body(request)
    assert sent.headers["content-length"] == str(len(sent.body))
    assert "transfer-encoding" not in sent.headers


@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_bodies_on_the_wire_equal_fresh_encodings_through_growth_compaction_and_edits(
    mock: MockProvider, api: str
) -> None:
    """The cached and incremental encoding (items kept from the previous call, joined runs,
    large parts sent from memory files) posts byte for byte the body a fresh provider encodes:
    as the history grows, after a compaction (the summary merged into the first kept message,
    the rest the same objects: ``runner/_cut.py`` ``merge_summary``), as it grows again, and
    with its last message replaced (a retried question)."""
    from acagent.runner._cut import merge_summary

    if api == "openai":
        provider: OpenAIProvider | AnthropicProvider = OpenAIProvider(
            "m", base_url=mock.openai_base_url, api_key="k"
        )
    else:
        provider = AnthropicProvider("m", base_url=mock.anthropic_base_url, api_key="k")
    big = [
        Message(role="user", parts=[TextPart(text="big " + "z" * 70_000)]),
        Message(role="assistant", parts=[TextPart(text="seen")]),
    ]
    h = history(35)
    past = [*h[:120], *big, *h[120:]]  # 30 turns, the big one, 5 turns
    sent: list[tuple[bytes, bytes]] = []

    async def call(messages: list[Message], i: int) -> None:
        request = make_request(messages, system="sys", tools=TOOLS)
        mock.script(TextReply("ok"))
        await collect(provider, request)
        sent.append((mock.requests[-1].body, _provider(api).encode_body(request)))

    for i in range(3):
        question = Message(role="user", parts=[TextPart(text=f"grow {i}")])
        await call([*past, question], i)
        past = [*past, question, Message(role="assistant", parts=[TextPart(text=f"reply {i}")])]
    past = merge_summary("what happened so far", past[-(len(big) + 5 * 4 + 6) :])
    for i in range(3):
        question = Message(role="user", parts=[TextPart(text=f"after {i}")])
        await call([*past, question], 10 + i)
        if i < 2:
            past = [*past, question, Message(role="assistant", parts=[TextPart(text=f"again {i}")])]
    await call([*past, Message(role="user", parts=[TextPart(text="after 2, asked again")])], 20)
    spool = provider._client.spool  # type: ignore[attr-defined]
    await provider.aclose()
    assert all(wire == fresh for wire, fresh in sent)
    assert spool.sent_from_files > 0  # the large shared parts went from memory files
