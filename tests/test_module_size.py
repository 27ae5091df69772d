"""No Python module of the project passes the 800-line ceiling (``notes/style.md``: modules are
concepts; aim for 400 lines, never more than 800). A module that grows past it is split by concept,
not trimmed of its docstrings."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("gateway", "engine", "almanac", "bench", "scripts", "tests", "examples")
CEILING = 800


def _modules() -> list[Path]:
    found = (p for folder in FOLDERS for p in sorted((ROOT / folder).rglob("*.py")))
    return [p for p in found if "__pycache__" not in p.parts]


def test_no_module_is_longer_than_the_ceiling() -> None:
    modules = _modules()
    assert len(modules) > 400  # the walk saw the project
    over = {
        str(p.relative_to(ROOT)): n
        for p in modules
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > CEILING
    }
    assert over == {}, f"split these modules by concept (over {CEILING} lines): {over}"
