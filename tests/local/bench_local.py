"""Measure the local model through the real provider path (not collected by pytest).

    python tests/local/bench_local.py [--threads N] [--runs 3] [--max-tokens 200]

Prints: xllamacpp import time, model load (server start) time, then per run the first-token
latency (request sent → first text delta), decode tokens/s (server-reported ``predicted_n`` /
wall time after the first token) and end-to-end tokens/s, and finally the process RSS.
"""

from __future__ import annotations

import argparse
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
        firsts, decode_rates, e2e_rates = [], [], []
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
                t0 = time.perf_counter()
                first = None
                async with provider.request_stream(request) as stream:
                    async for event in stream:
                        if isinstance(event, TextDelta) and first is None:
                            first = time.perf_counter()
                    response = stream.get()
                end = time.perf_counter()
                assert first is not None
                n = response.usage.output_tokens
                firsts.append(first - t0)
                decode_rates.append((n - 1) / (end - first) if end > first else float("nan"))
                e2e_rates.append(n / (end - t0))
                print(
                    f"  run {i}: first_token={first - t0:.3f}s tokens={n} "
                    f"decode={decode_rates[-1]:.1f} tok/s end_to_end={e2e_rates[-1]:.1f} tok/s"
                )
            print(
                f"median: first_token={statistics.median(firsts):.3f}s "
                f"decode={statistics.median(decode_rates):.1f} tok/s "
                f"end_to_end={statistics.median(e2e_rates):.1f} tok/s rss={rss_mb():.0f}MB"
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
