"""F138: an error answered with an HTML page (a proxy's 502, a captive portal) is one readable line.

Before: the error line quoted the page's source, ``'openai' answered HTTP 502 (http_502): <html>
<head><title>502 Bad Gateway</title></head> …``, and control characters in a body reached the
terminal as they came (an ANSI escape recoloured or cleared it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from acagent.providers._error_text import MAX_CHARS, error_text
from tests.mockprovider import MockProvider, Script

NGINX_502 = (
    b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway"
    b"</h1></center>\r\n<hr><center>nginx/1.18.0 (Ubuntu)</center>\r\n</body>\r\n</html>\r\n"
)
PORTAL = (
    b"<!DOCTYPE html><html><head><meta charset=utf-8><title>Hotel Wi-Fi &amp; Guest Login</title>"
    b"<style>body{color:red}</style><script>var x = '<b>no</b>';</script></head>"
    b"<body><p>Please accept the terms\x1b[2J\x07 to continue.</p></body></html>"
)


def _run(cli: Any, mock: MockProvider, workspace: Path, provider: str) -> Any:
    base = mock.openai_base_url if provider == "openai" else mock.anthropic_base_url
    cli.env["ACAGENT_TIMING_RETRY_BASE_DELAY_S"] = "0"
    return cli("run", "--model", f"{provider}:mock", "--base-url", base, "hello", cwd=workspace)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize(
    ("status", "page", "shown"),
    [
        (502, NGINX_502, "HTTP 502 (http_502): 502 Bad Gateway: nginx/1.18.0 (Ubuntu)"),
        (200, PORTAL, "Hotel Wi-Fi & Guest Login: Please accept the terms to continue."),
    ],
    ids=["nginx_502", "portal_200"],
)
def test_an_html_error_page_is_one_readable_line_f138(
    cli: Any, mock: MockProvider, workspace: Path, provider: str, status: int, page: bytes, shown: str
) -> None:
    mock.default = Script(status=status, body=page, headers={"Content-Type": "text/html; charset=utf-8"})
    r = _run(cli, mock, workspace, provider)
    assert r.returncode != 0 and mock.requests, r.stderr
    (line,) = [x for x in r.stderr.splitlines() if "error" in x]
    assert shown in line, line
    assert "<" not in line and "\x1b" not in line and "\x07" not in line and "Traceback" not in r.stderr


@pytest.mark.parametrize(
    ("body", "content_type", "shown"),
    [
        ("<model> not found", "", "<model> not found"),  # not a page: kept
        ("  <p>maintenance</p>", "text/plain", "maintenance"),
        ("<html><body></body></html>", "text/html", "an HTML page without text"),
        ("bad\x1b[31m red\x1b]0;title\x07\u202e gnp.exe\x00 end", "", "bad red gnp.exe end"),
        ("<html><body>" + "word " * 500 + "</body></html>", "text/html", "word word"),
        ({"detail": "x"}, "application/json", "{'detail': 'x'}"),
    ],
)
def test_error_text_reads_pages_and_drops_control_characters(
    body: Any, content_type: str, shown: str
) -> None:
    out = error_text(body, content_type)
    assert out.startswith(shown) and len(out) <= MAX_CHARS, out
    assert all(ch.isprintable() for ch in out), repr(out)
