"""From a server's ``tools/list`` entries to what acagent offers: names, schemas, flags.

Names: ``mcp__<server>__<tool>``. Provider APIs accept ``^[A-Za-z0-9_-]{1,64}$``; a tool name
with other characters has them replaced by ``_``, and a name that would exceed 64 characters is
cut and suffixed with a short hash (both with a warning); the server is always called with its
own name.

Schemas: an input schema that is not valid JSON Schema (Draft 2020-12 meta-schema, checked with
``jsonschema``), or whose top level is not an object schema, is replaced by an open object schema
``{"type": "object", "additionalProperties": true}`` with a warning, so one bad tool never breaks
the request for every tool. The server still validates the arguments it gets.

Flags from annotations (spec: ``ToolAnnotations``; defaults ``readOnlyHint=false``,
``destructiveHint=true``, ``idempotentHint=false``), then the per-tool ``tools.NAME`` override:

==========================================  ===============  ================================
annotations                                 approval         after a crash mid-call
==========================================  ===============  ================================
``readOnlyHint``                            never asks       re-run
``idempotentHint`` (not ``destructiveHint``  asks            re-run once
explicitly true)
``destructiveHint`` / none                  asks             not re-run; the model is told the
                                                             outcome is unknown
override ``always`` / ``ask`` / ``deny``    never / always / not offered
==========================================  ===============  ================================
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import mcp.types as types

__all__ = ["ToolInfo", "tool_infos", "tool_name"]

_BAD = re.compile(r"[^A-Za-z0-9_-]")
_MAX_NAME = 64
OPEN_SCHEMA: dict[str, Any] = {"type": "object", "additionalProperties": True}


@dataclass
class ToolInfo:
    """One offered tool."""

    name: str
    """acagent name, ``mcp__<server>__<tool>``."""
    server: str
    server_tool: str
    """The name the server knows it by."""
    description: str
    schema: dict[str, Any]
    read_only: bool
    idempotent: bool
    mode: str
    """``auto`` (from annotations), ``always``, ``ask`` or ``deny``."""
    annotations: dict[str, Any] = field(default_factory=dict)

    @property
    def needs_approval(self) -> bool:
        """Whether a call asks the user (before session ``always`` rules)."""
        if self.mode == "always":
            return False
        if self.mode == "ask":
            return True
        return not self.read_only

    @property
    def fingerprint(self) -> str:
        """Changes when anything the model or the policy sees changes."""
        raw = [self.server_tool, self.description, self.schema, self.read_only, self.idempotent, self.mode]
        return hashlib.sha256(json.dumps(raw, sort_keys=True, default=str).encode()).hexdigest()

    def public(self) -> dict[str, Any]:
        """``{name, server_tool, annotations, read_only, idempotent, approval}`` for listings."""
        return {
            "name": self.name,
            "server_tool": self.server_tool,
            "annotations": self.annotations,
            "read_only": self.read_only,
            "idempotent": self.idempotent,
            "approval": "deny" if self.mode == "deny" else ("ask" if self.needs_approval else "never"),
        }


def tool_name(server: str, tool: str) -> tuple[str, str | None]:
    """``(acagent name, warning or None)`` for a server's tool."""
    safe = _BAD.sub("_", tool)
    name = f"mcp__{server}__{safe}"
    warning = None
    if safe != tool:
        warning = (
            f"tool {tool!r} of MCP server {server!r} renamed {name!r} (provider names allow A-Z a-z 0-9 _ -)"
        )
    if len(name) > _MAX_NAME:
        digest = hashlib.sha256(tool.encode()).hexdigest()[:8]
        name = f"{name[: _MAX_NAME - 9]}_{digest}"
        warning = (
            f"tool {tool!r} of MCP server {server!r} offered as {name!r} (names are at most 64 characters)"
        )
    return name, warning


def _check_schema(schema: Any) -> str | None:
    """None if ``schema`` is a valid object schema, else why not (one line)."""
    import jsonschema

    if not isinstance(schema, dict):
        return "the input schema is not a JSON object"
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "top level"
        return f"the input schema is not valid JSON Schema at {where}: {exc.message[:120]}"
    if schema.get("type", "object") != "object":
        return f"the input schema's type is {schema.get('type')!r}, not 'object'"
    return None


def _flags(annotations: types.ToolAnnotations | None) -> tuple[bool, bool]:
    """``(read_only, idempotent)`` from the annotations (see module docstring)."""
    if annotations is None:
        return False, False
    read_only = annotations.readOnlyHint is True
    idempotent = read_only or (annotations.idempotentHint is True and annotations.destructiveHint is not True)
    return read_only, idempotent


def tool_infos(
    server: str, tools: list[types.Tool], overrides: Mapping[str, str]
) -> tuple[dict[str, ToolInfo], list[str]]:
    """The offered tools of one server (by acagent name) and the warnings about them."""
    infos: dict[str, ToolInfo] = {}
    warnings: list[str] = []
    for tool in tools:
        name, warning = tool_name(server, tool.name)
        if warning:
            warnings.append(warning)
        if name in infos:
            warnings.append(
                f"tool {tool.name!r} of MCP server {server!r} skipped: its name clashes with another"
            )
            continue
        schema: dict[str, Any] = dict(tool.inputSchema)
        problem = _check_schema(tool.inputSchema)
        if problem is not None:
            warnings.append(
                f"tool {tool.name!r} of MCP server {server!r}: {problem}; offered with an open schema"
            )
            schema = dict(OPEN_SCHEMA)
        schema.setdefault("type", "object")
        schema.setdefault("properties", {})
        read_only, idempotent = _flags(tool.annotations)
        infos[name] = ToolInfo(
            name=name,
            server=server,
            server_tool=tool.name,
            description=(tool.description or tool.title or f"MCP tool {tool.name} of server {server}")[:2000],
            schema=schema,
            read_only=read_only,
            idempotent=idempotent,
            mode=overrides.get(tool.name, "auto"),
            annotations=tool.annotations.model_dump(exclude_none=True) if tool.annotations else {},
        )
    unknown = sorted(set(overrides) - {i.server_tool for i in infos.values()})
    if unknown:
        warnings.append(
            f"MCP server {server!r} has no tool {', '.join(map(repr, unknown))} (named in its tools table)"
        )
    return infos, warnings
