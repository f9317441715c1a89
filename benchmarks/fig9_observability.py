"""Figure 9: the cost of metrics and tracing per turn, and ``acagent usage`` over 10,000 sessions.

- **Metrics and tracing, on vs off**: runtime CPU (``time.process_time()``, all threads of this
  process, the strict mock's included — the same in both phases) of a one-step text turn through
  the real registry, runner, journal and OpenAI adapter against the strict mock
  (``tests/mockprovider.py``), first with both off (the default: nothing is imported), then with
  the Prometheus recorder on and spans exported over OTLP/HTTP to a local receiver that answers
  200 (a real exporter, a real HTTP round trip per batch), in the same run.
- **``acagent usage``**: 10,000 sessions with 3 priced LLM calls each, seeded in the journal's
  ``usage`` table, then the report grouped by session, model and day, timed in-process (the
  journal query and the late pricing) and as the real CLI (``acagent usage --json``, a fresh
  interpreter, CPU time, with ``acagent --version`` as the start-up anchor).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio

from benchmarks._common import Figure, Target, stats

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


class _Sink(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


async def _turns(home: Path, base_url: str, n: int) -> list[float]:
    from acagent.runner import SessionRegistry
    from acagent.settings import load_settings

    s = load_settings({"home": str(home), "base_url": base_url, "model": "openai:mock"}, env={})
    out = []
    async with SessionRegistry.open(s) as reg:
        row = await reg.create_session(str(home), model="openai:mock")
        runner = await reg.get_runner(row.id)
        await runner.run_turn("warm up")
        for i in range(n):
            t0 = time.process_time()
            await runner.run_turn(f"turn {i}")
            out.append((time.process_time() - t0) * 1000)
    return out


def _seed_usage(db_path: Path, sessions: int) -> None:
    db = sqlite3.connect(db_path)
    db.execute("BEGIN")
    for i in range(sessions):
        sid = f"ses_bench{i:08d}"
        db.execute(
            "INSERT INTO session (id, status, cwd, title, created_at, updated_at, last_seq) VALUES (?, 'done', '/', ?, '', '', 0)",
            (sid, f"session {i}"),
        )
        for k in range(3):
            db.execute(
                "INSERT INTO usage (session_id, request_id, ts, day, model, input_tokens, output_tokens, cost_usd)"
                " VALUES (?, ?, ?, ?, ?, 1000, 100, ?)",
                (
                    sid,
                    f"r{k}",
                    f"2026-11-{1 + i % 28:02d}T00:00:00Z",
                    f"2026-11-{1 + i % 28:02d}",
                    "openai:gpt-4o-mini",
                    None if k == 2 else 0.0002,
                ),
            )
    db.execute("COMMIT")
    db.close()


def run(quick: bool = False) -> Figure:
    """Measure both parts (see the module docstring)."""
    from tests.mockprovider import MockProvider, openai_text

    fig = Figure(
        9, "Observability: metrics and tracing per turn (on vs off); acagent usage over 10,000 sessions"
    )
    fig.text.append(__doc__.split("\n\n", 1)[1])
    n = 10 if quick else 150  # medians of 150 turns: 40 moved the ratio by ±0.2 between runs
    with tempfile.TemporaryDirectory() as tmp, MockProvider() as mock:
        mock.default = lambda body: openai_text("ok", usage=(10, 2))
        off = stats(anyio.run(_turns, Path(tmp) / "off", mock.openai_base_url, n))
        sink = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
        threading.Thread(target=sink.serve_forever, daemon=True).start()
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{sink.server_address[1]}"
        from acagent.obs import configure_tracing, enable_metrics, flush_tracing

        enable_metrics()
        configure_tracing(True)
        on = stats(anyio.run(_turns, Path(tmp) / "on", mock.openai_base_url, n))
        flush_tracing()
        sink.shutdown()
    ratio = on.median / off.median
    fig.table(
        ["phase", "turns", "CPU ms per turn (median)", "p95"],
        [
            ["off (default)", n, f"{off.median:.2f}", f"{off.p95:.2f}"],
            ["metrics + traces on", n, f"{on.median:.2f}", f"{on.p95:.2f}"],
        ],
    )
    fig.targets.append(
        Target("metrics + tracing cost per turn", "≤ 1.25× off", f"{ratio:.2f}×", ratio <= 1.25)
    )

    sessions = 2_000 if quick else 10_000
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)

        async def open_and_close() -> None:
            from acagent.store import SqliteJournal

            j = await SqliteJournal.open(home / "acagent.db")
            await j.aclose()

        anyio.run(open_and_close)
        _seed_usage(home / "acagent.db", sessions)

        async def report(by: str) -> float:
            from acagent.store import SqliteJournal
            from acagent.usage import PriceBook

            j = await SqliteJournal.open(home / "acagent.db")
            try:
                book = PriceBook()
                book.rates("openai:gpt-4o-mini")  # the price table import is not the query's cost
                t0 = time.perf_counter()
                rows = await j.usage_report(by=by, price=book.price)
                assert rows
                return time.perf_counter() - t0
            finally:
                await j.aclose()

        rows = [[by, f"{anyio.run(report, by) * 1000:.0f}"] for by in ("session", "model", "day")]
        env = {**os.environ, "ACAGENT_HOME": str(home), "PYTHONPATH": str(ROOT)}

        def cpu(*args: str) -> float:
            t0 = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-m", "acagent", *args], env=env, capture_output=True, timeout=120
            )
            assert proc.returncode == 0, proc.stderr[-500:]
            return time.perf_counter() - t0

        cli_s = min(cpu("usage", "--json") for _ in range(3))
        anchor_s = min(cpu("--version") for _ in range(3))  # start-up of the same interpreter, same run
    fig.table(["--by", f"report over {sessions:,} sessions, ms"], rows)
    fig.text.append(
        f"`acagent usage --json` over {sessions:,} sessions, fresh process: {cli_s:.2f} s CPU "
        f"(best of 3); `acagent --version` in the same run: {anchor_s:.2f} s CPU."
    )
    extra = cli_s - anchor_s
    fig.targets.append(
        Target(
            f"acagent usage over {sessions:,} sessions",
            "≤ 1 s CPU beyond start-up",
            f"+{extra:.2f} s",
            extra <= 1.0,
        )
    )
    return fig
