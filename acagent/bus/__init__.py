"""The per-session event bus."""

from __future__ import annotations

from acagent.bus._bus import EVICT_REASON, RunnerEventBus, Subscription

__all__ = ["EVICT_REASON", "RunnerEventBus", "Subscription"]
