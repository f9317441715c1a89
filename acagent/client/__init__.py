"""Front-end access to sessions: in-process or through the daemon."""

from __future__ import annotations

from acagent.client._base import SessionClient
from acagent.client._local import LocalSessionClient

__all__ = ["LocalSessionClient", "SessionClient"]
