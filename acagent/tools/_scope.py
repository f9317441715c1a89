"""What an ``always`` answer will cover, in words: the one sentence every approval view shows.

:meth:`ApprovalPolicy.rule_for_always <acagent.tools.ApprovalPolicy.rule_for_always>` decides
what an ``always`` answer remembers; :func:`always_scope` says it, from that same rule, so the
prompt and the rule can never disagree. It rides on ``approval.requested`` as ``always`` and is
drawn by the terminal (``chat``, ``run``, ``attach``: ``acagent/render/_approval.py``) and the
page (``static/app.js``) alike.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SUBCOMMAND_PROGRAMS", "always_scope"]

SUBCOMMAND_PROGRAMS = frozenset({"git"})
"""Programs whose ``always`` is scoped to the subcommand the user saw (``git status``, not every
``git`` command): a remembered ``git status`` never admits ``git show``."""


def always_scope(rule: dict[str, Any] | None) -> str | None:
    """The sentence for ``rule`` (None: nothing to remember, e.g. a read-only tool).

    Examples: ``always: any `git status …` in this workspace (one plain command, paths inside
    it), for this session``; ``always: this exact command only, for this session``; ``always:
    every `write_file` call, for this session — protected paths still ask``.
    """
    if rule is None:
        return None
    kind = rule.get("kind")
    until = "; until a workspace file changes" if rule.get("bound") is not None else ""
    if kind == "tool":
        name = rule.get("tool")
        extra = " — protected paths still ask" if name in ("write_file", "edit_file") else ""
        return f"always: every `{name}` call, for this session{extra}"
    if kind == "shell_program":
        return (
            f"always: any `{rule.get('program')} …` in this workspace (one plain command, paths"
            f" inside it), for this session{until}"
        )
    if kind == "shell_exact":
        return f"always: this exact command only, for this session{until}"
    return None
