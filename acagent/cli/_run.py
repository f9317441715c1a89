"""``acagent run [PROMPT]``: one turn, non-interactive.

Prints the final answer (exit 0) or a one-line error (exit 1; 130 when interrupted). ``--json``
prints every event envelope of the turn as one JSON line instead. ``--resume ID`` with no
PROMPT finishes the session's interrupted turn. Approvals: ``--yes`` runs tools without asking;
otherwise a terminal on stdin is asked (y/n/a), and without one the call is denied with a note.
"""

from __future__ import annotations

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

__all__ = ["run_command"]


@app.command("run")
def run_command(
    prompt: Annotated[
        str | None, typer.Argument(help="The message; omit with --resume to finish an interrupted turn.")
    ] = None,
    model: ModelOption = None,
    base_url: BaseUrlOption = None,
    resume: ResumeOption = None,
    continue_: ContinueOption = False,
    yes: YesOption = False,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print every event envelope as one JSON line.")
    ] = False,
    tools: ToolsOption = None,
) -> None:
    """Run one turn and print the final answer."""
    check_session_flags(resume, continue_, tools)
    if prompt is None and not resume and not continue_:
        fail("give a PROMPT, or --resume ID to finish an interrupted turn", 2)
    if prompt is not None and not prompt.strip():
        fail("the prompt is empty; give the model something to answer", 2)
    settings = build_settings(model=model, base_url=base_url, auto_approve=yes or None, tools=tools)
    code = run_async(lambda: _run(settings, prompt, resume, continue_, json_out, model))
    raise typer.Exit(code)


async def _run(
    settings: Any,
    prompt: str | None,
    resume: str | None,
    continue_: bool,
    json_out: bool,
    model: str | None = None,
) -> int:
    import contextlib

    import anyio
    import orjson

    from acagent.errors import ApprovalNotFound

    interactive = sys.stdin.isatty()
    async with open_client(
        settings, resume=resume, continue_=continue_, interactive=interactive, model_flag=model
    ) as opened:
        client = opened.client
        ended: dict[str, Any] = {}
        changed = anyio.Event()
        turn_id: str | None = None

        async def consume() -> None:
            nonlocal changed
            async for event in client.events(0 if opened.created else opened.last_seq):
                if json_out:
                    sys.stdout.write(orjson.dumps(event.to_dict()).decode() + "\n")
                    sys.stdout.flush()
                p = event.payload
                if event.type == "approval.requested":
                    decision = "allow" if settings.auto_approve else await _ask_approval(p, interactive)
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
            try:
                turn_id = await client.send(prompt)
                while turn_id not in ended:
                    await changed.wait()
            finally:
                tg.cancel_scope.cancel()
        event = ended.get(turn_id or "")
        wait_idle = getattr(client, "wait_idle", None)
        if wait_idle is not None:
            await wait_idle()
    if event is None:
        return 1
    if event.type == "turn.completed":
        if not json_out:
            text = event.payload.get("text") or ""
            sys.stdout.write(text + ("\n" if not text.endswith("\n") else ""))
        return 0
    if event.type == "turn.interrupted":
        if not json_out:
            sys.stderr.write(
                f"acagent: error: the turn was interrupted ({event.payload.get('reason', 'user')})\n"
            )
        return 130
    if not json_out:
        sys.stderr.write(f"acagent: error: {event.payload.get('message', 'the turn failed')}\n")
    return 1


async def _ask_approval(payload: dict[str, Any], interactive: bool) -> str:
    import anyio

    if not interactive:
        return "deny"
    from acagent.render import approval_text, safe_text

    name = safe_text(str(payload.get("name"))).text
    question = f"Allow {name}?\n{approval_text(payload)}\n[y]es / [n]o / [a]lways: "

    def ask() -> str:
        sys.stderr.write(question)
        sys.stderr.flush()
        answer = sys.stdin.readline().strip().lower()
        return {"y": "allow", "yes": "allow", "a": "always", "always": "always"}.get(answer, "deny")

    return await anyio.to_thread.run_sync(ask)
