"""Every config error is one line naming the key path, the value, the file and line, and the
reason — through the real CLI, for every command and ``doctor`` (issue 10 edges, F91).

Before, a negative pricing rate said ``invalid setting ''`` and a server with ``command = 5``
passed ``sessions list``, failed ``run`` with exit 1 and was only a row of ``doctor``. The rule
is :mod:`acagent.config_errors`, used by :func:`acagent.settings.load_settings`; the exit code
of a config error is 2 (``cli/_common.py`` ``build_settings``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# (config.toml text, what the one line must contain: key path, value, line, reason)
BAD = [
    (
        '[pricing."openai:gpt-x"]\ninput_usd_per_mtok = -1\noutput_usd_per_mtok = 1\n',
        ['[pricing."openai:gpt-x"].input_usd_per_mtok = -1', "line 2", "greater than or equal to 0"],
    ),
    (
        '[pricing."openai:gpt-x"]\ninput_usd_per_mtok = 1\n',
        ['[pricing."openai:gpt-x"].output_usd_per_mtok (missing)', "line 1", "required"],
    ),
    (
        '[pricing."openai:gpt-x"]\ninput_usd_per_mtok = nan\noutput_usd_per_mtok = 1\n',
        ['[pricing."openai:gpt-x"].input_usd_per_mtok = nan', "line 2", "finite"],
    ),
    (
        "[mcp.servers.x]\ncommand = 5\n",
        ["[mcp.servers.x].command = 5", "line 2", "valid list"],
    ),
    (
        '[mcp.servers."a b"]\ncommand = ["x"]\n',
        ["[mcp.servers] name 'a b'", "line 1", "letters"],
    ),
    (
        '[timing]\nlease_ttl_s = "soon"\n',
        ['[timing].lease_ttl_s = "soon"', "line 2", "valid number"],
    ),
    (
        "[limits]\nsession_usd = -3\n",
        ["[limits].session_usd = -3", "line 2", "greater than"],
    ),
    (  # before: exit 1 at the first turn, with no file or line (sessions list passed)
        'model = "nope:x"\n',
        ['model = "nope:x"', "line 1", "unknown provider 'nope'"],
    ),
    (
        'model = "gpt-4o"\n',
        ['model = "gpt-4o"', "line 1", "expected PROVIDER:MODEL"],
    ),
    (  # before: accepted, and printed raw by doctor
        'model = "openai:a\\nb"\n',
        ['model = "openai:a\\nb"', "line 1", "control characters"],
    ),
    (  # before: exit 1, printed twice, no file or line; the password stays masked
        'journal = "mysql://u:hunter2@db/x"\n',
        ['journal = "mysql://u:***@db/x"', "line 1", "not a postgresql:// URL"],
    ),
    (
        'durability = "sometimes"\n',
        ['durability = "sometimes"', "line 1", "'normal' or 'full'"],
    ),
    (
        'shell_allow = ["ls", 3]\n',
        ["shell_allow[1] = 3", "line 1", "valid string"],
    ),
    (
        "[context]\ncompact_at = 7\n",
        ["[context].compact_at = 7", "line 2", "less than or equal to 1"],
    ),
    (  # a top-level key written below a table is that table's key (TOML): say so
        '[context]\ncompact_at = 0.5\n\njournal = "postgresql://db/x"\n',
        [
            '[context].journal = "postgresql://db/x"',
            "line 4",
            "not permitted",
            "'journal' is a top-level key: move it above the first [table] header",
        ],
    ),
    (
        "no_such_key = 1\n",
        ["no_such_key = 1", "line 1", "not permitted"],
    ),
    (  # a negative window was accepted silently (every request "over" it)
        '[models."openai:x"]\ncontext_window = -5\n',
        ['[models."openai:x"].context_window = -5', "line 2", "greater than 0"],
    ),
    (  # a misspelt key was accepted silently (the window stayed unknown)
        '[models."openai:x"]\ncontex_window = 64000\n',
        [
            '[models."openai:x"].contex_window',
            "line 2",
            "unknown key",
            "'context_window' or 'max_output_tokens'",
        ],
    ),
]

COMMANDS = [["sessions", "list"], ["run", "hi"], ["doctor"], ["usage"], ["mcp", "list"]]


def _acagent(
    home: Path, *args: str, env_extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACAGENT_", "OPENAI_", "ANTHROPIC_"))}
    env.update({"ACAGENT_HOME": str(home), "PYTHONPATH": str(REPO), **(env_extra or {})})
    return subprocess.run(
        [sys.executable, "-m", "acagent", *args], capture_output=True, text=True, env=env, timeout=60
    )


def _one_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.mark.parametrize(("text", "wanted"), BAD, ids=[w[0].split(" ")[0] for _, w in BAD])
def test_bad_config_is_one_line_naming_key_value_line_and_reason(
    tmp_path: Path, text: str, wanted: list[str]
) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "config.toml").write_text(text)
    proc = _acagent(home, "sessions", "list")
    line = _one_line(proc)
    assert proc.returncode == 2, (proc.returncode, line)
    assert line.startswith("acagent: error: invalid config "), line
    for part in wanted:
        assert part in line, (part, line)
    assert str(home / "config.toml") in line, line


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c))
def test_every_command_reports_the_same_line(tmp_path: Path, command: list[str]) -> None:
    """The rule lives in the config loader: every command (and ``doctor``) prints the same line."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "config.toml").write_text("[mcp.servers.x]\ncommand = 5\n")
    proc = _acagent(home, *command)
    line = _one_line(proc)
    assert proc.returncode == 2, (command, proc.returncode, line)
    assert "[mcp.servers.x].command = 5" in line and "line 2" in line, line


