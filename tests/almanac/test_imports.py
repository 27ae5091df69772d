"""The client-side library stays free of server code (a host installs it without the service), and
its modules import each other in no cycle (`tests/imports.py`)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import almanac
from tests.imports import cycles, graph, grouped

ALLOWED = {"almanac", "anyio", "httpx", "httpx2", "mcp"} | set(sys.stdlib_module_names)


def test_almanac_imports_only_the_mcp_client_and_http() -> None:
    root = Path(almanac.__file__).parent
    found: dict[str, str] = {}
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                if name.split(".")[0] not in ALLOWED:
                    found[name] = str(path.relative_to(root))
    assert found == {}
    assert len(list(root.rglob("*.py"))) >= 7  # the walk saw the package


def test_no_almanac_module_or_sub_package_is_in_an_import_cycle() -> None:
    edges = graph(Path(almanac.__file__).parent)
    assert edges  # the host modules import each other: the graph saw them
    assert cycles((e.importer, e.imported) for e in edges) == []
    assert cycles(grouped(edges, lambda module: ".".join(module.split(".")[:3]))) == []
