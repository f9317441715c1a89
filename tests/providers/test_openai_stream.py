"""OpenAIProvider against the strict mock: stream mapping, F10–F12, errors, wire mapping (F01, F02)."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path
from typing import Any, ClassVar

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
from acagent.messages import Message, TextPart, ToolCallPart, ToolResultPart
from acagent.providers import OpenAIProvider, TextDelta, ToolCallStart, ToolDefinition, create_provider
from acagent.providers._openai import create_ollama_provider, to_openai_messages
from acagent.settings import ProviderSettings, Settings
from tests.mockprovider import MockProvider, Script, TextReply, openai_text, openai_tool_calls
from tests.providers.helpers import (
    F12_SHA256,
    collect,
    f12_chunkings,
    f12_openai_stream,
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


def _calls(message: Message) -> list[tuple[str, str, dict[str, Any]]]:
    return [(c.tool_call_id, c.name, c.arguments) for c in message.tool_calls]


def _results_for(message: Message, text: str | None = None) -> Message:
    parts: list[Any] = [
        ToolResultPart(tool_call_id=c.tool_call_id, name=c.name, content="ok") for c in message.tool_calls
    ]
    if text:
        parts.append(TextPart(text=text))
    return Message(role="user", parts=parts)


class TestStream:
    """Plain streams: text, usage, request shape."""

    async def test_plain_text(self, mock: MockProvider, openai_provider: OpenAIProvider) -> None:
        mock.script(openai_text("Hello there", usage=(5, 2)))
        events, response = await collect(openai_provider, make_request())
        assert [e for e in events if isinstance(e, TextDelta)] == [TextDelta(0, "Hello there")]
        assert response.message.text == "Hello there"
        assert response.finish_reason == "stop"
        assert (response.usage.input_tokens, response.usage.output_tokens) == (5, 2)
        assert response.provider_response_id == "c"

    async def test_a_compressed_stream_is_decoded(
        self, mock: MockProvider, openai_provider: OpenAIProvider
    ) -> None:
        """A server that gzips its event stream despite ``accept-encoding: identity`` (some
        proxies do) is read like a plain one."""
        import gzip

        mock.script(
            Script(
                chunks=[gzip.compress(openai_text("zipped", usage=(3, 1)))],
                headers={"Content-Encoding": "gzip"},
            )
        )
        _events, response = await collect(openai_provider, make_request())
        (req,) = mock.wait_for_requests(1)
        assert req.headers["accept-encoding"] == "identity"
        assert response.message.text == "zipped" and response.finish_reason == "stop"

    async def test_headers_the_sdk_sent_from_the_environment(
        self, mock: MockProvider, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Without the SDK (issue 12) the adapter still sends the key, the organization and the
        project the ``openai`` SDK took from ``OPENAI_ORG_ID`` / ``OPENAI_PROJECT_ID``."""
        monkeypatch.setenv("OPENAI_ORG_ID", "org-1")
        monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-1")
        provider = OpenAIProvider("m", base_url=mock.openai_base_url, api_key="k1")
        mock.script(openai_text("ok"))
        try:
            await collect(provider, make_request())
        finally:
            await provider.aclose()
        (req,) = mock.wait_for_requests(1)
        assert req.headers["authorization"] == "Bearer k1"
        assert (req.headers["openai-organization"], req.headers["openai-project"]) == ("org-1", "proj-1")
        assert req.headers["content-type"] == "application/json"

    async def test_request_shape_and_idempotency_key(
        self, mock: MockProvider, openai_provider: OpenAIProvider
    ) -> None:
        mock.script(openai_text("ok"))
        await collect(openai_provider, make_request(system="be brief", tools=TOOLS, request_id="s1|7|abc|2"))
        (req,) = mock.wait_for_requests(1)
        assert req.headers["idempotency-key"] == "s1|7|abc|2"
        assert req.headers["authorization"] == "Bearer test-key"
        body = req.json
        assert body["model"] == "mock-model"
        assert body["stream"] is True
        assert body["stream_options"] == {"include_usage": True}
        assert body["max_tokens"] == 1024
        assert body["messages"][0] == {"role": "system", "content": "be brief"}
        assert body["tools"][0] == {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a file.",
                "parameters": TOOLS[0].parameters,
            },
        }

    async def test_empty_content_deltas_produce_no_text(self, mock: MockProvider, cases: Path) -> None:
        """F02 (a): a ``content: ""`` delta is no text part."""
        provider = OpenAIProvider("m", base_url=mock.openai_base_url, api_key="k")
        head = (cases / "F02-pause-a.openai.sse").read_bytes()
        finish = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
        mock.script(head + finish)
        events, response = await collect(provider, make_request())
        assert events == []
        assert response.parts == []
        await provider.aclose()


