"""docs/host.md's table "the document says / Almanac does / test": every row names a test that
exists and cites a requirement ID (host:turn-loop)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.req("host:turn-loop")

ROOT = Path(__file__).resolve().parents[3]
MANIFEST = importlib.import_module("tests.req_manifest").REQUIREMENTS


def table_rows() -> list[str]:
    text = (ROOT / "docs" / "host.md").read_text(encoding="utf-8")
    section = text.split("## The memory document, point by point", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| ") and "---" not in line][1:]


def marks_of(holder: object) -> list[object]:
    marks = getattr(holder, "pytestmark", [])
    return list(marks) if isinstance(marks, list) else [marks]


def req_ids(module: object, test: object) -> set[str]:
    marks = [*marks_of(module), *marks_of(test)]
    return {str(getattr(m, "args", ("",))[0]) for m in marks if getattr(m, "name", "") == "req"}


def test_every_row_names_a_test_that_exists_and_cites_a_requirement() -> None:
    rows = table_rows()
    assert len(rows) >= 25
    for row in rows:
        (named,) = re.findall(r"`(tests/[^`]+\.py)::(\w+)`", row) or [("", "")]
        path, name = named
        assert path, f"a row names no test: {row}"
        module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
        test = getattr(module, name, None)
        assert callable(test), f"{path}::{name} does not exist"
        ids = req_ids(module, test)
        assert ids and ids <= set(MANIFEST), f"{path}::{name} cites no known requirement ({ids})"
