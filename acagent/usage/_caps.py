"""Caps on spend, tokens and turns: per session, per day, per instance.

Configuration (``$ACAGENT_HOME/config.toml``)::

    [limits]
    session_usd = 5.0        # per session (also session_tokens, session_turns)
    daily_usd = 20.0         # across all sessions of this ACAGENT_HOME, local calendar day
    max_sessions = 8         # per instance: concurrently running turns (429 concurrency_cap)
    max_llm_calls = 4        # per instance: concurrent provider requests

A session can carry its own ``session_*`` caps (``acagent run --max-usd 2``, ``POST
/v1/sessions {"limits": {...}}``); they replace the config values for that session only and are
stored in the journal, so a restart keeps them.

The check (:func:`check_budget`) runs before every LLM call against what the journal already
records (the ``usage`` table, written in the same commit as each ``usage`` event) plus the
estimated cost of the call about to be made. Nothing is counted only in memory: a crash and a
restart keep the spend. See docs/limits.md for the estimate and the unpriced-model policy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from acagent._value import Frozen, init_fields
from acagent.errors import BudgetExceeded

__all__ = ["SESSION_CAPS", "CallEstimate", "Limits", "check_budget"]

SESSION_CAPS = ("session_usd", "session_tokens", "session_turns")
"""Caps a single session may override."""


class Limits(BaseModel):
    """The ``[limits]`` table; ``None`` = no cap."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # inf/nan caps: ConfigError

    session_usd: float | None = Field(default=None, ge=0)
    session_tokens: int | None = Field(default=None, ge=0)
    session_turns: int | None = Field(default=None, ge=0)
    daily_usd: float | None = Field(default=None, ge=0)
    max_sessions: int | None = Field(default=None, ge=1)
    """Concurrently running turns in one process; replaces the top-level ``max_sessions``."""
    max_llm_calls: int | None = Field(default=None, ge=1)
    """Concurrent provider requests in one process."""
    estimated_output_tokens: int = Field(default=1024, ge=0)
    """Output tokens assumed for the call about to be made (its true size is not known yet)."""
    unpriced: Literal["refuse", "allow"] = "refuse"
    """A USD cap with a model of unknown price: refuse the call (default) or let it run uncounted."""

    def for_session(self, own: Mapping[str, Any] | None) -> Limits:
        """These limits with a session's own ``session_*`` caps applied.

        Raises:
            ValueError: ``own`` names a key that is not a session cap.
        """
        if not own:
            return self
        bad = sorted(set(own) - set(SESSION_CAPS))
        if bad:
            raise ValueError(f"a session can only set {', '.join(SESSION_CAPS)} (got {', '.join(bad)})")
        return self.model_copy(update=dict(Limits.model_validate(dict(own)).model_dump(include=set(own))))

    @property
    def has_usd_cap(self) -> bool:
        """True when a USD cap applies (session or daily)."""
        return self.session_usd is not None or self.daily_usd is not None


@dataclass(init=False, repr=False, eq=False)
class CallEstimate(Frozen):
    """What the next LLM call is expected to cost: tokens and USD (None = price unknown).

    (A frozen dataclass with its ``__init__`` written out: :mod:`acagent._value`.)"""

    tokens: int
    cost_usd: float | None

    def __init__(self, tokens: int, cost_usd: float | None) -> None:
        init_fields(self, tokens=tokens, cost_usd=cost_usd)


def _exceeded(
    scope: str, cap: str, unit: str, limit: float, used: float, model: str | None = None
) -> BudgetExceeded:
    # Format only this unit: int() of a float cap (e.g. a USD one) must never be evaluated.
    what = f"${limit:.2f}" if unit == "usd" else f"{int(limit)} {unit}"
    shown = f"${used:.4f}" if unit == "usd" else f"{int(used)} {unit}"
    label = "today's" if scope == "daily" else "this session's"
    message = f"{label} limit of {what} is reached ({shown} used; [limits] {cap})"
    detail: dict[str, Any] = {
        "scope": scope,
        "limit": limit,
        "used": round(used, 6),
        "unit": unit,
        "cap": cap,
    }
    if model is not None:
        detail["reason"] = "price_unknown"
        detail["model"] = model
        message = (
            f"the price of {model} is unknown, so {label} USD limit ({what}) cannot be kept: "
            f'set [pricing."{model}"] rates or [limits] unpriced = "allow"'
        )
    return BudgetExceeded(message, detail=detail)


def check_budget(
    limits: Limits,
    *,
    session: Any,
    daily: Any,
    turns: int,
    estimate: CallEstimate | None,
    model: str,
) -> BudgetExceeded | None:
    """The first cap the next call would break, or None.

    Args:
        limits: the session's effective limits (:meth:`Limits.for_session`).
        session: the session's :class:`~acagent.store.UsageTotals` so far.
        daily: today's totals over every session of this home.
        turns: turns started in the session, the current one included.
        estimate: the next call's estimate; None checks what is already spent only (at turn start).
        model: the model id of the next call (named in the price-unknown error).
    """
    est_cost = 0.0 if estimate is None else (estimate.cost_usd or 0.0)
    est_tokens = 0 if estimate is None else estimate.tokens
    if limits.session_turns is not None and turns > limits.session_turns:
        return _exceeded("session", "session_turns", "turns", limits.session_turns, turns - 1)
    if limits.session_tokens is not None and session.total_tokens + est_tokens > limits.session_tokens:
        return _exceeded("session", "session_tokens", "tokens", limits.session_tokens, session.total_tokens)
    unpriced = estimate is not None and estimate.cost_usd is None
    for scope, cap, value, totals in (
        ("session", "session_usd", limits.session_usd, session),
        ("daily", "daily_usd", limits.daily_usd, daily),
    ):
        if value is None:
            continue
        if unpriced and limits.unpriced == "refuse":
            return _exceeded(scope, cap, "usd", value, totals.cost_usd, model=model)
        if totals.cost_usd + est_cost > value or (estimate is None and totals.cost_usd >= value):
            return _exceeded(scope, cap, "usd", value, totals.cost_usd)
    return None
