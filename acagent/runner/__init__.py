"""Runners: the turn loop, the per-session runner and the session registry."""

from __future__ import annotations

from acagent.errors import SubscriberEvicted
from acagent.runner._context import ContextBuilder, build_context
from acagent.runner._loop import AgenticLoop
from acagent.runner._protocol import AgentRunner
from acagent.runner._registry import SessionRegistry, canonical_cwd
from acagent.runner._runner import InProcessRunner, RunnerState
from acagent.runner._turn import Turn
from acagent.runner._writer import CRASH_POINTS, SessionWriter, crash_point

__all__ = [
    "CRASH_POINTS",
    "AgentRunner",
    "AgenticLoop",
    "ContextBuilder",
    "InProcessRunner",
    "RunnerState",
    "SessionRegistry",
    "SessionWriter",
    "SubscriberEvicted",
    "Turn",
    "build_context",
    "canonical_cwd",
    "crash_point",
]
