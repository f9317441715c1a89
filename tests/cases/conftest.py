"""Shared helpers for the field-case tests (``shared/cases/Fxx-*.md``).

In-process registries with the real providers against the strict mock where a subprocess is not
essential (fast), the real ``acagent`` CLI (the ``cli`` fixture) where the case is about
processes.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from acagent.events import Event
from acagent.runner import InProcessRunner, SessionRegistry
from acagent.settings import Settings, load_settings
from acagent.store._transcript import transcript_path
from tests.casefiles import require_cases
from tests.mockprovider import MockProvider

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def cases() -> Path:
    """The case fixtures (``tests/casefiles.py``: the recorded copy first)."""
    return require_cases()


def settings_for(home: Path, mock: MockProvider, provider: str = "openai", **over: Any) -> Settings:
    """Settings pointing ``provider:mock`` at the strict mock; ``timing`` entries go in ``over``."""
    base = mock.openai_base_url if provider == "openai" else mock.anthropic_base_url
    timing = {"retry_base_delay_s": 0.01, "retry_max_delay_s": 0.05, **over.pop("timing", {})}
    return load_settings(
        {"home": str(home), "base_url": base, "model": f"{provider}:mock", "timing": timing, **over}, env={}
    )


@asynccontextmanager
async def open_session(
    settings: Settings, cwd: Path, **registry_kw: Any
) -> AsyncIterator[tuple[SessionRegistry, InProcessRunner]]:
    """A registry on ``settings`` and a fresh session in ``cwd`` with its runner."""
    async with SessionRegistry.open(settings, **registry_kw) as reg:
        row = await reg.create_session(cwd, model=settings.model)
        yield reg, await reg.get_runner(row.id)


async def wait_for(
    runner: InProcessRunner, predicate: Callable[[Event], bool], since: int = 0, timeout: float = 10
) -> Event:
    """The first event (replayed from ``since``, then live) that satisfies ``predicate``."""
    with anyio.fail_after(timeout):
        async for event in runner.subscribe("test", since):
            if predicate(event):
                return event
    raise AssertionError("subscription ended")


async def journal_events(runner: InProcessRunner) -> list[Event]:
    """Every committed event of the runner's session, ascending seq."""
    return await runner.journal.events(runner.session_id, 0)


def session_transcript(settings: Settings, cwd: str, session_id: str) -> Path:
    """``$ACAGENT_HOME/sessions/<cwd bucket>/<id>.jsonl``."""
    return transcript_path(settings.sessions_dir, cwd, session_id)


def parse_lines(path: Path) -> tuple[list[dict[str, Any]], list[int]]:
    """``(records, numbers of lines that do not parse)`` of a JSONL file."""
    records, bad = [], []
    for number, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
        if not raw:
            continue
        try:
            records.append(json.loads(raw))
        except ValueError:
            bad.append(number)
    return records, bad


def all_text(bodies: Iterable[Any]) -> str:
    """Every body JSON-dumped into one string (for "never appears anywhere" checks)."""
    return "\n".join(json.dumps(b, ensure_ascii=False) for b in bodies)
