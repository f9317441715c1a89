"""Misbehaving MCP servers for the bad-input tests (``python bad_server.py MODE``).

* ``garbage`` — prints lines that are not JSON-RPC on stdout and never answers;
* ``badschema`` — a real server (SDK lowlevel API) whose ``ok`` tool is fine and whose ``broken``
  tool declares an input schema that is not valid JSON Schema.
"""

from __future__ import annotations

import sys
import time

MODE = sys.argv[1] if len(sys.argv) > 1 else "garbage"

if MODE == "garbage":
    for i in range(3):
        print(f"hello from a server that is not MCP, line {i}", flush=True)
    time.sleep(3600)
    raise SystemExit(0)

import anyio  # noqa: E402
import mcp.types as types  # noqa: E402
from mcp.server.lowlevel import Server  # noqa: E402
from mcp.server.stdio import stdio_server  # noqa: E402

server: Server = Server("bad")


@server.list_tools()
async def list_tools() -> list[types.Tool]:
    return [
        types.Tool(name="ok", description="fine", inputSchema={"type": "object", "properties": {}}),
        types.Tool(name="broken", description="bad schema", inputSchema={"type": "objekt", "properties": 5}),
        types.Tool(name="bad name!", description="not a valid name", inputSchema={"type": "object"}),
    ]


@server.call_tool()
async def call_tool(name: str, arguments: dict) -> list[types.TextContent]:  # type: ignore[type-arg]
    return [types.TextContent(type="text", text=f"{name} ran")]


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


anyio.run(main)
