"""Pricing (config > genai-prices > local = 0 > unknown), the cap rule, and the usage rows."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from acagent.errors import ConfigError
from acagent.settings import load_settings
from acagent.store import RecordUsage, SqliteJournal, local_day
from acagent.store._migrations import MIGRATIONS
from acagent.store._usage import UsageTotals
from acagent.usage import CallEstimate, Limits, PriceBook, TokenCounts, check_budget

pytestmark = pytest.mark.anyio


def test_config_price_wins_and_unknown_is_none_never_zero() -> None:
    book = PriceBook({"openai:gpt-4o-mini": {"input_usd_per_mtok": 1.0, "output_usd_per_mtok": 2.0}})
    assert book.cost_usd("openai:gpt-4o-mini", TokenCounts(1_000_000, 500_000)) == pytest.approx(2.0)
    assert book.rates("openai:no-such-model-xyz") is None
    assert book.cost_usd("openai:no-such-model-xyz", TokenCounts(10, 10)) is None
    assert book.cost_usd("local:smollm2-135m", TokenCounts(10, 10)) == 0.0
    assert book.cost_usd("ollama:llama3", TokenCounts(10, 10)) == 0.0
    assert book.cost_usd("mystery:model", TokenCounts(10, 10)) is None


def test_packaged_table_prices_known_models_at_their_base_tier() -> None:
    book = PriceBook()
    gpt = book.rates("openai:gpt-4o-mini")
    assert gpt is not None and gpt.source == "genai-prices"
    assert gpt.input == pytest.approx(0.15) and gpt.output == pytest.approx(0.6)
    # cached input is cheaper than fresh input and is counted inside input_tokens
    full = book.cost_usd("openai:gpt-4o-mini", TokenCounts(1_000_000, 0, 0))
    cached = book.cost_usd("openai:gpt-4o-mini", TokenCounts(1_000_000, 0, 1_000_000))
    assert full is not None and cached is not None and cached < full


def test_malformed_pricing_table_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('[pricing."openai:x"]\ninput_usd_per_mtok = 1.0\n')
    with pytest.raises(ConfigError, match="output_usd_per_mtok"):
        load_settings(env={"ACAGENT_HOME": str(tmp_path)})


def test_limits_from_config_and_instance_cap(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        "[limits]\nsession_usd = 5.0\ndaily_usd = 20.0\nmax_sessions = 3\nmax_llm_calls = 2\n"
    )
    s = load_settings(env={"ACAGENT_HOME": str(tmp_path)})
    assert s.limits.session_usd == 5.0 and s.limits.daily_usd == 20.0 and s.limits.max_llm_calls == 2
    assert s.max_sessions == 3
    assert load_settings(env={"ACAGENT_HOME": str(tmp_path), "ACAGENT_MAX_SESSIONS": "9"}).max_sessions == 9
    (tmp_path / "config.toml").write_text("[limits]\nsession_usd = -1\n")
    with pytest.raises(ConfigError, match=r"\[limits\]\.session_usd"):
        load_settings(env={"ACAGENT_HOME": str(tmp_path)})


def test_session_override_only_accepts_session_caps() -> None:
    base = Limits(session_usd=1.0, daily_usd=3.0)
    raised = base.for_session({"session_usd": 2.0})
    assert raised.session_usd == 2.0 and raised.daily_usd == 3.0
    with pytest.raises(ValueError, match="daily_usd"):
        base.for_session({"daily_usd": 100.0})


@pytest.mark.parametrize(
    ("limits", "session", "daily", "turns", "estimate", "scope", "cap"),
    [
        (
            Limits(session_usd=1.0),
            UsageTotals(cost_usd=0.9, calls=1),
            UsageTotals(),
            1,
            CallEstimate(10, 0.2),
            "session",
            "session_usd",
        ),
        (
            Limits(daily_usd=1.0),
            UsageTotals(),
            UsageTotals(cost_usd=0.95, calls=3),
            1,
            CallEstimate(10, 0.1),
            "daily",
            "daily_usd",
        ),
        (
            Limits(session_tokens=100),
            UsageTotals(input_tokens=80, calls=1),
            UsageTotals(),
            1,
            CallEstimate(30, 0.0),
            "session",
            "session_tokens",
        ),
        (Limits(session_turns=2), UsageTotals(), UsageTotals(), 3, None, "session", "session_turns"),
        (
            Limits(session_usd=1.0),
            UsageTotals(cost_usd=1.0, calls=1),
            UsageTotals(),
            2,
            None,
            "session",
            "session_usd",
        ),
    ],
)
def test_cap_stops_the_call_that_would_exceed_it(limits, session, daily, turns, estimate, scope, cap) -> None:
    exc = check_budget(limits, session=session, daily=daily, turns=turns, estimate=estimate, model="openai:m")
    assert exc is not None and exc.code == "budget_exceeded" and exc.status_code == 429
    assert exc.detail["scope"] == scope and exc.detail["cap"] == cap
    assert {"limit", "used"} <= set(exc.detail)


def test_under_the_cap_passes_and_unpriced_model_is_refused_by_default() -> None:
    ok = check_budget(
        Limits(session_usd=1.0),
        session=UsageTotals(cost_usd=0.5),
        daily=UsageTotals(),
        turns=1,
        estimate=CallEstimate(10, 0.1),
        model="openai:m",
    )
    assert ok is None
    refused = check_budget(
        Limits(daily_usd=1.0),
        session=UsageTotals(),
        daily=UsageTotals(),
        turns=1,
        estimate=CallEstimate(10, None),
        model="openai:mystery",
    )
    assert (
        refused is not None
        and refused.detail["reason"] == "price_unknown"
        and "openai:mystery" in refused.message
    )
    allowed = check_budget(
        Limits(daily_usd=1.0, unpriced="allow"),
        session=UsageTotals(),
        daily=UsageTotals(),
        turns=1,
        estimate=CallEstimate(10, None),
        model="openai:mystery",
    )
    assert allowed is None
    assert (
        check_budget(
            Limits(),
            session=UsageTotals(),
            daily=UsageTotals(),
            turns=99,
            estimate=CallEstimate(10, None),
            model="x:y",
        )
        is None
    )


async def test_usage_rows_are_committed_with_their_event_and_summed(tmp_path: Path) -> None:
    j = await SqliteJournal.open(tmp_path / "acagent.db")
    try:
        rows = []
        for title in ("one", "two"):
            row, _ = await j.create_session(cwd=str(tmp_path), model="openai:m", title=title)
            rows.append(row)
            for i in range(3):
                await j.commit_unfenced(
                    row.id,
                    [
                        (
                            "usage",
                            {"turn_id": "t", "input_tokens": 100, "output_tokens": 10, "total_tokens": 110},
                        )
                    ],
                    ops=[
                        RecordUsage(
                            f"{row.id}|{i}", "openai:m", 100, 10, cached_input_tokens=40, cost_usd=0.01
                        )
                    ],
                    reason="test",
                )
        await j.commit_unfenced(
            rows[0].id, [], ops=[RecordUsage("late", "openai:unknown-model-q", 5, 5)], reason="test"
        )
        one = await j.usage_totals(session_id=rows[0].id)
        assert one.calls == 4 and one.input_tokens == 305 and one.cached_input_tokens == 120
        assert one.cost_usd == pytest.approx(0.03) and one.unpriced_calls == 1
        assert one.to_dict()["cost_complete"] is False
        today = await j.usage_totals(day=local_day())
        assert today.calls == 7 and today.cost_usd == pytest.approx(0.06)
        assert (await j.get_session(rows[0].id)).input_tokens == 305  # the session totals move too
        book = PriceBook({"openai:unknown-model-q": {"input_usd_per_mtok": 1e6, "output_usd_per_mtok": 0}})
        priced = await j.usage_totals(session_id=rows[0].id, price=book.price)
        assert priced.unpriced_calls == 0 and priced.cost_usd == pytest.approx(5.03)
        report = await j.usage_report(by="session")
        assert [t for _, t, _ in report] == ["one", "two"]  # "one" was used last
        by_model = {k: t for k, _, t in await j.usage_report(by="model")}
        assert by_model["openai:m"].calls == 6
        await j.set_session_limits(rows[1].id, {"session_usd": 2.0})
        assert await j.session_limits(rows[1].id) == {"session_usd": 2.0}
        assert await j.session_limits(rows[0].id) == {}
    finally:
        await j.aclose()


async def test_migration_backfills_usage_events_journaled_before_it(tmp_path: Path) -> None:
    db_path = tmp_path / "acagent.db"
    db = sqlite3.connect(db_path, isolation_level=None)  # a database from before m003: m001, m002
    db.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    for fn in MIGRATIONS[:2]:
        db.execute("BEGIN")
        fn(db)
        db.execute("INSERT INTO migrations VALUES (?, '2026-01-01T00:00:00Z')", (fn.__name__,))
        db.execute("COMMIT")
    sid, ts = "ses_old", "2026-01-02T03:04:05.000000Z"
    db.execute(
        "INSERT INTO session (id, cwd, model, status, created_at, updated_at, last_seq)"
        " VALUES (?, ?, 'anthropic:claude-x', 'done', ?, ?, 2)",
        (sid, str(tmp_path), ts, ts),
    )
    usage = {"turn_id": "t", "input_tokens": 7, "output_tokens": 3, "total_tokens": 10}
    for seq, (typ, payload) in enumerate([("session.created", {}), ("usage", usage)], 1):
        db.execute("INSERT INTO event VALUES (?, ?, ?, ?, ?)", (sid, seq, ts, typ, json.dumps(payload)))
    db.close()
    j = await SqliteJournal.open(db_path)  # m003 backfills, m007–m008 move the rows
    try:
        totals = await j.usage_totals(session_id=sid)
        assert (totals.calls, totals.input_tokens, totals.output_tokens, totals.unpriced_calls) == (
            1,
            7,
            3,
            1,
        )
    finally:
        await j.aclose()


def test_usage_cli_json_matches_the_journal(cli, tmp_path: Path) -> None:
    import anyio

    async def seed() -> None:
        j = await SqliteJournal.open(cli.home / "acagent.db")
        try:
            row, _ = await j.create_session(cwd=str(tmp_path), model="openai:m", title="seeded")
            await j.commit_unfenced(
                row.id, [], ops=[RecordUsage("r1", "openai:m", 1000, 100, cost_usd=0.5)], reason="test"
            )
            await j.commit_unfenced(
                row.id, [], ops=[RecordUsage("r2", "openai:gpt-4o-mini", 1_000_000, 0)], reason="test"
            )
        finally:
            await j.aclose()

    anyio.run(seed)
    proc = cli("usage", "--json", check=True)
    data = json.loads(proc.stdout)
    assert data["total"]["calls"] == 2 and data["total"]["input_tokens"] == 1_001_000
    # the late-priced row uses the packaged table: 1M input tokens of gpt-4o-mini = $0.15
    assert data["total"]["cost_usd"] == pytest.approx(0.65) and data["total"]["cost_complete"] is True
    assert data["rows"][0]["title"] == "seeded"
    by_day = json.loads(cli("usage", "--json", "--by", "day", "--since", "today", check=True).stdout)
    assert by_day["rows"][0]["day"] == local_day()
    bad = cli("usage", "--since", "last tuesday")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "--since" in bad.stderr
    far = cli("usage", "--json", "--since", "99999999d")  # was an OverflowError traceback: from the start
    assert far.returncode == 0 and json.loads(far.stdout)["total"]["calls"] == 2, far.stderr
    text = cli("usage", check=True).stdout
    assert "seeded" in text and "$0.6500" in text
