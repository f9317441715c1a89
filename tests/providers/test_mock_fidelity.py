"""The strict mock provider behaves like the real APIs: SDKs parse it, it rejects bad histories."""

from __future__ import annotations

import json
import socket
import time
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tests.mockprovider import (
    MockProvider,
    Script,
    TextReply,
    anthropic_text,
    anthropic_tool_calls,
    openai_text,
    openai_tool_calls,
    split_every,
)

pytestmark = pytest.mark.anyio

U = {"role": "user", "content": "hi"}
_HTTP = httpx.Client(timeout=5, verify=False)  # one client: building an SSL context per call costs ~0.1 s


def _oa_call(call_id: str, args: str = '{"path": "a.txt"}', name: str = "read_file") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def _oa_asst(*call_ids: str, content: Any = None) -> dict[str, Any]:
    return {"role": "assistant", "content": content, "tool_calls": [_oa_call(c) for c in call_ids]}


def _oa_tool(call_id: str, content: str = "ok") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def _an_use(call_id: str, input_: Any = None) -> dict[str, Any]:
    return {
        "type": "tool_use",
        "id": call_id,
        "name": "read_file",
        "input": {"path": "a"} if input_ is None else input_,
    }


def _an_result(call_id: str, **extra: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": "ok", **extra}


def _post(mock: MockProvider, api: str, body: dict[str, Any], key: str = "k") -> httpx.Response:
    if api == "openai":
        url, headers = mock.openai_base_url + "/chat/completions", {"authorization": f"Bearer {key}"}
    else:
        url, headers = mock.url + "/v1/messages", {"x-api-key": key}
    return _HTTP.post(url, json=body, headers=headers)


class TestSdkParsing:
    """The official SDKs consume the mock's streams exactly like the real ones."""

    async def test_openai_sdk_parses_text_and_tool_calls(self, mock: MockProvider) -> None:
        mock.script(
            openai_text("hello", usage=(3, 4)),
            openai_tool_calls([("call_1", "read_file", {"path": "a"})], text="Reading."),
        )
        client = openai.AsyncOpenAI(api_key="k", base_url=mock.openai_base_url, max_retries=0)
        chunks = [c async for c in await client.chat.completions.create(model="m", messages=[U], stream=True)]
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "hello"
        assert chunks[-1].usage is not None
        assert chunks[-1].usage.total_tokens == 7
        chunks = [c async for c in await client.chat.completions.create(model="m", messages=[U], stream=True)]
        calls = [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]
        assert calls[0].id == "call_1"
        assert json.loads(calls[0].function.arguments) == {"path": "a"}
        assert chunks[-1].choices[0].finish_reason == "tool_calls"
        await client.close()

    async def test_anthropic_sdk_parses_text_and_tool_use(self, mock: MockProvider) -> None:
        mock.script(
            anthropic_text("hello"), anthropic_tool_calls("Reading.", [("toolu_1", "read_file", {"p": 1})])
        )
        client = anthropic.AsyncAnthropic(api_key="k", base_url=mock.url, max_retries=0)
        for expected in (["text"], ["text", "tool_use"]):
            stream = await client.messages.create(model="m", max_tokens=5, messages=[U], stream=True)
            types = [e.type async for e in stream]
            assert types[0] == "message_start"
            assert types[-1] == "message_stop"
            assert types.count("content_block_start") == len(expected)
        await client.close()

    async def test_one_byte_chunks_still_parse(self, mock: MockProvider) -> None:
        mock.script(Script(chunks=split_every(anthropic_text("café 😀"))))
        client = anthropic.AsyncAnthropic(api_key="k", base_url=mock.url, max_retries=0)
        stream = await client.messages.create(model="m", max_tokens=5, messages=[U], stream=True)
        texts = [e.delta.text async for e in stream if e.type == "content_block_delta"]
        assert texts == ["café 😀"]
        await client.close()


class TestScripting:
    """Script features: pause, cuts, statuses, dynamic entries, empty queue, recording."""

    def test_requests_are_recorded_in_order_with_status(self, mock: MockProvider) -> None:
        mock.script(openai_text("a"), TextReply("b"))
        _post(mock, "openai", {"model": "m", "messages": [U]})
        _post(mock, "anthropic", {"model": "m", "max_tokens": 5, "messages": [U]})
        first, second = mock.wait_for_requests(2)
        assert (first.path, first.status, first.api) == ("/v1/chat/completions", 200, "openai")
        assert (second.path, second.status, second.api) == ("/v1/messages", 200, "anthropic")
        assert second.headers["x-api-key"] == "k"
        assert second.json["max_tokens"] == 5

    def test_text_reply_uses_the_request_wire_format(self, mock: MockProvider) -> None:
        mock.script(TextReply("x"), TextReply("y"))
        assert b"chat.completion.chunk" in _post(mock, "openai", {"model": "m", "messages": [U]}).content
        assert (
            b"message_stop"
            in _post(mock, "anthropic", {"model": "m", "max_tokens": 5, "messages": [U]}).content
        )

    def test_callable_entry_sees_the_request_body(self, mock: MockProvider) -> None:
        mock.script(lambda body: openai_text(body["messages"][-1]["content"][::-1]))
        r = _post(mock, "openai", {"model": "m", "messages": [{"role": "user", "content": "abc"}]})
        assert b'"cba"' in r.content

    def test_empty_queue_answers_500_loudly(self, mock: MockProvider) -> None:
        r = _post(mock, "openai", {"model": "m", "messages": [U]})
        assert r.status_code == 500
        assert "script queue is empty" in r.json()["error"]["message"]

    def test_scripted_status_and_body(self, mock: MockProvider) -> None:
        mock.script(
            Script(status=529, body={"type": "error", "error": {"type": "overloaded_error", "message": "x"}})
        )
        r = _post(mock, "anthropic", {"model": "m", "max_tokens": 5, "messages": [U]})
        assert r.status_code == 529
        assert r.json()["error"]["type"] == "overloaded_error"

    def test_bad_key_answers_401(self, mock: MockProvider) -> None:
        assert _post(mock, "openai", {"model": "m", "messages": [U]}, key="bad-key").status_code == 401
        r = _post(mock, "anthropic", {"model": "m", "max_tokens": 5, "messages": [U]}, key="bad-key")
        assert r.status_code == 401
        assert r.json()["error"]["type"] == "authentication_error"
        assert mock.pending == 0  # nothing consumed, nothing scripted

    def test_unknown_route_is_404(self, mock: MockProvider) -> None:
        assert _HTTP.post(mock.url + "/v1/embeddings", json={}).status_code == 404

    def test_pause_holds_the_stream_until_release(self, mock: MockProvider) -> None:
        body = openai_text("hello")
        mock.script(Script(chunks=[body[:20], body[20:]], pause_after=1))
        with _HTTP.stream(
            "POST", mock.openai_base_url + "/chat/completions", json={"model": "m", "messages": [U]}
        ) as r:
            it = r.iter_raw()
            assert next(it) == body[:20]
            mock.wait_paused()
            time.sleep(0.05)
            mock.release()
            assert b"".join(it) == body[20:]

    @pytest.mark.parametrize("mode", ["fin", "rst"])
    def test_cut_at_byte_offset(self, mock: MockProvider, mode: str) -> None:
        body = anthropic_text("hello")
        mock.script(Script(chunks=split_every(body, 16), cut_after_bytes=100, cut_mode=mode))  # type: ignore[arg-type]
        received = b""
        with _HTTP.stream(
            "POST", mock.url + "/v1/messages", json={"model": "m", "max_tokens": 5, "messages": [U]}
        ) as r:
            try:
                for chunk in r.iter_raw():
                    received += chunk
            except httpx.TransportError:
                assert mode == "rst"
            else:
                assert mode == "fin"
        assert body.startswith(received)
        assert len(received) <= 100
        if mode == "fin":
            assert len(received) == 100

    def test_chunks_are_flushed_separately(self, mock: MockProvider) -> None:
        body = openai_text("x")
        parts = [body[:7], body[7:30], body[30:]]
        # 0.3 s between chunks: a reader descheduled for longer than the gap on a loaded machine
        # reads two chunks at once (it did at 0.05 s); the boundaries are what this test checks
        mock.script(Script(chunks=parts, sleeps=0.3))
        with socket.create_connection(("127.0.0.1", mock.port)) as sock:
            payload = json.dumps({"model": "m", "messages": [U]}).encode()
            sock.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: " + str(len(payload)).encode() + b"\r\n\r\n" + payload
            )
            data = b""
            while b"\r\n\r\n" not in data:
                data += sock.recv(4096)
            head, _, rest = data.partition(b"\r\n\r\n")
            assert b"Connection: close" in head
            assert b"Content-Length" not in head
            reads = [rest] if rest else []
            while chunk := sock.recv(4096):
                reads.append(chunk)
        assert reads == parts


