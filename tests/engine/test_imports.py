"""The engine's imports form no cycle, between modules or between sub-packages (``engine.store``,
``engine.index``, …; a top-level module such as ``engine.tools`` is one of its own).

Every import counts, wherever it stands: a function-level or ``TYPE_CHECKING`` import hides a cycle
without breaking it (``tests/imports.py``). ``docs/architecture.md`` maps the packages.
"""

from __future__ import annotations

from pathlib import Path

import engine
from tests.imports import cycles, graph, grouped

ENGINE = Path(engine.__file__).parent


def test_no_engine_module_is_in_an_import_cycle() -> None:
    assert cycles((e.importer, e.imported) for e in graph(ENGINE)) == []


def test_no_engine_sub_packages_import_each_other_in_a_cycle() -> None:
    assert cycles(grouped(graph(ENGINE))) == []
