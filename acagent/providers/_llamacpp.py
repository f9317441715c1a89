"""The embedded llama.cpp server behind the ``local`` provider (xllamacpp), one per model file.

:class:`LocalServer` starts xllamacpp's OpenAI-compatible HTTP server on ``127.0.0.1`` at a free
port (loading the model takes ~0.5 s; call it from a worker thread), checks its health, and stops
it — on request, and bounded at interpreter exit (``atexit``); its threads live inside this
process, so it cannot outlive it. ``xllamacpp`` is imported only when a server starts.
"""

from __future__ import annotations

import atexit
import os
import secrets
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from acagent.errors import ConfigError, ProviderError

__all__ = ["DEFAULT_CONTEXT_TOKENS", "INSTALL_HINT", "LocalServer", "default_threads"]

INSTALL_HINT = "pip install 'acagent[local]'"
DEFAULT_CONTEXT_TOKENS = 4096
_HEALTH_TIMEOUT_S = 30.0
_UNSTOPPABLE: list[Any] = []
"""Servers that never became healthy: kept alive, since destroying one may hang."""


_RUNNING: weakref.WeakSet[LocalServer] = weakref.WeakSet()
_ATEXIT_REGISTERED = False


def _register_atexit(server: LocalServer) -> None:
    """Stop every running server at interpreter exit, each bounded (see :meth:`LocalServer.stop`)."""
    global _ATEXIT_REGISTERED
    _RUNNING.add(server)
    if not _ATEXIT_REGISTERED:
        atexit.register(_stop_all)
        _ATEXIT_REGISTERED = True


def _stop_all() -> None:
    for server in list(_RUNNING):
        server.stop(timeout_s=2.0)


def _wait_healthy(address: str, *, timeout_s: float) -> bool:
    """Poll ``GET /health`` until 200. Blocking.

    ``xllamacpp.Server(...)`` returns once the model is loaded, but its HTTP thread starts a
    moment later (0.1–0.4 s measured); destroying the server before that thread listens hangs
    forever in ``~Server`` (measured with xllamacpp 2026.10.11549). So :meth:`LocalServer.start`
    returns only once the server answers, which also proves it is usable.
    """
    import httpx

    deadline = time.monotonic() + timeout_s
    with httpx.Client(timeout=2.0) as client:
        while time.monotonic() < deadline:
            try:
                if client.get(address + "/health").status_code == 200:
                    return True
            except httpx.TransportError:
                pass
            time.sleep(0.01)
    return False


def default_threads(cpu_count: int | None = None) -> int:
    """Generation threads when ``providers.local_threads`` is unset: ``max(1, min(4, cpus - 1))``.

    Args:
        cpu_count: CPUs this process may use (default: ``os.sched_getaffinity``, else
            ``os.cpu_count()``).
    """
    if cpu_count is None:
        try:
            cpu_count = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):  # pragma: no cover - macOS/Windows have no affinity API
            cpu_count = os.cpu_count() or 1
    return max(1, min(4, cpu_count - 1))


class LocalServer:
    """xllamacpp's in-process llama.cpp server bound to ``127.0.0.1`` at a free port.

    :meth:`start` and :meth:`stop` block (model load ~0.5 s; stop waits for the server loop to
    exit): call them from a worker thread in async code.

    Args:
        model_path: the GGUF file, or a blocking function returning it (called by :meth:`start`,
            e.g. to pull a missing model first).
        threads: generation and prompt-processing threads.
        context_tokens: context window (``n_ctx``), in tokens.
    """

    def __init__(
        self,
        model_path: Path | Callable[[], Path],
        *,
        threads: int,
        context_tokens: int = DEFAULT_CONTEXT_TOKENS,
    ) -> None:
        self._model_path = model_path
        self.threads = threads
        self.context_tokens = context_tokens
        self._server: Any = None
        self._address: str | None = None
        self.api_key = secrets.token_urlsafe(24)
        """Bearer key the embedded server requires (random per server; ``/health`` is public)."""

    @property
    def model_path(self) -> Path | None:
        """The GGUF file, or None while it is still to be resolved (pulled) by :meth:`start`."""
        return self._model_path if isinstance(self._model_path, Path) else None

    def resolve_model(self) -> Path:
        """The GGUF file, calling the resolver (which may pull it) the first time. Blocking."""
        if not isinstance(self._model_path, Path):
            self._model_path = self._model_path()
        return self._model_path

    @property
    def running(self) -> bool:
        """True between :meth:`start` and :meth:`stop`."""
        return self._server is not None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1`` (the OpenAI-compatible root).

        Raises:
            RuntimeError: the server is not running.
        """
        if self._address is None:
            raise RuntimeError("local server is not running")
        return self._address + "/v1"

    def start(self) -> str:
        """Load the model and start listening; returns :attr:`base_url`. Idempotent.

        Raises:
            ConfigError: xllamacpp is not installed.
            ModelPullError: the model file had to be pulled and could not be.
            ProviderError: llama.cpp could not load the model file.
        """
        if self._server is not None:
            return self.base_url
        model_path = self.resolve_model()
        try:
            import xllamacpp
        except ImportError as exc:
            raise ConfigError(f"the local model needs xllamacpp: {INSTALL_HINT}") from exc
        params = xllamacpp.CommonParams()
        params.model.path = str(model_path)
        params.hostnames = ["127.0.0.1"]
        params.port = 0  # the server picks a free port; `listening_address` reports it
        params.n_ctx = self.context_tokens
        params.n_parallel = 1
        params.cpuparams.n_threads = self.threads
        params.cpuparams_batch.n_threads = self.threads
        params.verbosity = -1  # llama.cpp logs to stderr otherwise, over the chat screen
        # Any local process or web page could reach a keyless 127.0.0.1 port (llama.cpp allows
        # every CORS origin): require a per-process bearer key and serve no web UI.
        params.api_keys = [self.api_key]
        params.ui = False
        params.endpoint_metrics = False
        # SmolLM2's recommended sampling; OpenAI-style requests that omit them get these.
        params.sampling.temp = 0.2
        params.sampling.top_p = 0.9
        try:
            server = xllamacpp.Server(params)
        except RuntimeError as exc:
            raise ProviderError(
                f"llama.cpp could not load {str(model_path)!r} ({exc}); "
                "see where it comes from with `acagent models list`; "
                "`acagent models pull smollm2-135m --force` downloads a verified copy into the cache"
            ) from exc
        address = str(server.listening_address).rstrip("/")
        if not _wait_healthy(address, timeout_s=_HEALTH_TIMEOUT_S):
            _UNSTOPPABLE.append(server)  # destroying it now could hang (see _wait_healthy)
            raise ProviderError(f"the local llama.cpp server at {address} did not become healthy")
        self._server, self._address = server, address
        _register_atexit(self)
        return self.base_url

    def stop(self, *, timeout_s: float = 10.0) -> bool:
        """Stop listening, end generation and free the model.

        xllamacpp's destructor joins the server loop; it runs in a daemon thread bounded by
        ``timeout_s`` seconds, so a stuck stop can never hang the caller or interpreter exit.

        Returns:
            True if the server stopped within ``timeout_s``.
        """
        holder = [self._server]
        self._server, self._address = None, None
        if holder[0] is None:
            return True
        # The thread drops the last reference, so ~Server runs there, not here.
        thread = threading.Thread(target=holder.clear, name="acagent-local-stop", daemon=True)
        thread.start()
        thread.join(timeout_s)
        return not thread.is_alive()
