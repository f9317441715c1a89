"""``read_file``, ``write_file`` and ``edit_file``.

Every path argument goes through :func:`~acagent.tools.resolve_in_workspace` (with the call's
private dirs, :meth:`ToolContext.resolve`); every failure is
an error result (see :mod:`acagent.tools._common`).

``read_file`` output format (what the model sees): one line per file line, ``cat -n`` style —
the 1-based line number right-aligned in 6 columns, a tab, then the line without its line
ending. Undecodable bytes show as U+FFFD. A call shows at most :data:`MAX_READ_LINES` lines and
:data:`MAX_READ_BYTES` bytes; a line longer than :data:`MAX_LINE_BYTES` is cut and marked
``[line truncated]``. When more lines follow, a final note says which ``offset`` continues.
Files holding a NUL byte in their first 8 KiB are refused as binary.

``write_file`` and ``edit_file`` write atomically: a temporary file in the target's directory,
fsync, then ``os.replace``; an existing file keeps its permission bits.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path
from typing import BinaryIO, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from acagent.tools._base import Tool, ToolContext, ToolResult
from acagent.tools._common import FileToolError, run_file_op
from acagent.tools._paths import display_path

__all__ = [
    "MAX_LINE_BYTES",
    "MAX_READ_BYTES",
    "MAX_READ_LINES",
    "EditFileArgs",
    "EditFileTool",
    "ReadFileArgs",
    "ReadFileTool",
    "WriteFileArgs",
    "WriteFileTool",
    "atomic_write",
]

MAX_READ_LINES = 2000
"""Most lines one ``read_file`` call returns."""
MAX_READ_BYTES = 256 * 1024
"""Most bytes of file content one ``read_file`` call returns."""
MAX_LINE_BYTES = 4000
"""Longer lines are cut to this many bytes."""
_BINARY_SNIFF_BYTES = 8192


def _lines(n: int) -> str:
    return f"{n} line" if n == 1 else f"{n} lines"


def atomic_write(path: Path, data: bytes) -> bool:
    """Write ``data`` to ``path`` atomically (temp file, fsync, ``os.replace``).

    Returns:
        True if the file existed before.

    Raises:
        OSError: the directory is not writable, the disk is full, ...
    """
    try:
        mode: int | None = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = None
    tmp = path.parent / f".acagent-{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666 if mode is None else 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return mode is not None


def _regular_file(root: Path, path: Path) -> None:
    st = path.stat()
    shown = display_path(root, path)
    if stat.S_ISDIR(st.st_mode):
        raise FileToolError(f"{shown!r}: is a directory (use list_dir)")
    if not stat.S_ISREG(st.st_mode):
        raise FileToolError(f"{shown!r}: not a regular file")


class ReadFileArgs(BaseModel):
    """Arguments of ``read_file``."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="File path, relative to the workspace root (or absolute inside it).")
    offset: int = Field(default=1, ge=1, description="1-based number of the first line to show.")
    limit: int | None = Field(
        default=None, ge=1, description=f"Number of lines to show (default and maximum {MAX_READ_LINES})."
    )


def _next_line(fh: BinaryIO) -> tuple[bytes, bool] | None:
    """The next line (cut to MAX_LINE_BYTES) and whether it was cut; None at end of file."""
    raw = fh.readline(MAX_LINE_BYTES)
    if not raw:
        return None
    if raw.endswith(b"\n") or len(raw) < MAX_LINE_BYTES:
        return raw, False
    while True:  # skip the rest of an over-long line
        more = fh.readline(65536)
        if not more or more.endswith(b"\n"):
            return raw, True


def _read(ctx: ToolContext, args: ReadFileArgs) -> ToolResult:
    root = ctx.cwd
    path = ctx.resolve(args.path)
    _regular_file(root, path)
    shown = display_path(root, path)
    limit = min(args.limit or MAX_READ_LINES, MAX_READ_LINES)
    out: list[str] = []
    with path.open("rb") as fh:
        if b"\0" in fh.read(_BINARY_SNIFF_BYTES):
            raise FileToolError(
                f"{shown!r}: binary file ({path.stat().st_size} bytes); read_file shows text only"
            )
        fh.seek(0)
        lineno = 0
        nbytes = 0
        stopped_by_bytes = False
        while True:
            if len(out) >= limit:
                break
            item = _next_line(fh)
            if item is None:
                break
            lineno += 1
            if lineno < args.offset:
                continue
            raw, cut = item
            if nbytes + len(raw) > MAX_READ_BYTES and out:
                stopped_by_bytes = True
                lineno -= 1
                break
            nbytes += len(raw)
            text = raw.decode("utf-8", errors="replace").rstrip("\n").removesuffix("\r")
            out.append(f"{lineno:6d}\t{text}" + (" [line truncated]" if cut else ""))
        more = stopped_by_bytes or (_next_line(fh) is not None)
    if lineno == 0:
        return ToolResult(content="(empty file)")
    if not out:
        return ToolResult(content=f"[offset {args.offset} is past the end of {shown!r} ({_lines(lineno)})]")
    body = "\n".join(out)
    if more:
        first = args.offset
        why = f"the {MAX_READ_BYTES // 1024} KiB cap" if stopped_by_bytes else f"{_lines(len(out))}"
        body += f"\n[showing lines {first}-{lineno} ({why}); more lines follow: pass offset={lineno + 1}]"
    return ToolResult(content=body)


