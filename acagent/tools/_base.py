"""The tool seam: pydantic argument models, results, and the run context.

A tool declares its argument model (whose JSON schema goes to the provider), whether it is
``idempotent`` (safe to re-run after a crash mid-run) and whether a given call needs the user's
approval. The loop writes the ``tool_call`` intent row before :meth:`Tool.run` is called, and
records the :class:`ToolResult` in the journal in the same transaction as its ``tool.result``
event.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ValidationError

from acagent.tools._paths import resolve_in_workspace

__all__ = ["Tool", "ToolContext", "ToolResult", "validate_arguments"]

ToolStatus = Literal["ok", "error", "interrupted", "denied"]


@dataclass
class ToolResult:
    """What a tool call produced; ``content`` is the text the model gets."""

    content: str
    status: ToolStatus = "ok"
    exit_code: int | None = None
    data: dict[str, Any] = field(default_factory=dict)
    """Extra structured fields for the ``tool.result`` event payload (never sent to the model)."""

    @property
    def is_error(self) -> bool:
        """True unless ``status == "ok"``."""
        return self.status != "ok"


@dataclass
class ToolContext:
    """Per-call environment handed to :meth:`Tool.run`."""

    cwd: Path
    """The session's workspace root (absolute, canonical); tools never leave it."""
    session_id: str
    tool_call_id: str
    emit_output: Callable[[str], None]
    """Publish a chunk of live output (a ``tool.output`` event); non-blocking."""
    timeout_s: float = 600.0
    kill_grace_s: float = 2.0
    on_process_started: Callable[[int], None] | None = None
    """Called with the pid (= process group id) of a spawned child, so recovery can kill it."""
    ask_user: Callable[[str], Any] | None = None
    """Async callable ``(question) -> answer`` for the ``ask_user`` tool."""
    on_interrupted: Callable[[ToolResult], None] | None = None
    """Called by a tool that is being cancelled, just before it re-raises, with its partial
    result (status ``interrupted``, e.g. the shell output captured so far)."""
    private_dirs: tuple[Path, ...] = ()
    """Directories no tool reads or writes (acagent's data dir, ``ACAGENT_HOME``), even when
    they lie inside the workspace (:class:`~acagent.tools.PathPrivate`)."""

    output_limit_chars: int = 30_000
    """Most characters of a call's output the model gets (head + tail; ``tool_output_limit_chars``)."""
    blob_dir: Path | None = None
    """Where an output cut for the model is kept in full (``<id>.blobs`` beside the transcript);
    None keeps nothing (see :mod:`acagent.tools._blob`)."""
    secrets: tuple[str, ...] = ()
    """Secret values (configured provider keys, the daemon token) that must not reach a tool
    process under any variable name (:func:`~acagent.tools.scrubbed_env`)."""

    def resolve(self, path: str) -> Path:
        """:func:`~acagent.tools.resolve_in_workspace` for this call's workspace and private dirs.

        Raises:
            PathError: see :func:`~acagent.tools.resolve_in_workspace`.
        """
        return resolve_in_workspace(self.cwd, path, private=self.private_dirs)


class Tool:
    """Base class of every tool.

    Subclasses set ``name``, ``description``, ``args_model`` and implement :meth:`run`.
    ``run`` must honour anyio cancellation: on cancel it stops its work (killing child
    processes) and re-raises; the loop records the interrupted result.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    args_model: ClassVar[type[BaseModel]]
    idempotent: ClassVar[bool] = False
    """True if re-running after a crash mid-run cannot do harm (read-only tools)."""
    read_only: ClassVar[bool] = False
    """True if the tool never changes anything (then it never needs approval)."""
    interactive: ClassVar[bool] = False
    """True for a tool that waits for the user (``ask_user``): the runner handles its waiting."""

    def parameters_schema(self) -> dict[str, Any]:
        """JSON schema of the arguments object (built once per argument model)."""
        return dict(_schema_of(self.args_model))

    def needs_approval(self, args: BaseModel, ctx: ToolContext) -> bool:
        """Whether this call must be approved (before any ``always`` rule is consulted)."""
        return not self.read_only

    def written_paths(self, args: BaseModel) -> list[str]:
        """Path arguments this call writes (``write_file``/``edit_file``: ``[args.path]``).

        The policy asks for every call writing a protected path, whatever ``always`` said.
        """
        return []

    def approval_summary(self, args: BaseModel) -> dict[str, Any]:
        """Fields shown in ``approval.requested`` (e.g. the exact shell ``command``)."""
        return args.model_dump(mode="json")

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        """Run the call.

        Raises:
            anyio.get_cancelled_exc_class(): when cancelled (after cleaning up).
        """
        raise NotImplementedError


@functools.cache
def _schema_of(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    return schema


def validate_arguments(tool: Tool, arguments: dict[str, Any]) -> tuple[BaseModel | None, str | None]:
    """Validate raw JSON arguments against the tool's model.

    Returns:
        ``(args, None)`` or ``(None, message)`` where message reads like
        ``missing required argument: command``.
    """
    try:
        return tool.args_model.model_validate(arguments), None
    except ValidationError as exc:
        msgs = []
        for err in exc.errors(include_url=False):
            loc = ".".join(str(p) for p in err["loc"])
            if err["type"] == "missing":
                msgs.append(f"missing required argument: {loc}")
            else:
                msgs.append(f"invalid argument {loc!r}: {err['msg']}")
        return None, "; ".join(msgs)
