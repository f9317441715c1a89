"""CPU and peak memory of a whole process tree (a CLI and everything it starts).

``run_tree(argv, env, cwd, timeout_s)`` makes this process a *child subreaper*
(``prctl(PR_SET_CHILD_SUBREAPER)``), so a grandchild whose parent exits (a daemonised helper, a
native binary started by a node wrapper) is re-parented here instead of to init, and reaps every
descendant: ``getrusage(RUSAGE_CHILDREN)`` before and after then holds the user + system CPU
of the whole tree (the kernel adds a reaped child's own children's times to it). Peak memory is
sampled every 5 ms from ``/proc``: the sum over the live descendants of each one's ``VmHWM``
(its own peak RSS so far), maximised over the samples — a process's peak between two samples is
not missed, only a short-lived process that starts and exits between two samples. The caller's
other threads (the mock model) are not in the tree, so their CPU is not counted.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["TreeRun", "run_tree"]

_PR_SET_CHILD_SUBREAPER = 36


@dataclass
class TreeRun:
    """What one run of a process tree cost."""

    returncode: int | None
    """Exit status of the top process (None: killed after the timeout)."""
    wall_s: float
    cpu_s: float
    """User + system CPU of every process of the tree, in seconds."""
    peak_rss_mb: float
    """Maximum over the samples of the summed ``VmHWM`` of the live processes, in MB (an upper
    bound: a forked child counts the pages it still shares with its parent)."""
    largest_mb: float
    """The largest ``VmHWM`` of a single process of the tree, in MB."""
    processes: int
    """Distinct processes seen by the sampler."""
    stdout: str
    stderr: str


def _subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")


def _children_of(pid: int) -> list[int]:
    out: list[int] = []
    task = Path(f"/proc/{pid}/task")
    try:
        for tid in task.iterdir():
            try:
                out += [int(c) for c in (tid / "children").read_text().split()]
            except OSError:
                continue
    except OSError:
        pass
    return out


def _descendants(root: int) -> list[int]:
    seen, todo = [], _children_of(root)
    while todo:
        pid = todo.pop()
        seen.append(pid)
        todo += _children_of(pid)
    return seen


def _hwm_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_tree(argv: list[str], env: dict[str, str], cwd: Path, timeout_s: float) -> TreeRun:
    """Run ``argv`` and measure its whole process tree (see module docstring).

    Every descendant is waited for (at most 5 s after the top process exits, then killed).
    No other child process of this process may run meanwhile (their CPU would be counted).
    """
    _subreaper()
    me = os.getpid()
    out_path, err_path = cwd / ".tree-stdout", cwd / ".tree-stderr"
    cpu0 = _children_cpu()
    peak = [0, 0]
    seen: set[int] = set()
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            pids = _descendants(me)
            seen.update(pids)
            hwm = [_hwm_kb(p) for p in pids]
            peak[0] = max(peak[0], sum(hwm))
            peak[1] = max(peak[1], *hwm, 0)
            stop.wait(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    t0 = time.perf_counter()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(
            argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True
        )
        sampler.start()
        returncode: int | None = None
        deadline = t0 + timeout_s
        while returncode is None and time.perf_counter() < deadline:
            pid, status = os.waitpid(proc.pid, os.WNOHANG)
            if pid:
                returncode = os.waitstatus_to_exitcode(status)
            else:
                time.sleep(0.005)
        wall = time.perf_counter() - t0
        if returncode is None:
            _kill_tree(proc.pid)
        _reap_all(time.perf_counter() + 5.0)
    proc.returncode = returncode if returncode is not None else -9  # reaped above
    stop.set()
    sampler.join()
    return TreeRun(
        returncode=returncode,
        wall_s=wall,
        cpu_s=_children_cpu() - cpu0,
        peak_rss_mb=peak[0] / 1024,
        largest_mb=peak[1] / 1024,
        processes=len(seen),
        stdout=out_path.read_text(errors="replace"),
        stderr=err_path.read_text(errors="replace"),
    )


def _kill_tree(pid: int) -> None:
    for p in [pid, *_descendants(os.getpid())]:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _reap_all(deadline: float) -> None:
    """Wait for every remaining descendant (re-parented here); kill them after ``deadline``."""
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid:
            continue
        if time.perf_counter() > deadline:
            for p in _descendants(os.getpid()):
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            deadline = float("inf")
        time.sleep(0.01)
