"""``acagent run [PROMPT | -]``: one turn, non-interactive.

The prompt is the argument, or stdin when the argument is ``-`` or stdin is a pipe or a file.
Prints the final answer (exit 0) or a one-line error (exit 1; 130 when interrupted).
``--output-format``: ``text`` (the answer), ``json`` (one JSON object when the turn ends:
``session_id``, ``turn_id``, ``outcome``, ``text``, ``exit_code``, the end event's payload) or
``stream-json`` (every event envelope as one JSON line; ``--json`` is ``stream-json``).
``--resume ID`` with no PROMPT finishes the session's interrupted turn.

Approvals: ``--yes`` runs tools without asking; otherwise a terminal on stdin is asked (y/n/a).
With no terminal to ask, the turn is cancelled (``turn.interrupted`` reason ``no_terminal``), a
note names the fix on stderr and the exit code is 3 (:data:`EXIT_NO_TERMINAL`).
"""

from __future__ import annotations

import os
import stat
import sys
from typing import Annotated, Any

import typer

from acagent.cli._app import app, fail
from acagent.cli._common import (
    TURN_END,
    BaseUrlOption,
    ContinueOption,
    ModelOption,
    ResumeOption,
    ToolsOption,
    YesOption,
    build_settings,
    check_session_flags,
    open_client,
    run_async,
)

__all__ = ["EXIT_NO_TERMINAL", "NO_TERMINAL_NOTE", "run_command"]

EXIT_NO_TERMINAL = 3
"""Exit code of ``run`` when a tool needed approval and there was no terminal to ask."""
NO_TERMINAL_NOTE = "no terminal to ask: pass --yes or add an allow rule"
NO_TERMINAL_REASON = "no_terminal"
"""``turn.interrupted`` reason of such a turn."""
_FORMATS = ("text", "json", "stream-json")


@app.command("run")
def run_command(
    prompt: Annotated[
        str | None,
        typer.Argument(
            help="The message; `-` (or a pipe on stdin) reads it from stdin; omit with --resume to "
            "finish an interrupted turn."
        ),
    ] = None,
    model: ModelOption = None,
    base_url: BaseUrlOption = None,
    resume: ResumeOption = None,
    continue_: ContinueOption = False,
    yes: YesOption = False,
    json_out: Annotated[bool, typer.Option("--json", help="Same as --output-format stream-json.")] = False,
    output_format: Annotated[
        str | None,
        typer.Option("--output-format", help="text (the answer), json (one object) or stream-json (events)."),
    ] = None,
    tools: ToolsOption = None,
    max_usd: Annotated[
        float | None,
        typer.Option("--max-usd", help="This session's spending cap in USD (kept in the journal).", min=0),
    ] = None,
) -> None:
    """Run one turn and print the final answer."""
    check_session_flags(resume, continue_, tools)
    fmt = _output_format(output_format, json_out)
    prompt = _prompt_text(prompt, bool(resume or continue_))
    settings = build_settings(model=model, base_url=base_url, auto_approve=yes or None, tools=tools)
    code = run_async(lambda: _run(settings, prompt, resume, continue_, fmt, model, max_usd))
    raise typer.Exit(code)


async def _set_session_cap(settings: Any, client: Any, session_id: str, max_usd: float) -> None:
    """``--max-usd``: store the session's own ``session_usd`` cap (docs/limits.md)."""
    from acagent.store._usage import caps_store

    registry = getattr(client, "registry", None)
    if registry is not None:
        await caps_store(registry.journal).set_session_limits(session_id, {"session_usd": max_usd})
        return
    from acagent.store._select import open_journal  # a daemon drives the session: same journal

    journal = await open_journal(settings)
    try:
        await caps_store(journal).set_session_limits(session_id, {"session_usd": max_usd})
    finally:
        await journal.aclose()


def _output_format(output_format: str | None, json_out: bool) -> str:
    if output_format is not None and output_format not in _FORMATS:
        fail(f"--output-format takes text, json or stream-json, not {output_format!r}", 2)
    if json_out and output_format not in (None, "stream-json"):
        fail("--json is --output-format stream-json; give one of them", 2)
    return "stream-json" if json_out else (output_format or "text")


