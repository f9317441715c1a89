"""One provider per model id for the whole daemon.

A runner builds its provider on first use and closes it when it hibernates. In the daemon many
sessions use the same model, and each SDK client costs memory (an ``httpx`` pool and a TLS
context with the CA bundle, ~1 MB) and start-up time, so the registry gets a factory that hands
every runner a thin handle on one shared provider per model id; the handle's ``aclose`` is a
no-op and the daemon closes the real providers when it stops.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from acagent.providers._base import ModelRequest, Provider, StreamedResponse

__all__ = ["SharedProviders"]


class _Handle:
    """A runner's view of a shared provider (closing it does not close the provider)."""

    def __init__(self, provider: Provider) -> None:
        self._provider = provider
        self.name = provider.name
        self.model = provider.model
        self.supports_tools = provider.supports_tools

    def request_stream(self, request: ModelRequest) -> AbstractAsyncContextManager[StreamedResponse]:
        """Delegate to the shared provider."""
        return self._provider.request_stream(request)

    async def aclose(self) -> None:
        """No-op: the daemon owns the shared provider."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self._provider, name)


class SharedProviders:
    """``(model_id) -> Provider`` that builds each model's provider once.

    Args:
        create: the real factory, ``(model_id) -> Provider`` (errors propagate to the turn).
    """

    def __init__(self, create: Callable[[str], Provider]) -> None:
        self._create = create
        self._providers: dict[str, Provider] = {}
        self._lock = threading.Lock()

    def __call__(self, model_id: str) -> Provider:
        """The shared provider's handle. Thread-safe: runners call it from worker threads (the
        first call imports the SDK), and two first turns of one model build it once."""
        with self._lock:
            provider = self._providers.get(model_id)
            if provider is None:
                provider = self._providers[model_id] = self._create(model_id)
        return _Handle(provider)

    async def aclose(self) -> None:
        """Close every real provider."""
        providers, self._providers = list(self._providers.values()), {}
        for provider in providers:
            try:
                await provider.aclose()
            except Exception:  # closing is best effort at shutdown
                pass
