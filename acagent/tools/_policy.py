"""The approval policy: which tool calls run without asking the user.

Decision for one call, in order (:meth:`ApprovalPolicy.needs_approval`):

1. A tool whose own :meth:`Tool.needs_approval` says no (the read-only tools: ``read_file``,
   ``list_dir``, ``glob``, ``ask_user``) never asks.
2. ``--yes`` (``auto_approve``) approves everything else, by design.
3. ``shell``: runs without asking if its command string is identical, byte for byte, to one
   answered ``always`` (a ``shell_exact`` rule), or if
   :func:`~acagent.tools._shellrule.shell_command_admitted` holds for it with the admitted
   programs = the configured allow-list (``settings.shell_allow``) plus the programs remembered
   from ``always`` answers. That rule (one simple command, no shell grammar, argv[0] a bare
   listed name and never a wrapper, no write/exec options, every path inside the workspace) is
   documented in :mod:`acagent.tools._shellrule`.
4. Any other tool (``write_file``, ``edit_file``, ...): runs without asking once the user
   answered ``always`` for that tool in this session (a ``tool`` rule).

What an ``always`` answer remembers (:meth:`ApprovalPolicy.rule_for_always`):

* ``shell``: the **exact string** always (``{"kind": "shell_exact", "command": ...}``), so an
  identical repeat never asks again; and also the **program** (``{"kind": "shell_program",
  "program": "rg", "command": ...}``) when the command passes the rule with only its argv[0] on
  the list (path containment aside: paths are checked on each later use). So after ``always``
  on ``rg a f.txt``, ``rg b f.txt`` runs too, but ``rg --pre sh x`` still asks; ``always`` on
  ``env`` or on ``make && make test`` admits that identical string again and nothing else.
* any other tool: the **tool** (``{"kind": "tool", "tool": "write_file"}``).

An allow-list entry admits exactly what a remembered program admits. Remembered rules are
serialised with :meth:`ApprovalPolicy.to_json` (the runner keeps them in the journal); the
allow-list is configuration and is not serialised.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel

from acagent.tools._base import Tool, ToolContext
from acagent.tools._shellrule import first_word, shell_command_admitted

__all__ = ["ApprovalPolicy"]

_SHELL = "shell"


def _command(args: BaseModel | dict[str, Any]) -> str | None:
    value = args.get("command") if isinstance(args, dict) else getattr(args, "command", None)
    return value if isinstance(value, str) else None


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

    @property
    def programs(self) -> frozenset[str]:
        """All admitted programs: allow-list plus remembered."""
        return self.allow_list | self.shell_programs

    def needs_approval(
        self, tool: Tool, args: BaseModel, ctx: ToolContext, auto_approve: bool = False
    ) -> bool:
        """Whether this call must wait for the user's decision (see the module docstring).

        Args:
            tool: the tool called.
            args: its validated arguments.
            ctx: the call context (``ctx.cwd`` is the workspace root for path checks).
            auto_approve: ``--yes``.
        """
        if not tool.needs_approval(args, ctx):
            return False
        if auto_approve:
            return False
        if tool.name == _SHELL:
            command = _command(args)
            if command is None:
                return True
            if command in self.shell_exact:
                return False
            return not shell_command_admitted(command, ctx.cwd, self.programs)
        return tool.name not in self.always_tools

    def rule_for_always(
        self, tool: Tool, args: BaseModel | dict[str, Any], ctx: ToolContext | None = None
    ) -> dict[str, Any] | None:
        """The rule an ``always`` answer to this call creates (None for a read-only tool).

        Args:
            tool: the tool called.
            args: its arguments.
            ctx: unused (accepted for symmetry with :meth:`needs_approval`): the program rule does
                not depend on the workspace, its paths are checked on every use.

        Returns:
            ``{"kind": "tool", "tool": name}``, ``{"kind": "shell_program", "program": p,
            "command": c}`` (remembers both) or ``{"kind": "shell_exact", "command": c}``.
        """
        if tool.read_only:
            return None
        if tool.name != _SHELL:
            return {"kind": "tool", "tool": tool.name}
        command = _command(args)
        if command is None:
            return None
        program = first_word(command)
        if program is not None and shell_command_admitted(command, None, {program}):
            return {"kind": "shell_program", "program": program, "command": command}
        return {"kind": "shell_exact", "command": command}

    def add_rule(self, rule: dict[str, Any]) -> None:
        """Remember a rule made by :meth:`rule_for_always` (or read back from the journal).

        Raises:
            ValueError: unknown ``kind`` or missing field.
        """
        kind = rule.get("kind")
        try:
            if kind == "tool":
                self.always_tools.add(str(rule["tool"]))
            elif kind == "shell_program":
                self.shell_programs.add(str(rule["program"]))
                if rule.get("command") is not None:
                    self.shell_exact.add(str(rule["command"]))
            elif kind == "shell_exact":
                self.shell_exact.add(str(rule["command"]))
            else:
                raise ValueError(f"unknown approval rule kind {kind!r}")
        except KeyError as exc:
            raise ValueError(f"approval rule {rule!r} lacks field {exc.args[0]!r}") from None

    def rules(self) -> list[dict[str, Any]]:
        """Every remembered rule, in a stable order."""
        out: list[dict[str, Any]] = [{"kind": "tool", "tool": t} for t in sorted(self.always_tools)]
        out += [{"kind": "shell_program", "program": p} for p in sorted(self.shell_programs)]
        out += [{"kind": "shell_exact", "command": c} for c in sorted(self.shell_exact)]
        return out

    def to_json(self) -> dict[str, Any]:
        """``{"version": 1, "rules": [...]}``: the remembered rules (not the allow-list)."""
        return {"version": 1, "rules": self.rules()}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None, shell_allow: Iterable[str] = ()) -> ApprovalPolicy:
        """Rebuild a policy from :meth:`to_json` output plus the current allow-list."""
        policy = cls(shell_allow)
        for rule in (data or {}).get("rules", []):
            policy.add_rule(rule)
        return policy
