"""The journal conformance suite: one set of tests every :class:`acagent.store.Journal` passes.

Every test here takes the ``journal`` (or ``journal_factory``) fixture, which is parametrised over
:data:`BACKENDS`. To run the suite against a new backend, add one entry::

    BACKENDS["mystore"] = Backend(prepare=lambda request, tmp_path: ..., open=open_my_journal)

(see :class:`Backend`). Journals are closed at teardown. SQLite and PostgreSQL are registered.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from acagent.store import Journal, Lease, SessionRow, SqliteJournal


@dataclass(frozen=True)
class Backend:
    """How the suite opens one backend.

    ``prepare(request, tmp_path)`` names a fresh, empty store for one test (it may use other
    fixtures through ``request.getfixturevalue``); ``open(store)`` opens a journal on it — called
    twice with the same store it gives two independent connections (two processes' worth).
    """

    prepare: Callable[[pytest.FixtureRequest, Path], Any]
    open: Callable[[Any], Awaitable[Journal]]


async def _open_sqlite(store: Path) -> Journal:
    return await SqliteJournal.open(store / "acagent.db")


_pg_opened = itertools.count()


async def _open_pg(url: str) -> Journal:
    from acagent.store.pg import PostgresJournal

    return await PostgresJournal.open(url, daemon_id=f"conformance-{next(_pg_opened)}")


BACKENDS: dict[str, Backend] = {
    "sqlite": Backend(prepare=lambda request, tmp_path: tmp_path, open=_open_sqlite),
    # a fresh schema on the run's PostgreSQL server (skipped where its binaries are absent)
    "postgres": Backend(prepare=lambda request, tmp_path: request.getfixturevalue("pg_url"), open=_open_pg),
}

JournalFactory = Callable[[], Awaitable[Journal]]


@pytest.fixture(params=sorted(BACKENDS))
async def journal_factory(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[JournalFactory]:
    """Opens journals on one fresh store of the parametrised backend (each call: a new connection)."""
    backend = BACKENDS[request.param]
    store = backend.prepare(request, tmp_path)
    opened: list[Journal] = []

    async def factory() -> Journal:
        journal = await backend.open(store)
        opened.append(journal)
        return journal

    yield factory
    for journal in opened:
        await journal.aclose()


@pytest.fixture
async def journal(journal_factory: JournalFactory) -> Journal:
    """One journal on a fresh store."""
    return await journal_factory()


@dataclass
class Helpers:
    """Small builders the tests share (exposed as the ``h`` fixture)."""

    journal: Journal

    async def session(self, *, cwd: str = "/tmp", title: str | None = None) -> SessionRow:
        """A fresh ``pending`` session."""
        row, _ = await self.journal.create_session(cwd=cwd, model=None, title=title)
        return row

    async def leased(self, owner: str = "w1", ttl_s: float = 30) -> tuple[SessionRow, Lease]:
        """A fresh session and a lease on it."""
        row = await self.session()
        return row, await self.journal.acquire_lease(row.id, owner, ttl_s=ttl_s)


@pytest.fixture
def h(journal: Journal) -> Helpers:
    """:class:`Helpers` bound to ``journal``."""
    return Helpers(journal)
