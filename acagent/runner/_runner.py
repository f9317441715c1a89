"""InProcessRunner: one session's lifecycle in this process.

A runner owns its session's bus and writer and one state (:class:`RunnerState`)::

    IDLE ──step()──▶ ACCEPTING ──user message durable──▶ RUNNING ──end event committed──▶ FINISHING
      ▲                  │ (lease refused, bad input)                                        │
      └──────────────────┴──────────────── lease released ◀──────────────────────────────────┘

"Session busy" is decided here alone (:meth:`InProcessRunner.check_free`). For the duration of a
turn the runner holds the session lease (renewed by the registry's lease keeper, which aborts the
turn when a renewal fails) and the turn's cancel scope; the turn itself — its ports and its state
— is a :class:`~acagent.runner._turn.Turn`, driven by the :class:`AgenticLoop`. A turn always
ends in a resting state:

- completed → ``done`` (by the loop);
- cancelled (``interrupt()``, a cross-process cancel flag, shutdown) → partial assistant text
  kept, every unsettled tool call closed with an "interrupted" result, ``turn.interrupted``,
  ``cancelled`` — one transaction, under a shielded cancel scope bounded in time;
- failed (provider error after retries, bug) → ``turn.failed``, ``failed``;
- lease lost (a zombie) → nothing more is written; the new holder finishes the turn.

An interrupt is bound to the turn it was meant for (it lives on that :class:`Turn`), so no
interrupt can outlive its turn and cancel a later one.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import anyio

from acagent._pids import pid_is_dead
from acagent.errors import (
    AcagentError,
    SessionBusy,
    StaleLease,
    SubscriberEvicted,
    TurnHalted,
    UserError,
)
from acagent.providers._base import ToolDefinition
from acagent.runner._budget import budget_for
from acagent.runner._cancel import CancelPaths, RunnerState, TurnEnded
from acagent.runner._compactpath import CompactPath
from acagent.runner._drive import NO_WRITE_STOPS, drive_turn
from acagent.runner._ending import halt_error
from acagent.runner._loop import AgenticLoop
from acagent.runner._protocol import AgentRunner
from acagent.runner._session import SessionPorts
from acagent.runner._turn import Turn
from acagent.runner._window import RequestEstimator, bytes_to_tokens
from acagent.runner._writer import crash_point
from acagent.store import ACTIVE, ToolCallRow

__all__ = [
    "NO_WRITE_STOPS",
    "AgentRunner",
    "BusyCount",
    "InProcessRunner",
    "RunnerState",
    "SubscriberEvicted",
    "pid_is_dead",
]

log = logging.getLogger("acagent.runner")


_COUNTED = (RunnerState.ACCEPTING, RunnerState.RUNNING)
"""States that count against ``max_sessions`` (a ``FINISHING`` turn's end is committed)."""


class BusyCount:
    """How many runners of a process are accepting or running a turn (``value``)."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0


class InProcessRunner(CancelPaths, CompactPath, SessionPorts):
    """The in-process :class:`AgentRunner` (see module docstring); built like :class:`SessionPorts`."""

    loop = AgenticLoop()
    _turn_done: anyio.Event | TurnEnded = TurnEnded()
    """Set when no turn is in progress; a turn replaces it with its own event."""

    def __init__(self, *args: Any, busy: BusyCount | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pins = 0
        """Callers using this runner now (``runner/_pins.py``): a hibernation pass skips it."""
        self._busy = busy if busy is not None else BusyCount()
        """The process's count of runners accepting or running a turn (shared by the registry)."""
        self._state = RunnerState.IDLE
        self.turn: Turn | None = None
        """The turn in progress (None when idle)."""
        self.queued: list[str] = []
        """``[turn_id]`` of a message queued behind a resumed turn (``+ [reason]``: cancelled)."""
        self.halted: TurnHalted | None = None
        """Why the last turn stopped here without recording its end (None: it did record it)."""
        self._tool_definitions: list[ToolDefinition] | None = None
        self.estimator = RequestEstimator()
        """Request-size estimates of this session (message sizes cached, calibrated by usage)."""

    # ------------------------------------------------------------------ state

    @property
    def state(self) -> RunnerState:
        """The runner's one lifecycle state (see module docstring)."""
        return self._state

    @state.setter
    def state(self, new: RunnerState) -> None:
        # The registry's cap check reads a running count (O(1) per turn), kept here, where the
        # state changes, instead of scanning every runner (benchmarks figure 5).
        self._busy.value += (new in _COUNTED) - (self._state in _COUNTED)
        self._state = new

    @property
    def is_busy(self) -> bool:
        """True while a turn is accepted, runs or finishes up in this process."""
        return self.state is not RunnerState.IDLE

    @property
    def finishing(self) -> bool:
        """True when the turn's end is committed and the task only finishes up."""
        return self.state is RunnerState.FINISHING

    @property
    def turn_id(self) -> str | None:
        """The id of the turn in progress (None when idle)."""
        return self.turn.turn_id if self.turn is not None else None

    def check_free(self, *, finishing_is_free: bool = True) -> None:
        """The one "session busy" rule: a turn is being accepted or runs here.

        A turn whose end is committed (``FINISHING``) counts as free unless ``finishing_is_free``
        is False (:meth:`step` waits for it first).

        Raises:
            SessionBusy: ``detail.turn_id`` names the running turn.
        """
        busy = (RunnerState.ACCEPTING, RunnerState.RUNNING)
        if self.state in busy or (self.state is RunnerState.FINISHING and not finishing_is_free):
            raise SessionBusy(
                f"session {self.session_id} is running turn {self.turn_id}; wait for it or cancel it",
                detail={"turn_id": self.turn_id},
            )

    def _new_turn(self, turn_id: str) -> Turn:
        """A :class:`Turn` wired to this runner's ports (usage totals from the fresh row)."""

        def on_end() -> None:
            if self.turn is turn and self.state is RunnerState.RUNNING:
                self.state = RunnerState.FINISHING

        turn = Turn(
            turn_id=turn_id,
            session_id=self.session_id,
            journal=self.journal,
            settings=self.settings,
            writer=self.writer,
            context=self.context,
            tools=self.tools,
            policy=self.policy,
            provider=self.get_provider,
            system_prompt=self.system_prompt,
            cwd=self.cwd,
            worker_id=self.worker_id,
            interactive=self.interactive,
            usage_totals=[self.row.input_tokens, self.row.output_tokens],
            tool_definitions=self._tool_definitions,
            on_end=on_end,
            model=self.model_id,
            budget=budget_for(self.settings),
            estimator=self.estimator,
        )
        return turn

    # ------------------------------------------------------------------ turns

    async def step(self, user_input: str | None, *, idempotency_key: str | None = None) -> str:
        """Start a turn (``user_input``) or continue an interrupted one (``None``).

        ``idempotency_key`` goes into the ``user.message`` event (the daemon recognises a retry of
        this message by it after a restart: :mod:`acagent.server._idempotency`).

        Returns once the turn is accepted (its user message is durable); the turn runs in the
        registry's task group. Use :meth:`wait` to wait for its end.

        Raises:
            SessionBusy: a turn already runs here or another live process holds the lease
                (``detail.turn_id`` names the running turn).
            UserError: ``user_input`` is empty, or None and there is nothing to continue.
        """
        if user_input is not None and not user_input.strip():
            raise UserError("the message is empty; type something for the model to answer")
        if self.state is RunnerState.FINISHING:
            # The turn's end is committed; the task only finishes up (checkpoint, lease release).
            with anyio.move_on_after(10):
                await self._turn_done.wait()
        self.check_free(finishing_is_free=False)
        self.halted = None
        self.state = RunnerState.ACCEPTING
        self._turn_done = anyio.Event()
        try:
            first, new_turn = await self._open_turn(user_input, idempotency_key)
        except BaseException:
            await self._release()
            raise
        self.state = RunnerState.RUNNING
        queued = new_turn if first.turn_id != new_turn else None
        first.release_at_end = queued is None  # no turn of this runner follows under this lease
        self.queued = [queued] if queued is not None else []
        self._tg.start_soon(self._run, first, queued, user_input, idempotency_key)
        return new_turn or first.turn_id

    async def _open_turn(self, user_input: str | None, key: str | None) -> tuple[Turn, str | None]:
        """Take the lease, load the context; accept the message (unless a turn must be resumed first)."""
        lease, row, own_caps = await self.journal.lease_session(
            self.session_id, self.worker_id, ttl_s=self.settings.timing.lease_ttl_s, is_dead=pid_is_dead
        )
        self.writer.lease = lease
        await self.load_context(row)  # the row (and caps) read with the lease: not read again
        row = self.row
        resume_turn = row.turn_id if row.status in ACTIVE else None
        new_turn = f"turn_{uuid.uuid4().hex[:16]}" if user_input is not None else None
        if resume_turn is None and new_turn is None:
            raise UserError(
                f"session {self.session_id} has no interrupted turn to finish (it is {row.status!r})"
            )
        budget = budget_for(self.settings)
        limits = budget.limits_for(own_caps)  # the turn's caps, read once
        if resume_turn is None:
            # A turn whose first call would break a cap is refused before anything is written
            # (the daemon answers 429): the same estimate the loop checks before that call.
            first_call = self.estimator.estimate(self.system_prompt, self.context.messages)
            first_call += bytes_to_tokens(len((user_input or "").encode("utf-8", "surrogatepass")))
            budget.raise_if(
                await budget.check(
                    self.journal,
                    self.session_id,
                    self.model_id,
                    input_tokens=first_call,
                    turn_starting=True,
                    limits=limits,
                )
            )
        first = self._new_turn(resume_turn or new_turn or "")
        first.limits = limits
        self.turn = first
        if resume_turn is None and user_input is not None:
            await self._accept(first, user_input, key)
        return first, new_turn

    async def _accept(self, turn: Turn, text: str, key: str | None) -> None:
        title = " ".join(text.split())[:80] if self.row.title is None else None
        await turn.accept(text, title=title, idempotency_key=key)
        if title is not None:
            self.row.title = title
        crash_point("after_turn_accepted", self.settings.crash_at)

    async def wait(self) -> None:
        """Wait until the current turn (if any) has ended."""
        await self._turn_done.wait()

    async def run_turn(self, user_input: str | None) -> str:
        """:meth:`step` and :meth:`wait`; return the turn id."""
        turn_id = await self.step(user_input)
        await self.wait()
        return turn_id

    async def _run(
        self, first: Turn, new_turn: str | None, new_text: str | None, key: str | None = None
    ) -> None:
        error: AcagentError | None = None
        try:
            await self._drive(first)
            # The queued message runs once the resumed turn's end is committed, however it
            # ended (only a completed one was followed: the message's client waited, F132).
            if first.outcome is not None and new_turn is not None and new_text is not None:
                turn = self._new_turn(new_turn)
                if len(self.queued) > 1:  # a cancel named it: recorded, then ended without a call
                    turn.interrupt(self.queued[1])
                turn.release_at_end = True
                self.turn, self.state = turn, RunnerState.RUNNING
                await self._accept(turn, new_text, key)
                await self._drive(turn)
        except StaleLease as exc:
            log.info("session %s: lease superseded; this worker stops writing", self.session_id)
            error = exc
        except AcagentError as exc:  # the journal refused the turn's end (disk full, read-only)
            # Reported once, to the watchers (TurnHalted); a log line would be a second copy.
            log.info("session %s: the turn could not be recorded: %s", self.session_id, exc.message)
            error = exc
        except Exception as exc:
            log.exception("session %s: turn crashed", self.session_id)
            error = AcagentError(f"the turn crashed: {exc!r}")
        finally:
            self.queued = []
            self._halt_if_unended(error)
            await self._release()

    def _halt_if_unended(self, error: AcagentError | None) -> None:
        """A turn that stopped here without its end event committed ends its watchers' streams
        with :class:`TurnHalted` (else they would wait forever for an end that never comes)."""
        halt = halt_error(self.session_id, self.turn, error)
        if halt is not None:
            self.halted = halt
            self.bus.halt(halt)

    async def _release(self) -> None:
        """Release the lease (if held), drop the turn, go idle and wake :meth:`wait`."""
        lease = self.writer.lease
        if lease is not None and not (self.turn is not None and self.turn.lease_released):
            with anyio.CancelScope(shield=True):
                try:
                    await self.journal.release_lease(self.session_id, lease)
                except AcagentError as exc:  # the lease expires by itself (or dies with this pid)
                    log.info("session %s: releasing the lease failed: %s", self.session_id, exc.message)
                except Exception:
                    log.exception("session %s: releasing the lease failed", self.session_id)
        if self.turn is not None:  # the cache outlives the turn (None again if the tools changed)
            self._tool_definitions = self.turn.tool_definitions
        self.writer.lease = None
        self.turn = None
        self.state = RunnerState.IDLE
        self._turn_done.set()

    async def _drive(self, turn: Turn) -> bool:
        """Run one turn to a resting state (:func:`drive_turn`). Returns True if it completed normally."""
        return await drive_turn(self.loop, turn)

    # ------------------------------------------------------------------ approvals

    async def answer_approval(
        self, tool_call_id: str, decision: str, *, answer: str | None = None
    ) -> ToolCallRow:
        """Record a decision (``allow``/``deny``/``always``, or an answer to a question).

        ``answer`` with ``allow`` answers a question (``answered``); with ``deny`` or ``always`` it
        is the decision's note (a deny's reason: "not run: denied by the user (REASON)"). Before,
        any ``answer`` made the decision ``answered``, so a deny that gave its reason ran the tool
        (F129).

        Raises:
            UserError: an unknown decision.
            ApprovalNotFound: unknown or already resolved (the detail names the winner).
        """
        if decision not in ("allow", "deny", "always", "answered"):
            raise UserError(f"decision must be allow, deny or always, not {decision!r}")
        if answer is not None and decision == "allow":
            decision = "answered"
        row = await self.journal.resolve_approval(self.session_id, tool_call_id, decision, note=answer)
        if self.turn is not None:
            self.turn.wake_approval(tool_call_id)
        return row
