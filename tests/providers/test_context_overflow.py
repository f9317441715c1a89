"""F28: a provider's "context length exceeded" answer is a ContextOverflow, never retried blindly.

OpenAI answers 400 with ``error.code == "context_length_exceeded"``; Anthropic answers 400
``invalid_request_error`` "prompt is too long: …". Both become :class:`ContextOverflow`
(``retryable`` False), which compaction acts on; the loop does not resend the same request.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from acagent.errors import ContextOverflow, ProviderHTTPError
from acagent.providers import AnthropicProvider, OpenAIProvider
from acagent.providers._base import is_context_overflow
from tests.cases.conftest import journal_events, open_session, settings_for
from tests.mockprovider import MockProvider, Script
from tests.providers.helpers import collect, make_request

pytestmark = pytest.mark.anyio

OPENAI_BODY = {
    "error": {
        "message": "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}
ANTHROPIC_BODY = {
    "type": "error",
    "error": {
        "type": "invalid_request_error",
        "message": "prompt is too long: 210012 tokens > 200000 maximum",
    },
}


def _provider(api: str, mock: MockProvider) -> object:
    if api == "openai":
        return OpenAIProvider("m", base_url=mock.openai_base_url, api_key="k")
    return AnthropicProvider("m", base_url=mock.anthropic_base_url, api_key="k")


@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_refusal_is_context_overflow_not_retryable(mock: MockProvider, api: str) -> None:
    mock.script(Script(status=400, body=OPENAI_BODY if api == "openai" else ANTHROPIC_BODY))
    provider = _provider(api, mock)
    with pytest.raises(ContextOverflow, match="context window") as info:
        await collect(provider, make_request())
    await provider.aclose()  # type: ignore[attr-defined]
    assert info.value.retryable is False and info.value.code == "context_overflow"
    assert info.value.error_type == "context_overflow" and info.value.http_status == 400


async def test_other_invalid_requests_stay_http_errors(mock: MockProvider) -> None:
    body = {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "messages: roles must alternate"},
    }
    mock.script(Script(status=400, body=body))
    provider = _provider("anthropic", mock)
    with pytest.raises(ProviderHTTPError) as info:
        await collect(provider, make_request())
    await provider.aclose()  # type: ignore[attr-defined]
    assert not isinstance(info.value, ContextOverflow)


@pytest.mark.parametrize(
    ("status", "etype", "code", "message", "expected"),
    [
        (400, "invalid_request_error", "context_length_exceeded", "x", True),
        (400, "invalid_request_error", None, "prompt is too long: 3 tokens > 2 maximum", True),
        (400, None, None, "This model's maximum context length is 4096 tokens", True),  # vLLM wording
        (413, "request_too_large", None, "Request exceeds the maximum size", True),
        (400, "invalid_request_error", None, "max_tokens: must be positive", False),
        (429, "rate_limit_error", None, "too many requests", False),
    ],
)
def test_classification(
    status: int, etype: str | None, code: str | None, message: str, expected: bool
) -> None:
    assert is_context_overflow(status, error_type=etype, error_code=code, message=message) is expected


@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_turn_does_not_resend_an_overflowing_request(
    tmp_path: Path, mock: MockProvider, workspace: Path, api: str
) -> None:
    body = OPENAI_BODY if api == "openai" else ANTHROPIC_BODY
    mock.script(*[Script(status=400, body=body)] * 3)
    settings = settings_for(tmp_path / "home", mock, api, auto_approve=True)
    async with open_session(settings, workspace) as (_, runner):
        await runner.run_turn("hi")
        events = await journal_events(runner)
    assert not [e for e in events if e.type == "llm.retry"]
    (failed,) = [e.payload for e in events if e.type == "turn.failed"]
    assert failed["type"] == "context_overflow" and failed["retryable"] is False
    assert len(mock.requests) == 1


NGINX_502 = (
    b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
    b"<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
)


@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_a_proxy_error_page_is_one_line(mock: MockProvider, api: str) -> None:
    """A proxy's multi-line HTML error page is reported on one line (it was printed as is)."""
    mock.script(Script(status=502, body=NGINX_502))
    provider = _provider(api, mock)
    with pytest.raises(ProviderHTTPError) as info:
        await collect(provider, make_request())
    await provider.aclose()  # type: ignore[attr-defined]
    assert "\n" not in info.value.message and "502 Bad Gateway" in info.value.message
    assert info.value.retryable is True


@pytest.mark.parametrize("api", ["openai", "anthropic"])
@pytest.mark.parametrize("shape", ["json_error", "html_page"])
async def test_a_200_that_is_not_an_event_stream_names_its_body(
    mock: MockProvider, api: str, shape: str
) -> None:
    """A 200 with a JSON error body or an HTML page (a gateway, a captive portal) is an error naming
    the body, not retried: it was read as an empty stream, retried twice and reported as "stream
    was truncated: it ended after 75 bytes", hiding the server's message."""
    if shape == "json_error":
        body: dict[str, object] | bytes = {
            "error": {"message": "streaming is not supported", "type": "invalid_request_error"}
        }
    else:
        body = b"<html><body>Sign in to the guest network</body></html>"
    mock.script(Script(status=200, body=body))
    provider = _provider(api, mock)
    with pytest.raises(ProviderHTTPError) as info:
        await collect(provider, make_request())
    await provider.aclose()  # type: ignore[attr-defined]
    needle = "streaming is not supported" if shape == "json_error" else "guest network"
    assert needle in info.value.message and "instead of an event stream" in info.value.message
    assert info.value.retryable is False and "truncated" not in info.value.message
