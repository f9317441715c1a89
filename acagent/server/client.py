"""Former home of the daemon client: it lives in :mod:`acagent.client` now (nothing in the server
package points back up to the CLI). Kept so old imports keep working."""

from __future__ import annotations

from acagent.client._discovery import DaemonInfo, DaemonUnavailable, daemon_info, read_token
from acagent.client._remote import (
    RemoteSessionClient,
    ReplayedEvent,
    cursor_ahead,
    error_from_envelope,
    find_session,
    open_remote,
)

_find = find_session

__all__ = [
    "DaemonInfo",
    "DaemonUnavailable",
    "RemoteSessionClient",
    "ReplayedEvent",
    "cursor_ahead",
    "daemon_info",
    "error_from_envelope",
    "find_session",
    "open_remote",
    "read_token",
]
