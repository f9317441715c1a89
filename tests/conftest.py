"""Fixtures shared by every test: the asyncio backend, an isolated ACAGENT_HOME, the CLI as a
real subprocess, and the strict mock provider."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.mockprovider import MockProvider  # noqa: E402

_PROVIDER_VARS = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "ACAGENT_MODEL",
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Cli:
    """Runs ``acagent`` as a real subprocess with an isolated home."""

    home: Path
    env: dict[str, str]

    def __call__(
        self,
        *args: str,
        cwd: Path | None = None,
        timeout: float = 60,
        extra_env: dict[str, str] | None = None,
        check: bool = False,
    ) -> subprocess.CompletedProcess[str]:
        env = {**self.env, **(extra_env or {})}
        proc = subprocess.run(
            [sys.executable, "-m", "acagent", *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"acagent {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
            )
        return proc

    def popen(
        self, *args: str, cwd: Path | None = None, extra_env: dict[str, str] | None = None
    ) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "acagent", *args],
            cwd=cwd,
            env={**self.env, **(extra_env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


@pytest.fixture
def cli(home: Path) -> Cli:
    env = {k: v for k, v in os.environ.items() if k not in _PROVIDER_VARS and not k.startswith("ACAGENT_")}
    env["ACAGENT_HOME"] = str(home)
    env["PYTHONUNBUFFERED"] = "1"
    return Cli(home=home, env=env)


@pytest.fixture
def mock() -> Iterator[MockProvider]:
    with MockProvider() as server:
        yield server


@pytest.fixture(scope="session")
def pg_server() -> Iterator[object]:
    """One PostgreSQL server for the whole run (tests/pgserver.py); skipped only when Debian's
    binaries are absent (`.ci/run` installs them, so CI always runs these tests)."""
    from tests.pgserver import PgServer, find_pg_bin

    bin_dir = find_pg_bin()
    if bin_dir is None:
        pytest.skip(
            "PostgreSQL binaries not found under /usr/lib/postgresql/*/bin (apt-get install postgresql)"
        )
    with PgServer(bin_dir) as server:
        server.psql("CREATE DATABASE acagent_tests TEMPLATE template0")
        yield server


@pytest.fixture
def pg_url(pg_server: object) -> str:
    """The URL of a fresh, empty schema (its own journal) on the session's PostgreSQL server."""
    return pg_server.create_schema("acagent_tests")  # type: ignore[attr-defined, no-any-return]
