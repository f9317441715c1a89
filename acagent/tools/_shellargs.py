"""Condition 4 and 5 of the shell rule (:mod:`acagent.tools._shellrule`): each admitted
program's options and the paths its arguments name.

A path can be named directly (an operand, a ``--long=value``) or **indirectly**, and both must
stay inside the workspace (F92):

- a ``@file`` response file (``tool @args.txt``): the name after ``@`` is a path too;
- a ``key=path`` operand (``dd if=../x``): the part after the first ``=`` is a path too;
- a git revision path (``HEAD:path``, ``HEAD:./../x``, ``-L1,5:path``): relative to the
  repository root or to the working directory, so any ``:`` in a git argument asks (but in the
  values of ``--format``/``--pretty``/``--date``/``--since``/… which are text);
- a file that lists paths for the program to open: ``md5sum -c``/``--check`` (and every
  ``sha*sum``/``b2sum``), ``--files0-from`` (``du``, ``wc``, ``sort``, ``cat``, ``find
  -files0-from``), ``tree --fromfile``: these options ask;
- recursion that follows symlinks: ``grep -R``, ``rg -L``, ``ls -L``, ``du -L``, ``tree -l``,
  ``find -L/-H/-follow`` and ``diff -r`` (GNU diff follows links by default);
- a different repository or work tree (``git --git-dir``, ``--work-tree``, ``-C``): git's
  argv[1] must be a read-only subcommand, so global options refuse, and the long forms refuse
  after it too.

Other programs get the generic checks only (remembering or listing a program the table does not
model trusts its option grammar; the ``@``/``=`` forms are checked for every program).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from acagent.tools._paths import PathError, resolve_in_workspace

__all__ = ["check_arguments"]


@dataclass(frozen=True)
class _Options:
    banned_short: frozenset[str] = frozenset()
    banned_long: frozenset[str] = frozenset()
    takes_value: frozenset[str] = frozenset()
    """Short options whose value is the rest of the bundle or the next word."""


_TABLE: dict[str, _Options] = {
    "sort": _Options(
        banned_short=frozenset("oT"),
        banned_long=frozenset({"output", "temporary-directory", "compress-program", "files0-from"}),
        takes_value=frozenset("kotST"),
    ),
    "rg": _Options(
        banned_short=frozenset("zL"),
        banned_long=frozenset({"pre", "pre-glob", "search-zip", "hostname-bin", "follow"}),
        takes_value=frozenset("ABCdEefgjMmrTt"),
    ),
    "printf": _Options(banned_short=frozenset("v")),
    "tree": _Options(banned_short=frozenset("olR"), banned_long=frozenset({"output", "fromfile"})),
    # Recursion that follows symlinks reads through a link in the workspace to anywhere (F19):
    # operands are checked, the files under them are not, so these options refuse (like find -L).
    "grep": _Options(
        banned_short=frozenset("R"),
        banned_long=frozenset({"dereference-recursive"}),
        takes_value=frozenset("ABCDdefm"),
    ),
    "ls": _Options(banned_short=frozenset("L"), banned_long=frozenset({"dereference"})),
    "du": _Options(banned_short=frozenset("L"), banned_long=frozenset({"dereference", "files0-from"})),
    # A file that lists the paths to open (module docstring): the listed paths are never checked.
    "wc": _Options(banned_long=frozenset({"files0-from"})),
    "diff": _Options(
        banned_short=frozenset("r"),
        banned_long=frozenset({"recursive"}),
        takes_value=frozenset("CDFILSUWxX"),
    ),
    **{
        name: _Options(banned_short=frozenset("c"), banned_long=frozenset({"check"}))
        for name in (
            "md5sum",
            "sha1sum",
            "sha224sum",
            "sha256sum",
            "sha384sum",
            "sha512sum",
            "b2sum",
            "cksum",
        )
    },
}

_FIND_BANNED = frozenset(
    {
        "-exec",
        "-execdir",
        "-ok",
        "-okdir",
        "-delete",
        "-fprint",
        "-fprint0",
        "-fprintf",
        "-fls",
        "-L",
        "-H",
        "-follow",
        "-files0-from",
    }
)
_SED_SHORT_FLAGS = frozenset("nErsuz")
_SED_SHORT_VALUE = frozenset("el")
_SED_LONG = frozenset(
    {"quiet", "silent", "regexp-extended", "separate", "unbuffered", "null-data", "zero-terminated", "posix",
     "debug", "sandbox", "expression", "line-length", "help", "version"}
)  # fmt: skip
_SED_LONG_BANNED = frozenset({"in-place", "file", "follow-symlinks", "binary"})
_SED_SCRIPT_BANNED = frozenset("ewWrR")
_GIT_SUBCOMMANDS = frozenset({"status", "log", "diff", "show", "branch"})
_GIT_BANNED_LONG = frozenset(
    {"output", "ext-diff", "exec-path", "config-env", "git-dir", "work-tree", "open-files-in-pager"}
)
_GIT_TEXT_LONG = frozenset(
    {"format", "pretty", "date", "since", "until", "after", "before", "grep", "author", "committer"}
)
"""git options whose value is text, never a path (a ``:`` in it is not a revision path)."""
_GIT_BRANCH_SHORT = frozenset("arvl")
_GIT_BRANCH_LONG = frozenset({"all", "remotes", "verbose", "list", "show-current", "no-color"})


def _long_matches(name: str, names: frozenset[str]) -> bool:
    """True if ``--name`` may mean one of ``names`` (exact, abbreviation, or extension)."""
    return bool(name) and any(full.startswith(name) or name.startswith(full) for full in names)


def _named_paths(arg: str) -> list[str]:
    """Every path an argument may name: itself, a ``@file`` response file, a ``key=path`` value."""
    names = [arg]
    if arg.startswith("@") and len(arg) > 1:
        names.append(arg[1:])
    key, eq, value = arg.partition("=")
    if eq and key and value:
        names.append(value)
    return names


def _paths_ok(root: Path | None, operands: list[str]) -> bool:
    if root is None:
        return True
    for arg in operands:
        for name in _named_paths(arg):
            if name == "":
                continue
            try:
                resolve_in_workspace(root, name)
            except PathError:
                return False
    return True


@dataclass
class _Parsed:
    operands: list[str] = field(default_factory=list)
    shorts: list[tuple[str, str | None]] = field(default_factory=list)
    """(letter, value) for each expanded short option."""
    longs: list[tuple[str, str | None]] = field(default_factory=list)
    """(name, value-after-=) for each long option."""
    option_values: list[str] = field(default_factory=list)


def _parse(args: list[str], takes_value: frozenset[str]) -> _Parsed | None:
    """getopt-style parse; None if a short bundle holds '/' (its value cannot be attributed)."""
    parsed = _Parsed()
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            parsed.operands.extend(args[i:])
            break
        if arg.startswith("--"):
            name, eq, value = arg[2:].partition("=")
            if "/" in name:  # not an option name: a program without getopt may open it
                return None
            parsed.longs.append((name, value if eq else None))
            if eq and value:
                parsed.option_values.append(value)
        elif arg.startswith("-") and arg != "-":
            bundle = arg[1:]
            for j, letter in enumerate(bundle):
                if letter in takes_value:
                    value = bundle[j + 1 :]
                    if not value and i < len(args):
                        value = args[i]
                        i += 1
                        parsed.option_values.append(value)
                    elif "/" in value:
                        return None
                    parsed.shorts.append((letter, value))
                    break
                if letter == "/":
                    return None
                parsed.shorts.append((letter, None))
        else:
            parsed.operands.append(arg)
    return parsed


def _check_generic(argv: list[str], root: Path | None, opts: _Options) -> bool:
    parsed = _parse(argv[1:], opts.takes_value)
    if parsed is None:
        return False
    if any(letter in opts.banned_short for letter, _ in parsed.shorts):
        return False
    if any(_long_matches(name, opts.banned_long) for name, _ in parsed.longs):
        return False
    return _paths_ok(root, parsed.operands + parsed.option_values)


def _check_find(argv: list[str], root: Path | None) -> bool:
    args = argv[1:]
    if any(arg in _FIND_BANNED for arg in args):
        return False
    if any(arg.startswith("-fprint") for arg in args):
        return False
    operands = [a for a in args if not a.startswith("-")]
    return _paths_ok(root, operands)


def _check_sed(argv: list[str], root: Path | None) -> bool:
    parsed = _parse(argv[1:], _SED_SHORT_VALUE)
    if parsed is None:
        return False
    scripts: list[str] = []
    for letter, value in parsed.shorts:
        if letter not in _SED_SHORT_FLAGS | _SED_SHORT_VALUE:
            return False
        if letter == "e":
            scripts.append(value or "")
    for name, value in parsed.longs:
        if _long_matches(name, _SED_LONG_BANNED) or not any(full.startswith(name) for full in _SED_LONG):
            return False
        if name and "expression".startswith(name):
            if value is None:
                return False  # "--expression SCRIPT": keep it simple, ask
            scripts.append(value)
    operands = list(parsed.operands)
    if not scripts:
        if not operands:
            return False
        scripts.append(operands.pop(0))
    if any(c in _SED_SCRIPT_BANNED for script in scripts for c in script):
        return False
    return _paths_ok(root, operands)


def _check_git(argv: list[str], root: Path | None) -> bool:
    if len(argv) < 2 or argv[1] not in _GIT_SUBCOMMANDS:
        return False
    parsed = _parse(argv[2:], frozenset())
    if parsed is None:
        return False
    if any(_long_matches(name, _GIT_BANNED_LONG) for name, _ in parsed.longs):
        return False
    if any(letter == "O" for letter, _ in parsed.shorts):
        return False
    if any(op.startswith(":") for op in parsed.operands + parsed.option_values):
        return False
    for arg in argv[2:]:  # a revision path (HEAD:path, -L1,5:path) may name any file of the repo
        name, eq, _ = arg[2:].partition("=") if arg.startswith("--") else ("", "", "")
        if ":" in arg and not (eq and name in _GIT_TEXT_LONG):
            return False
    if argv[1] == "branch":
        if parsed.operands or parsed.option_values:
            return False
        if any(letter not in _GIT_BRANCH_SHORT for letter, _ in parsed.shorts):
            return False
        if any(name not in _GIT_BRANCH_LONG or value is not None for name, value in parsed.longs):
            return False
    return _paths_ok(root, parsed.operands + parsed.option_values)


def check_arguments(argv: list[str], root: Path | None) -> bool:
    """Conditions 4 and 5 for ``argv`` (a plain simple command whose program is admitted)."""
    program = argv[0]
    if program == "find":
        return _check_find(argv, root)
    if program == "sed":
        return _check_sed(argv, root)
    if program == "git":
        return _check_git(argv, root)
    return _check_generic(argv, root, _TABLE.get(program, _Options()))
