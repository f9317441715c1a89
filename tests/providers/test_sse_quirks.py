"""F21: event streams that are valid per WHATWG but that the SDKs mishandle are read as they are.

Blocks with only ``id:`` or only ``retry:``, comments, ``data:`` without a space, CR or CRLF line
ends, a BOM, unknown fields and keep-alives spaced longer than the idle timeout's share are
never a broken stream and never a retry (``acagent/providers/_sse.py``).
"""

from __future__ import annotations

import anyio
import pytest

from acagent.errors import ProviderConnectionError, StreamTruncated
from acagent.providers import AnthropicProvider, OpenAIProvider, TextDelta
from acagent.providers._sse import SSENormalizer, iter_canonical
from tests.mockprovider import (
    MockProvider,
    Script,
    anthropic_text,
    anthropic_tool_calls,
    openai_text,
    openai_tool_calls,
    split_every,
)
from tests.providers.helpers import collect, make_request, quirky

pytestmark = pytest.mark.anyio

EOLS = {"LF": b"\n", "CR": b"\r", "CRLF": b"\r\n"}


class TestNormalizer:
    """The WHATWG algorithm itself, on bytes."""

    def test_id_and_retry_only_blocks_and_comments_dispatch_nothing(self) -> None:
        assert iter_canonical([b"id: 1\n\nretry: 10\n\n: ping\n\n\n\n"]) == b""

    def test_data_without_space_and_default_event_type(self) -> None:
        assert iter_canonical([b"data:{}\n\n"]) == b"event: message\ndata: {}\n\n"

    def test_only_one_leading_space_is_dropped_and_multi_line_data_kept(self) -> None:
        out = iter_canonical([b"event: x\ndata:  a\ndata: b\n\n"])
        assert out == b"event: x\ndata:  a\ndata: b\n\n"

    @pytest.mark.parametrize("eol", list(EOLS.values()), ids=list(EOLS))
    def test_line_ends_split_anywhere(self, eol: bytes) -> None:
        raw = b"\xef\xbb\xbf" + eol.join([b"event: e", b"data: 1", b"", b"data: 2", b"", b""])
        expected = b"event: e\ndata: 1\n\nevent: message\ndata: 2\n\n"
        for size in (1, 2, 3, len(raw)):
            assert iter_canonical(split_every(raw, size)) == expected

    def test_an_unterminated_last_event_is_discarded(self) -> None:
        assert iter_canonical([b"data: 1\n\ndata: 2"]) == b"event: message\ndata: 1\n\n"

    def test_invalid_utf8_is_replaced_not_raised(self) -> None:
        n = SSENormalizer()
        assert n.feed(b"data: \xff\n\n") == "event: message\ndata: \ufffd\n\n".encode()


class TestProvidersReadQuirkyStreams:
    """Both adapters return the right reply from every quirky variant, one byte per chunk too."""

    @pytest.mark.parametrize("eol", list(EOLS), ids=list(EOLS))
    @pytest.mark.parametrize("chunk", [0, 1, 7])
    async def test_openai(
        self, mock: MockProvider, openai_provider: OpenAIProvider, eol: str, chunk: int
    ) -> None:
        raw = quirky(openai_text("Hello"), EOLS[eol])
        mock.script(Script(chunks=split_every(raw, chunk) if chunk else [raw]))
        events, response = await collect(openai_provider, make_request())
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hello"
        assert response.message.text == "Hello" and response.finish_reason == "stop"
        assert len(mock.requests) == 1

    async def test_openai_tool_call(self, mock: MockProvider, openai_provider: OpenAIProvider) -> None:
        raw = quirky(openai_tool_calls([("call_1", "read_file", '{"path": "a.txt"}')]), b"\r\n")
        mock.script(Script(chunks=split_every(raw, 5)))
        _, response = await collect(openai_provider, make_request())
        (call,) = response.message.tool_calls
        assert (call.name, call.arguments, call.arguments_error) == ("read_file", {"path": "a.txt"}, None)

    @pytest.mark.parametrize("eol", list(EOLS), ids=list(EOLS))
    async def test_anthropic(
        self, mock: MockProvider, anthropic_provider: AnthropicProvider, eol: str
    ) -> None:
        raw = quirky(anthropic_tool_calls("Hi", [("toolu_1", "read_file", {"path": "a.txt"})]), EOLS[eol])
        mock.script(Script(chunks=split_every(raw, 3)))
        _, response = await collect(anthropic_provider, make_request())
        (call,) = response.message.tool_calls
        assert response.message.text == "Hi" and call.arguments == {"path": "a.txt"}

    async def test_anthropic_events_without_event_lines(
        self, mock: MockProvider, anthropic_provider: AnthropicProvider
    ) -> None:
        """A proxy that drops ``event:`` lines: WHATWG's default type, so the SDK keeps them."""
        raw = b"\n".join(line for line in anthropic_text("Hi").split(b"\n") if not line.startswith(b"event:"))
        mock.script(raw)
        _, response = await collect(anthropic_provider, make_request())
        assert response.message.text == "Hi"


class TestKeepAlives:
    """Silence is measured on the wire: keep-alives keep a slow stream alive, silence stalls it."""

    async def test_keepalives_longer_than_the_idle_timeout_in_total(self, mock: MockProvider) -> None:
        # 1.5 s of keep-alives 0.25 s apart against a 1 s idle timeout (0.6 s left a loaded
        # machine only 0.35 s of slack per gap)
        provider = OpenAIProvider("m", base_url=mock.openai_base_url, api_key="k", idle_timeout_s=1.0)
        body = openai_text("late")
        chunks = [b": keep-alive\n\n"] * 6 + [body]
        mock.script(Script(chunks=chunks, sleeps=0.25))
        _, response = await collect(provider, make_request())
        await provider.aclose()
        assert response.message.text == "late" and len(mock.requests) == 1

    @pytest.mark.parametrize("api", ["openai", "anthropic"])
    async def test_real_silence_is_a_stall_not_a_truncation(self, mock: MockProvider, api: str) -> None:
        if api == "openai":
            provider: object = OpenAIProvider(
                "m", base_url=mock.openai_base_url, api_key="k", idle_timeout_s=0.4
            )
            body = openai_text("x")
        else:
            provider = AnthropicProvider(
                "m", base_url=mock.anthropic_base_url, api_key="k", idle_timeout_s=0.4
            )
            body = anthropic_text("x")
        mock.script(Script(chunks=[body[:30], body[30:]], pause_after=1))
        with anyio.fail_after(10), pytest.raises(ProviderConnectionError, match="idle timeout") as info:
            await collect(provider, make_request())
        mock.release()
        assert not isinstance(info.value, StreamTruncated) and info.value.retryable
        await provider.aclose()  # type: ignore[attr-defined]
