"""The input side of :class:`~acagent.cli._ui.SessionUI`: prompts, approvals, Ctrl-C and signals.

Every prompt runs with ``handle_sigint=False`` so prompt_toolkit never replaces our SIGINT
handler; the live view gives the screen to a prompt and comes back after it while a turn runs.
"""

from __future__ import annotations

import signal
from typing import Any

__all__ = ["ANSWERS", "InputMixin"]

ANSWERS = {"y": "allow", "yes": "allow", "n": "deny", "no": "deny", "a": "always", "always": "always"}
"""Approval answers typed at ``allow? [y/n/a]`` (also read by ``attach``'s line loop)."""


class InputMixin:
    """Mixin of :class:`~acagent.cli._ui.SessionUI` (its attributes are documented there)."""

    attach: bool
    cancel_presses: int
    client: Any
    console: Any
    quit_code: int | None
    renderer: Any
    session: Any
    ask_session: Any
    typed: str
    turn_id: str | None
    prompting: bool
    prompt_scope: Any
    prompt_for: str | None
    tg: Any
    view: Any

    def _note(self, text: str) -> None:  # pragma: no cover - SessionUI's
        raise NotImplementedError

    def _error(self, exc: Any) -> None:  # pragma: no cover - SessionUI's
        raise NotImplementedError

    async def _approve(self, payload: dict[str, Any]) -> None:
        from acagent.errors import AcagentError, ApprovalNotFound

        call_id = str(payload.get("tool_call_id"))
        question = payload.get("kind") == "question"
        answer: str | None = None
        self.prompt_for = call_id
        try:
            while True:
                try:
                    reply = await self._prompt(
                        [("ansiyellow bold", "answer› " if question else "allow? [y/n/a] ")], history=False
                    )
                except KeyboardInterrupt:
                    await self._cancel()
                    return
                except EOFError:
                    reply = "" if question else "n"
                if reply is None:  # resolved elsewhere, or the turn ended
                    return
                if question:
                    decision, answer = "allow", reply
                    break
                decision_or_none = ANSWERS.get(reply.strip().lower())
                if decision_or_none is not None:
                    decision = decision_or_none
                    break
                self._note("answer y (yes), n (no) or a (always for this session)")
        finally:
            self.prompt_for = None
        try:
            await self.client.answer(call_id, decision, answer=answer)
        except ApprovalNotFound:
            self._note("that approval was already resolved")
        except AcagentError as exc:
            self._error(exc)

    async def _cancel(self) -> None:
        from acagent.errors import AcagentError

        self.cancel_presses += 1
        if self.cancel_presses == 1:
            more = "Ctrl-C again to detach" if self.attach else "Ctrl-C twice more to quit"
            self._note(f"interrupting… ({more})")
            try:
                await self.client.cancel(turn_id=self.turn_id or None)  # only the turn shown
            except AcagentError as exc:
                self._error(exc)
        elif self.cancel_presses >= (2 if self.attach else 3):
            self._note("detaching" if self.attach else "quitting")
            self.quit_code = 0 if self.attach else 130
            if self.tg is not None:
                self.tg.cancel_scope.cancel()

    async def _prompt(self, message: Any, *, history: bool) -> str | None:
        """One line of input, or None when the prompt was closed by an event.

        Raises:
            KeyboardInterrupt: Ctrl-C.
            EOFError: Ctrl-D on an empty line.
        """
        import anyio
        from prompt_toolkit.formatted_text import FormattedText

        self.view.stop()
        self.renderer.finish_line()
        session = self.session if history else self.ask_session
        default, self.typed = (self.typed, "") if history else ("", self.typed)
        with anyio.CancelScope() as scope:
            self.prompt_scope, self.prompting = scope, True
            try:
                return str(
                    await session.prompt_async(FormattedText(message), handle_sigint=False, default=default)
                )
            finally:
                self.prompt_scope, self.prompting = None, False
                if self.turn_id is not None:
                    self.view.start()
        return None

    async def _watch_sigint(self) -> None:
        import anyio

        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGHUP, signal.SIGTERM) as signals:
            async for signum in signals:
                if signum != signal.SIGINT:  # the terminal went away, or kill: stop the turn, exit
                    self.quit_code = 128 + int(signum)
                    if self.tg is not None:
                        self.tg.cancel_scope.cancel()
                    return
                self._after_caret_c()
                if self.turn_id is not None:
                    await self._cancel()
                elif self.prompt_scope is None:
                    self._note("(Ctrl-C: nothing is running)")

    def _after_caret_c(self) -> None:
        """The terminal echoed ``^C``: end that line (or overwrite the echo at column 0)."""
        from rich.control import Control

        if self.renderer.midline:
            self.renderer.finish_line()
        elif self.console.is_terminal and not self.view.running:
            self.console.control(Control.move_to_column(0))
