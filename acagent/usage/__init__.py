"""Usage, cost and caps: pricing (:class:`PriceBook`), caps (:class:`Limits`, :func:`check_budget`)."""

from __future__ import annotations

from acagent.usage._caps import SESSION_CAPS, CallEstimate, Limits, check_budget
from acagent.usage._pricing import FREE_PROVIDERS, PriceBook, Rates, TokenCounts

__all__ = [
    "FREE_PROVIDERS",
    "SESSION_CAPS",
    "CallEstimate",
    "Limits",
    "PriceBook",
    "Rates",
    "TokenCounts",
    "check_budget",
]
