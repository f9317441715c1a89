"""``python -m benchmarks._mock_server LATENCY_S``: the strict mock in a process of its own, for figure 8.

Serves :class:`tests.mockprovider.MockProvider` answering every request with a short text, prints
its port on one line and serves until its standard input closes. Two differences from the mock
the tests use, both so that figure 8 measures the adapter and not the mock:

- **Its own process.** In the benchmark's process the mock's threads parsed and validated every
  2 MB body there (on the shared heap, under the GIL) and kept every request and its parsed
  JSON (millions of objects the loop thread's garbage collector then walked).
- **The same answer time at every history length.** A request is answered ``LATENCY_S`` after its
  body arrived (the mock's own parsing and validation included, padded to that time). The mock
  took ≈ 3 ms for a 10-turn request and ≈ 55 ms for a 500-turn one, and the longer idle alone
  made the loop thread's CPU for the same work ≈ 0.8 ms more per call (cold caches after the
  wait: a 10-turn call against a mock delayed 53 ms cost 2.29 ms instead of 1.49 ms). A real
  model's answer takes longer than both, whatever the history.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

from tests.mockprovider import MockProvider, RecordedRequest, Script, TextReply

__all__ = ["PaddedMock"]


class PaddedMock(MockProvider):
    """The strict mock answering each request ``latency_s`` after its body arrived; it keeps
    no requests (``requests`` stays empty)."""

    def __init__(self, latency_s: float) -> None:
        super().__init__()
        self.latency_s = latency_s
        self._arrived = threading.local()

    def _record(self, method: str, path: str, headers: dict[str, str], body: bytes) -> RecordedRequest:
        self._arrived.t = time.monotonic()
        request = super()._record(method, path, headers, body)
        with self._cond:
            self._requests.clear()
        return request

    def _answer(self, request: RecordedRequest) -> tuple[int, Script]:
        answer = super()._answer(request)
        request.json = None  # the parsed body is not kept either
        time.sleep(max(0.0, self._arrived.t + self.latency_s - time.monotonic()))
        return answer


def main(argv: list[str]) -> None:
    latency = float(argv[0]) if argv else 0.0
    mock: Any = PaddedMock(latency)
    mock.default = TextReply("ok")
    with mock:
        print(mock.port, flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    main(sys.argv[1:])
