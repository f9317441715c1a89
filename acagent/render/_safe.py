"""One rule for showing untrusted text faithfully: what the user approves is what will run.

A command or file content the model asks to run or write can carry characters that a terminal or
a browser does not show as themselves: control characters (``ESC`` sequences move the cursor,
``CR`` overwrites a line), bidi controls (U+202A–202E, U+2066–2069, U+200E/F, U+061C: the "Trojan
Source" reordering), zero-width characters (U+200B–200D, U+2060, U+FEFF, U+180E), other format
characters (tags U+E0000–E007F, invisible operators U+2061–2064, soft hyphen, lone surrogates),
line/paragraph separators, blank-looking letters (Hangul fillers, U+2800) and spaces that are
not U+0020. :func:`safe_text` shows each of them as an escape (``\\x1b``, ``\\u202e``,
``\\U000e0041``) and counts them per kind, so every approval view prints the escaped text with a
visible warning. Newline and tab stay as they are (they are visible as layout).

The same rule is mirrored in the web page (``acagent/server/static/app.js``, ``safeParts``);
``tests/render/unsafe_corpus.json`` is the corpus both are tested against (the terminal under
tmux, the page in headless Chromium).

:func:`visible` is the milder rule for streamed model and tool text (answers, tool output): only
control, bidi and separator characters are escaped there, so emoji sequences (ZWJ) and
typographic spaces in prose stay intact.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field

__all__ = ["KINDS", "SafeText", "safe_text", "visible"]

KINDS = {
    "control": "control",
    "bidi": "bidi control",
    "zero-width": "zero-width",
    "invisible": "invisible/format",
    "space": "non-ASCII space",
}
"""Kind → the words the warning uses for it."""

_BIDI = frozenset({0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)})
_ZERO_WIDTH = frozenset({0x180E, 0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF})
_BLANK_LETTERS = frozenset({0x115F, 0x1160, 0x3164, 0xFFA0, 0x2800})
_KEEP = frozenset({0x09, 0x0A})


def _kind(ch: str) -> str | None:
    """The kind of a character :func:`safe_text` escapes, or None if it is shown as itself."""
    cp = ord(ch)
    if cp < 0x80:
        return "control" if (cp < 0x20 or cp == 0x7F) and cp not in _KEEP else None
    if cp in _BIDI:
        return "bidi"
    if cp in _ZERO_WIDTH:
        return "zero-width"
    if cp in _BLANK_LETTERS:
        return "invisible"
    cat = unicodedata.category(ch)
    if cat == "Cc" or cat in ("Zl", "Zp"):
        return "control"
    if cat in ("Cf", "Cs"):
        return "invisible"
    if cat == "Zs":
        return "space"
    return None


def _escape(ch: str) -> str:
    cp = ord(ch)
    if cp <= 0xFF:
        return f"\\x{cp:02x}"
    if cp <= 0xFFFF:
        return f"\\u{cp:04x}"
    return f"\\U{cp:08x}"


@dataclass(frozen=True)
class SafeText:
    """Text made safe to show, with what was escaped in it.

    Attributes:
        parts: the text as ``(chunk, escaped)`` pairs, in order; an escaped chunk is one
            character's escape (``"\\u202e"``), to be drawn so it stands out from literal text.
        counts: kind (a key of :data:`KINDS`) → how many characters of it were escaped.
    """

    parts: tuple[tuple[str, bool], ...]
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The escaped text as one string."""
        return "".join(chunk for chunk, _ in self.parts)

    @property
    def warning(self) -> str | None:
        """One line naming what was escaped (None when nothing was)."""
        if not self.counts:
            return None
        found = ", ".join(f"{n} {KINDS[kind]}" for kind, n in self.counts.items())
        return f"⚠ hidden characters shown escaped: {found}"


def safe_text(text: str) -> SafeText:
    """Split ``text`` into shown-as-is chunks and escapes of characters that hide or mislead.

    Args:
        text: any string (lone surrogates included).

    Returns:
        A :class:`SafeText`; ``safe_text(s).text`` is printable as is on a terminal or a page.
    """
    parts: list[tuple[str, bool]] = []
    counts: dict[str, int] = {}
    start = 0
    for i, ch in enumerate(text):
        kind = _kind(ch)
        if kind is None:
            continue
        if i > start:
            parts.append((text[start:i], False))
        parts.append((_escape(ch), True))
        counts[kind] = counts.get(kind, 0) + 1
        start = i + 1
    if start < len(text):
        parts.append((text[start:], False))
    return SafeText(tuple(parts), counts)


_VISIBLE = {
    cp: _escape(chr(cp))
    for cp in (
        *(c for c in range(0x20) if c not in _KEEP),
        *range(0x7F, 0xA0),
        *_BIDI,
        0x2028,
        0x2029,
    )
}


def visible(text: str) -> str:
    """``text`` with control, bidi and line/paragraph-separator characters shown as escapes.

    The rule for streamed answers and tool output (``\\n`` and ``\\t`` stay); approvals use
    the stricter :func:`safe_text`.
    """
    return text.translate(_VISIBLE)
