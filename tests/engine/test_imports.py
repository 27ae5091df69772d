"""The engine's imports form no cycle, between modules or between sub-packages.

Every import counts, wherever it stands (a function-level or ``TYPE_CHECKING`` import hides a cycle
without breaking it). A sub-package is ``engine.store``, ``engine.index``, …; a top-level module
(``engine.tools``) is one of its own.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import engine

ENGINE = Path(engine.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(ENGINE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports() -> dict[str, set[str]]:
    """Each engine module → the engine modules it imports (relative imports resolved)."""
    paths = {module_name(p): p for p in ENGINE.rglob("*.py")}
    edges: dict[str, set[str]] = {name: set() for name in paths}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*up, *([node.module] if node.module else [])])
                targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            edges[name] |= {t for t in targets if t in paths and t != name}
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def sub_package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "(engine)"


def test_no_engine_module_is_in_an_import_cycle() -> None:
    assert cycles(imports()) == []


def test_no_engine_sub_packages_import_each_other_in_a_cycle() -> None:
    edges: dict[str, set[str]] = defaultdict(set)
    for source, targets in imports().items():
        edges[sub_package(source)] |= {sub_package(t) for t in targets} - {sub_package(source)}
    assert cycles(dict(edges)) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
