"""``acagent chat``: an interactive terminal session (the loop itself is :mod:`acagent.cli._ui`).

``/new`` and ``/resume`` end one :class:`~acagent.cli._ui.SessionUI` with a switch; the next
session is then opened in the same process (a fresh client and history view).
"""

from __future__ import annotations

import sys
from typing import Any

import typer

from acagent.cli._app import app, fail
from acagent.cli._common import (
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

__all__ = ["chat_command", "first_error"]


@app.command("chat")
def chat_command(
    model: ModelOption = None,
    base_url: BaseUrlOption = None,
    resume: ResumeOption = None,
    continue_: ContinueOption = False,
    yes: YesOption = False,
    tools: ToolsOption = None,
) -> None:
    """Chat with the agent in this terminal (streams answers, asks before running tools)."""
    check_session_flags(resume, continue_, tools)
    if not sys.stdin.isatty():
        fail("acagent chat needs a terminal on stdin; use `acagent run PROMPT` in scripts", 2)
    settings = build_settings(model=model, base_url=base_url, auto_approve=yes or None, tools=tools)
    code = run_async(lambda: _chat(settings, resume, continue_, model))
    raise typer.Exit(code)


async def _chat(settings: Any, resume: str | None, continue_: bool, model: str | None = None) -> int:
    from rich.console import Console

    from acagent._private import private_dir, private_file
    from acagent.cli._input import create_prompt_session
    from acagent.cli._slash import COMMANDS
    from acagent.cli._ui import SessionUI
    from acagent.render import EventRenderer

    console = Console(highlight=False)
    history = private_file(private_dir(settings.home) / "history")  # owner-only before FileHistory appends
    session = create_prompt_session(history, COMMANDS)
    new = False
    try:
        while True:  # /new and /resume open another session in this process
            async with open_client(
                settings, resume=resume, continue_=continue_ and not new, interactive=True, model_flag=model
            ) as opened:
                chat = SessionUI(console, EventRenderer(console, echo_user=False), opened, session, settings)
                code = await chat.run()
            if chat.switch is None or chat.quit_code is not None:
                return code
            resume, new, continue_ = chat.switch.session_id, chat.switch.session_id is None, False
    except BaseExceptionGroup as group:  # task groups wrap errors; show ours as one line
        error = first_error(group)
        if error is None:
            raise
        raise error from None


def first_error(group: BaseExceptionGroup[Any]) -> BaseException | None:
    """The first :class:`AcagentError` (or KeyboardInterrupt) inside nested exception groups."""
    from acagent.errors import AcagentError

    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            found = first_error(exc)
            if found is not None:
                return found
        elif isinstance(exc, (AcagentError, KeyboardInterrupt)):
            return exc
    return None
