"""MCP: the cost of one MCP tool call, and what configured servers add to a session's start.

``python -m benchmarks.fig_mcp [--quick]`` prints a Markdown report (stand-alone: it is not one
of the numbered figures of ``python -m benchmarks``).

1. **One call.** ``McpTool.run`` of the demo server's read-only ``echo`` tool (the FastMCP server
   of ``tests/mcp/servers``), over stdio and over streamable HTTP (a real uvicorn server on
   127.0.0.1), against the same work as an in-process built-in tool (an ``echo`` Tool) and the
   built-in ``read_file`` of a small file, in the same run: median and p95 over N calls.
2. **Start-up.** What a session start with N configured stdio servers costs before the prompt
   (``McpManager.open`` + ``SessionRegistry.open`` + ``get_runner``, what ``acagent chat`` does),
   the longest event-loop stall while the servers start in the background (a 5 ms ticker), and
   the time until all N are ready (they start in parallel).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, ClassVar

import anyio
from pydantic import BaseModel

ROOT = Path(__file__).resolve().parent.parent
DEMO = str(ROOT / "tests" / "mcp" / "servers" / "demo_server.py")


def _ms(samples: list[float]) -> str:
    xs = sorted(samples)
    p95 = xs[min(len(xs) - 1, int(0.95 * len(xs)))]
    return f"{statistics.median(xs) * 1e3:.2f} | {p95 * 1e3:.2f}"


class _EchoArgs(BaseModel):
    text: str


def _echo_tool() -> Any:
    from acagent.tools import Tool, ToolResult

    class EchoTool(Tool):
        name: ClassVar[str] = "echo"
        description: ClassVar[str] = "echo"
        args_model: ClassVar[type[BaseModel]] = _EchoArgs
        read_only: ClassVar[bool] = True

        async def run(self, args: BaseModel, ctx: Any) -> ToolResult:
            assert isinstance(args, _EchoArgs)
            return ToolResult(args.text)

    return EchoTool()


async def _time_calls(tool: Any, args: dict[str, Any], n: int, cwd: Path) -> list[float]:
    from acagent.tools import ToolContext

    ctx = ToolContext(cwd=cwd, session_id="s", tool_call_id="c", emit_output=lambda _t: None)
    parsed = tool.args_model.model_validate(args)
    for _ in range(3):  # warm-up
        await tool.run(parsed, ctx)
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        result = await tool.run(parsed, ctx)
        out.append(time.perf_counter() - t0)
        assert not result.is_error, result.content
    return out


def _http_server(state: Path) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "DEMO_DIR": str(state)}
    proc = subprocess.Popen([sys.executable, DEMO, "--http", str(port)], env=env, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.1).close()
            break
        except OSError:
            time.sleep(0.05)
    return proc, f"http://127.0.0.1:{port}/mcp"


async def calls(n: int, tmp: Path) -> list[tuple[str, list[float]]]:
    """Per-call latency of the same work through each path (seconds)."""
    from acagent.mcp import McpManager
    from acagent.tools import ReadFileTool

    (tmp / "small.txt").write_text("hello\n")
    proc, url = _http_server(tmp / "http")
    table = {
        "servers": {
            "stdio": {"command": [sys.executable, DEMO], "env": {"DEMO_DIR": str(tmp / "stdio")}},
            "http": {"url": url},
        }
    }
    try:
        async with McpManager.open(table, tmp, os.environ) as mcp:
            tools = mcp.toolset(str(tmp), {})
            await tools.refresh()
            rows = [
                ("built-in echo tool (in process)", await _time_calls(_echo_tool(), {"text": "x"}, n, tmp)),
                (
                    "built-in read_file (small file)",
                    await _time_calls(ReadFileTool(), {"path": "small.txt"}, n, tmp),
                ),
                ("MCP stdio echo", await _time_calls(tools["mcp__stdio__echo"], {"text": "x"}, n, tmp)),
                (
                    "MCP streamable HTTP echo",
                    await _time_calls(tools["mcp__http__echo"], {"text": "x"}, n, tmp),
                ),
            ]
    finally:
        proc.terminate()
        proc.wait(10)
    return rows


async def startup(n_servers: int, tmp: Path) -> tuple[float, float, float]:
    """``(seconds before the prompt, longest loop stall, seconds until all ready)``."""
    from acagent.mcp import McpManager
    from acagent.runner import SessionRegistry
    from acagent.settings import load_settings

    home = tmp / f"home{n_servers}"
    servers = {
        f"s{i}": {"command": [sys.executable, DEMO], "env": {"DEMO_DIR": str(tmp / f"st{n_servers}-{i}")}}
        for i in range(n_servers)
    }
    settings = load_settings({"home": str(home), "model": "openai:m", "mcp": {"servers": servers}}, env={})
    stall = [0.0]

    async def ticker() -> None:
        last = time.perf_counter()
        while True:
            await anyio.sleep(0.005)
            now = time.perf_counter()
            stall[0] = max(stall[0], now - last - 0.005)
            last = now

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        t0 = time.perf_counter()
        async with (
            McpManager.open(settings.mcp, settings.home, os.environ) as mcp,
            SessionRegistry.open(settings, tool_source=mcp) as reg,
        ):
            row = await reg.create_session(tmp, model="openai:m")
            runner = await reg.get_runner(row.id)
            before_prompt = time.perf_counter() - t0
            await mcp.group(row.cwd).wait_settled(60)
            ready = time.perf_counter() - t0
            assert all(s["state"] == "ready" for s in mcp.status()), mcp.status()
            assert len(runner.tools) >= 7
        tg.cancel_scope.cancel()
    return before_prompt, stall[0], ready


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fig_mcp", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer calls, fewer server counts")
    args = parser.parse_args(argv)
    n = 50 if args.quick else 300
    counts = [0, 1, 4] if args.quick else [0, 1, 2, 4, 8]
    with tempfile.TemporaryDirectory(prefix="acagent-bench-mcp-") as d:
        tmp = Path(d).resolve()
        rows = anyio.run(calls, n, tmp)
        starts = [(k, anyio.run(startup, k, tmp)) for k in counts]
    cmd = "python -m benchmarks.fig_mcp" + (" --quick" if args.quick else "")
    out = [f"### MCP (`{cmd}`; load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs)", ""]
    out += [f"One tool call, {n} calls each (ms):", "", "| path | median | p95 |", "|---|---|---|"]
    out += [f"| {name} | {_ms(xs)} |" for name, xs in rows]
    out += ["", "Session start with N stdio servers configured (s):", ""]
    out += ["| N | before the prompt | longest loop stall | all servers ready |", "|---|---|---|---|"]
    out += [f"| {k} | {a:.3f} | {b:.3f} | {c:.2f} |" for k, (a, b, c) in starts]
    sys.stdout.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
