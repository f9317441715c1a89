"""Owner-only files and directories under ``$ACAGENT_HOME`` (conversations, tokens, history).

Every directory or file acagent creates in its data directory is made through these two
functions, whichever command runs first (``chat``, ``run``, ``serve``, ``models pull``, …): a
directory is ``0700`` and a file ``0600``, whatever the process umask. The umask itself is never
changed: tool processes inherit it, and files the agent writes in the user's workspace must keep
the user's usual modes.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DIR_MODE", "FILE_MODE", "private_dir", "private_file"]

DIR_MODE = 0o700
FILE_MODE = 0o600


def private_dir(path: Path | str) -> Path:
    """Create ``path`` and any missing parents as owner-only directories (``0700``).

    Only directories created here are chmodded, plus ``path`` itself when the current user owns it
    and it gives group or others any access (an older acagent may have created it ``0755``).

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        OSError: the directory cannot be created (read-only file system, permissions).
    """
    path = Path(path)
    missing: list[Path] = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, DIR_MODE)
        except FileExistsError:
            continue  # a concurrent process made it: its mode is its creator's (also this code)
        os.chmod(directory, DIR_MODE)  # mkdir's mode is filtered by the umask
    try:
        st = path.stat()
    except OSError:
        return path
    if st.st_uid == os.getuid() and st.st_mode & 0o077:
        os.chmod(path, DIR_MODE)
    return path


def private_file(path: Path | str) -> Path:
    """Make sure ``path`` exists as an owner-only file (``0600``); its parent must exist.

    An existing file keeps its content; its mode is narrowed to ``0600`` if it was wider.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        OSError: the file cannot be created.
    """
    path = Path(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, FILE_MODE)
    try:
        if os.fstat(fd).st_mode & 0o077:
            os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)
    return path
