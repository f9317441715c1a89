"""Structured logs: one JSON object per line (``acagent serve --log-format json``).

Each line has ``ts`` (RFC 3339 UTC), ``level``, ``logger``, ``message`` and, where known,
``session_id``, ``turn_id`` and ``seq`` — from the record's ``extra`` or from the context set by
:func:`log_context` for the running task. Secrets never reach a line: :class:`RedactSecrets`
replaces every registered secret (the daemon token, API keys) with ``[redacted]`` in the message,
its arguments and the exception text.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

import orjson

__all__ = ["JsonFormatter", "RedactSecrets", "log_context"]

_CONTEXT: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "acagent_log_context", default=None
)
_FIELDS = ("session_id", "turn_id", "seq")


@contextlib.contextmanager
def log_context(**fields: Any) -> Iterator[None]:
    """Attach ``session_id``/``turn_id``/``seq`` to every log line of the current task."""
    merged = {**(_CONTEXT.get() or {}), **{k: v for k, v in fields.items() if v is not None}}
    token = _CONTEXT.set(merged)
    try:
        yield
    finally:
        _CONTEXT.reset(token)


class RedactSecrets(logging.Filter):
    """Replace each secret (strings of 8+ characters) in a record with ``[redacted]``."""

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        super().__init__()
        self._secrets = [s for s in secrets if s and len(s) >= 8]

    def add(self, secret: str | None) -> None:
        """Register one more secret."""
        if secret and len(secret) >= 8 and secret not in self._secrets:
            self._secrets.append(secret)

    def _clean(self, text: str) -> str:
        for s in self._secrets:
            text = text.replace(s, "[redacted]")
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite the record in place; never drops it."""
        if self._secrets:
            record.msg = self._clean(record.getMessage())
            record.args = None
            if record.exc_info and record.exc_info[1] is not None:
                record.exc_text = self._clean(logging.Formatter().formatException(record.exc_info))
                record.exc_info = None
        return True


class JsonFormatter(logging.Formatter):
    """Format a record as one compact JSON object (no newline inside)."""

    def format(self, record: logging.LogRecord) -> str:
        """The JSON line for ``record``."""
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        ctx = _CONTEXT.get() or {}
        for key in _FIELDS:
            value = getattr(record, key, None)
            if value is None:
                value = ctx.get(key)
            if value is not None:
                out[key] = value
        if record.exc_info:
            out["error"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["error"] = record.exc_text
        return orjson.dumps(out, default=str).decode()
