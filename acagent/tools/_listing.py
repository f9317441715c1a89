"""``list_dir`` and ``glob``: read-only views of the workspace tree.

``list_dir`` output: one entry per line, sorted by name; directories end with ``/``, symbolic
links with ``@`` (links are not followed); at most :data:`MAX_ENTRIES` entries, then a note.

``glob`` output: matching paths relative to the workspace root, sorted, directories ending with
``/``, at most :data:`MAX_ENTRIES`, then a note. Pattern syntax is :meth:`pathlib.Path.glob`:
``*``, ``?``, ``[...]`` within one component and ``**`` for any depth. There is no brace
expansion: ``{a,b}`` is a literal name. A pattern with a ``..`` component is refused (with
``path_outside_workspace`` when it would leave the workspace, ``invalid_path`` otherwise); an
absolute pattern is accepted only when its literal leading directories resolve inside the
workspace; and every match is re-checked with :func:`~acagent.tools.resolve_in_workspace`, so a
symlink pointing out of the workspace never yields a match.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from acagent.tools._base import Tool, ToolContext, ToolResult
from acagent.tools._common import FileToolError, run_file_op
from acagent.tools._paths import (
    InvalidPath,
    PathOutsideWorkspace,
    PathPrivate,
    display_path,
    resolve_in_workspace,
)

__all__ = ["MAX_ENTRIES", "GlobArgs", "GlobTool", "ListDirArgs", "ListDirTool"]

MAX_ENTRIES = 1000
"""Most entries one ``list_dir`` or ``glob`` call returns."""
MAX_SCANNED = 50_000
"""``glob`` stops collecting matches after this many."""


def _directory(ctx: ToolContext, raw_path: str) -> Path:
    root = ctx.cwd
    path = ctx.resolve(raw_path)
    st = path.stat()
    if not stat.S_ISDIR(st.st_mode):
        raise FileToolError(f"{display_path(root, path)!r}: not a directory")
    return path


class ListDirArgs(BaseModel):
    """Arguments of ``list_dir``."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(default=".", description="Directory to list, relative to the workspace root.")


def _list(ctx: ToolContext, args: ListDirArgs) -> ToolResult:
    path = _directory(ctx, args.path)
    names: list[str] = []
    with os.scandir(path) as it:
        for entry in it:
            if entry.is_symlink():
                names.append(entry.name + "@")
            elif entry.is_dir(follow_symlinks=False):
                names.append(entry.name + "/")
            else:
                names.append(entry.name)
    names.sort()
    if not names:
        return ToolResult(content="(empty directory)")
    shown = names[:MAX_ENTRIES]
    body = "\n".join(shown)
    if len(names) > MAX_ENTRIES:
        body += f"\n[... {len(names) - MAX_ENTRIES} more entries not shown]"
    return ToolResult(content=body)


class ListDirTool(Tool):
    """List a directory."""

    name: ClassVar[str] = "list_dir"
    description: ClassVar[str] = (
        "List the entries of a workspace directory, sorted; directories end with '/', symbolic "
        f"links with '@'. At most {MAX_ENTRIES} entries."
    )
    args_model: ClassVar[type[BaseModel]] = ListDirArgs
    idempotent: ClassVar[bool] = True
    read_only: ClassVar[bool] = True

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        """List the directory."""
        assert isinstance(args, ListDirArgs)
        return await run_file_op(ctx.cwd, lambda: _list(ctx, args))


class GlobArgs(BaseModel):
    """Arguments of ``glob``."""

    model_config = ConfigDict(extra="forbid")

    pattern: str = Field(
        description="Glob pattern such as '**/*.py' or 'src/*.txt' (no brace expansion, no '..')."
    )
    path: str = Field(default=".", description="Directory the pattern is relative to (inside the workspace).")


def _has_magic(component: str) -> bool:
    return any(c in component for c in "*?[")


