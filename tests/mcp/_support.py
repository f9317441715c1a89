"""Helpers for the MCP tests: the SDK test servers (real subprocesses) and their config."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

SERVERS = Path(__file__).resolve().parent / "servers"
DEMO = str(SERVERS / "demo_server.py")
BAD = str(SERVERS / "bad_server.py")


def demo_server(state: Path, **env: str) -> dict[str, Any]:
    """The ``[mcp.servers.demo]`` table of the FastMCP demo server keeping its state in ``state``."""
    return {"command": [sys.executable, DEMO], "env": {"DEMO_DIR": str(state), **env}}


def toml_value(value: Any) -> str:
    """A TOML literal for str / list / dict / number / bool values."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + "}"


def write_config(path: Path, servers: dict[str, dict[str, Any]], extra: str = "") -> Path:
    """Write ``[mcp.servers.NAME]`` tables (plus ``extra`` TOML) to ``path``."""
    lines = [extra] if extra else []
    for name, table in servers.items():
        lines.append(f"[mcp.servers.{name}]")
        lines += [f"{k} = {toml_value(v)}" for k, v in table.items()]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def pids_alive(state: Path) -> list[int]:
    """Pids of demo servers (recorded as ``pid.N`` files in ``state``) that still run."""
    alive = []
    for f in state.glob("pid.*"):
        pid = int(f.name.split(".")[1])
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X"):
                    alive.append(pid)
        except (OSError, IndexError):
            pass
    return alive
