"""Shared plumbing of the file tools: error mapping and thread offloading.

Every file tool does its blocking work in a worker thread (``anyio.to_thread.run_sync``) and
turns every failure into a clean ``ToolResult(status="error")`` whose content starts with
``error:`` and names the path; nothing but cancellation escapes :meth:`Tool.run`.
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path

import anyio

from acagent.tools._base import ToolResult
from acagent.tools._paths import PathError, display_path

__all__ = ["FileToolError", "error_result", "oserror_message", "run_file_op"]


class FileToolError(Exception):
    """A refusal with a ready message (not found, not unique, is a directory, ...)."""


_ERRNO_TEXT = {
    errno.ENOENT: "not found",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EISDIR: "is a directory",
    errno.ENOTDIR: "not a directory (a parent component is a file)",
    errno.ELOOP: "too many levels of symbolic links",
    errno.ENAMETOOLONG: "name too long",
    errno.ENOSPC: "no space left on device",
    errno.EROFS: "read-only file system",
    errno.EEXIST: "already exists",
}


def oserror_message(exc: OSError, root: Path) -> str:
    """``'<path>': <reason>`` for an OSError, with the path shown relative to the workspace."""
    reason = _ERRNO_TEXT.get(exc.errno or 0, exc.strerror or str(exc))
    if exc.filename is not None:
        shown = display_path(root, Path(str(exc.filename)))
        return f"{shown!r}: {reason}"
    return reason


def error_result(message: str) -> ToolResult:
    """``ToolResult(status="error")`` with content ``error: <message>``."""
    return ToolResult(content=f"error: {message}", status="error")


async def run_file_op(root: Path, op: Callable[[], ToolResult]) -> ToolResult:
    """Run a blocking file operation in a worker thread, mapping every failure to an error result."""
    try:
        return await anyio.to_thread.run_sync(op)
    except PathError as exc:
        return error_result(exc.message)
    except FileToolError as exc:
        return error_result(str(exc))
    except OSError as exc:
        return error_result(oserror_message(exc, root))
    except ValueError as exc:  # e.g. "embedded null byte" from a lower layer
        return error_result(f"invalid argument: {exc}")
    except Exception as exc:
        return error_result(f"{type(exc).__name__}: {exc}")
