"""``acagent sessions list`` and ``acagent sessions show``: session tables and details (rich)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from acagent.events import Event
from acagent.render._approval import safe_rich
from acagent.render._live import EventRenderer
from acagent.render._safe import safe_text, visible
from acagent.render._status import context_fill, fill_text

__all__ = ["plain_cell", "sessions_table", "show_session", "status_style", "summarize_steps"]

_STATUS_STYLE = {
    "pending": "dim",
    "running": "yellow",
    "waiting_tool": "yellow",
    "waiting_user": "bold yellow",
    "done": "green",
    "cancelled": "yellow",
    "failed": "red",
}


def status_style(status: str) -> str:
    """The rich style a session status is shown in."""
    return _STATUS_STYLE.get(status, "")


def _short_ts(ts: Any) -> str:
    """``2026-11-29T21:13:27.8Z`` → ``2026-11-29 21:13:27`` (other values as ``str``)."""
    text = "" if ts is None else str(ts)
    if len(text) >= 19 and text[10] == "T":
        return text[:10] + " " + text[11:19]
    return text


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def _get(obj: Any, name: str, default: Any = None) -> Any:
    """A field of a row dataclass or of its dict form (HTTP answers)."""
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def sessions_table(
    rows: Sequence[dict[str, Any]], show_cwd: bool = False, *, console: Console | None = None
) -> None:
    """Print sessions (``SessionRow.to_public()`` dicts, newest first) as a table.

    Args:
        rows: the sessions.
        show_cwd: add a working-directory column (``sessions list --all``).
        console: where to print (default: stdout).
    """
    console = console or Console()
    if not rows:
        console.print(
            Text("no sessions" + ("" if show_cwd else " in this directory (try --all)"), style="dim")
        )
        return
    table = Table(box=None, pad_edge=False, header_style="bold")
    id_width = max(len(str(row.get("id", ""))) for row in rows)
    table.add_column("id", no_wrap=True, min_width=id_width)  # never cut: the title gives way
    status_width = max(len(str(row.get("status", ""))) for row in rows)
    table.add_column("status", no_wrap=True, min_width=max(6, status_width))
    table.add_column("updated", no_wrap=True, min_width=19)
    table.add_column("seq", justify="right", no_wrap=True, min_width=3)
    if show_cwd:
        table.add_column("cwd", overflow="fold", ratio=1)
    table.add_column("title", overflow="ellipsis", no_wrap=True, ratio=1)
    for row in rows:
        status = str(row.get("status", ""))
        cells: list[Any] = [
            plain_cell(row.get("id", "")),
            Text(status, style=status_style(status)),
            _short_ts(row.get("updated_at")),
            str(row.get("last_seq", "")),
        ]
        if show_cwd:
            cells.append(plain_cell(row.get("cwd")))
        cells.append(plain_cell(row.get("title")))
        table.add_row(*cells)
    console.print(table)


def plain_cell(value: Any) -> Text:
    """A table cell showing ``value`` as it is: never read as rich markup (a title ``[/x]`` raised
    ``MarkupError``, ``[link=…]`` made a link) and with control and bidi characters escaped (an
    ``ESC`` in a title reached the terminal) — titles come from prompts, imports and the HTTP API."""
    return Text(visible("" if value is None else str(value)))


def summarize_steps(steps: Iterable[Any]) -> list[dict[str, Any]]:
    """Group step attempt rows by ``step_id`` (first-seen order).

    Returns:
        One dict per LLM step: ``step_id``, ``turn_id``, ``attempts`` (rows), ``retries``
        (attempts - 1), ``status`` (of the last attempt), ``error`` (the last error seen).
    """
    grouped: dict[str, dict[str, Any]] = {}
    for row in steps:
        step_id = str(_get(row, "step_id"))
        entry = grouped.setdefault(
            step_id, {"step_id": step_id, "turn_id": _get(row, "turn_id"), "attempts": [], "error": None}
        )
        entry["attempts"].append(row)
        if _get(row, "error"):
            entry["error"] = _get(row, "error")
    for entry in grouped.values():
        entry["attempts"].sort(key=lambda r: int(_get(r, "attempt", 0) or 0))
        entry["retries"] = len(entry["attempts"]) - 1
        entry["status"] = _get(entry["attempts"][-1], "status")
    return list(grouped.values())


def _cost_text(usage: dict[str, Any]) -> str:
    """``$0.0123`` (``+`` when part of it is unknown), ``unknown``, or ``$0`` before any call."""
    if "cost_usd" not in usage:
        return "unknown"
    cost = usage.get("cost_usd")
    if cost is None:
        return "unknown (no price for this model; docs/limits.md)"
    return f"${cost:.4f}" + ("" if usage.get("cost_complete", True) else "+ (some calls unpriced)")


def _context_text(events: Sequence[Event]) -> str:
    """The context fill of the last request (the runner's estimate), or ``unknown``."""
    fill = context_fill(events)
    if fill is None:
        return "unknown (no model call recorded it yet)"
    return fill_text(*fill, long=True) + " (estimated, last request)"


def show_session(
    info: dict[str, Any],
    steps: Sequence[Any],
    approvals: Sequence[Any],
    events: Sequence[Event],
    *,
    console: Console | None = None,
) -> None:
    """Print one session: status, model, usage, LLM attempts per step, pending approvals, history.

    Args:
        info: ``SessionRow.to_public()``.
        steps: ``step`` rows (:class:`~acagent.store.StepRow` or dicts), any order.
        approvals: pending ``tool_call`` rows (:class:`~acagent.store.ToolCallRow` or dicts).
        events: the session's events, ascending ``seq``.
        console: where to print (default: stdout).
    """
    console = console or Console()
    status = str(info.get("status", ""))
    head = Text()
    head.append(str(info.get("id", "")), style="bold")
    head.append("  ")
    head.append(status, style=status_style(status))
    if info.get("archived"):
        head.append("  archived", style="dim")
    console.print(head, highlight=False)
    usage = info.get("usage") or {}
    summary = summarize_steps(steps)
    retries = sum(s["retries"] for s in summary)
    fields = [
        ("title", info.get("title") or ""),
        ("model", info.get("model") or "(default)"),
        ("cwd", info.get("cwd") or ""),
        ("created", _short_ts(info.get("created_at"))),
        ("updated", _short_ts(info.get("updated_at"))),
        ("last seq", str(info.get("last_seq", ""))),
        (
            "usage",
            f"{int(usage.get('input_tokens') or 0):,} in · {int(usage.get('output_tokens') or 0):,} out tokens",
        ),
        ("cost", _cost_text(usage)),
        ("context", _context_text(events)),
        (
            "llm calls",
            _plural(len(summary), "step")
            + ", "
            + _plural(sum(len(s["attempts"]) for s in summary), "attempt")
            + ", "
            + _plural(retries, "retry", "retries"),
        ),
    ]
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column()
    for label, value in fields:
        grid.add_row(label, plain_cell(value))
    console.print(grid)
    for warning in info.get("warnings") or []:
        if isinstance(warning, dict):  # a recorded warning: its message and code, not the dict
            warning = f"{warning.get('message', warning)} [{warning.get('code', 'warning')}]"
        console.print(Text(f"⚠ {visible(str(warning))}", style="yellow"), highlight=False)

    if summary:
        _print_steps(console, summary)

    if approvals:
        console.print()
        console.print(Text("Pending approvals", style="bold yellow"))
        for row in approvals:
            args = _get(row, "arguments")
            if isinstance(args, str):
                try:
                    args = json.loads(args)
                except ValueError:
                    pass
            shown = args.get("command") if isinstance(args, dict) and _get(row, "name") == "shell" else None
            if shown is None:
                shown = json.dumps(args, ensure_ascii=False) if not isinstance(args, str) else args
            # what is to be approved under the approval rule (acagent.render._safe): an ESC
            # sequence in a command must not erase the part of the line it hides
            line = Text(f"  {visible(str(_get(row, 'tool_call_id')))}  ")
            line.append(visible(str(_get(row, "name"))), style="bold")
            line.append("  $ " if _get(row, "name") == "shell" else "  ")
            line.append(safe_rich(str(shown)))
            console.print(line, highlight=False, no_wrap=True, overflow="ellipsis", crop=True)
            warning = safe_text(str(shown)).warning
            if warning is not None:
                console.print(Text(f"    {warning}", style="yellow"), highlight=False)
        console.print(Text("  answer with `acagent chat --resume ID` (or the web page)", style="dim"))

    console.print()
    console.rule("history", style="dim")
    EventRenderer(console).render_history(events)


def _print_steps(console: Console, summary: list[dict[str, Any]]) -> None:
    """The LLM steps table (attempts, retries, status per step) and each step's last error."""
    table = Table(title="LLM steps", title_justify="left", box=None, header_style="bold", pad_edge=False)
    for name in ("step", "turn", "attempts", "retries", "status"):
        table.add_column(name, no_wrap=True, justify="left" if name in ("turn", "status") else "right")
    for n, step in enumerate(summary, 1):
        st = str(step["status"])
        table.add_row(
            str(n),
            plain_cell(step["turn_id"] or ""),
            str(len(step["attempts"])),
            Text(str(step["retries"]), style="yellow" if step["retries"] else ""),
            Text(st, style={"done": "green", "failed": "red", "inflight": "yellow"}.get(st, "")),
        )
    console.print()
    console.print(table)
    for n, step in enumerate(summary, 1):
        if step["error"]:
            console.print(
                Text(f"  step {n}: {visible(str(step['error']))}", style="dim"),
                no_wrap=True,
                overflow="ellipsis",
            )
