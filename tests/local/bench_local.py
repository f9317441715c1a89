"""Measure the local model through the real provider path (not collected by pytest).

    python tests/local/bench_local.py [--threads N] [--runs 3] [--max-tokens 200]

Prints: xllamacpp import time, model load (server start) time, then per run the first-token
latency (request sent → first text delta), decode tokens/s (output tokens / wall time after
the first token), end-to-end tokens/s, and tokens per CPU-second of this process (all threads:
what one thread would give on an idle CPU), and finally the process RSS and load average.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from acagent.messages import Message, TextPart  # noqa: E402
from acagent.providers import ModelRequest, TextDelta  # noqa: E402
from acagent.providers._local import create_provider, default_threads  # noqa: E402
from acagent.settings import load_settings  # noqa: E402

PROMPTS = [
    "What is the capital of France?",
    "Write a short poem about the sea.",
    "Explain what a hash table is in three sentences.",
]


def cpu_s() -> float:
    """CPU time of this process (all threads), in seconds."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def rss_mb() -> float:
    """Resident set size of this process, in MB (from /proc/self/status)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def main(threads: int, runs: int, max_tokens: int) -> None:
    t0 = time.perf_counter()
    import xllamacpp  # noqa: F401

    import_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as home:
        settings = load_settings({"home": home}, env={})
        settings.providers.local_threads = threads
        rss0 = rss_mb()
        provider = create_provider("smollm2-135m", settings)
        t0 = time.perf_counter()
        await provider.start()
        load_s = time.perf_counter() - t0
        print(
            f"threads={threads} import_xllamacpp={import_s:.3f}s load={load_s:.3f}s rss_before={rss0:.0f}MB"
        )
        firsts, decode_rates, e2e_rates, cpu_rates = [], [], [], []
        try:
            for i in range(runs):
                prompt = PROMPTS[i % len(PROMPTS)]
                request = ModelRequest(
                    system="You are a helpful assistant.",
                    messages=[Message(role="user", parts=[TextPart(text=prompt)])],
                    tools=[],
                    request_id=f"bench-{i}",
                    max_tokens=max_tokens,
                )
                t0, c0 = time.perf_counter(), cpu_s()
                first = None
                async with provider.request_stream(request) as stream:
                    async for event in stream:
                        if isinstance(event, TextDelta) and first is None:
                            first = time.perf_counter()
                    response = stream.get()
                end, c1 = time.perf_counter(), cpu_s()
                if first is None:
                    print(f"  run {i}: no text (finish_reason={response.finish_reason!r})")
                    continue
                n = response.usage.output_tokens
                firsts.append(first - t0)
                decode_rates.append((n - 1) / (end - first) if end > first else float("nan"))
                e2e_rates.append(n / (end - t0))
                cpu_rates.append(n / (c1 - c0))
                print(
                    f"  run {i}: first_token={first - t0:.3f}s tokens={n} "
                    f"decode={decode_rates[-1]:.1f} tok/s end_to_end={e2e_rates[-1]:.1f} tok/s "
                    f"per_cpu_s={cpu_rates[-1]:.1f} tok/cpu-s"
                )
            print(
                f"median: first_token={statistics.median(firsts):.3f}s "
                f"decode={statistics.median(decode_rates):.1f} tok/s "
                f"end_to_end={statistics.median(e2e_rates):.1f} tok/s "
                f"per_cpu_s={statistics.median(cpu_rates):.1f} tok/cpu-s rss={rss_mb():.0f}MB "
                f"loadavg={os.getloadavg()[0]:.1f}"
            )
        finally:
            await provider.aclose()
        print(f"rss after aclose={rss_mb():.0f}MB")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=default_threads())
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=200)
    args = parser.parse_args()
    anyio.run(main, args.threads, args.runs, args.max_tokens)
