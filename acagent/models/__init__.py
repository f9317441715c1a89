"""Local models: the catalog of known GGUF files, and finding, pulling and verifying them.

``acagent models list`` and ``acagent models pull`` are thin wrappers over :func:`list_models`
and :func:`pull_model`; the ``local`` provider calls :func:`ensure_model` on first use.
"""

from __future__ import annotations

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
