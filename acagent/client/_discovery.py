"""Is a daemon serving this data directory? Cheap to ask: the standard library only.

:func:`daemon_info` reads ``$ACAGENT_HOME/daemon.json`` and checks that its pid is alive (and is
an acagent process), so a file left by a killed daemon is ignored. The CLI asks this before it
imports the remote client (httpx, websockets): a one-shot ``acagent run`` without a daemon loads
none of it (issue 12 item 1).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from acagent._pids import pid_alive, runs_acagent
from acagent.errors import DaemonUnavailable

__all__ = ["DaemonInfo", "DaemonUnavailable", "daemon_info", "read_token"]


@dataclass(frozen=True)
class DaemonInfo:
    """Contents of ``daemon.json``."""

    pid: int
    host: str
    port: int
    url: str
    busy_timeout_ms: int | None = None
    home: Path | None = None

    @property
    def ws_url(self) -> str:
        """``ws://host:port``."""
        return "ws://" + self.url.split("://", 1)[1]


def daemon_info(home: Path) -> DaemonInfo | None:
    """The live daemon serving ``home``, or None (no ``daemon.json``, unreadable, or a dead pid)."""
    path = Path(home) / "daemon.json"
    try:
        data = json.loads(path.read_text())
        info = DaemonInfo(
            pid=int(data["pid"]),
            host=str(data["host"]),
            port=int(data["port"]),
            url=str(data["url"]),
            busy_timeout_ms=data.get("busy_timeout_ms"),
            home=Path(home),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return info if pid_alive(info.pid) and runs_acagent(info.pid) else None


def read_token(home: Path) -> str:
    """The daemon's bearer token (``$ACAGENT_HOME/token``).

    Raises:
        DaemonUnavailable: the file is missing or unreadable.
    """
    try:
        return (Path(home) / "token").read_text().strip()
    except OSError as exc:
        raise DaemonUnavailable(
            f"cannot read the daemon token {str(Path(home) / 'token')!r}: {exc.strerror}"
        ) from exc
