"""AnthropicProvider against the strict mock: stream mapping, F11–F13, errors, wire mapping (F01, F02)."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import anyio
import pytest

from acagent.errors import (
    ConfigError,
    ProviderConnectionError,
    ProviderError,
    ProviderHTTPError,
    StreamTruncated,
    UnexpectedModelBehavior,
)
from acagent.messages import Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from acagent.providers import AnthropicProvider, ReasoningDelta, TextDelta, ToolDefinition, create_provider
from acagent.providers._anthropic import to_anthropic_messages
from acagent.settings import ProviderSettings, Settings
from tests.mockprovider import MockProvider, Script, TextReply, anthropic_text, anthropic_tool_calls
from tests.providers.helpers import (
    F12_SHA256,
    collect,
    f12_anthropic_stream,
    f12_chunkings,
    make_request,
    sha256,
    user,
)

pytestmark = pytest.mark.anyio

TOOLS = [
    ToolDefinition(
        "read_file", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}}
    ),
    ToolDefinition(
        "shell", "Run a command.", {"type": "object", "properties": {"command": {"type": "string"}}}
    ),
]


def _ev(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


def _calls(message: Message) -> list[tuple[str, str, dict[str, Any]]]:
    return [(c.tool_call_id, c.name, c.arguments) for c in message.tool_calls]


def _results_for(message: Message) -> Message:
    return Message(
        role="user",
        parts=[
            ToolResultPart(tool_call_id=c.tool_call_id, name=c.name, content="ok") for c in message.tool_calls
        ],
    )


async def _drain_text(stream: Any, seen: list[str]) -> None:
    async for event in stream:
        if isinstance(event, TextDelta):
            seen.append(event.text)


class TestStream:
    """Plain streams: text, usage, request shape, thinking."""

    async def test_plain_text(self, mock: MockProvider, anthropic_provider: AnthropicProvider) -> None:
        mock.script(anthropic_text("Hello there"))
        events, response = await collect(anthropic_provider, make_request())
        assert [e for e in events if isinstance(e, TextDelta)] == [TextDelta(0, "Hello there")]
        assert response.message.text == "Hello there"
        assert response.finish_reason == "stop"
        assert response.provider_response_id == "msg_x"

    async def test_request_shape_and_idempotency_key(
        self, mock: MockProvider, anthropic_provider: AnthropicProvider
    ) -> None:
        mock.script(anthropic_text("ok"))
        request = make_request(system="be brief", tools=TOOLS, request_id="s1|7|abc|2", max_tokens=777)
        await collect(anthropic_provider, request)
        (req,) = mock.wait_for_requests(1)
        assert req.path == "/v1/messages"
        assert req.headers["idempotency-key"] == "s1|7|abc|2"
        # the headers the anthropic SDK sent, sent by the adapter itself since issue 12
        assert req.headers["anthropic-version"] == "2023-06-01"
        assert req.headers["x-api-key"] and req.headers["content-type"] == "application/json"
        body = req.json
        assert body["model"] == "mock-model"
        assert body["max_tokens"] == 777
        assert body["stream"] is True
        assert body["system"] == "be brief"
        assert body["messages"] == [{"role": "user", "content": "hi"}]
        assert body["tools"][1] == {
            "name": "shell",
            "description": "Run a command.",
            "input_schema": TOOLS[1].parameters,
        }

    async def test_no_system_field_when_empty(
        self, mock: MockProvider, anthropic_provider: AnthropicProvider
    ) -> None:
        mock.script(anthropic_text("ok"))
        await collect(anthropic_provider, make_request())
        assert "system" not in mock.wait_for_requests(1)[0].json

    async def test_tool_use_and_stop_reason(
        self, mock: MockProvider, anthropic_provider: AnthropicProvider
    ) -> None:
        mock.script(anthropic_tool_calls("Reading.", [("toolu_1", "read_file", {"path": "a"})]))
        _, response = await collect(anthropic_provider, make_request(tools=TOOLS))
        assert response.finish_reason == "tool_calls"
        assert response.message.text == "Reading."
        assert _calls(response.message) == [("toolu_1", "read_file", {"path": "a"})]

    async def test_max_tokens_stop_reason(
        self, mock: MockProvider, anthropic_provider: AnthropicProvider
    ) -> None:
        mock.script(anthropic_text("Hel").replace(b'"end_turn"', b'"max_tokens"'))
        _, response = await collect(anthropic_provider, make_request())
        assert response.finish_reason == "length"

    async def test_thinking_becomes_reasoning_with_signature(
        self, mock: MockProvider, anthropic_provider: AnthropicProvider
    ) -> None:
        start = anthropic_text("x").split(b"\n\n")[0] + b"\n\n"
        body = b"".join(
            [
                start,
                _ev(
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": 0,
                        "content_block": {"type": "thinking", "thinking": "", "signature": ""},
                    },
                ),
                _ev(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "thinking_delta", "thinking": "Hmm."},
                    },
                ),
                _ev(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "signature_delta", "signature": "sig=="},
                    },
                ),
                _ev("content_block_stop", {"type": "content_block_stop", "index": 0}),
                anthropic_text("Answer.").split(b"\n\n", 1)[1].replace(b'"index": 0', b'"index": 1'),
            ]
        )
        mock.script(body, TextReply("ok"))
        events, response = await collect(anthropic_provider, make_request())
        assert ReasoningDelta(0, "Hmm.") in events
        reasoning, text = response.parts
        assert reasoning == ReasoningPart(text="Hmm.", provider_metadata={"signature": "sig=="})
        assert text == TextPart(text="Answer.")
        await collect(anthropic_provider, make_request([user("hi"), response.message, user("more")]))
        replay = mock.wait_for_requests(2)[1]
        assert replay.status == 200
        assert replay.json["messages"][1]["content"] == [
            {"type": "thinking", "thinking": "Hmm.", "signature": "sig=="},
            {"type": "text", "text": "Answer."},
        ]


class TestEmptyArguments:
    """F11 E1/E2: a tool_use with no or empty input_json_delta has ``{}`` arguments."""

    @pytest.mark.parametrize("variant", ["E1", "E2"])
    async def test_fixture(
        self, mock: MockProvider, anthropic_provider: AnthropicProvider, cases: Path, variant: str
    ) -> None:
        mock.script((cases / f"F11-noarg-{variant}.anthropic.sse").read_bytes(), TextReply("ok"))
        _, response = await collect(anthropic_provider, make_request())
        (call,) = response.message.tool_calls
        assert (call.tool_call_id, call.name, call.arguments, call.arguments_error) == (
            "toolu_N",
            "noop_probe",
            {},
            None,
        )
        assert (response.usage.input_tokens, response.usage.output_tokens, response.usage.total_tokens) == (
            12,
            7,
            19,
        )
        await collect(
            anthropic_provider, make_request([user("hi"), response.message, _results_for(response.message)])
        )
        replay = mock.wait_for_requests(2)[1]
        assert replay.status == 200
        assert replay.json["messages"][1]["content"] == [
            {"type": "tool_use", "id": "toolu_N", "name": "noop_probe", "input": {}}
        ]


class TestSplitUtf8:
    """F12: every chunking of the Anthropic stream gives the same text and arguments."""

    async def test_every_split_point(self, mock: MockProvider, cases: Path) -> None:
        stream = f12_anthropic_stream()
        assert sha256(stream) == F12_SHA256["anthropic"]
        assert (cases / "F12-split-escape.anthropic.sse").read_bytes() == stream
        chunkings = f12_chunkings(stream)
        names = list(chunkings)
        mock.default = lambda body: Script(chunks=chunkings[names[int(body["model"])]], sleeps=0.0005)
        failures: list[str] = []
        limiter = anyio.CapacityLimiter(8)
        provider = AnthropicProvider("0", base_url=mock.anthropic_base_url, api_key="k")

        async def run(i: int) -> None:
            async with limiter:
                provider.model = str(i)  # the mock picks the chunking from the model name
                events, response = await collect(provider, make_request())
            text = "".join(e.text for e in events if isinstance(e, TextDelta))
            calls = _calls(response.message)
            if (
                text != "café 😀"
                or response.message.text != "café 😀"
                or calls != [("toolu_U", "read_file", {"path": "résumé.txt"})]
                or "\ufffd" in repr(events)
            ):
                failures.append(f"{names[i]}: {text!r} {calls!r}")

        async with anyio.create_task_group() as tg:
            for i in range(len(names)):
                tg.start_soon(run, i)
        await provider.aclose()
        assert failures == []
        assert len(mock.requests) == len(names) == 4 + len(stream) - 1


class TestInbandError:
    """F13: an in-band overloaded_error mid-stream is a retryable failure, never a success."""

    async def test_overloaded_then_ok(
        self, mock: MockProvider, anthropic_provider: AnthropicProvider, cases: Path
    ) -> None:
        mock.script(
            (cases / "F13-overloaded-attempt1.anthropic.sse").read_bytes(),
            (cases / "F13-ok-attempt2.anthropic.sse").read_bytes(),
        )
        request = make_request([user("go")], tools=TOOLS)
        seen: list[str] = []
        async with anthropic_provider.request_stream(request) as stream:
            with pytest.raises(ProviderHTTPError) as info:
                await _drain_text(stream, seen)
            assert stream.partial_text() == "I'll start by"
            with pytest.raises(RuntimeError):
                stream.get()  # the partial tool_use is never returned
        error = info.value
        assert error.retryable is True
        assert error.error_type == "overloaded_error"
        assert error.http_status is None
        assert "".join(seen) == "I'll start by"
        _, response = await collect(anthropic_provider, request)  # the loop's retry: same request
        assert response.message.text == "done"
        first, second = mock.wait_for_requests(2)
        assert first.json == second.json
        assert first.headers["idempotency-key"] == second.headers["idempotency-key"]


class TestErrors:
    """HTTP, connection and stream-shape failures map to acagent errors."""

    async def test_cut_without_message_stop(
        self, mock: MockProvider, anthropic_provider: AnthropicProvider, cases: Path
    ) -> None:
        """F02 (d) bytes, then a clean close: no stop_reason/message_stop → StreamTruncated."""
        body = (cases / "F02-pause-d.anthropic.sse").read_bytes()
        mock.script(Script(chunks=[body], cut_after_bytes=len(body), cut_mode="fin"))
        async with anthropic_provider.request_stream(make_request()) as stream:
            with pytest.raises(StreamTruncated, match="truncated") as info:
                async for _ in stream:
                    pass
            assert stream.partial_text() == "Checking."
        assert info.value.retryable is True

    async def test_reset_mid_stream(self, mock: MockProvider, anthropic_provider: AnthropicProvider) -> None:
        mock.script(Script(chunks=[anthropic_text("Hello there")], cut_after_bytes=300, cut_mode="rst"))
        with pytest.raises(ProviderError) as info:
            await collect(anthropic_provider, make_request())
        assert isinstance(info.value, (ProviderConnectionError, UnexpectedModelBehavior))
        assert info.value.retryable is True

    async def test_bad_key_is_not_retryable_and_names_the_env_var(self, mock: MockProvider) -> None:
        provider = AnthropicProvider("m", base_url=mock.anthropic_base_url, api_key="bad-key")
        with pytest.raises(ProviderHTTPError) as info:
            await collect(provider, make_request())
        await provider.aclose()
        assert info.value.http_status == 401
        assert info.value.retryable is False
        assert info.value.error_type == "authentication_error"
        assert "ANTHROPIC_API_KEY" in info.value.message

    @pytest.mark.parametrize(
        ("status", "error_type", "retryable"),
        [
            (400, "invalid_request_error", False),
            (429, "rate_limit_error", True),
            (500, "api_error", True),
            (529, "overloaded_error", True),
        ],
    )
    async def test_status_retryability(
        self,
        mock: MockProvider,
        anthropic_provider: AnthropicProvider,
        status: int,
        error_type: str,
        retryable: bool,
    ) -> None:
        body = {"type": "error", "error": {"type": error_type, "message": "nope"}}
        mock.script(Script(status=status, body=body))
        with pytest.raises(ProviderHTTPError) as info:
            await collect(anthropic_provider, make_request())
        assert (info.value.http_status, info.value.error_type, info.value.retryable) == (
            status,
            error_type,
            retryable,
        )

    async def test_unreachable_base_url(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        provider = AnthropicProvider("m", base_url=f"http://127.0.0.1:{port}", api_key="k")
        with pytest.raises(ProviderConnectionError):
            await collect(provider, make_request())
        await provider.aclose()

    async def test_idle_timeout(self, mock: MockProvider) -> None:
        body = anthropic_text("slow")
        mock.script(Script(chunks=[body[:200], body[200:]], pause_after=1))
        provider = AnthropicProvider("m", base_url=mock.anthropic_base_url, api_key="k", idle_timeout_s=0.3)
        with anyio.fail_after(5), pytest.raises(ProviderConnectionError, match="idle"):
            await collect(provider, make_request())
        await provider.aclose()


F01_EXPECTED = [
    {"role": "user", "content": "run both"},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Running both."},
            {"type": "tool_use", "id": "toolu_A", "name": "shell", "input": {"command": "echo a"}},
            {"type": "tool_use", "id": "toolu_B", "name": "shell", "input": {"command": "sleep 30"}},
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_A", "content": "a\n"},
            {
                "type": "tool_result",
                "tool_use_id": "toolu_B",
                "is_error": True,
                "content": "interrupted by user after start; partial output: (none)",
            },
            {"type": "text", "text": "never mind, what is 2+2?"},
        ],
    },
]


class TestWireMapping:
    """History → Messages API messages (F01, F02)."""

    async def test_f01_cancelled_tool_call_history(
        self, mock: MockProvider, anthropic_provider: AnthropicProvider, cases: Path
    ) -> None:
        mock.script((cases / "F01-turn1.anthropic.sse").read_bytes(), TextReply("4"))
        _, turn1 = await collect(anthropic_provider, make_request([user("run both")], tools=TOOLS))
        history = [
            user("run both"),
            turn1.message,
            Message(
                role="user",
                parts=[
                    ToolResultPart(tool_call_id="toolu_A", name="shell", content="a\n"),
                    ToolResultPart(
                        tool_call_id="toolu_B",
                        name="shell",
                        content="interrupted by user after start; partial output: (none)",
                        is_error=True,
                    ),
                    TextPart(text="never mind, what is 2+2?"),
                ],
            ),
        ]
        _, turn2 = await collect(anthropic_provider, make_request(history, tools=TOOLS))
        assert turn2.message.text == "4"
        step5 = mock.wait_for_requests(2)[1]
        assert step5.status == 200
        assert step5.json["messages"] == F01_EXPECTED

    async def test_f02_dropped_turn_merges_user_messages(
        self, mock: MockProvider, anthropic_provider: AnthropicProvider
    ) -> None:
        """F02 (a)/(b) policy: an empty interrupted turn leaves two user messages; they are merged."""
        history = [
            user("start"),
            Message(role="assistant", parts=[TextPart(text="")]),
            user("continue"),
        ]
        assert to_anthropic_messages(history) == [
            {
                "role": "user",
                "content": [{"type": "text", "text": "start"}, {"type": "text", "text": "continue"}],
            }
        ]
        mock.script(TextReply("ok"))
        await collect(anthropic_provider, make_request(history))
        assert mock.wait_for_requests(1)[0].status == 200

    def test_f02_partial_text_and_dropped_tool_use(self) -> None:
        """F02 (c)/(d): the streamed prefix is kept byte-identical; no empty blocks are sent."""
        history = [
            user("start"),
            Message(role="assistant", parts=[TextPart(text="Here is the plan: first"), TextPart(text=" ")]),
            user("continue"),
        ]
        assert to_anthropic_messages(history)[1] == {
            "role": "assistant",
            "content": "Here is the plan: first",
        }

    def test_invalid_arguments_replay_as_empty_input(self) -> None:
        call = ToolCallPart(
            tool_call_id="toolu_1", name="shell", arguments={}, arguments_error="invalid JSON"
        )
        wire = to_anthropic_messages([user("x"), Message(role="assistant", parts=[call])])
        assert wire[1]["content"] == [{"type": "tool_use", "id": "toolu_1", "name": "shell", "input": {}}]

    def test_reasoning_without_signature_is_not_replayed(self) -> None:
        history = [user("x"), Message(role="assistant", parts=[ReasoningPart(text="hm"), TextPart(text="y")])]
        assert to_anthropic_messages(history)[1] == {"role": "assistant", "content": "y"}


class TestFactory:
    """create_provider reads the key and URL from Settings."""

    def test_missing_key(self, tmp_path: Path) -> None:
        with pytest.raises(ConfigError, match=r"^no API key for 'anthropic': set ANTHROPIC_API_KEY$"):
            create_provider("anthropic:claude-sonnet-4-5", Settings(home=tmp_path))

    async def test_base_url_without_key(self, tmp_path: Path, mock: MockProvider) -> None:
        settings = Settings(
            home=tmp_path, providers=ProviderSettings(anthropic_base_url=mock.anthropic_base_url)
        )
        provider = create_provider("anthropic:m", settings)
        assert isinstance(provider, AnthropicProvider)
        mock.script(anthropic_text("hi"))
        _, response = await collect(provider, make_request())
        assert response.message.text == "hi"
        await provider.aclose()
