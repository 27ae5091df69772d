"""A package's import graph read from its source with ``ast``, for the tests that keep it layered.

Every import counts: at module level, inside a function and under ``if TYPE_CHECKING:``. An import
names a module of the package (``from gateway import logs`` is ``gateway.logs``; ``from
gateway.errors import ConfigError`` is ``gateway.errors``); imports of anything outside the package
are left out. Used by the ``test_imports.py`` of ``tests/gateway``, ``tests/engine`` and ``tests/almanac``.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Edge:
    """``importer`` imports ``imported`` at ``line`` of ``path``."""

    importer: str
    imported: str
    path: Path
    line: int

    def __str__(self) -> str:
        return f"{self.importer} -> {self.imported} ({self.path}:{self.line})"


def modules(root: Path) -> dict[str, Path]:
    """Every module of the package at ``root`` by dotted name (a package by its own name)."""
    found: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _resolve(name: str, known: Mapping[str, Path]) -> str | None:
    """The longest prefix of ``name`` that is a module of the package."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in known:
            return candidate
    return None


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        here = module.split(".") if is_package else module.split(".")[:-1]
        here = here[: len(here) - (node.level - 1)]
        base = ".".join([*here, *([node.module] if node.module else [])])
    return [f"{base}.{alias.name}" for alias in node.names]


def graph(root: Path) -> list[Edge]:
    """Every import from one module of the package at ``root`` to another."""
    known = modules(root)
    edges: dict[tuple[str, str, int], Edge] = {}
    for module, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for target in _targets(node, module, path.name == "__init__.py"):
                imported = _resolve(target, known)
                if imported is not None and imported != module:
                    edges[module, imported, node.lineno] = Edge(module, imported, path, node.lineno)
    return list(edges.values())


def layer_of(module: str, layers: Sequence[tuple[str, Sequence[str]]]) -> int | None:
    """The index of the layer ``module`` belongs to: the layer of the longest name in the table
    that is ``module`` itself or, for a sub-package (a dotted name), a package holding it. A
    top-level name (``gateway``) stands for that one module only, so a new module the table does
    not name belongs to no layer (None)."""
    matches = [
        (len(name), index)
        for index, (_, names) in enumerate(layers)
        for name in names
        if module == name or ("." in name and module.startswith(name + "."))
    ]
    return max(matches)[1] if matches else None


def upward(edges: Iterable[Edge], layers: Sequence[tuple[str, Sequence[str]]]) -> list[str]:
    """Each import from a lower layer to a higher one, said with both layers' names."""
    found = []
    for edge in edges:
        low, high = layer_of(edge.importer, layers), layer_of(edge.imported, layers)
        if low is not None and high is not None and high > low:
            found.append(f"{edge} goes up: {layers[low][0]} may not import {layers[high][0]}")
    return found


def cycles(edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    """The import cycles: each strongly connected set of two or more names, sorted (Tarjan's
    algorithm, iterative). An edge from a name to itself is not a cycle."""
    successors: dict[str, set[str]] = {}
    for a, b in edges:
        if a != b:
            successors.setdefault(a, set()).add(b)
            successors.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(successors):
        if start in index:
            continue
        work = [(start, iter(sorted(successors[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, pending = work[-1]
            advanced = False
            for nxt in pending:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(successors[nxt]))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def subpackage(module: str) -> str:
    """The sub-package a module is in (``gateway.cluster.placement`` → ``gateway.cluster``); a
    top-level module is its own (``gateway.errors``)."""
    return ".".join(module.split(".")[:2])


def grouped(edges: Iterable[Edge], group: Callable[[str], str] = subpackage) -> list[tuple[str, str]]:
    """The imports between groups of modules (``group`` names a module's group), those within a
    group left out."""
    pairs = {(group(e.importer), group(e.imported)) for e in edges}
    return sorted((a, b) for a, b in pairs if a != b)
