"""The LangGraph peer's graph: a fake model node and a ToolNode, same texts as acagent's workload.

No ``from __future__ import annotations`` here: LangGraph reads the node functions' type hints
at graph-build time.
"""

import uuid
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from benchmarks._common import ASSISTANT_TEXT, PREAMBLE_TEXT, TOOL_ARG, USER_TEXT

__all__ = ["HumanMessage", "build_graph", "history_messages"]


@tool
async def echo(text: str) -> str:
    """Echo the text back."""
    return text


def _call() -> dict[str, Any]:
    return {"name": "echo", "args": {"text": TOOL_ARG}, "id": f"call_{uuid.uuid4().hex[:24]}"}


async def model(state: MessagesState) -> dict[str, Any]:
    """The fake model: a tool call after a user message, the final answer after a tool result."""
    if isinstance(state["messages"][-1], ToolMessage):
        return {"messages": [AIMessage(content=ASSISTANT_TEXT)]}
    return {"messages": [AIMessage(content=PREAMBLE_TEXT, tool_calls=[_call()])]}


def route(state: MessagesState) -> str:
    """To the tool node while the last message asks for tools."""
    last = state["messages"][-1]
    return "tools" if getattr(last, "tool_calls", None) else END


def build_graph() -> StateGraph:
    """model ⇄ tools, START → model, model → END when no tool call."""
    graph = StateGraph(MessagesState)
    graph.add_node("model", model)
    graph.add_node("tools", ToolNode([echo]))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", route, ["tools", END])
    graph.add_edge("tools", "model")
    return graph


def history_messages(turns: int) -> list[Any]:
    """The messages of ``turns`` past turns (user, assistant + tool call, tool result, answer)."""
    out: list[Any] = []
    for _ in range(turns):
        call = _call()
        out += [
            HumanMessage(content=USER_TEXT),
            AIMessage(content=PREAMBLE_TEXT, tool_calls=[call]),
            ToolMessage(content=TOOL_ARG, tool_call_id=call["id"], name="echo"),
            AIMessage(content=ASSISTANT_TEXT),
        ]
    return out
