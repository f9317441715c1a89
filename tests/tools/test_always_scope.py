"""An ``always`` answer means exactly what the prompt said it covers (F93).

The approval request carries ``always`` — one sentence made from the very rule an ``always``
answer would create (``acagent/tools/_scope.py``) — and every view draws it: the terminal
(``chat``, ``run``, ``attach`` share ``render/_approval.py``) and the page (``static/app.js``,
checked in Chromium by ``tests/server/test_web.py``).
Through real turns (real registry, SQLite, the strict mock, the real shell tool): ``always`` on
``git status`` is said to cover ``git status …`` and then admits ``git status -s`` but asks for
``git show HEAD`` (before, it remembered all of ``git``, which the prompt never said).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from acagent.render._approval import approval_text
from acagent.runner import SessionRegistry
from acagent.settings import load_settings
from acagent.tools import ApprovalPolicy, ShellTool, ToolContext
from tests.mockprovider import MockProvider, TextReply, openai_tool_calls

pytestmark = pytest.mark.anyio


def _ctx(ws: Path) -> ToolContext:
    return ToolContext(cwd=ws, session_id="s", tool_call_id="t", emit_output=lambda _: None)


@pytest.mark.parametrize(
    ("command", "covers"),
    [
        ("git status", "always: any `git status …` in this workspace"),
        ("git log --oneline", "always: any `git log …` in this workspace"),
        ("ls -la", "always: any `ls …` in this workspace"),
        ("make && make test", "always: this exact command only"),
        ("sh build.sh", "always: this exact command only, for this session; until a workspace file changes"),
    ],
)
def test_the_sentence_is_made_from_the_rule(workspace: Path, command: str, covers: str) -> None:
    policy = ApprovalPolicy()
    assert covers in (policy.always_covers(ShellTool(), {"command": command}, _ctx(workspace)) or "")


async def _turn(
    reg: Any, sid: str, mock: MockProvider, command: str, answer: str | None
) -> dict[str, Any] | None:
    """One turn asking for ``command``; answers its approval (if any) with ``answer``."""
    mock.script(
        openai_tool_calls([(f"call_{abs(hash(command))}", "shell", {"command": command})]), TextReply("ok")
    )
    runner = await reg.get_runner(sid)
    start = runner.bus.last_seq
    await runner.step(f"run {command}")
    asked = None
    with anyio.fail_after(30):
        async for event in runner.subscribe("t", start):
            if event.type == "approval.requested":
                asked = event.payload
                await runner.answer_approval(asked["tool_call_id"], answer or "deny")
            if event.type in ("turn.completed", "turn.interrupted", "turn.failed"):
                break
    await runner.wait()
    return asked


async def test_always_on_git_status_covers_git_status_only_f93(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    settings = load_settings(
        {"home": str(tmp_path / "home"), "base_url": mock.openai_base_url, "model": "openai:mock"}, env={}
    )
    async with SessionRegistry.open(settings) as reg:
        sid = (await reg.create_session(workspace)).id
        asked = await _turn(reg, sid, mock, "git status", "always")
        assert asked is not None
        assert asked["always"].startswith("always: any `git status …` in this workspace"), asked
        assert asked["always"] in approval_text(asked)  # what chat, run and attach draw
        assert await _turn(reg, sid, mock, "git status -s", None) is None  # covered: no question
        shown = await _turn(reg, sid, mock, "git show HEAD", None)  # not covered: asks
        assert shown is not None and shown["always"].startswith("always: any `git show …`"), shown
        protected = await _turn(reg, sid, mock, "ls -la", None)
        assert protected is not None and "any `ls …`" in protected["always"]
