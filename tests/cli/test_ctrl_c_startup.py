"""Ctrl-C during start-up is a quiet exit 130 on every command, never a traceback (F94).

A real ``acagent`` process gets SIGINT at a sweep of moments after its first line of acagent
code runs (the child imports the entry module, writes a marker, then calls :func:`acagent._entry.main` as the console
script does): while typer, rich and the command modules import, while the command's own imports
run, while it opens the journal. Each must end with exit status 130 and no ``Traceback`` on
stderr (before: a ``KeyboardInterrupt`` traceback from inside an import, or exit 1). The
interpreter's own initialisation, before acagent code runs, is Python's and not swept.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHILD = "import os, acagent._entry as entry; os.write(1, b'R'); entry.main()"
DELAYS = [0.01, 0.03, 0.06, 0.1, 0.15, 0.2, 0.3, 0.45, 0.7]
COMMANDS = {
    "run": ["run", "--model", "openai:x", "--base-url", "http://127.0.0.1:9/v1", "hi"],
    "chat": ["chat"],
    "serve": ["serve", "--port", "0"],
    "attach": ["attach", "nosuch"],
}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_ctrl_c_at_any_moment_of_start_up_exits_130_without_a_traceback(tmp_path: Path, name: str) -> None:
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACAGENT_", "OPENAI_", "ANTHROPIC_"))}
    env.update({"PYTHONPATH": str(REPO), "ACAGENT_HOME": str(home), "OPENAI_API_KEY": "k"})
    outcomes = []
    for delay in DELAYS:
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, *COMMANDS[name]],
            cwd=tmp_path,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            assert proc.stdout is not None and proc.stdout.read(1) == b"R"
            time.sleep(delay)
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        text = err.decode(errors="replace")
        outcomes.append((delay, proc.returncode, text[-300:]))
        assert "Traceback" not in text, (name, delay, text)
        assert proc.returncode == 130, (name, delay, proc.returncode, text)
    assert all("interrupted" in text for _, _, text in outcomes), outcomes
