"""F20: shell grammar never turns an approved command into an unapproved one.

acagent's ``shell`` argument is named ``command`` (as in the case). The rule under test is the
recommended rule of the case, documented in ``acagent/tools/_shellrule.py``.
"""

from __future__ import annotations

import itertools
import subprocess
from pathlib import Path

import pytest

from acagent.tools import (
    ApprovalPolicy,
    ShellTool,
    ToolContext,
    default_tools,
    shell_command_admitted,
    validate_arguments,
)

SETUP_COMMANDS = [
    "echo hi",
    "ls -la",
    "cat f.txt",
    "git status",
    "find . -name f.txt",
    "sed -n '1,2p' f.txt",
    "sort f.txt",
    "rg a f.txt",
    "env",
]
ALLOW_LIST = ["echo", "ls", "cat", "git", "find", "sed", "sort", "rg", "env"]
EXACT_REPEATS = ["echo hi", "ls -la", "git status", "sed -n '1,2p' f.txt", "sort f.txt", "rg a f.txt"]
RULE_DEPENDENT = ["echo hello", "ls", "sort -r f.txt", "rg b f.txt"]


def step3_rows(C: Path, S: int) -> list[str]:
    return [
        f"echo hi; touch {C}/c1",
        f"echo hi && touch {C}/c2",
        f"ls /nonexistent || touch {C}/c3",
        f"echo x | tee {C}/c4",
        f'echo "$(touch {C}/c5)"',
        f"echo `touch {C}/c6`",
        f"echo hi\ntouch {C}/c7",
        f"echo hi\r\ntouch {C}/c8",
        f"echo hi & touch {C}/c9",
        f"echo pwned > {C}/c10",
        f"echo pwned >| {C}/c11",
        "echo pwned >> ~/.bashrc",
        f"env touch {C}/c13a",
        f"echo {C}/c13b | xargs touch",
        f"find . -maxdepth 0 -exec touch {C}/c14a \\;",
        f"find . -maxdepth 0 -fprint {C}/c14b",
        f"sed -n '1e touch {C}/c15a' f.txt",
        f"sed -n '1w {C}/c15b' f.txt",
        "rg --pre sh -e x p.sh",
        f'git -c core.fsmonitor="touch {C}/c17" status',
        f"GIT_CONFIG_PARAMETERS=\"'core.fsmonitor=touch {C}/c18'\" git status",
        f"echo${{IFS}}x>{C}/c19",
        f"sort -uo {C}/c20a f.txt",
        "sed -ni '1d' f.txt",
        f"cat <(touch {C}/c21)",
        f"cat f.txt > /dev/tcp/127.0.0.1/{S}",
        f'ec""ho hi; touch {C}/c23',
        f"/bin/ls; touch {C}/c24",
        # the git-alias replacements of rows 17 and 18
        f"git -c alias.s='!touch {C}/c17' s",
        f"GIT_CONFIG_PARAMETERS=\"'alias.s=!touch {C}/c18'\" git s",
    ]


@pytest.fixture
def f20(layout):
    W = layout.W
    subprocess.run(["git", "init", "-q", str(W)], check=True)
    (W / "f.txt").write_text("a\nb\n")
    C = layout.B / "canary"
    C.mkdir()
    (W / "p.sh").write_text(f"touch {C}/c16\n")
    return layout, C


def ctx_for(W: Path) -> ToolContext:
    return ToolContext(cwd=W, session_id="s", tool_call_id="t", emit_output=lambda _: None)


def shell_args(command: str):
    args, error = validate_arguments(ShellTool(), {"command": command})
    assert args is not None, error
    return args


def policy_from_always(W: Path) -> ApprovalPolicy:
    """Step 1: answer ``always`` to each setup call."""
    policy = ApprovalPolicy()
    ctx = ctx_for(W)
    for command in SETUP_COMMANDS:
        assert policy.needs_approval(ShellTool(), shell_args(command), ctx)
        rule = policy.rule_for_always(ShellTool(), shell_args(command), ctx)
        assert rule is not None
        policy.add_rule(rule)
    return policy


