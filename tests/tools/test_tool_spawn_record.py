"""F45: a tool started just before a crash never survives recovery.

A child process runs the real ``shell`` tool and records the process group the way the runner
does (a separate write after the spawn); the test SIGKILLs the child at random offsets around the
spawn, then recovers the way the runner does (:func:`kill_call_processes` with whatever pgid was
recorded) and counts the tool processes left: always 0. ``ACAGENT_SPAWN_ROUNDS`` raises the
round count (default 20).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from acagent.tools import kill_call_processes

pytestmark = pytest.mark.anyio

ROUNDS = int(os.environ.get("ACAGENT_SPAWN_ROUNDS", "20"))

CHILD = textwrap.dedent(
    """
    import sys, anyio
    from pathlib import Path
    from acagent.tools import ShellTool, ToolContext, validate_arguments
    session_id, call_id, command, record = sys.argv[1:5]

    async def main():
        def on_pid(pid):  # the runner records the group in a commit of its own, after the spawn
            async def commit():
                await anyio.sleep(0.005)
                Path(record).write_text(str(pid))
            tg.start_soon(commit)
        ctx = ToolContext(cwd=Path.cwd(), session_id=session_id, tool_call_id=call_id,
                          emit_output=lambda _: None, on_process_started=on_pid)
        args, _ = validate_arguments(ShellTool(), {"command": command})
        async with anyio.create_task_group() as tg:
            sys.stdout.write("spawning\\n"); sys.stdout.flush()
            await ShellTool().run(args, ctx)

    anyio.run(main)
    """
)


def processes_with(arg: str) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if arg.encode() in (entry / "cmdline").read_bytes().split(b"\0"):
                    out.append(int(entry.name))
            except OSError:
                continue
    return out


async def test_kill_around_the_spawn_leaves_no_orphan(tmp_path: Path) -> None:
    """Every round: SIGKILL at a random offset (0–25 ms after the child starts spawning), then
    recovery; no ``sleep`` of the round survives."""
    orphans: list[tuple[int, float]] = []
    rng = random.Random(45)
    for i in range(ROUNDS):
        unique = f"300.{os.getpid()}{i:04d}"
        record = tmp_path / f"pgid-{i}"
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, "ses_f45", f"call_{i}", f"sleep {unique}", str(record)],
            stdout=subprocess.PIPE,
            cwd=tmp_path,
        )
        try:
            assert child.stdout is not None and child.stdout.readline() == b"spawning\n"
            offset = rng.uniform(0, 0.025)
            time.sleep(offset)
            child.send_signal(signal.SIGKILL)
            child.wait(10)
            time.sleep(0.05)  # let a fork in flight reach its exec
            text = record.read_text() if record.exists() else ""
            pgid = int(text) if text.strip() else None
            await kill_call_processes("ses_f45", f"call_{i}", pgid, 0.2)
            left = processes_with(unique)
            if left:
                orphans.append((i, offset))
        finally:
            child.kill()
            child.wait(10)
            for pid in processes_with(unique):
                os.kill(pid, signal.SIGKILL)
    assert orphans == []
