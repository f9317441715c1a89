"""Front-end access to sessions: in-process or through the daemon.

Names load on first access: asking whether a daemon runs (:mod:`acagent.client._discovery`, the
standard library only) imports neither the runner nor httpx/websockets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from acagent._lazy import lazy_names

if TYPE_CHECKING:
    from acagent.client._base import SessionClient
    from acagent.client._discovery import DaemonInfo, DaemonUnavailable, daemon_info, read_token
    from acagent.client._local import LocalSessionClient
    from acagent.client._opened import Opened
    from acagent.client._remote import RemoteSessionClient, open_remote

__all__ = [
    "DaemonInfo",
    "DaemonUnavailable",
    "LocalSessionClient",
    "Opened",
    "RemoteSessionClient",
    "SessionClient",
    "daemon_info",
    "open_remote",
    "read_token",
]

_LAZY = {
    "SessionClient": "_base",
    "LocalSessionClient": "_local",
    "Opened": "_opened",
    "DaemonInfo": "_discovery",
    "DaemonUnavailable": "_discovery",
    "daemon_info": "_discovery",
    "read_token": "_discovery",
    "RemoteSessionClient": "_remote",
    "open_remote": "_remote",
}


__getattr__ = lazy_names(__name__, {k: f"acagent.client.{v}" for k, v in _LAZY.items()}, globals())
"""Import public names on first access."""
