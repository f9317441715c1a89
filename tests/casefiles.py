"""The one lookup of the field-case wire fixtures (``shared/cases/*.sse``, ``*.jsonl``).

The tests need only the recorded wire bytes of the cases, not their prose. Those bytes are
recorded into ``tests/fixtures/cases/`` by ``scripts/record_fixtures.py`` (from ``../shared/cases``),
so a clone without ``../shared`` runs every field-case test. The lookup prefers the recorded copy;
``../shared/cases`` and ``$ACAGENT_SHARED[/cases]`` are the fallbacks (and the source the script
records from).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RECORDED = REPO / "tests" / "fixtures" / "cases"
"""Where ``scripts/record_fixtures.py`` writes the fixtures (``MANIFEST`` lists them)."""


def shared_source() -> Path | None:
    """``../shared/cases`` beside the repository, else ``$ACAGENT_SHARED/cases`` (or the var itself).

    Returns None when neither holds the cases (their ``README.md`` marks the directory).
    """
    candidates = [REPO.parent / "shared" / "cases"]
    env = os.environ.get("ACAGENT_SHARED")
    if env:
        candidates += [Path(env) / "cases", Path(env)]
    return next((p for p in candidates if (p / "README.md").exists()), None)


def cases_dir() -> Path | None:
    """The directory to read case fixtures from: the recorded copy first, else the shared source."""
    if (RECORDED / "MANIFEST").exists():
        return RECORDED
    return shared_source()


def require_cases() -> Path:
    """:func:`cases_dir`, or skip the calling test with the reason."""
    path = cases_dir()
    if path is None:
        pytest.skip("case fixtures not found: run scripts/record_fixtures.py (needs ../shared/cases)")
    return path
