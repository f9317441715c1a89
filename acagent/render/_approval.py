"""How an approval is shown in the terminal: the one display path of ``chat``, ``run`` and ``attach``.

Everything the user is asked to approve goes through :func:`approval_lines`, which applies the
:func:`~acagent.render._safe.safe_text` rule (hidden and control characters escaped, a warning
naming them). The web page mirrors it in ``static/app.js``.
"""

from __future__ import annotations

import json
from typing import Any

from rich.text import Text

from acagent.render._safe import safe_text

__all__ = ["ESCAPE_STYLE", "approval_lines", "approval_text", "safe_rich"]

ESCAPE_STYLE = "bold reverse red"
"""How an escaped hidden character (``\\u202e``) is drawn: it must not pass for literal text."""


def safe_rich(text: str, style: str = "") -> Text:
    """``text`` under the :func:`~acagent.render._safe.safe_text` rule as a rich ``Text``.

    Escaped characters are drawn in :data:`ESCAPE_STYLE` so they stand out from literal text.
    """
    out = Text(style=style)
    for chunk, escaped in safe_text(text).parts:
        out.append(chunk, style=ESCAPE_STYLE if escaped else None)
    return out


def approval_lines(p: dict[str, Any], max_lines: int = 15) -> list[Text]:
    """What an ``approval.requested`` payload asks, as lines to show (escaped, with a warning).

    The one display rule for approvals in the terminal (``chat``, ``run``, ``attach``): the
    command, the question or the arguments (JSON, at most ``max_lines`` lines), every hidden or
    control character escaped (:func:`~acagent.render._safe.safe_text`), then a warning line
    naming what was escaped, then the policy's ``notes`` (workspace code will run, a protected
    path is written), one ``! `` line each.
    """
    warning: str | None = None
    if p.get("kind") == "question":
        raw = str(p.get("question") or "")
        prefix, style = "", "bold"
    elif isinstance(p.get("command"), str):
        raw, prefix, style = str(p["command"]), "$ ", "bold"
    else:
        args = p.get("arguments") or {}
        raw = json.dumps(args, indent=2, ensure_ascii=False)
        prefix, style = "", ""
        lines = raw.split("\n")
        if len(lines) > max_lines:
            raw = "\n".join([*lines[:max_lines], f"… ({len(lines) - max_lines} more lines)"])
        # JSON already escapes C0 controls; the warning counts what the strings really hold.
        warning = safe_text("\n".join(_strings(args))).warning
    if warning is None:
        warning = safe_text(raw).warning
    body = [Text(prefix, style=style).append_text(safe_rich(raw, style))]
    if warning:
        body.append(Text(warning, style="bold red"))
    for note in p.get("notes") or []:  # policy notes (F40/F41): workspace code, protected paths
        body.append(Text("! ", style="bold yellow").append_text(safe_rich(str(note), "yellow")))
    if p.get("always"):  # what an 'always' answer covers (F93), from the rule it would create
        body.append(safe_rich(str(p["always"]), "dim"))
    return body


def _strings(value: Any) -> list[str]:
    """Every string (keys included) inside a JSON-like value."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return []


def approval_text(p: dict[str, Any]) -> str:
    """:func:`approval_lines` as plain text (for a prompt written to stderr, e.g. ``acagent run``).

    Escapes appear as their text (``\\u202e``); the warning, if any, is the last line.
    """
    return "\n".join(line.plain for line in approval_lines(p))
