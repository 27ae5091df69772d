"""The gateway never imports the engine: they share only the wire (docs/wire.md)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import gateway

GATEWAY = Path(gateway.__file__).parent


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
