"""F20: shell grammar never turns an approved command into an unapproved one — through the runner.

Case ``shared/cases/F20-shell-allow-list.md``. The rule itself and the generated corpus (every
separator, substitution, redirect, wrapper and write/exec option × every listed program) are
unit-tested in ``tests/tools/test_tool_policy.py``, whose command lists this module reuses. Here
every row runs as its own turn of a real session: the strict mock asks for one ``shell`` call
(argument ``command``, as in the case), the runner raises the approval, the test answers, and the
mock replies ``done``. Names: the case's ``tool.result{status:"error"}`` for a denied call is
acagent's ``tool.result`` with ``status`` ``"denied"`` and ``is_error`` true; the exact command
rides on ``approval.requested`` as ``command``.

Policy (docs/field-cases.md, ``acagent/tools/_policy.py``): an ``always`` answer remembers the
exact string, and also the program when the command is one simple command that passes the
recommended rule; an allow-list entry admits what a remembered program admits.
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from acagent.runner import InProcessRunner
from tests.cases.conftest import journal_events, open_session, settings_for
from tests.mockprovider import MockProvider, TextReply, openai_tool_calls
from tests.tools.test_tool_policy import ALLOW_LIST, EXACT_REPEATS, RULE_DEPENDENT, SETUP_COMMANDS, step3_rows

pytestmark = pytest.mark.anyio

BASHRC = "# the user's bashrc\nexport KEEP=1\n"


class Sink:
    """A local TCP listener that records every connection it accepts."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()


@pytest.fixture
def sink() -> Iterator[Sink]:
    s = Sink()
    yield s
    s.sock.close()


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    """``$B``, ``$W = $B/proj`` (a git repo with f.txt and p.sh), ``$C = $B/canary``; HOME=$H."""
    B = Path(os.path.realpath(tmp_path)) / "b"
    W, C, H = B / "proj", B / "canary", B / "home"
    for d in (W, C, H):
        d.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(W)], check=True)
    (W / "f.txt").write_text("a\nb\n")
    (W / "p.sh").write_text(f"touch {C}/c16\n")
    (H / ".bashrc").write_text(BASHRC)
    monkeypatch.setenv("HOME", str(H))
    return W, C, H


async def shell_turn(
    runner: InProcessRunner, mock: MockProvider, command: str, decision: str | None
) -> dict[str, Any]:
    """One turn asking for ``shell {"command": command}``; answer ``decision`` if asked.

    Returns:
        ``asked`` (the approval.requested payload or None), ``status_while_asked``,
        ``started_before_decision``, ``result`` (the tool.result payload) and ``sent`` (what the
        model got back in the next request).
    """
    n = len(mock.requests)
    call_id = f"call_{n}"
    mock.script(openai_tool_calls([(call_id, "shell", {"command": command})]), TextReply("done"))
    since = runner.bus.last_seq
    out: dict[str, Any] = {"asked": None, "status_while_asked": None, "started_before_decision": False}

    async def watch() -> None:
        decided = False
        async for event in runner.subscribe("f20", since):
            if event.type == "tool.started" and not decided and out["asked"] is not None:
                out["started_before_decision"] = True
            if event.type == "approval.requested":
                out["asked"] = event.payload
                out["status_while_asked"] = (await runner.snapshot())["status"]
                assert decision is not None, f"unexpected approval for {command!r}"
                decided = True
                await runner.answer_approval(event.payload["tool_call_id"], decision)

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        await runner.run_turn(f"run {command!r}")
        tg.cancel_scope.cancel()
    events = [e for e in await journal_events(runner) if e.seq > since]
    (out["result"],) = [e.payload for e in events if e.type == "tool.result"]
    tool_started = [e.seq for e in events if e.type == "tool.started"]
    resolved = [e.seq for e in events if e.type == "approval.resolved"]
    if tool_started and resolved and tool_started[0] < resolved[0]:
        out["started_before_decision"] = True
    follow_up = mock.requests[-1]
    assert follow_up.status == 200, follow_up.error
    out["sent"] = next(m for m in follow_up.json["messages"] if m.get("tool_call_id") == call_id)["content"]
    return out


@pytest.mark.parametrize("rules", ["always", "allow_list"])
async def test_no_shell_grammar_runs_without_the_approval_it_needs(
    tmp_path: Path, mock: MockProvider, tree: tuple[Path, Path, Path], sink: Sink, rules: str
) -> None:
    """Setup by ``always`` answers (or a configured allow-list), controls run without a prompt,
    every bypass row asks with its exact command and is denied, look-alikes never touch $C."""
    W, C, H = tree
    over: dict[str, Any] = {"shell_allow": ALLOW_LIST} if rules == "allow_list" else {}
    settings = settings_for(tmp_path / "state", mock, **over)
    async with open_session(settings, W) as (_, runner):
        if rules == "always":
            for command in SETUP_COMMANDS:  # step 1
                setup = await shell_turn(runner, mock, command, "always")
                assert setup["asked"] is not None and setup["asked"]["command"] == command
        for command in EXACT_REPEATS + RULE_DEPENDENT:  # step 2
            if rules == "allow_list" and command == "env":
                continue
            control = await shell_turn(runner, mock, command, None)
            assert control["asked"] is None, command
            assert control["result"]["status"] == "ok", (command, control["result"])
        assert (await shell_turn(runner, mock, "echo hi", None))["result"]["content"] == "hi\n"
        assert (await shell_turn(runner, mock, "sort -r f.txt", None))["result"]["content"] == "b\na\n"
        for command in step3_rows(C, sink.port):  # steps 3 and 4
            row = await shell_turn(runner, mock, command, "deny")
            assert row["asked"] is not None, f"ran without approval: {command!r}"
            assert row["asked"]["command"] == command  # byte for byte
            assert row["status_while_asked"] == "waiting_user"
            assert not row["started_before_decision"]
            assert row["result"]["status"] == "denied" and row["result"]["is_error"] is True
            assert "denied" in row["sent"]  # the model gets the refusal
            assert list(C.iterdir()) == [], command
            assert (H / ".bashrc").read_text() == BASHRC and (W / "f.txt").read_text() == "a\nb\n"
            assert sink.accepted == 0
        # step 5: look-alikes; if asked, deny; if run, one echo of the whole string
        q1 = f'echo "\\"; touch {C}/q1; echo \\""'
        q2 = f"echo hi；touch {C}/q2"
        for command, printed in ((q1, f'"; touch {C}/q1; echo "\n'), (q2, f"hi；touch {C}/q2\n")):
            look = await shell_turn(runner, mock, command, "deny")
            if look["asked"] is None:
                assert look["result"]["content"] == printed
        assert list(C.iterdir()) == []
        assert (H / ".bashrc").read_text() == BASHRC and (W / "f.txt").read_text() == "a\nb\n"
        assert sink.accepted == 0
        events = await journal_events(runner)
    asked = [e.payload["command"] for e in events if e.type == "approval.requested"]
    assert set(step3_rows(C, sink.port)) <= set(asked)
    assert all(r.status == 200 for r in mock.requests)
