"""The one rule for text that cannot travel, applied at the one place events become durable (F25).

Text reaches acagent from the user (terminal, HTTP), the model (streamed text and tool-call
arguments, where JSON escapes such as ``"\\ud800"`` decode to lone surrogates), tools (process
output, files) and imported transcripts. Two kinds of code point break a later step with an
opaque error: **lone surrogates** (U+D800–U+DFFF not in a valid pair) cannot be encoded as
UTF-8 at all (the journal's JSON encoder, the terminal, the next provider request all fail),
and **NUL** (U+0000) is refused by subprocess arguments, PostgreSQL text and C strings.

The rule (:func:`clean_text`): a lone surrogate becomes U+FFFD (REPLACEMENT CHARACTER); a pair
of surrogates that Python holds as two code points is joined into the one character it encodes;
NUL becomes U+FFFD. Everything else is kept unchanged (other control characters are valid
UTF-8 and are escaped for display by the renderers).

Where: :meth:`acagent.runner.SessionWriter.commit` maps every event payload (and the row
operations committed with them, e.g. a tool call's arguments) through :func:`clean_value`
before the journal transaction, so the journal, the live stream (published after the commit),
the transcript and export (derived from the journal), the model context (folded from the
committed events) and the next provider request (built from that context) all hold the same
text, before and after a restart. Nothing is refused: a user message with NUL is accepted and
stored with U+FFFD in its place.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

import orjson

__all__ = ["REPLACEMENT", "clean_text", "clean_value"]

REPLACEMENT = "\ufffd"
"""What a lone surrogate or a NUL becomes."""

_T = TypeVar("_T")


def clean_text(text: str) -> str:
    """``text`` with lone surrogates and NUL replaced by U+FFFD (see module docstring).

    Returns the same object when nothing needs replacing (the common case costs one C-speed
    scan: ``str.isascii`` or ``str.encode``).
    """
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            # UTF-16 round trip: a valid high+low pair becomes its character, a lone half U+FFFD.
            text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if "\x00" in text:
        text = text.replace("\x00", REPLACEMENT)
    return text


def clean_value(value: _T) -> _T:
    """``value`` with :func:`clean_text` applied to every string inside it.

    Walks dicts (keys and values), lists, tuples and dataclass instances (frozen ones are
    copied with :func:`dataclasses.replace`); other values are returned as they are. Unchanged
    containers are returned as the same object.

    The common case — nothing to replace — is decided by one C-speed pass (:func:`_is_clean`) with
    no Python-level walk (this runs on every event and op of every commit).
    """
    if _is_clean(value):
        return value
    return _clean(value)  # type: ignore[no-any-return]


_NUL_ESCAPE = b"\\u0000"


def _is_clean(value: Any) -> bool:
    """True when ``value`` surely holds no lone surrogate and no NUL (False: not known).

    orjson refuses a lone surrogate (not valid UTF-8) and writes NUL as ``\\u0000``; a value it
    cannot serialise at all (a non-string key, an unknown type, a huge int) is "not known" and
    takes the walk of :func:`_clean`, as does a literal backslash-u0000 in the text (rare).
    orjson walks dataclasses too (every field; :func:`_clean` skips ``init=False`` fields, so a
    bad string there only costs the walk).
    """
    try:
        return _NUL_ESCAPE not in orjson.dumps(value)
    except (TypeError, ValueError):  # orjson.JSONEncodeError is a TypeError
        return False


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        changed = False
        out: dict[Any, Any] = {}
        for k, v in value.items():
            ck, cv = _clean(k), _clean(v)
            changed = changed or ck is not k or cv is not v
            out[ck] = cv
        return out if changed else value
    if isinstance(value, (list, tuple)):
        items = [_clean(v) for v in value]
        if all(a is b for a, b in zip(items, value, strict=True)):
            return value
        if isinstance(value, list):
            return items
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for f in dataclasses.fields(value):
            if not f.init:
                continue
            old = getattr(value, f.name)
            new = _clean(old)
            if new is not old:
                changes[f.name] = new
        return dataclasses.replace(value, **changes) if changes else value
    return value
