"""How a client tells a daemon's failures: error envelopes back to :mod:`acagent.errors` classes,
``stream.reset`` as :class:`~acagent.errors.CursorAhead`, httpx's errors as
:class:`~acagent.client._discovery.DaemonUnavailable`.

The envelope is the daemon's ``{"error": {"code", "message", "detail"}}`` (docs/daemon.md); an
unknown ``code`` keeps its code and HTTP status on the closest class.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from acagent import errors as E
from acagent.client._discovery import DaemonUnavailable

__all__ = ["cursor_ahead", "error_from_envelope", "map_http"]

_CODES: dict[str, type[E.AcagentError]] = {
    cls.code: cls
    for cls in (
        E.UserError,
        E.ConfigError,
        E.SessionNotFound,
        E.ApprovalNotFound,
        E.TranscriptError,
        E.SessionBusy,
        E.ConcurrencyCap,
        E.StaleLease,
        E.InvalidTransition,
        E.JournalError,
        E.ProviderError,
        E.CursorAhead,
        E.BodyTooLarge,
        E.TooManyAttachers,
    )
}


def error_from_envelope(status: int, body: Any) -> E.AcagentError:
    """Map a daemon error answer back to the :mod:`acagent.errors` class of its ``code``."""
    err = body.get("error") if isinstance(body, dict) else None
    if not isinstance(err, dict):
        return DaemonUnavailable(f"the daemon answered HTTP {status} without an error envelope")
    code = str(err.get("code") or "internal")
    message = str(err.get("message") or code)
    cls = _CODES.get(code)
    if cls is None:
        if status == 404:
            cls = E.SessionNotFound
        elif 400 <= status < 500:
            cls = E.UserError
        else:
            cls = E.AcagentError
    exc = cls(message, detail=err.get("detail"))
    if cls.code != code:
        exc.code = code
        exc.status_code = status
    return exc


def cursor_ahead(session_id: str, since: Any, last_seq: Any) -> E.CursorAhead:
    """The :class:`~acagent.errors.CursorAhead` a client raises for a ``stream.reset`` (F30)."""
    return E.CursorAhead(
        f"--since {since} is ahead of session {session_id}'s last seq {last_seq} (was the data"
        f" directory restored from an older copy?); attach with --since {last_seq} or lower",
        detail={"since": since, "last_seq": last_seq},
    )


@contextmanager
def map_http() -> Iterator[None]:
    """httpx's timeouts and transport errors as :class:`DaemonUnavailable` (one line, no traceback)."""
    try:
        yield
    except httpx.TimeoutException as exc:
        raise DaemonUnavailable(f"the daemon did not answer in time ({type(exc).__name__})") from exc
    except httpx.TransportError as exc:
        raise DaemonUnavailable(f"cannot reach the daemon: {exc}; is `acagent serve` running?") from exc
