"""Workspace containment: the one function that decides whether a path is inside the session.

Every file tool (``read_file``, ``write_file``, ``edit_file``, ``list_dir``, ``glob``), the shell
tool's working directory and the shell approval rule call :func:`resolve_in_workspace`. The
workspace root is the session's ``cwd``, fixed when the session is created; no tool argument can
move it.

Containment is judged on resolved path *components*: the candidate is joined to the root, every
symlink and ``..`` is resolved with :func:`os.path.realpath` (as the kernel would walk it), and the
result must satisfy :meth:`pathlib.Path.is_relative_to` against the resolved root. String prefixes
are never compared, so ``$B/proj-evil`` is not inside ``$B/proj``.

Names that merely look like traversal are ordinary names: ``%2e%2e`` (no URL decoding), ``..\\x``
(a backslash is a filename character on POSIX) and ``．．`` (fullwidth full stops, no Unicode
normalisation) all stay inside the workspace.

acagent's own data dir (``ACAGENT_HOME``: token, journal, transcripts) is never inside a
workspace as far as tools are concerned: a path resolving into one of the ``private``
directories is refused with :class:`PathPrivate`, even when the workspace contains it
(a session started in ``$HOME`` with the data dir under ``~/.local/share``).

Known limit: the check and the later open are two system calls, so a process that swaps a
directory for a symlink between them (a TOCTOU race) is not defended against; the agent's own
tools never do that concurrently with a call.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from acagent.errors import AcagentError
from acagent.tools._protect import inside_any

__all__ = [
    "InvalidPath",
    "PathError",
    "PathOutsideWorkspace",
    "PathPrivate",
    "display_path",
    "resolve_in_workspace",
]

MAX_PATH_BYTES = 4096
"""Longest accepted path argument, in UTF-8 bytes (Linux ``PATH_MAX``)."""
MAX_COMPONENT_BYTES = 255
"""Longest accepted path component, in UTF-8 bytes (Linux ``NAME_MAX``)."""


class PathError(AcagentError):
    """Base of the path errors; ``str(error)`` starts with its ``code``."""

    code = "invalid_path"
    status_code = 400


class PathOutsideWorkspace(PathError):
    """Raised when a path resolves outside the workspace root (``..``, absolute, symlink escape)."""

    code = "path_outside_workspace"

    def __init__(self, path: str, resolved: Path, root: Path) -> None:
        self.path = path
        self.resolved = resolved
        self.root = root
        super().__init__(
            f"path_outside_workspace: {path!r} resolves to {str(resolved)!r}, "
            f"which is outside the workspace {str(root)!r}",
            detail={"path": path, "resolved": str(resolved), "root": str(root)},
        )


class PathPrivate(PathError):
    """Raised when a path resolves into acagent's own data dir (``ACAGENT_HOME``)."""

    code = "path_private"

    def __init__(self, path: str, private_dir: Path) -> None:
        self.path = path
        self.private_dir = private_dir
        super().__init__(
            f"path_private: {path!r} is inside acagent's own data directory {str(private_dir)!r}, "
            "which tools never read or write",
            detail={"path": path, "private_dir": str(private_dir)},
        )


class InvalidPath(PathError):
    """Raised for a path argument that is not acceptable at all (empty, NUL, too long, ``~``)."""

    code = "invalid_path"

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        shown = path if len(path) <= 200 else path[:200] + "..."
        super().__init__(f"invalid_path: {shown!r}: {reason}", detail={"reason": reason})


def _check_syntax(path: str) -> None:
    if not isinstance(path, str):
        raise InvalidPath(repr(path), "a path must be a string")
    if path == "":
        raise InvalidPath(path, "the path is empty")
    if "\0" in path:
        raise InvalidPath(path.replace("\0", "\\0"), "the path contains a NUL character")
    if path.startswith("~"):
        raise InvalidPath(
            path,
            "paths starting with '~' are refused (no home-directory expansion); use a workspace-relative path",
        )
    try:
        encoded = os.fsencode(path)
    except UnicodeEncodeError:
        raise InvalidPath(path, "the path is not valid Unicode") from None
    if len(encoded) > MAX_PATH_BYTES:
        raise InvalidPath(path, f"the path is {len(encoded)} bytes long (limit {MAX_PATH_BYTES})")
    for component in encoded.split(b"/"):
        if len(component) > MAX_COMPONENT_BYTES:
            raise InvalidPath(
                path, f"a path component is {len(component)} bytes long (limit {MAX_COMPONENT_BYTES})"
            )


def resolve_in_workspace(root: Path, path: str, *, private: Sequence[Path] = ()) -> Path:
    """Resolve a tool's path argument against the workspace root and check containment.

    Relative paths are taken relative to ``root``; absolute paths are accepted when they
    resolve inside it. Symlinks in existing components are followed (``os.path.realpath``), so a
    link pointing out of the workspace is refused; non-existent trailing components are resolved
    lexically.

    Policy on ``~``: a path starting with ``~`` is refused with :class:`InvalidPath`. It is never
    expanded to a home directory, and not silently treated as a literal directory name either
    (``./~/x`` names such a directory explicitly).

    Args:
        root: the session's workspace root (absolute; resolved here again to be safe).
        path: the path argument exactly as the model sent it.
        private: directories tools never enter (acagent's data dir, ``ToolContext.private_dirs``).

    Returns:
        The resolved absolute path, inside (or equal to) the resolved root.

    Raises:
        InvalidPath: the path is empty, holds a NUL byte, starts with ``~``, is not encodable,
            is longer than 4096 bytes or has a component longer than 255 bytes.
        PathOutsideWorkspace: the resolved path is not inside the root; the message carries the
            code ``path_outside_workspace`` and the resolved path.
        PathPrivate: the resolved path is (inside) one of ``private``.
    """
    _check_syntax(path)
    real_root = Path(os.path.realpath(root))
    candidate = Path(path)
    if not candidate.is_absolute():
        candidate = real_root / candidate
    resolved = Path(os.path.realpath(candidate))
    if not resolved.is_relative_to(real_root):
        raise PathOutsideWorkspace(path, resolved, real_root)
    hit = inside_any(resolved, private)
    if hit is not None:
        raise PathPrivate(path, hit)
    return resolved


def display_path(root: Path, resolved: Path) -> str:
    """``resolved`` relative to the workspace root, for messages (``.`` for the root itself)."""
    try:
        rel = resolved.relative_to(os.path.realpath(root))
    except ValueError:
        return str(resolved)
    return str(rel) if str(rel) != "." else "."
