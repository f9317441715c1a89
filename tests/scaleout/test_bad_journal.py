"""A bad journal URL or database: one line naming the URL without its password, exit non-zero,
nothing half-written."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from tests.conftest import Cli
from tests.pgserver import PASSWORD

pytestmark = pytest.mark.timeout(60)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _one_line_error(proc: Any, *needles: str) -> str:
    assert proc.returncode != 0, proc.stdout
    err = proc.stderr.strip()
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert PASSWORD not in err and "hunter2" not in err
    for needle in needles:
        assert needle in err, err
    return err


class TestBadJournal:
    def test_unreachable_url(self, cli: Cli) -> None:
        """Nothing listens on the port: one line naming the URL (no password), exit 1."""
        port = _free_port()
        proc = cli(
            "sessions",
            "list",
            extra_env={"ACAGENT_JOURNAL_URL": f"postgresql://u:hunter2@127.0.0.1:{port}/x"},
        )
        _one_line_error(proc, f"postgresql://u@127.0.0.1:{port}/x", "cannot reach")

    def test_wrong_password(self, cli: Cli, pg_server: Any) -> None:
        """A wrong password: the credentials are named as the problem, the password is not printed."""
        url = pg_server.url("acagent_tests", password="hunter2")
        proc = cli("serve", "--port", "0", "--journal", url, timeout=30)
        _one_line_error(
            proc, f"postgresql://postgres@127.0.0.1:{pg_server.port}/acagent_tests", "credentials"
        )

    def test_newer_schema_is_refused(self, cli: Cli, pg_url: str, pg_server: Any) -> None:
        """A database migrated by a newer acagent: refused before anything is written."""
        ok = cli("sessions", "list", extra_env={"ACAGENT_JOURNAL_URL": pg_url})
        assert ok.returncode == 0, ok.stderr
        schema = pg_url.rsplit("search_path=", 1)[1]
        pg_server.psql(
            f"INSERT INTO {schema}.schema_migrations (version, name) VALUES (99, 'm099_from_the_future')",
            db="acagent_tests",
        )
        proc = cli("sessions", "list", extra_env={"ACAGENT_JOURNAL_URL": pg_url})
        _one_line_error(proc, "schema version 99", "newer than this acagent", "upgrade acagent")

    def test_dropped_table(self, cli: Cli, pg_url: str, pg_server: Any) -> None:
        """A table dropped by hand: named at start-up (no recreation over live data)."""
        assert cli("sessions", "list", extra_env={"ACAGENT_JOURNAL_URL": pg_url}).returncode == 0
        schema = pg_url.rsplit("search_path=", 1)[1]
        pg_server.psql(f"DROP TABLE {schema}.tool_call", db="acagent_tests")
        proc = cli("serve", "--port", "0", "--journal", pg_url, timeout=30)
        _one_line_error(proc, "missing table 'tool_call'")

    def test_not_a_postgres_url(self, cli: Cli) -> None:
        """A journal setting that is not postgresql:// is a config error, not a silent SQLite."""
        (cli.home / "config.toml").write_text('journal = "mysql://u:hunter2@h/db"\n')
        proc = cli("sessions", "list")
        _one_line_error(proc, "not a postgresql:// URL")


def test_run_and_sessions_use_the_configured_journal(cli: Cli, pg_url: str, workspace: Any) -> None:
    """CLI ≡ serve: `acagent run` and `sessions list` on a home whose config names PostgreSQL use
    it (no SQLite file appears), and the session is there for any daemon of the cluster."""
    import json

    from tests.mockprovider import MockProvider, TextReply

    (cli.home / "config.toml").write_text(f'journal = "{pg_url}"\n')
    with MockProvider() as mock:
        mock.default = TextReply("hi there")
        env = {"OPENAI_BASE_URL": mock.openai_base_url, "OPENAI_API_KEY": "k", "ACAGENT_MODEL": "openai:mock"}
        proc = cli("run", "say hi", cwd=workspace, extra_env=env)
    assert proc.returncode == 0, proc.stderr
    assert "hi there" in proc.stdout
    listed = cli("sessions", "list", "--all", "--json", cwd=workspace)
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert len(rows) == 1 and rows[0]["status"] == "done"
    assert not (cli.home / "acagent.db").exists()