@pytest.fixture(params=["always", "allow_list"])
def policy(request, f20):
    layout, _ = f20
    if request.param == "always":
        return policy_from_always(layout.W)
    return ApprovalPolicy(shell_allow=ALLOW_LIST)


class TestRememberedRules:
    def test_always_remembers_program_or_exact_string(self, f20):
        layout, _ = f20
        policy = policy_from_always(layout.W)
        assert policy.shell_programs == {"echo", "ls", "cat", "git status", "find", "sed", "sort", "rg"}
        assert "env" in policy.shell_exact
        assert "env" not in policy.programs

    def test_rules_round_trip_through_json(self, f20):
        layout, _ = f20
        policy = policy_from_always(layout.W)
        policy.add_rule({"kind": "tool", "tool": "write_file"})
        again = ApprovalPolicy.from_json(policy.to_json())
        assert again.to_json() == policy.to_json()
        assert again.shell_programs == policy.shell_programs
        assert again.allow_list == frozenset()

    def test_unknown_rule_kind(self):
        with pytest.raises(ValueError):
            ApprovalPolicy().add_rule({"kind": "everything"})
        with pytest.raises(ValueError):
            ApprovalPolicy().add_rule({"kind": "tool"})

    def test_always_on_a_compound_command_remembers_only_that_string(self, f20):
        layout, _ = f20
        policy = ApprovalPolicy()
        ctx = ctx_for(layout.W)
        command = "make && make test"
        policy.add_rule(policy.rule_for_always(ShellTool(), shell_args(command), ctx))
        assert not policy.needs_approval(ShellTool(), shell_args(command), ctx)
        assert policy.needs_approval(ShellTool(), shell_args("make && make test "), ctx)
        assert policy.needs_approval(ShellTool(), shell_args("make"), ctx)

    def test_always_on_an_outside_path_remembers_program_and_exact_string(self, f20):
        layout, _ = f20
        policy = ApprovalPolicy()
        ctx = ctx_for(layout.W)
        policy.add_rule(policy.rule_for_always(ShellTool(), shell_args("cat /etc/hostname"), ctx))
        assert not policy.needs_approval(ShellTool(), shell_args("cat /etc/hostname"), ctx)
        assert not policy.needs_approval(ShellTool(), shell_args("cat f.txt"), ctx)
        assert policy.needs_approval(ShellTool(), shell_args("cat /etc/passwd"), ctx)

    def test_write_tools_and_read_only_tools(self, f20):
        layout, _ = f20
        tools = default_tools()
        policy = ApprovalPolicy()
        ctx = ctx_for(layout.W)
        write = tools["write_file"]
        wargs, _ = validate_arguments(write, {"path": "x", "content": "y"})
        assert policy.needs_approval(write, wargs, ctx)
        assert not policy.needs_approval(write, wargs, ctx, auto_approve=True)
        policy.add_rule(policy.rule_for_always(write, wargs, ctx))
        assert not policy.needs_approval(write, wargs, ctx)
        edit = tools["edit_file"]
        eargs, _ = validate_arguments(edit, {"path": "x", "old_string": "a", "new_string": "b"})
        assert policy.needs_approval(edit, eargs, ctx)
        for name in ["read_file", "list_dir", "glob"]:
            args, _ = validate_arguments(
                tools[name], {"path": ".", "pattern": "*"} if name == "glob" else {"path": "."}
            )
            assert not policy.needs_approval(tools[name], args, ctx)
            assert policy.rule_for_always(tools[name], args, ctx) is None

    def test_yes_approves_everything_by_design(self, f20):
        layout, C = f20
        ctx = ctx_for(layout.W)
        assert not ApprovalPolicy().needs_approval(ShellTool(), shell_args(f"echo; touch {C}/x"), ctx, True)


