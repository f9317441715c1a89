"""Terminal rendering (rich): the live event view, history replay, session tables.

Printing happens only here and in :mod:`acagent.cli`; every other module produces events.
"""

from __future__ import annotations

from acagent.render._approval import approval_lines, approval_text, safe_rich
from acagent.render._live import EventRenderer
from acagent.render._safe import SafeText, safe_text, visible
from acagent.render._sessions import sessions_table, show_session, status_style, summarize_steps
from acagent.render._status import StatusLine, context_fill, fill_text
from acagent.render._stream import StreamWriter
from acagent.render._view import LiveView

__all__ = [
    "EventRenderer",
    "LiveView",
    "SafeText",
    "StatusLine",
    "StreamWriter",
    "approval_lines",
    "approval_text",
    "context_fill",
    "fill_text",
    "safe_rich",
    "safe_text",
    "sessions_table",
    "show_session",
    "status_style",
    "summarize_steps",
    "visible",
]
