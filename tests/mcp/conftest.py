"""Fixtures for the MCP tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.mcp._support import pids_alive


@pytest.fixture
def state(tmp_path: Path) -> Iterator[Path]:
    """The demo server's state directory; any server still running at the end is killed (and fails the test)."""
    path = tmp_path / "demo-state"
    path.mkdir()
    yield path
    left = pids_alive(path)
    for pid in left:
        try:
            os.killpg(pid, 9)
        except OSError:
            pass
    assert not left, f"MCP server processes left running: {left}"
