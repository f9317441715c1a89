"""The import graph of ``acagent/`` (issue 11 item 3): no circles inside the runner, nothing
pointing back up the layers.

Imports are read with :mod:`ast` (module level and inside functions alike, ``TYPE_CHECKING``
blocks excluded: they never run). Layers, lowest first: store → bus → runner → client/server/cli.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "acagent"

FORBIDDEN = [
    ("acagent.store", "acagent.runner"),
    ("acagent.store", "acagent.bus"),
    ("acagent.store", "acagent.server"),
    ("acagent.store", "acagent.cli"),
    ("acagent.store", "acagent.client"),
    ("acagent.bus", "acagent.store"),
    ("acagent.bus", "acagent.runner"),
    ("acagent.bus", "acagent.server"),
    ("acagent.runner", "acagent.server"),
    ("acagent.runner", "acagent.cli"),
    ("acagent.runner", "acagent.client"),
    ("acagent.runner", "acagent.render"),
    ("acagent.providers", "acagent.runner"),
    ("acagent.tools", "acagent.runner"),
    ("acagent.runner._loop", "acagent.runner._runner"),
    ("acagent.runner._tools", "acagent.runner._runner"),
    ("acagent.runner._tools", "acagent.runner._loop"),
    ("acagent.runner._reply", "acagent.runner._runner"),
    ("acagent.runner._reply", "acagent.runner._loop"),
    ("acagent.runner._turn", "acagent.runner._runner"),
    ("acagent.runner._turn", "acagent.runner._loop"),
]
"""``(importer prefix, imported prefix)`` pairs that must never occur."""


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    here = _module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    out: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for sub in child.orelse:
                    visit(sub)
                continue
            if isinstance(child, ast.Import):
                out.update(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")[: len(package.split(".")) - (child.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                out.add(base)
                out.update(f"{base}.{a.name}" for a in child.names)
            visit(child)

    visit(tree)
    return {m for m in out if m == "acagent" or m.startswith("acagent.")}


@functools.cache
def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in PKG.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        graph[name] = {m for m in _imports(path) if m in modules and m != name}
    return graph


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


@pytest.mark.parametrize(("importer", "imported"), FORBIDDEN)
def test_no_import_points_back_up(importer: str, imported: str) -> None:
    """Each listed direction is absent from the graph."""
    bad = sorted(
        f"{src} -> {dst}"
        for src, dsts in _graph().items()
        if _within(src, importer)
        for dst in dsts
        if _within(dst, imported)
    )
    assert not bad, bad


def test_runner_modules_have_no_import_circle() -> None:
    """The runner's modules form a DAG (package ``__init__`` re-exports excluded)."""
    graph = {
        k: {d for d in v if d.startswith("acagent.runner._")}
        for k, v in _graph().items()
        if k.startswith("acagent.runner._")
    }
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                raise AssertionError("import circle: " + " -> ".join([*stack[stack.index(nxt) :], nxt]))
            if nxt not in state:
                walk(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            walk(node)

