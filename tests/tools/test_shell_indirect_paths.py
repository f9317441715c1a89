"""Arguments that name paths indirectly stay inside the workspace, or the command asks (F92).

Each row is a command an admitted program runs without asking before the fix, and that — run for
real with bash in the workspace — reads a file outside it: a git revision path, a checksum list
(``md5sum -c``), a ``--files0-from`` list, a ``key=path`` operand, symlink-following ``diff -r``.
The test first proves the leak (the real command prints the outside secret or names it), then
that the rule (``acagent/tools/_shellargs.py``) does not admit the command, neither for a
configured allow-list nor for remembered programs through the real policy.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from acagent.tools import ApprovalPolicy, ShellTool, ToolContext
from acagent.tools._shellrule import shell_command_admitted

SECRET = "top-secret-outside-the-workspace"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """``tmp/repo`` (a git repository holding ``secret.txt``) with the workspace ``repo/ws`` in it;
    list files in the workspace that name the secret."""
    root = tmp_path / "repo"
    ws = root / "ws"
    ws.mkdir(parents=True)
    (root / "secret.txt").write_text(SECRET + "\n")
    (ws / "f.txt").write_text("inside\n")
    digest = hashlib.md5((SECRET + "\n").encode()).hexdigest()
    (ws / "sums.md5").write_text(f"{digest}  ../secret.txt\n")
    sha = hashlib.sha256((SECRET + "\n").encode()).hexdigest()
    (ws / "sums.sha256").write_text(f"{sha}  ../secret.txt\n")
    (ws / "list0").write_bytes(b"../secret.txt\0")
    (ws / "a").mkdir()
    (ws / "b").mkdir()
    (ws / "a" / "out").symlink_to(root)  # a link inside the workspace to a directory outside
    (ws / "b" / "out").mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(root)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "secret.txt", "ws/f.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    return ws


ROWS = [
    ("git show HEAD:secret.txt", "git"),  # relative to the repository root, above the workspace
    ("git show HEAD:./../secret.txt", "git"),  # relative to the working directory
    ("git log -p -L1,1:secret.txt", "git"),
    ("md5sum -c sums.md5", "md5sum"),
    ("md5sum --check sums.md5", "md5sum"),
    ("sha256sum -c sums.sha256", "sha256sum"),
    ("sort --files0-from=list0", "sort"),
    ("wc --files0-from=list0", "wc"),
    ("du --files0-from=list0", "du"),
    ("dd if=../secret.txt status=none", "dd"),
    ("diff -r a b", "diff"),
    ("diff --recursive a b", "diff"),
]


def _ctx(ws: Path) -> ToolContext:
    return ToolContext(cwd=ws, session_id="s", tool_call_id="t", emit_output=lambda _: None)


@pytest.mark.parametrize(("command", "program"), ROWS, ids=[r[0] for r in ROWS])
def test_an_indirect_path_outside_the_workspace_asks(repo: Path, command: str, program: str) -> None:
    if shutil.which(program) is None:
        pytest.skip(f"{program} is not installed")
    run = subprocess.run(["bash", "-c", command], cwd=repo, capture_output=True, text=True, timeout=30)
    leaked = run.stdout + run.stderr
    assert SECRET in leaked or "secret.txt" in leaked, (command, leaked)  # the leak is real
    assert not shell_command_admitted(command, repo, {program}), command
    for policy in (ApprovalPolicy(shell_allow=[program]), ApprovalPolicy({program})):
        assert policy.needs_approval(ShellTool(), {"command": command}, _ctx(repo)), command


@pytest.mark.parametrize(
    "command",
    [
        "tool @../secret.txt",  # a response file outside
        "tool --args=@../secret.txt",
        "tool if=../secret.txt",
        "tree --fromfile list0",
        "find -files0-from list0",
        "git log --format=%h:%s -- ../secret.txt",
        "git diff HEAD:f.txt HEAD:../secret.txt",
    ],
)
def test_indirect_forms_ask_for_every_program(repo: Path, command: str) -> None:
    assert not shell_command_admitted(command, repo, {command.split()[0]}), command


@pytest.mark.parametrize(
    "command",
    [
        "git show HEAD",
        "git log --format=%h:%s -n 1",
        "git log --pretty=format:%h --since=12:00",
        "md5sum f.txt",
        "sort f.txt",
        "wc -l f.txt",
        "diff f.txt f.txt",
        "tool @f.txt",
        "tool key=f.txt",
        "echo a=b",
    ],
)
def test_the_same_programs_inside_the_workspace_still_run(repo: Path, command: str) -> None:
    assert shell_command_admitted(command, repo, {command.split()[0]}), command
