"""MCP tools as :class:`~acagent.tools.Tool` implementations, and the live tool set of a session.

An :class:`McpTool` is just another tool in the runner's registry, so the tool-call intent row
(written before the MCP request), approvals, cancellation and crash recovery apply unchanged:
its ``read_only`` / ``idempotent`` flags and :meth:`McpTool.needs_approval` come from the
server's annotations and the per-tool override (:mod:`acagent.mcp._schema`).

:class:`ToolSet` is the ``dict`` of tools a runner holds: the built-in tools plus the MCP tools
of the session's working directory. :meth:`ToolSet.refresh` (called by the loop before each LLM
step) brings the MCP part up to date with the servers (started, restarted, tool list changed)
and returns the server notices (crash, failure to start) to record once as ``error`` events.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict

from acagent.tools import Tool, ToolContext, ToolResult

if TYPE_CHECKING:
    from acagent.mcp._client import McpServer
    from acagent.mcp._manager import ServerGroup
    from acagent.mcp._schema import ToolInfo

__all__ = ["McpArgs", "McpTool", "ToolSet"]


class McpArgs(BaseModel):
    """Any JSON object: the server validates its own arguments against its schema."""

    model_config = ConfigDict(extra="allow", defer_build=True)  # built on the first MCP call


class McpTool(Tool):
    """One tool of one MCP server (see module docstring)."""

    args_model: ClassVar[type[BaseModel]] = McpArgs

    def __init__(self, info: ToolInfo, server: McpServer) -> None:
        self.info = info
        self.server = server
        # Tool declares these as class-level facts; an MCP tool learns them per instance.
        self.name = info.name  # type: ignore[misc]
        self.description = info.description  # type: ignore[misc]
        self.read_only = info.read_only  # type: ignore[misc]
        self.idempotent = info.idempotent  # type: ignore[misc]

    def parameters_schema(self) -> dict[str, Any]:
        """The server's input schema (sanitised when invalid)."""
        return dict(self.info.schema)

    def needs_approval(self, args: BaseModel, ctx: ToolContext) -> bool:
        """From the annotations and the ``always``/``ask`` override."""
        return self.info.needs_approval

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        """``tools/call`` on the server; every failure is an error result (never a hang)."""
        arguments = args.model_dump(mode="json")
        try:
            return await self.server.call(
                self.info, arguments, emit=ctx.emit_output, on_pid=ctx.on_process_started
            )
        except BaseException:
            if ctx.on_interrupted is not None:
                note = "interrupted by user after start; the MCP server was sent notifications/cancelled"
                try:
                    ctx.on_interrupted(ToolResult(note, status="interrupted"))
                except Exception:  # a failing hook must not replace the cancellation
                    pass
            raise


class ToolSet(dict[str, Tool]):
    """Built-in tools plus the live MCP tools of one working directory.

    Args:
        builtins: the built-in tools by name.
        group: the directory's servers (:class:`~acagent.mcp.ServerGroup`).
        wait_s: how long :meth:`refresh` waits for servers still on their first start.
    """

    def __init__(self, builtins: dict[str, Tool], group: ServerGroup, wait_s: float = 30.0) -> None:
        super().__init__(builtins)
        self.builtins = dict(builtins)
        self.group = group
        self._wait_s = wait_s
        self._seen: tuple[tuple[str, int, str], ...] = ()
        self._tools: dict[str, McpTool] = {}
        self._read = 0
        self._sync()

    def _sync(self) -> bool:
        servers = self.group.servers
        key = tuple((s.name, s.generation, s.state if s.state == "ready" else "down") for s in servers)
        if key == self._seen:
            return False
        self._seen = key
        fresh: dict[str, McpTool] = {}
        for server in servers:
            for info in server.tools.values():
                if info.mode == "deny" or info.name in self.builtins:
                    continue
                old = self._tools.get(info.name)
                fresh[info.name] = old if old is not None and old.info is info else McpTool(info, server)
        self._tools = fresh
        self.clear()
        self.update(self.builtins)
        self.update(fresh)
        return True

    async def refresh(self) -> tuple[bool, list[tuple[str, str]]]:
        """Bring the MCP tools up to date.

        Waits (at most ``wait_s`` in total, servers in parallel) for servers still starting or
        restarting after a crash, so the request offers the tools they list now.

        Returns:
            ``(changed, notices)``: whether the set of tools changed (the caller rebuilds its tool
            definitions) and the server notices not yet returned to this tool set, as
            ``(code, message)`` — each to be recorded once as an ``error`` event.
        """
        group = self.group
        await group.wait_settled(self._wait_s)
        changed = self._sync()
        notices = group.notices[self._read :]
        self._read = len(group.notices)
        return changed, notices
