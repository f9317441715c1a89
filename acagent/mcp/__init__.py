"""acagent.mcp: Model Context Protocol servers as acagent tools (``docs/mcp.md``).

Configuration (:mod:`acagent.mcp._config`), the per-process :class:`McpManager` that starts a
working directory's servers once in the background and shares them, the live :class:`ToolSet`
a runner holds, and :class:`McpTool` (an MCP tool as an ordinary :class:`~acagent.tools.Tool`).

Importing this package does not import the MCP SDK (about 0.8 s of CPU): that happens in a
worker thread when a directory's servers start (``acagent.mcp._client``).
"""

from __future__ import annotations

from acagent.mcp._config import (
    ApprovalStore,
    McpConfig,
    ServerConfig,
    ServerSpec,
    find_project_config,
    load_server_specs,
    parse_mcp_table,
)
from acagent.mcp._manager import McpManager, ServerGroup
from acagent.mcp._tool import McpArgs, McpTool, ToolSet

__all__ = [
    "ApprovalStore",
    "McpArgs",
    "McpConfig",
    "McpManager",
    "McpTool",
    "ServerConfig",
    "ServerGroup",
    "ServerSpec",
    "ToolSet",
    "find_project_config",
    "load_server_specs",
    "parse_mcp_table",
]