class TestParallelToolCalls:
    """F10: fragments are routed by index; reused indexes and missing ids never concatenate."""

    EXPECTED: ClassVar[dict[str, list[tuple[str, str, dict[str, str]]]]] = {
        "A": [("call_A", "read_file", {"path": "a.txt"}), ("call_B", "shell", {"command": "ls"})],
        "B": [("call_A", "read_file", {"path": "a.txt"}), ("call_B", "read_file", {"path": "b.txt"})],
        "C": [("call_X", "read_file", {"path": "a.txt"}), ("call_Y", "read_file", {"path": "b.txt"})],
    }

    @pytest.mark.parametrize("variant", ["A", "B", "C", "D"])
    async def test_fixture(
        self, mock: MockProvider, openai_provider: OpenAIProvider, cases: Path, variant: str
    ) -> None:
        mock.script((cases / f"F10-parallel-{variant}.openai.sse").read_bytes(), TextReply("ok"))
        request = make_request([user("go")], tools=TOOLS)
        events, response = await collect(openai_provider, request)
        calls = _calls(response.message)
        if variant == "D":
            # Policy: no ids → a complete object followed by a new object starts a new call with a
            # generated id; the two objects are never concatenated.
            assert [(n, a) for _, n, a in calls] == [
                ("read_file", {"path": "a.txt"}),
                ("read_file", {"path": "b.txt"}),
            ]
            ids = [i for i, _, _ in calls]
            assert all(re.fullmatch(r"call_[0-9a-f]{32}", i) for i in ids)
            assert ids[0] != ids[1]
        else:
            assert calls == self.EXPECTED[variant]
        assert all(c.arguments_error is None for c in response.message.tool_calls)
        assert response.finish_reason == "tool_calls"
        starts = [e for e in events if isinstance(e, ToolCallStart)]
        assert [s.index for s in starts] == [0, 1]  # builder slots, not wire indexes
        # The history replays cleanly: the strict mock accepts it, nothing is concatenated.
        history = [user("go"), response.message, _results_for(response.message)]
        await collect(openai_provider, make_request(history, tools=TOOLS))
        replay = mock.wait_for_requests(2)[1]
        assert replay.status == 200
        assert "read_fileread_file" not in replay.body.decode()
        assert "}{" not in json.dumps(replay.json["messages"][1]["tool_calls"])
        assert [m["tool_call_id"] for m in replay.json["messages"][2:4]] == [c[0] for c in calls]

    async def test_invalid_arguments_are_kept_as_error_and_replayed_as_empty_object(
        self, mock: MockProvider, openai_provider: OpenAIProvider
    ) -> None:
        mock.script(openai_tool_calls([("call_1", "read_file", '{"path": "a.txt"')]), TextReply("ok"))
        _, response = await collect(openai_provider, make_request(tools=TOOLS))
        (call,) = response.message.tool_calls
        assert call.arguments == {}
        assert call.arguments_error
        history = [user("hi"), response.message, _results_for(response.message)]
        await collect(openai_provider, make_request(history))
        replay = mock.wait_for_requests(2)[1]
        assert replay.json["messages"][1]["tool_calls"][0]["function"]["arguments"] == "{}"

    @pytest.mark.parametrize(
        ("fragments", "expected"),
        [
            pytest.param(
                [
                    {"index": 0, "id": "call_1", "type": "function", "function": {"name": "read_file"}},
                    {"index": 0, "function": {"arguments": '{"path":'}},
                    {"index": 0, "function": {"name": "read_file", "arguments": ' "a"}'}},
                    {"index": 0, "function": {"name": "read_file", "arguments": ""}},
                ],
                [("read_file", {"path": "a"})],
                id="name repeated on every fragment is not appended and opens no call",
            ),
            pytest.param(
                [
                    {"index": 0, "function": {"name": "read_file", "arguments": '{"path":"a.txt"}'}},
                    {"index": 0, "function": {"name": "read_file"}},
                    {"index": 0, "function": {"arguments": '{"path":"b.txt"}'}},
                ],
                [("read_file", {"path": "a.txt"}), ("read_file", {"path": "b.txt"})],
                id="no ids, name and object in separate fragments",
            ),
            pytest.param(
                [
                    {"index": 0, "function": {"name": "read_file", "arguments": '{"path":"a.txt"}'}},
                    {"index": 0, "function": {"name": "shell", "arguments": ""}},
                    {"index": 0, "function": {"arguments": '{"command":"ls"}'}},
                ],
                [("read_file", {"path": "a.txt"}), ("shell", {"command": "ls"})],
                id="no ids, a different name after a complete call",
            ),
            pytest.param(
                [
                    {"index": 0, "function": {"name": "shell", "arguments": '{"a": '}},
                    {"index": 0, "function": {"arguments": '{"b": 1}}'}},
                ],
                [("shell", {"a": {"b": 1}})],
                id="no ids, a nested object continues the call",
            ),
        ],
    )
    async def test_fragment_shapes(
        self,
        mock: MockProvider,
        openai_provider: OpenAIProvider,
        fragments: list[dict[str, Any]],
        expected: list[tuple[str, dict[str, Any]]],
    ) -> None:
        body = b"".join(
            b"data: "
            + json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [f]}}]}).encode()
            + b"\n\n"
            for f in fragments
        )
        body += b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\ndata: [DONE]\n\n'
        mock.script(body)
        _, response = await collect(openai_provider, make_request())
        assert [(n, a) for _, n, a in _calls(response.message)] == expected
        assert all(c.arguments_error is None for c in response.message.tool_calls)
        assert len({c.tool_call_id for c in response.message.tool_calls}) == len(expected)


