"""Test-only tools (never registered by default).

Register one with :func:`acagent.tools.register_tool` in a test and remove it with
:func:`acagent.tools.unregister_tool`.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict

from acagent.tools._base import Tool, ToolContext, ToolResult

__all__ = ["NoopProbeArgs", "NoopProbeTool"]


class NoopProbeArgs(BaseModel):
    """No parameters at all."""

    model_config = ConfigDict(extra="forbid")


class NoopProbeTool(Tool):
    """``noop_probe``: takes no arguments, counts its calls (case F11)."""

    name: ClassVar[str] = "noop_probe"
    description: ClassVar[str] = "Test probe: does nothing and reports how often it was called."
    args_model: ClassVar[type[BaseModel]] = NoopProbeArgs
    idempotent: ClassVar[bool] = True
    read_only: ClassVar[bool] = True

    def __init__(self) -> None:
        self.calls = 0
        """Number of completed :meth:`run` calls."""
        self.received: list[dict[str, object]] = []
        """The validated arguments of each call, as dicts (always ``{}``)."""

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        """Count the call."""
        self.calls += 1
        self.received.append(args.model_dump())
        return ToolResult(content=f"noop_probe called {self.calls} time{'s' if self.calls != 1 else ''}")
