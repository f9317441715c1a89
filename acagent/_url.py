"""URLs as messages and listings show them: without the parts that may carry a credential."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

__all__ = ["redact_url"]


def redact_url(url: str) -> str:
    """``url`` without user information, query and fragment (``http://user:pw@host:8080/v1?key=k``
    → ``http://host:8080/v1``): a password in a gateway URL or a key in its query must not reach
    an error line, a log or ``acagent doctor``. An unparsable URL is ``<unparsable URL>``."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "<unparsable URL>"
    host = parts.hostname or ""
    if ":" in host:  # IPv6: keep its brackets
        host = f"[{host}]"
    if port:
        host = f"{host}:{port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))
