"""F121: `acagent import` of something that is not a transcript file is one line, never a hang,
a memory flood or a traceback.

``import /dev/zero`` read until the memory ran out (a ``MemoryError`` traceback under a limit, the
whole machine's memory without one), ``import FIFO`` waited for a writer forever, and a transcript
bigger than the memory the process may use was a ``MemoryError`` traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

LIMITED = textwrap.dedent(
    """
    import resource, sys
    from acagent.cli import main
    def vm():
        for line in open("/proc/self/status"):
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    resource.setrlimit(resource.RLIMIT_AS, (vm() + int(sys.argv[1]), resource.RLIM_INFINITY))
    sys.argv = ["acagent", "import", sys.argv[2]]
    main()
    """
)


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACAGENT_", "OPENAI_", "ANTHROPIC_"))}
    return {**env, "ACAGENT_HOME": str(home)}


def _one_line(p: subprocess.CompletedProcess[str], words: str) -> None:
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], p.stderr[-3000:]


def test_a_device_or_a_pipe_is_refused_at_once_f121(tmp_path: Path) -> None:
    fifo = tmp_path / "transcript.jsonl"
    os.mkfifo(fifo)
    for source in ("/dev/zero", str(fifo)):
        p = _limited_import(tmp_path, source, timeout=30)
        _one_line(p, "is not a regular file")


def _limited_import(tmp_path: Path, source: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """``acagent import SOURCE`` with at most 150 MiB more address space than at its start."""
    return subprocess.run(
        [sys.executable, "-c", LIMITED, str(150 * 1024 * 1024), source],
        env=_env(tmp_path / "home"),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def test_a_transcript_bigger_than_the_memory_is_one_line_f121(tmp_path: Path) -> None:
    big = tmp_path / "big.jsonl"
    with open(big, "wb") as f:
        f.truncate(400 * 1024 * 1024)  # sparse: 400 MiB of NULs (a torn tail), no disk used
    p = _limited_import(tmp_path, str(big), timeout=120)
    _one_line(p, "does not fit in the memory")


def _transcript(path: Path, created: dict[str, object]) -> Path:
    records = [
        {"seq": 1, "ts": "2026-01-01T00:00:00Z", "session_id": "ses_x1", "type": "session.created", "payload": created},
        {"seq": 2, "ts": "2026-01-01T00:00:01Z", "session_id": "ses_x1", "type": "user.message",
         "payload": {"turn_id": "turn_1", "text": "hi"}},
    ]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_a_transcript_without_an_absolute_working_directory_is_refused_f124(tmp_path: Path) -> None:
    """A relative ``cwd`` was imported as it was: the session's workspace (where its tools run)
    then moved with the directory each later command ran in; a ``session.created`` without one
    was refused as "the first record is a session.created record, not session.created"."""
    for created, words in [
        ({"cwd": "relative/dir", "model": "openai:mock"}, "'relative/dir' is not an absolute path"),
        ({"model": "openai:mock"}, "lacks its working directory (cwd)"),
    ]:
        file = _transcript(tmp_path / "t.jsonl", created)
        p = _limited_import(tmp_path, str(file), timeout=60)
        _one_line(p, words)
        assert "line 1" in p.stderr
    file = _transcript(tmp_path / "t.jsonl", {"cwd": str(tmp_path), "model": "openai:mock"})
    ok = _limited_import(tmp_path, str(file), timeout=60)
    assert ok.returncode == 0 and "imported session" in ok.stdout, ok.stderr
