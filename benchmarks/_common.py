"""Shared pieces of the benchmarks: the scripted workload, statistics, I/O counters, results.

The workload is the issue's: a scripted in-process model (no network, fixed outputs), ~1 KB
messages, one tool call per turn (a tool call every other step), so the runtime itself is measured.
The same sizes are used for the peers (LangGraph, the naive JSON file).
"""

from __future__ import annotations

import cProfile
import functools
import io
import os
import pstats
import re
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

__all__ = [
    "ASSISTANT_TEXT",
    "TOOL_ARG",
    "USER_TEXT",
    "Figure",
    "Profiled",
    "Stats",
    "Target",
    "bench_settings",
    "echo_tools",
    "io_written",
    "profile_top",
    "scripted_factory",
    "stats",
    "text_slice",
    "tmp_home",
    "user_text",
]


def _corpus() -> str:
    """Real, non-repetitive prose and code: CPython's language-reference topics (``pydoc_data``).

    The texts used to be one sentence repeated 15 times, which zlib compresses 12×: a figure
    measuring bytes (figure 3) could then pass on repetition alone. These slices compress about
    2× on their own, like real conversation text.
    """
    from pydoc_data.topics import topics

    return re.sub(r"[ \t]+", " ", "".join(topics[k] for k in sorted(topics)))


_CORPUS = _corpus()


def text_slice(length: int, index: int) -> str:
    """Slice ``index`` (0, 1, …) of ``length`` characters of the corpus, deterministic, distinct per index."""
    start = (index * 7919) % (len(_CORPUS) - length)
    return _CORPUS[start : start + length]


USER_TEXT = text_slice(1000, 0)
"""The user message of every turn (1,000 characters of real prose)."""
ASSISTANT_TEXT = text_slice(1000, 1)
"""The final assistant answer of every turn (1,000 characters)."""
PREAMBLE_TEXT = text_slice(200, 2)
"""The assistant text that accompanies the tool call (200 characters)."""
TOOL_ARG = text_slice(800, 3)
"""The echo tool's argument, echoed back as its result (800 characters)."""


def user_text(turn: int) -> str:
    """A distinct 1,000-character user message for turn ``turn`` (benchmarks that vary the texts)."""
    return text_slice(1000, 2 * turn + 8)  # even indices; the scripted replies use odd ones


# ---------------------------------------------------------------------------------- the workload


def echo_tools() -> dict[str, Any]:
    """``{"echo": EchoTool()}``: a trivial read-only in-process tool (no subprocess, no approval).

    A fresh instance of one class, as :func:`acagent.tools.default_tools` gives (a class made per
    call would defeat the process-wide schema cache and cost every session a pydantic schema).
    """
    return {"echo": _echo_tool_class()()}


@functools.cache
def _echo_tool_class() -> Any:
    from pydantic import BaseModel, ConfigDict

    from acagent.tools import Tool, ToolResult

    class EchoArgs(BaseModel):
        model_config = ConfigDict(extra="forbid")
        text: str

    class EchoTool(Tool):
        name: ClassVar[str] = "echo"
        description: ClassVar[str] = "Echo the text back."
        args_model: ClassVar[type[BaseModel]] = EchoArgs
        idempotent: ClassVar[bool] = True
        read_only: ClassVar[bool] = True

        async def run(self, args: Any, ctx: Any) -> Any:
            return ToolResult(args.text)

    return EchoTool


def scripted_factory(
    *, tool_calls: bool = True, delay_s: float = 0.0, vary: bool = False
) -> Callable[[Any], Any]:
    """A ScriptedModel reply factory: a tool call every other step, ~1 KB texts.

    After a user text the model answers with a short preamble and one ``echo`` call; after the
    tool result it answers with the final 1 KB text. With ``tool_calls=False`` every reply is the
    final text. With ``vary=True`` every reply takes other slices of the corpus (one index per
    call of the factory), so no two turns repeat a text (figure 3 measures bytes).
    """
    import itertools

    from acagent.testing import Reply, ToolCallSpec

    calls = itertools.count(1)

    def factory(request: Any) -> Any:
        last = request.messages[-1]
        answered = any(getattr(p, "part_kind", "") == "tool_result" for p in last.parts)
        k = 6 * next(calls)
        final, preamble, arg = (
            (text_slice(1000, k + 1), text_slice(200, k + 3), text_slice(800, k + 5))
            if vary
            else (ASSISTANT_TEXT, PREAMBLE_TEXT, TOOL_ARG)
        )
        if not tool_calls or answered:
            return Reply(text=final, delay_s=delay_s)
        return Reply(text=preamble, tool_calls=[ToolCallSpec("echo", {"text": arg})], delay_s=delay_s)

    return factory


def bench_settings(home: Path, **overrides: Any) -> Any:
    """Settings for a benchmark registry: ``home``, tools auto-approved, no environment read."""
    from acagent.settings import load_settings

    return load_settings({"home": str(home), "auto_approve": True, **overrides}, env={})


