"""``acagent usage [--since DATE] [--by session|model|day] [--json]``: tokens and cost from the journal."""

from __future__ import annotations

import sys
from datetime import date, timedelta
from typing import Annotated, Any

import typer

from acagent.cli._app import app, fail
from acagent.cli._common import build_settings, run_async

__all__ = ["parse_since", "usage_command"]


def parse_since(value: str | None) -> str | None:
    """``--since``: ``YYYY-MM-DD``, ``today``, ``yesterday`` or ``Nd`` (N days back) → ``YYYY-MM-DD``.

    Raises:
        ValueError: anything else (the message shows the accepted forms).
    """
    if value is None:
        return None
    v = value.strip().lower()
    today = date.today()
    if v == "today":
        return today.isoformat()
    if v == "yesterday":
        return (today - timedelta(days=1)).isoformat()
    if v.endswith("d") and v[:-1].isdigit():  # more days than the calendar holds: from its start
        return (today - timedelta(days=min(int(v[:-1]), (today - date.min).days))).isoformat()
    try:
        return date.fromisoformat(v).isoformat()
    except ValueError:
        raise ValueError(f"--since {value!r}: use YYYY-MM-DD, today, yesterday or Nd (e.g. 7d)") from None


def _cost(totals: dict[str, Any]) -> str:
    cost = totals["cost_usd"]
    if cost is None:
        return "unknown"
    return f"${cost:.4f}" + ("" if totals["cost_complete"] else "+")


@app.command("usage")
def usage_command(
    since: Annotated[
        str | None, typer.Option("--since", help="First local day to count: YYYY-MM-DD, today, 7d, …")
    ] = None,
    by: Annotated[str, typer.Option("--by", help="Group by session, model or day.")] = "session",
    json_out: Annotated[
        bool, typer.Option("--json", help="Print JSON: {rows: [...], total: {...}}.")
    ] = False,
) -> None:
    """Tokens and cost of LLM calls, from the journal (all sessions of this data dir)."""
    if by not in ("session", "model", "day"):
        fail(f"--by must be session, model or day (got {by!r})", 2)
    try:
        since_day = parse_since(since)
    except ValueError as exc:
        fail(str(exc), 2)
    settings = build_settings()

    async def go() -> tuple[list[Any], Any]:
        from acagent.store import SqliteJournal
        from acagent.store._usage import UsageTotals
        from acagent.usage import PriceBook

        prices = PriceBook(settings.pricing)

        from acagent.store._select import refuse_upgrade_under_older_daemon

        refuse_upgrade_under_older_daemon(settings.home, settings.db_path)
        journal = await SqliteJournal.open(
            settings.db_path, durability=settings.durability, busy_timeout_ms=settings.timing.busy_timeout_ms
        )
        try:
            rows = await journal.usage_report(since_day=since_day, by=by, price=prices.price)
        finally:
            await journal.aclose()
        total = UsageTotals(
            *(sum(getattr(t, f) for _, _, t in rows) for f in UsageTotals.__dataclass_fields__)
        )
        return rows, total

    rows, total = run_async(go)
    out_rows = [
        {by: key, **({"title": title} if by == "session" else {}), **t.to_dict()} for key, title, t in rows
    ]
    if json_out:
        import orjson

        payload = {"by": by, "since": since_day, "rows": out_rows, "total": total.to_dict()}
        sys.stdout.write(orjson.dumps(payload).decode() + "\n")
        return
    from rich.console import Console
    from rich.table import Table

    from acagent.render._sessions import plain_cell

    table = Table(box=None, pad_edge=False)
    table.add_column(by, no_wrap=True, overflow="fold")
    if by == "session":
        table.add_column("title", overflow="ellipsis", max_width=40)
    for col in ("calls", "input", "cached", "output", "cost"):
        table.add_column(col, justify="right", no_wrap=True)
    for row in [*out_rows, {by: "total", "title": "", **total.to_dict()}]:
        cells: list[Any] = [plain_cell(row[by])] + ([plain_cell(row.get("title"))] if by == "session" else [])
        cells += [str(row["calls"]), str(row["input_tokens"]), str(row["cached_input_tokens"])]
        cells += [str(row["output_tokens"]), _cost(row)]
        table.add_row(*cells)
    Console(soft_wrap=True).print(table)
    if not total.to_dict()["cost_complete"]:
        sys.stdout.write("(+ = some calls have no known price; see docs/limits.md)\n")
