"""read_file, write_file, edit_file, list_dir, glob, ask_user: behaviour and error results."""

from __future__ import annotations

import os
import stat
from typing import Any

import pytest

from acagent.tools import ToolResult, default_tools, validate_arguments
from acagent.tools._files import MAX_READ_BYTES, MAX_READ_LINES
from acagent.tools._listing import MAX_ENTRIES

pytestmark = pytest.mark.anyio


async def call(tool_name: str, arguments: dict[str, Any], ctx: Any) -> ToolResult:
    tool = default_tools()[tool_name]
    args, error = validate_arguments(tool, arguments)
    assert args is not None, error
    return await tool.run(args, ctx)


class TestReadFile:
    @pytest.fixture
    def ten(self, layout):
        (layout.W / "ten.txt").write_text("".join(f"line{i}\n" for i in range(1, 11)))
        return "ten.txt"

    async def test_numbered_lines(self, layout, make_ctx):
        result = await call("read_file", {"path": "f.txt"}, make_ctx())
        assert result.content == "     1\ta\n     2\tb"

    async def test_offset_and_limit(self, make_ctx, ten):
        result = await call("read_file", {"path": ten, "offset": 3, "limit": 2}, make_ctx())
        lines = result.content.splitlines()
        assert lines[:2] == ["     3\tline3", "     4\tline4"]
        assert "pass offset=5" in lines[2]

    async def test_limit_reaching_the_end_has_no_note(self, make_ctx, ten):
        result = await call("read_file", {"path": ten, "offset": 9, "limit": 2}, make_ctx())
        assert result.content == "     9\tline9\n    10\tline10"

    async def test_offset_past_end(self, make_ctx, ten):
        result = await call("read_file", {"path": ten, "offset": 50}, make_ctx())
        assert result.status == "ok"
        assert "past the end" in result.content
        assert "10 lines" in result.content

    async def test_line_cap(self, layout, make_ctx):
        (layout.W / "big.txt").write_text("x\n" * (MAX_READ_LINES + 5))
        result = await call("read_file", {"path": "big.txt"}, make_ctx())
        lines = result.content.splitlines()
        assert len(lines) == MAX_READ_LINES + 1
        assert f"pass offset={MAX_READ_LINES + 1}" in lines[-1]

    async def test_byte_cap(self, layout, make_ctx):
        (layout.W / "wide.txt").write_text(("y" * 1000 + "\n") * 600)
        result = await call("read_file", {"path": "wide.txt"}, make_ctx())
        assert len(result.content) < MAX_READ_BYTES + 20_000
        assert "KiB cap" in result.content.splitlines()[-1]

    async def test_crlf_and_invalid_utf8(self, layout, make_ctx):
        (layout.W / "w.txt").write_bytes(b"a\r\nb\xff\n")
        result = await call("read_file", {"path": "w.txt"}, make_ctx())
        assert result.content == "     1\ta\n     2\tb\ufffd"

    async def test_empty_file(self, layout, make_ctx):
        (layout.W / "e.txt").write_text("")
        assert (await call("read_file", {"path": "e.txt"}, make_ctx())).content == "(empty file)"

    async def test_binary_file_is_a_clean_error(self, layout, make_ctx):
        (layout.W / "bin").write_bytes(b"\x7fELF\x00\x01\x02")
        result = await call("read_file", {"path": "bin"}, make_ctx())
        assert result.status == "error"
        assert "binary" in result.content

    @pytest.mark.parametrize(("path", "text"), [("nope.txt", "not found"), ("sub", "is a directory")])
    async def test_errors(self, make_ctx, path, text):
        result = await call("read_file", {"path": path}, make_ctx())
        assert result.status == "error"
        assert text in result.content

    async def test_fifo_is_refused_without_blocking(self, layout, make_ctx):
        os.mkfifo(layout.W / "fifo")
        result = await call("read_file", {"path": "fifo"}, make_ctx())
        assert "not a regular file" in result.content

    @pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions")
    async def test_permission_denied(self, layout, make_ctx):
        p = layout.W / "locked.txt"
        p.write_text("x")
        p.chmod(0)
        result = await call("read_file", {"path": "locked.txt"}, make_ctx())
        assert "permission denied" in result.content

    def test_schema_rejects_bad_offsets(self):
        tool = default_tools()["read_file"]
        assert validate_arguments(tool, {"path": "f", "offset": 0})[0] is None
        assert validate_arguments(tool, {"path": "f", "limit": 0})[0] is None
        assert validate_arguments(tool, {"path": "f", "bogus": 1})[0] is None


