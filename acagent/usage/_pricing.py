"""Cost of an LLM call in USD, from a maintained pricing table.

Prices come from, highest first:

1. the config file: ``[pricing."openai:NAME"]`` with ``input_usd_per_mtok``,
   ``output_usd_per_mtok`` and optionally ``cached_input_usd_per_mtok`` (USD per million tokens);
2. the ``genai-prices`` package (https://github.com/pydantic/genai-prices), a maintained table
   of provider prices, looked up by provider id and model name (imported lazily, on first use);
3. models that run on this machine (``local:``, ``ollama:``) cost 0 USD by definition.

Anything else has an **unknown** price: its cost is ``None``, never 0, and caps in USD treat the
call as unpriced (see docs/limits.md).
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from acagent._value import Frozen, init_fields

__all__ = ["FREE_PROVIDERS", "PriceBook", "Rates", "TokenCounts"]

log = logging.getLogger("acagent.usage")

FREE_PROVIDERS = frozenset({"local", "ollama"})
"""Providers whose models run on this machine: their calls cost nothing."""

_GENAI_PROVIDER = {"openai": "openai", "anthropic": "anthropic"}


@dataclass(init=False, repr=False, eq=False)
class TokenCounts(Frozen):
    """Tokens of one call. ``input_tokens`` includes ``cached_input_tokens``.

    (A frozen dataclass with its ``__init__`` written out: :mod:`acagent._value`.)"""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0

    def __init__(
        self,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cached_input_tokens: int = 0,
        reasoning_tokens: int = 0,
    ) -> None:
        init_fields(
            self,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cached_input_tokens=cached_input_tokens,
            reasoning_tokens=reasoning_tokens,
        )


@dataclass(init=False, repr=False, eq=False)
class Rates(Frozen):
    """USD per million tokens; ``cached_input`` None means the input rate applies."""

    input: float
    output: float
    cached_input: float | None = None
    source: str = "config"

    def __init__(
        self, input: float, output: float, cached_input: float | None = None, source: str = "config"
    ) -> None:
        init_fields(self, input=input, output=output, cached_input=cached_input, source=source)

    def cost_usd(self, tokens: TokenCounts) -> float:
        """The cost of ``tokens`` at these rates, in USD."""
        cached = min(tokens.cached_input_tokens, tokens.input_tokens)
        cached_rate = self.input if self.cached_input is None else self.cached_input
        return (
            (tokens.input_tokens - cached) * self.input
            + cached * cached_rate
            + tokens.output_tokens * self.output
        ) / 1_000_000


class PriceBook:
    """Look up :class:`Rates` per model id (``PROVIDER:NAME``) and price calls.

    Args:
        overrides: config ``[pricing]`` table: model id → mapping with ``input_usd_per_mtok``,
            ``output_usd_per_mtok`` and optional ``cached_input_usd_per_mtok``.

    Raises:
        ValueError: an override lacks a rate or has a negative one.
    """

    def __init__(self, overrides: Mapping[str, Any] | None = None) -> None:
        self._overrides: dict[str, Rates] = {}
        for model_id, entry in (overrides or {}).items():
            # Settings holds validated models (acagent.settings.PriceOverride); tests pass mappings.
            spec = entry if isinstance(entry, Mapping) else entry.model_dump(exclude_none=True)
            try:
                rates = Rates(
                    input=float(spec["input_usd_per_mtok"]),
                    output=float(spec["output_usd_per_mtok"]),
                    cached_input=(
                        float(spec["cached_input_usd_per_mtok"])
                        if "cached_input_usd_per_mtok" in spec
                        else None
                    ),
                )
            except (KeyError, TypeError, ValueError) as exc:
                raise ValueError(
                    f"[pricing.{model_id!r}] needs input_usd_per_mtok and output_usd_per_mtok numbers ({exc})"
                ) from None
            values = (rates.input, rates.output, rates.cached_input or 0.0)
            if not all(math.isfinite(v) and v >= 0 for v in values):
                raise ValueError(f"[pricing.{model_id!r}] rates must be finite and not negative")
            self._overrides[model_id] = rates
        self._cache: dict[str, Rates | None] = {}
        self._lock = threading.Lock()

    def rates(self, model_id: str) -> Rates | None:
        """The rates of ``model_id``, or None when its price is unknown.

        May import ``genai_prices`` on first use (~0.3 s): call it off the event loop
        (``anyio.to_thread.run_sync``) the first time, or call :meth:`preload`.
        """
        if model_id in self._overrides:
            return self._overrides[model_id]
        with self._lock:
            if model_id in self._cache:
                return self._cache[model_id]
            rates = self._lookup(model_id)
            self._cache[model_id] = rates
            return rates

    def cached(self, model_id: str) -> bool:
        """True when :meth:`rates` answers without any import or lookup."""
        return model_id in self._overrides or model_id in self._cache

    def cost_usd(self, model_id: str, tokens: TokenCounts) -> float | None:
        """The cost of one call in USD, or None when the model's price is unknown."""
        rates = self.rates(model_id)
        return None if rates is None else rates.cost_usd(tokens)

    def price(
        self, model_id: str, input_tokens: int, cached_input_tokens: int, output_tokens: int
    ) -> float | None:
        """:meth:`cost_usd` with plain numbers (the journal's late-pricing callback)."""
        return self.cost_usd(model_id, TokenCounts(input_tokens, output_tokens, cached_input_tokens))

    @staticmethod
    def _lookup(model_id: str) -> Rates | None:
        provider, _, name = model_id.partition(":")
        if provider in FREE_PROVIDERS:
            return Rates(0.0, 0.0, 0.0, source="local")
        genai_provider = _GENAI_PROVIDER.get(provider)
        if genai_provider is None or not name:
            return None
        try:
            from genai_prices import Usage, calc_price
        except ImportError:  # the package is a dependency; a broken install is not a crash
            log.warning("genai-prices is not importable: the cost of %s is unknown", model_id)
            return None
        # Rates at a small request (1,000 tokens), i.e. the base tier of tiered prices such as
        # Anthropic's long-context tier; per-million = price of 1,000 tokens x 1,000.
        k = 1000
        try:
            base = calc_price(
                Usage(input_tokens=k, output_tokens=k), model_ref=name, provider_id=genai_provider
            )
            cached = calc_price(
                Usage(input_tokens=k, cache_read_tokens=k), model_ref=name, provider_id=genai_provider
            )
        except LookupError:
            return None
        return Rates(
            input=float(base.input_price) * k,
            output=float(base.output_price) * k,
            cached_input=float(cached.input_price) * k,
            source="genai-prices",
        )
