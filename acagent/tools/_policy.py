"""The approval policy: which tool calls run without asking the user.

Decision for one call, in order (:meth:`ApprovalPolicy.needs_approval`, the one choke point):

1. A tool whose own :meth:`Tool.needs_approval` says no (the read-only tools: ``read_file``,
   ``list_dir``, ``glob``, ``ask_user``) never asks. (They cannot reach acagent's data dir:
   :func:`~acagent.tools.resolve_in_workspace` refuses it.)
2. ``--yes`` (``auto_approve``) approves everything else, by design.
3. ``shell``: asks when the command may read acagent's data dir
   (:func:`~acagent.tools._protect.shell_touches_private`). Otherwise it runs without asking if
   its command string is identical, byte for byte, to one answered ``always`` (a
   ``shell_exact`` rule), or if :func:`~acagent.tools._shellrule.shell_command_admitted` holds
   for it with the admitted programs = the configured allow-list (``settings.shell_allow``) plus
   the programs remembered from ``always`` answers — in both cases only while the rule is
   *current* (below). That rule (one simple command, no shell grammar, argv[0] a bare listed
   name and never a wrapper, no write/exec options, every path inside the workspace) is
   documented in :mod:`acagent.tools._shellrule`.
4. Any other tool (``write_file``, ``edit_file``, ...): runs without asking once the user
   answered ``always`` for that tool in this session (a ``tool`` rule) — except a call that
   writes a protected path (:func:`~acagent.tools._protect.protected_reason`: ``.git/``,
   ``.envrc``, ``.vscode/``, ``.github/``, ``.acagent/``, shell rc files, ...), which asks every
   time.

Workspace-code rules (case F40). A command that runs workspace code
(:func:`~acagent.tools._wscode.workspace_code`: ``sh build.sh``, ``./x``, ``pytest``, ``make``,
``npm test``, ``python x.py``, ``cargo test``, ``git commit`` (hooks), ...) is admitted by an
``always`` rule only while the workspace is as the user saw it when answering:

* the session keeps a **workspace-write generation** (persisted with the rules in the journal,
  ``session.approval_rules``), advanced by :meth:`ApprovalPolicy.before_run` just before every
  tool call that may write the workspace runs: every ``write_file``/``edit_file`` (or other
  non-read-only tool) and every ``shell`` command except (a) commands the shell rule admits
  with only the known non-writing programs of :data:`READ_ONLY_PROGRAMS` (``ls``, ``cat``,
  ``grep``, ``git status``, ...) and (b) a workspace-code command admitted by a current rule
  (it runs only code the user approved; what that code writes is its own doing);
* the rule records the generation it was granted at, and the SHA-256 of the files the command
  names (its script operand, a ``./program``, and the runner's files such as ``Makefile`` or
  ``package.json``), so a change made outside the agent's tools (by hand, by a background
  process) also ends it;
* a rule is *current* when both still match. An allow-list entry for a workspace-code program
  counts as granted at generation 0 (session start). A rule read back from an older journal
  without a binding is not current (it asks once more). The approval request carries a note
  saying that workspace code will run and until when ``always`` holds
  (:meth:`ApprovalPolicy.approval_notes`).

What an ``always`` answer remembers (:meth:`ApprovalPolicy.rule_for_always`):

* ``shell``: the **exact string** always (``{"kind": "shell_exact", "command": ...}``), so an
  identical repeat never asks again; and also the **program** (``{"kind": "shell_program",
  "program": "rg", "command": ...}``) when the command passes the rule with only its argv[0] on
  the list (path containment aside: paths are checked on each later use); for ``git`` the
  program and its subcommand (``"program": "git status"``: ``always`` on ``git status`` never
  admits ``git show``). So after ``always``
  on ``rg a f.txt``, ``rg b f.txt`` runs too, but ``rg --pre sh x`` still asks; ``always`` on
  ``env`` or on ``make && make test`` admits that identical string again and nothing else.
  A workspace-code rule also carries ``"bound": {"generation": G, "files": {path: sha256}}``.
* any other tool: the **tool** (``{"kind": "tool", "tool": "write_file"}``).

The approval request says what ``always`` will cover, from the same rule
(:meth:`ApprovalPolicy.always_covers`, ``approval.requested`` ``always``). An allow-list
entry admits what a remembered program admits (``shell_allow = ["git"]``: every git
subcommand the rule admits). Remembered rules are
serialised with :meth:`ApprovalPolicy.to_json` (the runner keeps them in the journal); the
allow-list is configuration and is not serialised.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel

from acagent.tools._base import Tool, ToolContext
from acagent.tools._paths import PathError
from acagent.tools._protect import protected_reason, shell_touches_private
from acagent.tools._scope import SUBCOMMAND_PROGRAMS, always_scope
from acagent.tools._shellrule import command_words, first_word, shell_command_admitted
from acagent.tools._wscode import RUNNER_FILES, workspace_code

__all__ = ["READ_ONLY_PROGRAMS", "ApprovalPolicy"]

_SHELL = "shell"

READ_ONLY_PROGRAMS = frozenset(
    {
        "ls", "cat", "head", "tail", "wc", "grep", "egrep", "fgrep", "rg", "find", "sed", "sort",
        "git", "echo", "printf", "pwd", "tree", "stat", "du", "df", "diff", "cmp", "which",
        "basename", "dirname", "realpath", "readlink", "md5sum", "sha1sum", "sha256sum", "cut",
        "nl", "true", "false",
    }
)  # fmt: skip
"""Programs that, as admitted by the shell rule (its write-option tables included), never write
the workspace: running them does not advance the workspace-write generation."""

_ABSENT = "absent"


def _program_key(command: str) -> str:
    """What a program rule remembers: argv[0], or ``argv[0] argv[1]`` for a program of
    :data:`~acagent.tools._scope.SUBCOMMAND_PROGRAMS` (``git status``)."""
    argv = command_words(command) or [""]
    if argv[0] in SUBCOMMAND_PROGRAMS and len(argv) > 1:
        return f"{argv[0]} {argv[1]}"
    return argv[0]


def _command(args: BaseModel | dict[str, Any]) -> str | None:
    value = args.get("command") if isinstance(args, dict) else getattr(args, "command", None)
    return value if isinstance(value, str) else None


def _digest(ctx: ToolContext, path: str) -> str:
    """``sha256:<hex>`` of a workspace file, ``absent`` if it is missing or not reachable."""
    try:
        resolved = ctx.resolve(path)
        with resolved.open("rb") as fh:
            return "sha256:" + hashlib.file_digest(fh, "sha256").hexdigest()
    except (PathError, OSError, ValueError):
        return _ABSENT


class ApprovalPolicy:
    """Session approval rules: remembered ``always`` answers plus the configured allow-list.

    Args:
        shell_allow: programs admitted by configuration (``settings.shell_allow``).
    """

    def __init__(self, shell_allow: Iterable[str] = ()) -> None:
        self.allow_list: frozenset[str] = frozenset(shell_allow)
        """Configured programs (not serialised)."""
        self.always_tools: set[str] = set()
        """Tool names approved for the session (``write_file``, ``edit_file``, ...)."""
        self.shell_programs: set[str] = set()
        """Programs remembered from ``always`` answers."""
        self.shell_exact: set[str] = set()
        """Shell command strings remembered verbatim from ``always`` answers."""
        self.bindings: dict[str, dict[str, Any]] = {}
        """Workspace binding of a workspace-code rule, by ``"program:<p>"`` / ``"exact:<c>"``:
        ``{"generation": G, "files": {path: "sha256:..." | "absent"}}``."""
        self.workspace_generation = 0
        """Workspace-write generation: how many calls that may write the workspace have run."""

    @property
    def programs(self) -> frozenset[str]:
        """All admitted programs: allow-list plus remembered."""
        return self.allow_list | self.shell_programs

    # ------------------------------------------------------------------ decisions

    def needs_approval(
        self, tool: Tool, args: BaseModel, ctx: ToolContext, auto_approve: bool = False
    ) -> bool:
        """Whether this call must wait for the user's decision (see the module docstring).

        Args:
            tool: the tool called.
            args: its validated arguments.
            ctx: the call context (``ctx.cwd`` is the workspace root for path checks,
                ``ctx.private_dirs`` acagent's data dir).
            auto_approve: ``--yes``.
        """
        if not tool.needs_approval(args, ctx):
            return False
        if auto_approve:
            return False
        if tool.name == _SHELL:
            command = _command(args)
            if command is None or shell_touches_private(command, ctx.cwd, ctx.private_dirs):
                return True
            return not self._shell_rule_admits(command, ctx)
        if tool.name not in self.always_tools:
            return True
        return bool(self._protected(tool, args, ctx))

    def _shell_rule_admits(self, command: str, ctx: ToolContext) -> bool:
        code = workspace_code(command) is not None
        if command in self.shell_exact and (not code or self._current(f"exact:{command}", ctx)):
            return True
        program = first_word(command)
        if program is None:
            return False
        key = _program_key(command)  # "git status": an always on it covers that subcommand only
        if (
            program not in self.allow_list
            and key not in self.shell_programs
            and program not in self.shell_programs
        ):
            return False
        if code and not self._program_current(key if key in self.shell_programs else program, program, ctx):
            return False
        return shell_command_admitted(command, ctx.cwd, {program})

    def _program_current(self, key: str, program: str, ctx: ToolContext) -> bool:
        if key in self.shell_programs and self._current(f"program:{key}", ctx):
            return True
        # configured: counts as granted at session start
        return program in self.allow_list and self.workspace_generation == 0

    def _current(self, key: str, ctx: ToolContext) -> bool:
        bound = self.bindings.get(key)
        if bound is None or bound.get("generation") != self.workspace_generation:
            return False
        files = bound.get("files") or {}
        return all(_digest(ctx, path) == digest for path, digest in files.items())

    def _protected(self, tool: Tool, args: BaseModel, ctx: ToolContext) -> list[str]:
        reasons = []
        for raw in tool.written_paths(args):
            try:
                resolved = ctx.resolve(raw)
            except PathError:
                continue  # the tool refuses it itself
            reason = protected_reason(ctx.cwd, resolved)
            if reason is not None:
                reasons.append(reason)
        return reasons

    def approval_notes(self, tool: Tool, args: BaseModel, ctx: ToolContext) -> list[str]:
        """Warnings shown with the approval request (``approval.requested`` ``notes``).

        Returns:
            e.g. ``["runs workspace code (build.sh): 'always' holds only until a workspace
            file changes"]`` or ``["writes a protected path: '.git/hooks/x' is under '.git';
            asked every time"]``; empty when there is nothing to warn about.
        """
        notes: list[str] = []
        if tool.name == _SHELL:
            command = _command(args) or ""
            files = workspace_code(command)
            if files is not None:
                named = [f for f in files if _digest(ctx, f) != _ABSENT]
                which = f" ({', '.join(named)})" if named else ""
                notes.append(
                    f"runs workspace code{which} that the agent may have written: an 'always' answer "
                    "holds only until the agent (or anyone) changes a workspace file"
                )
            if shell_touches_private(command, ctx.cwd, ctx.private_dirs):
                notes.append("may read acagent's own data directory (token, journal, transcripts)")
        for reason in self._protected(tool, args, ctx):
            notes.append(f"writes a protected path ({reason}): asked every time, even after 'always'")
        return notes

    def always_covers(
        self, tool: Tool, args: BaseModel | dict[str, Any], ctx: ToolContext | None = None
    ) -> str | None:
        """What an ``always`` answer to this call will cover, in words (``approval.requested``
        ``always``): :func:`~acagent.tools._scope.always_scope` of :meth:`rule_for_always`."""
        return always_scope(self.rule_for_always(tool, args, ctx))

    def before_run(self, tool: Tool, args: BaseModel, ctx: ToolContext) -> bool:
        """Advance the workspace-write generation if this call may write the workspace.

        Called just before the call runs (the runner persists :meth:`to_json` with the call's
        ``tool.started`` when this returns True). See the module docstring for what counts.

        Returns:
            True if the generation advanced (the rules must be saved).
        """
        if tool.read_only:
            return False
        if tool.name == _SHELL:
            command = _command(args)
            if command is not None and shell_command_admitted(command, ctx.cwd, READ_ONLY_PROGRAMS):
                return False
            if (
                command is not None
                and workspace_code(command) is not None
                and self._shell_rule_admits(command, ctx)
            ):
                return False
        self.workspace_generation += 1
        return True

    # ------------------------------------------------------------------ rules

    def rule_for_always(
        self, tool: Tool, args: BaseModel | dict[str, Any], ctx: ToolContext | None = None
    ) -> dict[str, Any] | None:
        """The rule an ``always`` answer to this call creates (None for a read-only tool).

        Args:
            tool: the tool called.
            args: its arguments.
            ctx: the call context; for a workspace-code command it names the files whose
                content the rule is bound to (without it the rule binds the generation only).

        Returns:
            ``{"kind": "tool", "tool": name}``, ``{"kind": "shell_program", "program": p,
            "command": c}`` (remembers both) or ``{"kind": "shell_exact", "command": c}``; a
            workspace-code shell rule adds ``"bound": {"generation": G, "files": {...}}``.
        """
        if tool.read_only:
            return None
        if tool.name != _SHELL:
            return {"kind": "tool", "tool": tool.name}
        command = _command(args)
        if command is None:
            return None
        program = first_word(command)
        rule: dict[str, Any]
        if program is not None and shell_command_admitted(command, None, {program}):
            rule = {"kind": "shell_program", "program": _program_key(command), "command": command}
        else:
            rule = {"kind": "shell_exact", "command": command}
        files = workspace_code(command)
        if files is not None:
            if rule["kind"] == "shell_program":
                files = list(dict.fromkeys([*files, *RUNNER_FILES.get(str(program), ())]))
            digests = {f: _digest(ctx, f) for f in files} if ctx is not None else {}
            rule["bound"] = {"generation": self.workspace_generation, "files": digests}
        return rule

    def add_rule(self, rule: dict[str, Any]) -> None:
        """Remember a rule made by :meth:`rule_for_always` (or read back from the journal).

        Raises:
            ValueError: unknown ``kind`` or missing field.
        """
        kind = rule.get("kind")
        bound = rule.get("bound")
        try:
            if kind == "tool":
                self.always_tools.add(str(rule["tool"]))
            elif kind == "shell_program":
                program = str(rule["program"])
                self.shell_programs.add(program)
                self._bind(f"program:{program}", bound)
                if rule.get("command") is not None:
                    self.shell_exact.add(str(rule["command"]))
                    self._bind(f"exact:{rule['command']}", bound)
            elif kind == "shell_exact":
                self.shell_exact.add(str(rule["command"]))
                self._bind(f"exact:{rule['command']}", bound)
            else:
                raise ValueError(f"unknown approval rule kind {kind!r}")
        except KeyError as exc:
            raise ValueError(f"approval rule {rule!r} lacks field {exc.args[0]!r}") from None

    def _bind(self, key: str, bound: Any) -> None:
        if isinstance(bound, dict):
            self.bindings[key] = {
                "generation": bound.get("generation"),
                "files": dict(bound.get("files") or {}),
            }
        else:
            self.bindings.pop(key, None)

    def rules(self) -> list[dict[str, Any]]:
        """Every remembered rule, in a stable order."""
        out: list[dict[str, Any]] = [{"kind": "tool", "tool": t} for t in sorted(self.always_tools)]
        for kind, field, items in (
            ("shell_program", "program", self.shell_programs),
            ("shell_exact", "command", self.shell_exact),
        ):
            for item in sorted(items):
                rule: dict[str, Any] = {"kind": kind, field: item}
                bound = self.bindings.get(f"{'program' if kind == 'shell_program' else 'exact'}:{item}")
                if bound is not None:
                    rule["bound"] = bound
                out.append(rule)
        return out

    def to_json(self) -> dict[str, Any]:
        """``{"version": 2, "workspace_generation": G, "rules": [...]}`` (not the allow-list)."""
        return {"version": 2, "workspace_generation": self.workspace_generation, "rules": self.rules()}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None, shell_allow: Iterable[str] = ()) -> ApprovalPolicy:
        """Rebuild a policy from :meth:`to_json` output (version 1 or 2) plus the allow-list."""
        policy = cls(shell_allow)
        data = data or {}
        policy.workspace_generation = int(data.get("workspace_generation") or 0)
        for rule in data.get("rules", []):
            policy.add_rule(rule)
        return policy
