"""``acagent attach ID [--since N] [--json]``: follow a session served by the daemon.

``--json`` prints every event envelope as one JSON line: each seq exactly once, across
reconnects (the client reconnects by itself with its last seq, backoff capped at 10 s). A pending
approval is re-sent on every (re)connect; one whose seq is ≤ ``--since`` is printed once, with
``"replay": true``.

Without ``--json``, on a terminal, the session is shown and driven exactly as in ``acagent chat``
(:class:`~acagent.cli._ui.SessionUI` in attach mode: the history from ``--since`` first, then live,
with the same live status line and streamed markdown, derived from the same events); a turn that
another client starts is followed as it runs. Ctrl-C cancels the running turn (a second one, or
Ctrl-C / Ctrl-D on the idle prompt, detaches). With stdin not a terminal (scripts, tests) a
line-based loop reads stdin: a line of text sends a message, ``y``/``n``/``a`` answers the pending
approval (any text answers a question), EOF detaches. Exit status: 0 on detach, 1 when the daemon
is not running or the session does not exist (or stops existing).
"""

from __future__ import annotations

import contextlib
import signal
import sys
from typing import Annotated, Any

import typer

from acagent.cli._app import app, fail
from acagent.cli._common import TURN_END, build_settings, run_async
from acagent.cli._ui_input import ANSWERS

__all__ = ["attach_command"]


@app.command("attach")
def attach_command(
    session_id: Annotated[str, typer.Argument(help="Session id (or unique prefix).")],
    since: Annotated[
        int, typer.Option("--since", help="Deliver events with seq > N (exclusive).", min=0)
    ] = 0,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print every event envelope as one JSON line.")
    ] = False,
) -> None:
    """Attach to a session served by `acagent serve`: history since N, then live."""
    settings = build_settings()
    from acagent.client._discovery import DaemonUnavailable, answering_daemon

    try:
        info = answering_daemon(settings.home)
    except DaemonUnavailable as exc:  # alive but stopped or hung
        fail(exc.message)
    if info is None:
        fail(f"no daemon serves {str(settings.home)!r}; start one with `acagent serve`")
    code = run_async(lambda: _attach(settings, info, session_id, since, json_out))
    raise typer.Exit(code)


async def _attach(settings: Any, info: Any, session_id: str, since: int, json_out: bool) -> int:
    from acagent.client._remote import RemoteSessionClient, cursor_ahead, find_session

    client = RemoteSessionClient(settings.home, info, session_id)
    try:
        row = await find_session(client, session_id)
        client.session_id = str(row["id"])
        if since > int(row["last_seq"]):
            # Policy (docs/daemon.md): a cursor above the session's last seq ends attach with one
            # line and exit 1 — the streams would say the same with a stream.reset frame.
            raise cursor_ahead(client.session_id, since, row["last_seq"])
        if json_out:
            return await _follow_json(client, since)
        if sys.stdin.isatty() and sys.stdout.isatty():
            return await _terminal(settings, client, row, since)
        return await _interactive(client, row, since)
    finally:
        await client.aclose()


async def _terminal(settings: Any, client: Any, row: dict[str, Any], since: int) -> int:
    """Attach on a terminal: the chat UI in attach mode (module docstring)."""
    from rich.console import Console

    from acagent.cli._chat import first_error
    from acagent.cli._input import create_prompt_session
    from acagent.cli._slash import COMMANDS
    from acagent.cli._ui import SessionUI
    from acagent.client import Opened
    from acagent.render import EventRenderer

    console = Console(highlight=False)
    opened = Opened(client, client.session_id, False, int(row["last_seq"]), True, row.get("model"))
    ui = SessionUI(
        console,
        EventRenderer(console, echo_user=False),
        opened,
        create_prompt_session(None, COMMANDS),
        settings,
        attach=True,
        since=since,
    )
    try:
        return await ui.run()
    except BaseExceptionGroup as group:  # task groups wrap errors; show ours as one line
        error = first_error(group)
        if error is None:
            raise
        raise error from None


async def _follow_json(client: Any, since: int) -> int:
    out = sys.stdout
    async for event in client.events(since):
        out.write(event.to_json_bytes().decode() + "\n")
        out.flush()
    return 0


async def _history(client: Any, since: int) -> list[Any]:
    """Every committed event after ``since``, read page by page."""
    from acagent.events import Event

    history: list[Event] = []
    cursor = since
    while True:
        page = await client.request(
            "GET", f"/v1/sessions/{client.session_id}/events", params={"since": cursor, "limit": 5000}
        )
        history += [Event(**e) for e in page["events"]]
        if history:
            cursor = history[-1].seq
        if not page["more"]:
            return history


