"""Every third-party package the acagent package imports is declared in pyproject.toml.

Before: prometheus-client (imported by every `acagent serve`) and genai-prices (the price table)
were only in the shared dev venv, so README's `pip install -e '.[local]'` gave a daemon that died
with ModuleNotFoundError at start.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import PackageNotFoundError, packages_distributions, requires
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        specs += extra
    return {_norm(re.split(r"[\s<>=!~;\[]", spec, maxsplit=1)[0]) for spec in specs}


def _with_their_requirements(declared: set[str]) -> set[str]:
    """Declared distributions plus what they require (one level: h11 via uvicorn, starlette via fastapi)."""
    out = set(declared)
    for dist in declared:
        try:
            reqs = requires(dist) or []
        except PackageNotFoundError:
            continue
        out |= {_norm(re.split(r"[\s<>=!~;\[(]", r, maxsplit=1)[0]) for r in reqs if "extra ==" not in r}
    return out


def _imported_top_levels() -> set[str]:
    names: set[str] = set()
    for path in (ROOT / "acagent").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name.partition(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.partition(".")[0])
    return names - set(sys.stdlib_module_names) - {"acagent", "__future__"}


def test_every_imported_package_is_declared() -> None:
    dists = packages_distributions()
    declared = _with_their_requirements(_declared())
    missing = {}
    for module in sorted(_imported_top_levels()):
        owners = {_norm(d) for d in dists.get(module, [])}
        if owners and not owners & declared:
            missing[module] = sorted(owners)
    assert missing == {}, f"imported but not declared in pyproject.toml: {missing}"