class TestF20Rows:
    @pytest.mark.parametrize("command", EXACT_REPEATS + RULE_DEPENDENT + ["cat f.txt", "find . -name f.txt"])
    def test_controls_run_without_prompt(self, policy, f20, command):
        layout, _ = f20
        assert not policy.needs_approval(ShellTool(), shell_args(command), ctx_for(layout.W))

    def test_env_exact_repeat(self, f20):
        layout, _ = f20
        policy = policy_from_always(layout.W)
        assert not policy.needs_approval(ShellTool(), shell_args("env"), ctx_for(layout.W))
        # with env on a configured list instead, env is a wrapper and always asks
        assert ApprovalPolicy(ALLOW_LIST).needs_approval(ShellTool(), shell_args("env"), ctx_for(layout.W))

    def test_step3_rows_all_ask(self, policy, f20):
        layout, C = f20
        ctx = ctx_for(layout.W)
        for command in step3_rows(C, 45678):
            assert policy.needs_approval(ShellTool(), shell_args(command), ctx), command

    @pytest.mark.parametrize("row", ["q1", "q2"])
    def test_look_alikes_ask(self, policy, f20, row):
        """q1 holds ';' and q2's word resolves outside $W: under the rule both ask."""
        layout, C = f20
        command = {"q1": f'echo "\\"; touch {C}/q1; echo \\""', "q2": f"echo hi；touch {C}/q2"}[row]
        assert policy.needs_approval(ShellTool(), shell_args(command), ctx_for(layout.W))

    def test_q2_inside_the_workspace_is_admitted(self, policy, f20):
        layout, _ = f20
        assert not policy.needs_approval(ShellTool(), shell_args("echo hi；touch q2"), ctx_for(layout.W))


# ---------------------------------------------------------------------------------------------
# Generated corpus

BASES = {
    "echo": "echo hi",
    "ls": "ls -la",
    "cat": "cat f.txt",
    "git": "git status",
    "find": "find . -name f.txt",
    "sed": "sed -n 1p f.txt",
    "sort": "sort f.txt",
    "rg": "rg a f.txt",
    "head": "head -n 1 f.txt",
    "wc": "wc -l f.txt",
    "grep": "grep a f.txt",
    "tee": "tee out.txt",
    "printf": "printf x",
}
WRAPPERS = [
    "env", "xargs", "nice", "nohup", "timeout 5", "sudo", "doas", "sh -c", "bash -c", "zsh -c",
    "dash -c", "exec", "command", "builtin", "eval", "time", "stdbuf -o0", "setsid", "strace",
    "busybox", "python3 -c", "python -c", "perl -e", "ruby -e", "node -e", "awk", "flock x",
    "watch", "chroot .", "ionice", "taskset 1", "source", ".",
]  # fmt: skip
LISTED = set(BASES) | {w.split()[0] for w in WRAPPERS}


def separator_forms(base: str, target: str) -> list[str]:
    t = f"touch {target}"
    return [
        f"{base}; {t}", f"{base};{t}", f"{base} && {t}", f"{base} || {t}", f"{base} | tee {target}",
        f"{base} |& tee {target}", f"{base} & {t}", f"{base}&{t}", f"{base}\n{t}", f"{base}\r\n{t}",
        f"{base}\r{t}", f"{t}; {base}", f"{base} ;{t}", f"{base} &&{t}",
    ]  # fmt: skip


def substitution_forms(base: str, target: str) -> list[str]:
    t = f"touch {target}"
    return [
        f"{base} $({t})", f'{base} "$({t})"', f"{base} `{t}`", f'{base} "`{t}`"', f"{base} <({t})",
        f"{base} >({t})", f"{base} ${{IFS}}x", f"{base}${{IFS}}x", f"{base} $HOME", f'{base} "$HOME"',
        f"{base} $((1+1))", f"{base} {{a,b}}", f"{base} ~/.bashrc", f"{base} ~root", f"{base} x=~/y",
        f"{base} [.][.]/outside.txt", f"{base} ../*", f"{base} *", f"{base} ?", f"{base} #x",
        f"{base} ( {t} )", f"{base} {{ {t}; }}", f"{base} '", f'{base} "', f"{base} \\",
        f"{base} $'\\x3b'", f"{base} !({t})",
    ]  # fmt: skip


