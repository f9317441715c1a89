"""Provider lookup: ``PROVIDER:MODEL`` ids, entry points, and default model resolution.

Built-in providers register through the same ``acagent.providers`` entry-point group that
third-party packages use (declared in ``pyproject.toml``), as llm's plugins do, and a built-in
id resolves from the built-in table without reading package metadata (the table also serves a
source tree without metadata); other ids are looked up in the entry points. A
factory is ``(model: str, settings: Settings) -> Provider`` and is imported only when chosen,
so importing :mod:`acagent.providers` never imports a provider SDK.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from acagent.errors import ConfigError

if TYPE_CHECKING:
    from acagent.providers._base import Provider
    from acagent.settings import Settings

__all__ = [
    "ENTRY_POINT_GROUP",
    "ProviderFactory",
    "available_providers",
    "create_provider",
    "resolve_model_id",
]

ENTRY_POINT_GROUP = "acagent.providers"

ProviderFactory = Callable[[str, "Settings"], "Provider"]
"""``(model, settings) -> Provider``."""

_BUILTIN: dict[str, str] = {
    "openai": "acagent.providers._openai:create_provider",
    "anthropic": "acagent.providers._anthropic:create_provider",
    "ollama": "acagent.providers._openai:create_ollama_provider",
    "local": "acagent.providers._local:create_provider",
}
"""Fallback when entry points are not installed: provider id → ``module:function``."""

DEFAULT_ANTHROPIC_MODEL = "anthropic:claude-sonnet-4-5"
DEFAULT_OPENAI_MODEL = "openai:gpt-4o-mini"
DEFAULT_LOCAL_MODEL = "local:smollm2-135m"


def entry_points(group: str) -> Any:
    """``importlib.metadata.entry_points(group=group)``, imported on first use (importing
    ``importlib.metadata`` and scanning the distributions cost a one-shot ``run`` 40-70 ms)."""
    from importlib.metadata import entry_points as scan

    return scan(group=group)


def _targets() -> dict[str, str]:
    """Provider id → ``module:function``: the built-in table overlaid with entry points."""
    targets = dict(_BUILTIN)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        targets[ep.name] = ep.value
    return targets


def available_providers() -> list[str]:
    """Sorted provider ids that :func:`create_provider` accepts."""
    return sorted(_targets())


def _load(provider: str, target: str) -> ProviderFactory:
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
        factory: ProviderFactory = getattr(module, attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(
            f"provider {provider!r} is not available ({target}: {exc}); install its extra, e.g. 'acagent[{provider}]'"
        ) from exc
    return factory


def create_provider(model_id: str, settings: Settings) -> Provider:
    """Build the provider for ``model_id``.

    Args:
        model_id: ``PROVIDER:MODEL`` (``openai:gpt-4o-mini``, ``anthropic:claude-sonnet-4-5``,
            ``ollama:llama3.2``, ``local:smollm2-135m``); only the first ``:`` splits.
        settings: endpoints, keys and timeouts.

    Raises:
        ConfigError: a malformed id, an unknown provider, a provider that cannot be imported,
            or the provider's own configuration errors (missing key).
    """
    provider, model, target = _parse(model_id)
    if target is None:
        raise ConfigError(model_id_problem(model_id) or model_id, detail={"model": model_id})
    return _load(provider, target)(model, settings)


def _parse(model_id: str) -> tuple[str, str, str | None]:
    """``(provider, model, "module:function" or None when malformed or unknown)``."""
    provider, sep, model = model_id.partition(":")
    provider = provider.strip().lower()
    model = model.strip()
    if not sep or not provider or not model:
        return provider, model, None
    # A built-in id names the built-in adapter (entry points add providers; they are scanned
    # only for another id, so the usual lookup reads no package metadata).
    return provider, model, _BUILTIN.get(provider) or _targets().get(provider)


def provider_target(model_id: str) -> str | None:
    """The ``module:function`` that creates ``model_id``'s provider (None: malformed or unknown).

    Entry points are scanned only for an id that is not built in."""
    return _parse(model_id)[2]


def model_id_problem(model_id: str) -> str | None:
    """Why ``model_id`` names no provider (None when it does), without importing one.

    The settings loader checks a configured ``model`` with it, so a bad id is a config error
    naming its file and line (or variable) in every command, not a failure of the first turn.
    """
    if any(ch < " " or ch == "\x7f" for ch in model_id):  # it is printed, logged, sent as a header
        return f"invalid model id {model_id!r}: it contains control characters"
    provider, model, target = _parse(model_id)
    if target is not None:
        return None
    if not provider or not model or ":" not in model_id:
        return f"invalid model id {model_id!r}: expected PROVIDER:MODEL, e.g. {DEFAULT_OPENAI_MODEL!r}"
    return f"unknown provider {provider!r} in model id {model_id!r}; known: {', '.join(sorted(_targets()))}"


def resolve_model_id(settings: Settings) -> str:
    """The model id to use when the user named none.

    Order: ``settings.model`` (flag, ``ACAGENT_MODEL``, or the config file, already merged by
    :func:`~acagent.settings.load_settings`) → ``anthropic:claude-sonnet-4-5`` when an Anthropic
    key is set → ``openai:gpt-4o-mini`` when an OpenAI key or an OpenAI/``--base-url`` base URL
    is set → ``local:smollm2-135m``.
    """
    if settings.model:
        return settings.model
    p = settings.providers
    if p.anthropic_api_key:
        return DEFAULT_ANTHROPIC_MODEL
    if p.openai_api_key or p.openai_base_url or p.base_url:
        return DEFAULT_OPENAI_MODEL
    return DEFAULT_LOCAL_MODEL