class TestEmptyArguments:
    """F11: empty/null/absent arguments are ``{}``; the usage-only chunk is counted."""

    @pytest.mark.parametrize("variant", ["A", "B", "C", "D"])
    async def test_fixture(
        self, mock: MockProvider, openai_provider: OpenAIProvider, cases: Path, variant: str
    ) -> None:
        mock.script((cases / f"F11-noarg-{variant}.openai.sse").read_bytes(), TextReply("ok"))
        _, response = await collect(openai_provider, make_request(tools=TOOLS))
        (call,) = response.message.tool_calls
        assert call.tool_call_id == "call_N"
        assert call.name == ("shell" if variant == "D" else "noop_probe")
        assert call.arguments == {}
        assert call.arguments_error is None  # D's missing `command` is the tool's validation
        assert (response.usage.input_tokens, response.usage.output_tokens, response.usage.total_tokens) == (
            12,
            7,
            19,
        )
        history = [user("hi"), response.message, _results_for(response.message)]
        await collect(openai_provider, make_request(history))
        replay = mock.wait_for_requests(2)[1]
        assert replay.status == 200
        assert replay.json["messages"][1]["tool_calls"][0]["function"]["arguments"] == "{}"


class TestSplitUtf8:
    """F12: every chunking of the stream gives the same text and arguments, never U+FFFD."""

    async def test_every_split_point(self, mock: MockProvider, cases: Path) -> None:
        stream = f12_openai_stream()
        assert sha256(stream) == F12_SHA256["openai"]
        assert (cases / "F12-split-utf8.openai.sse").read_bytes() == stream
        chunkings = f12_chunkings(stream)
        names = list(chunkings)
        mock.default = lambda body: Script(chunks=chunkings[names[int(body["model"])]], sleeps=0.0005)
        failures: list[str] = []
        limiter = anyio.CapacityLimiter(8)
        provider = OpenAIProvider("0", base_url=mock.openai_base_url, api_key="k")

        async def run(i: int) -> None:
            async with limiter:
                provider.model = str(i)  # the mock picks the chunking from the model name
                request = make_request()
                events, response = await collect(provider, request)
            text = "".join(e.text for e in events if isinstance(e, TextDelta))
            calls = _calls(response.message)
            if (
                text != "café 😀"
                or response.message.text != "café 😀"
                or calls != [("call_U", "read_file", {"path": "résumé.txt"})]
                or "\ufffd" in repr(events)
            ):
                failures.append(f"{names[i]}: {text!r} {calls!r}")

        async with anyio.create_task_group() as tg:
            for i in range(len(names)):
                tg.start_soon(run, i)
        await provider.aclose()
        assert failures == []
        assert len(mock.requests) == len(names) == 4 + len(stream) - 1
        assert {r.json["model"] for r in mock.requests} == {str(i) for i in range(len(names))}


