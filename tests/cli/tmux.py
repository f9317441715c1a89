"""A private tmux server for terminal tests, and mock streams that pace their text.

Each test starts its own tmux server (``-L`` with a unique socket name) running an interactive
bash in an empty working directory, types commands and keys with ``send-keys`` and polls
``capture-pane`` until the expected text shows (no fixed sleeps).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.mockprovider import Script
from tests.mockprovider import _oa_chunk as _oa

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
HAVE_TMUX = shutil.which("tmux") is not None


def save_capture(name: str, screen: str) -> None:
    """Keep a terminal capture in docs/screenshots/ when ``ACAGENT_SCREENSHOTS=1`` (never by default)."""
    if os.environ.get("ACAGENT_SCREENSHOTS") == "1":
        (SCREENSHOTS / name).write_text(screen + "\n")


def slow_text(words: list[str], *, sleep_s: float = 0.1, pause_after: int | None = None) -> Script:
    """An OpenAI stream sending one word per chunk, ``sleep_s`` apart (optionally pausing)."""
    chunks = [_oa({"role": "assistant", "content": ""}), *(_oa({"content": w}) for w in words)]
    chunks += [_oa({}, "stop"), b"data: [DONE]\n\n"]
    return Script(chunks=chunks, sleeps=sleep_s, pause_after=pause_after)


class Tmux:
    """One private tmux server with one pane running an interactive bash."""

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        self.socket = f"acagent-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.cwd = cwd
        self.env = env
        rcfile = cwd.parent / "bashrc"
        rcfile.write_text("PS1='$ '\nunset HISTFILE\n")
        self._tmux(
            "new-session", "-d", "-s", "main", "-x", "120", "-y", "40", "-c", str(cwd),
            f"bash --noprofile --rcfile {rcfile} -i",
        )  # fmt: skip
        self.wait_for(lambda screen: screen.rstrip().endswith("$"), what="the shell prompt")

    def _tmux(self, *args: str) -> str:
        proc = subprocess.run(
            ["tmux", "-L", self.socket, *args], env=self.env, capture_output=True, text=True, timeout=10
        )
        if proc.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)} failed: {proc.stderr}")
        return proc.stdout

    def type(self, text: str, *, enter: bool = True) -> None:
        """Type ``text`` literally, then Enter."""
        self._tmux("send-keys", "-t", "main", "-l", text)
        if enter:
            self._tmux("send-keys", "-t", "main", "Enter")

    def keys(self, *keys: str) -> None:
        """Press keys by tmux name (``C-c``, ``C-d``, ``Enter``)."""
        self._tmux("send-keys", "-t", "main", *keys)

    def screen(self) -> str:
        """The pane with its scrollback, wrapped lines joined, without the blank rows below."""
        return self._tmux("capture-pane", "-p", "-J", "-t", "main", "-S", "-500").rstrip()

    def wait_for(self, check: Callable[[str], object], *, timeout: float = 20.0, what: str = "") -> str:
        """Poll the pane until ``check(screen)`` is truthy; return the screen."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if check(screen):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out after {timeout}s waiting for {what or check}; screen:\n{screen}"
                )
            time.sleep(0.05)

    def wait_text(self, text: str, *, timeout: float = 20.0, after: int = 0) -> str:
        """Wait until ``text`` occurs ``after`` characters or more into the screen."""
        return self.wait_for(lambda s: text in s[after:], timeout=timeout, what=repr(text))

    def wait_chat_prompt(self, *, timeout: float = 20.0) -> str:
        """Wait until the last non-empty line is the empty chat prompt ``›``."""
        return self.wait_for(lambda s: _last_line(s) == "›", timeout=timeout, what="the chat prompt")

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=10)


def _last_line(screen: str) -> str:
    lines = [line for line in screen.splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def tmux_env(home: Path) -> dict[str, str]:
    """The environment of a test terminal: this venv first on PATH, no provider or acagent vars."""
    bin_dir = str(Path(sys.executable).parent)
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("ACAGENT_", "OPENAI_", "ANTHROPIC_", "TMUX"))
    }
    env.update(ACAGENT_HOME=str(home), OPENAI_API_KEY="k", PATH=bin_dir + os.pathsep + env.get("PATH", ""))
    if not (Path(bin_dir) / "acagent").exists():  # pragma: no cover  # the venv always has the script
        pytest.skip("the acagent console script is not installed next to the interpreter")
    return env


@pytest.fixture
def term(tmp_path: Path) -> Iterator[Tmux]:
    work = tmp_path / "work"
    work.mkdir()
    tmux = Tmux(work, tmux_env(tmp_path / "home"))
    try:
        yield tmux
    finally:
        tmux.close()
