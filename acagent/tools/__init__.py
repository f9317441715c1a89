"""acagent.tools: the tool seam, the contract tools, containment and the approval policy.

The seven contract tools (:func:`default_tools`): ``shell``, ``read_file``, ``write_file``,
``edit_file``, ``list_dir``, ``glob``, ``ask_user``. Every path argument goes through
:func:`resolve_in_workspace`; shell approval follows :class:`ApprovalPolicy`.

Extra tools (tests, plugins) are added with :func:`register_tool` and removed with
:func:`unregister_tool`; ``acagent.tools._testing.NoopProbeTool`` is such a test-only tool and
is not registered by default.
"""

from __future__ import annotations

from acagent.tools._ask import AskUserTool
from acagent.tools._base import Tool, ToolContext, ToolResult, validate_arguments
from acagent.tools._env import is_secret_name, scrubbed_env, secret_values
from acagent.tools._files import EditFileTool, ReadFileTool, WriteFileTool
from acagent.tools._listing import GlobTool, ListDirTool
from acagent.tools._paths import (
    InvalidPath,
    PathError,
    PathOutsideWorkspace,
    PathPrivate,
    resolve_in_workspace,
)
from acagent.tools._policy import ApprovalPolicy
from acagent.tools._process import kill_call_processes, kill_process_group, spawn_marker
from acagent.tools._shell import ShellTool, interrupted_result
from acagent.tools._shellrule import shell_command_admitted

__all__ = [
    "ApprovalPolicy",
    "AskUserTool",
    "EditFileTool",
    "GlobTool",
    "InvalidPath",
    "ListDirTool",
    "PathError",
    "PathOutsideWorkspace",
    "PathPrivate",
    "ReadFileTool",
    "ShellTool",
    "Tool",
    "ToolContext",
    "ToolResult",
    "WriteFileTool",
    "default_tools",
    "interrupted_result",
    "is_secret_name",
    "kill_call_processes",
    "kill_process_group",
    "register_tool",
    "registered_tools",
    "resolve_in_workspace",
    "scrubbed_env",
    "secret_values",
    "shell_command_admitted",
    "spawn_marker",
    "unregister_tool",
    "validate_arguments",
]

_CONTRACT_TOOLS: tuple[type[Tool], ...] = (
    ShellTool,
    ReadFileTool,
    WriteFileTool,
    EditFileTool,
    ListDirTool,
    GlobTool,
    AskUserTool,
)
_extra: dict[str, Tool] = {}


def register_tool(tool: Tool) -> None:
    """Add a tool to what :func:`default_tools` returns (test hook / plugins).

    Raises:
        ValueError: the name belongs to a contract tool.
    """
    if any(cls.name == tool.name for cls in _CONTRACT_TOOLS):
        raise ValueError(f"tool name {tool.name!r} is taken by a built-in tool")
    _extra[tool.name] = tool


def unregister_tool(name: str) -> None:
    """Remove a tool added with :func:`register_tool` (no error if absent)."""
    _extra.pop(name, None)


def registered_tools() -> dict[str, Tool]:
    """The tools added with :func:`register_tool`, by name."""
    return dict(_extra)


def default_tools() -> dict[str, Tool]:
    """Fresh instances of the seven contract tools, plus registered extra tools, by name."""
    tools: dict[str, Tool] = {cls.name: cls() for cls in _CONTRACT_TOOLS}
    tools.update(_extra)
    return tools
