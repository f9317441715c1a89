"""The ``shell`` tool: run one command with ``bash -c`` in the workspace root.

The command string is passed as one argv element (``["bash", "-c", command]``), never placed
inside another shell string, so its quotes mean exactly what bash makes of them. The process
runs in its own session (``start_new_session=True``): its pid is the id of a process group
holding everything it starts, which is what cancellation, timeouts and recovery kill.

Lifecycle of a call:

* the environment is this process's minus acagent's secrets (:func:`~acagent.tools.scrubbed_env`:
  no ``ACAGENT_*``, no provider API keys or tokens, no variable holding a configured key);
* stdin is ``/dev/null``; stdout and stderr are merged and streamed to ``ctx.emit_output`` as
  they arrive, decoded incrementally as UTF-8 (a character split across reads survives;
  invalid bytes become U+FFFD).
* the process starts with ``ACAGENT_TOOL_CALL=<session_id>/<tool_call_id>`` in its environment,
  so recovery can find it even if the process running the tool died before recording its group
  (:func:`~acagent.tools.kill_call_processes`, F45); ``ctx.on_process_started(pid)`` is called
  right after the spawn, so the journal can record the group too.
* When bash exits, processes it left running in its group are terminated too (SIGTERM, grace,
  SIGKILL): a call never leaves work behind. Processes that detach on purpose (``setsid``,
  ``nohup`` in a new session) leave the group and are out of reach.
* Timeout (the smaller of ``ctx.timeout_s`` and the ``timeout_s`` argument): the group is
  killed and the result has status ``error``.
* Cancellation (anyio): the group gets SIGTERM, ``ctx.kill_grace_s`` seconds, then SIGKILL,
  all under a shielded cancel scope; ``ctx.on_interrupted`` receives the interrupted result
  with the partial output; then the cancellation is re-raised.

What the model sees (``ToolResult.content``): the captured output (at most
``ctx.output_limit_chars`` characters, default :data:`OUTPUT_LIMIT_CHARS`: head and tail, joined
by ``[... N bytes omitted; the full output (M bytes) is kept by acagent ...]``; the full bytes go
to a blob file referenced by the result's ``output_ref``, see :mod:`acagent.tools._blob`),
then ``exit code N`` on its own line if the exit status is nonzero, or a bracketed note for a
timeout or interruption. An empty output reads ``(no output)``.
"""

from __future__ import annotations

import codecs
import re
import signal
import subprocess
from typing import Any, ClassVar

import anyio
from pydantic import BaseModel, ConfigDict, Field

from acagent.tools._base import Tool, ToolContext, ToolResult
from acagent.tools._blob import OutputSpool
from acagent.tools._env import scrubbed_env
from acagent.tools._process import SPAWN_MARKER_VAR, kill_process_group, spawn_marker

__all__ = ["OUTPUT_LIMIT_CHARS", "OutputCapture", "ShellArgs", "ShellTool", "interrupted_result"]

OUTPUT_LIMIT_CHARS = 30_000
"""Most characters of output the model gets from one call (head and tail are kept)."""
LIVE_OUTPUT_LIMIT_CHARS = 1_000_000
"""Most characters streamed as live ``tool.output`` per call (they are journaled and replayed to
every attacher); the rest reaches the result's head + tail and the blob only."""
_READ_SIZE = 65536
_DRAIN_AFTER_EXIT_S = 0.2


class ShellArgs(BaseModel):
    """Arguments of the ``shell`` tool."""

    model_config = ConfigDict(extra="forbid")

    command: str = Field(
        description="The bash command line to run (passed to `bash -c`), in the workspace root directory."
    )
    timeout_s: float | None = Field(
        default=None,
        gt=0,
        description="Timeout in seconds; the process group is killed when it expires. "
        "Default and maximum: the session's tool timeout.",
    )


