"""A closed or failing stdin/stdout is one line and an exit code, never a traceback.

Real ``acagent`` subprocesses: stdin closed (``<&-``), stdout a pipe whose reader left
(``run --json | head -1``), stdout on a full device (``> /dev/full``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.mockprovider import MockProvider, Script, openai_text


def _close_stdin() -> None:
    os.close(0)


def test_closed_stdin_is_an_empty_stdin(cli: Any, mock: MockProvider, workspace: Path) -> None:
    """``run -`` with fd 0 closed says stdin held no prompt; ``run PROMPT`` still answers."""
    base = ["-m", "acagent", "run", "--model", "openai:mock", "--base-url", mock.openai_base_url]
    mock.script(openai_text("answered"))
    procs = [
        subprocess.run(
            [sys.executable, *base, *args],
            cwd=workspace,
            env=cli.env,
            capture_output=True,
            text=True,
            timeout=60,
            preexec_fn=_close_stdin,
        )
        for args in (["-"], ["hi"])
    ]
    assert (procs[0].returncode, procs[0].stderr) == (
        2,
        "acagent: error: stdin held no prompt; pipe some text or give a PROMPT\n",
    )
    assert (procs[1].returncode, procs[1].stdout, procs[1].stderr) == (0, "answered\n", "")


def test_reader_gone_is_one_line(cli: Any, mock: MockProvider, workspace: Path) -> None:
    """``run --json | head -1``: the write after the reader left is one line, exit 1."""
    text = openai_text("late answer")
    mock.script(Script(chunks=[text[:10], text[10:]], pause_after=1))
    proc = cli.popen(
        "run", "--json", "--model", "openai:mock", "--base-url", mock.openai_base_url, "hi", cwd=workspace
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        assert '"seq":1' in proc.stdout.readline()
        mock.wait_paused()
        proc.stdout.close()  # the reader leaves before the answer streams
        mock.release()
        err = proc.stderr.read()
        assert proc.wait(timeout=60) == 1
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert err == "acagent: error: Broken pipe (writing the output)\n"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
def test_full_stdout_is_one_line(cli: Any, workspace: Path) -> None:
    """``sessions list > /dev/full`` and ``doctor > /dev/full``: one line, exit 1."""
    for args in (["sessions", "list"], ["doctor"]):
        with open("/dev/full", "w") as full:
            proc = subprocess.run(
                [sys.executable, "-m", "acagent", *args],
                cwd=workspace,
                env=cli.env,
                stdout=full,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                text=True,
                timeout=60,
            )
        assert (proc.returncode, proc.stderr) == (1, "acagent: error: No space left on device\n"), args
