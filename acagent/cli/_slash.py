"""Slash commands of ``acagent chat``: ``/help /model /new /sessions /resume /compact /cost
/approvals /id /exit``.

Each command is a coroutine taking the chat and the rest of the line. ``/new`` and ``/resume``
end the chat loop with :attr:`Switch` set; ``acagent chat`` then opens that session in the same
process (a fresh client and history view). ``/compact`` calls the client's or runner's
``compact`` when this build has one, and says so otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["COMMANDS", "HELP", "Switch", "run_command"]

HELP = """\
/help             this help
/model [ID]       show the model, or switch this session's next turns to PROVIDER:MODEL
/new              start a new session in this directory
/sessions         this directory's sessions
/resume [ID|N]    switch to a session (no argument: pick from /sessions)
/compact          summarize the older history to free context
/cost             tokens (and cost) used by this session
/approvals        what this session's "always" answers allow
/id               print the session id
/exit             quit (also: Ctrl-C or Ctrl-D twice on an empty prompt)
Alt+Enter, or a trailing \\, inserts a newline; Ctrl-R searches the history; Tab completes.
Ctrl-C during a turn interrupts it. Approvals: y = yes, n = no, a = always (this session)."""

COMMANDS = (
    "/help",
    "/model",
    "/new",
    "/sessions",
    "/resume",
    "/compact",
    "/cost",
    "/approvals",
    "/id",
    "/exit",
)


@dataclass
class Switch:
    """Open another session after the chat loop ends (``session_id`` None: a new one)."""

    session_id: str | None


async def run_command(chat: Any, text: str) -> str | None:
    """Run one slash command line; ``"exit"`` ends the chat loop (also after a switch)."""
    name, _, arg = text.strip().partition(" ")
    name, arg = name.lower(), arg.strip()
    if name in ("/exit", "/quit", "/q"):
        return "exit"
    handler = _HANDLERS.get(name)
    if handler is None:
        chat._note(f"unknown command {name!r}; /help lists the commands")
        return None
    return await handler(chat, arg)


async def _help(chat: Any, arg: str) -> None:
    chat.console.print(HELP, markup=False, highlight=False)


async def _id(chat: Any, arg: str) -> None:
    chat.console.print(chat.opened.session_id, markup=False, highlight=False)


def _runner_registry(chat: Any) -> Any:
    """The in-process registry (None when a daemon drives the session)."""
    return getattr(chat.client, "registry", None)


async def _model(chat: Any, arg: str) -> None:
    registry = _runner_registry(chat)
    runner = await registry.get_runner(chat.opened.session_id) if registry is not None else None
    if not arg:
        current = (getattr(runner, "model_override", None) if runner else None) or chat.opened.model
        chat._note(f"model: {current or chat.settings.model or '(default)'}")
        return
    if runner is None:
        chat._note("a daemon drives this session: its model is set where the session was created")
        return
    from acagent.cli._common import check_model
    from acagent.errors import AcagentError

    try:
        await check_model(chat.settings, arg)
    except AcagentError as exc:
        chat._error(exc)
        return
    runner.model_override = arg
    old = getattr(runner, "_provider", None)
    if old is not None:  # the provider is created once per runner: the next turn makes the new one
        runner._provider = None
        await old.aclose()
    chat.opened.model = arg
    chat._note(f"model: {arg} (for the next turns of this session)")


async def _cost(chat: Any, arg: str) -> None:
    snap = await chat.client.snapshot()
    usage = snap.get("usage") or {}
    inp, out = int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)
    line = f"this session: {inp:,} input + {out:,} output tokens"
    if usage.get("llm_calls") is not None:
        line += f" in {usage['llm_calls']} model calls"
    cost = usage.get("cost_usd", snap.get("cost_usd"))
    line += f" · ${float(cost):.4f}" if isinstance(cost, (int, float)) else " · cost: see `acagent usage`"
    chat._note(line)


async def _approvals(chat: Any, arg: str) -> None:
    registry = _runner_registry(chat)
    if registry is None:
        snap = await chat.client.snapshot()
        rules = snap.get("approval_rules")
    else:
        row = await registry.journal.get_session(chat.opened.session_id)
        rules = getattr(row, "approval_rules", None)
    if isinstance(rules, str):
        try:
            rules = json.loads(rules)
        except ValueError:
            pass
    if not rules:
        chat._note("no `always` answers in this session: every tool that needs approval asks")
        return
    from acagent.render import safe_text

    chat._note("approval rules of this session:")
    chat.console.print(safe_text(json.dumps(rules, indent=2, ensure_ascii=False)).text, markup=False)


async def _compact(chat: Any, arg: str) -> None:
    target = getattr(chat.client, "compact", None)
    if target is None and (registry := _runner_registry(chat)) is not None:
        runner = await registry.get_runner(chat.opened.session_id)
        target = getattr(runner, "compact", None)
    from acagent.errors import AcagentError

    try:
        if target is None:  # a daemon drives the session: it compacts in the background (202)
            await chat.client.request("POST", f"/v1/sessions/{chat.opened.session_id}/compact")
            chat._note("compacting the history…")
            return
        done = await target()
    except AcagentError as exc:
        chat._error(exc)
        return
    chat._note(f"compacted the history: {done['tokens_before']} → {done['tokens_after']} tokens (estimated)")


async def _list(chat: Any) -> list[dict[str, Any]]:
    registry = _runner_registry(chat)
    snap = await chat.client.snapshot()
    cwd = snap.get("cwd")
    if registry is not None:  # archived sessions are left out, as in `sessions list`
        rows = await registry.journal.list_sessions(cwd=cwd)
        return [r.to_public() for r in rows if r.archived_at is None][:20]
    rows = await chat.client.request("GET", "/v1/sessions", params={"cwd": cwd, "archived": "false"})
    return list(rows)[:20]


async def _sessions(chat: Any, arg: str) -> None:
    await _show_sessions(chat)


async def _show_sessions(chat: Any) -> list[dict[str, Any]]:
    """Print this directory's sessions (numbered, ``*`` = this one) and return them."""
    from rich.text import Text

    from acagent.render import visible

    rows = await _list(chat)
    for i, row in enumerate(rows, 1):
        mark = "*" if row["id"] == chat.opened.session_id else " "
        line = Text(f"{mark}{i:>2}  {row['id']}  ", style="bold" if mark == "*" else "")
        line.append(f"{row.get('status', '')}  ", style="dim")
        line.append(visible(str(row.get("title") or "")))  # an ESC in a title stays text
        chat.console.print(line, no_wrap=True, overflow="ellipsis", highlight=False)
    if not rows:
        chat._note("no sessions in this directory")
    return rows


async def _resume(chat: Any, arg: str) -> str | None:
    rows = await _list(chat)
    if not arg:
        await _show_sessions(chat)
        try:
            arg = (
                await chat._prompt([("ansicyan bold", "resume which (number or id)› ")], history=False) or ""
            ).strip()
        except (KeyboardInterrupt, EOFError):
            return None
        if not arg:
            return None
    if arg.isdigit() and 1 <= int(arg) <= len(rows):
        target = rows[int(arg) - 1]["id"]
    else:
        matches = [r["id"] for r in rows if r["id"].startswith(arg)]
        target = matches[0] if len(matches) == 1 else arg
    if target == chat.opened.session_id:
        chat._note("that is this session")
        return None
    chat.switch = Switch(target)
    return "exit"


async def _new(chat: Any, arg: str) -> str:
    chat.switch = Switch(None)
    return "exit"


_HANDLERS: dict[str, Callable[[Any, str], Awaitable[str | None]]] = {
    "/help": _help,
    "/id": _id,
    "/model": _model,
    "/cost": _cost,
    "/approvals": _approvals,
    "/compact": _compact,
    "/sessions": _sessions,
    "/resume": _resume,
    "/new": _new,
}