def _stdin_has_input() -> bool:
    """stdin is a pipe or a regular file (not a terminal, not /dev/null or a closed descriptor)."""
    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (OSError, ValueError, AttributeError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISREG(mode) or stat.S_ISSOCK(mode)


def _prompt_text(prompt: str | None, resuming: bool) -> str | None:
    """The prompt from the argument or stdin (exits 2 with a message when there is none)."""
    if prompt == "-" or (prompt is None and _stdin_has_input()):
        prompt = sys.stdin.read()
        if not prompt.strip() and resuming:
            return None  # nothing piped: finish the interrupted turn
        if not prompt.strip():
            fail("stdin held no prompt; pipe some text or give a PROMPT", 2)
        return prompt
    if prompt is None and not resuming:
        fail("give a PROMPT (or - to read it from stdin), or --resume ID to finish an interrupted turn", 2)
    if prompt is not None and not prompt.strip():
        fail("the prompt is empty; give the model something to answer", 2)
    return prompt


async def _run(
    settings: Any,
    prompt: str | None,
    resume: str | None,
    continue_: bool,
    fmt: str,
    model: str | None = None,
    max_usd: float | None = None,
) -> int:
    import contextlib

    import anyio
    import orjson

    from acagent.errors import AcagentError, ApprovalNotFound

    interactive = sys.stdin.isatty()
    stream_json = fmt == "stream-json"
    async with open_client(
        settings, resume=resume, continue_=continue_, interactive=interactive, model_flag=model
    ) as opened:
        client = opened.client
        if max_usd is not None:
            await _set_session_cap(settings, client, opened.session_id, max_usd)
        ended: dict[str, Any] = {}
        changed = anyio.Event()
        turn_id: str | None = None
        refused: list[dict[str, Any]] = []
        prompts: list[Any] = []  # cancel scopes of open approval prompts (Ctrl-C cancels them)

        async def consume() -> None:
            nonlocal changed
            async for event in client.events(0 if opened.created else opened.last_seq):
                if stream_json:
                    sys.stdout.write(orjson.dumps(event.to_dict()).decode() + "\n")
                    sys.stdout.flush()
                p = event.payload
                if event.type == "error" and str(p.get("code", "")).startswith("mcp_") and not stream_json:
                    sys.stderr.write(f"acagent: warning: {p.get('message')}\n")  # docs/mcp.md
                if event.type == "approval.requested" and not refused:
                    if not settings.auto_approve and not interactive:
                        refused.append(p)  # no one to ask: end the turn, exit 3 (module docstring)
                        with contextlib.suppress(AcagentError):
                            await _cancel(client, opened.remote, p.get("turn_id"))
                    else:
                        with anyio.CancelScope() as prompt:
                            prompts.append(prompt)
                            decision = (
                                "allow" if settings.auto_approve else await _ask_approval(p, interactive)
                            )
                        prompts.remove(prompt)
                        if not prompt.cancelled_caught:
                            with contextlib.suppress(ApprovalNotFound):
                                await client.answer(p["tool_call_id"], decision)
                if event.type in TURN_END:
                    ended[p.get("turn_id") or ""] = event
                    changed.set()
                    changed = anyio.Event()
                    if p.get("turn_id") == turn_id:
                        return

        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            target: list[str] = []  # the turn a Ctrl-C cancels, once known
            tg.start_soon(_cancel_on_ctrl_c, client, opened.remote, prompts, target)
            try:
                turn_id = await client.send(prompt)
                target.append(turn_id)
                if refused and turn_id not in ended:
                    # A re-sent approval (a resumed turn) can reach consume() before this turn is
                    # current: that cancel missed it, and the turn would wait for an answer forever.
                    with contextlib.suppress(AcagentError):
                        await _cancel(client, opened.remote, turn_id)
                while turn_id not in ended:
                    await changed.wait()
            finally:
                tg.cancel_scope.cancel()
        event = ended.get(turn_id or "")
        wait_idle = getattr(client, "wait_idle", None)
        if wait_idle is not None:
            await wait_idle()
    code, message = _outcome(event, refused)
    if message and (not stream_json or code == EXIT_NO_TERMINAL):  # stream-json: the events say it
        sys.stderr.write(f"acagent: {message}\n")
    if fmt == "json":
        sys.stdout.write(
            orjson.dumps(_result(opened.session_id, turn_id, event, code, message)).decode() + "\n"
        )
    elif fmt == "text" and event is not None and event.type == "turn.completed":
        text = event.payload.get("text") or ""
        sys.stdout.write(text + ("\n" if not text.endswith("\n") else ""))
    return code


async def _cancel(client: Any, remote: bool, turn_id: str | None) -> None:
    if remote:  # the daemon's cancel has no reason field: the exit code and note still say it
        await client.cancel(turn_id=turn_id)
    else:
        await client.cancel(reason=NO_TERMINAL_REASON, turn_id=turn_id)


def _outcome(event: Any, refused: list[dict[str, Any]]) -> tuple[int, str | None]:
    """Exit code and the stderr line (None for a completed turn) of a turn's end event."""
    if refused:
        p = refused[0]
        what = p.get("command") or p.get("question") or p.get("name")
        from acagent.render import safe_text

        safe = safe_text(str(what))
        # Escaped once (a repr of the escaped text doubled every backslash); a line break shows as
        # \n so the message stays one line.
        shown = "'" + safe.text.replace("\n", "\\n") + "'"
        note = f"; {safe.warning}" if safe.warning else ""
        return EXIT_NO_TERMINAL, f"{NO_TERMINAL_NOTE} ({p.get('name')} needed approval: {shown}{note})"
    if event is None:
        return 1, "error: the turn ended without an end event"
    if event.type == "turn.completed":
        return 0, None
    if event.type == "turn.interrupted":
        return 130, f"error: the turn was interrupted ({event.payload.get('reason', 'user')})"
    return 1, f"error: {event.payload.get('message', 'the turn failed')}"


def _result(
    session_id: str, turn_id: str | None, event: Any, code: int, message: str | None
) -> dict[str, Any]:
    """The ``--output-format json`` object."""
    outcome = {"turn.completed": "completed", "turn.interrupted": "interrupted"}.get(
        event.type if event is not None else "", "failed"
    )
    if code == EXIT_NO_TERMINAL:
        outcome = "needs_approval"
    payload = event.payload if event is not None else {}
    return {
        "session_id": session_id,
        "turn_id": turn_id,
        "outcome": outcome,
        "text": payload.get("text", "") if outcome == "completed" else "",
        "exit_code": code,
        "error": message,
        "end": {"type": event.type, "seq": event.seq, "payload": payload} if event is not None else None,
    }


async def _ask_approval(payload: dict[str, Any], interactive: bool) -> str:

    if not interactive:
        return "deny"
    from acagent.render import approval_text, safe_text

    name = safe_text(str(payload.get("name"))).text
    question = f"Allow {name}?\n{approval_text(payload)}\n[y]es / [n]o / [a]lways: "

    sys.stderr.write(question)
    sys.stderr.flush()
    answer = (await _read_line()).strip().lower()
    return {"y": "allow", "yes": "allow", "a": "always", "always": "always"}.get(answer, "deny")


async def _read_line() -> str:
    """One line from the terminal, read on the event loop (:class:`acagent.cli._tty.StdinLines`),
    so a cancel (Ctrl-C) ends the wait at once."""
    from acagent.cli._tty import StdinLines

    return await StdinLines().readline()


async def _cancel_on_ctrl_c(client: Any, remote: bool, prompts: list[Any], target: list[str]) -> None:
    """Ctrl-C (SIGINT) at any point of ``run`` — streaming, a tool, an approval prompt — cancels
    the turn as the user's cancel (``turn.interrupted`` reason ``user``); the approval prompt is
    abandoned at once (the pending approval is closed by the cancel). A second Ctrl-C exits."""
    import signal

    import anyio

    from acagent.errors import AcagentError

    with anyio.open_signal_receiver(signal.SIGINT) as signals:
        async for _ in signals:
            sys.stderr.write("\nacagent: cancelling the turn (Ctrl-C again to quit)\n")
            sys.stderr.flush()
            try:
                with anyio.fail_after(10):
                    turn = target[0] if target else None
                    await (
                        client.cancel(turn_id=turn) if remote else client.cancel(reason="user", turn_id=turn)
                    )
            except (AcagentError, TimeoutError):
                pass
            for scope in prompts:  # the pending approval is closed by the cancel
                scope.cancel()
            break
    # The receiver is closed: a second Ctrl-C is Python's KeyboardInterrupt (exit 130).
