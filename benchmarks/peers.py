"""Peers: the one-shot tool-call task for acagent, Claude Code, Codex and opencode (issue 12).

``python -m benchmarks --peers DIR [--peer-rounds N] [--only peers]``, where DIR holds the peers'
npm packages (``npm install --prefix DIR @anthropic-ai/claude-code @openai/codex opencode-ai``;
see docs/benchmarks.md). Adds section "P" and its targets to the report (``--only peers``: that
section alone).

Every agent gets the same task from the same local mock model (:mod:`benchmarks._peer_mock`):
"run ``cat marker.txt`` and say what it prints" — one LLM call answered with a shell tool call,
the agent runs the command, a second call carrying its output answered with the final text.
Each agent runs non-interactively with tools auto-approved, in its own fresh workspace and its
own isolated HOME (config, state and caches under DIR/.bench-homes/<agent>, kept across rounds
like a user's, after one warm-up run). The rounds are interleaved (round r runs every agent, in
an order rotated each round), so the machine's load hits all of them alike.

Measured per run, of the whole process tree (:mod:`benchmarks._tree`): CPU (user + system),
peak RSS (summed per-process peaks) and wall time; a run counts only if the mock saw the
command's output come back in a tool result. An agent that cannot be run (not installed, exits
non-zero, never runs the command) is a row saying why. Ratios are acagent / peer of the medians.

How each peer is pointed at the mock:

* acagent: ``acagent run --yes --json --model openai:mock --base-url MOCK/v1`` (Chat Completions).
* Claude Code: ``claude -p … --output-format json --dangerously-skip-permissions`` with
  ``ANTHROPIC_BASE_URL`` = the mock and a dummy ``ANTHROPIC_API_KEY`` (Messages streaming);
  non-essential traffic, telemetry and the auto-updater off.
* Codex: ``codex exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox``
  with an isolated ``CODEX_HOME`` whose ``config.toml`` names a ``model_providers.mock`` with
  ``base_url`` = MOCK/v1 and ``wire_api = "responses"`` (the only one Codex accepts).
* opencode: ``opencode run …`` with an ``opencode.json`` provider ``mock``
  (``@ai-sdk/openai-compatible``, ``baseURL`` = MOCK/v1), every permission ``allow``,
  autoupdate, sharing, default plugins, external skills and models.dev fetching off.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks._common import Figure, Target
from benchmarks._peer_mock import MARKER, PROMPT, PeerMock
from benchmarks._tree import TreeRun, run_tree

ROOT = Path(__file__).resolve().parent.parent
__all__ = ["figure", "run", "run_peers"]

_KEEP_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR")


@dataclass
class Peer:
    """One agent: how to start it on the task, given the mock URL, its home and workspace."""

    name: str
    binary: str
    """Path relative to the peers directory (or absolute); checked before running."""
    command: Callable[[str, Path, Path], tuple[list[str], dict[str, str]]]
    runs: list[TreeRun] = field(default_factory=list)
    failure: str | None = None


def _base_env(home: Path) -> dict[str, str]:
    env = {k: os.environ[k] for k in _KEEP_ENV if k in os.environ}
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local/share"),
        XDG_STATE_HOME=str(home / ".local/state"),
        XDG_CACHE_HOME=str(home / ".cache"),
        TERM="dumb",
        NO_COLOR="1",
        CI="1",
    )
    return env


def _acagent(url: str, home: Path, work: Path) -> tuple[list[str], dict[str, str]]:
    env = _base_env(home)
    env.update(ACAGENT_HOME=str(home / "acagent"), OPENAI_API_KEY="sk-bench", PYTHONPATH=str(ROOT))
    args = [sys.executable, "-m", "acagent", "run", "--yes", "--json", "--model", "openai:mock"]
    return [*args, "--base-url", url + "/v1", PROMPT], env


def _claude(dir_: Path) -> Callable[[str, Path, Path], tuple[list[str], dict[str, str]]]:
    def command(url: str, home: Path, work: Path) -> tuple[list[str], dict[str, str]]:
        env = _base_env(home)
        env.update(
            ANTHROPIC_BASE_URL=url,
            ANTHROPIC_API_KEY="sk-ant-bench",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            DISABLE_AUTOUPDATER="1",
            DISABLE_TELEMETRY="1",
            DISABLE_ERROR_REPORTING="1",
            IS_SANDBOX="1",  # root may skip permissions inside a sandbox (this machine runs as root)
        )
        exe = str(dir_ / "node_modules/.bin/claude")
        args = [exe, "-p", PROMPT, "--output-format", "json", "--dangerously-skip-permissions"]
        return [*args, "--model", "claude-sonnet-4-5"], env

    return command


def _codex(dir_: Path) -> Callable[[str, Path, Path], tuple[list[str], dict[str, str]]]:
    def command(url: str, home: Path, work: Path) -> tuple[list[str], dict[str, str]]:
        env = _base_env(home)
        codex_home = home / ".codex"
        codex_home.mkdir(parents=True, exist_ok=True)
        (codex_home / "config.toml").write_text(
            'model = "mock"\nmodel_provider = "mock"\napproval_policy = "never"\n'
            'sandbox_mode = "danger-full-access"\ncheck_for_update_on_startup = false\n\n'
            "[analytics]\nenabled = false\n\n"
            f'[model_providers.mock]\nname = "mock"\nbase_url = "{url}/v1"\n'
            'env_key = "MOCK_API_KEY"\nwire_api = "responses"\n'
        )
        env.update(CODEX_HOME=str(codex_home), MOCK_API_KEY="sk-bench")
        exe = str(dir_ / "node_modules/.bin/codex")
        args = [exe, "exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"]
        return [*args, PROMPT], env

    return command


def _opencode(dir_: Path) -> Callable[[str, Path, Path], tuple[list[str], dict[str, str]]]:
    def command(url: str, home: Path, work: Path) -> tuple[list[str], dict[str, str]]:
        env = _base_env(home)
        config = {
            "$schema": "https://opencode.ai/config.json",
            "model": "mock/mock",
            "small_model": "mock/mock",
            "autoupdate": False,
            "share": "disabled",
            "permission": {"edit": "allow", "bash": "allow", "webfetch": "allow"},
            "provider": {
                "mock": {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "mock",
                    "options": {"baseURL": url + "/v1", "apiKey": "sk-bench"},
                    "models": {"mock": {"name": "mock", "tool_call": True}},
                }
            },
        }
        path = home / "opencode.json"
        path.write_text(json.dumps(config))
        env.update(
            OPENCODE_CONFIG=str(path),
            OPENCODE_DISABLE_MODELS_FETCH="1",
            OPENCODE_DISABLE_AUTOUPDATE="1",
            OPENCODE_DISABLE_LSP_DOWNLOAD="1",
            OPENCODE_DISABLE_DEFAULT_PLUGINS="1",
            OPENCODE_DISABLE_SHARE="1",
            OPENCODE_DISABLE_CLAUDE_CODE="1",
            OPENCODE_DISABLE_EXTERNAL_SKILLS="1",
        )
        exe = str(dir_ / "node_modules/.bin/opencode")
        return [exe, "run", PROMPT], env

    return command


def _peers(dir_: Path) -> list[Peer]:
    return [
        Peer("acagent", sys.executable, _acagent),
        Peer("Claude Code", str(dir_ / "node_modules/.bin/claude"), _claude(dir_)),
        Peer("Codex", str(dir_ / "node_modules/.bin/codex"), _codex(dir_)),
        Peer("opencode", str(dir_ / "node_modules/.bin/opencode"), _opencode(dir_)),
    ]


def _once(peer: Peer, mock: PeerMock, homes: Path, n: int, timeout_s: float) -> TreeRun | str:
    """One run of ``peer`` on the task; the run, or why it does not count."""
    home = homes / peer.name.replace(" ", "-").lower()
    home.mkdir(parents=True, exist_ok=True)
    work = homes / "work" / f"{home.name}-{n}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    (work / "marker.txt").write_text(MARKER + "\n")
    argv, env = peer.command(mock.url, home, work)
    seen = len(mock.results)
    run = run_tree(argv, env, work, timeout_s)
    results = [r for _api, rs in mock.results[seen:] for r in rs]
    if run.returncode is None:
        return f"timed out after {timeout_s:.0f} s"
    tail = (run.stderr.strip() or run.stdout.strip())[-300:].replace("\n", " ")
    if run.returncode != 0:
        return f"exit {run.returncode}: {tail}"
    if not any(MARKER in r for r in results):
        requests = len(mock.results) - seen
        return f"never ran the command ({requests} model requests; output: {tail})"
    return run


def run_peers(dir_: Path, rounds: int, timeout_s: float = 180.0) -> list[Peer]:
    """Warm up every peer once, then ``rounds`` interleaved rounds (see module docstring)."""
    homes = dir_ / ".bench-homes"
    peers = _peers(dir_)
    with PeerMock() as mock:
        for peer in peers:
            if not Path(peer.binary).exists():
                peer.failure = f"not installed ({peer.binary} is missing)"
                continue
            outcome = _once(peer, mock, homes, 0, timeout_s)
            if isinstance(outcome, str):
                peer.failure = outcome
        live = [p for p in peers if p.failure is None]
        for r in range(rounds):
            order = live[r % len(live) :] + live[: r % len(live)] if live else []
            for peer in order:
                sys.stderr.write(f"  round {r + 1}/{rounds}: {peer.name}\n")
                outcome = _once(peer, mock, homes, r + 1, timeout_s)
                if isinstance(outcome, str):
                    peer.failure = f"round {r + 1}: {outcome}"
                else:
                    peer.runs.append(outcome)
    return peers


def figure(peers: list[Peer], rounds: int) -> dict[str, Any]:
    """The report section (a figure dict for :func:`benchmarks._report.write_report`): one row per
    agent, ratios acagent / peer, and the issue's targets (CPU ≤ Codex's, peak RSS ≤ 100 MB)."""

    def med(peer: Peer, attr: str) -> float:
        return float(statistics.median(getattr(r, attr) for r in peer.runs))

    ours = next((p for p in peers if p.name == "acagent" and p.runs), None)
    rows = []
    for p in peers:
        if not p.runs:
            rows.append([p.name, f"could not be run: {p.failure}", "", "", "", "", ""])
            continue
        cpu, rss = med(p, "cpu_s"), med(p, "peak_rss_mb")
        rows.append(
            [
                p.name + (f" ({p.failure})" if p.failure else ""),
                f"{cpu:.2f} (min {min(r.cpu_s for r in p.runs):.2f})",
                f"{rss:.0f} / {med(p, 'largest_mb'):.0f}",
                f"{med(p, 'wall_s'):.2f}",
                str(max(r.processes for r in p.runs)),
                f"{med(ours, 'cpu_s') / cpu:.2f}" if ours else "—",
                f"{med(ours, 'peak_rss_mb') / rss:.2f}" if ours else "—",
            ]
        )
    fig = Figure(0, "Peers: one-shot tool-call turn (acagent, Claude Code, Codex, opencode)")
    fig.table(
        [
            "agent",
            "CPU s (user+sys)",
            "peak RSS MB: tree / largest process",
            "wall s",
            "processes",
            "acagent/peer CPU",
            "acagent/peer RSS (tree)",
        ],
        rows,
        f"Median of {rounds} interleaved rounds after one warm-up run each, whole process tree "
        "(`benchmarks/_tree.py`); the task, the mock and how each agent is pointed at it: "
        "`benchmarks/peers.py`. Ratio below 1: acagent is cheaper.",
    )
    fig.text.append(f"Load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}.")
    codex = next((p for p in peers if p.name == "Codex" and p.runs), None)
    if ours is None:
        fig.targets.append(Target("one-shot turn runs", "completes", f"acagent: {peers[0].failure}", False))
    else:
        cpu, rss = med(ours, "cpu_s"), med(ours, "largest_mb")
        if codex is None:
            fig.targets.append(
                Target("one-shot CPU ≤ Codex's", "ratio ≤ 1.00", "Codex could not be run", None)
            )
        else:
            c = med(codex, "cpu_s")
            fig.targets.append(
                Target(
                    "one-shot CPU ≤ Codex's",
                    "acagent / Codex CPU ≤ 1.00, same rounds",
                    f"{cpu:.2f} s / {c:.2f} s = {cpu / c:.2f}",
                    cpu <= c,
                )
            )
        fig.targets.append(
            Target("one-shot peak RSS", "≤ 100 MB (the acagent process)", f"{rss:.0f} MB", rss <= 100)
        )
    out = fig.to_json()
    out["number"] = "P"
    return out


def results_json(peers: list[Peer]) -> dict[str, Any]:
    """Plain data of the runs (per agent: the samples, or why it could not be run)."""
    return {
        p.name: {
            "failure": p.failure,
            "cpu_s": [round(r.cpu_s, 3) for r in p.runs],
            "peak_rss_mb": [round(r.peak_rss_mb, 1) for r in p.runs],
            "largest_mb": [round(r.largest_mb, 1) for r in p.runs],
            "wall_s": [round(r.wall_s, 3) for r in p.runs],
        }
        for p in peers
    }


def run(dir_: str, rounds: int) -> dict[str, Any]:
    """``--peers DIR``: run; the figure dict (the samples go to stderr as JSON)."""
    peers = run_peers(Path(dir_).resolve(), rounds)
    sys.stderr.write(json.dumps(results_json(peers)) + "\n")
    return figure(peers, rounds)
