"""SessionPorts: what one session is made of in this process, whatever runs its turns.

The journal, settings and row; the bus and the writer (the one path events take); the model
context; the tools and the approval policy; the provider (created on first use, off the event
loop). Plus the read side every caller needs: :meth:`SessionPorts.load`,
:meth:`SessionPorts.snapshot` and :meth:`SessionPorts.subscribe`. The turn lifecycle lives in
:class:`~acagent.runner._runner.InProcessRunner`, which extends this class.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

from anyio.abc import TaskGroup

from acagent.bus import RunnerEventBus
from acagent.events import Event
from acagent.messages import forget_history
from acagent.providers._base import Provider
from acagent.runner._context import ContextBuilder
from acagent.runner._sdk import create_off_loop
from acagent.runner._subscribe import replay_then_live
from acagent.runner._writer import SessionWriter
from acagent.settings import Settings
from acagent.store import Journal, SessionRow
from acagent.store._payload import damaged
from acagent.tools import ApprovalPolicy, Tool, default_tools

__all__ = ["DEFAULT_SYSTEM_PROMPT", "SessionPorts"]

DEFAULT_SYSTEM_PROMPT = (
    "You are acagent, a careful coding assistant. The user's workspace is {cwd}. Use the tools to "
    "inspect and change files and run commands inside the workspace; keep answers concise."
)


class SessionPorts:
    """A session's parts in this process (see module docstring).

    Args:
        journal: the journal.
        settings: resolved settings.
        row: the session row.
        task_group: owner of the turn tasks.
        provider_factory: ``(model_id) -> Provider``.
        tools: the tools by name, or a ``() -> tools`` builder called on first use (default:
            :func:`default_tools`). The tools, the approval policy and the system prompt are
            built when first read: a runner that only serves attaches never needs them, and a
            daemon wakes thousands of those (issue 12 item 6).
        interactive: a user can answer questions (``ask_user``).
    """

    def __init__(
        self,
        journal: Journal,
        settings: Settings,
        row: SessionRow,
        task_group: TaskGroup,
        provider_factory: Callable[[str], Provider],
        *,
        tools: dict[str, Tool] | Callable[[], dict[str, Tool]] | None = None,
        interactive: bool = True,
    ) -> None:
        self.journal = journal
        self.settings = settings
        self.session_id = row.id
        self.row = row
        self.cwd = row.cwd
        self.worker_id = f"w_{uuid.uuid4().hex[:12]}"
        self.bus = RunnerEventBus(row.id)
        self.bus.last_seq = row.last_seq
        self.context = ContextBuilder()
        self.writer = SessionWriter(
            journal, row.id, self.bus, self.context, full_disk_wait_s=settings.timing.full_disk_wait_s
        )
        self._tools: dict[str, Tool] | None = tools if isinstance(tools, dict) else None
        self._tools_builder: Callable[[], dict[str, Tool]] = (
            tools if tools is not None and not isinstance(tools, dict) else default_tools
        )
        self._policy: ApprovalPolicy | None = None
        self._system_prompt: str | None = None
        self.interactive = interactive
        self.model_override: str | None = None
        """An explicit ``--model`` for this process's turns (else the session's recorded model)."""
        self._tg = task_group
        self._provider_factory = provider_factory
        self._provider: Provider | None = None
        self._loaded = False

    @property
    def tools(self) -> dict[str, Tool]:
        """The session's tools by name (built on first read)."""
        return self.build_tools()

    @tools.setter
    def tools(self, tools: dict[str, Tool]) -> None:
        self._tools = tools

    def build_tools(self) -> dict[str, Tool]:
        """The tools, built now if they are not yet (an MCP tool set starts its servers then)."""
        if self._tools is None:
            self._tools = self._tools_builder()
        return self._tools

    @property
    def policy(self) -> ApprovalPolicy:
        """The session's approval rules, from ``row.approval_rules`` (parsed on first read).

        Raises:
            JournalError: the stored rules are damaged (``detail.reason`` ``"corrupt"``: a 500
                naming the session, never a bare ``ValueError``; tester F1, F7).
        """
        if self._policy is None:
            try:
                rules = json.loads(self.row.approval_rules or "{}")
                self._policy = ApprovalPolicy.from_json(rules, self.settings.shell_allow)
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                raise damaged(
                    f"session {self.session_id}: its stored approval rules are damaged ({exc})"
                ) from exc
        return self._policy

    @policy.setter
    def policy(self, policy: ApprovalPolicy) -> None:
        self._policy = policy

    @property
    def system_prompt(self) -> str:
        """The system prompt of every request (``settings.system_prompt``, ``{cwd}`` filled in)."""
        if self._system_prompt is None:
            self._system_prompt = (self.settings.system_prompt or DEFAULT_SYSTEM_PROMPT).format(cwd=self.cwd)
        return self._system_prompt

    @system_prompt.setter
    def system_prompt(self, prompt: str) -> None:
        self._system_prompt = prompt

    @property
    def is_busy(self) -> bool:
        """True while a turn is in progress (the runner decides)."""
        return False

    async def get_provider(self) -> Provider:
        """The session's provider, created on first use (in a worker thread: see :mod:`._sdk`)."""
        if self._provider is None:
            provider = await create_off_loop(self._provider_factory, self.model_id)
            if self._provider is None:
                self._provider = provider
        return self._provider

    @property
    def model_id(self) -> str:
        """The model this process's turns use: ``--model``, else the session's, else the default."""
        return self.model_override or self.row.model or self.settings.model or "local:smollm2-135m"

    async def load(self, row: SessionRow | None = None) -> None:
        """Bring the session up to date with the journal, reading no message (lazy resume).

        ``row``: the session row just read with the lease (``Journal.lease_session``): not read again.

        Reads the session row (approval rules, status) and publishes what another process
        committed since this bus last published. The model context is only marked stale: the
        turn that needs it rebuilds it (:meth:`load_context`), so opening a session costs the same
        at 10 events and at 10,000. A later call is a no-op unless the journal's ``last_seq``
        moved past what this runner published.
        """
        if row is None:
            row = await self.journal.get_session(self.session_id)
        if self._loaded and row.last_seq == self.bus.last_seq:
            self.row = row
            return
        self.context.unload()
        self.row = row
        # Another process may have granted rules or advanced the workspace generation (F40):
        # the policy is parsed again from this row when next read.
        self._policy = None
        if self.row.last_seq > self.bus.last_seq:
            # Another process wrote since this bus last published: publish those events first, so
            # subscribers here (attachers of a session another daemon ran) see no gap.
            for event in await self.journal.events(
                self.session_id, self.bus.last_seq, until=self.row.last_seq
            ):
                if event.seq == self.bus.last_seq + 1:
                    self.bus.publish(event)
            self.bus.last_seq = max(self.bus.last_seq, self.row.last_seq)
        self._loaded = True

    async def load_context(self, row: SessionRow | None = None) -> None:
        """:meth:`load` (``row``: as there), then rebuild the model context if it is stale (latest
        snapshot + tail)."""
        await self.load(row)
        await self.writer.build_context()

    async def snapshot(self) -> dict[str, Any]:
        """Public session fields + ``pending_approvals`` + ``busy`` + ``subscribers``."""
        row = await self.journal.get_session(self.session_id)
        data = row.to_public()
        data["pending_approvals"] = [
            r.approval_view() for r in await self.journal.pending_approvals(self.session_id)
        ]
        data["busy"] = self.is_busy
        data["subscribers"] = len(self.bus.subscribers)
        return data

    def subscribe(self, name: str, since: int = 0, *, maxsize: int = 1024) -> AsyncIterator[Event]:
        """Every committed event with seq > ``since`` exactly once, in order, then live events
        (see :func:`~acagent.runner._subscribe.replay_then_live`).

        Raises:
            SubscriberEvicted: the subscriber fell behind (re-attach with its last seq).
        """
        return replay_then_live(self.journal, self.bus, self.session_id, name, since, maxsize=maxsize)

    async def aclose(self) -> None:
        """Close the bus and the provider, and drop the history memo of this session's context."""
        self.bus.close()
        if self.context.loaded:  # an unloaded context already let go of its messages (unload)
            forget_history(self.context.messages)
        if self._provider is not None:
            await self._provider.aclose()
