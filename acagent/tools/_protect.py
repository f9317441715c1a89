"""Paths the approval rules treat specially: protected paths and acagent's private data.

**Protected paths** (:func:`protected_reason`). Writing them can make code run later without
anyone approving it — at the next ``git commit`` (hooks, ``core.fsmonitor``), when an editor
opens the folder (``.vscode/tasks.json``), when ``direnv`` enters it (``.envrc``), on the next
CI push (``.github/workflows/``), at the next shell start (``.bashrc``), or at acagent's next
start (``.acagent/config.toml``). A ``write_file``/``edit_file`` call to such a path asks every
time, even after ``always`` for the tool (:meth:`~acagent.tools.ApprovalPolicy.needs_approval`).
A path is protected when **any** component of its resolved path inside the workspace (symlinks
resolved, compared case-insensitively) is one of :data:`PROTECTED_NAMES`.

**Private directories** (acagent's own data dir, ``ACAGENT_HOME``: token, journal, transcripts).
:func:`~acagent.tools.resolve_in_workspace` refuses a path that resolves into one with
:class:`~acagent.tools.PathPrivate` (so ``read_file``, ``list_dir``, ``glob``, ``write_file`` and
``edit_file`` never touch it, and ``glob`` drops such matches), even when the workspace
contains the data dir. For ``shell`` the policy makes a command ask when
:func:`shell_touches_private` holds (see there for what is and is not covered).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from pathlib import Path

__all__ = ["PROTECTED_NAMES", "RECURSIVE_READERS", "inside_any", "protected_reason", "shell_touches_private"]

PROTECTED_NAMES = frozenset(
    {
        # version control: hooks and config that run programs (core.fsmonitor, core.pager, ...)
        ".git", ".hg", ".svn", ".gitmodules", ".gitconfig",
        # environment loaders and shell start-up files
        ".envrc", ".direnvrc", ".bashrc", ".bash_profile", ".bash_login", ".bash_logout",
        ".profile", ".zshrc", ".zshenv", ".zprofile", ".zlogin", ".zlogout", ".kshrc",
        ".cshrc", ".tcshrc", ".inputrc", ".config",
        # editor / IDE workspace config (tasks, launch configs, extensions)
        ".vscode", ".idea", ".devcontainer",
        # CI and commit hooks
        ".github", ".gitlab", ".gitlab-ci.yml", ".circleci", ".travis.yml", ".husky",
        ".pre-commit-config.yaml",
        # credentials and package-manager config that can run programs
        ".ssh", ".gnupg", ".npmrc", ".yarnrc", ".yarnrc.yml", ".netrc",
        # acagent's own project config
        ".acagent",
    }
)  # fmt: skip
"""Path component names (compared case-insensitively) that make a path protected."""

RECURSIVE_READERS = frozenset(
    {"rg", "ag", "ack", "grep", "egrep", "fgrep", "find", "fd", "fdfind", "tree", "du", "ls", "git"}
)
"""Programs that read a whole directory tree when given a directory (or none, meaning ``.``)."""


def inside_any(path: Path, dirs: Sequence[Path]) -> Path | None:
    """The first of ``dirs`` (resolved) that is ``path`` or one of its ancestors, else None."""
    for d in dirs:
        real = Path(os.path.realpath(d))
        if path == real or path.is_relative_to(real):
            return real
    return None


def protected_reason(root: Path, resolved: Path) -> str | None:
    """Why writing ``resolved`` (inside ``root``) is protected, or None if it is not.

    Args:
        root: the workspace root.
        resolved: a path returned by :func:`~acagent.tools.resolve_in_workspace`.

    Returns:
        e.g. ``"'.git/hooks/pre-commit' is under '.git'"``.
    """
    real_root = Path(os.path.realpath(root))
    try:
        rel = resolved.relative_to(real_root)
    except ValueError:
        rel = resolved
    for part in rel.parts:
        if part.casefold() in PROTECTED_NAMES:
            return f"{str(rel)!r} is under {part!r}" if part != str(rel) else f"{str(rel)!r} is protected"
    return None


def shell_touches_private(command: str, root: Path, private: Sequence[Path]) -> bool:
    """Whether a shell command may read acagent's private data dir (then it must ask).

    Covered: every word of the command (split like ``shlex``, and each ``--opt=value`` value)
    that names a path resolving into a private dir; a workspace that itself lies inside a
    private dir (every command asks); and, when a private dir lies inside the workspace, every
    command run by a program of :data:`RECURSIVE_READERS` (``grep -r``, ``rg``, ``find``,
    ``ls -R``, ... with a directory or no operand walk into it).

    Not covered (documented): a program that walks the tree but is not in that list (a user's
    allow-list entry the rule does not model), paths the command builds at run time, and
    commands that were approved by the user (those run as approved).

    Args:
        command: the exact command string.
        root: the workspace root.
        private: acagent's private directories (``ACAGENT_HOME``).
    """
    if not private:
        return False
    real_root = Path(os.path.realpath(root))
    if inside_any(real_root, private) is not None:
        return True
    try:
        words = shlex.split(command)
    except ValueError:
        return True
    contains_private = any(Path(os.path.realpath(d)).is_relative_to(real_root) for d in private)
    if contains_private and words and os.path.basename(words[0]) in RECURSIVE_READERS:
        return True
    for word in words:
        for candidate in (word, word.partition("=")[2] if word.startswith("-") else ""):
            if not candidate or candidate.startswith("~") or "\0" in candidate:
                continue
            path = Path(candidate)
            real = Path(os.path.realpath(path if path.is_absolute() else real_root / path))
            if inside_any(real, private) is not None:
                return True
    return False
