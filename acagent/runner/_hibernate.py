"""Hibernation: the registry drops idle runners from memory (a mixin of ``SessionRegistry``).

A runner is dropped when it is idle, unpinned (``runner/_pins.py``) and has no subscriber but its
transcript writer. Dropping it takes time (its bus closes, its transcript pump drains, its writer
records the file's state): a runner asked for meanwhile waits until the old one is gone
(:meth:`Hibernation._hibernated`, called by ``attach_runner``), so one session never has two
runners, two pumps or two writers on its transcript at once (tester F11: the new runner reused the
old writer, which the pass then closed under it).
"""

from __future__ import annotations

import anyio

from acagent.errors import SessionNotFound
from acagent.runner._transcripts import TranscriptKeeper

__all__ = ["Hibernation"]


class Hibernation(TranscriptKeeper):
    """Mixin of :class:`~acagent.runner._registry.SessionRegistry`: :meth:`hibernate_idle`."""

    _transcript_started: set[str]
    runners_hibernated: int
    _closing: dict[str, anyio.Event]

    async def _hibernated(self, session_id: str) -> None:
        """Wait while a hibernation pass is still dropping the session's runner (at most ~5 s)."""
        while (closing := self._closing.get(session_id)) is not None:
            await closing.wait()

    async def hibernate_idle(self) -> int:
        """Drop idle, unpinned runners without subscribers from memory; returns how many.

        An idle runner whose session was removed meanwhile (``acagent sessions rm`` writes the
        journal directly, even while a daemon serves it) first ends its streams with
        :class:`SessionNotFound`, so their clients learn it instead of waiting forever (F122).
        """
        dropped = 0
        removed: set[str] = set()
        for sid, runner in list(self.runners.items()):
            if not runner.is_busy and len(runner.bus.subscribers) > 1:
                try:
                    await self.journal.get_session(sid)
                except SessionNotFound:
                    runner.bus.halt(SessionNotFound(f"session {sid} was removed (`acagent sessions rm`)"))
                    removed.add(sid)
        for sid, runner in list(self.runners.items()):
            # A removed session's streams were just halted: their pins are on their way out.
            pinned = runner.pins and sid not in removed
            if runner.is_busy or pinned or any(s.name != "transcript" for s in runner.bus.subscribers):
                continue
            # From here to the end of the drop, the session has no runner: attach_runner waits.
            self.runners.pop(sid, None)
            self._closing[sid] = closing = anyio.Event()
            try:
                self._transcript_started.discard(sid)
                await runner.aclose()
                done = self._pumps.pop(sid, None)
                if done is not None:
                    with anyio.move_on_after(5):
                        await done.wait()
                await self._close_transcript(sid)
                self.journal.forget_session(sid)
            finally:
                del self._closing[sid]
                closing.set()
            dropped += 1
        self.runners_hibernated += dropped
        return dropped
