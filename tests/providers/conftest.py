"""Shared fixtures for provider tests: the strict mock, providers pointed at it, case files."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parents[2]
if str(_REPO) not in sys.path:  # `tests.mockprovider` importable under plain `pytest` too
    sys.path.insert(0, str(_REPO))

from tests.mockprovider import MockProvider  # noqa: E402


def shared_cases_dir() -> Path | None:
    """``shared/cases`` beside the repository, else ``$ACAGENT_SHARED/cases`` (or the var itself)."""
    candidates = [_REPO.parent / "shared" / "cases"]
    env = os.environ.get("ACAGENT_SHARED")
    if env:
        candidates += [Path(env) / "cases", Path(env)]
    for path in candidates:
        if (path / "README.md").exists():
            return path
    return None


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def cases() -> Path:
    path = shared_cases_dir()
    if path is None:
        pytest.skip("shared/cases not found (set ACAGENT_SHARED)")
    return path


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