OPENAI_INVALID: dict[str, list[dict[str, Any]]] = {
    "call without result": [U, _oa_asst("call_A"), U],
    "call at the end without result": [U, _oa_asst("call_A")],
    "one of two results missing": [U, _oa_asst("call_A", "call_B"), _oa_tool("call_A"), U],
    "result not directly after": [U, _oa_asst("call_A"), U, _oa_tool("call_A")],
    "result with unknown id": [U, _oa_asst("call_A"), _oa_tool("call_X")],
    "result without any call": [U, _oa_tool("call_A")],
    "duplicate result": [U, _oa_asst("call_A"), _oa_tool("call_A"), _oa_tool("call_A")],
    "results out of order": [U, _oa_asst("call_A", "call_B"), _oa_tool("call_B"), _oa_tool("call_A")],
    "assistant content null without calls": [U, {"role": "assistant", "content": None}, U],
    "assistant content empty without calls": [U, {"role": "assistant", "content": ""}, U],
    "assistant content empty with calls": [U, _oa_asst("call_A", content=""), _oa_tool("call_A")],
    "assistant tool_calls []": [U, {"role": "assistant", "content": "x", "tool_calls": []}, U],
    "arguments not JSON": [
        U,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [_oa_call("call_A", '{"path":"a.txt"}{"path":"b.txt"}')],
        },
        _oa_tool("call_A"),
    ],
    "empty text block": [{"role": "user", "content": [{"type": "text", "text": ""}]}],
    "empty user text": [{"role": "user", "content": ""}],
}

