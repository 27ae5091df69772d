"""The gateway's import rules (``docs/architecture.md``): it never imports the engine (they share
only the wire, ``docs/wire.md``); no import goes up the layer table below; no two modules, and no two
sub-packages, import each other in a cycle."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import gateway
from tests.imports import Edge, cycles, graph, grouped, layer_of, modules, upward

GATEWAY = Path(gateway.__file__).parent
ROOT = GATEWAY.parent
ARCHITECTURE = ROOT / "docs" / "architecture.md"

#: The gateway's layers, lowest first: a module may import its own layer and those before it, never
#: one after it. A dotted name stands for that module or package and everything in it; ``gateway``
#: for the root package alone (it holds only its docstring). ``docs/architecture.md`` explains each.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "leaves",
        (
            "gateway",
            "gateway.errors",
            "gateway.logs",
            "gateway.layout",
            "gateway.metrics",
            "gateway.asgi",
            "gateway.headers",
            "gateway.ratelimit",
        ),
    ),
    ("control", ("gateway.control",)),
    ("erasure", ("gateway.erasure",)),
    ("auth", ("gateway.auth",)),
    ("engines", ("gateway.engines",)),
    ("cluster", ("gateway.cluster",)),
    ("edge", ("gateway.edge",)),
    ("api and web", ("gateway.api", "gateway.web")),
    ("composition root", ("gateway.settings", "gateway.app", "gateway.serve", "gateway.cli")),
)


def _edges() -> list[Edge]:
    return list(graph(GATEWAY))


def _imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_no_gateway_module_imports_engine() -> None:
    offenders = {
        str(path.relative_to(GATEWAY)): sorted(
            m for m in _imported_modules(path) if m.split(".")[0] == "engine"
        )
        for path in GATEWAY.rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_loading_the_whole_gateway_loads_no_engine_module() -> None:
    code = (
        "import sys, gateway.cli, gateway.app, gateway.serve;"
        "bad = sorted(m for m in sys.modules if m == 'engine' or m.startswith('engine.'));"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_gateway_module_is_in_one_layer() -> None:
    unplaced = [m for m in modules(GATEWAY) if layer_of(m, LAYERS) is None]
    assert unplaced == [], f"add these modules to LAYERS (and to docs/architecture.md): {unplaced}"


def test_no_import_goes_up_the_layers() -> None:
    assert upward(_edges(), LAYERS) == []


def test_no_two_modules_import_each_other_in_a_cycle() -> None:
    assert cycles((e.importer, e.imported) for e in _edges()) == []


def test_no_two_subpackages_import_each_other_in_a_cycle() -> None:
    assert cycles(grouped(_edges())) == []


def _as_written(module: str) -> str:
    """How ``docs/architecture.md`` names a module of the table: ``errors.py``, ``control/``."""
    if module == "gateway":
        return "`gateway/__init__.py`"
    path = GATEWAY.joinpath(*module.split(".")[1:])
    return f"`{path.name}/`" if path.is_dir() else f"`{path.name}.py`"


def test_the_architecture_page_lists_the_same_layers() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    items = re.findall(r"^(\d+)\. (.*?)(?=^\d+\. |^\S|\Z)", text, flags=re.M | re.S)
    assert [int(n) for n, _ in items] == list(range(1, len(LAYERS) + 1))
    missing = {
        name: [_as_written(m) for m in modules if _as_written(m) not in body]
        for (name, modules), (_, body) in zip(LAYERS, items, strict=True)
    }
    assert {k: v for k, v in missing.items() if v} == {}


def test_every_path_the_architecture_page_cites_exists() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    cited = re.findall(r"`((?:gateway|engine|almanac|tests|docs|deploy)/[^`\s]*)`", text)
    assert cited and [c for c in cited if not (ROOT / c).exists()] == []