class OutputCapture:
    """Keeps the first and last ``limit // 2`` characters of a stream, counting what it drops."""

    def __init__(self, limit: int = OUTPUT_LIMIT_CHARS) -> None:
        self._head_limit = limit // 2
        self._tail_limit = limit - self._head_limit
        self._head = ""
        self._tail = ""
        self.omitted_bytes = 0

    def add(self, text: str) -> None:
        """Append decoded output."""
        if len(self._head) < self._head_limit:
            room = self._head_limit - len(self._head)
            self._head += text[:room]
            text = text[room:]
        if not text:
            return
        self._tail += text
        if len(self._tail) > 2 * self._tail_limit:
            self._trim()

    def _trim(self) -> None:
        cut = len(self._tail) - self._tail_limit
        if cut > 0:
            self.omitted_bytes += len(self._tail[:cut].encode("utf-8", "replace"))
            self._tail = self._tail[cut:]

    def text(self, kept: str | None = None) -> str:
        """The captured output, with an omission note between head and tail if needed.

        Args:
            kept: what became of the full output, appended to the note (e.g. ``the full output
                (20971520 bytes) is kept by acagent``).
        """
        self._trim()
        if self.omitted_bytes:
            extra = f"; {kept}" if kept else ""
            return f"{self._head}\n[... {self.omitted_bytes} bytes omitted{extra} ...]\n{self._tail}"
        return self._head + self._tail


def _with_note(output: str, note: str | None) -> str:
    body = output if output else "(no output)"
    if note is None:
        return body
    return body + ("" if body.endswith("\n") else "\n") + note


def interrupted_result(partial_output: str, reason: str = "interrupted by user after start") -> ToolResult:
    """The result recorded for a call cancelled while running (status ``interrupted``).

    Content reads ``interrupted by user after start; partial output: <output or (none)>``.
    """
    shown = partial_output if partial_output else "(none)"
    return ToolResult(content=f"{reason}; partial output: {shown}", status="interrupted")


class ShellTool(Tool):
    """Run a bash command in the workspace root, streaming its output."""

    name: ClassVar[str] = "shell"
    description: ClassVar[str] = (
        "Run a bash command in the workspace root directory and return its combined stdout and "
        "stderr (long output keeps its head and tail) and its exit code. stdin is empty; the "
        "command is killed on timeout. There is no cwd argument: use `cd dir && ...` if needed."
    )
    args_model: ClassVar[type[BaseModel]] = ShellArgs
    idempotent: ClassVar[bool] = False
    read_only: ClassVar[bool] = False

    def needs_approval(self, args: BaseModel, ctx: ToolContext) -> bool:
        """Always True before rules: :class:`~acagent.tools.ApprovalPolicy` decides from the command."""
        return True

    def approval_summary(self, args: BaseModel) -> dict[str, Any]:
        """The exact command string as it will run (byte for byte)."""
        assert isinstance(args, ShellArgs)
        return {"command": args.command, "timeout_s": args.timeout_s}

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        """Run the command; see the module docstring for the lifecycle."""
        assert isinstance(args, ShellArgs)
        if "\0" in args.command:
            return ToolResult(content="error: the command contains a NUL character", status="error")
        if not args.command.strip():
            return ToolResult(content="error: the command is empty", status="error")
        if not ctx.cwd.is_dir():
            return ToolResult(
                content=f"error: the workspace {str(ctx.cwd)!r} is not a directory", status="error"
            )
        timeout_s = ctx.timeout_s if args.timeout_s is None else min(args.timeout_s, ctx.timeout_s)
        try:
            process = await anyio.open_process(
                ["bash", "-c", args.command],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                cwd=ctx.cwd,
                start_new_session=True,
                env={
                    **scrubbed_env(secrets=ctx.secrets),
                    SPAWN_MARKER_VAR: spawn_marker(ctx.session_id, ctx.tool_call_id),
                },
            )
        except OSError as exc:
            return ToolResult(content=f"error: cannot start bash: {exc}", status="error")
        return await _Run(process, ctx).execute(timeout_s)


