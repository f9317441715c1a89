"""InProcessRunner: one session's lifecycle in this process.

A runner owns its session's bus and writer, takes the session lease for the duration of a turn
(renewing it, and aborting the turn when a renewal fails), runs the turn with the stateless
:class:`AgenticLoop`, and guarantees that a turn always ends in a resting state:

- completed → ``done`` (by the loop);
- cancelled (``interrupt()``, a cross-process cancel flag, shutdown) → partial assistant text
  kept, every unsettled tool call closed with an "interrupted" result, ``turn.interrupted``,
  ``cancelled`` — one transaction, under a shielded cancel scope bounded in time;
- failed (provider error after retries, bug) → ``turn.failed``, ``failed``;
- lease lost (a zombie) → nothing more is written; the new holder finishes the turn.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

import anyio
from anyio.abc import TaskGroup

from acagent.bus import RunnerEventBus
from acagent.errors import AcagentError, InvalidTransition, SessionBusy, StaleLease, find_acagent_error
from acagent.events import Event, make_payload
from acagent.providers._base import Provider
from acagent.runner._context import ContextBuilder
from acagent.runner._loop import AgenticLoop, TurnEnded, partial_message
from acagent.runner._tools import ToolExecutor, close_row
from acagent.runner._writer import SessionWriter, crash_point
from acagent.settings import Settings
from acagent.store import (
    ACTIVE,
    RESTING,
    STATUSES,
    FinishStep,
    Journal,
    SessionRow,
    SetCancel,
    SetStatus,
    SetTitle,
    SetTurn,
    ToolCallRow,
    UpdateToolCall,
)
from acagent.store._transcript import transcript_path
from acagent.tools import ApprovalPolicy, Tool, ToolContext, ToolResult, default_tools, secret_values
from acagent.tools._blob import blob_dir_for

__all__ = ["AgentRunner", "InProcessRunner", "SubscriberEvicted", "pid_is_dead"]

log = logging.getLogger("acagent.runner")

DEFAULT_SYSTEM_PROMPT = (
    "You are acagent, a careful coding assistant. The user's workspace is {cwd}. Use the tools to "
    "inspect and change files and run commands inside the workspace; keep answers concise."
)
MAX_TOOL_OUTPUT_KEPT = 64 * 1024


class SubscriberEvicted(AcagentError):
    """Raised to a subscriber that fell too far behind; re-attach with ``since=last_seq``."""

    code = "subscriber_evicted"
    status_code = 409

    def __init__(self, last_seq: int) -> None:
        super().__init__(
            f"subscriber fell too far behind; re-attach with since={last_seq}", detail={"last_seq": last_seq}
        )
        self.last_seq = last_seq


def pid_is_dead(host: str | None, pid: int | None) -> bool:
    """True if ``pid`` on this host no longer exists (a crashed lease holder)."""
    import socket

    if host != socket.gethostname() or not pid:
        return False
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:  # a zombie is dead too
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


class AgentRunner(Protocol):
    """What the registry, the CLI and the daemon use to drive a session."""

    session_id: str

    async def step(self, user_input: str | None) -> str:
        """Start a turn with ``user_input`` (or finish an interrupted one with ``None``); return its turn id."""
        ...

    def interrupt(self, reason: str = "user") -> None:
        """Cancel the running turn (no-op when idle)."""
        ...

    async def stop(self) -> None:
        """Interrupt (reason ``shutdown``) and wait for the turn to end."""
        ...

    async def snapshot(self) -> dict[str, Any]:
        """Status, last seq, pending approvals, usage."""
        ...

    def subscribe(self, name: str, since: int = 0) -> AsyncIterator[Event]:
        """Committed events with seq > ``since`` (journal replay), then live events."""
        ...

    @property
    def is_busy(self) -> bool:
        """True while a turn runs in this process."""
        ...


class InProcessRunner:
    """The in-process :class:`AgentRunner` (see module docstring).

    Args:
        journal: the journal.
        settings: resolved settings.
        row: the session row.
        task_group: owner of the turn tasks.
        provider_factory: ``(model_id) -> Provider``.
        interactive: a user can answer questions (``ask_user``).
    """

    loop = AgenticLoop()
    tools_runner = ToolExecutor()

    def __init__(
        self,
        journal: Journal,
        settings: Settings,
        row: SessionRow,
        task_group: TaskGroup,
        provider_factory: Callable[[str], Provider],
        *,
        tools: dict[str, Tool] | None = None,
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
        self.writer = SessionWriter(journal, row.id, self.bus, self.context)
        self.tools = tools if tools is not None else default_tools()
        self.policy = ApprovalPolicy.from_json(_json(row.approval_rules or "{}"), settings.shell_allow)
        self.interactive = interactive
        self.usage_totals = [row.input_tokens, row.output_tokens]
        self.current_stream: Any = None
        self.tool_definitions: list[Any] | None = None
        self.model_override: str | None = None
        """An explicit ``--model`` for this process's turns (else the session's recorded model)."""
        self.partial_text = ""
        """Text streamed by the step that was interrupted (kept as the partial assistant message)."""
        self.running_calls: dict[str, ToolCallRow] = {}
        self.tool_output: dict[str, list[str]] = {}
        self.answers: dict[str, str] = {}
        self.turn_id: str | None = None
        self._tg = task_group
        self._provider_factory = provider_factory
        self._provider: Provider | None = None
        self._busy = False
        self._finishing = False
        """True once the running turn's end event is committed (a new message may then wait)."""
        self._scope: anyio.CancelScope | None = None
        self._interrupt_reason = "user"
        self._turn_done = anyio.Event()
        self._turn_done.set()
        self._approval_wake: dict[str, anyio.Event] = {}
        self._loaded = False
        self.system_prompt = (settings.system_prompt or DEFAULT_SYSTEM_PROMPT).format(cwd=row.cwd)

    # ------------------------------------------------------------------ state

    @property
    def is_busy(self) -> bool:
        """True while a turn runs in this process."""
        return self._busy

    @property
    def finishing(self) -> bool:
        """True when the turn's end is committed and the task only finishes up."""
        return self._busy and self._finishing

    @property
    def tools_enabled(self) -> bool:
        """Whether tools are offered to the model (``--tools``; off by default for the local model)."""
        if self.settings.tools != "auto":
            return self.settings.tools == "on"
        return bool(getattr(self._provider, "supports_tools", True))

    async def get_provider(self) -> Provider:
        """The session's provider, created on first use."""
        if self._provider is None:
            model = self.model_override or self.row.model or self.settings.model or "local:smollm2-135m"
            # In a worker thread: building a provider imports its SDK (seconds under load) and
            # may load a model; on the event loop that would stall every stream and cancel.
            self._provider = await anyio.to_thread.run_sync(self._provider_factory, model)
        return self._provider

    async def load(self) -> None:
        """Bring the model context up to date with the journal.

        The first call rebuilds it (latest checkpoint + tail). Later calls are a no-op unless
        another process committed events since (the journal's ``last_seq`` moved past what this
        runner published), in which case the context is rebuilt.
        """
        if self._loaded:
            row = await self.journal.get_session(self.session_id)
            if row.last_seq == self.bus.last_seq:
                self.row = row
                return
        events = await self.journal.context_events(self.session_id)
        self.context.messages = []
        for event in events:
            self.context.apply(event)
        self.row = await self.journal.get_session(self.session_id)
        # Another process may have granted rules or advanced the workspace generation (F40).
        self.policy = ApprovalPolicy.from_json(
            _json(self.row.approval_rules or "{}"), self.settings.shell_allow
        )
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

    async def snapshot(self) -> dict[str, Any]:
        """Public session fields + ``pending_approvals`` + ``busy``."""
        row = await self.journal.get_session(self.session_id)
        data = row.to_public()
        data["pending_approvals"] = [
            {
                "tool_call_id": r.tool_call_id,
                "name": r.name,
                "arguments": _json(r.arguments),
                "turn_id": r.turn_id,
            }
            for r in await self.journal.pending_approvals(self.session_id)
        ]
        data["busy"] = self._busy
        data["subscribers"] = len(self.bus.subscribers)
        return data

    def tool_context(
        self, row: ToolCallRow, *, on_process_started: Callable[[int], None] | None = None
    ) -> ToolContext:
        """The :class:`ToolContext` for one call (live output → ``tool.output`` events)."""
        from pathlib import Path

        buf = self.tool_output.setdefault(row.tool_call_id, [])
        turn_id = row.turn_id

        def emit(text: str) -> None:
            if not text:
                return
            if sum(len(s) for s in buf) < MAX_TOOL_OUTPUT_KEPT:
                buf.append(text)
            self.writer.delta(
                "tool.output", {"turn_id": turn_id, "tool_call_id": row.tool_call_id, "text": text}
            )

        async def ask(question: str) -> str:
            return self.answers.pop(row.tool_call_id, "")

        return ToolContext(
            cwd=Path(self.cwd),
            session_id=self.session_id,
            tool_call_id=row.tool_call_id,
            emit_output=emit,
            timeout_s=self.settings.timing.tool_timeout_s,
            kill_grace_s=self.settings.timing.tool_kill_grace_s,
            on_process_started=on_process_started,
            ask_user=ask,
            private_dirs=(Path(self.settings.home),),
            output_limit_chars=self.settings.tool_output_limit_chars,
            blob_dir=blob_dir_for(transcript_path(self.settings.sessions_dir, self.cwd, self.session_id)),
            secrets=secret_values(
                self.settings.home,
                (self.settings.providers.openai_api_key, self.settings.providers.anthropic_api_key),
            ),
        )

    # ------------------------------------------------------------------ turns

    async def step(self, user_input: str | None) -> str:
        """Start a turn (``user_input``) or continue an interrupted one (``None``).

        Returns once the turn is accepted (its user message is durable); the turn runs in the
        registry's task group. Use :meth:`wait` to wait for its end.

        Raises:
            SessionBusy: a turn already runs here or another live process holds the lease
                (``detail.turn_id`` names the running turn).
            UserError: ``user_input`` is None and there is nothing to continue.
        """
        if user_input is not None and not user_input.strip():
            from acagent.errors import UserError

            raise UserError("the message is empty; type something for the model to answer")
        if self._busy and self._finishing:
            # The turn's end is committed; the task only finishes up (checkpoint, lease release).
            with anyio.move_on_after(10):
                await self._turn_done.wait()
        if self._busy:
            raise SessionBusy(
                f"session {self.session_id} is running turn {self.turn_id}; wait for it or cancel it",
                detail={"turn_id": self.turn_id},
            )
        self._busy = True
        self._finishing = False
        self._turn_done = anyio.Event()
        try:
            lease = await self.journal.acquire_lease(
                self.session_id, self.worker_id, ttl_s=self.settings.timing.lease_ttl_s, is_dead=pid_is_dead
            )
            self.writer.lease = lease
            await self.load()
            row = self.row
            resume_turn = row.turn_id if row.status in ACTIVE else None
            turn_id = resume_turn
            if user_input is not None:
                turn_id = f"turn_{uuid.uuid4().hex[:16]}"
                if resume_turn is None:
                    await self._accept(turn_id, user_input)
            elif resume_turn is None:
                from acagent.errors import UserError

                await self.journal.release_lease(self.session_id, lease)
                raise UserError(
                    f"session {self.session_id} has no interrupted turn to finish (it is {row.status!r})"
                )
        except BaseException:
            self._busy = False
            self._turn_done.set()
            raise
        assert turn_id is not None
        self.turn_id = resume_turn or turn_id
        self._tg.start_soon(self._run, resume_turn, turn_id if user_input is not None else None, user_input)
        return turn_id

    async def _accept(self, turn_id: str, text: str) -> None:
        title_ops: list[Any] = []
        if self.row.title is None:  # the title rides along with the turn's first commit
            title_ops.append(SetTitle(" ".join(text.split())[:80]))
        await self.writer.commit(
            [
                ("turn.started", make_payload("turn.started", turn_id=turn_id)),
                ("user.message", make_payload("user.message", turn_id=turn_id, text=text)),
            ],
            ops=[
                SetTurn(turn_id),
                SetCancel(False),
                SetStatus("running", RESTING, turn_id=turn_id),
                *title_ops,
            ],
        )
        if title_ops:
            self.row.title = title_ops[0].title
        crash_point("after_turn_accepted", self.settings.crash_at)

    async def wait(self) -> None:
        """Wait until the current turn (if any) has ended."""
        await self._turn_done.wait()

    async def run_turn(self, user_input: str | None) -> str:
        """:meth:`step` and :meth:`wait`; return the turn id."""
        turn_id = await self.step(user_input)
        await self.wait()
        return turn_id

    async def _run(self, resume_turn: str | None, new_turn: str | None, new_text: str | None) -> None:
        lease = self.writer.lease
        assert lease is not None
        self._interrupt_reason = "user"
        try:
            if resume_turn is not None:
                if await self._drive(resume_turn) and new_turn is not None and new_text is not None:
                    self.turn_id = new_turn
                    await self._accept(new_turn, new_text)
                    await self._drive(new_turn)
            elif new_turn is not None:
                await self._drive(new_turn)
        except StaleLease:
            log.warning("session %s: lease superseded; this worker stops writing", self.session_id)
        except Exception:
            log.exception("session %s: turn crashed", self.session_id)
        finally:
            with anyio.CancelScope(shield=True):
                try:
                    await self.journal.release_lease(self.session_id, lease)
                except Exception:
                    log.exception("session %s: releasing the lease failed", self.session_id)
            self.writer.lease = None
            self._busy = False
            self._scope = None
            self._turn_done.set()

    async def _drive(self, turn_id: str) -> bool:
        """Run one turn to a resting state. Returns True if it completed normally."""
        self.turn_id = turn_id
        self._finishing = False
        completed = False
        with anyio.CancelScope() as scope:
            self._scope = scope
            if self._pending_interrupt:
                scope.cancel()
            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self.writer.flush_loop)
                    try:
                        await self.loop.run_turn(self, turn_id)
                        completed = True
                    except TurnEnded:
                        pass
                    except InvalidTransition as exc:
                        if not (exc.detail or {}).get("cancel_requested"):
                            raise
                        scope.cancel()  # a cancel arrived from another process
                    tg.cancel_scope.cancel()
            except StaleLease:
                raise
            except Exception as exc:
                err = find_acagent_error(exc)
                if err is not None:  # a known failure (config, provider, journal): no traceback
                    log.warning("session %s: turn %s failed: %s", self.session_id, turn_id, err.message)
                    exc = err
                else:
                    log.exception("session %s: turn %s failed", self.session_id, turn_id)
                with anyio.CancelScope(shield=True), anyio.move_on_after(10):
                    await self.fail_turn(
                        turn_id,
                        error_type=exc.code if isinstance(exc, AcagentError) else type(exc).__name__,
                        message=exc.message if isinstance(exc, AcagentError) else (str(exc) or repr(exc)),
                    )
                return False
        if not completed and (scope.cancelled_caught or self._interrupt_reason in _NO_WRITE_STOPS):
            if self._interrupt_reason not in _NO_WRITE_STOPS:
                with anyio.CancelScope(shield=True), anyio.move_on_after(15):
                    await self._finish_cancelled(turn_id, self._interrupt_reason)
            return False
        self._pending_interrupt = False
        return completed

    _pending_interrupt = False

    def on_lease_check(self, held: bool, cancel: bool) -> None:
        """Called by the registry's lease keeper after renewing (or checking) this runner's lease.

        A lost lease aborts the turn without writing anything more (a zombie); a cancel flag set
        by another process interrupts it like a local cancel.
        """
        if not self._busy or self._finishing:
            return
        if not held:
            self._interrupt_reason = "lease_lost"
            if self._scope is not None:
                self._scope.cancel()
        elif cancel:
            self.interrupt("user")

    def mark_finishing(self) -> None:
        """Called by the loop once the turn's end event is committed."""
        self._finishing = True

    def interrupt(self, reason: str = "user") -> None:
        """Cancel the running turn: abort the provider request and running tools (no-op when idle)."""
        if self._finishing:
            return  # the turn already ended; nothing left to cancel
        self._interrupt_reason = reason
        if self._scope is not None:
            self._scope.cancel()
        elif self._busy:
            self._pending_interrupt = True
        for event in self._approval_wake.values():
            event.set()

    async def cancel(self, reason: str = "user") -> None:
        """Cancel from any state: a running turn here is interrupted; an idle or orphaned session is
        closed (open tool calls get results) and marked ``cancelled``; another live process holding
        the lease sees the cancel flag on its next renewal.
        """
        if self._busy:
            await self.journal.set_cancel(self.session_id, True)
            self.interrupt(reason)
            return
        row = await self.journal.get_session(self.session_id)
        if row.status == "cancelled":
            return
        if row.lease_owner and row.lease_expires_at and not pid_is_dead(row.lease_host, row.lease_pid):
            import time

            if row.lease_expires_at > time.time():
                await self.journal.set_cancel(self.session_id, True)
                return
        # Idle, or orphaned by a dead process: take the lease and close it ourselves.
        lease = await self.journal.acquire_lease(
            self.session_id, self.worker_id, ttl_s=self.settings.timing.lease_ttl_s, is_dead=pid_is_dead
        )
        self.writer.lease = lease
        try:
            await self.load()
            await self._finish_cancelled(row.turn_id, reason)
        finally:
            await self.journal.release_lease(self.session_id, lease)
            self.writer.lease = None

    async def stop(self) -> None:
        """Interrupt the running turn with reason ``shutdown`` and wait for it to end."""
        if self._busy:
            self.interrupt("shutdown")
            await self.wait()

    async def _finish_cancelled(self, turn_id: str | None, reason: str) -> None:
        """Close the turn after a cancel: one transaction (see module docstring)."""
        events: list[tuple[str, dict[str, Any]]] = []
        ops: list[Any] = []
        stream = self.current_stream
        partial = stream.partial_text() if stream is not None else self.partial_text
        self.current_stream, self.partial_text = None, ""
        if partial and turn_id is not None:
            msg = partial_message(partial)
            if msg is not None:
                events.append(
                    (
                        "assistant.message",
                        make_payload(
                            "assistant.message",
                            turn_id=turn_id,
                            text=msg.text,
                            message=msg.model_dump(mode="json"),
                            interrupted=True,
                        ),
                    )
                )
        for step in await self.journal.steps(self.session_id):
            if step.status == "inflight":
                ops.append(FinishStep(step.request_id, "failed", f"cancelled ({reason})"))
        for row in await self.journal.tool_calls(self.session_id, open_only=True):
            tid = row.turn_id
            if row.status == "running":
                partial = "".join(self.tool_output.pop(row.tool_call_id, [])) or "(none)"
                if len(partial) > 4000:
                    partial = partial[:1000] + "\n[...]\n" + partial[-2000:]
                text = f"interrupted by user after start; partial output: {partial}"
                if reason == "shutdown":
                    text = f"interrupted when acagent shut down; it may or may not have taken effect; partial output: {partial}"
            elif row.status == "waiting_user":
                text = "not run: the turn was cancelled while waiting for approval"
                events.append(
                    (
                        "approval.resolved",
                        make_payload(
                            "approval.resolved",
                            turn_id=tid,
                            tool_call_id=row.tool_call_id,
                            decision="cancelled",
                            reason="the turn was cancelled",
                        ),
                    )
                )
                ops.append(
                    UpdateToolCall(
                        row.tool_call_id, "waiting_user", ("waiting_user",), (("approval", "cancelled"),)
                    )
                )
            else:
                text = "not started: the turn was cancelled"
            event, op = close_row(tid, row, ToolResult(text, status="interrupted"))
            events.append(event)
            ops.append(op)
        if turn_id is not None:
            events.append(
                ("turn.interrupted", make_payload("turn.interrupted", turn_id=turn_id, reason=reason))
            )
        ops.append(
            SetStatus(
                "cancelled", tuple(s for s in STATUSES if s != "cancelled"), turn_id=turn_id, worker=False
            )
        )
        ops.append(SetCancel(False))
        await self.writer.commit(events, ops=ops)
        self._finishing = True

    async def fail_turn(
        self,
        turn_id: str,
        *,
        error_type: str,
        message: str,
        retryable: bool = False,
        ops: list[Any] | None = None,
    ) -> None:
        """Commit ``turn.failed`` and status ``failed``; open tool calls are closed with an error."""
        events: list[tuple[str, dict[str, Any]]] = []
        all_ops: list[Any] = list(ops or [])
        for row in await self.journal.tool_calls(self.session_id, open_only=True):
            event, op = close_row(
                row.turn_id, row, ToolResult(f"not run: the turn failed ({message})", status="error")
            )
            events.append(event)
            all_ops.append(op)
        events.append(
            (
                "turn.failed",
                make_payload(
                    "turn.failed", turn_id=turn_id, type_=error_type, message=message, retryable=retryable
                ),
            )
        )
        all_ops.append(SetStatus("failed", ACTIVE, turn_id=turn_id, worker=False))
        await self.writer.commit(events, ops=all_ops)
        self._finishing = True

    # ------------------------------------------------------------------ approvals

    async def answer_approval(
        self, tool_call_id: str, decision: str, *, answer: str | None = None
    ) -> ToolCallRow:
        """Record a decision (``allow``/``deny``/``always``, or an answer to a question).

        Raises:
            ApprovalNotFound: unknown or already resolved (the detail names the winner).
        """
        if decision not in ("allow", "deny", "always", "answered"):
            from acagent.errors import UserError

            raise UserError(f"decision must be allow, deny or always, not {decision!r}")
        if answer is not None:
            decision = "answered"
        row = await self.journal.resolve_approval(self.session_id, tool_call_id, decision, note=answer)
        wake = self._approval_wake.get(tool_call_id)
        if wake is not None:
            wake.set()
        return row

    async def wait_for_approval(self, row: ToolCallRow) -> tuple[str, str | None]:
        """Wait for the decision on ``row`` (in-process answer, another process's answer, or timeout)."""
        timeout = self.settings.timing.approval_timeout_s
        deadline = None if timeout is None else anyio.current_time() + timeout
        while True:
            current = next(
                (
                    r
                    for r in await self.journal.tool_calls(self.session_id, turn_id=row.turn_id)
                    if r.tool_call_id == row.tool_call_id
                ),
                None,
            )
            if current is not None and current.approval not in ("pending", "none"):
                return current.approval, current.approval_note
            if deadline is not None and anyio.current_time() >= deadline:
                try:
                    await self.journal.resolve_approval(
                        self.session_id, row.tool_call_id, "timeout", note="timed out"
                    )
                except AcagentError:
                    continue
                return "timeout", "timed out"
            wake = self._approval_wake.setdefault(row.tool_call_id, anyio.Event())
            wait_s = 0.5 if deadline is None else max(0.01, min(0.5, deadline - anyio.current_time()))
            with anyio.move_on_after(wait_s):
                await wake.wait()
            if wake.is_set():
                self._approval_wake.pop(row.tool_call_id, None)

    # ------------------------------------------------------------------ streams

    async def subscribe(self, name: str, since: int = 0, *, maxsize: int = 1024) -> AsyncIterator[Event]:
        """Every committed event with seq > ``since`` exactly once, in order, then live events.

        The bus subscription is taken before the journal replay, so nothing committed meanwhile is
        missed; events already replayed are skipped by seq at the seam.

        Raises:
            SubscriberEvicted: the subscriber fell behind (re-attach with its last seq).
        """
        sub = self.bus.subscribe(name, maxsize=maxsize, evict_after_drops=1)
        last = since
        try:
            while True:
                page = await self.journal.events(self.session_id, last, limit=1000)
                for event in page:
                    yield event
                    last = event.seq
                if len(page) < 1000:
                    break
            async for event in sub:
                if event.seq <= last:
                    continue
                yield event
                last = event.seq
            if sub.evicted_reason:
                raise SubscriberEvicted(last)
        finally:
            sub.close()

    async def aclose(self) -> None:
        """Close the bus and the provider."""
        self.bus.close()
        if self._provider is not None:
            await self._provider.aclose()


_NO_WRITE_STOPS = ("lease_lost", "handoff")
"""Interrupt reasons that stop a turn without writing anything: the lease is gone (a zombie) or
is being handed to another daemon of a cluster (SIGTERM drain: the turn stays active and a peer
continues it)."""


def _json(text: str) -> Any:
    import json

    return json.loads(text)