class TestWriteFile:
    async def test_creates_parents_and_reports(self, layout, make_ctx):
        result = await call("write_file", {"path": "new/deep/x.txt", "content": "hello\nworld\n"}, make_ctx())
        assert result.status == "ok"
        assert result.content == "created 'new/deep/x.txt' (12 bytes, 2 lines)"
        assert (layout.W / "new/deep/x.txt").read_text() == "hello\nworld\n"

    async def test_overwrite_is_atomic_and_keeps_mode(self, layout, make_ctx):
        p = layout.W / "f.txt"
        p.chmod(0o640)
        inode_before = p.stat().st_ino
        result = await call("write_file", {"path": "f.txt", "content": "new"}, make_ctx())
        assert result.content.startswith("overwrote 'f.txt'")
        assert p.read_text() == "new"
        assert stat.S_IMODE(p.stat().st_mode) == 0o640
        assert p.stat().st_ino != inode_before  # replaced by rename, not rewritten in place
        assert not [n for n in os.listdir(layout.W) if n.endswith(".tmp")]

    async def test_new_file_mode_follows_umask(self, layout, make_ctx):
        await call("write_file", {"path": "m.txt", "content": ""}, make_ctx())
        umask = os.umask(0)
        os.umask(umask)
        assert stat.S_IMODE((layout.W / "m.txt").stat().st_mode) == 0o666 & ~umask

    async def test_through_inside_symlink_writes_target(self, layout, make_ctx):
        await call("write_file", {"path": "link_in/t.txt", "content": "z"}, make_ctx())
        assert (layout.W / "sub" / "t.txt").read_text() == "z"

    async def test_parent_is_a_file(self, make_ctx):
        result = await call("write_file", {"path": "f.txt/x", "content": "z"}, make_ctx())
        assert result.status == "error"
        assert "not a directory" in result.content

    async def test_failed_write_leaves_no_temp_file(self, layout, make_ctx):
        (layout.W / "ro").mkdir()
        (layout.W / "ro" / "a.txt").write_text("old")
        (layout.W / "ro").chmod(0o500)
        try:
            result = await call("write_file", {"path": "ro/a.txt", "content": "new"}, make_ctx())
        finally:
            (layout.W / "ro").chmod(0o700)
        if os.geteuid() != 0:
            assert result.status == "error"
            assert "permission denied" in result.content
            assert (layout.W / "ro" / "a.txt").read_text() == "old"
        assert os.listdir(layout.W / "ro") == ["a.txt"]


