"""F19: file tools never reach outside the workspace — through the runner.

Case ``shared/cases/F19-path-traversal.md``. The whole-class sweep (every tool × every path
form, the one containment function ``resolve_in_workspace``) is in
``tests/tools/test_tool_paths.py``; here the case's calls come from the strict mock as tool calls
of real turns, and the test answers ``allow`` to every approval the runner raises. Names:
``path_outside_workspace`` is acagent's code (``PathOutsideWorkspace``); odd paths give
``invalid_path``; ``edit_file`` takes ``old_string``/``new_string`` (the case's ``old``/``new``);
``glob`` takes ``pattern``; ``shell`` has no ``cwd`` argument, so step 3 is refused as an invalid
argument and never runs. The daemon's HTTP 400 envelope of step 6 is the daemon's tests; here
step 6 runs through ``SessionRegistry.create_session``.

Policies (docs/field-cases.md): a leading ``~`` is refused (``invalid_path``), never expanded;
``glob`` braces are literal, so ``{..,.}/*`` matches nothing (or is refused).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from acagent.errors import UserError
from acagent.runner import InProcessRunner
from tests.cases.conftest import all_text, journal_events, open_session, settings_for
from tests.mockprovider import MockProvider, TextReply, openai_tool_calls

pytestmark = pytest.mark.anyio

SECRETS = ("SIBLING-7c1", "OUTSIDE-2b9", "root:x:0:0")


def outside_calls(B: Path) -> list[tuple[str, dict[str, Any]]]:
    """Step 1 (``$B`` written out)."""
    return [
        ("read_file", {"path": "../proj-evil/secret.txt"}),
        ("read_file", {"path": f"{B}/proj-evil/secret.txt"}),
        ("read_file", {"path": "./../proj-evil/secret.txt"}),
        ("read_file", {"path": "sub/../../proj-evil/secret.txt"}),
        ("read_file", {"path": "/etc/passwd"}),
        ("read_file", {"path": "/proc/self/environ"}),
        ("read_file", {"path": ".."}),
        ("read_file", {"path": f"{B}/outside.txt"}),
        ("write_file", {"path": "../../etc/x", "content": "x"}),
        ("write_file", {"path": "../proj-evil/pwn.txt", "content": "x"}),
        ("write_file", {"path": f"{B}/proj2/pwn.txt", "content": "x"}),
        ("write_file", {"path": "sub/./../../pwn.txt", "content": "x"}),
        ("edit_file", {"path": "../proj-evil/secret.txt", "old_string": "SIBLING", "new_string": "EDITED"}),
        ("list_dir", {"path": ".."}),
        ("list_dir", {"path": f"{B}"}),
        ("list_dir", {"path": "../proj-evil/"}),
        ("glob", {"pattern": "../*"}),
        ("glob", {"pattern": "**/../../*"}),
        ("glob", {"pattern": "/etc/*"}),
        ("glob", {"pattern": "../proj-evil/**"}),
        ("glob", {"pattern": "{..,.}/*"}),
    ]


def odd_calls() -> list[tuple[str, dict[str, Any]]]:
    """Step 2."""
    return [
        ("write_file", {"path": "~/pwn.txt", "content": "x"}),
        ("write_file", {"path": "a\u0000/../../pwn.txt", "content": "x"}),
        ("write_file", {"path": "", "content": "x"}),
        ("write_file", {"path": ".", "content": "x"}),
        ("write_file", {"path": "a" * 5000, "content": "x"}),
    ]


def shell_cwd_calls(B: Path) -> list[tuple[str, dict[str, Any]]]:
    """Step 3."""
    return [
        ("shell", {"command": "pwd", "cwd": ".."}),
        ("shell", {"command": "pwd", "cwd": f"{B}/proj-evil"}),
        ("shell", {"command": "pwd", "cwd": "/"}),
    ]


LOOK_ALIKES = ["%2e%2e/ok.txt", "..\\ok.txt", "．．/ok.txt"]


def outside_hashes(B: Path, W: Path) -> dict[str, str]:
    out = {}
    for dirpath, _dirs, files in os.walk(B):
        if Path(dirpath).is_relative_to(W):
            continue
        for name in files:
            p = Path(dirpath) / name
            out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@asynccontextmanager
async def answering(runner: InProcessRunner, decision: str) -> AsyncIterator[list[str]]:
    """Answer ``decision`` to every approval the runner raises while the block runs."""
    answered: list[str] = []

    async def answer() -> None:
        async for event in runner.subscribe("approver", runner.bus.last_seq):
            if event.type == "approval.requested":
                answered.append(event.payload["tool_call_id"])
                await runner.answer_approval(event.payload["tool_call_id"], decision)

    async with anyio.create_task_group() as tg:
        tg.start_soon(answer)
        yield answered
        tg.cancel_scope.cancel()


async def run_calls(
    runner: InProcessRunner, mock: MockProvider, prefix: str, calls: list[tuple[str, dict[str, Any]]]
) -> list[dict[str, Any]]:
    """One turn in which the mock asks for ``calls`` in parallel; returns their results in order."""
    ids = [f"{prefix}{i}" for i in range(len(calls))]
    mock.script(
        openai_tool_calls([(cid, name, args) for cid, (name, args) in zip(ids, calls, strict=True)]),
        TextReply("done"),
    )
    since = runner.bus.last_seq
    async with answering(runner, "allow"):
        await runner.run_turn(f"step {prefix}")
    events = [e for e in await journal_events(runner) if e.seq > since]
    results = {e.payload["tool_call_id"]: e.payload for e in events if e.type == "tool.result"}
    assert list(results) == ids
    assert mock.requests[-1].status == 200, mock.requests[-1].error
    return [results[i] for i in ids]


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    B = Path(os.path.realpath(tmp_path)) / "b"
    W = B / "proj"
    (W / "sub").mkdir(parents=True)
    (B / "proj-evil").mkdir()
    (B / "proj-evil" / "secret.txt").write_text("SIBLING-7c1\n")
    (B / "proj2").mkdir()
    (B / "outside.txt").write_text("OUTSIDE-2b9\n")
    (B / "home").mkdir()
    monkeypatch.setenv("HOME", str(B / "home"))
    return B, W


async def test_every_outside_call_is_refused_and_nothing_leaks(
    tmp_path: Path, mock: MockProvider, tree: tuple[Path, Path]
) -> None:
    """Steps 1–6 through real turns (approvals answered ``allow``)."""
    B, W = tree
    before = outside_hashes(B, W)
    settings = settings_for(tmp_path / "state", mock)
    async with open_session(settings, W) as (reg, runner):
        # step 1: every call points outside $W
        for (name, args), result in zip(
            outside_calls(B), await run_calls(runner, mock, "out", outside_calls(B)), strict=True
        ):
            if args.get("pattern") == "{..,.}/*" and result["status"] == "ok":
                assert "no match" in result["content"].lower() or result["content"].strip() in (
                    "",
                    "(no matches)",
                )
                continue
            assert result["status"] == "error", (name, args, result)
            assert "path_outside_workspace" in result["content"], (name, args, result)
        # step 2: odd paths are clean errors; `~` is refused, never expanded
        odd = await run_calls(runner, mock, "odd", odd_calls())
        for result in odd:
            assert result["status"] == "error" and "Traceback" not in result["content"], result
        assert "invalid_path" in odd[0]["content"]  # `~/pwn.txt`
        # step 3: the shell has no cwd argument: refused, never run
        since = runner.bus.last_seq
        for result in await run_calls(runner, mock, "cwd", shell_cwd_calls(B)):
            assert result["status"] == "error" and "cwd" in result["content"], result
        assert not [e for e in await journal_events(runner) if e.seq > since and e.type == "tool.started"]
        # step 4: look-alikes stay inside and succeed
        looks = [("write_file", {"path": p, "content": "x"}) for p in LOOK_ALIKES]
        for result in await run_calls(runner, mock, "look", looks):
            assert result["status"] == "ok", result
        # step 5: still refused; the workspace root did not move
        (again,) = await run_calls(runner, mock, "again", outside_calls(B)[:1])
        assert again["status"] == "error" and "path_outside_workspace" in again["content"]
        assert (await runner.snapshot())["cwd"] == str(W)
        # step 6: the cwd is made absolute and canonical once, at creation
        with pytest.raises(UserError):
            await reg.create_session("relative/dir")
        with pytest.raises(UserError):
            await reg.create_session(f"{B}/does-not-exist")
        assert (await reg.create_session(f"{B}/proj/sub/..")).cwd == str(W)
        events = await journal_events(runner)
        transcript = reg.transcript_path(runner.row)
    for name in LOOK_ALIKES:
        assert (W / name).read_text() == "x"
    assert outside_hashes(B, W) == before
    for p in (
        B.parent / "etc" / "x",
        B / "pwn.txt",
        B / "proj2" / "pwn.txt",
        B / "proj-evil" / "pwn.txt",
        B / "home" / "pwn.txt",
        W / "~" / "pwn.txt",
    ):
        assert not p.exists(), p
    seen = (
        all_text(e.to_dict() for e in events)
        + all_text(r.json for r in mock.requests)
        + transcript.read_text()
    )
    for secret in SECRETS:
        assert secret not in seen, secret
    assert all(r.status == 200 for r in mock.requests)