class _Run:
    """One running command: reader, waiter and cleanup."""

    def __init__(self, process: anyio.abc.Process, ctx: ToolContext) -> None:
        self.process = process
        self.ctx = ctx
        self.pgid = process.pid
        self.capture = OutputCapture(ctx.output_limit_chars)
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", ctx.tool_call_id).lstrip(".") or "call"
        self.spool = OutputSpool(ctx.blob_dir, f"{name}.out", ctx.output_limit_chars)
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.live_chars = 0
        self.live_truncated = False
        self.reading = False

    def _feed(self, text: str) -> None:
        if not text:
            return
        self.capture.add(text)
        if self.live_chars < LIVE_OUTPUT_LIMIT_CHARS:
            part = text[: LIVE_OUTPUT_LIMIT_CHARS - self.live_chars]
            self.live_chars += len(part)
            self.ctx.emit_output(part)
        elif not self.live_truncated:
            self.live_truncated = True
            self.ctx.emit_output("\n[live output truncated; the rest is only in the result]\n")

    async def _read(self, done: anyio.Event) -> None:
        stream = self.process.stdout
        assert stream is not None
        self.reading = True
        try:
            async for chunk in stream:
                self.spool.add(chunk)
                self._feed(self.decoder.decode(chunk))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            self.reading = False
            done.set()

    async def _drain(self, timeout_s: float) -> None:
        """Read what is left in the pipe after the group died (when no reader task runs)."""
        stream = self.process.stdout
        if stream is None or self.reading:
            return
        with anyio.move_on_after(timeout_s):
            try:
                async for chunk in stream:
                    self.spool.add(chunk)
                    self._feed(self.decoder.decode(chunk))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass

    async def _cleanup(self, grace_s: float) -> None:
        """Kill the group, collect the last output, reap bash (shielded, bounded)."""
        with anyio.CancelScope(shield=True):
            await kill_process_group(self.pgid, grace_s)
            await self._drain(0.5)
            with anyio.move_on_after(2.0):
                await self.process.wait()
            with anyio.move_on_after(1.0):
                await self.process.aclose()
            self._feed(self.decoder.decode(b"", final=True))

    async def execute(self, timeout_s: float) -> ToolResult:
        """Stream output until bash exits or the deadline passes, then clean up."""
        try:
            if self.ctx.on_process_started is not None:
                self.ctx.on_process_started(self.pgid)
            async with anyio.create_task_group() as tg:
                read_done = anyio.Event()
                tg.start_soon(self._read, read_done)
                with anyio.move_on_after(timeout_s) as deadline:
                    await self.process.wait()
                    # bash exited: give the reader a moment for what is still in the pipe; then
                    # the cleanup stops processes bash left behind (they may hold the pipe open).
                    with anyio.move_on_after(_DRAIN_AFTER_EXIT_S):
                        await read_done.wait()
                await self._cleanup(self.ctx.kill_grace_s)
                with anyio.move_on_after(1.0):
                    await read_done.wait()
                tg.cancel_scope.cancel()
        except BaseException as exc:
            self.spool.discard()
            if isinstance(exc, anyio.get_cancelled_exc_class()) or _is_cancel_group(exc):
                await self._cleanup(self.ctx.kill_grace_s)
                if self.ctx.on_interrupted is not None:
                    try:
                        self.ctx.on_interrupted(interrupted_result(self.capture.text()))
                    except Exception:  # a failing hook must not replace the cancellation
                        pass
                raise
            await self._cleanup(0.0)
            if not isinstance(exc, Exception):
                raise
            return ToolResult(
                content=f"error: the shell tool failed: {type(exc).__name__}: {exc}", status="error"
            )
        return self._result(deadline.cancelled_caught, timeout_s)

    def _kept(self, data: dict[str, Any]) -> str | None:
        """Keep the blob if the output was cut; the note for the model (F44)."""
        if not self.capture.omitted_bytes or self.ctx.blob_dir is None:
            self.spool.discard()
            return None
        ref = self.spool.keep()
        if ref is None:
            why = f": {self.spool.error}" if self.spool.error else ""
            return f"the full output ({self.spool.total} bytes) could not be kept{why}"
        data["output_ref"] = ref
        return (
            f"the full output ({ref['bytes']} bytes) is kept by acagent outside the workspace; "
            "re-run the command with a filter (grep, head, tail) to see other parts"
        )

    def _result(self, timed_out: bool, timeout_s: float) -> ToolResult:
        code = self.process.returncode
        data: dict[str, Any] = {"pgid": self.pgid, "omitted_bytes": self.capture.omitted_bytes}
        output = self.capture.text(self._kept(data))
        if timed_out:
            timeout_note = f"[timed out after {timeout_s:g} s; the process group was killed]"
            data["timed_out"] = True
            return ToolResult(
                content=_with_note(output, timeout_note), status="error", exit_code=code, data=data
            )
        note: str | None = None
        if code is not None and code < 0:
            try:
                sig_name = signal.Signals(-code).name
            except ValueError:
                sig_name = f"signal {-code}"
            note = f"exit code {code} (killed by {sig_name})"
        elif code:
            note = f"exit code {code}"
        return ToolResult(content=_with_note(output, note), status="ok", exit_code=code, data=data)


def _is_cancel_group(exc: BaseException) -> bool:
    """True for an exception group made only of cancellations."""
    if not isinstance(exc, BaseExceptionGroup):
        return False
    cancelled = anyio.get_cancelled_exc_class()
    return all(isinstance(e, cancelled) or _is_cancel_group(e) for e in exc.exceptions)