@contextmanager
def tmp_home(prefix: str) -> Iterator[Path]:
    """A fresh data directory on the same disk as the repository's temp dir, removed afterwards."""
    import shutil

    path = Path(tempfile.mkdtemp(prefix=f"acagent-bench-{prefix}-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


# ---------------------------------------------------------------------------------- measurements


@dataclass
class Stats:
    """Summary of samples (in the unit the caller used)."""

    n: int
    median: float
    p95: float
    p99: float
    min: float
    max: float

    def fmt(self, digits: int = 2, *, p99: bool = False) -> str:
        """``median (p95 x, min–max a–b)``."""
        d = digits
        tail = f"p99 {self.p99:.{d}f}" if p99 else f"p95 {self.p95:.{d}f}"
        return f"{self.median:.{d}f} ({tail}, {self.min:.{d}f}–{self.max:.{d}f})"


def _pct(sorted_xs: list[float], q: float) -> float:
    if len(sorted_xs) == 1:
        return sorted_xs[0]
    k = (len(sorted_xs) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (k - lo)


def stats(samples: list[float]) -> Stats:
    """Median, p95, p99, min and max of ``samples`` (linear interpolation between ranks)."""
    xs = sorted(samples)
    return Stats(len(xs), statistics.median(xs), _pct(xs, 0.95), _pct(xs, 0.99), xs[0], xs[-1])


def io_written() -> int:
    """Bytes this process has handed to ``write()`` so far (``wchar`` of ``/proc/self/io``), all threads."""
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("wchar:"):
                return int(line.split()[1])
    return 0


def dir_bytes(path: Path) -> int:
    """Total size of the files under ``path``."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


class Profiled:
    """Context manager: cProfile the enclosed block (this thread); :attr:`text` is the report."""

    def __init__(self, *, limit: int = 14, focus: str = "acagent") -> None:
        self.limit = limit
        self.focus = focus
        self.text = ""
        self._prof = cProfile.Profile()

    def __enter__(self) -> Profiled:
        self._t0 = time.perf_counter()
        self._prof.enable()
        return self

    def __exit__(self, *exc: object) -> None:
        self._prof.disable()
        self.text = format_profile(self._prof, time.perf_counter() - self._t0, self.limit, self.focus)


def profile_top(fn: Callable[[], Any], *, limit: int = 14, focus: str = "acagent") -> str:
    """Run ``fn()`` under cProfile; return :func:`format_profile` of it."""
    with Profiled(limit=limit, focus=focus) as p:
        fn()
    return p.text


def format_profile(
    prof: cProfile.Profile | str, wall: float, limit: int, focus: str, where: str = "event-loop thread"
) -> str:
    """The functions with the most cumulative time (those in ``focus``/) and the most own time (all).

    ``prof`` is a profiler or the path of a saved profile (``python -m cProfile -o``).
    """
    st = pstats.Stats(prof)
    entries = st.stats  # type: ignore[attr-defined]
    rows = []
    for (filename, line, name), (_cc, nc, tt, ct, _callers) in entries.items():
        rows.append((filename, line, name, nc, tt, ct))
    out = io.StringIO()
    out.write(f"profiled wall time {wall:.3f} s (cProfile, wall clock, {where})\n\n")
    out.write(f"cumulative time, functions in {focus}/:\n")
    for filename, line, name, nc, _tt, ct in sorted(
        (r for r in rows if f"/{focus}/" in r[0]), key=lambda r: -r[5]
    )[:limit]:
        out.write(f"  {ct:8.3f} s  {nc:7d} calls  {_short(filename)}:{line} {name}\n")
    out.write("\nown time, all functions:\n")
    for filename, line, name, nc, tt, _ct in sorted(rows, key=lambda r: -r[4])[:limit]:
        out.write(f"  {tt:8.3f} s  {nc:7d} calls  {_short(filename)}:{line} {name}\n")
    return out.getvalue()


ROOT = str(Path(__file__).resolve().parent.parent) + "/"


def _short(filename: str) -> str:
    for marker in ("/site-packages/", ROOT, "/lib/python3.11/"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename


# ---------------------------------------------------------------------------------- results


@dataclass
class Target:
    """A goal from the issue and whether this run met it."""

    name: str
    goal: str
    measured: str
    passed: bool | None
    """None: not evaluated (skipped)."""


@dataclass
class Figure:
    """What one figure module hands to the report."""

    number: int
    title: str
    text: list[str] = field(default_factory=list)
    """Markdown paragraphs and tables, in order."""
    targets: list[Target] = field(default_factory=list)
    profiles: list[tuple[str, str]] = field(default_factory=list)
    """``(what was profiled, profiler output)`` for failed targets."""
    seconds: float = 0.0

    def table(self, header: list[str], rows: list[list[Any]], caption: str | None = None) -> None:
        """Append a markdown table."""
        lines = []
        if caption:
            lines.append(caption + "\n")
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|")
        for row in rows:
            lines.append("| " + " | ".join(str(c) for c in row) + " |")
        self.text.append("\n".join(lines))

    def to_json(self) -> dict[str, Any]:
        """Plain data for the parent process."""
        return asdict(self)


def env_flag(name: str) -> bool:
    """True if the environment variable is set to a non-empty value other than 0."""
    return os.environ.get(name, "") not in ("", "0")