async def _handle_line(client: Any, state: dict[str, Any], console: Any, text: str) -> None:
    """One typed line: the answer to the pending approval or question, else a new message."""
    from rich.text import Text

    from acagent.errors import AcagentError, ApprovalNotFound, SessionBusy

    asked = state["asked"]
    pending = next((p for i, p in state["approvals"].items() if i not in asked), None)  # oldest first (F127)
    if pending is not None and (pending.get("kind") == "question" or text.strip().lower() in ANSWERS):
        asked.add(str(pending.get("tool_call_id")))
    try:
        if pending is not None and pending.get("kind") == "question" and text.strip():
            await client.answer(pending["tool_call_id"], "allow", answer=text)
        elif pending is not None and text.strip().lower() in ANSWERS:
            await client.answer(pending["tool_call_id"], ANSWERS[text.strip().lower()])
        elif text.strip():
            await client.send(text)
    except ApprovalNotFound as exc:
        console.print(Text(exc.message, style="yellow"))
    except SessionBusy:
        console.print("[yellow]a turn is running: wait for it, or Ctrl-C to cancel it[/yellow]")
    except AcagentError as exc:
        console.print(Text(exc.message, style="red"))


async def _interactive(client: Any, row: dict[str, Any], since: int) -> int:
    import anyio
    from rich.console import Console
    from rich.text import Text

    from acagent.errors import AcagentError
    from acagent.events import Event
    from acagent.render._safe import visible
    from acagent.store import ACTIVE

    console = Console(highlight=False)
    renderer: Any = None
    try:
        from acagent.render import EventRenderer

        renderer = EventRenderer(console)
    except ImportError:  # pragma: no cover - the renderer ships with acagent
        renderer = None
    state: dict[str, Any] = {"status": row.get("status"), "approvals": {}, "asked": set(), "last_sigint": 0.0}

    def track(event: Event) -> None:
        p = event.payload
        if p.get("turn_id"):
            state["turn_id"] = p["turn_id"]  # the turn a Ctrl-C targets (never a later one)
        if event.type == "session.status":
            state["status"] = p.get("status")
        elif event.type == "approval.requested":
            state["approvals"][str(p.get("tool_call_id"))] = p
        elif event.type == "approval.resolved":
            state["approvals"].pop(str(p.get("tool_call_id")), None)
        elif event.type in TURN_END:
            state["approvals"].clear()

    def draw(event: Event) -> None:
        track(event)
        if renderer is not None:
            renderer.render(event)
        else:  # pragma: no cover - fallback when acagent.render is missing
            console.print(Text(f"[{event.seq}] {event.type} {event.payload.get('text') or ''}"))

    console.print(  # Text, not markup: a cwd such as /tmp/a[/x] is a closing tag (MarkupError)
        Text(
            f"attached to {client.session_id} ({row.get('status')}, {visible(str(row.get('cwd')))}). Type a "
            "message and press Enter; y/n/a answers an approval; Ctrl-C cancels the turn; Ctrl-D exits.",
            style="dim",
        )
    )
    # History first (committed messages instead of their deltas), then live from where it ended.
    history = await _history(client, since)
    cursor = history[-1].seq if history else since
    for event in history:
        track(event)
    if renderer is not None:
        renderer.render_history(history)
    exit_code = 0

    async with anyio.create_task_group() as tg:

        async def consume() -> None:
            nonlocal exit_code
            try:
                async for event in client.events(cursor):
                    if getattr(event, "replay", False) and since < event.seq <= cursor:
                        continue  # a pending approval already drawn with the history
                    draw(event)
            except AcagentError as exc:
                console.print(Text(f"acagent: error: {exc.message}", style="red"))
                exit_code = 1
            tg.cancel_scope.cancel()

        async def read_input() -> None:
            from acagent.cli._tty import StdinLines

            lines = StdinLines()  # never a thread in readline: it would hold the exit until Enter
            while True:
                line = await lines.readline()
                if not line:
                    tg.cancel_scope.cancel()
                    return
                await _handle_line(client, state, console, line.rstrip("\n"))

        async def on_sigint() -> None:
            with anyio.open_signal_receiver(signal.SIGINT) as signals:
                async for _ in signals:
                    now = anyio.current_time()
                    running = state["status"] in ACTIVE
                    if not running or now - state["last_sigint"] < 1.5:
                        tg.cancel_scope.cancel()
                        return
                    state["last_sigint"] = now
                    console.print("\n[yellow]cancelling the turn… (Ctrl-C again to detach)[/yellow]")
                    with contextlib.suppress(AcagentError):
                        await client.cancel(turn_id=state.get("turn_id"))

        tg.start_soon(consume)
        tg.start_soon(read_input)
        tg.start_soon(on_sigint)
    if renderer is not None:
        renderer.finish_line()
    return exit_code
