"""A base URL's credentials never reach an error line (F134)."""

from __future__ import annotations

import socket

import pytest

from acagent._url import redact_url
from acagent.errors import ProviderError
from acagent.providers import AnthropicProvider, OpenAIProvider
from tests.providers.helpers import collect, make_request

pytestmark = pytest.mark.anyio


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("scheme", ["http", "https"])  # acagent's own client, and httpx
@pytest.mark.parametrize("cls", [OpenAIProvider, AnthropicProvider])
async def test_a_password_or_key_in_the_base_url_is_not_in_the_error(cls: type, scheme: str) -> None:
    """Before: ``http://user:secret@gateway/v1?key=k`` was quoted whole in "cannot reach …"."""
    url = f"{scheme}://user:s3cret@127.0.0.1:{_closed_port()}/v1?api-key=k3y#frag"
    provider = cls("m", base_url=url, api_key="test-key")
    try:
        with pytest.raises(ProviderError) as caught:
            await collect(provider, make_request())
    finally:
        await provider.aclose()
    message = caught.value.message
    assert "127.0.0.1" in message and "/v1" in message, message
    assert "s3cret" not in message and "k3y" not in message and "user" not in message, message


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://user:pw@host:8080/v1?key=k#f", "http://host:8080/v1"),
        ("https://api.example.com/v1", "https://api.example.com/v1"),
        ("http://[::1]:11434/v1", "http://[::1]:11434/v1"),
        ("http://host:99999/v1", "<unparsable URL>"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown
