"""Non-finite caps and prices (TOML ``inf``/``nan``) are config errors: one line, exit 2.

Before: ``[limits] session_usd = inf`` was accepted and the first turn died with
"unhandled errors in a TaskGroup" (OverflowError formatting the cap); ``nan``/``inf`` prices were
accepted and made every cost NaN.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from acagent.errors import ConfigError
from acagent.settings import load_settings
from tests.mockprovider import MockProvider, openai_text


@pytest.mark.parametrize(
    ("limits", "pricing"),
    [
        ({"session_usd": float("inf")}, {}),
        ({"daily_usd": float("nan")}, {}),
        ({}, {"openai:mock": {"input_usd_per_mtok": float("nan"), "output_usd_per_mtok": 1.0}}),
        ({}, {"openai:mock": {"input_usd_per_mtok": 0.0, "output_usd_per_mtok": float("inf")}}),
    ],
)
def test_non_finite_caps_and_prices_are_config_errors(tmp_path: Path, limits: dict, pricing: dict) -> None:
    with pytest.raises(ConfigError):
        load_settings({"home": str(tmp_path), "limits": limits, "pricing": pricing}, env={})


def test_an_infinite_cap_in_config_toml_is_one_line_and_exit_2(
    cli, mock: MockProvider, workspace: Path
) -> None:
    mock.script(openai_text("never"))
    (cli.home / "config.toml").write_text("[limits]\nsession_usd = inf\n")
    proc = cli(
        "run",
        "hi",
        "--model",
        "openai:mock",
        "--base-url",
        mock.openai_base_url,
        cwd=workspace,
        extra_env={"OPENAI_API_KEY": "k"},
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "session_usd" in lines[0] and "Traceback" not in proc.stderr, proc.stderr
    assert mock.requests == []
