"""F40–F42: an ``always`` answer means what the user saw — through real turns.

Every call is a real turn of a real session (strict mock provider, real journal, real ``bash``):

* F40: ``always`` on a command that runs workspace code (``sh build.sh``, ``make``) stops
  admitting it once the agent changed a workspace file (the workspace-write generation, kept in
  the journal across a restart) or the script's content changed; the request says workspace code
  will run.
* F41: ``always`` for ``write_file`` never covers a protected path (``.git/hooks``, ``.vscode``,
  ``.acagent``, ``.envrc``, ``.github/workflows``).
* F42: with ``ACAGENT_HOME`` inside the workspace, ``read_file``/``glob`` never return its files
  and an allow-listed ``cat`` of the token asks.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from acagent.runner import InProcessRunner
from tests.cases.conftest import journal_events, open_session, settings_for
from tests.mockprovider import MockProvider, TextReply, openai_tool_calls

pytestmark = pytest.mark.anyio


async def tool_turn(
    runner: InProcessRunner, mock: MockProvider, name: str, args: dict[str, Any], decision: str | None
) -> dict[str, Any]:
    """One turn calling ``name(args)``; answer ``decision`` if asked (fail if asked and None).

    Returns:
        ``asked`` (the approval.requested payload or None) and ``result`` (tool.result payload).
    """
    call_id = f"call_{len(mock.requests)}"
    mock.script(openai_tool_calls([(call_id, name, args)]), TextReply("done"))
    since = runner.bus.last_seq
    out: dict[str, Any] = {"asked": None}

    async def watch() -> None:
        async for event in runner.subscribe("f40", since):
            if event.type == "approval.requested":
                out["asked"] = event.payload
                assert decision is not None, f"unexpected approval for {name} {args!r}"
                await runner.answer_approval(event.payload["tool_call_id"], decision)

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        await runner.run_turn(f"call {name}")
        tg.cancel_scope.cancel()
    events = [e for e in await journal_events(runner) if e.seq > since]
    (out["result"],) = [e.payload for e in events if e.type == "tool.result"]
    assert mock.requests[-1].status == 200, mock.requests[-1].error
    return out


def shell(command: str) -> tuple[str, dict[str, Any]]:
    return "shell", {"command": command}


@pytest.fixture
def workspace(tmp_path: Path) -> tuple[Path, Path]:
    W = Path(os.path.realpath(tmp_path)) / "proj"
    C = Path(os.path.realpath(tmp_path)) / "canary"
    W.mkdir()
    C.mkdir()
    subprocess.run(["git", "init", "-q", str(W)], check=True)
    (W / "build.sh").write_text("echo built-v1\n")
    (W / "Makefile").write_text("all:\n\t@echo made-v1\n")
    return W, C


async def test_f40_always_on_workspace_code_ends_when_the_agent_changes_the_workspace(
    tmp_path: Path, mock: MockProvider, workspace: tuple[Path, Path]
) -> None:
    """``always`` on ``sh build.sh`` / ``make`` admits the same code only: after the agent
    rewrites the script (or any workspace file) the next run asks again — also after a restart."""
    W, C = workspace
    settings = settings_for(tmp_path / "state", mock, shell_allow=["ls", "cat"])
    async with open_session(settings, W) as (_reg, runner):
        first = await tool_turn(runner, mock, *shell("sh build.sh"), "always")
        assert first["asked"] is not None
        assert any("workspace code (build.sh)" in n for n in first["asked"]["notes"]), first["asked"]
        assert first["result"]["content"] == "built-v1\n"
        made = await tool_turn(runner, mock, *shell("make"), "always")
        assert made["asked"] is not None and "Makefile" in " ".join(made["asked"]["notes"])
        # unchanged workspace, read-only commands in between: no question
        assert (await tool_turn(runner, mock, *shell("ls"), None))["asked"] is None
        assert (await tool_turn(runner, mock, *shell("cat build.sh"), None))["asked"] is None
        assert (await tool_turn(runner, mock, *shell("sh build.sh"), None))["asked"] is None
        assert (await tool_turn(runner, mock, *shell("make all"), None))["result"]["content"] == "made-v1\n"
        # the agent rewrites the script (approved once, as a user would)
        evil = f"touch {C}/pwned\necho built-v2\n"
        wrote = await tool_turn(runner, mock, "write_file", {"path": "build.sh", "content": evil}, "allow")
        assert wrote["result"]["status"] == "ok"
        again = await tool_turn(runner, mock, *shell("sh build.sh"), "deny")
        assert again["asked"] is not None, "the old always rule ran code the user never saw"
        assert again["result"]["status"] == "denied"
        # make did not change, but the agent wrote a workspace file: make asks too
        assert (await tool_turn(runner, mock, *shell("make all"), "deny"))["asked"] is not None
        assert list(C.iterdir()) == []
        session_id = runner.session_id
    # a new process (registry) on the same journal: the generation and bindings persisted
    async with open_session(settings, W) as (reg2, _):
        runner2 = await reg2.get_runner(session_id)
        assert (await tool_turn(runner2, mock, *shell("sh build.sh"), "deny"))["asked"] is not None
        fresh = await tool_turn(runner2, mock, *shell("sh build.sh"), "always")
        assert fresh["result"]["content"] == "built-v2\n"
        assert (await tool_turn(runner2, mock, *shell("sh build.sh"), None))["asked"] is None
        # a change made outside the agent's tools (by hand) also ends the rule: content binding
        (W / "build.sh").write_text("echo by-hand\n")
        assert (await tool_turn(runner2, mock, *shell("sh build.sh"), "deny"))["asked"] is not None
    assert all(r.status == 200 for r in mock.requests)


@pytest.mark.parametrize(
    "path",
    [".git/hooks/pre-commit", ".git/config", ".vscode/tasks.json", ".acagent/config.toml", ".envrc",
     ".github/workflows/ci.yml", "sub/.bashrc", ".GIT/hooks/x"],
)  # fmt: skip
async def test_f41_tool_wide_always_never_covers_a_protected_path(
    tmp_path: Path, mock: MockProvider, workspace: tuple[Path, Path], path: str
) -> None:
    """After ``always`` for ``write_file``, ordinary files are written without asking, a
    protected path asks every time (and says why), also through a symlink."""
    W, _ = workspace
    (W / "hooks").symlink_to(W / ".git" / "hooks")
    settings = settings_for(tmp_path / "state", mock)
    async with open_session(settings, W) as (_, runner):
        await tool_turn(runner, mock, "write_file", {"path": "a.txt", "content": "a"}, "always")
        assert (await tool_turn(runner, mock, "write_file", {"path": "b.txt", "content": "b"}, None))[
            "asked"
        ] is None
        before = (W / path).read_bytes() if (W / path).exists() else None
        for _ in range(2):
            asked = await tool_turn(runner, mock, "write_file", {"path": path, "content": "x"}, "deny")
            assert asked["asked"] is not None, path
            assert any("protected path" in n for n in asked["asked"]["notes"])
        edit = await tool_turn(
            runner, mock, "edit_file", {"path": path, "old_string": "x", "new_string": "y"}, "deny"
        )
        assert edit["asked"] is not None
        linked = await tool_turn(
            runner, mock, "write_file", {"path": "hooks/post-checkout", "content": "x"}, "deny"
        )
        assert linked["asked"] is not None
        assert ((W / path).read_bytes() if (W / path).exists() else None) == before


async def test_f42_read_tools_never_return_acagents_own_data_dir(
    tmp_path: Path, mock: MockProvider, workspace: tuple[Path, Path]
) -> None:
    """``ACAGENT_HOME`` inside the workspace: read_file, list_dir and glob refuse or omit it, and
    allow-listed ``cat``/``grep -r`` of it ask."""
    W, _ = workspace
    home = W / ".local" / "acagent-home"
    settings = settings_for(home, mock, shell_allow=["cat", "grep", "ls"])
    async with open_session(settings, W) as (_, runner):
        (home / "token").write_text("SECRET-TOKEN-41f\n")
        db = await tool_turn(runner, mock, "read_file", {"path": ".local/acagent-home/acagent.db"}, None)
        assert db["result"]["status"] == "error" and "path_private" in db["result"]["content"]
        tok = await tool_turn(runner, mock, "read_file", {"path": str(home / "token")}, None)
        assert "path_private" in tok["result"]["content"]
        listed = await tool_turn(runner, mock, "list_dir", {"path": ".local/acagent-home"}, None)
        assert "path_private" in listed["result"]["content"]
        found = await tool_turn(runner, mock, "glob", {"pattern": "**/*"}, None)
        assert "acagent.db" not in found["result"]["content"] and "token" not in found["result"]["content"]
        assert "data directory omitted" in found["result"]["content"]
        for command in ("cat .local/acagent-home/token", "grep -r SECRET ."):
            ran = await tool_turn(runner, mock, *shell(command), "deny")
            assert ran["asked"] is not None, command
        assert (await tool_turn(runner, mock, *shell("cat build.sh"), None))["asked"] is None
        events = await journal_events(runner)
    assert all("SECRET-TOKEN-41f" not in str(e.payload) for e in events)
