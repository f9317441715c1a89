"""Symlink-following recursion is never admitted without asking (F19 through the shell rule).

Before: with ``grep`` admitted, ``grep -R secret .`` ran without asking and read files outside
the workspace through a symlink inside it (GNU grep -R follows every link); ``rg -L``/``--follow``,
``ls -RL`` and ``tree -l``/``-R`` (``-R`` writes ``00Tree.html`` files) likewise.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from acagent.tools._shellrule import shell_command_admitted

PROGRAMS = frozenset({"grep", "rg", "ls", "du", "tree"})

FOLLOWING = [
    "grep -R secret .", "grep -rR secret .", "grep -nR secret", "grep --dereference-recursive secret .",
    "grep --dereference secret .", "rg -L secret", "rg -iL secret", "rg --follow secret", "rg --fol secret",
    "ls -RL .", "ls -lL", "ls --dereference -R", "du -L .", "du -aL", "du --dereference .",
    "tree -l", "tree -al", "tree -R -H x", "tree -RL 2 -H x",
]  # fmt: skip

CONTROLS = [
    "grep -r secret .",
    "grep -e R -r .",
    "grep -n secret f.txt",
    "rg secret",
    "ls -la",
    "du -s .",
    "tree -a",
]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "key.txt").write_text("secret\n")
    root = tmp_path / "work"
    root.mkdir()
    (root / "f.txt").write_text("hello\n")
    (root / "link").symlink_to(outside, target_is_directory=True)
    return root


@pytest.mark.parametrize("command", FOLLOWING)
def test_symlink_following_recursion_asks(workspace: Path, command: str) -> None:
    assert not shell_command_admitted(command, workspace, PROGRAMS), command


@pytest.mark.parametrize("command", CONTROLS)
def test_plain_recursion_is_still_admitted(workspace: Path, command: str) -> None:
    assert shell_command_admitted(command, workspace, PROGRAMS), command


@pytest.mark.skipif(shutil.which("grep") is None, reason="needs grep")
def test_the_refused_form_really_leaves_the_workspace_and_the_admitted_one_does_not(workspace: Path) -> None:
    """Why: real GNU grep -R reads the outside file through the link; -r does not."""
    follow = subprocess.run(
        ["grep", "-R", "-l", "secret", "."], cwd=workspace, capture_output=True, text=True
    )
    plain = subprocess.run(["grep", "-r", "-l", "secret", "."], cwd=workspace, capture_output=True, text=True)
    assert "link/key.txt" in follow.stdout
    assert plain.stdout == ""
