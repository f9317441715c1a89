"""One MCP server connection on the official SDK's ``ClientSession``: start, supervise, call.

:class:`McpServer` runs a supervisor task (:meth:`McpServer.run`) that connects (stdio:
:func:`~acagent.mcp._transport.open_stdio`; HTTP: the SDK's ``streamable_http_client``),
initializes, lists the tools and then waits for the connection to end. Failure policy
(``docs/mcp.md``):

* the first start fails (no such command, garbage on stdout, HTTP 401/500, startup timeout) →
  state ``failed`` with a one-line ``error``; its tools are absent; no retry;
* a server that was ready and whose connection ends (crash, exit) → one ``crashed`` report
  (``on_change``), then restarts with exponential backoff (0.5 s doubling, at most 30 s; after
  :data:`MAX_RESTARTS` failures in a row it stays ``failed``); the tool list is re-read on every
  start (``generation`` grows when it changed), and on ``notifications/tools/list_changed``.

:meth:`McpServer.call` never hangs: it waits for a restarting server at most its startup timeout,
bounds the call by the per-call timeout, and returns an error result when the connection ends
mid-call. When the call is cancelled or times out it sends ``notifications/cancelled`` for the
request id (spec: basic/utilities/cancellation).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from mcp import ClientSession
from mcp.shared.exceptions import McpError

from acagent.mcp._config import ServerSpec, expand_vars
from acagent.mcp._convert import StartError, describe_failure, to_result
from acagent.mcp._schema import ToolInfo, tool_infos
from acagent.mcp._transport import StdioProcess, open_stdio
from acagent.tools import ToolResult

__all__ = ["MAX_RESTARTS", "McpServer"]

log = logging.getLogger("acagent.mcp")
# The SDK logs transport trouble with tracebacks (logger "mcp"); acagent reports each failure as
# one line of its own (state, error result, event), so the SDK's records go nowhere by default.
_sdk_log = logging.getLogger("mcp")
if not _sdk_log.handlers:
    _sdk_log.addHandler(logging.NullHandler())
    _sdk_log.propagate = False
MAX_RESTARTS = 5
_CLIENT_INFO = types.Implementation(name="acagent", version="1")


class _Connection:
    """A live session: the SDK ``ClientSession`` plus an event set when it ends."""

    def __init__(self, session: ClientSession, process: StdioProcess | None) -> None:
        self.session = session
        self.process = process
        self.closed = process.closed if process is not None else anyio.Event()


class McpServer:
    """A configured server as one working directory runs it (see module docstring).

    Args:
        spec: the configured server.
        cwd: the session working directory (stdio servers run there unless ``cwd`` is set).
        environ: the environment ``${VAR}`` is expanded from.
        on_change: called with ``(server, what)`` on ``ready``, ``failed``, ``crashed``,
            ``tools_changed``; must not block.
    """

    def __init__(
        self,
        spec: ServerSpec,
        cwd: str | Path,
        environ: Mapping[str, str],
        on_change: Callable[[McpServer, str], None] | None = None,
    ) -> None:
        self.spec = spec
        self.name = spec.name
        self.cwd = Path(cwd)
        self._environ = environ
        self._on_change = on_change
        self.state = "starting" if spec.approved else "unapproved"
        self.error: str | None = None if spec.approved else "project server not approved yet"
        self.warnings: list[str] = []
        self.tools: dict[str, ToolInfo] = {}
        """Tools by acagent name (``mcp__<server>__<tool>``)."""
        self.generation = 0
        self.restarts = 0
        self.pid: int | None = None
        self.started_s: float | None = None
        self.first_done = anyio.Event()
        """Set once the first start succeeded or failed."""
        self._conn: _Connection | None = None
        self._settled = anyio.Event()
        """Set while the server is ready or failed for good; replaced by a new one on a crash."""
        self._refresh = anyio.Event()
        if not spec.approved:
            self.first_done.set()
            self._settled.set()

    # ------------------------------------------------------------------ status

    def status(self) -> dict[str, Any]:
        """``{name, transport, target, source, state, error, pid, restarts, tools: [...]}``."""
        return {
            "name": self.name,
            "transport": self.spec.config.transport,
            "target": self.spec.config.target(),
            "source": self.spec.source,
            "state": self.state,
            "error": self.error,
            "warnings": list(self.warnings),
            "pid": self.pid,
            "restarts": self.restarts,
            "tools": [info.public() for info in self.tools.values()],
        }

    def _set(self, state: str, error: str | None = None) -> None:
        self.state, self.error = state, error
        if state in ("ready", "failed"):
            self._settled.set()
        elif self._settled.is_set():
            self._settled = anyio.Event()
        if self._on_change is not None:
            self._on_change(self, state)

    # ------------------------------------------------------------------ supervisor

    async def run(self) -> None:
        """Connect and keep the server running until cancelled (never raises otherwise)."""
        if not self.spec.approved:
            return
        failures = 0
        while True:
            was_ready, conn = False, None
            try:
                was_ready, conn = await self._serve_once()
                error = self._exit_reason(conn)
            except Exception as exc:
                error = self.spec.redact(
                    describe_failure(exc, self.spec.config.url, self._conn.process if self._conn else None)
                )
            self._conn, self.pid = None, None
            if not was_ready and self.generation == 0:
                self._set("failed", error)
                self.first_done.set()
                return
            failures = 0 if was_ready else failures + 1
            if failures >= MAX_RESTARTS:
                self._set("failed", f"gave up after {failures} failed restarts: {error}")
                return
            self.restarts += 1
            self._set("crashed", error)
            await anyio.sleep(min(30.0, 0.5 * 2**failures))
            self.state = "restarting"

    @staticmethod
    def _exit_reason(conn: _Connection | None) -> str:
        if conn is not None and conn.process is not None:
            return f"the server {conn.process.describe_exit()}"
        return "the connection to the server ended"

    @contextlib.asynccontextmanager
    async def _open(self) -> Any:
        cfg = self.spec.config
        secrets = self.spec.secrets
        if cfg.command is not None:
            command = [expand_vars(w, self._environ, secrets) for w in cfg.command]
            env = {k: expand_vars(v, self._environ, secrets) for k, v in cfg.env.items()}
            cwd = self.cwd / cfg.cwd if cfg.cwd else self.cwd
            async with open_stdio(command, env, cwd) as (read, write, process):
                yield read, write, process
            return
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        url = expand_vars(str(cfg.url), self._environ, secrets)
        headers = {k: expand_vars(v, self._environ, secrets) for k, v in cfg.headers.items()}
        client = create_mcp_http_client(headers=headers)
        async with client, streamable_http_client(url, http_client=client) as (read, write, _):
            yield read, write, None

    async def _serve_once(self) -> tuple[bool, _Connection | None]:
        """One connection: start, list tools, wait for its end. Returns ``(got ready, connection)``."""
        cfg = self.spec.config
        ready, conn = False, None
        async with self._open() as (read, write, process):
            self.pid = process.pid if process is not None else None
            async with ClientSession(
                read, write, message_handler=self._on_message, client_info=_CLIENT_INFO
            ) as session:
                conn = _Connection(session, process)
                try:
                    with anyio.fail_after(cfg.startup_timeout_s):
                        await session.initialize()
                        await self._list_tools(session)
                except TimeoutError:
                    raise TimeoutError(self._startup_timeout_message(process)) from None
                except Exception as exc:
                    if process is not None and process.closed.is_set():
                        await process.wait_exit(1.0)
                        raise StartError(f"the server {process.describe_exit()}") from exc
                    raise
                self._conn = conn
                ready = True
                self.started_s = time.time()
                self._set("ready")
                self.first_done.set()
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._refresher, session)
                    await conn.closed.wait()
                    tg.cancel_scope.cancel()
                # Not ready any more from this instant (the crash notice follows the shutdown).
                self._conn, self.state = None, "restarting"
                if self._settled.is_set():
                    self._settled = anyio.Event()
        return ready, conn

    def _startup_timeout_message(self, process: StdioProcess | None) -> str:
        cfg = self.spec.config
        text = f"no MCP answer within {cfg.startup_timeout_s:g} s"
        if process is not None and process.garbage:
            text += f"; stdout is not JSON-RPC ({process.garbage_count} lines, first: {process.garbage[0]!r})"
        return text

    async def _list_tools(self, session: ClientSession) -> None:
        listed: list[types.Tool] = []
        cursor: str | None = None
        while True:
            page = await session.list_tools(cursor=cursor) if cursor else await session.list_tools()
            listed.extend(page.tools)
            cursor = page.nextCursor
            if not cursor or len(listed) > 1000:
                break
        infos, warnings = tool_infos(self.name, listed, self.spec.config.tools)
        self.warnings = warnings
        if {k: v.fingerprint for k, v in infos.items()} != {k: v.fingerprint for k, v in self.tools.items()}:
            self.generation += 1
            self.tools = infos
            if self.generation > 1 and self._on_change is not None:
                self._on_change(self, "tools_changed")
        elif self.generation == 0:
            self.generation = 1

    async def _refresher(self, session: ClientSession) -> None:
        while True:
            await self._refresh.wait()
            self._refresh = anyio.Event()
            with anyio.move_on_after(self.spec.config.startup_timeout_s):
                try:
                    await self._list_tools(session)
                except (McpError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                    log.warning("MCP server %r: cannot re-list tools: %s", self.name, exc)

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ServerNotification) and isinstance(
            message.root, types.ToolListChangedNotification
        ):
            self._refresh.set()

    # ------------------------------------------------------------------ calls

    @property
    def settled(self) -> bool:
        """True when the server is ready or failed for good (not starting or restarting)."""
        return self._settled.is_set()

    async def wait_settled(self, timeout_s: float) -> None:
        """Wait (at most ``timeout_s``) until a start or restart succeeded or failed for good."""
        with anyio.move_on_after(timeout_s):
            while not self._settled.is_set():
                await self._settled.wait()

    async def call(
        self,
        info: ToolInfo,
        arguments: dict[str, Any],
        *,
        emit: Callable[[str], None],
        on_pid: Callable[[int], None] | None = None,
    ) -> ToolResult:
        """Call one tool; every failure is an error :class:`ToolResult` (see module docstring).

        Args:
            info: the tool (from :attr:`tools`).
            arguments: the JSON arguments object.
            emit: receives progress lines (``tool.output``).
            on_pid: called with a stdio server's pid (recorded for crash recovery).

        Raises:
            anyio.get_cancelled_exc_class(): when cancelled, after ``notifications/cancelled``.
        """
        cfg = self.spec.config
        if self._conn is None:
            await self.wait_settled(cfg.startup_timeout_s)  # a (re)starting server: bounded
        conn = self._conn
        if conn is None:
            why = f": {self.error}" if self.error else ""
            return ToolResult(
                f"error: MCP server {self.name!r} is not running ({self.state}{why})", status="error"
            )
        if info.name not in self.tools:
            return ToolResult(
                f"error: MCP server {self.name!r} no longer offers the tool {info.server_tool!r}",
                status="error",
            )
        if on_pid is not None and conn.process is not None:
            on_pid(conn.process.pid)

        async def progress(value: float, total: float | None, message: str | None) -> None:
            shown = f"{value:g}/{total:g}" if total else f"{value:g}"
            emit(f"[progress {shown}]" + (f" {message}" if message else "") + "\n")

        session = conn.session
        request_id = session._request_id
        outcome: list[ToolResult] = []
        try:
            with anyio.move_on_after(cfg.timeout_s) as deadline:
                async with anyio.create_task_group() as tg:

                    async def watch() -> None:
                        await conn.closed.wait()
                        if conn.process is not None:
                            await conn.process.wait_exit(0.5)
                        why = self._exit_reason(conn)
                        outcome.append(
                            ToolResult(
                                f"error: MCP server {self.name!r} stopped during the call: {why}",
                                status="error",
                            )
                        )
                        tg.cancel_scope.cancel()

                    tg.start_soon(watch)
                    # The id send_request assigns next: read with no await before the call sends it
                    # (mcp.shared.session.BaseSession.send_request), for notifications/cancelled.
                    request_id = session._request_id
                    outcome.append(await self._call(conn, info, arguments, progress))
                    tg.cancel_scope.cancel()
            if deadline.cancelled_caught and not outcome:
                await self._cancel_request(session, request_id, "timeout")
                return ToolResult(
                    f"error: the MCP tool {info.server_tool!r} of server {self.name!r} did not answer within "
                    f"{cfg.timeout_s:g} s (its timeout_s); the server was sent notifications/cancelled",
                    status="error",
                )
        except anyio.get_cancelled_exc_class():
            await self._cancel_request(session, request_id, "cancelled by the user")
            raise
        return outcome[0]

    async def _call(
        self, conn: _Connection, info: ToolInfo, arguments: dict[str, Any], progress: Any
    ) -> ToolResult:
        """``tools/call``; protocol and transport failures become error results."""
        timeout = timedelta(seconds=self.spec.config.timeout_s + 5)
        try:
            result = await conn.session.call_tool(
                info.server_tool, arguments, read_timeout_seconds=timeout, progress_callback=progress
            )
        except McpError as exc:
            if exc.error.code == types.CONNECTION_CLOSED:
                if conn.process is not None:
                    await conn.process.wait_exit(0.5)
                why = self._exit_reason(conn)
                return ToolResult(
                    f"error: MCP server {self.name!r} stopped during the call: {why}", status="error"
                )
            return ToolResult(
                f"error: MCP server {self.name!r}: {self.spec.redact(exc.error.message)}", status="error"
            )
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            return ToolResult(f"error: the connection to MCP server {self.name!r} ended", status="error")
        except Exception as exc:  # a foreign error from the SDK/transport: one line, never a traceback
            return ToolResult(
                f"error: MCP call failed: {self.spec.redact(describe_failure(exc, self.spec.config.url, self._conn.process if self._conn else None))}",
                status="error",
            )
        return to_result(result)

    async def _cancel_request(self, session: ClientSession, request_id: int, reason: str) -> None:
        """Send ``notifications/cancelled`` (shielded, at most 1 s)."""
        note = types.CancelledNotification(
            params=types.CancelledNotificationParams(requestId=request_id, reason=reason)
        )
        with anyio.CancelScope(shield=True), anyio.move_on_after(1.0):
            try:
                await session.send_notification(types.ClientNotification(note))
            except Exception as exc:  # the connection may already be gone
                log.debug("cannot send notifications/cancelled to %r: %s", self.name, exc)
