"""The one line of text an error body becomes in a provider's error message (F138).

An endpoint, or a proxy in front of it, may answer an error with a page meant for a browser: a
``502 Bad Gateway`` from nginx, a captive portal, a cloud load balancer's ``503``. Quoted as it
came, the user's error line was tags (``<html><head><title>502 Bad Gateway</title>…``) and could
carry control characters (an ANSI escape that recolours or clears the terminal, a NUL, a
backspace). :func:`error_text` is what every provider error message quotes of a body or an API
message (``providers/_base.py`` ``http_status_error`` and ``stream_error``):

- an HTML page (its ``Content-Type`` says so, or the text opens with a tag the parser knows) is
  read with the standard library's :class:`html.parser.HTMLParser`, never with patterns on tags:
  its ``<title>``, then its visible text (``<script>``, ``<style>``, ``<template>`` and comments
  dropped, entities decoded), the title not repeated when the text opens with it;
- then in any text ANSI escape sequences and every other control character (Unicode ``Cc``, and
  the bidirectional overrides of ``Cf`` that reorder what the terminal shows) are removed, white
  space runs become one space, and the result is cut at :data:`MAX_CHARS` with an ellipsis.
"""

from __future__ import annotations

import re
import unicodedata
from html.parser import HTMLParser
from typing import Any

__all__ = ["MAX_CHARS", "error_text", "html_text"]

MAX_CHARS = 300
"""Longest text quoted from an error body (a portal's page can be kilobytes of prose)."""

_HIDDEN = frozenset({"script", "style", "template", "noscript", "svg"})
_HTML = frozenset(
    [
        "html",
        "head",
        "body",
        "title",
        "meta",
        "link",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "p",
        "div",
        "span",
        "center",
        "hr",
        "br",
        "a",
        "b",
        "i",
        "em",
        "strong",
        "pre",
        "code",
        "table",
        "tr",
        "td",
        "th",
        "ul",
        "ol",
        "li",
        "form",
        "input",
        "button",
        "img",
        "section",
        "main",
        "header",
        "footer",
        "nav",
    ]
)
"""Elements that make a text an HTML page (``<model> not found`` is not one)."""
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
"""ECMA-48 escape sequences (CSI, OSC, two-byte): control text, not tags."""
_BIDI = frozenset("\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u061c")


class _PageText(HTMLParser):
    """Collects a page's title and visible text (module docstring)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title: list[str] = []
        self.text: list[str] = []
        self.tags = 0
        self._hidden: list[str] = []
        self._in_title = False

    def handle_decl(self, decl: str) -> None:
        self.tags += decl.lower().startswith("doctype html")

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags += tag in _HTML
        if tag == "title":
            self._in_title = True
        elif tag in _HIDDEN:
            self._hidden.append(tag)
        self.text.append(" ")  # a tag separates words: <h1>502</h1><hr>nginx → "502 nginx"

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        elif tag in self._hidden:
            while self._hidden and self._hidden.pop() != tag:
                pass
        self.text.append(" ")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title.append(data)
        elif not self._hidden:
            self.text.append(data)


def html_text(page: str) -> str | None:
    """``"title: visible text"`` of an HTML page (either part alone when the other is empty), or
    None when ``page`` holds no tag the parser recognises (then it is not HTML)."""
    parser = _PageText()
    try:
        parser.feed(page)
        parser.close()
    except (AssertionError, ValueError):  # the parser gives up on some malformed declarations
        pass
    if not parser.tags:
        return None
    title = " ".join("".join(parser.title).split())
    text = " ".join("".join(parser.text).split())
    if title and text.startswith(title):
        text = text[len(title) :].lstrip(" :-—")
    return ": ".join(part for part in (title, text) if part) or "an HTML page without text"


def _visible(text: str) -> str:
    """``text`` without ANSI sequences and control characters, white space runs as one space."""
    text = _ANSI.sub("", text)
    kept = (
        " " if ch.isspace() else ch
        for ch in text
        if ch.isspace() or (unicodedata.category(ch) != "Cc" and ch not in _BIDI)
    )
    return " ".join("".join(kept).split())


def error_text(body: Any, content_type: str = "", *, page: bool = True) -> str:
    """The one readable line quoted from an error ``body`` (module docstring).

    Args:
        body: a decoded error body (JSON value or text), an API message, or None.
        content_type: the answer's ``Content-Type`` (``text/html`` marks a page even when its
            text opens with white space or a BOM).
        page: False for an API's own message (from its JSON): never read as a page.

    Returns:
        At most :data:`MAX_CHARS` characters, no line break, no control character.
    """
    text = body if isinstance(body, str) else "" if body is None else str(body)
    media = content_type.partition(";")[0].strip().lower()
    html_media = media in ("text/html", "application/xhtml+xml")
    if page and (html_media or text.lstrip("\ufeff \t\r\n").startswith("<")):
        text = html_text(text) or text
    text = _visible(text)
    return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 1].rstrip() + "…"