class ReadFileTool(Tool):
    """Read a text file with line numbers."""

    name: ClassVar[str] = "read_file"
    description: ClassVar[str] = (
        "Read a text file of the workspace. Output lines are numbered like `cat -n` (number, tab, "
        f"text). Shows at most {MAX_READ_LINES} lines / {MAX_READ_BYTES // 1024} KiB per call; use "
        "offset (1-based line) and limit to page."
    )
    args_model: ClassVar[type[BaseModel]] = ReadFileArgs
    idempotent: ClassVar[bool] = True
    read_only: ClassVar[bool] = True

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        """Read the requested line range."""
        assert isinstance(args, ReadFileArgs)
        return await run_file_op(ctx.cwd, lambda: _read(ctx, args))


class WriteFileArgs(BaseModel):
    """Arguments of ``write_file``."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(
        description="File path, relative to the workspace root; parent directories are created."
    )
    content: str = Field(description="The complete new content of the file (UTF-8).")


def _prepare_target(ctx: ToolContext, raw_path: str) -> Path:
    root = ctx.cwd
    path = ctx.resolve(raw_path)
    shown = display_path(root, path)
    if path.is_dir():
        raise FileToolError(f"{shown!r}: is a directory")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise FileToolError(f"{shown!r}: a parent component exists and is not a directory") from None
    # The parent now exists: resolve once more so a link created meanwhile cannot redirect us.
    again = ctx.resolve(str(path))
    if again != path:
        raise FileToolError(f"{shown!r}: the path changed while it was being prepared")
    return path


def _write(ctx: ToolContext, args: WriteFileArgs) -> ToolResult:
    root = ctx.cwd
    path = _prepare_target(ctx, args.path)
    data = args.content.encode("utf-8")
    existed = atomic_write(path, data)
    verb = "overwrote" if existed else "created"
    n_lines = args.content.count("\n") + (0 if args.content.endswith("\n") or not args.content else 1)
    return ToolResult(
        content=f"{verb} {display_path(root, path)!r} ({len(data)} bytes, {_lines(n_lines)})",
        data={"path": str(path), "bytes": len(data), "created": not existed},
    )


class WriteFileTool(Tool):
    """Create or overwrite a file atomically."""

    name: ClassVar[str] = "write_file"
    description: ClassVar[str] = (
        "Create or overwrite a file in the workspace with the given content (parent directories "
        "are created). The write is atomic."
    )
    args_model: ClassVar[type[BaseModel]] = WriteFileArgs
    idempotent: ClassVar[bool] = True
    """Writing the same content twice leaves the same file."""
    read_only: ClassVar[bool] = False

    def written_paths(self, args: BaseModel) -> list[str]:
        """``[args.path]``."""
        assert isinstance(args, WriteFileArgs)
        return [args.path]

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        """Write the file."""
        assert isinstance(args, WriteFileArgs)
        return await run_file_op(ctx.cwd, lambda: _write(ctx, args))


class EditFileArgs(BaseModel):
    """Arguments of ``edit_file``."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="File path, relative to the workspace root.")
    old_string: str = Field(description="Exact text to replace; must occur exactly once unless replace_all.")
    new_string: str = Field(description="Replacement text.")
    replace_all: bool = Field(default=False, description="Replace every occurrence instead of exactly one.")


def _edit(ctx: ToolContext, args: EditFileArgs) -> ToolResult:
    root = ctx.cwd
    path = ctx.resolve(args.path)
    _regular_file(root, path)
    shown = display_path(root, path)
    if args.old_string == "":
        raise FileToolError("old_string is empty; use write_file to create or overwrite a file")
    if args.old_string == args.new_string:
        raise FileToolError("old_string and new_string are identical; nothing to change")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise FileToolError(f"{shown!r}: not a UTF-8 text file; edit_file edits text only") from None
    count = text.count(args.old_string)
    if count == 0:
        raise FileToolError(f"old_string not found in {shown!r} (it must match exactly, whitespace included)")
    if count > 1 and not args.replace_all:
        raise FileToolError(
            f"old_string occurs {count} times in {shown!r}; add surrounding context to make it unique, "
            "or set replace_all=true"
        )
    new_text = text.replace(args.old_string, args.new_string)
    atomic_write(path, new_text.encode("utf-8"))
    n = count if args.replace_all else 1
    return ToolResult(
        content=f"replaced {n} occurrence{'s' if n != 1 else ''} in {shown!r}",
        data={"path": str(path), "replacements": n},
    )


class EditFileTool(Tool):
    """Replace an exact string in a file."""

    name: ClassVar[str] = "edit_file"
    description: ClassVar[str] = (
        "Replace an exact occurrence of old_string with new_string in a workspace file. Fails if "
        "old_string is missing or occurs more than once (unless replace_all is true)."
    )
    args_model: ClassVar[type[BaseModel]] = EditFileArgs
    idempotent: ClassVar[bool] = False
    read_only: ClassVar[bool] = False

    def written_paths(self, args: BaseModel) -> list[str]:
        """``[args.path]``."""
        assert isinstance(args, EditFileArgs)
        return [args.path]

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        """Apply the replacement."""
        assert isinstance(args, EditFileArgs)
        return await run_file_op(ctx.cwd, lambda: _edit(ctx, args))
