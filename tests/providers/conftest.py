"""Shared fixtures for provider tests: the strict mock, providers pointed at it, case files."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parents[2]
if str(_REPO) not in sys.path:  # `tests.mockprovider` importable under plain `pytest` too
    sys.path.insert(0, str(_REPO))

from tests.casefiles import require_cases  # noqa: E402
from tests.mockprovider import MockProvider  # noqa: E402


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def cases() -> Path:
    """The case fixtures (``tests/casefiles.py``: the recorded copy first)."""
    return require_cases()


@pytest.fixture
def mock() -> Iterator[MockProvider]:
    with MockProvider() as server:
        yield server


@pytest.fixture
async def openai_provider(mock: MockProvider) -> AsyncIterator[object]:
    from acagent.providers import OpenAIProvider

    provider = OpenAIProvider("mock-model", base_url=mock.openai_base_url, api_key="test-key")
    yield provider
    await provider.aclose()


@pytest.fixture
async def anthropic_provider(mock: MockProvider) -> AsyncIterator[object]:
    from acagent.providers import AnthropicProvider

    provider = AnthropicProvider("mock-model", base_url=mock.anthropic_base_url, api_key="test-key")
    yield provider
    await provider.aclose()
