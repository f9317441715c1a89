"""``ask_user``: put a question to the user and return the answer.

The tool itself only awaits ``ctx.ask_user(question)``; the runner supplies that callable and
owns the waiting (status ``waiting_user``, re-delivery to attaching clients). The class
attribute ``interactive = True`` tells the runner so.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from acagent.tools._base import Tool, ToolContext, ToolResult

__all__ = ["AskUserArgs", "AskUserTool"]


class AskUserArgs(BaseModel):
    """Arguments of ``ask_user``."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(description="The question to ask the user; be specific.")


class AskUserTool(Tool):
    """Ask the user a question and wait for the answer."""

    name: ClassVar[str] = "ask_user"
    description: ClassVar[str] = (
        "Ask the user a question and wait for the answer. Use it only when you cannot proceed "
        "without the user's decision or information."
    )
    args_model: ClassVar[type[BaseModel]] = AskUserArgs
    idempotent: ClassVar[bool] = False
    read_only: ClassVar[bool] = True
    interactive: ClassVar[bool] = True

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        """Await the answer; an error result when no interactive user is attached."""
        assert isinstance(args, AskUserArgs)
        if ctx.ask_user is None:
            return ToolResult(content="error: no interactive user to answer the question", status="error")
        if not args.question.strip():
            return ToolResult(content="error: the question is empty", status="error")
        try:
            answer = await ctx.ask_user(args.question)
        except Exception as exc:
            return ToolResult(content=f"error: the question could not be asked: {exc}", status="error")
        if answer is None:
            return ToolResult(content="error: the user gave no answer", status="error")
        return ToolResult(content=str(answer))
