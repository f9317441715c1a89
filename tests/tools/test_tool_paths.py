"""F19: file tools never reach outside the workspace.

Argument names in acagent's schemas: ``path``, ``content``, ``old_string`` / ``new_string`` (the
case's ``old`` / ``new``), ``pattern``; ``shell`` has no ``cwd`` argument at all. The error code
is the case's suggested ``path_outside_workspace``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from acagent.tools import (
    InvalidPath,
    PathOutsideWorkspace,
    ShellTool,
    ToolResult,
    default_tools,
    resolve_in_workspace,
    validate_arguments,
)

pytestmark = pytest.mark.anyio

SECRETS = ("SIBLING-7c1", "OUTSIDE-2b9", "root:x:0:0")


async def call(tool_name: str, arguments: dict[str, Any], ctx: Any) -> ToolResult:
    tool = default_tools()[tool_name]
    args, error = validate_arguments(tool, arguments)
    assert args is not None, error
    return await tool.run(args, ctx)


def outside_forms(B: Path) -> list[str]:
    """Path arguments that resolve outside $W (step 1 plus symlink escapes)."""
    return [
        "../proj-evil/secret.txt",
        f"{B}/proj-evil/secret.txt",
        "./../proj-evil/secret.txt",
        "sub/../../proj-evil/secret.txt",
        "/etc/passwd",
        "/proc/self/environ",
        "..",
        f"{B}/outside.txt",
        "../../etc/x",
        "../proj-evil/pwn.txt",
        f"{B}/proj2/pwn.txt",
        "sub/./../../pwn.txt",
        f"{B}",
        "../proj-evil/",
        f"{B}/proj-evil",
        f"{B}/proj/../proj-evil/secret.txt",
        "/",
        "link_out",
        "link_out/secret.txt",
        "link_out/pwn.txt",
        "link_file",
        "sub/rel_up/secret.txt",
        "link_in/../../outside.txt",
    ]


def tool_calls_for(form: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("read_file", {"path": form}),
        ("write_file", {"path": form, "content": "x"}),
        ("edit_file", {"path": form, "old_string": "SIBLING", "new_string": "EDITED"}),
        ("list_dir", {"path": form}),
        ("glob", {"pattern": "*", "path": form}),
        ("glob", {"pattern": "**/*", "path": form}),
    ]


def assert_refused(result: ToolResult, resolved: str | None = None) -> None:
    assert result.status == "error", result
    assert "path_outside_workspace" in result.content, result.content
    if resolved is not None:
        assert resolved in result.content, (resolved, result.content)
    for secret in SECRETS:
        assert secret not in result.content
    assert "Traceback" not in result.content


class TestResolveInWorkspace:
    def test_sibling_with_common_prefix_is_outside(self, layout):
        """``$B/proj-evil`` starts with the text of ``$W`` but is not inside it."""
        with pytest.raises(PathOutsideWorkspace) as info:
            resolve_in_workspace(layout.W, str(layout.B / "proj-evil" / "secret.txt"))
        assert "path_outside_workspace" in str(info.value)
        assert str(layout.B / "proj-evil" / "secret.txt") in str(info.value)

    def test_symlink_escape_is_outside(self, layout):
        with pytest.raises(PathOutsideWorkspace):
            resolve_in_workspace(layout.W, "link_out/secret.txt")
        with pytest.raises(PathOutsideWorkspace):
            resolve_in_workspace(layout.W, "sub/rel_up")

    def test_inside_forms(self, layout):
        W = layout.W
        assert resolve_in_workspace(W, ".") == W
        assert resolve_in_workspace(W, "sub/..") == W
        assert resolve_in_workspace(W, str(W / "f.txt")) == W / "f.txt"
        assert resolve_in_workspace(W, "link_in/x") == W / "sub" / "x"
        assert resolve_in_workspace(W, "%2e%2e/ok.txt") == W / "%2e%2e" / "ok.txt"
        assert resolve_in_workspace(W, "..\\ok.txt") == W / "..\\ok.txt"
        assert resolve_in_workspace(W, "．．/ok.txt") == W / "．．" / "ok.txt"
        assert resolve_in_workspace(W, "./~/x") == W / "~" / "x"

    @pytest.mark.parametrize(
        "path",
        ["", "a\0/../../pwn.txt", "~/pwn.txt", "~", "a" * 5000, "d/" + "b" * 256, "\ud800x"],
    )
    def test_invalid(self, layout, path):
        with pytest.raises(InvalidPath) as info:
            resolve_in_workspace(layout.W, path)
        assert "invalid_path" in str(info.value)


class TestSweep:
    async def test_every_tool_times_every_outside_form(self, layout, make_ctx):
        """Step 1 and symlink escapes, for every file tool: refused, no content, nothing written."""
        before = layout.outside_hashes()
        ctx = make_ctx()
        for form in outside_forms(layout.B):
            expected = os.path.realpath(form if form.startswith("/") else layout.W / form)
            for name, arguments in tool_calls_for(form):
                result = await call(name, arguments, ctx)
                assert_refused(result, expected)
        assert layout.outside_hashes() == before
        for p in ["pwn.txt", "proj2/pwn.txt", "proj-evil/pwn.txt", "home/pwn.txt"]:
            assert not (layout.B / p).exists()
        assert not (layout.B.parent / "etc" / "x").exists()

    @pytest.mark.parametrize(
        "pattern", ["../*", "**/../../*", "/etc/*", "../proj-evil/**", "sub/../../*", "/*", "./../*"]
    )
    async def test_glob_patterns_leaving_the_workspace(self, layout, make_ctx, pattern):
        assert_refused(await call("glob", {"pattern": pattern}, make_ctx()))

    async def test_glob_absolute_sibling_pattern(self, layout, make_ctx):
        result = await call("glob", {"pattern": f"{layout.B}/proj-evil/*"}, make_ctx())
        assert_refused(result, str(layout.B / "proj-evil"))

    async def test_glob_braces_are_literal(self, layout, make_ctx):
        result = await call("glob", {"pattern": "{..,.}/*"}, make_ctx())
        assert result.status == "ok"
        assert result.content == "(no matches)"

    async def test_glob_dotdot_inside_is_refused_too(self, layout, make_ctx):
        result = await call("glob", {"pattern": "sub/../*.txt"}, make_ctx())
        assert result.status == "error"
        assert "invalid_path" in result.content

    async def test_glob_never_follows_links_out(self, layout, make_ctx):
        ctx = make_ctx()
        for pattern in ["**/*", "*/*", "link_out/*", "*", "sub/*/*"]:
            result = await call("glob", {"pattern": pattern}, ctx)
            assert "secret.txt" not in result.content, (pattern, result.content)
            assert "link_out" not in result.content.splitlines()
            for secret in SECRETS:
                assert secret not in result.content

    async def test_glob_absolute_inside_is_accepted(self, layout, make_ctx):
        result = await call("glob", {"pattern": f"{layout.W}/*.txt"}, make_ctx())
        assert result.content == "f.txt"

    async def test_step5_still_refused_after_other_calls(self, layout, make_ctx):
        ctx = make_ctx()
        await call("write_file", {"path": "%2e%2e/ok.txt", "content": "x"}, ctx)
        assert_refused(await call("read_file", {"path": "../proj-evil/secret.txt"}, ctx))


class TestOddPaths:
    @pytest.mark.parametrize("path", ["~/pwn.txt", "a\0/../../pwn.txt", "", ".", "a" * 5000, "sub", "~"])
    async def test_write_file_odd_paths_are_clean_errors(self, layout, make_ctx, path):
        before = layout.outside_hashes()
        result = await call("write_file", {"path": path, "content": "x"}, make_ctx())
        assert result.status == "error"
        assert result.content.startswith("error: ")
        assert "Traceback" not in result.content
        assert not (layout.home / "pwn.txt").exists()
        assert not (layout.W / "~").exists()
        assert layout.outside_hashes() == before

    @pytest.mark.parametrize("path", ["~/pwn.txt", "a\0b", "", "a" * 5000])
    @pytest.mark.parametrize("tool", ["read_file", "edit_file", "list_dir", "glob"])
    async def test_other_tools_odd_paths(self, layout, make_ctx, tool, path):
        arguments: dict[str, Any] = {"path": path}
        if tool == "edit_file":
            arguments |= {"old_string": "a", "new_string": "b"}
        if tool == "glob":
            arguments["pattern"] = "*"
        result = await call(tool, arguments, make_ctx())
        assert result.status == "error"
        assert "invalid_path" in result.content

    @pytest.mark.parametrize("pattern", ["", "~/*", "a\0*"])
    async def test_glob_odd_patterns(self, layout, make_ctx, pattern):
        result = await call("glob", {"pattern": pattern}, make_ctx())
        assert result.status == "error"
        assert "invalid_path" in result.content


class TestLookAlikes:
    @pytest.mark.parametrize("path", ["%2e%2e/ok.txt", "..\\ok.txt", "．．/ok.txt", "./~/ok.txt"])
    async def test_traversal_look_alikes_stay_inside(self, layout, make_ctx, path):
        ctx = make_ctx()
        result = await call("write_file", {"path": path, "content": "x"}, ctx)
        assert result.status == "ok", result.content
        assert (layout.W / path).read_text() == "x"
        read = await call("read_file", {"path": path}, ctx)
        assert read.content == "     1\tx"


class TestShellWorkspace:
    def test_shell_has_no_cwd_argument(self):
        args, error = validate_arguments(ShellTool(), {"command": "pwd", "cwd": ".."})
        assert args is None
        assert "cwd" in (error or "")
        assert "cwd" not in ShellTool().parameters_schema()["properties"]

    async def test_shell_runs_in_the_workspace_root(self, layout, make_ctx):
        result = await call("shell", {"command": "pwd"}, make_ctx())
        assert result.content == f"{layout.W}\n"
