"""MCP configuration: user and project files, approval of project servers, ``${VAR}``, the CLI.

The CLI part runs ``acagent mcp list|check|approve`` and ``acagent doctor`` as real subprocesses
(one server start in all: the project server after its approval).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from acagent.errors import ConfigError
from acagent.mcp import ApprovalStore, load_server_specs, parse_mcp_table
from acagent.mcp._config import expand_vars
from acagent.settings import load_settings
from tests.mcp._support import BAD, write_config


def _project(workspace: Path, servers: dict[str, Any]) -> Path:
    return write_config(workspace / ".acagent" / "config.toml", servers)


class TestSpecs:
    """Which servers a directory sees."""

    def test_project_wins_and_needs_approval_once_per_definition(
        self, tmp_path: Path, workspace: Path
    ) -> None:
        """A project server of the same name replaces the user's and is not approved until the
        user approves it; a changed definition needs a new approval."""
        user = {"servers": {"a": {"command": ["user-a"]}, "b": {"url": "http://127.0.0.1:1/mcp"}}}
        _project(workspace, {"a": {"command": ["project-a"]}})
        (workspace / "sub").mkdir()
        specs, warnings = load_server_specs(user, tmp_path, workspace / "sub")  # found from a subdirectory
        assert warnings == []
        by_name = {s.name: s for s in specs}
        assert by_name["a"].config.command == ["project-a"] and by_name["a"].source == "project"
        assert by_name["a"].approved is False and by_name["b"].approved is True
        ApprovalStore(tmp_path).approve(workspace, "a", by_name["a"].config)
        assert (tmp_path / "mcp-approvals.json").stat().st_mode & 0o777 == 0o600
        assert {s.name: s.approved for s in load_server_specs(user, tmp_path, workspace)[0]}["a"] is True
        _project(workspace, {"a": {"command": ["project-a", "--changed"]}})
        assert {s.name: s.approved for s in load_server_specs(user, tmp_path, workspace)[0]}["a"] is False

    def test_bad_project_file_is_a_warning_bad_user_table_an_error(
        self, tmp_path: Path, workspace: Path
    ) -> None:
        """One broken repository never stops acagent; the user's own typo is a ConfigError."""
        (workspace / ".acagent").mkdir()
        (workspace / ".acagent" / "config.toml").write_text("[mcp.servers.x]\nurl = 3\n")
        specs, warnings = load_server_specs({}, tmp_path, workspace)
        assert specs == [] and len(warnings) == 1 and "[mcp.servers.x].url = 3" in warnings[0]
        with pytest.raises(ConfigError, match="exactly one of 'command'"):
            parse_mcp_table(
                {"servers": {"x": {"command": ["a"], "url": "http://h"}}}, tmp_path / "config.toml"
            )
        with pytest.raises(ConfigError, match=r"invalid config \[mcp\.servers\] name .a b."):
            parse_mcp_table({"servers": {"a b": {"command": ["a"]}}}, tmp_path / "config.toml")
        with pytest.raises(ConfigError, match=r"\[mcp\.servers\.x\.tools\]\.t = \"sometimes\""):
            parse_mcp_table(
                {"servers": {"x": {"command": ["a"], "tools": {"t": "sometimes"}}}}, tmp_path / "config.toml"
            )

    def test_keys_a_project_config_cannot_set_are_a_warning_not_silence(
        self, tmp_path: Path, workspace: Path
    ) -> None:
        """Before: ``model`` or ``auto_approve`` in ``.acagent/config.toml`` were dropped without a
        word. They stay ignored (a cloned repository must not pick what runs without asking),
        and the warning says so and where to set them."""
        (workspace / ".acagent").mkdir()
        (workspace / ".acagent" / "config.toml").write_text(
            'model = "openai:gpt-x"\nauto_approve = true\n[mcp.servers.x]\ncommand = ["x"]\n'
        )
        specs, warnings = load_server_specs({}, tmp_path, workspace)
        assert [s.name for s in specs] == ["x"] and specs[0].approved is False
        assert len(warnings) == 1, warnings
        assert "ignored: auto_approve, model" in warnings[0] and "config.toml" in warnings[0]
        assert str(tmp_path / "config.toml") in warnings[0]

    def test_settings_accept_the_mcp_table(self, tmp_path: Path) -> None:
        """``[mcp.servers.NAME]`` in config.toml loads into ``settings.mcp``."""
        write_config(tmp_path / "config.toml", {"demo": {"command": ["x"], "env": {"ROOT": "."}}})
        settings = load_settings({"home": str(tmp_path)}, env={})
        assert settings.mcp == {"servers": {"demo": {"command": ["x"], "env": {"ROOT": "."}}}}

    def test_vars_expand_from_the_environment_and_are_redacted(self) -> None:
        """``${VAR}`` expands; a missing variable names itself; the value is masked in messages."""
        used: list[str] = []
        assert expand_vars("Bearer ${TOK}", {"TOK": "abcdef"}, used) == "Bearer abcdef"
        assert used == ["abcdef"]
        with pytest.raises(ConfigError, match="'MISSING' is not set"):
            expand_vars("${MISSING}", {})


def test_cli_list_check_approve_and_doctor(cli: Any, workspace: Path) -> None:
    """``mcp list`` shows states and tools; a project server starts only after ``mcp approve``."""
    write_config(cli.home / "config.toml", {"nope": {"command": ["acagent-no-such-server"]}})
    _project(workspace, {"proj": {"command": [sys.executable, BAD, "badschema"]}})
    listed = cli("mcp", "list", "--json", cwd=workspace, check=True)
    states = {s["name"]: (s["state"], s["error"]) for s in json.loads(listed.stdout)}
    assert states["nope"] == ("failed", "command not found: 'acagent-no-such-server'")
    assert states["proj"][0] == "unapproved"
    assert cli("mcp", "approve", "proj", cwd=workspace, check=True).stdout.startswith("approved")
    checked = cli("mcp", "check", "proj", cwd=workspace, check=True)
    assert (
        "proj  ready" in checked.stdout
        and "mcp__proj__ok  may change things; approval: ask" in checked.stdout
    )
    failed = cli("mcp", "check", "nope", cwd=workspace)
    assert failed.returncode == 1
    assert failed.stderr.strip().splitlines()[-1] == (
        "acagent: error: MCP server 'nope' did not start: command not found: 'acagent-no-such-server'"
    )
    doctor = cli("doctor", cwd=workspace, check=True)
    assert "nope (stdio, user)" in doctor.stdout and "proj (stdio, project)" in doctor.stdout


def test_cli_list_and_check_name_a_broken_project_config(cli: Any, workspace: Path) -> None:
    """A project config whose [mcp] table is invalid is named on stderr by ``mcp list`` and
    ``mcp check`` (they are where a user looks), not hidden behind "no MCP servers configured"."""
    project = workspace / ".acagent" / "config.toml"
    project.parent.mkdir(parents=True)
    project.write_text('model = "openai:evil"\n[mcp.servers.x]\ncommand = 5\n')
    listed = cli("mcp", "list", cwd=workspace)
    assert listed.returncode == 0, listed.stderr
    assert listed.stderr.splitlines() == [
        f"acagent: warning: MCP servers of {str(project)!r} ignored: invalid config "
        f"[mcp.servers.x].command = 5 in {str(project)!r} line 3: Input should be a valid list"
    ]
    checked = cli("mcp", "check", "x", cwd=workspace)
    assert checked.returncode == 2
    assert "ignored: invalid config [mcp.servers.x].command = 5" in checked.stderr.splitlines()[0]
