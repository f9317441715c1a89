"""Pins: a runner that a caller is using is not hibernated meanwhile.

A hibernation pass (every 30 s in the daemon, or ``POST /v1/debug/hibernate``) drops each idle
runner without attachers and closes its bus. A message, a cancel, a compaction or a stream
attach first gets the session's runner and then awaits (the transcript's repair, the journal's
replay, pending approvals) before the runner is busy or subscribed; a pass landing in that gap
closed the runner under it: the message was a 500 (``bus … is closed``) and the attach was
closed with 1012, "daemon stopping" (tester F11, F12). :func:`pinned` hands out a runner that is
still the registry's and counts it as in use (``InProcessRunner.pins``) until the caller is done;
``SessionRegistry.hibernate_idle`` skips pinned runners.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from acagent.runner._registry import SessionRegistry
    from acagent.runner._runner import InProcessRunner

__all__ = ["pinned"]


@asynccontextmanager
async def pinned(
    registry: SessionRegistry, session_id: str, *, attach: bool = False
) -> AsyncIterator[InProcessRunner]:
    """The session's runner (``attach``: :meth:`~SessionRegistry.attach_runner`, else
    :meth:`~SessionRegistry.get_runner`), kept from hibernating until the block ends.

    A runner a pass dropped while it was being got (its awaits) is got again: the one handed out
    is the registry's, and it is pinned with no await in between.

    Raises:
        SessionNotFound: unknown id.
    """
    while True:
        runner = await (registry.attach_runner(session_id) if attach else registry.get_runner(session_id))
        if registry.runners.get(session_id) is runner:
            break
    runner.pins += 1
    try:
        yield runner
    finally:
        runner.pins -= 1
