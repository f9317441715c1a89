"""A package's public names loaded on first access (PEP 562 module ``__getattr__``).

``acagent.providers``, ``acagent.models`` and ``acagent.client`` import none of their modules
up front: what a command never touches costs it nothing at start-up (issue 12).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(package: str, names: Mapping[str, str], namespace: dict[str, Any]) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package``: a name of ``names`` (public name → the module that
    defines it) is imported on first access and kept in ``namespace`` (the package's globals).

    The returned function raises ``AttributeError`` for any other name.
    """

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__
