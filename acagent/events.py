"""Event envelope and the payload model of every event type.

One envelope everywhere (bus, journal, JSONL transcript, WebSocket, SSE, ``run --json``)::

    {"seq": 42, "ts": "2026-11-29T21:00:00.000000Z", "session_id": "ses_…", "type": "tool.result",
     "payload": {…}}

``seq`` is per session, strictly increasing, assigned by the journal inside the transaction that
makes the event durable, and never reused. Each dotted ``type`` has a payload model
(:data:`EVENT_TYPES`, built on first use from its fields in :mod:`acagent._payloads`), tagged
with a ``Literal``; ``AnyPayload`` is their discriminated union. :func:`make_payload` validates
a payload against its model before it is journaled. Payloads of events that belong to a
turn carry its ``turn_id``.

``llm.retry`` supersedes the partial ``assistant.delta`` text of the failed attempt: a client drops
the partial text of the step when it sees it (there is no separate discard event).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Annotated, Any, Union

import orjson
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from acagent._payloads import SPECS, SessionStatus

__all__ = [
    "EVENT_TYPES",
    "AnyPayload",  # noqa: F822 (module __getattr__)
    "Event",
    "SessionStatus",
    "make_payload",
    "now_ts",
]


_second: tuple[int, str] = (-1, "")
"""The last whole second :func:`now_ts` formatted, and its text (``strftime`` was most of its
cost); one tuple, replaced whole, so a thread never pairs one second with another's text."""


def now_ts() -> str:
    """The current UTC time as RFC 3339 with microseconds and a ``Z`` suffix."""
    global _second
    sec, us = divmod(time.time_ns() // 1000, 1_000_000)
    cached = _second
    if cached[0] != sec:
        cached = _second = (sec, datetime.fromtimestamp(sec, UTC).strftime("%Y-%m-%dT%H:%M:%S"))
    return f"{cached[1]}.{us:06d}Z"


class Event(BaseModel):
    """The event envelope (see module docstring)."""

    model_config = ConfigDict(frozen=True)

    seq: int
    """Per-session sequence number, strictly increasing from 1."""
    ts: str
    """Commit time, RFC 3339 UTC."""
    session_id: str
    type: str
    """Dotted event type, a key of :data:`EVENT_TYPES`."""
    payload: dict[str, Any]

    @classmethod
    def trusted(cls, seq: int, ts: str, session_id: str, type: str, payload: dict[str, Any]) -> Event:
        """The envelope of values the caller already knows are of the field types (the journal's
        own numbering, a row it reads back), built without validation: equal to
        ``Event(seq=…, …)`` in every respect (``tests/bus/test_events.py``), at about half the cost
        (this runs for every committed and every replayed event). ``payload`` is kept, not copied.
        """
        event = _new(cls)
        _set(
            event,
            "__dict__",
            {"seq": seq, "ts": ts, "session_id": session_id, "type": type, "payload": payload},
        )
        _set(event, "__pydantic_fields_set__", set(_FIELDS))
        _set(event, "__pydantic_extra__", None)
        _set(event, "__pydantic_private__", None)
        return event

    def to_json_bytes(self) -> bytes:
        """Compact JSON of the envelope (one transcript line without the newline)."""
        return orjson.dumps(
            {
                "seq": self.seq,
                "ts": self.ts,
                "session_id": self.session_id,
                "type": self.type,
                "payload": self.payload,
            }
        )

    def to_dict(self) -> dict[str, Any]:
        """The envelope as a plain dict."""
        return {
            "seq": self.seq,
            "ts": self.ts,
            "session_id": self.session_id,
            "type": self.type,
            "payload": self.payload,
        }


_new = object.__new__
_set = object.__setattr__  # past the frozen model's __setattr__, as pydantic's own construction
_FIELDS = frozenset(Event.model_fields)


class _Models(Mapping[str, type[BaseModel]]):
    """Event type → its payload model, each built from :data:`acagent._payloads.SPECS` the first
    time it is looked up (see that module's docstring)."""

    def __init__(self) -> None:
        self._built: dict[str, type[BaseModel]] = {}

    def __getitem__(self, event_type: str) -> type[BaseModel]:
        model = self._built.get(event_type)
        if model is None:
            model = self._built.setdefault(event_type, _build(SPECS[event_type]))
        return model

    def __iter__(self) -> Iterator[str]:
        return iter(SPECS)

    def __len__(self) -> int:
        return len(SPECS)


def _build(spec: type) -> type[BaseModel]:
    """The pydantic model of a payload class: its fields and its bases' (bases first, as a
    subclass of a model orders them), extra fields kept."""
    namespace: dict[str, Any] = {"__module__": spec.__module__, "__qualname__": spec.__qualname__}
    annotations: dict[str, Any] = {}
    for klass in reversed(spec.__mro__[:-1]):  # without object
        annotations.update(vars(klass).get("__annotations__", {}))
        namespace.update({k: v for k, v in vars(klass).items() if not k.startswith("__")})
    namespace.update(__doc__=spec.__doc__, __annotations__=annotations, model_config=_PAYLOAD_CONFIG)
    return type(spec.__name__, (BaseModel,), namespace)


_PAYLOAD_CONFIG = ConfigDict(extra="allow")

EVENT_TYPES: Mapping[str, type[BaseModel]] = _Models()
"""Event type → its payload model (built on first use)."""


def __getattr__(name: str) -> Any:
    """The payload models by class name (``events.ToolResultEvent``), :data:`AnyPayload` (the
    discriminated union of them all) and ``PAYLOAD_ADAPTER``, built on first use."""
    if name == "AnyPayload":
        union: Any = Union.__getitem__(tuple(EVENT_TYPES[t] for t in SPECS))
        return Annotated[union, Field(discriminator="type")]
    if name == "PAYLOAD_ADAPTER":
        return TypeAdapter(__getattr__("AnyPayload"))
    for event_type, spec in SPECS.items():
        if spec.__name__ == name:
            return EVENT_TYPES[event_type]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Hot-path types whose payloads are built by the loop itself; they skip validation.
_TRUSTED = frozenset({"assistant.delta", "tool.output"})


def make_payload(event_type: str, **fields: Any) -> dict[str, Any]:
    """Validate ``fields`` against the model of ``event_type`` and return the payload dict.

    The ``type`` tag is not stored in the payload (it is the envelope's ``type``). ``turn.failed``
    takes its error type as ``type_`` and stores it as ``type``.

    Raises:
        KeyError: unknown event type.
        pydantic.ValidationError: the fields do not fit the model.
    """
    if event_type in _TRUSTED:
        if event_type not in SPECS:
            raise KeyError(event_type)
        return {k: v for k, v in fields.items() if v is not None}
    # model_validate + model_dump, without their Python wrappers (half of the call's cost): the
    # same validator and serializer with the same arguments (tests/bus/test_events.py)
    model = EVENT_TYPES[event_type]
    obj = model.__pydantic_validator__.validate_python(fields)
    data: dict[str, Any] = model.__pydantic_serializer__.to_python(obj, mode="json", exclude_none=True)
    data.pop("type", None)
    if event_type == "turn.failed":
        data["type"] = data.pop("error_type")
    return data
