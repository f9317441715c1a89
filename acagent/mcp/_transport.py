"""The stdio transport: spawn a server and exchange newline-delimited JSON-RPC with it.

Why not the SDK's ``mcp.client.stdio.stdio_client``: it hides the process (acagent records the
server's pid on a running tool call so crash recovery can kill an orphaned server, as it does
for a shell command), sends the server's stderr to our terminal (a chat would fill with server
logs) and reports stdout lines that are not JSON-RPC as a logged traceback. This module keeps
the SDK's wire behaviour (UTF-8 lines, ``JSONRPCMessage`` on both sides, the spec's shutdown
order: close stdin, wait, then terminate the group) and adds:

* the server runs in its own session (pid = process group id) under ``setpriv --pdeathsig
  KILL`` where available, so a SIGKILLed acagent does not leave it running;
* stderr is kept in a small ring buffer (the last lines go into error messages);
* lines that are not JSON-RPC are counted and the first few kept (``garbage``), not forwarded;
* ``closed`` is set when the server's stdout ends (exit or crash).

The environment is the SDK's minimal inherited set (``HOME``, ``PATH``, ``USER``, ...; see
``mcp.client.stdio.get_default_environment``, passed through :func:`acagent.tools.scrubbed_env`)
plus the configured ``env``: API keys and tokens of acagent's own environment are not passed on.
"""

from __future__ import annotations

import collections
import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from anyio.abc import Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from anyio.streams.text import TextReceiveStream
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCMessage

from acagent.tools import kill_process_group, scrubbed_env

__all__ = ["StdioProcess", "open_stdio"]

_SHUTDOWN_WAIT_S = 2.0
_LINE_LIMIT = 16 * 1024 * 1024


@dataclass
class StdioProcess:
    """What the caller can see of a running stdio server."""

    pid: int
    closed: anyio.Event = field(default_factory=anyio.Event)
    stderr_tail: collections.deque[str] = field(default_factory=lambda: collections.deque(maxlen=20))
    garbage: list[str] = field(default_factory=list)
    garbage_count: int = 0
    returncode: int | None = None
    process: Process | None = None

    async def wait_exit(self, timeout_s: float) -> int | None:
        """Wait at most ``timeout_s`` for the process to exit; its return code (None if it runs)."""
        if self.returncode is None and self.process is not None:
            with anyio.move_on_after(timeout_s):
                self.returncode = await self.process.wait()
        return self.returncode

    def describe_exit(self) -> str:
        """One line: how the server ended and the last thing it said on stderr."""
        how = "exited" if self.returncode is None else f"exited with code {self.returncode}"
        if self.returncode is not None and self.returncode < 0:
            how = f"was killed by signal {-self.returncode}"
        last = next((line for line in reversed(self.stderr_tail) if line.strip()), "")
        return how + (f" (stderr: {last.strip()[:200]})" if last else "")


def _argv(command: list[str]) -> list[str]:
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", "--", *command] if setpriv else list(command)


@asynccontextmanager
async def open_stdio(
    command: list[str], env: dict[str, str], cwd: Path
) -> AsyncIterator[
    tuple[
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
        StdioProcess,
    ]
]:
    """Spawn ``command`` and yield ``(read_stream, write_stream, process)`` for ``ClientSession``.

    Raises:
        FileNotFoundError: the program does not exist (checked before the spawn).
        OSError: the spawn failed.
    """
    program = command[0]
    # The SDK's minimal inherited set, through acagent's one scrub rule (F43), then what the
    # user configured for this server (their explicit choice, not scrubbed).
    full_env = {**scrubbed_env(get_default_environment()), **env}
    if shutil.which(program, path=full_env.get("PATH", os.defpath)) is None:
        raise FileNotFoundError(f"command not found: {program!r}")
    process: Process = await anyio.open_process(
        _argv(command),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=full_env,
        cwd=cwd,
        start_new_session=True,
    )
    info = StdioProcess(pid=process.pid, process=process)
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def stdout_reader() -> None:
        assert process.stdout is not None
        buffer = ""
        try:
            async with read_writer:
                async for chunk in TextReceiveStream(process.stdout, errors="replace"):
                    lines = (buffer + chunk).split("\n")
                    buffer = lines.pop()
                    if len(buffer) > _LINE_LIMIT:
                        buffer = ""
                    for line in lines:
                        if not line.strip():
                            continue
                        try:
                            message = JSONRPCMessage.model_validate_json(line)
                        except ValueError:
                            info.garbage_count += 1
                            if len(info.garbage) < 3:
                                info.garbage.append(line[:200])
                            continue
                        await read_writer.send(SessionMessage(message))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            info.closed.set()

    async def stderr_reader() -> None:
        assert process.stderr is not None
        try:
            async for chunk in TextReceiveStream(process.stderr, errors="replace"):
                info.stderr_tail.extend(chunk.splitlines())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass

    async def stdin_writer() -> None:
        assert process.stdin is not None
        try:
            async with write_reader:
                async for message in write_reader:
                    data = message.message.model_dump_json(by_alias=True, exclude_none=True)
                    await process.stdin.send((data + "\n").encode())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            info.closed.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(stdout_reader)
            tg.start_soon(stderr_reader)
            tg.start_soon(stdin_writer)
            try:
                yield read_stream, write_stream, info
            finally:
                with anyio.CancelScope(shield=True):
                    await _shutdown(process, info)
                tg.cancel_scope.cancel()
    finally:
        for stream in (read_stream, write_stream, read_writer, write_reader):
            await stream.aclose()


async def _shutdown(process: Process, info: StdioProcess) -> None:
    """The spec's stdio shutdown: close stdin, wait, then SIGTERM/SIGKILL the whole group."""
    if process.stdin is not None:
        try:
            await process.stdin.aclose()
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
    with anyio.move_on_after(_SHUTDOWN_WAIT_S):
        await process.wait()
    await kill_process_group(process.pid, 1.0)
    with anyio.move_on_after(2.0):
        info.returncode = await process.wait()
    with anyio.move_on_after(1.0):
        await process.aclose()
