"""Where an imported session works: its working directory chosen on this machine (F139).

A transcript records the ``cwd`` of the machine and process that wrote it. Kept as it is, the
imported session's tools ran in a directory that is not there (``/home/alice/proj`` from another
machine: every ``shell`` call failed to start) or in the whole filesystem (``/``, what a process
in a container without a working directory records). The rule (:func:`choose_workspace`):

1. an explicit directory (``acagent import FILE --cwd DIR``) wins;
2. else the recorded ``cwd`` is kept when it is an existing, accessible directory other than the
   filesystem root (canonical: symlinks resolved, as ``canonical_cwd`` does for a new session);
3. else the current directory, and one line says so (the CLI prints it as a warning).
"""

from __future__ import annotations

import os

from acagent.errors import UserError
from acagent.events import Event

__all__ = ["choose_workspace", "explicit_workspace", "with_workspace"]


def _unusable(path: str) -> str | None:
    """Why ``path`` cannot be a workspace here, or None when it can."""
    if os.path.realpath(path) == os.path.realpath(os.sep):
        return "is the filesystem root"
    if not os.path.exists(path):
        return "does not exist here"
    if not os.path.isdir(path):
        return "is not a directory here"
    if not os.access(path, os.R_OK | os.X_OK):
        return "is not accessible here"
    return None


def explicit_workspace(path: str) -> str:
    """``--cwd DIR``: its absolute, canonical form (relative to the current directory; the root
    is allowed when asked for by name).

    Raises:
        UserError: it is missing, not a directory or not accessible.
    """
    full = os.path.realpath(os.path.abspath(path))
    why = _unusable(full) if full != os.path.realpath(os.sep) else None
    if why is not None:
        raise UserError(f"--cwd {path!r} {why.removesuffix(' here')}")
    return full


def choose_workspace(recorded: str, workspace: str | None, here: str | None) -> tuple[str, str | None]:
    """The imported session's working directory and, when the recorded one is not kept without
    being asked to, the one line that says so (module docstring).

    Args:
        recorded: the transcript's ``cwd`` (absolute: :func:`plan_import` checked it).
        workspace: an explicit directory (``--cwd``), absolute and canonical, or None.
        here: the directory to fall back to (the current one), absolute and canonical; None
            when the current directory no longer exists.

    Returns:
        ``(cwd, note)``; ``note`` is None when ``workspace`` was given or ``recorded`` is kept.

    Raises:
        UserError: ``recorded`` cannot be kept and ``here`` is None.
    """
    if workspace is not None:
        return workspace, None
    why = _unusable(recorded)
    if why is None:
        return os.path.realpath(recorded), None
    if here is None:
        raise UserError(
            f"the transcript's working directory {recorded!r} {why} and the current directory no longer"
            " exists; import it with `--cwd DIR`"
        )
    return here, (
        f"the transcript's working directory {recorded!r} {why}; the imported session works in"
        f" {here!r} (choose another with `acagent import FILE --cwd DIR`)"
    )


def with_workspace(events: list[Event], workspace: str | None, here: str | None) -> tuple[str, str | None]:
    """Choose the working directory of the session whose events (``session.created`` first) an
    import writes (:func:`choose_workspace`) and record it in that event, in place.

    Returns:
        ``(cwd, note)`` as :func:`choose_workspace`.
    """
    first = events[0]
    recorded = str(first.payload["cwd"])
    cwd, note = choose_workspace(recorded, workspace, here)
    if cwd != recorded:  # the row, the event and a later export agree; what was recorded stays
        events[0] = first.model_copy(
            update={"payload": {**first.payload, "cwd": cwd, "recorded_cwd": recorded}}
        )
    return cwd, note
