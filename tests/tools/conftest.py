"""Fixtures for the tool tests: the F19/F20 directory layout and a ToolContext factory."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from acagent.tools import ToolContext


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Layout:
    """``$B`` with ``$W = $B/proj`` and the F19 neighbours."""

    B: Path
    W: Path
    outputs: list[str] = field(default_factory=list)

    @property
    def home(self) -> Path:
        return self.B / "home"

    def outside_hashes(self) -> dict[str, str]:
        """sha256 of every file under $B outside $W (symlinks not followed)."""
        out = {}
        for dirpath, _dirs, files in os.walk(self.B):
            if Path(dirpath) == self.W or Path(dirpath).is_relative_to(self.W):
                continue
            for name in files:
                p = Path(dirpath) / name
                out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest() if not p.is_symlink() else "link"
        return out


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    B = Path(os.path.realpath(tmp_path)) / "b"
    W = B / "proj"
    (W / "sub").mkdir(parents=True)
    (B / "proj-evil").mkdir()
    (B / "proj-evil" / "secret.txt").write_text("SIBLING-7c1\n")
    (B / "proj2").mkdir()
    (B / "outside.txt").write_text("OUTSIDE-2b9\n")
    (B / "home").mkdir()
    (B / "home" / ".bashrc").write_text("# known bashrc\n")
    (W / "f.txt").write_text("a\nb\n")
    # symlink escapes
    (W / "link_out").symlink_to(B / "proj-evil")
    (W / "link_file").symlink_to(B / "outside.txt")
    (W / "sub" / "rel_up").symlink_to("../../proj-evil")
    # a link that stays inside
    (W / "link_in").symlink_to(W / "sub")
    return Layout(B=B, W=W)


@pytest.fixture
def make_ctx(layout: Layout) -> Callable[..., ToolContext]:
    def make(**kw: Any) -> ToolContext:
        kw.setdefault("emit_output", layout.outputs.append)
        kw.setdefault("tool_call_id", "call_1")
        return ToolContext(cwd=layout.W, session_id="s1", **kw)

    return make