def test_a_value_from_the_environment_names_its_variable(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    proc = _acagent(home, "sessions", "list", env_extra={"ACAGENT_TIMING_LEASE_TTL_S": "soon"})
    line = _one_line(proc)
    assert proc.returncode == 2
    assert '[timing].lease_ttl_s = "soon" from ACAGENT_TIMING_LEASE_TTL_S' in line, line


@pytest.mark.parametrize(
    ("var", "value"),
    [("LEASE_RENEW_S", "-1"), ("TOOL_TIMEOUT_S", "0"), ("APPROVAL_TIMEOUT_S", "-5"), ("LLM_TIMEOUT_S", "-1")],
)
def test_a_timing_duration_must_be_positive(tmp_path: Path, var: str, value: str) -> None:
    """A negative or zero duration was accepted (a negative renew interval is a busy loop of lease
    renewals, a zero tool timeout kills every command): now the one line with its key and variable."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    proc = _acagent(home, "sessions", "list", env_extra={f"ACAGENT_TIMING_{var}": value})
    line = _one_line(proc)
    assert proc.returncode == 2, (proc.returncode, line)
    assert (
        f'[timing].{var.lower()} = "{value}" from ACAGENT_TIMING_{var}' in line and "greater than 0" in line
    ), line


def test_a_timing_relation_names_the_values_not_every_constant(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "config.toml").write_text("[timing]\nlease_ttl_s = 3\n")
    line = _one_line(_acagent(home, "sessions", "list"))
    assert (
        "[timing]: lease_renew_s < lease_ttl_s / 2 must hold (lease_renew_s = 10, lease_ttl_s = 3)" in line
    ), line


@pytest.mark.parametrize(
    "pair",
    [
        "bad=1",
        "max_body_bytes",
        "max_body_bytes=lots",
        "ws_burst=0",
        "header_timeout_s=nan",  # F125: a NaN or infinite limit was taken and switched the limit off
        "send_timeout_s=inf",
        "ws_messages_per_s=NaN",
        "idempotency_ttl_s=-inf",
    ],
)
def test_a_bad_serve_limit_is_a_usage_error(tmp_path: Path, pair: str) -> None:
    """``serve --limit bad=1`` printed its line but exited 1, like a runtime failure; a bad option is 2."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    proc = _acagent(home, "serve", "--port", "0", "--limit", pair)
    line = _one_line(proc)
    assert proc.returncode == 2, (proc.returncode, line)
    assert line.startswith("acagent: error: --limit "), line


def test_a_bad_model_flag_or_variable_names_its_source(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    for args, env, source in (
        (["run", "--model", "nope:x", "hi"], {}, "from --model"),
        (["run", "hi"], {"ACAGENT_MODEL": "nope:x"}, "from ACAGENT_MODEL"),
    ):
        proc = _acagent(home, *args, env_extra=env)
        line = _one_line(proc)
        assert proc.returncode == 2, (proc.returncode, line)
        assert f'model = "nope:x" {source}' in line and "unknown provider" in line, line
