"""McpManager: the MCP servers of one process, started once per working directory and shared.

``acagent chat``/``run`` and ``acagent serve`` open one manager (:meth:`McpManager.open`) beside
their session registry. The first session of a working directory asks for its tool set
(:meth:`McpManager.toolset`); that starts the directory's servers **in the background, in
parallel** (the SDK is imported in a worker thread: it costs ~0.8 s of CPU that must not delay
the prompt), and every later session of the same directory shares them. The loop's
:meth:`ToolSet.refresh` waits for servers still on their first start, bounded by their startup
timeout, so the first LLM request already offers their tools.

Leaving the manager's context stops every server (stdio: close stdin, wait, terminate the
process group), so no server outlives acagent; a SIGKILLed acagent's servers die with it
(``setpriv --pdeathsig``) and a server pid recorded on a running call is killed by recovery.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskGroup

from acagent.errors import ConfigError
from acagent.mcp._config import ServerSpec, load_server_specs
from acagent.mcp._tool import ToolSet
from acagent.tools import Tool

if TYPE_CHECKING:
    from acagent.mcp._client import McpServer

__all__ = ["McpManager", "ServerGroup"]

log = logging.getLogger("acagent.mcp")


class ServerGroup:
    """The servers of one working directory (filled in the background)."""

    def __init__(self, cwd: str, specs: list[ServerSpec], warnings: list[str]) -> None:
        self.cwd = cwd
        self.specs = specs
        self.servers: list[McpServer] = []
        self.loaded = anyio.Event()
        """Set once the SDK is imported and the servers exist (their start may still run)."""
        self.notices: list[tuple[str, str]] = [("mcp_config", w) for w in warnings]
        """Append-only ``(code, message)`` log; each tool set reads it from its own offset."""
        for spec in specs:
            if not spec.approved:
                self.notices.append(
                    (
                        "mcp_server_unapproved",
                        f"project MCP server {spec.name!r} ({spec.source_path}) is not started: "
                        f"approve it once with `acagent mcp approve {spec.name}`",
                    )
                )

    async def wait_settled(self, timeout_s: float) -> None:
        """Wait (at most ``timeout_s``) until the servers exist and none is still (re)starting."""
        with anyio.move_on_after(timeout_s):
            await self.loaded.wait()
            pending = [s for s in self.servers if not s.settled]
            if pending:
                async with anyio.create_task_group() as tg:
                    for server in pending:
                        tg.start_soon(server.wait_settled, timeout_s)

    @property
    def wait_s(self) -> float:
        """The longest startup timeout of the group's approved servers (0 when none)."""
        return max((s.config.startup_timeout_s for s in self.specs if s.approved), default=0.0)

    def on_change(self, server: McpServer, what: str) -> None:
        """Record a server state change as a notice (and in the log)."""
        if what == "ready":
            self.notices.extend(("mcp_tool_warning", w) for w in server.warnings)
            return
        if what == "tools_changed":
            message = (
                f"MCP server {server.name!r} changed its tools: {', '.join(sorted(server.tools)) or '(none)'}"
            )
            self.notices.append(("mcp_tools_changed", message))
            return
        if what == "failed":
            message = f"MCP server {server.name!r} is not available, its tools are absent: {server.error}"
        else:
            message = f"MCP server {server.name!r} stopped ({server.error}); restarting it"
        log.info("%s", message)
        self.notices.append((f"mcp_server_{what}", message))

    def status(self) -> list[dict[str, Any]]:
        """One entry per configured server (``McpServer.status`` plus ``cwd``)."""
        if self.servers:
            return [{**s.status(), "cwd": self.cwd} for s in self.servers]
        return [
            {
                "name": s.name,
                "transport": s.config.transport,
                "target": s.config.target(),
                "source": s.source,
                "state": "starting" if s.approved else "unapproved",
                "error": None,
                "warnings": [],
                "pid": None,
                "restarts": 0,
                "tools": [],
                "cwd": self.cwd,
            }
            for s in self.specs
        ]


class McpManager:
    """See module docstring.

    Args:
        table: the user's ``[mcp]`` table (``settings.mcp``).
        home: ``$ACAGENT_HOME`` (approvals of project servers).
        environ: the environment ``${VAR}`` is expanded from.
        task_group: owner of the server tasks.
    """

    def __init__(
        self,
        table: Mapping[str, Any],
        home: Path,
        environ: Mapping[str, str],
        task_group: TaskGroup,
        only: str | None = None,
    ) -> None:
        self.table = dict(table)
        self.only = only
        """Start only the server of this name (``acagent mcp check NAME``)."""
        self.home = home
        self.environ = dict(environ)
        self.groups: dict[str, ServerGroup] = {}
        self._tg = task_group

    @classmethod
    @asynccontextmanager
    async def open(
        cls, table: Mapping[str, Any], home: Path, environ: Mapping[str, str], *, only: str | None = None
    ) -> AsyncIterator[McpManager]:
        """A manager whose servers stop when the context exits (``only``: one server by name).

        Raises:
            ConfigError: the user's ``[mcp]`` table is invalid.
        """
        from acagent.mcp._config import parse_mcp_table

        parse_mcp_table(table, home / "config.toml")
        async with anyio.create_task_group() as tg:
            manager = cls(table, home, environ, tg, only=only)
            try:
                yield manager
            finally:
                tg.cancel_scope.cancel()

    def group(self, cwd: str) -> ServerGroup:
        """The server group of ``cwd``, created (and its servers started) on first use."""
        group = self.groups.get(cwd)
        if group is not None:
            return group
        try:
            specs, warnings = load_server_specs(self.table, self.home, cwd)
        except ConfigError as exc:
            specs, warnings = [], [exc.message]
        if self.only is not None:
            specs = [s for s in specs if s.name == self.only]
        group = ServerGroup(cwd, specs, warnings)
        self.groups[cwd] = group
        if any(s.approved for s in specs):
            self._tg.start_soon(self._start_group, group)
        else:
            group.loaded.set()
        return group

    async def _start_group(self, group: ServerGroup) -> None:
        try:
            module = await anyio.to_thread.run_sync(importlib.import_module, "acagent.mcp._client")
            for spec in group.specs:
                server = module.McpServer(spec, group.cwd, self.environ, on_change=group.on_change)
                group.servers.append(server)
                if spec.approved:
                    self._tg.start_soon(server.run)
        finally:
            group.loaded.set()

    def toolset(self, cwd: str, builtins: dict[str, Tool]) -> ToolSet:
        """The live tool set of a session in ``cwd``: ``builtins`` plus the directory's MCP tools."""
        group = self.group(cwd)
        return ToolSet(builtins, group, wait_s=group.wait_s)

    def status(self) -> list[dict[str, Any]]:
        """Every server of every started directory (for ``GET /v1/mcp`` and ``acagent mcp list``)."""
        return [entry for group in self.groups.values() for entry in group.status()]