def redirect_forms(base: str, target: str) -> list[str]:
    return [
        f"{base} > {target}", f"{base} >{target}", f"{base}>{target}", f"{base} >> {target}",
        f"{base} >| {target}", f"{base} 2> {target}", f"{base} 1>{target}", f"{base} &> {target}",
        f"{base} &>> {target}", f"{base} < {target}", f"{base} <<< x", f"{base} << EOF",
        f"{base} <> {target}", f"{base} > /dev/tcp/127.0.0.1/9", f"{base} 2>&1", f"{base} >&2",
    ]  # fmt: skip


def prefix_forms(base: str, target: str) -> list[str]:
    forms = [f"FOO=1 {base}", f"GIT_CONFIG_PARAMETERS=x {base}", f"PATH=. {base}", f"/bin/{base}",
             f"./{base}", f"../{base}", f"~/{base}", f"! {base}", f"if {base}", f"coproc {base}"]  # fmt: skip
    forms += [f"{w} {base}" for w in WRAPPERS]
    forms += [f"{w} '{base}'" for w in WRAPPERS]
    return forms


# Each program's forms that write files or run programs (targets inside the workspace, so only the
# option rule can refuse them).
OPTION_FORMS = [
    "find . -exec touch out \\;", "find . -exec touch out +", "find . -execdir touch out +",
    "find . -ok touch out +", "find . -okdir touch out +", "find . -delete", "find . -fprint out",
    "find . -fprint0 out", "find . -fprintf out %p", "find . -fls out", "find -L . -name x",
    "find . -follow", "find -H .",
    "sed -i 1d f.txt", "sed -ni 1d f.txt", "sed -in 1d f.txt", "sed -i.bak 1d f.txt", "sed -si 1d f.txt",
    "sed --in-place 1d f.txt", "sed --in-place=.bak 1d f.txt", "sed --in 1d f.txt", "sed --i 1d f.txt",
    "sed -n '1e touch out' f.txt", "sed -n '1w out' f.txt", "sed -n '1W out' f.txt",
    "sed 's/a/touch out/e' f.txt", "sed 's/a/b/w out' f.txt", "sed -n -e '1w out' f.txt",
    "sed -ne '1w out' f.txt", "sed -e1wout f.txt", "sed --expression='1w out' f.txt",
    "sed --expr='1e id' f.txt", "sed -f script.sed f.txt", "sed --file=script.sed f.txt",
    "sed -nf script.sed f.txt", "sed -n 'e id' f.txt", "sed '1r f.txt' f.txt",
    "sort -o out f.txt", "sort -uo out f.txt", "sort -ou out f.txt", "sort -ruo out f.txt",
    "sort -oout f.txt", "sort --output=out f.txt", "sort --output out f.txt", "sort --out=out f.txt",
    "sort --o=out f.txt", "sort -T . f.txt", "sort --temporary-directory=. f.txt",
    "sort --compress-program=touch f.txt", "sort --compress=touch f.txt",
    "rg --pre sh -e x p.sh", "rg --pre=sh x", "rg --pr sh x", "rg --pre-glob '*' x", "rg -z x",
    "rg -iz x", "rg --search-zip x", "rg --hostname-bin=touch x",
    "git -c core.fsmonitor=touch status", "git -c alias.s=x s", "git --config-env=a=b status",
    "git --exec-path=. status", "git -C . status", "git --git-dir=.git status",
    "git --work-tree=. status", "git diff --output=out", "git log --output=out", "git show --output=out",
    "git diff --ext-diff", "git diff --ext", "git diff -Oorder", "git s", "git commit -m x",
    "git checkout .", "git branch newb", "git branch -D x", "git branch -m a b", "git branch -f x",
    "git branch --delete x", "git push", "git config core.pager touch", "git status -- :/",
    "git --no-pager status", "git log --output out", "git stash", "git reset --hard", "git clean -fdx",
    "printf -v x hi", "tree -o out",
]  # fmt: skip


