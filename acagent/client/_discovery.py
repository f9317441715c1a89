"""Is a daemon serving this data directory? Cheap to ask: the standard library only.

:func:`daemon_info` reads ``$ACAGENT_HOME/daemon.json`` and checks that its pid is alive (and is
an acagent process), so a file left by a killed daemon is ignored. The CLI asks this before it
imports the remote client (httpx, websockets): a one-shot ``acagent run`` without a daemon loads
none of it (issue 12 item 1).

A live pid is not an answering daemon: one stopped by SIGSTOP / Ctrl-Z (or hung) still has its
listening socket, so the kernel accepts connections and every request waited for the client's
30 s read timeout. :func:`answering_daemon` (what ``status``, ``attach``, ``run`` and ``chat``
ask) tells that apart at once: a stopped process (``/proc`` state ``T``/``t``) is reported without
a request; otherwise one bare HTTP request must get its first byte within
:data:`PROBE_TIMEOUT_S`. Such a daemon is never taken for "down": it still holds
``daemon.lock`` (no second daemon starts) and its sessions' leases, so the CLI refuses with
a :class:`DaemonUnavailable` naming the pid instead of writing the journal beside it (F137).
"""

from __future__ import annotations

import json
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from acagent._pids import is_stopped, pid_alive, runs_acagent
from acagent.errors import DaemonUnavailable

__all__ = [
    "PROBE_TIMEOUT_S",
    "DaemonInfo",
    "DaemonUnavailable",
    "answering_daemon",
    "check_answering",
    "daemon_info",
    "read_token",
]

PROBE_TIMEOUT_S = 5.0
"""Seconds a live daemon has to send the first byte of an answer to :func:`check_answering`."""


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


def _probe(url: str, timeout: float) -> str | None:
    """Send one bare request to ``url``; None once any byte of an answer arrives (any status is
    an answer), else why not. A public static file, so a probe is neither a 401 in the daemon's
    metrics nor work for it. Raw socket, not httpx: discovery stays standard-library only."""
    deadline = time.monotonic() + timeout
    try:
        parts = urlsplit(url)
        request = f"GET /static/app.css HTTP/1.1\r\nHost: {parts.netloc}\r\nConnection: close\r\n\r\n"
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout) as s:
            s.settimeout(max(0.01, deadline - time.monotonic()))
            s.sendall(request.encode("ascii"))
            return None if s.recv(1) else "it closed the connection without an answer"
    except TimeoutError:
        return f"no answer within {timeout:g} s"
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    except (ValueError, UnicodeError):  # a hand-edited daemon.json: a bad port, a non-ASCII host
        return f"daemon.json names an unusable URL {url!r}"


def check_answering(info: DaemonInfo, timeout: float = PROBE_TIMEOUT_S) -> None:
    """Return if the daemon ``info`` names answers HTTP (module docstring).

    Raises:
        DaemonUnavailable: its process is stopped (at once, no request sent), or sent no byte of
            an answer within ``timeout`` seconds, or refused the connection. The one-line message
            names the pid and what to do; ``detail`` has ``pid``, ``url``, ``state``
            (``stopped`` | ``not_answering``) and ``reason``.
    """
    reason = None
    if not is_stopped(info.pid):
        reason = _probe(info.url, timeout)
        if reason is None:
            return
    home = repr(str(info.home)) if info.home is not None else "this data directory"
    if is_stopped(info.pid):  # also when it was stopped while the probe waited
        state = "stopped"
        message = (
            f"the daemon serving {home} (pid {info.pid}) is alive but stopped (SIGSTOP or Ctrl-Z) and"
            f" answers nothing; `kill -CONT {info.pid}` resumes it, `acagent serve --stop` ends it"
            " (its sessions recover)"
        )
    else:
        state = "not_answering"
        message = (
            f"the daemon serving {home} (pid {info.pid}) is alive but does not answer ({reason});"
            f" it still holds this home and its sessions: wait for it, or end it with `acagent serve --stop`"
            f" (`kill -9 {info.pid}` if that fails; its sessions recover)"
        )
    raise DaemonUnavailable(
        message, detail={"pid": info.pid, "url": info.url, "state": state, "reason": reason or state}
    )


def answering_daemon(home: Path, timeout: float = PROBE_TIMEOUT_S) -> DaemonInfo | None:
    """The live daemon serving ``home`` after :func:`check_answering`, or None when none is
    registered (no ``daemon.json``, or a dead pid: :func:`daemon_info`).

    Raises:
        DaemonUnavailable: one is registered and alive but stopped or not answering.
    """
    info = daemon_info(home)
    if info is not None:
        check_answering(info, timeout)
    return info


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
