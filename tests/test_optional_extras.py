"""The README install (``pip install -e '.[local]'``) runs every main command: nothing imports a
package that only an optional extra (``pg``, ``otel``, ``test``, ``bench``) installs.

Before: ``acagent serve`` imported the PostgreSQL journal module (and with it ``asyncpg``, the
``pg`` extra) on a SQLite journal, to learn it was not one, and died with a
``ModuleNotFoundError`` traceback on a fresh install; the test environment has every extra, so
nothing noticed. Here those packages are made unimportable for real subprocesses (a directory of
stand-ins that raise ``ModuleNotFoundError`` first on ``PYTHONPATH``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from importlib.metadata import PackageNotFoundError, packages_distributions, requires
from pathlib import Path

import pytest

from tests.mockprovider import MockProvider, Script, openai_text
from tests.server.conftest import ACAGENT, Daemon, daemon_env

ROOT = Path(__file__).resolve().parent.parent
_INSTALLED_BY_README = ("local",)


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _optional_only_modules() -> set[str]:
    """Top-level modules of the distributions that only the other extras declare."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

    def names(specs: list[str]) -> set[str]:
        return {_norm(re.split(r"[\s<>=!~;\[]", s, maxsplit=1)[0]) for s in specs}

    base = names(project["dependencies"])
    extras = project["optional-dependencies"]
    for extra in _INSTALLED_BY_README:
        base |= names(extras[extra])
    installed = _closure(base)  # what README's install brings, with what it requires
    optional = _closure(set().union(*(names(v) for k, v in extras.items() if k not in _INSTALLED_BY_README)))
    by_dist: dict[str, set[str]] = {}
    for module, dists in packages_distributions().items():
        for d in dists:
            by_dist.setdefault(_norm(d), set()).add(module)
    keep = {m for d in installed for m in by_dist.get(d, set())}  # e.g. opentelemetry-api (fastapi's)
    # pytest's own modules stay: the mock provider of this test runs in this process, not there
    return (
        {m for d in optional - installed for m in by_dist.get(d, set())} - keep - {"pytest", "_pytest", "py"}
    )


def _closure(dists: set[str]) -> set[str]:
    """``dists`` and, recursively, the distributions they require (extras' requirements left out)."""
    out, todo = set(), list(dists)
    while todo:
        d = todo.pop()
        if d in out:
            continue
        out.add(d)
        try:
            reqs = requires(d) or []
        except PackageNotFoundError:
            continue
        todo += [_norm(re.split(r"[\s<>=!~;\[(]", r, maxsplit=1)[0]) for r in reqs if "extra ==" not in r]
    return out


@pytest.fixture
def readme_env(tmp_path: Path, mock: MockProvider) -> dict[str, str]:
    blocked = tmp_path / "blocked"
    for module in _optional_only_modules():
        if not module.isidentifier():
            continue
        (blocked / module).mkdir(parents=True)
        (blocked / module / "__init__.py").write_text(
            f"raise ModuleNotFoundError({f'No module named {module!r} (not installed by README)'!r}, name={module!r})\n"
        )
    home = tmp_path / "home"
    home.mkdir()
    env = daemon_env(home, mock)
    env["PYTHONPATH"] = os.pathsep.join([str(blocked), str(ROOT)])
    return env


def test_the_blocked_packages_really_are_unimportable(readme_env: dict[str, str]) -> None:
    """The stand-ins work (else the tests below would prove nothing)."""
    p = subprocess.run(
        [sys.executable, "-c", "import asyncpg"], env=readme_env, capture_output=True, text=True, timeout=30
    )
    assert p.returncode == 1 and "not installed by README" in p.stderr, p.stderr


def test_serve_on_a_readme_install_starts_and_answers(readme_env: dict[str, str], mock: MockProvider) -> None:
    home = Path(readme_env["ACAGENT_HOME"])
    d = Daemon(home=home, env=readme_env).start()
    try:
        mock.script(Script(chunks=[openai_text("hello from the mock")]))
        run = subprocess.run(
            [ACAGENT, "run", "--yes", "--json", "hi"],
            env=readme_env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert run.returncode == 0, run.stderr
        assert "hello from the mock" in run.stdout, run.stdout
        status = subprocess.run(
            [ACAGENT, "status"], env=readme_env, capture_output=True, text=True, timeout=30
        )
        assert status.returncode == 0, status.stdout + status.stderr
    finally:
        d.terminate(15)
    assert not any("Traceback" in line for line in d.stderr_lines), d.stderr_lines


def test_a_postgresql_journal_without_its_driver_is_one_line(readme_env: dict[str, str]) -> None:
    env = {**readme_env, "ACAGENT_JOURNAL_URL": "postgresql://me:secret@127.0.0.1:1/db"}
    p = subprocess.run([ACAGENT, "sessions", "list"], env=env, capture_output=True, text=True, timeout=30)
    assert p.returncode != 0
    assert "Traceback" not in p.stderr and "secret" not in p.stderr, p.stderr
    assert "acagent[pg]" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