class TestErrors:
    """HTTP, connection and stream-shape failures map to acagent errors."""

    async def test_cut_without_finish_reason_is_stream_truncated(
        self, mock: MockProvider, openai_provider: OpenAIProvider
    ) -> None:
        body = openai_text("Hello there")
        cut = body.index(b"data: ", 10)  # after the text chunk, before the finish chunk
        mock.script(Script(chunks=[body[:cut], body[cut:]], cut_after_bytes=cut, cut_mode="fin"))
        async with openai_provider.request_stream(make_request()) as stream:
            with pytest.raises(StreamTruncated, match=r"truncated.*finish reason") as info:
                async for _ in stream:
                    pass
            assert stream.partial_text() == "Hello there"
            with pytest.raises(RuntimeError):
                stream.get()
        assert info.value.retryable is True

    async def test_reset_mid_stream_is_a_connection_error(
        self, mock: MockProvider, openai_provider: OpenAIProvider
    ) -> None:
        body = openai_text("Hello there")
        mock.script(Script(chunks=[body], cut_after_bytes=40, cut_mode="rst"))
        with pytest.raises(ProviderError) as info:
            await collect(openai_provider, make_request())
        assert isinstance(info.value, (ProviderConnectionError, UnexpectedModelBehavior))
        assert info.value.retryable is True

    async def test_bad_key_is_not_retryable_and_names_the_env_var(self, mock: MockProvider) -> None:
        provider = OpenAIProvider("m", base_url=mock.openai_base_url, api_key="bad-key")
        with pytest.raises(ProviderHTTPError) as info:
            await collect(provider, make_request())
        await provider.aclose()
        assert info.value.http_status == 401
        assert info.value.retryable is False
        assert "OPENAI_API_KEY" in info.value.message

    @pytest.mark.parametrize(
        ("status", "retryable"), [(400, False), (404, False), (429, True), (500, True), (503, True)]
    )
    async def test_status_retryability(
        self, mock: MockProvider, openai_provider: OpenAIProvider, status: int, retryable: bool
    ) -> None:
        body = {"error": {"message": "nope", "type": "some_error", "param": None, "code": None}}
        mock.script(Script(status=status, body=body, headers={"retry-after": "2"}))
        with pytest.raises(ProviderHTTPError) as info:
            await collect(openai_provider, make_request())
        assert info.value.http_status == status
        assert info.value.retryable is retryable
        assert info.value.body == body["error"]
        assert "nope" in info.value.message
        if retryable:
            assert info.value.retry_after_s == 2.0

    async def test_unreachable_base_url(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        provider = OpenAIProvider("m", base_url=f"http://127.0.0.1:{port}/v1", api_key="k")
        with pytest.raises(ProviderConnectionError) as info:
            await collect(provider, make_request())
        await provider.aclose()
        assert info.value.retryable is True

    async def test_idle_timeout(self, mock: MockProvider) -> None:
        body = openai_text("slow")
        mock.script(Script(chunks=[body[:30], body[30:]], pause_after=1))
        provider = OpenAIProvider("m", base_url=mock.openai_base_url, api_key="k", idle_timeout_s=0.3)
        with anyio.fail_after(5), pytest.raises(ProviderConnectionError, match="idle"):
            await collect(provider, make_request())
        await provider.aclose()

    async def test_inband_error_event(self, mock: MockProvider, openai_provider: OpenAIProvider) -> None:
        err = b'data: {"error": {"message": "The server is overloaded", "type": "server_error"}}\n\n'
        mock.script(openai_text("partial").split(b"\n\n")[0] + b"\n\n" + err)
        with pytest.raises(ProviderHTTPError) as info:
            await collect(openai_provider, make_request())
        assert info.value.http_status is None
        assert info.value.retryable is True
        assert info.value.error_type == "server_error"

    async def test_malformed_event(self, mock: MockProvider, openai_provider: OpenAIProvider) -> None:
        mock.script(b"data: {not json\n\n")
        with pytest.raises(UnexpectedModelBehavior):
            await collect(openai_provider, make_request())

    async def test_cancel_while_paused_keeps_partial_text(
        self, mock: MockProvider, openai_provider: OpenAIProvider
    ) -> None:
        body = openai_text("Here is the plan: first")
        first = body.index(b"\n\n") + 2
        mock.script(Script(chunks=[body[:first], body[first:]], pause_after=1))
        seen: list[str] = []
        with anyio.fail_after(30):
            async with openai_provider.request_stream(make_request()) as stream:
                # Cancelled once the text is in, at the next read: the stream is paused there. (A
                # fixed 0.5 s window could end before a loaded machine had read the text.)
                with anyio.CancelScope() as scope:
                    async for event in stream:
                        if isinstance(event, TextDelta):
                            seen.append(event.text)
                            if "".join(seen) == "Here is the plan: first":
                                scope.cancel()
                assert scope.cancelled_caught
                assert stream.partial_text() == "Here is the plan: first"
        assert "".join(seen) == "Here is the plan: first"


F01_EXPECTED = [
    {"role": "user", "content": "run both"},
    {
        "role": "assistant",
        "content": "Running both.",
        "tool_calls": [
            {
                "id": "call_A",
                "type": "function",
                "function": {"name": "shell", "arguments": '{"command": "echo a"}'},
            },
            {
                "id": "call_B",
                "type": "function",
                "function": {"name": "shell", "arguments": '{"command": "sleep 30"}'},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "call_A", "content": "a\n"},
    {
        "role": "tool",
        "tool_call_id": "call_B",
        "content": "interrupted by user after start; partial output: (none)",
    },
    {"role": "user", "content": "never mind, what is 2+2?"},
]


def _parse_args(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = json.loads(json.dumps(messages))
    for m in out:
        for call in m.get("tool_calls") or []:
            call["function"]["arguments"] = json.loads(call["function"]["arguments"])
    return out


class TestWireMapping:
    """History → Chat Completions messages (F01 (d), F02)."""

    async def test_f01_cancelled_tool_call_history(
        self, mock: MockProvider, openai_provider: OpenAIProvider, cases: Path
    ) -> None:
        mock.script((cases / "F01-turn1.openai.sse").read_bytes(), TextReply("4"))
        _, turn1 = await collect(openai_provider, make_request([user("run both")], tools=TOOLS))
        history = [
            user("run both"),
            turn1.message,
            Message(
                role="user",
                parts=[
                    ToolResultPart(tool_call_id="call_A", name="shell", content="a\n"),
                    ToolResultPart(
                        tool_call_id="call_B",
                        name="shell",
                        content="interrupted by user after start; partial output: (none)",
                        is_error=True,
                    ),
                    TextPart(text="never mind, what is 2+2?"),
                ],
            ),
        ]
        _, turn2 = await collect(openai_provider, make_request(history, tools=TOOLS))
        assert turn2.message.text == "4"
        step5 = mock.wait_for_requests(2)[1]
        assert step5.status == 200
        assert _parse_args(step5.json["messages"]) == _parse_args(F01_EXPECTED)

    async def test_f02_no_empty_assistant_content_ever(
        self, mock: MockProvider, openai_provider: OpenAIProvider
    ) -> None:
        history = [
            user("start"),
            Message(role="assistant", parts=[]),  # (a): nothing was streamed
            Message(role="assistant", parts=[TextPart(text="")]),
            user("continue"),
        ]
        wire = to_openai_messages("", history)
        assert wire == [{"role": "user", "content": "start\n\ncontinue"}]  # consecutive user texts merged
        mock.script(TextReply("ok"))
        await collect(openai_provider, make_request(history))
        assert mock.wait_for_requests(1)[0].status == 200

    def test_f02_partial_text_prefix_is_kept(self) -> None:
        history = [
            user("start"),
            Message(role="assistant", parts=[TextPart(text="Here is the plan: first")]),
            user("go"),
        ]
        assert to_openai_messages("", history)[1] == {
            "role": "assistant",
            "content": "Here is the plan: first",
        }

    def test_tool_only_assistant_message_has_null_content(self) -> None:
        call = ToolCallPart(tool_call_id="c1", name="shell", arguments={"command": "ls"})
        wire = to_openai_messages("sys", [user("x"), Message(role="assistant", parts=[call])])
        assert wire[0] == {"role": "system", "content": "sys"}
        assert wire[2]["content"] is None
        assert wire[2]["tool_calls"][0]["function"]["arguments"] == '{"command": "ls"}'


class TestFactories:
    """create_provider/create_ollama_provider read keys and URLs from Settings."""

    def _settings(self, tmp_path: Path, **providers: Any) -> Settings:
        return Settings(home=tmp_path, providers=ProviderSettings(**providers))

    def test_missing_key_for_openai(self, tmp_path: Path) -> None:
        with pytest.raises(ConfigError, match=r"^no API key for 'openai': set OPENAI_API_KEY$"):
            create_provider("openai:gpt-4o-mini", self._settings(tmp_path))

    async def test_base_url_without_key_uses_a_placeholder(self, tmp_path: Path, mock: MockProvider) -> None:
        provider = create_provider("openai:m", self._settings(tmp_path, base_url=mock.openai_base_url))
        assert isinstance(provider, OpenAIProvider)
        mock.script(openai_text("hi"))
        _, response = await collect(provider, make_request())
        assert response.message.text == "hi"
        await provider.aclose()

    def test_official_endpoint_uses_max_completion_tokens(self, tmp_path: Path) -> None:
        provider = create_provider("openai:gpt-4o-mini", self._settings(tmp_path, openai_api_key="sk-x"))
        assert isinstance(provider, OpenAIProvider)
        kwargs = provider._request_head(make_request())
        assert kwargs["max_completion_tokens"] == 1024
        assert "max_tokens" not in kwargs

    def test_ollama(self, tmp_path: Path) -> None:
        provider = create_ollama_provider("llama3.2", self._settings(tmp_path))
        assert (provider.name, provider.model, provider.base_url) == (
            "ollama",
            "llama3.2",
            "http://127.0.0.1:11434/v1",
        )
        via_registry = create_provider(
            "ollama:llama3.2", self._settings(tmp_path, base_url="http://127.0.0.1:9/v1")
        )
        assert isinstance(via_registry, OpenAIProvider)
        assert via_registry.base_url == "http://127.0.0.1:9/v1"
