"""The pure side of ``almanac control migrate-to-postgres`` (run:scale-out): the checksum both sides
compute, the comparison that refuses a copy, and the order tables are copied in. The command itself,
on a real PostgreSQL: tests/gateway/cli/test_control.py."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.control.store import ControlPlane
from gateway.control.to_postgres import (
    MigrationRefused,
    Summary,
    _sqlite_references,
    _sqlite_tables,
    copy_order,
    mismatches,
    summarize,
)
from gateway.errors import DataDirError

values = st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1), st.text(max_size=20))
rows = st.lists(
    st.tuples(st.text(min_size=1, max_size=8), values, values), max_size=30, unique_by=lambda r: r[0]
)


def as_text(value: object) -> str | None:
    return None if value is None else str(value)


@pytest.mark.req("run:scale-out")
@given(rows, st.randoms(use_true_random=False))
def test_the_checksum_does_not_depend_on_row_order(
    table: list[tuple[object, ...]], rnd: random.Random
) -> None:
    shuffled = list(table)
    rnd.shuffle(shuffled)
    assert summarize(table) == summarize(shuffled)
    assert summarize(table).rows == len(table)


@pytest.mark.req("run:scale-out")
@given(rows.filter(bool), st.data())
def test_any_changed_missing_or_extra_row_changes_the_summary(
    table: list[tuple[object, ...]], draw: st.DataObject
) -> None:
    i = draw.draw(st.integers(0, len(table) - 1))
    column = draw.draw(st.integers(0, 2))
    old = table[i][column]
    new = draw.draw(values.filter(lambda v: as_text(v) != as_text(old)))
    changed = [*table]
    changed[i] = tuple(new if c == column else v for c, v in enumerate(table[i]))
    assert summarize(changed) != summarize(table)
    assert summarize(table[:i] + table[i + 1 :]) != summarize(table)
    assert summarize([*table, table[i]]) != summarize(table)


def test_none_is_not_the_text_none_and_ints_read_as_their_text() -> None:
    assert summarize([(None,)]) != summarize([("None",)])
    assert summarize([(None,)]) != summarize([("",)])
    # SQLite gives an INTEGER column's value as int, PostgreSQL a TEXT column's as str: the same value
    assert summarize([(7, "x")]) == summarize([("7", "x")])


@pytest.mark.req("run:scale-out")
def test_mismatches_name_each_table_that_differs() -> None:
    a, b = Summary(3, 11), Summary(3, 12)
    assert mismatches({"owners": a}, {"owners": a}) == []
    assert mismatches({"owners": a}, {"owners": Summary(2, 11)}) == [
        "owners: 3 rows in SQLite, 2 in PostgreSQL"
    ]
    assert mismatches({"owners": a}, {"owners": b}) == [
        "owners: 3 rows on both sides but their contents differ"
    ]
    assert mismatches({"owners": a, "tokens": a}, {"owners": a}) == ["tokens: only in SQLite"]


@pytest.mark.req("run:scale-out")
def test_tables_are_copied_after_the_tables_they_reference(tmp_path: Path) -> None:
    ControlPlane.open(tmp_path / "control.db").close()
    import apsw

    conn = apsw.Connection(str(tmp_path / "control.db"))
    tables = _sqlite_tables(conn)
    references = _sqlite_references(conn, tables)
    conn.close()
    order = copy_order(references)
    assert sorted(order) == sorted(tables) and "schema_migrations" not in order
    for table, parents in references.items():
        for parent in parents:
            assert order.index(parent) < order.index(table), (parent, table)
    with pytest.raises(MigrationRefused, match="reference each other"):
        copy_order({"a": ["b"], "b": ["a"]})


def test_a_moved_control_plane_is_refused_by_every_opener(tmp_path: Path) -> None:
    from gateway.control.to_postgres import mark_moved

    path = tmp_path / "control.db"
    ControlPlane.open(path).close()
    mark_moved(path, "postgresql://almanac:hunter2@db.internal/almanac")
    with pytest.raises(DataDirError, match=r"moved to PostgreSQL \(postgresql://almanac:\*\*\*@db.internal"):
        ControlPlane.open(path)
    assert "hunter2" not in (tmp_path / "control.db.moved").read_text(encoding="utf-8")
