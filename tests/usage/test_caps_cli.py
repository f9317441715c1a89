"""``acagent run --max-usd`` and ``acagent compact ID`` as real subprocesses."""

from __future__ import annotations

import json
from pathlib import Path

from tests.mockprovider import MockProvider, TextReply, openai_text

CONFIG = """
[pricing."openai:mock"]
input_usd_per_mtok = 0.0
output_usd_per_mtok = 1000.0
"""


def test_run_max_usd_stops_before_the_call_with_one_line(cli, mock: MockProvider, workspace: Path) -> None:
    (cli.home / "config.toml").write_text(CONFIG)
    mock.script(openai_text("too expensive", usage=(10, 1024)))
    proc = cli(
        "run",
        "hello",
        "--max-usd",
        "0.5",
        "--model",
        "openai:mock",
        "--base-url",
        mock.openai_base_url,
        cwd=workspace,
    )
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr and "limit of $0.50" in proc.stderr, proc.stderr
    assert len(mock.requests) == 0  # 1,024 estimated output tokens at $1,000/M = $1.02 > $0.50
    sessions = json.loads(cli("sessions", "list", "--json", cwd=workspace, check=True).stdout)
    assert sessions[0]["status"] == "pending"  # refused before the turn was written


def test_compact_command_summarises_older_turns(cli, mock: MockProvider, workspace: Path) -> None:
    base = ["--model", "openai:mock", "--base-url", mock.openai_base_url]
    mock.script(TextReply("first"), TextReply("second"), TextReply("third"))
    cli("run", "turn one", *base, cwd=workspace, check=True)
    cli("run", "turn two", "--continue", *base, cwd=workspace, check=True)
    cli("run", "turn three", "--continue", *base, cwd=workspace, check=True)
    sid = json.loads(cli("sessions", "list", "--json", cwd=workspace, check=True).stdout)[0]["id"]
    mock.script(TextReply("The user ran three turns."))
    proc = cli("compact", sid, "--base-url", mock.openai_base_url, cwd=workspace, check=True)
    assert proc.stdout.startswith("compacted: ") and "→" in proc.stdout
    summary_request = mock.requests[-1].json
    assert "turn one" in json.dumps(summary_request) and summary_request["messages"][0]["role"] == "system"
    missing = cli("compact", "ses_nope", cwd=workspace)
    assert missing.returncode != 0 and "Traceback" not in missing.stderr and "ses_nope" in missing.stderr


def test_sessions_show_has_cost_and_full_history_after_compaction(
    cli, mock: MockProvider, workspace: Path
) -> None:
    (cli.home / "config.toml").write_text(CONFIG)
    base = ["--model", "openai:mock", "--base-url", mock.openai_base_url]
    mock.script(openai_text("alpha-answer", usage=(5, 100)), openai_text("beta-answer", usage=(5, 100)))
    cli("run", "alpha question " + "a" * 3000, *base, cwd=workspace, check=True)
    cli("run", "beta question", "--continue", *base, cwd=workspace, check=True)
    sid = json.loads(cli("sessions", "list", "--json", cwd=workspace, check=True).stdout)[0]["id"]
    mock.script(openai_text("summary of alpha", usage=(5, 100)))
    cli("compact", sid, "--base-url", mock.openai_base_url, cwd=workspace, check=True)
    shown = cli("sessions", "show", sid, cwd=workspace, check=True).stdout
    assert "$0.3000" in shown  # three calls of 100 output tokens at $1,000 per million
    assert "alpha-answer" not in shown and "beta-answer" in shown and "--full" in shown
    full = cli("sessions", "show", sid, "--full", cwd=workspace, check=True).stdout
    assert "alpha-answer" in full and "beta-answer" in full
