"""Figure 6: CLI start-up — ``acagent --help``, ``acagent run`` to the first provider request, imports.

- ``acagent --help``: wall time of the installed console script, as a subprocess, median of N;
  the anchor is ``python -c pass`` (the interpreter's own start) in the same run.
- ``acagent run "…" --model openai:… --base-url …``: wall time from spawning the process to the
  first request reaching a local mock OpenAI-compatible server (``tests/mockprovider.py``, the
  strict mock the provider tests use), and to the process exit. Same data directory for every
  run (as a user's), after one warm-up run.
- ``python -X importtime``: what ``acagent --help`` imports (``acagent.cli`` and its command
  modules), heaviest first, and whether the heavy modules stay lazy.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks._common import Figure, Target, stats, tmp_home

ROOT = Path(__file__).resolve().parent.parent
HEAVY = [
    "openai",
    "anthropic",
    "fastapi",
    "uvicorn",
    "starlette",
    "prompt_toolkit",
    "httpx",
    "aiosqlite",
    "websockets",
    "pydantic",
    "rich",
    "typer",
    "xllamacpp",
]


def _script() -> str:
    exe = Path(sys.executable).parent / "acagent"
    return str(exe)


def _env(home: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACAGENT_", "OPENAI_", "ANTHROPIC_"))}
    if home is not None:
        env["ACAGENT_HOME"] = str(home)
    return env


def _time_cmd(args: list[str], n: int, env: dict[str, str]) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def _load_mock() -> Any:
    spec = importlib.util.spec_from_file_location("bench_mockprovider", ROOT / "tests" / "mockprovider.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_mockprovider"] = module
    spec.loader.exec_module(module)
    return module


def _run_to_request(n: int) -> tuple[list[float], list[float], list[str]]:
    mp = _load_mock()
    first: list[float] = []
    total: list[float] = []
    errors: list[str] = []
    with tmp_home("f6") as home, mp.MockProvider() as mock:
        arrivals: list[float] = []

        def reply(_body: Any) -> Any:
            arrivals.append(time.perf_counter())
            return mp.openai_text("hello from the mock", usage=(10, 5))

        env = _env(home)
        env["OPENAI_API_KEY"] = "sk-bench"
        args = [
            _script(),
            "run",
            "say hello",
            "--model",
            "openai:gpt-bench",
            "--base-url",
            mock.openai_base_url,
        ]
        for i in range(n + 1):
            mock.script(reply)
            arrivals.clear()
            t0 = time.perf_counter()
            proc = subprocess.run(args, env=env, cwd=home, capture_output=True, text=True)
            t1 = time.perf_counter()
            if proc.returncode != 0 or not arrivals:
                errors.append(f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
                continue
            if i == 0:
                continue  # warm-up: creates the journal
            first.append((arrivals[0] - t0) * 1000)
            total.append((t1 - t0) * 1000)
    return first, total, errors


def _importtime(
    argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None
) -> tuple[float, list[tuple[str, float]], list[tuple[str, float]], list[str]]:
    """Import times of a real ``acagent <argv>`` run (``python -X importtime``).

    Returns:
        (total ms, top packages by own time, top modules by cumulative time, watched heavy modules imported).
    """
    code = (
        "import sys, atexit; "
        f"atexit.register(lambda: sys.stderr.write('HEAVY=' + ','.join(m for m in {HEAVY!r} if m in sys.modules) + '\\n')); "
        f"sys.argv = ['acagent', *{argv!r}]; "
        "from acagent.cli import main; main()"
    )
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        capture_output=True,
        text=True,
        env=env or _env(),
        cwd=cwd,
    )
    heavy = []
    for line in proc.stderr.splitlines():
        if line.startswith("HEAVY="):
            heavy = [m for m in line[6:].split(",") if m]
    by_pkg: dict[str, float] = {}
    cumulative: list[tuple[str, float]] = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "[us]" in line:
            continue
        head, cum_us, name = line.split("|")
        self_us = head.split(":")[1]
        depth = (len(name) - len(name.lstrip())) // 2
        mod = name.strip()
        pkg = mod.split(".")[0]
        by_pkg[pkg] = by_pkg.get(pkg, 0.0) + int(self_us) / 1000
        if depth <= 1:
            cumulative.append((mod, int(cum_us) / 1000))
    total = sum(by_pkg.values())
    top_pkg = sorted(by_pkg.items(), key=lambda kv: -kv[1])[:12]
    top_cum = sorted(cumulative, key=lambda kv: -kv[1])[:12]
    return total, top_pkg, top_cum, heavy


def run(quick: bool) -> Figure:
    fig = Figure(6, "CLI start-up")
    n = 3 if quick else 15
    plain_env = _env()
    plain_env["TYPER_USE_RICH"] = "0"
    commands = {
        "python": ([sys.executable, "-c", "pass"], _env()),
        "help": ([_script(), "--help"], _env()),
        "plain": ([_script(), "--help"], plain_env),
        "typer": ([sys.executable, "-c", "import typer"], plain_env),
    }
    samples: dict[str, list[float]] = {k: [] for k in commands}
    for _ in range(n):  # interleaved, so the machine's load hits every command alike
        for key, (args, env) in commands.items():
            samples[key] += _time_cmd(args, 1, env)
    python, helps, plain, typer_only = (stats(samples[k]) for k in commands)
    first, total, errors = _run_to_request(1 if quick else 8)
    rows = [
        ["`python -c pass` (anchor)", python.fmt(0), "1.00"],
        ["`acagent --help`", helps.fmt(0), f"{helps.median / python.median:.2f}"],
        [
            "what-if: `TYPER_USE_RICH=0 acagent --help` (plain click help, no rich)",
            plain.fmt(0),
            f"{plain.median / python.median:.2f}",
        ],
        [
            "`TYPER_USE_RICH=0 python -c 'import typer'` (floor of a typer CLI)",
            typer_only.fmt(0),
            f"{typer_only.median / python.median:.2f}",
        ],
    ]
    if first:
        f, t = stats(first), stats(total)
        rows.append(["`acagent run` → first provider request", f.fmt(0), f"{f.median / python.median:.2f}"])
        rows.append(["`acagent run` → exit (1-turn answer)", t.fmt(0), f"{t.median / python.median:.2f}"])
    fig.table(["command", "wall ms: median (p95, min–max)", "× python start"], rows)
    fig.text.append(
        f"{n} runs each, the four start-up commands interleaved; `acagent run` {len(first)} runs after one "
        "warm-up, mock provider on 127.0.0.1."
    )
    if errors:
        fig.text.append("`acagent run` failures: " + "; ".join(f"`{e}`" for e in errors[:3]))
    total_ms, top_pkg, top_cum, heavy = _importtime(["--help"])
    fig.table(
        ["package", "import ms (own time of its modules)"],
        [[p, f"{ms:.1f}"] for p, ms in top_pkg],
        f"`python -X importtime` of a real `acagent --help`: {total_ms:.0f} ms of imports in total. Heaviest "
        "packages:",
    )
    fig.table(
        ["module (imported directly)", "cumulative ms"],
        [[m, f"{ms:.1f}"] for m, ms in top_cum],
        "Heaviest direct imports (cumulative):",
    )
    lazy = [
        m
        for m in ("openai", "anthropic", "fastapi", "uvicorn", "starlette", "prompt_toolkit", "xllamacpp")
        if m not in heavy
    ]
    fig.text.append(
        "Imported by `acagent --help`: "
        + (", ".join(f"`{m}`" for m in heavy) or "none of the watched modules")
        + ". Kept lazy: "
        + (", ".join(f"`{m}`" for m in lazy) or "none")
        + "."
    )
    run_total, run_pkg, _, _heavy = _run_importtime() if not quick else (0.0, [], [], [])
    if run_pkg:
        fig.table(
            ["package", "import ms (own time of its modules)"],
            [[p, f"{ms:.1f}"] for p, ms in run_pkg[:8]],
            f"`python -X importtime` of a real `acagent run` (mock provider): {run_total:.0f} ms of imports; "
            "heaviest packages:",
        )
    passed = helps.median <= 250
    fig.targets.append(
        Target(
            "`acagent --help`",
            "≤ 0.25 s wall",
            f"{helps.median / 1000:.3f} s (python alone "
            f"{python.median / 1000:.3f} s; without rich {plain.median / 1000:.3f} s)",
            passed,
        )
    )
    if not passed and not quick:
        prof = "\n".join(f"  {ms:7.1f} ms  {p}" for p, ms in top_pkg)
        fig.profiles.append(("`acagent --help`: `python -X importtime`, own import time by package", prof))
        fig.profiles.append(
            ("`acagent --help` under cProfile (imports included)", _cprofile(["--help"], "typer"))
        )
    return fig


def _run_importtime() -> tuple[float, list[tuple[str, float]], list[tuple[str, float]], list[str]]:
    mp = _load_mock()
    with tmp_home("f6i") as home, mp.MockProvider() as mock:
        mock.default = mp.openai_text("hello from the mock", usage=(10, 5))
        env = _env(home)
        env["OPENAI_API_KEY"] = "sk-bench"
        return _importtime(
            ["run", "say hello", "--model", "openai:gpt-bench", "--base-url", mock.openai_base_url], env, home
        )


def _cprofile(argv: list[str], focus: str) -> str:
    from benchmarks._common import format_profile

    with tmp_home("f6p") as home:
        out = home / "cli.prof"
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "cProfile", "-o", str(out), _script(), *argv],
            env=_env(home),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
        return format_profile(str(out), time.perf_counter() - t0, 14, focus, "whole process")
