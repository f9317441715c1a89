"""``python -m benchmarks [--quick] [--only 1,3] [--out docs/benchmarks.md] [--peers DIR]``.

Runs each figure in its own subprocess (a fresh interpreter: no memory, imports or GC state leak
from one figure into the next, and a crash in one leaves the others standing), collects what
each returns and prints the report (see :mod:`benchmarks._report`) — to stdout unless ``--out``
names a file: a run never rewrites docs/benchmarks.md by itself. A figure that crashes or times
out is a FAIL row in the targets table. Without the ``bench`` extra the run stops with one line.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._report import FIGURES, machine_info, write_report

ROOT = Path(__file__).resolve().parent.parent


BENCH_EXTRAS = ("langgraph", "langgraph.checkpoint.sqlite", "aiosqlite", "psutil")
"""Modules of the ``bench`` extra (pyproject.toml) the figures import."""


def missing_extras() -> list[str]:
    """The :data:`BENCH_EXTRAS` that cannot be imported here."""
    import importlib.util

    out = []
    for name in BENCH_EXTRAS:
        try:
            if importlib.util.find_spec(name) is None:
                out.append(name)
        except ModuleNotFoundError:  # a parent package is absent
            out.append(name)
    return out


def crashed_figure(number: int, module: str, returncode: int, stderr: str) -> dict[str, Any]:
    """The result of a figure that crashed or timed out: its stderr, and a FAIL row for the targets table."""
    how = "timed out" if returncode == -1 else f"crashed (exit {returncode})"
    return {
        "number": number,
        "title": module,
        "measures": "",
        "text": [f"**The figure {how}:**\n\n```\n{stderr[-3000:]}\n```"],
        "targets": [{"name": f"{module} runs", "goal": "completes", "measured": how, "passed": False}],
        "profiles": [],
    }


def _peers(directory: str, rounds: int) -> dict[str, Any]:
    """Section P (benchmarks/peers.py), run in this process (it measures its children's CPU)."""
    from benchmarks import peers

    sys.stderr.write(f"peers ({directory}) ...\n")
    t0 = time.perf_counter()
    try:
        fig = peers.run(directory, rounds)
    except Exception as exc:  # a crashed comparison is a FAIL row, never a missing section
        import traceback

        fig = crashed_figure(0, "peers", 1, traceback.format_exc() + str(exc))
        fig["number"] = "P"
    fig["seconds"] = time.perf_counter() - t0
    return fig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes and few repeats (< 2 minutes)")
    parser.add_argument("--only", default="", help="comma-separated figure numbers, e.g. 1,3 (or 'peers')")
    parser.add_argument(
        "--peers",
        default=None,
        metavar="DIR",
        help="also run the one-shot task for the peer CLIs installed in DIR",
    )
    parser.add_argument(
        "--peer-rounds", type=int, default=5, help="interleaved rounds of --peers (default 5)"
    )
    parser.add_argument(
        "--out", default="-", help="report path, e.g. docs/benchmarks.md (default '-': stdout only)"
    )
    args = parser.parse_args(argv)
    missing = missing_extras()
    if missing:
        sys.stderr.write(
            f"benchmarks need the bench extra (missing: {', '.join(missing)}); "
            "install it with: pip install -e '.[bench]'\n"
        )
        return 2
    tokens = [x.strip() for x in args.only.split(",") if x.strip()]
    only = {int(x) for x in tokens if x != "peers"} or ({-1} if tokens else set())
    command = (
        "python -m benchmarks"
        + (" --quick" if args.quick else "")
        + (f" --only {args.only}" if tokens else "")
        + (f" --peers {args.peers} --peer-rounds {args.peer_rounds}" if args.peers else "")
    )
    started = time.time()
    info = machine_info(command)
    figures = []
    for number, module in FIGURES:
        if only and number not in only:
            continue
        sys.stderr.write(f"figure {number} ({module}) ...\n")
        sys.stderr.flush()
        t0 = time.perf_counter()
        with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
            cmd = [sys.executable, "-m", "benchmarks._child", module, tmp.name] + (
                ["--quick"] if args.quick else []
            )
            try:
                proc = subprocess.run(
                    cmd, cwd=ROOT, capture_output=True, text=True, timeout=300 if args.quick else 1200
                )
                returncode, stderr = proc.returncode, proc.stderr
            except subprocess.TimeoutExpired as exc:  # a hung figure must not hang the run
                err = (
                    exc.stderr.decode(errors="replace")
                    if isinstance(exc.stderr, bytes)
                    else (exc.stderr or "")
                )
                returncode, stderr = -1, f"timed out after {exc.timeout:.0f} s\n{err}"
            elapsed = time.perf_counter() - t0
            data = Path(tmp.name).read_text() if returncode == 0 else ""
        fig = json.loads(data) if data else crashed_figure(number, module, returncode, stderr)
        fig["seconds"] = elapsed
        figures.append(fig)
        sys.stderr.write(f"  done in {elapsed:.1f} s\n")
    if args.peers:
        figures.append(_peers(args.peers, args.peer_rounds))
    info["duration_s"] = time.time() - started
    info.update(machine_info(command, end=True))
    text = write_report(figures, info)
    if args.out == "-":
        sys.stdout.write(text)
    else:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
        sys.stderr.write(f"wrote {args.out} in {info['duration_s']:.0f} s\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
