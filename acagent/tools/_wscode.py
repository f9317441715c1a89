"""Which shell commands run code that lives in the workspace (case F40).

A shell ``always`` rule for ``sh build.sh``, ``pytest``, ``make`` or ``python x.py`` approves
*code the agent can rewrite*: the command string stays the same while what it runs changes.
:func:`workspace_code` recognises such commands; the policy binds their ``always`` rules to the
workspace as the user saw it (see :mod:`acagent.tools._policy`, "Workspace-code rules").

A command runs workspace code (the result is not None) when, in **any** of its simple commands
(split at ``; & | && || ( )``, newlines, ``$(`` and backticks), after leading ``NAME=value``
assignments, the command word

* contains a ``/`` (``./build.sh``, ``bin/run``, ``scripts/x``): a program file of the workspace;
* is a shell or an interpreter (``sh``, ``bash``, ``zsh``, ``source``, ``.``, ``python3.12``,
  ``node``, ``perl``, ``ruby``, ...), or a build tool / test runner / package manager of
  :data:`CODE_RUNNERS` (``pytest``, ``make``, ``npm``, ``cargo``, ``go``, ``tox``, ...);
* is ``git`` with a subcommand that runs hooks (``commit``, ``merge``, ``rebase``, ``push``, ...);
* is a wrapper (``env``, ``nice``, ``timeout``, ``xargs``, ``sudo``, ...): then every later word
  of that simple command is examined as a command word.

The classification only ever *tightens* a rule (a false positive costs one more question), so it
is deliberately broad. Files named by the command are returned for content binding: the script
operand of a shell or interpreter (``sh build.sh`` → ``build.sh``), a command word with ``/``,
and the well-known files a runner reads (:data:`RUNNER_FILES`: ``Makefile`` for ``make``,
``package.json`` for ``npm``, ...), whether or not they exist yet.
"""

from __future__ import annotations

import os
import re
import shlex

__all__ = ["CODE_RUNNERS", "RUNNER_FILES", "workspace_code"]

_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "csh", "tcsh", "fish", "ash", "busybox"})
_INTERPRETER_RE = re.compile(
    r"^(python|pypy|perl|ruby|node|nodejs|php|lua|luajit|tclsh|deno|bun|Rscript|julia|java|"
    r"groovy|scala|kotlin|elixir|erl|escript|guile|racket|sbcl|awk|gawk|mawk|nawk)[0-9.]*(-[A-Za-z0-9.]+)?$"
)
CODE_RUNNERS = frozenset(
    {
        "source", ".", "exec", "eval",
        "pytest", "py.test", "tox", "nox", "hatch", "pdm", "poetry", "pipenv", "uv", "uvx", "pip",
        "pip3", "pipx", "coverage", "unittest", "behave", "invoke", "fab", "doit", "scons",
        "make", "gmake", "bmake", "cmake", "ctest", "ninja", "meson", "bazel", "bazelisk", "buck",
        "buck2", "just", "task", "mage", "rake", "bundle", "rspec", "jest", "vitest", "mocha",
        "ava", "karma", "playwright", "cypress", "npm", "npx", "yarn", "pnpm", "pnpx", "corepack",
        "tsx", "ts-node", "cargo", "rustc", "go", "gradle", "gradlew", "mvn", "mvnw", "ant", "sbt",
        "lein", "clojure", "clj", "mix", "rebar3", "stack", "cabal", "dotnet", "swift", "composer",
        "phpunit", "pre-commit", "lefthook", "docker", "podman", "docker-compose", "nix",
        "nix-shell", "direnv", "vagrant", "ansible-playbook", "terraform", "tofu", "pulumi",
    }
)  # fmt: skip
"""Build tools, test runners and package managers: they run workspace code (or its scripts)."""

