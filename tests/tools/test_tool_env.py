"""F43: tool processes never inherit acagent's secrets (a real ``shell`` tool prints its env)."""

from __future__ import annotations

import pytest

from acagent.tools import ShellTool, is_secret_name, scrubbed_env, validate_arguments

pytestmark = pytest.mark.anyio

SECRETS = {
    "OPENAI_API_KEY": "sk-openai-f43-aaaaaaaa",
    "ANTHROPIC_API_KEY": "sk-ant-f43-bbbbbbbb",
    "ANTHROPIC_AUTH_TOKEN": "ant-auth-f43-cccccccc",
    "GEMINI_API_KEY": "gem-f43-dddddddd",
    "HF_TOKEN": "hf-f43-eeeeeeee",
    "REPLICATE_API_TOKEN": "rep-f43-ffffffff",
    "SOME_VENDOR_API_KEY": "vendor-f43-gggggggg",
    "ACAGENT_TOKEN": "daemon-f43-hhhhhhhh",
    "ACAGENT_HOME": "/tmp/acagent-home-f43",
    "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer otel-f43-iiiiiiii",
    "openai_api_key": "lowercase-f43-jjjjjjjj",
}
KEPT = {"GITHUB_TOKEN": "gh-kept-f43", "F43_PLAIN": "plain-value", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}


async def test_shell_env_has_no_provider_keys_or_acagent_secrets(
    make_ctx, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keys and tokens set in acagent's environment (and a configured key copied under another
    name) are absent from ``env`` as the shell tool runs it; ordinary variables stay."""
    for name, value in {**SECRETS, **KEPT}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("INNOCENT_LOOKING", "prefix-configured-key-f43-kkkkkkkk-suffix")
    args, _ = validate_arguments(ShellTool(), {"command": "env"})
    result = await ShellTool().run(args, make_ctx(secrets=("configured-key-f43-kkkkkkkk", "short")))
    assert result.status == "ok"
    printed = dict(line.split("=", 1) for line in result.content.splitlines() if "=" in line)
    for name, value in SECRETS.items():
        assert name not in printed and value not in result.content, name
    assert "INNOCENT_LOOKING" not in printed
    assert {k: printed.get(k) for k in KEPT} == KEPT
    assert printed.get("PATH") and printed.get("HOME")


def test_the_rule() -> None:
    assert all(is_secret_name(n) for n in SECRETS)
    assert not any(
        is_secret_name(n) for n in ("PATH", "GITHUB_TOKEN", "OPENAI_BASE_URL", "TOKENIZERS_PARALLELISM")
    )
    env = {"A": "x", "OPENAI_API_KEY": "k"}
    assert scrubbed_env(env) == {"A": "x"} and env == {"A": "x", "OPENAI_API_KEY": "k"}


async def test_what_acagent_set_for_itself_is_not_in_a_tools_env(
    make_ctx, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``acagent/_entry.py`` sets ``PYDANTIC_DISABLE_PLUGINS`` for acagent's own process (no
    plugin scan at start-up); a command a tool runs gets the user's environment, without it —
    and a value the user set themselves is kept."""
    from acagent import _entry

    monkeypatch.setattr(_entry, "ADDED_ENV", {"PYDANTIC_DISABLE_PLUGINS"})
    monkeypatch.setenv("PYDANTIC_DISABLE_PLUGINS", "__all__")
    args, _ = validate_arguments(ShellTool(), {"command": "env"})
    result = await ShellTool().run(args, make_ctx())
    assert result.status == "ok" and "PATH=" in result.content
    assert "PYDANTIC_DISABLE_PLUGINS" not in result.content
    monkeypatch.setattr(_entry, "ADDED_ENV", set())  # the user's own setting
    result = await ShellTool().run(args, make_ctx())
    assert "PYDANTIC_DISABLE_PLUGINS=__all__" in result.content
