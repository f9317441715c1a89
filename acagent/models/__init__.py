"""Local models: the catalog of known GGUF files, and finding, pulling and verifying them.

``acagent models list`` and ``acagent models pull`` are thin wrappers over :func:`list_models`
and :func:`pull_model`; the ``local`` provider calls :func:`ensure_model` on first use.

Importing this package imports neither: each public name loads its module on first access, so
a turn that only looks a model's context window up (:mod:`acagent.models._windows`) does not
build the catalog's and the store's dataclasses (issue 12, one-shot ``run``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from acagent._lazy import lazy_names

if TYPE_CHECKING:
    from acagent.models._catalog import CATALOG, DEFAULT_LOCAL_MODEL, LocalModelSpec, get_model_spec
    from acagent.models._store import (
        ModelIntegrityError,
        ModelLocation,
        ModelPullError,
        ModelStatus,
        PullProgress,
        ensure_model,
        find_model,
        list_models,
        manual_pull_command,
        model_cache_dir,
        package_model_path,
        pull_model,
        sha256_file,
        verify_model_file,
    )

__all__ = [
    "CATALOG",
    "DEFAULT_LOCAL_MODEL",
    "LocalModelSpec",
    "ModelIntegrityError",
    "ModelLocation",
    "ModelPullError",
    "ModelStatus",
    "PullProgress",
    "ensure_model",
    "find_model",
    "get_model_spec",
    "list_models",
    "manual_pull_command",
    "model_cache_dir",
    "package_model_path",
    "pull_model",
    "sha256_file",
    "verify_model_file",
]

_CATALOG_NAMES = ("CATALOG", "DEFAULT_LOCAL_MODEL", "LocalModelSpec", "get_model_spec")
_LAZY = {
    name: "acagent.models._catalog" if name in _CATALOG_NAMES else "acagent.models._store" for name in __all__
}
"""Every public name (``__all__``) → its module, imported on first access."""


__getattr__ = lazy_names(__name__, _LAZY, globals())
"""Import a public name's module on first access (:data:`_LAZY`)."""
