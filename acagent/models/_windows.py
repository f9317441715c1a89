"""Context window and output limit of each model, in tokens.

Known models are listed below by name prefix (the longest matching prefix wins); config adds or
overrides per model id::

    [models."openai:my-model"]
    context_window = 128000
    max_output_tokens = 16384

A model that is neither listed nor configured gets :data:`UNKNOWN_WINDOW` with ``known=False``:
a request past that size logs one warning, and such a model is compacted only when the provider
refuses a request as too long (never on a guessed threshold, which would pay for summaries the
model may not need).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["UNKNOWN_WINDOW", "ModelWindow", "model_window", "warn_unknown"]

log = logging.getLogger("acagent.models")

UNKNOWN_WINDOW = 32_768
"""Context window assumed for a model of unknown size, in tokens."""

# (provider, name prefix) → (context window, max output tokens). Sources: the providers' model
# pages (platform.openai.com/docs/models, docs.anthropic.com/en/docs/about-claude/models).
_KNOWN: dict[tuple[str, str], tuple[int, int]] = {
    ("openai", "gpt-5"): (400_000, 128_000),
    ("openai", "gpt-4.1"): (1_047_576, 32_768),
    ("openai", "gpt-4o"): (128_000, 16_384),
    ("openai", "gpt-4-turbo"): (128_000, 4_096),
    ("openai", "gpt-4"): (8_192, 8_192),
    ("openai", "gpt-3.5-turbo"): (16_385, 4_096),
    ("openai", "o1"): (200_000, 100_000),
    ("openai", "o3"): (200_000, 100_000),
    ("openai", "o4-mini"): (200_000, 100_000),
    ("anthropic", "claude-opus-4"): (200_000, 32_000),
    ("anthropic", "claude-sonnet-4"): (200_000, 64_000),
    ("anthropic", "claude-haiku-4"): (200_000, 64_000),
    ("anthropic", "claude-3-7-sonnet"): (200_000, 64_000),
    ("anthropic", "claude-3-5"): (200_000, 8_192),
    ("anthropic", "claude-3"): (200_000, 4_096),
    ("local", "smollm2"): (4_096, 1_024),
}

_warned: set[str] = set()


def warn_unknown(model_id: str) -> None:
    """Log, once per process and model, that the window of ``model_id`` is assumed."""
    if model_id not in _warned:
        _warned.add(model_id)
        log.warning(
            "the context window of %s is unknown (assumed %d tokens): its context is compacted only "
            "if the provider refuses a request as too long; set [models.%r] context_window",
            model_id,
            UNKNOWN_WINDOW,
            model_id,
        )


@dataclass(frozen=True)
class ModelWindow:
    """Token limits of one model; ``known`` is False when :data:`UNKNOWN_WINDOW` was assumed."""

    context_window: int
    max_output_tokens: int
    known: bool = True


def model_window(model_id: str, overrides: Mapping[str, Mapping[str, Any]] | None = None) -> ModelWindow:
    """The limits of ``model_id`` (``PROVIDER:NAME``): config override, known table, or the default.

    A model of unknown window gets :data:`UNKNOWN_WINDOW` with ``known=False``; callers warn
    (:func:`warn_unknown`) when it matters, i.e. when a request reaches that assumed size.
    """
    over = (overrides or {}).get(model_id) or {}
    provider, _, name = model_id.partition(":")
    best: tuple[int, int] | None = None
    best_len = -1
    for (prov, prefix), limits in _KNOWN.items():
        if prov == provider and name.startswith(prefix) and len(prefix) > best_len:
            best, best_len = limits, len(prefix)
    if "context_window" in over:
        window = int(over["context_window"])
        output = int(over.get("max_output_tokens", best[1] if best else min(8_192, window // 4)))
        return ModelWindow(window, output)
    if best is not None:
        return ModelWindow(best[0], int(over.get("max_output_tokens", best[1])))
    return ModelWindow(UNKNOWN_WINDOW, int(over.get("max_output_tokens", 4_096)), known=False)
