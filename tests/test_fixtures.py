"""The recorded field-case fixtures (``tests/fixtures/cases``) stand in for ``../shared/cases``."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tests.casefiles import RECORDED, cases_dir, shared_source

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

import record_fixtures  # noqa: E402


def test_lookup_prefers_the_recorded_copy() -> None:
    """A clone without ``../shared`` reads the recorded fixtures."""
    assert cases_dir() == RECORDED
    manifest = (RECORDED / "MANIFEST").read_text().split()
    assert manifest[0::3] == list(record_fixtures.FIXTURES)


def test_every_case_file_a_test_reads_is_recorded() -> None:
    """Names of case files written in tests (``F..-*.sse``/``.jsonl`` literals, f-strings expanded
    by their recorded variants) all exist in the recorded copy."""
    recorded = set(record_fixtures.FIXTURES)
    pattern = re.compile(r"F\d\d-[A-Za-z0-9{}_.-]+?\.(?:openai\.sse|anthropic\.sse|jsonl)")
    for path in (REPO / "tests").rglob("*.py"):
        for name in pattern.findall(path.read_text()):
            regex = re.escape(name)
            regex = re.sub(r"\\\{[^}]*\\\}", "[A-Za-z0-9]+", regex)
            assert any(re.fullmatch(regex, r) for r in recorded), f"{path.name}: {name} is not recorded"


def test_recorded_fixtures_match_the_shared_cases() -> None:
    """Byte for byte the same as ``../shared/cases`` (when it is there to compare with)."""
    if shared_source() is None:
        pytest.skip("../shared/cases not found: nothing to compare with")
    assert record_fixtures.main(["--check"]) == 0
