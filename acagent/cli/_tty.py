"""The terminal's input mode while a turn runs: typed text waits, unechoed, for the next prompt."""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["quiet_input", "restore_input"]


def quiet_input() -> Any:
    """Stop the terminal echoing what is typed during a turn; it stays queued for the next prompt.

    Echo and line editing go off (signals stay on: Ctrl-C still interrupts), so typed text never
    lands inside the streamed answer, and the bytes wait in the terminal's input queue exactly as
    typed: the next prompt reads them as keystrokes. Returns the saved attributes (None when
    stdin is not a terminal).
    """
    import termios

    try:
        saved = termios.tcgetattr(sys.stdin.fileno())
    except (termios.error, OSError, ValueError):
        return None
    quiet: list[Any] = [list(x) if isinstance(x, list) else x for x in saved]
    quiet[0] &= ~termios.ICRNL
    quiet[3] &= ~(termios.ECHO | termios.ICANON)
    quiet[6][termios.VMIN], quiet[6][termios.VTIME] = 1, 0
    try:
        termios.tcsetattr(sys.stdin.fileno(), termios.TCSANOW, quiet)
    except (termios.error, OSError):
        return None
    return saved


def restore_input(saved: Any) -> None:
    """Put back what :func:`quiet_input` saved, keeping the queued input (TCSANOW, no flush)."""
    if saved is None:
        return
    import termios

    try:
        termios.tcsetattr(sys.stdin.fileno(), termios.TCSANOW, saved)
    except (termios.error, OSError):
        pass
