"""MCP server configuration: ``[mcp.servers.NAME]`` tables, ``${VAR}`` expansion, project approval.

Two files declare servers (``docs/mcp.md``):

* ``$ACAGENT_HOME/config.toml`` — the user's servers, trusted as the user wrote them;
* ``.acagent/config.toml`` in the session's working directory or the nearest parent holding one
  — the project's servers. A project definition wins over a user server of the same name, and
  a project server is not started until the user approved it once (``acagent mcp approve
  NAME``). The approval is recorded in ``$ACAGENT_HOME/mcp-approvals.json`` keyed by the project
  directory and the server name, with a digest of its definition: a changed command, URL or
  environment needs a new approval.

A server is either stdio (``command = [argv...]``, optional ``env`` and ``cwd``) or streamable
HTTP (``url``, optional ``headers``). ``${VAR}`` in ``env`` values, ``headers`` values, ``url``
and ``command`` words is replaced by the variable of the environment acagent was started in;
the expanded values live only in memory (never in the journal, a transcript or an event), and
:meth:`ServerConfig.redact` masks them in error messages. Nothing here imports the MCP SDK.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from acagent.errors import ConfigError

__all__ = [
    "ApprovalStore",
    "McpConfig",
    "ServerConfig",
    "ServerSpec",
    "ToolMode",
    "expand_vars",
    "find_project_config",
    "load_server_specs",
    "parse_mcp_table",
]

ToolMode = Literal["always", "ask", "deny"]
"""Per-tool override: ``always`` runs without asking, ``ask`` always asks, ``deny`` never runs."""

DEFAULT_CALL_TIMEOUT_S = 120.0
DEFAULT_STARTUP_TIMEOUT_S = 30.0
PROJECT_CONFIG = Path(".acagent") / "config.toml"
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,40}$")


class ServerConfig(BaseModel):
    """One ``[mcp.servers.NAME]`` table (exactly one of ``command`` and ``url``)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)  # built on the first server seen

    command: list[str] | None = None
    """stdio: the program and its arguments (no shell)."""
    env: dict[str, str] = Field(default_factory=dict)
    """stdio: variables added to the minimal inherited environment (``HOME``, ``PATH``, ...)."""
    cwd: str | None = None
    """stdio: working directory, relative to the session's (default: the session's)."""
    url: str | None = None
    """streamable HTTP: the endpoint, e.g. ``http://127.0.0.1:9000/mcp``."""
    headers: dict[str, str] = Field(default_factory=dict)
    """HTTP: request headers, e.g. ``Authorization = "Bearer ${TOKEN}"``."""
    timeout_s: float = Field(default=DEFAULT_CALL_TIMEOUT_S, gt=0, le=600)
    """Per-call timeout in seconds: a call still running then gets an error result. At most 600
    (the tool timeout), so it stays below ``timing.tool_redelivery_idle_s`` (invariant 7)."""
    startup_timeout_s: float = Field(default=DEFAULT_STARTUP_TIMEOUT_S, gt=0)
    """Seconds from spawn/connect to a listed tool set; past it the server counts as failed."""
    enabled: bool = True
    tools: dict[str, ToolMode] = Field(default_factory=dict)
    """Per-tool approval overrides by the server's own tool name."""

    @model_validator(mode="after")
    def _one_transport(self) -> ServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("set exactly one of 'command' (stdio) or 'url' (streamable HTTP)")
        if self.command is not None and not self.command:
            raise ValueError("'command' must name a program")
        return self

    @property
    def transport(self) -> Literal["stdio", "http"]:
        """``stdio`` or ``http``."""
        return "stdio" if self.command is not None else "http"

    def digest(self) -> str:
        """SHA-256 of the definition as written (before expansion): what an approval covers."""
        raw = json.dumps(self.model_dump(mode="json"), sort_keys=True)
        return hashlib.sha256(raw.encode()).hexdigest()[:32]

    def target(self) -> str:
        """What to show for the server: the command line or the URL (unexpanded)."""
        return " ".join(self.command) if self.command is not None else str(self.url)


class McpConfig(BaseModel):
    """The whole ``[mcp]`` table."""

    model_config = ConfigDict(extra="forbid", defer_build=True)  # built on the first table seen

    servers: dict[str, ServerConfig] = Field(default_factory=dict)


@dataclass
class ServerSpec:
    """A configured server as one working directory sees it."""

    name: str
    config: ServerConfig
    source: Literal["user", "project"]
    source_path: Path
    approved: bool = True
    """False for a project server the user has not approved (it is not started)."""
    secrets: list[str] = field(default_factory=list)
    """Expanded ``${VAR}`` values (masked by :meth:`redact`)."""

    def redact(self, text: str) -> str:
        """``text`` with every expanded variable value replaced by ``***``."""
        for value in self.secrets:
            if len(value) >= 4:
                text = text.replace(value, "***")
        return text


