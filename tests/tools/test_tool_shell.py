"""The shell tool: streaming, caps, timeout, exit codes, and F07 process-tree cancellation."""

from __future__ import annotations

import os
import re
import time
from typing import Any

import anyio
import pytest

from acagent.tools import ShellTool, ToolResult, kill_process_group, validate_arguments
from acagent.tools._process import group_members, pid_alive
from acagent.tools._shell import OUTPUT_LIMIT_CHARS, OutputCapture

pytestmark = pytest.mark.anyio

F07_COMMAND = 'bash -c \'trap "" INT TERM HUP; sleep 1000 & echo "child=$!"; while true; do sleep 1; done\''


async def shell(ctx: Any, command: str, **extra: Any) -> ToolResult:
    args, error = validate_arguments(ShellTool(), {"command": command, **extra})
    assert args is not None, error
    return await ShellTool().run(args, ctx)


class TestRun:
    async def test_stdout_and_stderr_merged_and_streamed(self, layout, make_ctx):
        result = await shell(make_ctx(), "echo out; echo err >&2")
        assert result.status == "ok"
        assert result.exit_code == 0
        assert result.content == "out\nerr\n"
        assert "".join(layout.outputs) == "out\nerr\n"

    async def test_nonzero_exit_code(self, make_ctx):
        result = await shell(make_ctx(), "echo partial; exit 3")
        assert result.exit_code == 3
        assert result.content == "partial\nexit code 3"

    async def test_no_output(self, make_ctx):
        result = await shell(make_ctx(), "true")
        assert result.content == "(no output)"

    async def test_stdin_is_empty(self, make_ctx):
        result = await shell(make_ctx(), "cat; echo done")
        assert result.content == "done\n"

    async def test_process_started_hook_gets_the_group_leader(self, make_ctx):
        pids: list[int] = []
        result = await shell(make_ctx(on_process_started=pids.append), "echo $$; ps -o pgid= -p $$")
        shell_pid, pgid = (int(x) for x in result.content.split())
        assert pids == [shell_pid] == [pgid]

    async def test_utf8_split_across_reads_survives(self, layout, make_ctx):
        result = await shell(make_ctx(), r"printf '\xc3'; sleep 0.3; printf '\xa9\n'")
        assert result.content == "é\n"
        assert len(layout.outputs) >= 1
        assert "".join(layout.outputs) == "é\n"
        assert "\ufffd" not in "".join(layout.outputs)

    async def test_invalid_utf8_is_replaced(self, make_ctx):
        result = await shell(make_ctx(), r"printf 'a\xffb\n'")
        assert result.content == "a\ufffdb\n"

    async def test_output_cap_keeps_head_and_tail(self, make_ctx):
        result = await shell(make_ctx(), "echo START; head -c 200000 /dev/zero | tr '\\0' a; echo; echo END")
        assert result.content.startswith("START\n")
        assert result.content.rstrip().endswith("END")
        m = re.search(r"\[\.\.\. (\d+) bytes omitted \.\.\.\]", result.content)
        assert m is not None
        assert len(result.content) <= OUTPUT_LIMIT_CHARS + 100
        kept = len(result.content) - len(m.group(0)) - 2
        assert kept + int(m.group(1)) == len("START\n") + 200000 + len("\nEND\n")

    async def test_nul_command_is_an_error(self, make_ctx):
        result = await shell(make_ctx(), "echo a\0b")
        assert result.status == "error"

    async def test_q1_quotes_are_bash_quotes(self, layout, make_ctx):
        """F20 q1: the string is one argv element, so its quotes cannot break out."""
        C = layout.B / "canary"
        C.mkdir()
        command = f'echo "\\"; touch {C}/q1; echo \\""'
        result = await shell(make_ctx(), command)
        assert result.content == f'"; touch {C}/q1; echo "\n'
        assert not (C / "q1").exists()

    async def test_q2_fullwidth_semicolon_is_a_word(self, layout, make_ctx):
        C = layout.B / "canary"
        C.mkdir()
        result = await shell(make_ctx(), f"echo hi；touch {C}/q2")
        assert result.content == f"hi；touch {C}/q2\n"
        assert not (C / "q2").exists()


