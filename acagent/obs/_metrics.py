"""Prometheus metrics of one acagent process (the daemon exposes them at ``GET /metrics``).

Counters are process-local, as Prometheus expects (a restart resets them; ``rate()`` copes): the
daemon turns them on with :func:`enable_metrics`; everywhere else :func:`metrics` returns a
recorder whose methods do nothing, so ``acagent run`` never imports ``prometheus_client``.

Names follow the Prometheus conventions (https://prometheus.io/docs/practices/naming/): base
units (seconds, USD), ``_total`` for counters. Label values are bounded: provider ids, tool
names, outcomes, scopes — never session ids. A retry or a takeover is the alert: any increase of
``acagent_llm_retries_total`` or ``acagent_lease_takeovers_total`` means something went wrong.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

__all__ = ["NullRecorder", "PrometheusRecorder", "enable_metrics", "metrics", "provider_of"]

_DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)


class NullRecorder:
    """The recorder when metrics are off: every method is a no-op."""

    enabled = False

    def llm_request(self, provider: str, outcome: str, duration_s: float) -> None:
        """One finished provider request (``outcome``: ``ok``, ``error``, ``cancelled``)."""

    def llm_retry(self, provider: str, reason: str) -> None:
        """An LLM attempt that will be retried (``reason`` as in the ``llm.retry`` event)."""

    def usage(self, provider: str, model: str, tokens: Mapping[str, int], cost_usd: float | None) -> None:
        """Tokens by kind (``input``, ``cached_input``, ``output``, ``reasoning``) and cost of one call."""

    def tool_call(self, tool: str, outcome: str) -> None:
        """A tool call reached a terminal state (``ok``, ``error``, ``denied``, ``interrupted``, …)."""

    def tool_interrupted(self, tool: str) -> None:
        """A running tool was interrupted (cancel, crash recovery, timeout)."""

    def bus_dropped(self, count: int = 1) -> None:
        """Events dropped for a subscriber whose queue was full."""

    def client_evicted(self) -> None:
        """A stalled stream client was evicted."""

    def lease_takeover(self) -> None:
        """A session lease was taken over from another (dead or expired) holder."""

    def turn_finished(self, outcome: str, duration_s: float) -> None:
        """A turn ended (``completed``, ``interrupted``, ``failed``)."""

    def budget_exceeded(self, scope: str) -> None:
        """A cap stopped a turn or refused a message (``scope``: ``session``, ``daily``)."""


class PrometheusRecorder(NullRecorder):
    """Metrics in a private ``prometheus_client.CollectorRegistry`` (not the global one)."""

    enabled = True

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics

        disable_created_metrics()  # type: ignore[no-untyped-call] # the *_created series double the output and no dashboard reads them

        r = self.registry = CollectorRegistry(auto_describe=True)
        self._llm = Counter(
            "acagent_llm_requests",
            "LLM requests by provider and outcome",
            ["provider", "outcome"],
            registry=r,
        )
        self._retries = Counter(
            "acagent_llm_retries",
            "LLM attempts retried, by provider and reason",
            ["provider", "reason"],
            registry=r,
        )
        self._tokens = Counter(
            "acagent_tokens", "Tokens by provider, model and kind", ["provider", "model", "kind"], registry=r
        )
        self._cost = Counter(
            "acagent_cost_usd",
            "Cost of LLM calls with a known price, in USD",
            ["provider", "model"],
            registry=r,
        )
        self._unpriced = Counter(
            "acagent_unpriced_llm_calls",
            "LLM calls whose price is unknown",
            ["provider", "model"],
            registry=r,
        )
        self._tools = Counter(
            "acagent_tool_calls", "Tool calls by tool and outcome", ["tool", "outcome"], registry=r
        )
        self._interrupted = Counter(
            "acagent_tools_interrupted", "Running tools interrupted", ["tool"], registry=r
        )
        self._dropped = Counter(
            "acagent_bus_dropped_events", "Events dropped for full subscriber queues", registry=r
        )
        self._evicted = Counter(
            "acagent_stalled_clients_evicted", "Stalled stream clients evicted", registry=r
        )
        self._takeovers = Counter(
            "acagent_lease_takeovers", "Session leases taken over from another holder", registry=r
        )
        self._budget = Counter(
            "acagent_budget_exceeded", "Turns stopped or messages refused by a cap", ["scope"], registry=r
        )
        self._sessions = Gauge(
            "acagent_sessions", "Sessions in the journal by status", ["status"], registry=r
        )
        self._turn_s = Histogram(
            "acagent_turn_duration_seconds",
            "Turn duration",
            ["outcome"],
            buckets=_DURATION_BUCKETS,
            registry=r,
        )
        self._llm_s = Histogram(
            "acagent_llm_call_duration_seconds",
            "LLM call duration (request to last byte)",
            ["provider", "outcome"],
            buckets=_DURATION_BUCKETS,
            registry=r,
        )
        self._lock = threading.Lock()

    def llm_request(self, provider: str, outcome: str, duration_s: float) -> None:
        self._llm.labels(provider, outcome).inc()
        self._llm_s.labels(provider, outcome).observe(max(0.0, duration_s))

    def llm_retry(self, provider: str, reason: str) -> None:
        self._retries.labels(provider, reason).inc()

    def usage(self, provider: str, model: str, tokens: Mapping[str, int], cost_usd: float | None) -> None:
        for kind, n in tokens.items():
            if n:
                self._tokens.labels(provider, model, kind).inc(n)
        if cost_usd is None:
            self._unpriced.labels(provider, model).inc()
        elif cost_usd > 0:
            self._cost.labels(provider, model).inc(cost_usd)

    def tool_call(self, tool: str, outcome: str) -> None:
        self._tools.labels(tool, outcome).inc()

    def tool_interrupted(self, tool: str) -> None:
        self._interrupted.labels(tool).inc()

    def bus_dropped(self, count: int = 1) -> None:
        self._dropped.inc(count)

    def client_evicted(self) -> None:
        self._evicted.inc()

    def lease_takeover(self) -> None:
        self._takeovers.inc()

    def turn_finished(self, outcome: str, duration_s: float) -> None:
        self._turn_s.labels(outcome).observe(max(0.0, duration_s))

    def budget_exceeded(self, scope: str) -> None:
        self._budget.labels(scope).inc()

    def render(self, sessions_by_status: Mapping[str, int] | None = None) -> tuple[bytes, str]:
        """The exposition text and its content type; ``sessions_by_status`` refreshes the gauge first."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        with self._lock:
            if sessions_by_status is not None:
                for status, n in sessions_by_status.items():
                    self._sessions.labels(status).set(n)
            return generate_latest(self.registry), CONTENT_TYPE_LATEST


_current: NullRecorder = NullRecorder()


def metrics() -> NullRecorder:
    """The process's recorder (a no-op one until :func:`enable_metrics`)."""
    return _current


def enable_metrics() -> PrometheusRecorder:
    """Turn metrics on for this process (idempotent) and return the recorder."""
    global _current
    if not isinstance(_current, PrometheusRecorder):
        _current = PrometheusRecorder()
    return _current


def _reset_for_tests() -> None:
    global _current
    _current = NullRecorder()


def provider_of(model_id: str | None) -> str:
    """The provider id of ``PROVIDER:NAME`` (``unknown`` when absent)."""
    return (model_id or "unknown").partition(":")[0] or "unknown"
