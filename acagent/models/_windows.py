"""Context window and output limit of each model, in tokens.

Known models are listed below by name prefix (the longest matching prefix wins); config adds or
overrides per model id::

    [models."openai:my-model"]
    context_window = 128000
    max_output_tokens = 16384

A model that is neither listed nor configured gets :data:`UNKNOWN_WINDOW` with ``known=False``,
a conservative default: its context is compacted against that assumed window like a known one,
and the first time that happens in a session the user is warned (an ``error`` event with code
``context_window_unknown``, the session's ``warnings``, one log line per process and model),
naming the setting that tells acagent the real window. A provider that still refuses a request
as too long takes the overflow path (one compaction, one retry).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from acagent._value import Frozen, init_fields

__all__ = [
    "UNKNOWN_WINDOW",
    "UNKNOWN_WINDOW_CODE",
    "ModelWindow",
    "model_window",
    "unknown_window_message",
    "warn_unknown",
]

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

UNKNOWN_WINDOW_CODE = "context_window_unknown"
"""``code`` of the warning event about an assumed window."""

_warned: set[str] = set()


def unknown_window_message(model_id: str, compact_at: float) -> str:
    """The one-line warning about the assumed window of ``model_id`` (``compact_at``: a fraction)."""
    return (
        f"the context window of {model_id} is unknown: acagent assumes {UNKNOWN_WINDOW:,} tokens and "
        f'compacts the context at {compact_at:.0%} of that; set [models."{model_id}"] context_window '
        "in config.toml to use the model's real window"
    )


def warn_unknown(model_id: str, compact_at: float = 0.8) -> None:
    """Log :func:`unknown_window_message`, once per process and model."""
    if model_id not in _warned:
        _warned.add(model_id)
        log.warning("%s", unknown_window_message(model_id, compact_at))


@dataclass(init=False, repr=False, eq=False)
class ModelWindow(Frozen):
    """Token limits of one model; ``known`` is False when :data:`UNKNOWN_WINDOW` was assumed.

    (A frozen dataclass with its ``__init__`` written out: :mod:`acagent._value`.)"""

    context_window: int
    max_output_tokens: int
    known: bool = True

    def __init__(self, context_window: int, max_output_tokens: int, known: bool = True) -> None:
        init_fields(self, context_window=context_window, max_output_tokens=max_output_tokens, known=known)


def model_window(model_id: str, overrides: Mapping[str, Mapping[Any, Any]] | None = None) -> ModelWindow:
    """The limits of ``model_id`` (``PROVIDER:NAME``): config override, known table, or the default.

    A model of unknown window gets :data:`UNKNOWN_WINDOW` with ``known=False``; the caller warns
    when it matters, i.e. when a request reaches the compaction threshold of that assumed size.
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
