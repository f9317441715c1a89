"""What opening a session yields, in process or through the daemon."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from acagent._value import Record

__all__ = ["Opened"]


@dataclass(repr=False, eq=False)  # eq and repr: acagent._value.Record
class Opened(Record):
    """What :func:`acagent.cli._common.open_client` yields."""

    client: Any
    """A :class:`~acagent.client.SessionClient`."""
    session_id: str
    created: bool
    last_seq: int
    """The session's last seq when it was opened (events after it belong to this run)."""
    remote: bool
    model: str | None
