"""Provider registry: model ids, entry points, default model resolution, lazy SDK imports."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest

import acagent.providers
from acagent.errors import ConfigError
from acagent.providers import _registry, create_provider, resolve_model_id
from acagent.settings import ProviderSettings, Settings


def _settings(tmp_path: Path, model: str | None = None, **providers: Any) -> Settings:
    return Settings(home=tmp_path, model=model, providers=ProviderSettings(**providers))


class FakeProvider:
    name = "fake"
    supports_tools = False

    def __init__(self, model: str) -> None:
        self.model = model


def fake_factory(model: str, settings: Settings) -> FakeProvider:
    return FakeProvider(model)


class TestCreateProvider:
    @pytest.mark.parametrize("model_id", ["gpt-4o", "", ":gpt-4o", "openai:", "  :  "])
    def test_malformed_ids(self, tmp_path: Path, model_id: str) -> None:
        with pytest.raises(ConfigError, match="expected PROVIDER:MODEL"):
            create_provider(model_id, _settings(tmp_path))

    def test_unknown_provider_lists_the_known_ones(self, tmp_path: Path) -> None:
        with pytest.raises(ConfigError, match=r"unknown provider 'nope'.*anthropic, local, ollama, openai"):
            create_provider("nope:x", _settings(tmp_path))

    def test_builtins_are_entry_points(self) -> None:
        names = {ep.name for ep in _registry.entry_points(group="acagent.providers")}
        assert {"openai", "anthropic", "ollama", "local"} <= names

    def test_model_keeps_later_colons(self, tmp_path: Path) -> None:
        provider = create_provider("ollama:qwen2.5:0.5b", _settings(tmp_path))
        assert provider.model == "qwen2.5:0.5b"

    def test_fallback_table_without_entry_points(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(_registry, "entry_points", lambda group: [])
        provider = create_provider("openai:m", _settings(tmp_path, base_url="http://127.0.0.1:9/v1"))
        assert type(provider).__name__ == "OpenAIProvider"

    def test_third_party_entry_point(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        ep = EntryPoint("fake", f"{__name__}:fake_factory", "acagent.providers")
        monkeypatch.setattr(_registry, "entry_points", lambda group: [ep])
        provider = create_provider("fake:tiny", _settings(tmp_path))
        assert isinstance(provider, FakeProvider)
        assert provider.model == "tiny"
        assert "fake" in _registry.available_providers()

    def test_unimportable_provider_is_a_config_error(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        ep = EntryPoint("ghost", "acagent_no_such_module:create_provider", "acagent.providers")
        monkeypatch.setattr(_registry, "entry_points", lambda group: [ep])
        with pytest.raises(ConfigError, match="provider 'ghost' is not available"):
            create_provider("ghost:x", _settings(tmp_path))


class TestResolveModelId:
    def test_explicit_model_wins(self, tmp_path: Path) -> None:
        settings = _settings(tmp_path, model="ollama:llama3.2", anthropic_api_key="a", openai_api_key="o")
        assert resolve_model_id(settings) == "ollama:llama3.2"

    def test_anthropic_key_before_openai_key(self, tmp_path: Path) -> None:
        assert resolve_model_id(_settings(tmp_path, anthropic_api_key="a", openai_api_key="o")) == (
            "anthropic:claude-sonnet-4-5"
        )

    @pytest.mark.parametrize("field", ["openai_api_key", "openai_base_url", "base_url"])
    def test_openai_key_or_base_url(self, tmp_path: Path, field: str) -> None:
        assert resolve_model_id(_settings(tmp_path, **{field: "x"})) == "openai:gpt-4o-mini"

    def test_local_last(self, tmp_path: Path) -> None:
        assert resolve_model_id(_settings(tmp_path)) == "local:smollm2-135m"


def test_importing_providers_does_not_import_the_sdks() -> None:
    """F27: importing the package, the adapter classes, and building a provider for a model id
    (what `acagent run --model openai:NAME` does to check it) import no SDK and no httpx; httpx
    is imported on the first request, in a worker thread, and the SDKs never (issue 12)."""
    code = (
        "import sys, acagent.providers as p\n"
        "from acagent.settings import Settings, ProviderSettings\n"
        "assert 'openai' not in sys.modules and 'anthropic' not in sys.modules, 'SDK imported eagerly'\n"
        "p.OpenAIProvider, p.AnthropicProvider\n"
        "s = Settings(home='/nonexistent', providers=ProviderSettings(openai_api_key='k', anthropic_api_key='k'))\n"
        "p.create_provider('openai:gpt-4o-mini', s); p.create_provider('anthropic:claude-x', s)\n"
        "p.create_provider('ollama:llama3.2', s)\n"
        "bad = [m for m in ('openai', 'anthropic', 'httpx2', 'httpx') if m in sys.modules]\n"
        "assert not bad, f'imported just to check a model id: {bad}'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.mark.anyio
async def test_first_request_imports_httpx_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """F27: the HTTP stack's import runs in a worker thread, never on the event loop's thread
    (an ``https://`` endpoint: a plain-http one imports no httpx, see the next test)."""
    import threading

    from acagent.providers import _http, _openai

    threads: list[str] = []
    real = _http.load_httpx

    def spy() -> object:
        threads.append(threading.current_thread().name)
        return real()

    monkeypatch.setattr(_http, "load_httpx", spy)
    provider = _openai.OpenAIProvider("m", base_url="https://127.0.0.1:9/v1", api_key="k")
    await provider._get_client()
    await provider.aclose()
    assert threads and threads[0] != threading.main_thread().name


@pytest.mark.anyio
async def test_a_plain_http_endpoint_posts_without_httpx(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 12: a plain-http endpoint without a proxy gets acagent's own HTTP/1.1 client
    (``acagent/providers/_h1.py``), built on the loop; with ``http_proxy`` set it gets httpx
    (which honours the proxy and ``NO_PROXY``)."""
    from acagent.providers import _h1, _http, _openai

    monkeypatch.setattr(_http, "load_httpx", lambda: pytest.fail("httpx loaded for a plain-http endpoint"))
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    provider = _openai.OpenAIProvider("m", base_url="http://127.0.0.1:9/v1", api_key="k")
    assert isinstance(await provider._get_client(), _h1.Client)
    await provider.aclose()
    assert not _h1.usable_for("http://127.0.0.1:9/v1", {"HTTP_PROXY": "http://proxy:3128"})
    assert not _h1.usable_for("http://127.0.0.1:9/v1", {"all_proxy": "socks5://proxy"})
    assert _h1.usable_for("http://127.0.0.1:9/v1", {"http_proxy": "", "HTTPS_PROXY": "http://p"})
    assert not _h1.usable_for("https://api.openai.com/v1", {})


def test_all_names_exist() -> None:
    for name in acagent.providers.__all__:
        assert getattr(acagent.providers, name) is not None
    assert sorted(acagent.providers.__all__) == acagent.providers.__all__
    with pytest.raises(AttributeError):
        _ = acagent.providers.NoSuchThing  # type: ignore[attr-defined]
