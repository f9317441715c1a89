"""An MCP test server on the official SDK's FastMCP API (stdio, or streamable HTTP with ``--http PORT``).

State lives in the directory named by ``DEMO_DIR`` (set through the server's ``env`` in config):

* ``lookup(key)`` — read-only (``readOnlyHint``): returns ``value-of-<key>``, reporting progress twice;
* ``echo(text)`` — read-only, returns ``text`` (the benchmark's unit of work);
* ``getenv(name)`` — read-only, the server's environment variable (env scrub tests);
* ``count(name)`` — idempotent (``idempotentHint``, not destructive): appends ``name`` to
  ``count.log``; when ``DEMO_COUNT_HANG_FIRST`` is set and it is the first call, it then sleeps
  (so a test can kill the client mid-call);
* ``append_line(text)`` — destructive: appends ``text`` to ``lines.txt``; with
  ``DEMO_APPEND_HANG_FIRST`` set, the first call then sleeps (a kill mid-call leaves the line);
* ``hang()`` — read-only, sleeps forever (cancel and timeout tests); writes ``hang.started``;
* ``crash()`` — the server process exits at once (code 3);
* ``gen_one`` on the first start of the server and ``gen_two`` on later starts (``starts`` file):
  a tool list that changes after a restart.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import anyio
from mcp.server.fastmcp import Context, FastMCP
from mcp.types import ToolAnnotations

STATE = Path(os.environ.get("DEMO_DIR", "."))
STATE.mkdir(parents=True, exist_ok=True)
starts_file = STATE / "starts"
STARTS = int(starts_file.read_text() or "0") + 1 if starts_file.exists() else 1
starts_file.write_text(str(STARTS))
(STATE / f"pid.{os.getpid()}").write_text(str(os.getpid()))

server = FastMCP("demo", log_level="ERROR")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def lookup(key: str, ctx: Context) -> str:  # type: ignore[type-arg]
    """Look a key up (read-only)."""
    await ctx.report_progress(1, 2, f"looking up {key}")
    await ctx.report_progress(2, 2, "done")
    return f"value-of-{key}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def echo(text: str) -> str:
    """Return the text (read-only; the benchmark's unit of work)."""
    return text


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def getenv(name: str) -> str:
    """The server's environment variable ``name`` (``(unset)`` if absent)."""
    return os.environ.get(name, "(unset)")


@server.tool(annotations=ToolAnnotations(idempotentHint=True, destructiveHint=False))
async def count(name: str) -> str:
    """Record one call (idempotent)."""
    log = STATE / "count.log"
    first = not log.exists()
    with log.open("a") as f:
        f.write(name + "\n")
    if first and os.environ.get("DEMO_COUNT_HANG_FIRST"):
        await anyio.sleep(3600)
    return f"counted {name}"


@server.tool(annotations=ToolAnnotations(destructiveHint=True))
async def append_line(text: str) -> str:
    """Append a line to lines.txt (destructive)."""
    lines = STATE / "lines.txt"
    first = not lines.exists()
    with lines.open("a") as f:
        f.write(text + "\n")
    if first and os.environ.get("DEMO_APPEND_HANG_FIRST"):
        await anyio.sleep(3600)
    return f"appended {text!r}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def hang() -> str:
    """Never return."""
    (STATE / "hang.started").write_text(str(time.time()))
    try:
        await anyio.sleep(3600)
    except anyio.get_cancelled_exc_class():
        (STATE / "hang.cancelled").write_text(str(time.time()))  # notifications/cancelled arrived
        raise
    return "unreachable"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def crash() -> str:
    """Exit the server process at once."""
    os._exit(3)


if STARTS == 1:

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def gen_one() -> str:
        """Offered on the first start only."""
        return "one"

else:

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def gen_two() -> str:
        """Offered from the second start on."""
        return "two"


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--http":
        server.settings.port = int(sys.argv[2])
        server.settings.log_level = "ERROR"
        server.run("streamable-http")
    else:
        server.run("stdio")
