"""F22: a stream that delivered its terminal information is complete; one cut before is retried.

Terminal information = the finish reason with the final usage (``acagent/providers/_stream.py``).
A break inside ``data: [DONE]`` / ``message_stop`` is no reason to pay again; a cut before it
raises :class:`StreamTruncated`, and the loop retries with the same body, journaling
``llm.retry`` with ``reason: "stream_truncated"``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from acagent.errors import StreamTruncated
from acagent.providers import AnthropicProvider, OpenAIProvider
from tests.cases.conftest import journal_events, open_session, settings_for
from tests.mockprovider import MockProvider, Script, TextReply, anthropic_text, openai_text
from tests.providers.helpers import collect, make_request

pytestmark = pytest.mark.anyio

DONE = b"data: [DONE]\n\n"


def _openai_body() -> bytes:
    return openai_text("Hello there", usage=(11, 3))


class TestAfterTerminalInformation:
    """Cut inside the closing frame: the reply, its usage, no error."""

    @pytest.mark.parametrize("mode", ["fin", "rst"])
    async def test_openai_cut_inside_done(
        self, mock: MockProvider, openai_provider: OpenAIProvider, mode: str
    ) -> None:
        body = _openai_body()
        mock.script(Script(chunks=[body], cut_after_bytes=len(body) - 4, cut_mode=mode))  # type: ignore[arg-type]
        _, response = await collect(openai_provider, make_request())
        assert response.message.text == "Hello there"
        assert (response.usage.input_tokens, response.usage.output_tokens) == (11, 3)

    @pytest.mark.parametrize("mode", ["fin", "rst"])
    async def test_anthropic_cut_inside_message_stop(
        self, mock: MockProvider, anthropic_provider: AnthropicProvider, mode: str
    ) -> None:
        body = anthropic_text("Hello there")
        mock.script(Script(chunks=[body], cut_after_bytes=len(body) - 8, cut_mode=mode))  # type: ignore[arg-type]
        _, response = await collect(anthropic_provider, make_request())
        assert response.message.text == "Hello there" and response.finish_reason == "stop"


class TestBeforeTerminalInformation:
    """Cut before the finish reason + usage: StreamTruncated, retryable, named "truncated"."""

    async def test_openai_cut_between_finish_and_usage(
        self, mock: MockProvider, openai_provider: OpenAIProvider
    ) -> None:
        body = _openai_body()
        usage_at = body.index(b'"choices": [], "usage"')
        mock.script(Script(chunks=[body], cut_after_bytes=usage_at + 10, cut_mode="fin"))
        with pytest.raises(StreamTruncated, match="truncated") as info:
            await collect(openai_provider, make_request())
        assert info.value.retryable and info.value.error_type == "stream_truncated"

    @pytest.mark.parametrize("mode", ["fin", "rst"])
    async def test_anthropic_cut_mid_text(
        self, mock: MockProvider, anthropic_provider: AnthropicProvider, mode: str
    ) -> None:
        body = anthropic_text("Hello there")
        cut = body.index(b"content_block_stop")
        mock.script(Script(chunks=[body], cut_after_bytes=cut, cut_mode=mode))  # type: ignore[arg-type]
        with pytest.raises(StreamTruncated):
            await collect(anthropic_provider, make_request())


@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_turn_retries_a_truncated_stream_with_the_same_body(
    tmp_path: Path, mock: MockProvider, workspace: Path, api: str
) -> None:
    """Through the loop: attempt 1 cut mid-reply → ``llm.retry(reason=stream_truncated)`` →
    attempt 2 with a byte-identical body → the answer; no partial text in the history."""
    body = _openai_body() if api == "openai" else anthropic_text("Hello there")
    cut = body.index(b"there") + 2
    mock.script(Script(chunks=[body], cut_after_bytes=cut, cut_mode="rst"), TextReply("final answer"))
    settings = settings_for(tmp_path / "home", mock, api, auto_approve=True)
    async with open_session(settings, workspace) as (_, runner):
        await runner.run_turn("hi")
        events = await journal_events(runner)
    text = [e.payload["text"] for e in events if e.type == "turn.completed"][-1]
    assert text == "final answer"
    (retry,) = [e.payload for e in events if e.type == "llm.retry"]
    assert retry["reason"] == "stream_truncated" and "truncated" in retry["error"]
    first, second = mock.requests
    assert first.body == second.body
    assert first.headers["idempotency-key"] != second.headers["idempotency-key"]


@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_turn_does_not_pay_twice_for_a_break_in_the_closing_frame(
    tmp_path: Path, mock: MockProvider, workspace: Path, api: str
) -> None:
    body = _openai_body() if api == "openai" else anthropic_text("Hello there")
    mock.script(Script(chunks=[body], cut_after_bytes=len(body) - 4, cut_mode="rst"))
    settings = settings_for(tmp_path / "home", mock, api, auto_approve=True)
    async with open_session(settings, workspace) as (_, runner):
        await runner.run_turn("hi")
        events = await journal_events(runner)
    text = [e.payload["text"] for e in events if e.type == "turn.completed"][-1]
    assert text == "Hello there"
    assert not [e for e in events if e.type == "llm.retry"]
    assert len(mock.requests) == 1