def expand_vars(value: str, environ: Mapping[str, str], used: list[str] | None = None) -> str:
    """Replace each ``${VAR}`` in ``value`` from ``environ``.

    Args:
        value: the configured string.
        environ: the environment acagent runs in.
        used: if given, the expanded values are appended (so they can be redacted).

    Raises:
        ConfigError: a variable is not set (naming it).
    """

    def sub(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in environ:
            raise ConfigError(f"environment variable {name!r} is not set (used as ${{{name}}})")
        if used is not None:
            used.append(environ[name])
        return environ[name]

    return _VAR.sub(sub, value)


def parse_mcp_table(table: Any, path: Path) -> McpConfig:
    """Validate the ``[mcp]`` table of the config file ``path``.

    Raises:
        ConfigError: the first invalid key, by the one config-error rule
            (:mod:`acagent.config_errors`: key path, value, file and line, reason).
    """
    from acagent.config_errors import config_error, find_line

    if not table:  # most setups configure no server: nothing to validate, no model to build
        return McpConfig.model_construct(servers={})
    try:
        config = McpConfig.model_validate(table)
    except ValidationError as exc:
        raise config_error(exc, path=path, in_file={"mcp": table}, prefix=("mcp",)) from None
    for name in config.servers:
        if not _NAME.match(name):
            line = find_line(path, ("mcp", "servers", name))
            where = f"{str(path)!r}" + (f" line {line}" if line is not None else "")
            raise ConfigError(
                f"invalid config [mcp.servers] name {name!r} in {where}: use letters, digits, '_' and '-' (at most 40)"
            )
    return config


def find_project_config(cwd: str | Path) -> Path | None:
    """The nearest ``.acagent/config.toml`` at or above ``cwd`` (None if there is none)."""
    here = Path(cwd)
    for directory in (here, *here.parents):
        candidate = directory / PROJECT_CONFIG
        if candidate.is_file():
            return candidate
    return None


def _read_mcp_table(path: Path) -> tuple[McpConfig, list[str]]:
    """The ``[mcp]`` table of a project config and the other top-level keys it ignores.

    A project file is written by whoever wrote the repository, so nothing but its MCP servers
    (each approved by the user before it starts) is taken from it: a ``model``, ``auto_approve``
    or ``shell_allow`` there would let a cloned repository pick what runs without asking.
    """
    import tomllib  # only for a project config (most directories have none)

    try:
        data = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {str(path)!r}: {exc}") from exc
    return parse_mcp_table(data.get("mcp"), path), sorted(k for k in data if k != "mcp")


class ApprovalStore:
    """Durable approvals of project servers: ``$ACAGENT_HOME/mcp-approvals.json`` (mode 0600).

    Shape: ``{"version": 1, "approved": {"<project dir>::<name>": "<definition digest>"}}``.
    """

    def __init__(self, home: Path) -> None:
        self.path = home / "mcp-approvals.json"

    def _load(self) -> dict[str, str]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        approved = data.get("approved") if isinstance(data, dict) else None
        return {str(k): str(v) for k, v in approved.items()} if isinstance(approved, dict) else {}

    @staticmethod
    def _key(project_dir: Path, name: str) -> str:
        return f"{project_dir}::{name}"

    def is_approved(self, project_dir: Path, name: str, config: ServerConfig) -> bool:
        """True if this exact definition was approved for this project."""
        return self._load().get(self._key(project_dir, name)) == config.digest()

    def approve(self, project_dir: Path, name: str, config: ServerConfig) -> None:
        """Record the approval (atomic replace; owner-only file)."""
        approved = self._load()
        approved[self._key(project_dir, name)] = config.digest()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump({"version": 1, "approved": approved}, f, indent=1, sort_keys=True)
        os.replace(tmp, self.path)


def load_server_specs(
    user_table: Mapping[str, Any] | None, home: Path, cwd: str | Path
) -> tuple[list[ServerSpec], list[str]]:
    """The servers a session in ``cwd`` sees: user servers, overridden by project servers.

    Args:
        user_table: the ``[mcp]`` table of ``$ACAGENT_HOME/config.toml`` (``settings.mcp``).
        home: ``$ACAGENT_HOME`` (for the approval store).
        cwd: the session's working directory.

    Returns:
        ``(specs, warnings)``; a project config that does not parse is a warning (its servers are
        absent), so one bad repository never stops the daemon, and so are keys other than
        ``[mcp]`` in it (they are ignored).

    Raises:
        ConfigError: the user's own ``[mcp]`` table is invalid.
    """
    user = parse_mcp_table(user_table, home / "config.toml")
    specs = {
        name: ServerSpec(name, cfg, "user", home / "config.toml")
        for name, cfg in user.servers.items()
        if cfg.enabled
    }
    warnings: list[str] = []
    project_path = find_project_config(cwd)
    if project_path is not None:
        try:
            project, ignored = _read_mcp_table(project_path)
        except ConfigError as exc:
            warnings.append(f"MCP servers of {str(project_path)!r} ignored: {exc.message}")
        else:
            if ignored:
                warnings.append(
                    f"{str(project_path)!r}: a project config sets only [mcp] servers; ignored: "
                    + ", ".join(ignored)
                    + f" (set them in {str(home / 'config.toml')!r})"
                )
            store = ApprovalStore(home)
            project_dir = project_path.parent.parent
            for name, cfg in project.servers.items():
                if not cfg.enabled:
                    specs.pop(name, None)
                    continue
                ok = store.is_approved(project_dir, name, cfg)
                specs[name] = ServerSpec(name, cfg, "project", project_path, approved=ok)
    return sorted(specs.values(), key=lambda s: s.name), warnings