def _split_pattern(root: Path, base: Path, pattern: str) -> tuple[Path, str]:
    """Check the pattern and return ``(directory, relative pattern)`` to run ``glob`` with."""
    if pattern == "":
        raise InvalidPath(pattern, "the glob pattern is empty")
    if "\0" in pattern:
        raise InvalidPath(pattern.replace("\0", "\\0"), "the glob pattern contains a NUL character")
    if pattern.startswith("~"):
        raise InvalidPath(pattern, "patterns starting with '~' are refused (no home-directory expansion)")
    components = pattern.split("/")
    if ".." in components:
        literal = pattern if pattern.startswith("/") else str(base / pattern)
        try:
            resolve_in_workspace(root, literal)
        except PathOutsideWorkspace as exc:
            raise PathOutsideWorkspace(pattern, exc.resolved, exc.root) from None
        raise InvalidPath(pattern, "glob patterns may not contain '..' components")
    parts = [c for c in components if c not in ("", ".")]
    if not pattern.startswith("/"):
        if not parts:  # "." or "./": the directory itself
            return base.parent, base.name
        return base, "/".join(parts)
    # Absolute: the literal leading directories must resolve inside the workspace.
    split = next((i for i, c in enumerate(parts) if _has_magic(c)), len(parts))
    prefix = "/" + "/".join(parts[:split])
    try:
        directory = resolve_in_workspace(root, prefix)
    except PathOutsideWorkspace as exc:
        raise PathOutsideWorkspace(pattern, exc.resolved, exc.root) from None
    rest = "/".join(parts[split:])
    if not rest:  # no wildcard at all: match the path itself
        return directory.parent, directory.name
    return directory, rest


def _glob(ctx: ToolContext, args: GlobArgs) -> ToolResult:
    root = ctx.cwd
    real_root = ctx.resolve(".")
    base = _directory(ctx, args.path)
    directory, pattern = _split_pattern(root, base, args.pattern)
    if not directory.is_dir():
        return ToolResult(content="(no matches)")
    matches: list[str] = []
    skipped = private = 0
    truncated = False
    for match in directory.glob(pattern):
        try:
            resolved = ctx.resolve(str(match))
        except PathPrivate:
            private += 1
            continue
        except (PathOutsideWorkspace, InvalidPath):
            skipped += 1
            continue
        try:
            rel = str(match.relative_to(real_root))
        except ValueError:
            rel = display_path(root, resolved)
        matches.append(rel + "/" if resolved.is_dir() and rel != "." else rel)
        if len(matches) >= MAX_SCANNED:
            truncated = True
            break
    matches.sort()
    notes = []
    if len(matches) > MAX_ENTRIES:
        notes.append(f"[... {len(matches) - MAX_ENTRIES} more matches not shown]")
    if truncated:
        notes.append(f"[search stopped after {MAX_SCANNED} matches; narrow the pattern]")
    if skipped:
        notes.append(f"[{skipped} matches resolving outside the workspace omitted]")
    if private:
        notes.append(f"[{private} matches inside acagent's own data directory omitted]")
    if not matches:
        return ToolResult(content="\n".join(["(no matches)", *notes]))
    return ToolResult(content="\n".join([*matches[:MAX_ENTRIES], *notes]))


class GlobTool(Tool):
    """Find files by glob pattern."""

    name: ClassVar[str] = "glob"
    description: ClassVar[str] = (
        "Find workspace paths matching a glob pattern ('*', '?', '[...]', '**' for any depth; no "
        f"brace expansion). Returns paths relative to the workspace root, sorted, at most {MAX_ENTRIES}."
    )
    args_model: ClassVar[type[BaseModel]] = GlobArgs
    idempotent: ClassVar[bool] = True
    read_only: ClassVar[bool] = True

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        """Run the glob."""
        assert isinstance(args, GlobArgs)
        return await run_file_op(ctx.cwd, lambda: _glob(ctx, args))
