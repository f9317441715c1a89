"""acagent's benchmarks (issue 6): ``python -m benchmarks [--quick]`` writes ``docs/benchmarks.md``.

One module per figure (``fig1_overhead`` … ``fig7_daemon``), each exposing ``run(quick) -> Figure``
and run in its own subprocess by ``__main__``. Bench-only dependencies: ``pip install -e '.[bench]'``.
"""