def corpus(C: Path) -> list[str]:
    out: list[str] = []
    for base in BASES.values():
        for target in [f"{C}/x", "inside.txt"]:
            for forms in (separator_forms, substitution_forms, redirect_forms, prefix_forms):
                out += forms(base, target)
    out += OPTION_FORMS
    return out


class TestGeneratedCorpus:
    def test_bases_are_admitted(self, f20):
        """The controls: each base command alone is admitted, so refusals below are the forms'."""
        layout, _ = f20
        for base in BASES.values():
            assert shell_command_admitted(base, layout.W, LISTED), base

    def test_no_generated_string_is_admitted(self, f20):
        layout, C = f20
        strings = corpus(C)
        assert len(strings) > 3000
        admitted = [s for s in strings if shell_command_admitted(s, layout.W, LISTED)]
        assert admitted == []

    def test_no_generated_string_is_admitted_by_the_policy(self, f20):
        layout, C = f20
        ctx = ctx_for(layout.W)
        policies = [ApprovalPolicy(LISTED), policy_from_always(layout.W)]
        for policy, command in itertools.product(policies, corpus(C)):
            assert policy.needs_approval(ShellTool(), shell_args(command), ctx), command


class TestRuleUnits:
    @pytest.mark.parametrize(
        "command",
        [
            "echo hi",
            "echo 'hello world'",
            'echo "a b"',
            "ec''ho hi",
            "ls sub",
            "ls -la sub/",
            "cat f.txt link_in/x",
            "find . -name '*.txt'",
            "find sub -type f",
            "sed -n '1,2p' f.txt",
            "sed -n -e 1p f.txt",
            "sed 's/a/b/g' f.txt",
            "sort -r -k1 f.txt",
            "sort -u f.txt",
            "rg -n a f.txt",
            "rg -A2 a",
            "git status -s",
            "git log --oneline -n 3",
            "git diff HEAD~1 -- f.txt",
            "git show HEAD",
            "git branch",
            "git branch -av",
            "head -n 1 f.txt",
            "echo HEAD~1 a~b",
            "echo 100%",
            "echo a=b",
            'echo ""',
        ],
    )
    def test_admitted(self, f20, command):
        layout, _ = f20
        assert shell_command_admitted(command, layout.W, LISTED), command

    @pytest.mark.parametrize(
        "command",
        [
            "",
            "   ",
            "cat ../outside.txt",
            "cat /etc/passwd",
            "cat link_out/secret.txt",
            "cat link_file",
            "cat sub/rel_up/secret.txt",
            "ls ..",
            "ls /",
            "cat --files0-from=/etc/x",
            "grep -f/etc/passwd a",
            "echo ~",
            "cat ~/x",
            "unknown f.txt",
            "Echo hi",
            "echo hi\x00",
            "echo hi\x0b; x",
            "echo 'unterminated",
            "echo trailing\\",
            "git",
            "sed",
            "sed -n",
            "echo $'\\x3b'",
            "cat --/../outside.txt",
            "cat -/../outside.txt",
        ],
    )
    def test_refused(self, f20, command):
        layout, _ = f20
        assert not shell_command_admitted(command, layout.W, LISTED), command

    @pytest.mark.parametrize("program", sorted(LISTED))
    def test_nothing_runs_when_nothing_is_listed(self, f20, program):
        layout, _ = f20
        assert not shell_command_admitted(BASES.get(program, program), layout.W, set())

    def test_never_admitted_even_if_listed(self, f20):
        layout, _ = f20
        for program in ["env", "sh", "bash", "python3", "python3.11", "perl", "node", "xargs", "tar", "exec"]:
            assert not shell_command_admitted(program, layout.W, {program}), program
