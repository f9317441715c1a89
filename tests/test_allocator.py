"""``acagent serve`` re-executes itself on glibc malloc, exactly when it should (acagent/_allocator.py)."""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest

from acagent import _allocator


@pytest.fixture
def execs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, list[str], dict[str, str]]]:
    calls: list[tuple[str, list[str], dict[str, str]]] = []

    def fake_execve(path: str, argv: list[str], env: dict[str, str]) -> None:
        calls.append((path, argv, env))

    monkeypatch.setattr(os, "execve", fake_execve)
    monkeypatch.setattr(sys, "orig_argv", [sys.executable, "-m", "acagent", "serve", "--port", "0"])
    monkeypatch.setattr(_allocator, "_glibc", lambda: True)
    for name in ("PYTHONMALLOC", _allocator.ALLOCATOR_ENV, "ACAGENT_ALLOCATOR_ADDED"):
        monkeypatch.delenv(name, raising=False)
    return calls


def test_a_serving_daemon_reexecutes_with_malloc_and_the_same_arguments(execs: list[Any]) -> None:
    _allocator.reexec_daemon(["acagent", "serve", "--port", "0"])
    [(path, argv, env)] = execs
    assert path == sys.executable and argv == list(sys.orig_argv)
    assert env["PYTHONMALLOC"] == "malloc" and env["ACAGENT_ALLOCATOR_ADDED"] == "PYTHONMALLOC"


@pytest.mark.parametrize(
    "argv",
    [["acagent", "serve", "--stop"], ["acagent", "serve", "--help"], ["acagent", "run", "hi"], ["acagent"]],
)
def test_other_commands_are_not_reexecuted(execs: list[Any], argv: list[str]) -> None:
    _allocator.reexec_daemon(argv)
    assert execs == []


@pytest.mark.parametrize(
    "env",
    [
        {"PYTHONMALLOC": "pymalloc"},
        {"ACAGENT_DAEMON_ALLOCATOR": "pymalloc"},
        {"ACAGENT_ALLOCATOR_ADDED": "PYTHONMALLOC"},
    ],
)
def test_a_users_choice_or_an_earlier_reexec_is_kept(
    execs: list[Any], monkeypatch: pytest.MonkeyPatch, env: dict[str, str]
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    _allocator.reexec_daemon(["acagent", "serve"])
    assert execs == []


def test_not_on_another_c_library(execs: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_allocator, "_glibc", lambda: False)
    _allocator.reexec_daemon(["acagent", "serve"])
    assert execs == []


def test_the_reexecuted_daemon_removes_what_it_added(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_allocator, "_chosen", [])
    monkeypatch.setenv("PYTHONMALLOC", "malloc")
    monkeypatch.setenv("ACAGENT_ALLOCATOR_ADDED", "PYTHONMALLOC")
    assert _allocator.adopt() == "malloc"
    assert "PYTHONMALLOC" not in os.environ and "ACAGENT_ALLOCATOR_ADDED" not in os.environ
    assert _allocator.allocator() == "malloc"
    monkeypatch.setenv("PYTHONMALLOC", "malloc")  # the user's own: kept
    assert _allocator.adopt() == "malloc" and os.environ["PYTHONMALLOC"] == "malloc"


@pytest.mark.parametrize("orig", [["python", "-"], ["python", "-c", "import acagent._entry"]])
def test_a_program_that_cannot_be_started_again_is_not_reexecuted(
    execs: list[Any], monkeypatch: pytest.MonkeyPatch, orig: list[str]
) -> None:
    """Tester F8: ``python -`` re-executed read an empty stdin and exited 0 with no daemon."""
    monkeypatch.setattr(sys, "orig_argv", orig)
    _allocator.reexec_daemon(["-", "serve"])
    assert execs == []
