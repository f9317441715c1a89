"""Units of the F40–F42 rules: workspace-code classification, bound rules, protected paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from acagent.tools import ApprovalPolicy, ShellTool, ToolContext, default_tools, validate_arguments
from acagent.tools._protect import protected_reason, shell_touches_private
from acagent.tools._wscode import workspace_code


def ctx_in(root: Path, private: tuple[Path, ...] = ()) -> ToolContext:
    return ToolContext(
        cwd=root, session_id="s", tool_call_id="c", emit_output=lambda _: None, private_dirs=private
    )


def shell(command: str):
    args, _ = validate_arguments(ShellTool(), {"command": command})
    return args


@pytest.mark.parametrize(
    ("command", "files"),
    [
        ("sh build.sh", ["build.sh"]),
        ("bash -x x.sh", ["x.sh"]),
        ("python3.12 x.py", ["x.py"]),
        ("python -m pytest", []),
        ("./script --flag", ["./script"]),
        ("cd sub && make", ["Makefile", "makefile", "GNUmakefile"]),
        ("FOO=1 npm test", ["package.json"]),
        ("timeout 5 bin/run", ["bin/run"]),
        ("echo `./x`", ["./x"]),
        ("echo $(cargo test)", ["Cargo.toml", "build.rs"]),
        ("go test ./...", []),
        ("git commit -m x", []),
        ('echo "unterminated', []),
    ],
)
def test_commands_that_run_workspace_code(command: str, files: list[str]) -> None:
    assert workspace_code(command) == files


@pytest.mark.parametrize("command", ["ls -la", "cat x | grep make", "echo make", "git status", "ls > out"])
def test_commands_that_do_not(command: str) -> None:
    assert workspace_code(command) is None


def test_generation_advances_for_writers_only(tmp_path: Path) -> None:
    """Read-only programs do not advance it; writes and unknown commands do; a run admitted by
    its own current workspace-code rule does not."""
    (tmp_path / "b.sh").write_text("echo 1\n")
    tools = default_tools()
    ctx = ctx_in(tmp_path)
    policy = ApprovalPolicy()
    for command in ("ls", "cat b.sh", "git status", "grep -n x b.sh", "sed -n 1p b.sh"):
        assert not policy.before_run(ShellTool(), shell(command), ctx), command
    read, _ = validate_arguments(tools["read_file"], {"path": "b.sh"})
    assert not policy.before_run(tools["read_file"], read, ctx)
    policy.add_rule(policy.rule_for_always(ShellTool(), shell("sh b.sh"), ctx))
    assert not policy.needs_approval(ShellTool(), shell("sh b.sh"), ctx)
    assert not policy.before_run(ShellTool(), shell("sh b.sh"), ctx)
    assert policy.before_run(ShellTool(), shell("cp b.sh c.sh"), ctx)
    assert policy.workspace_generation == 1
    assert policy.needs_approval(ShellTool(), shell("sh b.sh"), ctx)
    again = ApprovalPolicy.from_json(policy.to_json())
    assert again.workspace_generation == 1 and again.needs_approval(ShellTool(), shell("sh b.sh"), ctx)


def test_allow_listed_runner_holds_until_the_first_write(tmp_path: Path) -> None:
    ctx = ctx_in(tmp_path)
    policy = ApprovalPolicy(shell_allow=["make", "ls"])
    assert not policy.needs_approval(ShellTool(), shell("make test"), ctx)
    write, _ = validate_arguments(default_tools()["write_file"], {"path": "Makefile", "content": "x"})
    assert policy.before_run(default_tools()["write_file"], write, ctx)
    assert policy.needs_approval(ShellTool(), shell("make test"), ctx)
    assert not policy.needs_approval(ShellTool(), shell("ls"), ctx)


def test_legacy_unbound_rule_for_workspace_code_asks_once_more(tmp_path: Path) -> None:
    ctx = ctx_in(tmp_path)
    old = {
        "version": 1,
        "rules": [{"kind": "shell_exact", "command": "sh b.sh"}, {"kind": "shell_program", "program": "ls"}],
    }
    policy = ApprovalPolicy.from_json(old)
    assert policy.needs_approval(ShellTool(), shell("sh b.sh"), ctx)
    assert not policy.needs_approval(ShellTool(), shell("ls"), ctx)


@pytest.mark.parametrize(
    ("path", "protected"),
    [(".git/hooks/pre-commit", True), ("a/.Git/config", True), (".envrc", True), (".github/workflows/x.yml", True),
     (".acagent/config.toml", True), ("src/.zshrc", True), ("src/main.py", False), ("gitignore.txt", False)],
)  # fmt: skip
def test_protected_paths(tmp_path: Path, path: str, protected: bool) -> None:
    assert (protected_reason(tmp_path, tmp_path / path) is not None) is protected


def test_shell_private_dir_cover(tmp_path: Path) -> None:
    home = tmp_path / "data"
    home.mkdir()
    assert shell_touches_private("cat data/token", tmp_path, (home,))
    assert shell_touches_private(f"head --file={home}/x", tmp_path, (home,))
    assert shell_touches_private("rg secret", tmp_path, (home,))
    assert not shell_touches_private("cat f.txt", tmp_path, (home,))
    assert not shell_touches_private("rg secret", tmp_path, (tmp_path.parent / "elsewhere",))
    assert shell_touches_private("ls", home, (home,))
