"""Cost caps and usage accounting around each LLM call (docs/limits.md).

One :class:`Budget` per registry (process): it owns the price book and the instance-wide limit
on concurrent provider requests (``[limits] max_llm_calls``). The loop calls

- :meth:`Budget.check` before every LLM call (with the call's estimated input tokens) and the
  runner calls it with no estimate before a turn starts: the first cap the call would break is
  returned as a :class:`~acagent.errors.BudgetExceeded` (nothing is counted only in memory:
  every figure comes from the journal's ``usage`` table);
- :meth:`Budget.record` when a call's usage is known: the journal op and the event fields
  (model, cached/reasoning tokens, cost), plus the metrics;
- :meth:`Budget.llm_slot` around the provider request.

With no cap configured and metrics off, a call costs one indexed query (the session's own caps)
and no pricing: the price table is not even imported.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.to_thread

from acagent.errors import BudgetExceeded
from acagent.obs import metrics, provider_of
from acagent.store import RecordUsage, UsageTotals, local_day
from acagent.usage import CallEstimate, Limits, PriceBook, TokenCounts, check_budget

__all__ = ["Budget", "budget_for", "usage_event"]

_BUDGETS: dict[int, tuple[Any, Budget]] = {}


class Budget:
    """Caps, pricing and the LLM-call limiter of one process.

    Args:
        settings: the process settings (``limits``, ``pricing``).
    """

    def __init__(self, settings: Any) -> None:
        self.limits: Limits = settings.limits
        self.prices = PriceBook(settings.pricing)
        self._slots: anyio.CapacityLimiter | None = None  # made on first use, inside the event loop

    async def _rates_ready(self, model: str) -> None:
        if not self.prices.cached(model):  # the first lookup may import the price table
            await anyio.to_thread.run_sync(self.prices.rates, model)

    async def effective_limits(self, journal: Any, session_id: str) -> Limits:
        """The config caps with the session's own ``session_*`` caps applied."""
        return self.limits_for(await journal.session_limits(session_id))

    def limits_for(self, own: dict[str, Any]) -> Limits:
        """The config caps with ``own`` (a session's ``session_limits``) applied."""
        try:
            return self.limits.for_session(own)
        except ValueError:  # written by a newer version: ignore unknown keys rather than fail
            return self.limits

    async def check(
        self,
        journal: Any,
        session_id: str,
        model: str,
        *,
        input_tokens: int | None,
        turn_starting: bool = False,
        limits: Limits | None = None,
    ) -> BudgetExceeded | None:
        """The first cap the next call (or the turn about to start) would break, or None.

        Args:
            input_tokens: estimated input tokens of the call; None checks spend only (turn start).
            turn_starting: count the turn about to start against ``session_turns``.
            limits: the :meth:`effective_limits` already read for this turn (None: read them).
        """
        if limits is None:
            limits = await self.effective_limits(journal, session_id)
        caps = (limits.session_usd, limits.session_tokens, limits.session_turns, limits.daily_usd)
        if all(c is None for c in caps):
            return None
        price = None
        if limits.has_usd_cap:
            await self._rates_ready(model)
            price = self.prices.price
        session = await journal.usage_totals(session_id=session_id, price=price)
        daily = (
            await journal.usage_totals(day=local_day(), price=price)
            if limits.daily_usd is not None
            else UsageTotals()
        )
        turns = 0
        if limits.session_turns is not None:
            turns = await journal.turns_started(session_id) + (1 if turn_starting else 0)
        estimate = None
        if input_tokens is not None:
            out = limits.estimated_output_tokens
            cost = self.prices.cost_usd(model, TokenCounts(input_tokens, out)) if limits.has_usd_cap else 0.0
            estimate = CallEstimate(input_tokens + out, cost)
        exceeded = check_budget(
            limits, session=session, daily=daily, turns=turns, estimate=estimate, model=model
        )
        if exceeded is not None:
            metrics().budget_exceeded(str(exceeded.detail["scope"]))
        return exceeded

    async def record(self, request_id: str, model: str, usage: Any) -> tuple[RecordUsage, dict[str, Any]]:
        """The journal op and the extra ``usage`` event fields for one call's usage.

        Args:
            usage: the provider's :class:`~acagent.providers._base.Usage` (``cached_input_tokens``
                and ``reasoning_tokens`` when the adapter reports them).

        The price is looked up now when a configured USD cap applies or metrics are on; otherwise
        the row is priced when it is read (``acagent usage``, caps), so a one-shot run never
        imports the price table.
        """
        tokens = TokenCounts(
            usage.input_tokens,
            usage.output_tokens,
            int(getattr(usage, "cached_input_tokens", 0) or 0),
            int(getattr(usage, "reasoning_tokens", 0) or 0),
        )
        cost = None
        if self.limits.has_usd_cap or metrics().enabled:
            await self._rates_ready(model)
            cost = self.prices.cost_usd(model, tokens)
        metrics().usage(
            provider_of(model),
            model,
            {
                "input": tokens.input_tokens,
                "cached_input": tokens.cached_input_tokens,
                "output": tokens.output_tokens,
                "reasoning": tokens.reasoning_tokens,
            },
            cost,
        )
        op = RecordUsage(
            request_id,
            model,
            tokens.input_tokens,
            tokens.output_tokens,
            cached_input_tokens=tokens.cached_input_tokens,
            reasoning_tokens=tokens.reasoning_tokens,
            cost_usd=cost,
        )
        fields: dict[str, Any] = {"model": model}
        if tokens.cached_input_tokens:
            fields["cached_input_tokens"] = tokens.cached_input_tokens
        if tokens.reasoning_tokens:
            fields["reasoning_tokens"] = tokens.reasoning_tokens
        if cost is not None:
            fields["cost_usd"] = round(cost, 8)
        return op, fields

    @contextlib.asynccontextmanager
    async def llm_slot(self) -> AsyncIterator[None]:
        """Hold one of the process's ``max_llm_calls`` provider-request slots (no limit: no-op)."""
        n = self.limits.max_llm_calls
        if not n:
            yield
            return
        if self._slots is None:
            self._slots = anyio.CapacityLimiter(n)
        async with self._slots:
            yield

    def raise_if(self, exceeded: BudgetExceeded | None) -> None:
        """Raise ``exceeded`` when set (the turn-start check of the runner)."""
        if exceeded is not None:
            raise exceeded


def budget_for(settings: Any) -> Budget:
    """The :class:`Budget` of ``settings`` (one per settings object, i.e. per process/registry)."""
    hit = _BUDGETS.get(id(settings))
    if hit is not None and hit[0] is settings:
        return hit[1]
    if len(_BUDGETS) > 64:  # tests build many settings objects; a process has one
        _BUDGETS.clear()
    budget = Budget(settings)
    _BUDGETS[id(settings)] = (settings, budget)
    return budget


def usage_event(turn_id: str, usage: Any, **fields: Any) -> tuple[str, dict[str, Any]]:
    """The ``usage`` event of one call: its tokens plus ``fields`` (from :meth:`Budget.record`)."""
    from acagent.events import make_payload

    return (
        "usage",
        make_payload(
            "usage",
            turn_id=turn_id,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            total_tokens=usage.input_tokens + usage.output_tokens,
            **fields,
        ),
    )
