"""One rule for the line a config error prints (every command, ``doctor``, the ``[mcp]`` table).

A config error names, in one line: the key path as TOML spells it
(``[pricing."openai:gpt-x"].input_usd_per_mtok``), the value it got, where the value came from
(``'/home/u/.local/share/acagent/config.toml' line 3`` or the environment variable), and the
reason::

    invalid config [pricing."openai:gpt-x"].input_usd_per_mtok = -1 in '/…/config.toml' line 3:
    Input should be greater than or equal to 0

:func:`config_error` builds that :class:`~acagent.errors.ConfigError` from a pydantic
``ValidationError`` (its first error; ``detail`` keeps them all). tomllib keeps no positions,
so :func:`find_line` finds the line by walking the file's ``[table]`` headers and ``key =``
lines (dotted and quoted keys included; an inline table gives the line of its key).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from acagent.errors import ConfigError

__all__ = ["config_error", "find_line", "key_path"]

_BARE = re.compile(r"[A-Za-z0-9_-]+")
_VALUE_CHARS = 80


def _key(name: str) -> str:
    return name if _BARE.fullmatch(name) else json.dumps(name)


def key_path(loc: Sequence[Any]) -> str:
    """The TOML spelling of a key path: ``("pricing", "openai:x", "input")`` →
    ``[pricing."openai:x"].input``; ``("model",)`` → ``model``; list items as ``name[0]``."""
    names: list[str] = []
    for part in loc:
        if isinstance(part, int) and names:
            names[-1] += f"[{part}]"
        else:
            names.append(_key(str(part)))
    if len(names) <= 1:
        return names[0] if names else "(the config file)"
    return f"[{'.'.join(names[:-1])}].{names[-1]}"


_URL_PASSWORD = re.compile(r"(\w+://[^/@\s:]*):[^/@\s]*@")


def _show(value: Any) -> str:
    """The value as TOML would show it, cut at 80 characters, a URL's password masked."""
    if isinstance(value, str):
        value = _URL_PASSWORD.sub(r"\1:***@", value)
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, str | int | float):
        text = json.dumps(value) if isinstance(value, str) else repr(value)
    else:
        try:
            text = json.dumps(value, default=str)
        except (TypeError, ValueError):
            text = repr(value)
    return text if len(text) <= _VALUE_CHARS else text[: _VALUE_CHARS - 1] + "…"


def _split_dotted(text: str) -> list[str]:
    """``a."b.c".d`` → ``["a", "b.c", "d"]`` (TOML dotted keys, basic and literal quotes)."""
    parts, cur, quote = [], "", ""
    for ch in text:
        if quote:
            if ch == quote:
                quote = ""
            else:
                cur += ch
        elif ch in "\"'":
            quote = ch
        elif ch == ".":
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    parts.append(cur.strip())
    return parts


def find_line(path: Path, loc: Sequence[Any]) -> int | None:
    """The 1-based line of ``config.toml`` that sets the key at ``loc`` (None if not found)."""
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    want = [str(p) for p in loc if not isinstance(p, int)]
    table: list[str] = []
    best: tuple[int, int] | None = None  # (matched names, line)
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        if text.startswith("["):
            table = _split_dotted(text.strip("[] ").split("]")[0])
            if table == want[: len(table)] and (best is None or len(table) > best[0]):
                best = (len(table), number)
            continue
        key, eq, _ = text.partition("=")
        if not eq:
            continue
        full = table + _split_dotted(key)
        if full == want:
            return number
        if full == want[: len(full)] and (best is None or len(full) > best[0]):
            best = (len(full), number)  # an inline table (or array) holding the key
    return best[1] if best is not None else None


def config_error(
    exc: ValidationError,
    *,
    path: Path | None,
    in_file: Mapping[str, Any],
    prefix: Sequence[Any] = (),
    sources: Mapping[str, str] | None = None,
    top_keys: Collection[str] = (),
) -> ConfigError:
    """The one-line :class:`ConfigError` for ``exc`` (module docstring).

    Args:
        exc: the validation error (its first error is reported, ``detail`` has all).
        path: the config file the values were read from (None: none was read).
        in_file: the parsed file (says whether the key came from the file at all).
        prefix: the location of the validated table inside the file (``("mcp",)``).
        sources: first key name → where its value came from when not the file
            (``{"timing": "ACAGENT_TIMING_LEASE_TTL_S"}``).
        top_keys: the file's top-level keys: one refused inside a table was written below a
            ``[table]`` header (TOML puts it in that table), and the line says so.
    """
    first = exc.errors(include_url=False)[0]
    loc = [*prefix, *first["loc"]]
    where = ""
    top = str(loc[0]) if loc else ""
    source = (sources or {}).get(".".join(str(p) for p in loc)) or (sources or {}).get(top)
    if source:
        where = f" from {source}"
    elif path is not None and top in in_file:
        line = find_line(path, loc)
        where = f" in {str(path)!r}" + (f" line {line}" if line is not None else "")
    reason = str(first["msg"]).removeprefix("Value error, ")
    shown = f" = {_show(first['input'])}" if first.get("type") != "missing" else " (missing)"
    secret = bool(loc) and str(loc[-1]).endswith("api_key")
    if secret:  # never print a key, not even a broken one
        shown = ""
    if first.get("type") == "extra_forbidden" and len(loc) > 1 and loc[-1] in top_keys:
        reason += f"; {loc[-1]!r} is a top-level key: move it above the first [table] header"
    if loc and loc[-1] == "[key]":  # pydantic's marker for a refused dict key: name the key itself
        loc, shown, reason = loc[:-1], "", f"unknown key ({reason})"
    return ConfigError(
        f"invalid config {key_path(loc)}{shown}{where}: {reason}",
        detail={
            "key": key_path(loc),
            "errors": exc.errors(include_url=False, include_context=False, include_input=not secret),
        },
    )