class TestEditFile:
    async def test_unique_replace(self, layout, make_ctx):
        (layout.W / "e.txt").write_text("alpha beta gamma\n")
        result = await call(
            "edit_file", {"path": "e.txt", "old_string": "beta", "new_string": "BETA"}, make_ctx()
        )
        assert result.content == "replaced 1 occurrence in 'e.txt'"
        assert (layout.W / "e.txt").read_text() == "alpha BETA gamma\n"

    async def test_not_unique_is_refused(self, layout, make_ctx):
        (layout.W / "e.txt").write_text("x x x\n")
        result = await call("edit_file", {"path": "e.txt", "old_string": "x", "new_string": "y"}, make_ctx())
        assert result.status == "error"
        assert "occurs 3 times" in result.content
        assert (layout.W / "e.txt").read_text() == "x x x\n"

    async def test_replace_all(self, layout, make_ctx):
        (layout.W / "e.txt").write_text("x x x\n")
        result = await call(
            "edit_file",
            {"path": "e.txt", "old_string": "x", "new_string": "y", "replace_all": True},
            make_ctx(),
        )
        assert result.content == "replaced 3 occurrences in 'e.txt'"
        assert (layout.W / "e.txt").read_text() == "y y y\n"

    async def test_not_found(self, make_ctx):
        result = await call(
            "edit_file", {"path": "f.txt", "old_string": "zzz", "new_string": "y"}, make_ctx()
        )
        assert result.status == "error"
        assert "not found" in result.content

    async def test_preserves_crlf(self, layout, make_ctx):
        (layout.W / "c.txt").write_bytes(b"one\r\ntwo\r\n")
        await call("edit_file", {"path": "c.txt", "old_string": "two", "new_string": "2"}, make_ctx())
        assert (layout.W / "c.txt").read_bytes() == b"one\r\n2\r\n"

    @pytest.mark.parametrize(("old", "new"), [("", "x"), ("a", "a")])
    async def test_degenerate_arguments(self, make_ctx, old, new):
        result = await call("edit_file", {"path": "f.txt", "old_string": old, "new_string": new}, make_ctx())
        assert result.status == "error"

    async def test_non_utf8(self, layout, make_ctx):
        (layout.W / "l1.txt").write_bytes(b"caf\xe9\n")
        result = await call(
            "edit_file", {"path": "l1.txt", "old_string": "caf", "new_string": "x"}, make_ctx()
        )
        assert "not a UTF-8 text file" in result.content


class TestListAndGlob:
    async def test_list_dir_marks_dirs_and_links(self, layout, make_ctx):
        result = await call("list_dir", {}, make_ctx())
        assert result.content.splitlines() == ["f.txt", "link_file@", "link_in@", "link_out@", "sub/"]

    async def test_list_dir_cap(self, layout, make_ctx):
        d = layout.W / "many"
        d.mkdir()
        for i in range(MAX_ENTRIES + 3):
            (d / f"n{i:05d}").touch()
        lines = (await call("list_dir", {"path": "many"}, make_ctx())).content.splitlines()
        assert len(lines) == MAX_ENTRIES + 1
        assert lines[-1] == "[... 3 more entries not shown]"

    async def test_list_dir_errors(self, make_ctx):
        assert "not found" in (await call("list_dir", {"path": "nope"}, make_ctx())).content
        assert "not a directory" in (await call("list_dir", {"path": "f.txt"}, make_ctx())).content

    async def test_glob_recursive_sorted_relative(self, layout, make_ctx):
        (layout.W / "sub" / "b.txt").write_text("")
        (layout.W / "sub" / "a.txt").write_text("")
        result = await call("glob", {"pattern": "**/*.txt"}, make_ctx())
        assert result.content.splitlines() == ["f.txt", "sub/a.txt", "sub/b.txt"]
        result = await call("glob", {"pattern": "*.txt", "path": "sub"}, make_ctx())
        assert result.content.splitlines() == ["sub/a.txt", "sub/b.txt"]

    async def test_glob_no_match(self, make_ctx):
        assert (await call("glob", {"pattern": "*.nothing"}, make_ctx())).content == "(no matches)"

    async def test_glob_dot(self, make_ctx):
        result = await call("glob", {"pattern": "."}, make_ctx())
        assert result.status == "ok"
        assert result.content == "."


class TestAskUser:
    async def test_no_interactive_user(self, make_ctx):
        result = await call("ask_user", {"question": "which?"}, make_ctx())
        assert result.status == "error"
        assert "no interactive user" in result.content

    async def test_answer_is_returned(self, make_ctx):
        asked: list[str] = []

        async def ask(question: str) -> str:
            asked.append(question)
            return "the blue one"

        result = await call("ask_user", {"question": "which?"}, make_ctx(ask_user=ask))
        assert result.content == "the blue one"
        assert asked == ["which?"]
        assert default_tools()["ask_user"].interactive is True
        assert default_tools()["ask_user"].read_only is True
