"""The shell admission rule: when a command may run without asking (case F20).

A shell command runs without approval (given a set of admitted program names: the configured
allow-list ``settings.shell_allow`` plus programs remembered from ``always`` answers) only when
:func:`shell_command_admitted` holds, that is when **all** of these hold:

1. **One simple command.** The string contains none of ``; & | < > $ ` ( ) { }``, no newline, no
   carriage return and no other control character (tab excepted). So no separators, pipes,
   background jobs, redirects (``/dev/tcp`` included), expansions or substitutions of any kind.
2. **Quoting is unambiguous.** The words are split the way bash splits them (space/tab,
   ``'...'``, ``"..."``, backslash) and must equal ``shlex.split(command)``; an unterminated
   quote, a trailing backslash or any disagreement refuses. A word with an unquoted glob
   character (``* ? [``), an unquoted ``~`` at the start of a word or after ``=``/``:`` (tilde
   expansion) or an unquoted leading ``#`` (a comment) refuses: the text checked must be the
   text bash passes on.
3. **No leading ``NAME=value``** and **argv[0] is a bare name** (``[A-Za-z0-9_][A-Za-z0-9_.+-]*``,
   never a path such as ``/bin/ls``) **on the admitted list**, and **never** a program that runs
   other programs or changes the shell: wrappers (``env``, ``xargs``, ``nice``, ``nohup``,
   ``timeout``, ``sudo``, ``doas``, ``setsid``, ``stdbuf``, ``strace``, ``watch``, ...), shells
   (``sh``, ``bash``, ``zsh``, ``dash``, ``busybox``, ...), interpreters (``python*``, ``perl*``,
   ``ruby``, ``node``, ``awk``, editors with command options, ...), builtins that execute or alter
   execution (``exec``, ``eval``, ``source``, ``.``, ``command``, ``builtin``, ``time``,
   ``trap``, ``enable``, ``fc``, ...), reserved words, and ``tar``. These are refused even if
   configured or remembered.
4. **No option that writes files or runs programs**, per program. Bundled short options are
   expanded first (``-uo`` = ``-u -o``, ``-ni`` = ``-n -i``) and long options match by any
   prefix (GNU getopt accepts abbreviations: ``--out`` = ``--output``):

   * ``find``: ``-exec -execdir -ok -okdir -delete -fprint -fprint0 -fprintf -fls``, and the
     symlink-following ``-L -H -follow``;
   * ``sed``: only ``-n -E -r -s -u -z -e -l`` and their long forms are accepted (so ``-i``,
     ``--in-place``, ``-f``, ``--file`` refuse); every script (``-e`` values, else the first
     operand) must contain none of the letters ``e w W r R`` anywhere (conservative: this
     refuses the ``e``/``w``/``W`` commands and ``s///e``/``s///w`` flags, and ``r``/``R`` reads);
   * ``sort``: ``-o --output -T --temporary-directory --compress-program``;
   * ``rg``: ``--pre --pre-glob -z --search-zip --hostname-bin`` (and ``-L --follow``, below);
   * ``git``: argv[1] must be one of ``status log diff show branch`` (so no global option:
     ``-c``, ``-C``, ``--config-env``, ``--exec-path``, ``--git-dir``, ... all refuse, and no
     alias runs); ``--output``, ``--ext-diff``, ``-O`` refuse; ``branch`` only lists (options
     ``-a -r -v -l --all --remotes --verbose --list --show-current --no-color``, no operand);
     operands starting with ``:`` (pathspec magic) refuse;
   * ``printf``: ``-v``; ``tree``: ``-o``, ``-R`` (writes ``00Tree.html`` files), ``-l``;
   * symlink-following recursion: ``grep -R --dereference-recursive``, ``rg -L --follow``,
     ``ls -L --dereference``, ``du -L --dereference``, ``diff -r --recursive`` (a link in the
     workspace leads anywhere);
   * a file that lists paths to open: ``md5sum``/``sha*sum``/``b2sum``/``cksum`` ``-c
     --check``, ``--files0-from`` (``sort wc du``, ``find -files0-from``), ``tree --fromfile``;
   * ``git``: any argument holding ``:`` (a revision path ``HEAD:path``, ``-L1,5:path``), but
     the values of ``--format --pretty --date --since --until --after --before --grep
     --author --committer``.

   Other programs get only the generic checks (1-3, 5): remembering or listing a program the
   table does not model trusts its option grammar.
5. **Every path-like argument stays inside the workspace**: each operand (a word not starting
   with ``-``, and every word after ``--``) and each ``--long=value`` value must pass
   :func:`~acagent.tools.resolve_in_workspace` (symlinks resolved), and so must the name after
   a leading ``@`` (a response file) and the value of a ``key=value`` word (``dd if=…``); a
   short-option bundle holding ``/`` refuses. Non-path operands (``echo hello``) pass because
   they resolve inside. Conditions 4 and 5 live in :mod:`acagent.tools._shellargs`.

Anything else asks. Known limits (documented, not defended): the inherited environment
(exported bash functions, ``PATH`` entries inside the workspace, ``GIT_*`` variables) and
repository configuration (a ``.git/config`` written earlier with ``core.fsmonitor`` or a diff
driver runs programs during ``git status``/``git diff``) are trusted.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from acagent.tools._shellargs import check_arguments

__all__ = [
    "FORBIDDEN_CHARS",
    "NEVER_ADMITTED",
    "command_words",
    "first_word",
    "is_never_admitted",
    "shell_command_admitted",
]

FORBIDDEN_CHARS = frozenset(";&|<>$`(){}\n\r")
"""Characters whose presence anywhere in the command means: ask."""

NEVER_ADMITTED = frozenset(
    {
        # shells
        "sh", "bash", "zsh", "dash", "ksh", "mksh", "pdksh", "csh", "tcsh", "fish", "rbash", "ash",
        "yash", "posh", "busybox", "toybox",
        # wrappers that run another program
        "env", "xargs", "nice", "nohup", "timeout", "sudo", "sudoedit", "doas", "su", "runuser",
        "pkexec", "setsid", "stdbuf", "strace", "ltrace", "ionice", "chrt", "taskset", "numactl",
        "chroot", "unshare", "nsenter", "flock", "watch", "script", "parallel", "firejail",
        "fakeroot", "systemd-run", "ssh", "expect", "tar",
        # interpreters and editors with command options
        "awk", "gawk", "mawk", "nawk", "irb", "deno", "bun", "java", "jshell", "julia", "R",
        "Rscript", "osascript", "vim", "vi", "nvim", "view", "ex", "emacs", "ed", "red",
        # builtins that execute, or change the shell itself
        "time", "command", "builtin", "exec", "eval", "source", ".", "trap", "fc", "enable",
        "hash", "alias", "unalias", "declare", "typeset", "local", "readonly", "export", "let",
        "read", "mapfile", "readarray", "unset", "set", "shopt", "kill", "wait", "jobs", "fg",
        "bg", "disown", "suspend", "ulimit", "umask", "bind", "complete", "compgen", "compopt",
        "history", "caller", "logout", "exit", "return",
        # reserved words
        "if", "then", "else", "elif", "fi", "case", "esac", "for", "select", "while", "until",
        "do", "done", "in", "function", "coproc", "!", "[[", "]]",
    }
)  # fmt: skip
"""Programs and words that are never admitted without approval, whatever the list says."""

_INTERPRETER_RE = re.compile(
    r"^(python|pypy|perl|ruby|node|nodejs|php|lua|luajit|tclsh|wish)[0-9.]*(-[A-Za-z0-9.]+)?$"
)
_BARE_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]*$")


def is_never_admitted(program: str) -> bool:
    """True for a wrapper, shell, interpreter, special builtin or reserved word."""
    return program in NEVER_ADMITTED or bool(_INTERPRETER_RE.match(program))


@dataclass
class _Word:
    text: str = ""
    unquoted: list[bool] = field(default_factory=list)

    def add(self, ch: str, *, quoted: bool) -> None:
        self.text += ch
        self.unquoted.append(not quoted)


def _split(command: str) -> list[_Word] | None:
    """Split like bash (for strings free of metacharacters); None if malformed."""
    words: list[_Word] = []
    cur: _Word | None = None
    i, n = 0, len(command)
    while i < n:
        ch = command[i]
        if ch in " \t":
            if cur is not None:
                words.append(cur)
                cur = None
            i += 1
            continue
        if cur is None:
            cur = _Word()
        if ch == "'":
            end = command.find("'", i + 1)
            if end < 0:
                return None
            for c in command[i + 1 : end]:
                cur.add(c, quoted=True)
            i = end + 1
        elif ch == '"':
            i += 1
            while True:
                if i >= n:
                    return None
                c = command[i]
                if c == '"':
                    i += 1
                    break
                if c == "\\" and i + 1 < n and command[i + 1] in '"\\$`\n':
                    cur.add(command[i + 1], quoted=True)
                    i += 2
                    continue
                cur.add(c, quoted=True)
                i += 1
        elif ch == "\\":
            if i + 1 >= n:
                return None
            cur.add(command[i + 1], quoted=True)
            i += 2
        else:
            cur.add(ch, quoted=False)
            i += 1
    if cur is not None:
        words.append(cur)
    return words


def _word_is_literal(word: _Word) -> bool:
    """False if bash would expand the word (glob, tilde) or treat it as a comment."""
    text = word.text
    for i, ch in enumerate(text):
        if not word.unquoted[i]:
            continue
        if ch in "*?[":
            return False
        if ch == "~" and (i == 0 or (text[i - 1] in "=:" and word.unquoted[i - 1])):
            return False
        if ch == "#" and i == 0:
            return False
    return True


def _words(command: str) -> list[str] | None:
    """The argv bash would run, or None if the string is not one plain simple command."""
    if not command.strip() or any(c in FORBIDDEN_CHARS for c in command):
        return None
    if any((ord(c) < 0x20 and c != "\t") or ord(c) == 0x7F for c in command):
        return None
    words = _split(command)
    if not words:
        return None
    try:
        reference = shlex.split(command)
    except ValueError:
        return None
    argv = [w.text for w in words]
    if argv != reference or not all(_word_is_literal(w) for w in words):
        return None
    return argv


def command_words(command: str) -> list[str] | None:
    """The argv of a plain simple command after quote removal, else None."""
    return _words(command)


def first_word(command: str) -> str | None:
    """argv[0] of a plain simple command after quote removal, else None."""
    argv = _words(command)
    return argv[0] if argv else None


def shell_command_admitted(command: str, root: Path | None, programs: set[str] | frozenset[str]) -> bool:
    """Whether ``command`` may run without approval under the rule in the module docstring.

    Args:
        command: the exact string the shell tool would pass to ``bash -c``.
        root: the session's workspace root; None skips condition 5 (used to decide what an
            ``always`` answer remembers, never to admit a call).
        programs: admitted program names (allow-list plus remembered ``always`` programs).

    Returns:
        True only if every condition holds; any doubt returns False (ask).
    """
    argv = _words(command)
    if argv is None:
        return False
    program = argv[0]
    if not _BARE_NAME_RE.match(program) or is_never_admitted(program) or program not in programs:
        return False
    return check_arguments(argv, root)
