"""The daemon: ``acagent serve`` — HTTP API, WebSocket and SSE streams, login URL and web page.

One process serves every session of an ``ACAGENT_HOME`` to many clients through the same
:class:`~acagent.runner.SessionRegistry`, runner, bus and journal that ``acagent chat`` uses in
process. :mod:`acagent.client` (import it from there) is the other side: discovery (``daemon.json``) and a
:class:`~acagent.client.SessionClient` over HTTP + WebSocket. See ``docs/daemon.md``.

Names load on first access, so ``acagent run`` looking for a daemon does not import FastAPI.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from acagent.server._app import DaemonStopping, create_app
    from acagent.server._daemon import DaemonRunning, ServeOptions, ensure_token, serve
    from acagent.server._security import Guard, GuardConfig, check_host, check_origin
    from acagent.server._state import DaemonState, StreamOptions

__all__ = [
    "DaemonRunning",
    "DaemonState",
    "DaemonStopping",
    "Guard",
    "GuardConfig",
    "ServeOptions",
    "StreamOptions",
    "check_host",
    "check_origin",
    "create_app",
    "ensure_token",
    "serve",
]

_LAZY = {
    "DaemonStopping": "_app",
    "create_app": "_app",
    "DaemonRunning": "_daemon",
    "ServeOptions": "_daemon",
    "ensure_token": "_daemon",
    "serve": "_daemon",
    "Guard": "_security",
    "GuardConfig": "_security",
    "check_host": "_security",
    "check_origin": "_security",
    "DaemonState": "_state",
    "StreamOptions": "_state",
}


def __getattr__(name: str) -> Any:
    """Import public names on first access."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"acagent.server.{module}"), name)
    globals()[name] = value
    return value
