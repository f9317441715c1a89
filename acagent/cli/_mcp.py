"""``acagent mcp list | check NAME | approve NAME``: the MCP servers this directory sees.

``list`` starts every approved server of the current directory in parallel (as a session would),
prints each with its state and its tools with their annotations and the approval they get, then
stops them. ``check NAME`` does the same for one server and exits 1 with one line when it does
not start. ``approve NAME`` records the user's approval of a project server
(``.acagent/config.toml``), which is not started before it. Exit code 2 for a usage error.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Annotated, Any

import typer

from acagent.cli._app import HELP_OPTIONS, app, fail
from acagent.cli._common import build_settings, current_dir, run_async
from acagent.errors import AcagentError

__all__ = ["approve_command", "check_command", "list_command", "server_lines"]

mcp_app = typer.Typer(
    help="MCP servers: list them with their tools, check one, approve a project server.",
    no_args_is_help=True,
    context_settings=HELP_OPTIONS,
)
app.add_typer(mcp_app, name="mcp")


async def _statuses(only: str | None) -> list[dict[str, Any]]:
    from acagent.mcp import McpManager
    from acagent.runner import canonical_cwd

    settings = build_settings()
    cwd = canonical_cwd(current_dir())
    async with McpManager.open(settings.mcp, settings.home, os.environ, only=only) as mcp:
        group = mcp.group(cwd)
        # A broken project config is a warning a session records as an event; here it is the
        # answer to "why is my server not listed", so it goes to stderr.
        for code, message in group.notices:
            if code == "mcp_config":
                sys.stderr.write(f"acagent: warning: {message}\n")
        await group.wait_settled(group.wait_s)
        return mcp.status()


def _flags(tool: dict[str, Any]) -> str:
    kind = "read-only" if tool["read_only"] else ("idempotent" if tool["idempotent"] else "may change things")
    notes = ", ".join(f"{k}={json.dumps(v)}" for k, v in tool["annotations"].items()) or "no annotations"
    return f"{kind}; approval: {tool['approval']}  ({notes})"


def server_lines(status: dict[str, Any]) -> list[str]:
    """Text lines for one server: a header, then one line per tool."""
    head = f"{status['name']}  {status['state']}  {status['transport']}: {status['target']}  ({status['source']})"
    lines = [head]
    if status.get("error"):
        lines.append(f"  error: {status['error']}")
    lines += [f"  warning: {w}" for w in status.get("warnings", [])]
    lines += [f"  {t['name']}  {_flags(t)}" for t in status.get("tools", [])]
    return lines


def _print(statuses: list[dict[str, Any]], json_out: bool) -> None:
    if json_out:
        sys.stdout.write(json.dumps(statuses, indent=1) + "\n")
        return
    if not statuses:
        sys.stdout.write("no MCP servers configured ([mcp.servers.NAME] in config.toml)\n")
    for status in statuses:
        sys.stdout.write("\n".join(server_lines(status)) + "\n")


@mcp_app.command("list")
def list_command(
    json_out: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
) -> None:
    """Start this directory's MCP servers, list them with their tools, stop them."""
    _print(run_async(lambda: _statuses(None)), json_out)


@mcp_app.command("check")
def check_command(
    name: Annotated[str, typer.Argument(help="The server's name ([mcp.servers.NAME]).")],
    json_out: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
) -> None:
    """Start one MCP server, list its tools, stop it (exit 1 if it does not start)."""
    statuses = run_async(lambda: _statuses(name))
    if not statuses:
        fail(f"no MCP server {name!r} is configured here (`acagent mcp list` shows them)", 2)
    _print(statuses, json_out)
    status = statuses[0]
    if status["state"] == "unapproved":
        fail(f"project server {name!r} is not approved: run `acagent mcp approve {name}` first")
    if status["state"] != "ready":
        fail(f"MCP server {name!r} did not start: {status['error']}")


@mcp_app.command("approve")
def approve_command(name: Annotated[str, typer.Argument(help="The project server's name.")]) -> None:
    """Approve a project server (.acagent/config.toml) once, so sessions here start it."""
    from acagent.mcp import ApprovalStore, load_server_specs

    settings = build_settings()
    try:
        specs, _ = load_server_specs(settings.mcp, settings.home, current_dir())
    except AcagentError as exc:
        fail(exc.message, 2)
    spec = next((s for s in specs if s.name == name), None)
    if spec is None:
        fail(f"no MCP server {name!r} is configured here (`acagent mcp list` shows them)", 2)
    if spec.source != "project":
        sys.stdout.write(f"{name!r} is a server of your own config.toml: it needs no approval\n")
        return
    ApprovalStore(settings.home).approve(spec.source_path.parent.parent, name, spec.config)
    sys.stdout.write(f"approved project MCP server {name!r}: {spec.config.target()}\n")
