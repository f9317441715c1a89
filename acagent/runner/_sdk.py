"""Provider creation off the event loop.

A provider's first use in a process imports its adapter and HTTP stack (httpx; the provider
SDKs, which took 4–8 s under load, are no longer imported at all since issue 12) and builds an
HTTP client with a TLS context. Done on the event loop, that
stalls every stream and the lease keeper of the process (issue 11; F53). So the factory always
runs in a worker thread, serialised by one lock (two first turns import once, not twice at
once), and :func:`prewarm` starts the import as soon as a session's model is known. The import
itself happens once per process (Python caches modules); later creations only build a client.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable

import anyio.to_thread

from acagent.providers._base import Provider

__all__ = ["create_off_loop", "prewarm"]

log = logging.getLogger("acagent.runner")

_lock = threading.Lock()
_warmed: set[str] = set()


async def create_off_loop(factory: Callable[[str], Provider], model_id: str) -> Provider:
    """``factory(model_id)`` in a worker thread; a cancel lands at once (the thread finishes alone).

    Raises:
        whatever the factory raises (e.g. ``ConfigError`` for a missing key).
    """

    def build() -> Provider:
        with _lock:
            return factory(model_id)

    return await anyio.to_thread.run_sync(build, abandon_on_cancel=True)


def _import_sdk(model_id: str) -> None:
    from acagent.providers._registry import provider_target

    target = provider_target(model_id)  # a built-in id reads no package metadata
    if target is None:
        return
    with _lock:
        try:
            importlib.import_module(target.partition(":")[0])
        except Exception as exc:  # the turn reports it (a ConfigError naming the extra)
            log.debug("prewarm of %s failed: %s", model_id, exc)


async def prewarm(model_id: str | None) -> None:
    """Import the SDK of ``model_id``'s provider in a worker thread (once per provider per process)."""
    if not model_id:
        return
    prefix = model_id.partition(":")[0]
    if prefix in _warmed:
        return
    _warmed.add(prefix)
    await anyio.to_thread.run_sync(_import_sdk, model_id, abandon_on_cancel=True)
