"""StdinLines: the CLI's one stdin line reader (no thread blocked in readline)."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from acagent.cli._tty import StdinLines

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_lines_of_one_chunk_from_a_pipe_come_one_by_one() -> None:
    r, w = os.pipe()
    try:
        os.write(w, "first\nsecond ü\n".encode())
        lines = StdinLines(r)
        assert await lines.readline() == "first\n"
        assert await lines.readline() == "second ü\n"
        os.write(w, b"par")
        with anyio.move_on_after(0.2):  # half a line: still waiting, not returned early
            await lines.readline()
            pytest.fail("returned a partial line")
        os.write(w, b"tial\n")
        os.close(w)
        w = -1
        assert await lines.readline() == "partial\n"
        assert await lines.readline() == ""
    finally:
        os.close(r)
        if w != -1:
            os.close(w)


async def test_a_regular_file_is_read_without_polling(tmp_path: Path) -> None:
    path = tmp_path / "messages.txt"
    path.write_bytes(b"one\ntwo\nlast without newline")
    fd = os.open(path, os.O_RDONLY)
    try:
        lines = StdinLines(fd)  # epoll refuses regular files: polling it would raise
        assert [await lines.readline() for _ in range(4)] == ["one\n", "two\n", "last without newline", ""]
    finally:
        os.close(fd)


async def test_dev_null_is_end_of_input_not_an_error() -> None:
    """``attach ID < /dev/null`` (scripts, nohup, systemd) ended with "Operation not permitted":
    epoll refuses /dev/null as it refuses regular files, but it is a character device."""
    fd = os.open(os.devnull, os.O_RDONLY)
    try:
        lines = StdinLines(fd)
        assert await lines.readline() == ""
        assert await lines.readline() == ""
    finally:
        os.close(fd)