class TestTimeoutAndLeftovers:
    async def test_timeout_kills_the_group(self, make_ctx):
        t0 = time.monotonic()
        result = await shell(make_ctx(kill_grace_s=0.5), "echo begin; sleep 30", timeout_s=0.5)
        assert time.monotonic() - t0 < 3
        assert result.status == "error"
        assert result.content.startswith("begin\n")
        assert "timed out after 0.5 s" in result.content
        assert result.data["timed_out"] is True
        assert not group_members(result.data["pgid"])

    async def test_context_timeout_caps_the_argument(self, make_ctx):
        result = await shell(make_ctx(timeout_s=0.3, kill_grace_s=0.2), "sleep 30", timeout_s=100)
        assert "timed out after 0.3 s" in result.content

    async def test_background_leftovers_are_stopped(self, make_ctx):
        t0 = time.monotonic()
        result = await shell(make_ctx(kill_grace_s=0.5), "sleep 1000 & echo bg=$!")
        assert time.monotonic() - t0 < 3
        child = int(result.content.strip().split("=")[1])
        assert not pid_alive(child)
        assert result.status == "ok"


def _wait_text(outputs: list[str], needle: str) -> bool:
    return needle in "".join(outputs)


class TestCancel:
    async def test_f07_cancel_kills_the_whole_tree(self, layout, make_ctx):
        """F07 at tool level: TERM is ignored, so the group is SIGKILLed after the grace period."""
        grace = 0.5
        interrupted: list[ToolResult] = []
        pids: list[int] = []
        ctx = make_ctx(kill_grace_s=grace, on_process_started=pids.append, on_interrupted=interrupted.append)
        finished: list[ToolResult] = []

        async def run() -> None:
            finished.append(await shell(ctx, F07_COMMAND))

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            with anyio.fail_after(10):
                while not re.search(r"child=\d+\n", "".join(layout.outputs)):
                    await anyio.sleep(0.02)
            t0 = time.monotonic()
            tg.cancel_scope.cancel()
        elapsed = time.monotonic() - t0

        assert finished == []  # cancellation was re-raised, not turned into a result
        child = int(re.search(r"child=(\d+)", "".join(layout.outputs)).group(1))
        assert grace * 0.9 <= elapsed < grace + 1  # TERM was ignored: SIGKILL after the grace period
        assert not pid_alive(child)
        assert group_members(pids[0]) == []
        with pytest.raises(ProcessLookupError):
            os.kill(pids[0], 0)  # bash itself was reaped, not left a zombie
        assert len(interrupted) == 1
        assert interrupted[0].status == "interrupted"
        assert f"child={child}" in interrupted[0].content

    async def test_cancel_with_polite_command_is_quick(self, layout, make_ctx):
        ctx = make_ctx(kill_grace_s=5)
        async with anyio.create_task_group() as tg:
            tg.start_soon(shell, ctx, "echo ready; sleep 100")
            with anyio.fail_after(10):
                while "ready" not in "".join(layout.outputs):
                    await anyio.sleep(0.02)
            t0 = time.monotonic()
            tg.cancel_scope.cancel()
        assert time.monotonic() - t0 < 2  # TERM honoured: no need to wait for the grace period

    async def test_kill_process_group_for_recovery(self):
        """An orphaned group (as recovery finds it) is killed, TERM-ignoring members too."""
        proc = await anyio.open_process(
            ["bash", "-c", 'trap "" TERM; sleep 1000 & sleep 1000'], start_new_session=True
        )
        try:
            with anyio.fail_after(5):
                while len(group_members(proc.pid)) < 3:
                    await anyio.sleep(0.02)
            t0 = time.monotonic()
            assert await kill_process_group(proc.pid, 0.3) is True
            assert time.monotonic() - t0 < 1.5
            assert group_members(proc.pid) == []
        finally:
            await proc.aclose()
        assert await kill_process_group(proc.pid, 0.3) is True  # already gone: no error


class TestOutputCapture:
    def test_small_output_is_kept_whole(self):
        cap = OutputCapture(limit=10)
        cap.add("abc")
        cap.add("def")
        assert cap.text() == "abcdef"

    def test_head_and_tail(self):
        cap = OutputCapture(limit=10)
        for ch in "abcdefghijklmnopqrstuvwxyz":
            cap.add(ch)
        assert cap.text() == "abcde\n[... 16 bytes omitted ...]\nvwxyz"

    def test_omitted_counts_bytes(self):
        cap = OutputCapture(limit=2)
        cap.add("a" + "é" * 5 + "z")
        assert cap.text() == "a\n[... 10 bytes omitted ...]\nz"