OPENAI_VALID: dict[str, list[dict[str, Any]]] = {
    "plain": [U],
    "system and user": [{"role": "system", "content": "be brief"}, U],
    "calls with results": [
        U,
        _oa_asst("call_A", "call_B", content="Both."),
        _oa_tool("call_A"),
        _oa_tool("call_B"),
        U,
    ],
    "text parts": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    "empty tool output": [U, _oa_asst("call_A"), _oa_tool("call_A", "")],
}

ANTHROPIC_INVALID: dict[str, list[dict[str, Any]]] = {
    "tool_use without result": [U, {"role": "assistant", "content": [_an_use("toolu_A")]}, U],
    "tool_use at the end": [U, {"role": "assistant", "content": [_an_use("toolu_A")]}],
    "result not first": [
        U,
        {"role": "assistant", "content": [_an_use("toolu_A")]},
        {"role": "user", "content": [{"type": "text", "text": "hm"}, _an_result("toolu_A")]},
    ],
    "one result missing": [
        U,
        {"role": "assistant", "content": [_an_use("toolu_A"), _an_use("toolu_B")]},
        {"role": "user", "content": [_an_result("toolu_A")]},
    ],
    "results out of order": [
        U,
        {"role": "assistant", "content": [_an_use("toolu_A"), _an_use("toolu_B")]},
        {"role": "user", "content": [_an_result("toolu_B"), _an_result("toolu_A")]},
    ],
    "duplicate result": [
        U,
        {"role": "assistant", "content": [_an_use("toolu_A")]},
        {"role": "user", "content": [_an_result("toolu_A"), _an_result("toolu_A")]},
    ],
    "result with unknown id": [
        U,
        {"role": "assistant", "content": [_an_use("toolu_A")]},
        {"role": "user", "content": [_an_result("toolu_X")]},
    ],
    "result without any call": [
        U,
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": [_an_result("toolu_A")]},
    ],
    "empty text block": [U, {"role": "assistant", "content": [{"type": "text", "text": ""}]}, U],
    "whitespace text block": [U, {"role": "assistant", "content": [{"type": "text", "text": " \n"}]}, U],
    "empty string content": [U, {"role": "assistant", "content": ""}, U],
    "empty content list": [U, {"role": "assistant", "content": []}, U],
    "two user messages in a row": [U, U],
    "two assistant messages in a row": [
        U,
        {"role": "assistant", "content": "a"},
        {"role": "assistant", "content": "b"},
    ],
    "first message assistant": [{"role": "assistant", "content": "hi"}, U],
    "tool input not an object": [
        U,
        {"role": "assistant", "content": [_an_use("toolu_A", '{"path":"a"}{"path":"b"}')]},
        {"role": "user", "content": [_an_result("toolu_A")]},
    ],
}

