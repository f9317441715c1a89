"""What the tool executor uses of a turn: the tool definitions offered to the model, one call's
:class:`~acagent.tools.ToolContext`, and the wait for an approval decision.

:class:`TurnTools` is the part of :class:`~acagent.runner._turn.Turn` (a mixin of the dataclass)
that the executor (:mod:`acagent.runner._tools`) and the loop call per tool call;
:func:`tool_definition` builds each tool class's definition once per process.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from acagent.errors import AcagentError
from acagent.providers._base import Provider, ToolDefinition
from acagent.runner._results import MAX_TOOL_OUTPUT_KEPT
from acagent.store import ToolCallRow
from acagent.store._transcript import transcript_path
from acagent.tools import Tool, ToolContext, secret_values
from acagent.tools._blob import blob_dir_for

__all__ = ["TurnTools", "tool_definition"]

_DEFINITIONS: dict[type[Tool], ToolDefinition] = {}
"""One definition per tool class, for the whole process (every session offers the same)."""


def tool_definition(tool: Tool) -> ToolDefinition:
    """The definition offered to the model for ``tool``; built once per tool class in a process.

    A tool whose name, description or schema is its instance's own (an MCP server's tool) gets a
    definition of its own each time.
    """
    cls = type(tool)
    shared = cls.parameters_schema is Tool.parameters_schema and not (
        "name" in vars(tool) or "description" in vars(tool)
    )
    if not shared:
        return ToolDefinition(tool.name, tool.description, tool.parameters_schema())
    definition = _DEFINITIONS.get(cls)
    if definition is None:
        definition = _DEFINITIONS[cls] = ToolDefinition(tool.name, tool.description, tool.parameters_schema())
    return definition


class TurnTools:
    """Tool definitions, tool contexts and approval waits of a :class:`~acagent.runner._turn.Turn`."""

    if TYPE_CHECKING:
        from acagent.runner._writer import SessionWriter
        from acagent.settings import Settings
        from acagent.store import Journal

        session_id: str
        journal: Journal
        settings: Settings
        writer: SessionWriter
        tools: dict[str, Tool]
        provider: Callable[[], Awaitable[Provider]]
        cwd: str
        tool_definitions: list[ToolDefinition] | None
        tool_output: dict[str, list[str]]
        answers: dict[str, str]
        _approval_wake: dict[str, anyio.Event]
        _env: tuple[Path, tuple[str, ...]] | None

    async def tools_enabled(self) -> bool:
        """Whether tools are offered to the model (``--tools``; off by default for the local model)."""
        if self.settings.tools != "auto":
            return self.settings.tools == "on"
        return bool(getattr(await self.provider(), "supports_tools", True))

    async def definitions(self) -> list[ToolDefinition]:
        """The tool definitions offered to the model (JSON schemas built once, then cached)."""
        if not await self.tools_enabled():
            return []
        if self.tool_definitions is None:
            self.tool_definitions = [tool_definition(t) for t in self.tools.values()]
        return self.tool_definitions

    def tool_context(
        self, row: ToolCallRow, *, on_process_started: Callable[[int], None] | None = None
    ) -> ToolContext:
        """The :class:`ToolContext` for one call (live output → ``tool.output`` events)."""
        buf = self.tool_output.setdefault(row.tool_call_id, [])
        turn_id = row.turn_id

        def emit(text: str) -> None:
            if not text:
                return
            if sum(len(s) for s in buf) < MAX_TOOL_OUTPUT_KEPT:
                buf.append(text)
            self.writer.delta(
                "tool.output", {"turn_id": turn_id, "tool_call_id": row.tool_call_id, "text": text}
            )

        async def ask(question: str) -> str:
            return self.answers.pop(row.tool_call_id, "")

        blob_dir, secrets = self._call_env()
        return ToolContext(
            cwd=Path(self.cwd),
            session_id=self.session_id,
            tool_call_id=row.tool_call_id,
            emit_output=emit,
            timeout_s=self.settings.timing.tool_timeout_s,
            kill_grace_s=self.settings.timing.tool_kill_grace_s,
            on_process_started=on_process_started,
            ask_user=ask,
            private_dirs=(Path(self.settings.home),),
            output_limit_chars=self.settings.tool_output_limit_chars,
            blob_dir=blob_dir,
            secrets=secrets,
        )

    def _call_env(self) -> tuple[Path, tuple[str, ...]]:
        """``(blob dir, secret values)`` of this turn's calls: looked up once per turn (a path
        computation and a token-file read each; a call's context is built several times)."""
        if self._env is None:
            blob_dir = blob_dir_for(transcript_path(self.settings.sessions_dir, self.cwd, self.session_id))
            keys = (self.settings.providers.openai_api_key, self.settings.providers.anthropic_api_key)
            self._env = (blob_dir, secret_values(self.settings.home, keys))
        return self._env

    def wake_approval(self, tool_call_id: str) -> None:
        """Wake the wait for ``tool_call_id``'s decision (an answer was recorded in this process)."""
        wake = self._approval_wake.get(tool_call_id)
        if wake is not None:
            wake.set()

    async def wait_for_approval(self, row: ToolCallRow) -> tuple[str, str | None]:
        """Wait for the decision on ``row`` (in-process answer, another process's answer, or timeout).

        Returns:
            ``(decision, note)``; decision ``timeout`` after ``approval_timeout_s``.
        """
        timeout = self.settings.timing.approval_timeout_s
        deadline = None if timeout is None else anyio.current_time() + timeout
        while True:
            current = next(
                (
                    r
                    for r in await self.journal.tool_calls(self.session_id, turn_id=row.turn_id)
                    if r.tool_call_id == row.tool_call_id
                ),
                None,
            )
            if current is not None and current.approval not in ("pending", "none"):
                return current.approval, current.approval_note
            if deadline is not None and anyio.current_time() >= deadline:
                try:
                    await self.journal.resolve_approval(
                        self.session_id, row.tool_call_id, "timeout", note="timed out"
                    )
                except AcagentError:
                    continue
                return "timeout", "timed out"
            wake = self._approval_wake.setdefault(row.tool_call_id, anyio.Event())
            wait_s = 0.5 if deadline is None else max(0.01, min(0.5, deadline - anyio.current_time()))
            with anyio.move_on_after(wait_s):
                await wake.wait()
            if wake.is_set():
                self._approval_wake.pop(row.tool_call_id, None)