_WRAPPERS = frozenset(
    {
        "env", "nice", "nohup", "timeout", "xargs", "sudo", "doas", "su", "runuser", "setsid",
        "stdbuf", "strace", "ltrace", "ionice", "chrt", "taskset", "numactl", "chroot", "unshare",
        "nsenter", "flock", "watch", "script", "parallel", "firejail", "fakeroot", "systemd-run",
        "time", "command", "builtin", "then", "do", "else", "!", "unbuffer", "caffeinate", "entr",
    }
)  # fmt: skip
_GIT_HOOK_SUBCOMMANDS = frozenset(
    {"commit", "merge", "rebase", "am", "push", "pull", "checkout", "switch", "cherry-pick", "revert"}
)
RUNNER_FILES: dict[str, tuple[str, ...]] = {
    "make": ("Makefile", "makefile", "GNUmakefile"),
    "gmake": ("Makefile", "makefile", "GNUmakefile"),
    "npm": ("package.json",),
    "yarn": ("package.json",),
    "pnpm": ("package.json",),
    "pytest": ("conftest.py", "pytest.ini", "pyproject.toml", "setup.cfg", "tox.ini"),
    "tox": ("tox.ini", "pyproject.toml"),
    "nox": ("noxfile.py",),
    "cargo": ("Cargo.toml", "build.rs"),
    "just": ("justfile", "Justfile"),
    "rake": ("Rakefile",),
}
"""Files a runner reads to decide what to run, bound by content (``absent`` counts too)."""

_SEPARATORS = frozenset({";", "&", "|", "&&", "||", "(", ")", ";;", "|&", "\n"})
_ASSIGNMENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_MAX_BOUND_FILES = 16


def _segments(command: str) -> list[list[str]] | None:
    """Simple commands of ``command`` (lists of words), or None if it cannot be split."""
    text = command.replace("`", " ; ").replace("$(", " ( ").replace("\r", "\n")
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    lexer.whitespace = " \t"
    try:
        tokens = list(lexer)
    except ValueError:
        return None
    out: list[list[str]] = [[]]
    skip_next = False
    for token in tokens:
        if token in _SEPARATORS or (token and set(token) <= set(";&|()\n")):
            out.append([])
        elif token and set(token) <= set("<>&"):
            skip_next = True  # a redirect operator: its target is not a command word
        elif skip_next:
            skip_next = False
        else:
            out[-1].append(token)
    return [seg for seg in out if seg]


def _is_code_word(word: str, rest: list[str]) -> bool:
    name = os.path.basename(word)
    if "/" in word or name in _SHELLS or name in CODE_RUNNERS or _INTERPRETER_RE.match(name):
        return True
    return name == "git" and any(w in _GIT_HOOK_SUBCOMMANDS for w in rest)


def _files_of(word: str, rest: list[str]) -> list[str]:
    name = os.path.basename(word)
    files = [word] if "/" in word else []
    if name in _SHELLS or name in ("source", ".") or _INTERPRETER_RE.match(name):
        script = next((w for w in rest if w and not w.startswith("-")), None)
        if script is not None and not (rest and rest[0] in ("-c", "-e", "-m")):
            files.append(script)
    if name in ("make", "gmake") and "-f" in rest[:-1]:
        files.append(rest[rest.index("-f") + 1])
    files.extend(RUNNER_FILES.get(name, ()))
    return files


def workspace_code(command: str) -> list[str] | None:
    """Whether ``command`` runs workspace code, and the files its rule is bound to.

    Args:
        command: the exact shell command string.

    Returns:
        None if no simple command of it runs workspace code (by the rules of the module
        docstring); else the path arguments (as written, relative to the workspace root) of the
        files that decide what runs, possibly empty. Unsplittable input (an unterminated quote)
        counts as running workspace code.
    """
    segments = _segments(command)
    if segments is None:
        return []
    found = False
    files: list[str] = []
    for seg in segments:
        words = [w for w in seg if w]
        while words and _ASSIGNMENT_RE.match(words[0]):
            words.pop(0)
        if not words:
            continue
        candidates = [0]
        if "/" not in words[0] and words[0] in _WRAPPERS:
            candidates = list(range(len(words)))
        for i in candidates:
            if _is_code_word(words[i], words[i + 1 :]):
                found = True
                files.extend(_files_of(words[i], words[i + 1 :]))
                break
    if not found:
        return None
    return list(dict.fromkeys(files))[:_MAX_BOUND_FILES]