ANTHROPIC_VALID: dict[str, list[dict[str, Any]]] = {
    "plain": [U],
    "tool round trip": [
        U,
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "Both."}, _an_use("toolu_A"), _an_use("toolu_B")],
        },
        {
            "role": "user",
            "content": [
                _an_result("toolu_A"),
                _an_result("toolu_B", is_error=True),
                {"type": "text", "text": "go"},
            ],
        },
    ],
    "prefill": [U, {"role": "assistant", "content": "The answer is"}],
    "thinking": [
        U,
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hm", "signature": "s"},
                {"type": "text", "text": "x"},
            ],
        },
        U,
    ],
}


class TestValidation:
    """Invalid histories get 400 with the real API's error shape; valid ones get 200."""

    @pytest.mark.parametrize("name", sorted(OPENAI_INVALID))
    def test_openai_rejects(self, mock: MockProvider, name: str) -> None:
        r = _post(mock, "openai", {"model": "m", "messages": OPENAI_INVALID[name]})
        assert r.status_code == 400, r.text
        error = r.json()["error"]
        assert error["type"] == "invalid_request_error"
        assert error["message"]
        assert mock.requests[-1].status == 400

    @pytest.mark.parametrize("name", sorted(OPENAI_VALID))
    def test_openai_accepts(self, mock: MockProvider, name: str) -> None:
        mock.script(openai_text("ok"))
        r = _post(mock, "openai", {"model": "m", "messages": OPENAI_VALID[name]})
        assert r.status_code == 200, r.text

    @pytest.mark.parametrize("name", sorted(ANTHROPIC_INVALID))
    def test_anthropic_rejects(self, mock: MockProvider, name: str) -> None:
        r = _post(mock, "anthropic", {"model": "m", "max_tokens": 5, "messages": ANTHROPIC_INVALID[name]})
        assert r.status_code == 400, r.text
        body = r.json()
        assert body["type"] == "error"
        assert body["error"]["type"] == "invalid_request_error"

    @pytest.mark.parametrize("name", sorted(ANTHROPIC_VALID))
    def test_anthropic_accepts(self, mock: MockProvider, name: str) -> None:
        mock.script(anthropic_text("ok"))
        r = _post(mock, "anthropic", {"model": "m", "max_tokens": 5, "messages": ANTHROPIC_VALID[name]})
        assert r.status_code == 200, r.text

    def test_anthropic_requires_max_tokens(self, mock: MockProvider) -> None:
        assert _post(mock, "anthropic", {"model": "m", "messages": [U]}).status_code == 400

    def test_rejected_request_does_not_consume_the_script(self, mock: MockProvider) -> None:
        mock.script(openai_text("ok"))
        assert _post(mock, "openai", {"model": "m", "messages": [U, U, _oa_tool("x")]}).status_code == 400
        assert mock.pending == 1

    async def test_sdk_surfaces_the_400_message(self, mock: MockProvider) -> None:
        client = openai.AsyncOpenAI(api_key="k", base_url=mock.openai_base_url, max_retries=0)
        with pytest.raises(openai.BadRequestError, match="did not have response messages: call_A"):
            await client.chat.completions.create(model="m", messages=[U, _oa_asst("call_A"), U], stream=True)  # type: ignore[list-item]
        await client.close()
