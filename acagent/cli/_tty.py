"""The terminal's input mode while a turn runs (typed text waits, unechoed, for the next prompt),
and the one way the CLI reads lines from stdin without a blocking thread."""

from __future__ import annotations

import os
import stat
import sys
from typing import Any

__all__ = ["StdinLines", "quiet_input", "restore_input"]


class StdinLines:
    """Lines from stdin (a terminal, a pipe or a file), read on the event loop.

    A thread blocked in ``sys.stdin.readline`` cannot be cancelled, and at exit the interpreter
    joins it: Ctrl-C (or a detach) would hang until Enter or until the pipe closes. So a line is
    assembled from ``os.read`` calls made when the descriptor is readable (``anyio.wait_readable``);
    a regular file (``attach ID < messages.txt``) never blocks and cannot be polled, so it is read
    directly, as is a device epoll refuses (``< /dev/null``). Bytes past a newline are kept for the next line. Text is decoded as UTF-8 with
    replacement.
    """

    def __init__(self, fd: int | None = None) -> None:
        self.fd = sys.stdin.fileno() if fd is None else fd
        self._buf = b""
        self._eof = False
        try:
            self._pollable = not stat.S_ISREG(os.fstat(self.fd).st_mode)
        except OSError:
            self._pollable = True

    async def readline(self) -> str:
        """The next line with its ``\\n`` ("" at end of input, like ``readline``)."""
        import anyio

        while b"\n" not in self._buf and not self._eof:
            if self._pollable:
                try:
                    await anyio.wait_readable(self.fd)
                except PermissionError:  # epoll refuses /dev/null too (EPERM): a device that never blocks
                    self._pollable = False
            try:
                chunk = os.read(self.fd, 65536)
            except BlockingIOError:
                continue
            if not chunk:
                self._eof = True
            self._buf += chunk
        line, sep, rest = self._buf.partition(b"\n")
        self._buf = rest
        return (line + sep).decode(errors="replace")


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
