"""Functions over the error tree of :mod:`acagent.errors` (which re-exports them): the first
:class:`~acagent.errors.AcagentError` or the first plain exception inside an exception group,
the one rule a session id or id prefix must pass (else
:class:`~acagent.errors.SessionNotFound`), and whether a journal error names damaged data.

The error classes stay in :mod:`acagent.errors` (one module); this module imports them inside
its functions, as ``acagent.errors`` imports this one when it loads.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from acagent.errors import AcagentError

__all__ = ["check_session_prefix", "find_acagent_error", "is_damaged", "leaf_exception"]


def is_damaged(detail: object) -> bool:
    """Whether a journal error is about damaged stored data (not retryable) rather than a busy,
    locked or full journal: ``detail["reason"] == "corrupt"``, which the store sets where it finds
    the damage (``store/_payload.py`` ``damaged``, ``store/_frame_seqs.py``, SQLite's
    ``SQLITE_CORRUPT`` / ``SQLITE_NOTADB`` in ``store/_sqlite_conn.py`` ``map_errors``; F148)."""
    return isinstance(detail, dict) and detail.get("reason") == "corrupt"


_ID_PREFIX = re.compile(r"[A-Za-z0-9_-]{1,128}")
"""What a session id (or a prefix of one) can be: the ids acagent gives (``ses_`` + hex) and the
plain names an import keeps (``store/_transcript.py`` ``SAFE_SESSION_ID``)."""


def check_session_prefix(prefix: str) -> str:
    """``prefix`` itself when it can name a session (an id or the start of one).

    The one rule of every id-or-prefix lookup (``Journal.find_session`` on both backends and the
    daemon client's ``find_session``): an empty prefix is the start of every id (``acagent sessions
    rm "$ID"`` with ``ID`` unset removed the only session), and a ``/``, ``?`` or ``..`` would
    reach another route through the daemon's URL (``attach "ID/events"`` was a traceback).

    Raises:
        SessionNotFound: ``prefix`` is empty or has a character no session id has.
    """
    if _ID_PREFIX.fullmatch(prefix):
        return prefix
    what = "an empty session id" if not prefix.strip() else f"session id {prefix!r}"
    from acagent.errors import SessionNotFound

    raise SessionNotFound(
        f"{what} matches no session (ids are letters, digits, '_' and '-'); "
        "`acagent sessions list --all` lists them"
    )


def find_acagent_error(exc: BaseException) -> AcagentError | None:
    """The first :class:`AcagentError` inside ``exc`` (task groups wrap errors in exception
    groups), or None."""
    from acagent.errors import AcagentError

    if isinstance(exc, AcagentError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = find_acagent_error(inner)
            if found is not None:
                return found
    return None


def leaf_exception(exc: BaseException) -> BaseException:
    """The first non-group exception inside ``exc`` (``exc`` itself when it is not a group).

    A bug inside a task group surfaces as ``ExceptionGroup("unhandled errors in a TaskGroup")``;
    this is what names the real error (type and message) in ``turn.failed``.
    """
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc
