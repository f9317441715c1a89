"""Ctrl-C in ``acagent run`` under a real terminal (tmux), issue 10 item 20 (F57).

Ctrl-C at the approval prompt cancels at once (before: ignored until Enter, then the session
was left ``waiting_user``), and is journaled as the user's cancel (reason ``user``, not
``shutdown``).
"""

from __future__ import annotations

import json
import shutil
import sqlite3

import pytest

from acagent.store._frames import stored_events
from acagent.store._payload import payload_text
from tests.cli.test_chat_tmux import Tmux, term  # noqa: F401  # the tmux fixture
from tests.mockprovider import MockProvider, TextReply, openai_tool_calls

pytestmark = [
    pytest.mark.tmux,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


def test_ctrl_c_at_the_approval_prompt_cancels_at_once_as_the_users_cancel_f57(
    term: Tmux,  # noqa: F811
    mock: MockProvider,
) -> None:
    mock.script(openai_tool_calls([("call_1", "shell", {"command": "echo never > ran.txt"})]), TextReply("x"))
    term.type(f"acagent run --model openai:mock --base-url {mock.openai_base_url} 'do it'; echo EXIT=$?")
    term.wait_text("[a]lways", timeout=60)
    term.keys("C-c")
    screen = term.wait_for(lambda s: "\nEXIT=" in s, timeout=15, what="the exit code")
    assert "EXIT=130" in screen, screen
    assert "Traceback" not in screen, screen
    assert not (term.cwd / "ran.txt").exists()
    db = sqlite3.connect(term.env["ACAGENT_HOME"] + "/acagent.db")
    status = db.execute("SELECT status FROM session").fetchone()[0]
    ends = [json.loads(payload_text(p)) for _, _, _, t, p in stored_events(db) if t == "turn.interrupted"]
    approvals = [r[0] for r in db.execute("SELECT approval FROM tool_call").fetchall()]
    assert status == "cancelled"
    assert [e["reason"] for e in ends] == ["user"]
    assert approvals == ["cancelled"]
