"""The import-graph helper (``tests/imports.py``) sees every kind of import and every cycle, on a
small package written for the purpose."""

from __future__ import annotations

from pathlib import Path

from tests.imports import cycles, graph, grouped, layer_of, upward

LAYERS = (("low", ("pkg", "pkg.base")), ("high", ("pkg.top",)))


def _package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "pkg"


def test_function_level_type_checking_and_relative_imports_all_count(tmp_path: Path) -> None:
    pkg = _package(
        tmp_path,
        {
            "__init__.py": "",
            "base.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from pkg.top.a import A\n"
                "def later():\n    from .top import b\n"
                "import json, pkg.top.c as c\n"
            ),
            "top/__init__.py": "from . import a\n",
            "top/a.py": "from pkg import base\nfrom ..base import nothing\n",
            "top/b.py": "",
            "top/c.py": "",
        },
    )
    found = {(e.importer, e.imported, e.line) for e in graph(pkg)}
    assert found == {
        ("pkg.base", "pkg.top.a", 3),
        ("pkg.base", "pkg.top.b", 5),
        ("pkg.base", "pkg.top.c", 6),
        ("pkg.top", "pkg.top.a", 1),
        ("pkg.top.a", "pkg.base", 1),
        ("pkg.top.a", "pkg.base", 2),
    }
    refused = upward(graph(pkg), LAYERS)
    assert len(refused) == 3 and all("goes up: low may not import high" in r for r in refused)
    assert any(r.startswith("pkg.base -> pkg.top.b (") and "base.py:5)" in r for r in refused)
    assert cycles((e.importer, e.imported) for e in graph(pkg)) == [["pkg.base", "pkg.top.a"]]
    assert cycles(grouped(graph(pkg))) == [["pkg.base", "pkg.top"]]


def test_a_layer_is_found_by_its_longest_name_and_the_root_stands_for_itself() -> None:
    layers = (("a", ("pkg", "pkg.x")), ("b", ("pkg.x.y",)))
    assert layer_of("pkg", layers) == 0
    assert layer_of("pkg.x.z", layers) == 0
    assert layer_of("pkg.x.y.deep", layers) == 1
    assert layer_of("pkg.unlisted", layers) is None


def test_cycles_are_found_however_long_and_a_chain_is_none() -> None:
    assert cycles([("a", "b"), ("b", "c"), ("c", "d")]) == []
    assert cycles([("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "e"), ("e", "d")]) == [
        ["a", "b", "c"],
        ["d", "e"],
    ]
    assert cycles([("a", "a")]) == []
