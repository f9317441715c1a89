"""F120: what goes into a provider request's headers is checked, never sent as it came.

acagent's own HTTP/1.1 client (``providers/_h1.py``) wrote header values as given: an API key
with a CR LF in it added a header of the attacker's choosing to every model request (``X-Evil:
1`` reached the server), a key ending in a line feed cut the head short so the server read a
broken body, and a character beyond Latin-1 failed every turn with a codec error. Real
``acagent run`` processes against the strict mock, which records every header it receives.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.mockprovider import MockProvider, TextReply
from tests.server.conftest import ACAGENT, daemon_env


def _run(home: Path, mock: MockProvider, **env: str) -> subprocess.CompletedProcess[str]:
    home.mkdir(exist_ok=True)
    return subprocess.run(
        [ACAGENT, "run", "hello"],
        env=daemon_env(home, mock, **env),
        cwd=home,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize(
    ("variable", "value", "names"),
    [
        ("OPENAI_API_KEY", "sk-test\r\nX-Evil: 1", "OPENAI_API_KEY"),
        ("OPENAI_API_KEY", "sk-t\nest", "OPENAI_API_KEY"),
        ("OPENAI_API_KEY", "sk-t\u2014est", "OPENAI_API_KEY"),
        ("OPENAI_API_KEY", "sk test", "OPENAI_API_KEY"),
        ("OPENAI_ORG_ID", "org\r\nX-Evil: 1", "openai-organization"),
        ("OPENAI_PROJECT_ID", "pr\u2014j", "openai-project"),
    ],
)
def test_a_header_value_http_does_not_allow_is_one_line_and_never_sent_f120(
    tmp_path: Path, mock: MockProvider, variable: str, value: str, names: str
) -> None:
    mock.default = lambda body: TextReply("answered")
    p = _run(tmp_path / "home", mock, **{variable: value})
    assert p.returncode != 0, p.stdout
    assert "Traceback" not in p.stderr, p.stderr
    errors = [line for line in p.stderr.splitlines() if line.startswith("acagent: error:")]
    assert len(errors) == 1 and names in errors[0], p.stderr
    assert "sk-t" not in p.stderr and "X-Evil" not in p.stderr  # the value is never shown
    assert not any("x-evil" in r.headers for r in mock.requests)
    assert not mock.requests  # nothing reached the model


def test_white_space_around_a_key_is_dropped_and_a_path_is_encoded_f120(
    tmp_path: Path, mock: MockProvider
) -> None:
    mock.default = lambda body: TextReply("answered")
    p = _run(
        tmp_path / "home",
        mock,
        OPENAI_API_KEY="sk-test\n",  # a key file read with its line end
        OPENAI_ORG_ID=" org-1 ",
        OPENAI_BASE_URL=mock.openai_base_url + "/a b",
    )
    assert p.returncode == 0 and p.stdout.strip() == "answered", p.stderr
    (request,) = mock.requests
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.headers["openai-organization"] == "org-1"
    assert request.path.startswith("/v1/a%20b/")
