"""Ordered, transactional migrations of the control plane (gw:migrations)."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from gateway.control.migrate import current_version, load_migrations, migrate, parse_migrations
from gateway.errors import ConfigError


def _tables(conn: apsw.Connection) -> set[str]:
    return {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


@pytest.mark.req("gw:migrations")
def test_the_shipped_migrations_create_the_control_plane() -> None:
    conn = apsw.Connection(":memory:")
    applied = migrate(conn, load_migrations())
    assert applied == list(range(1, len(applied) + 1))
    assert {"owners", "workspaces", "connections", "tokens", "audit_events", "schema_migrations"} <= _tables(
        conn
    )
    assert current_version(conn) == applied[-1]
    assert migrate(conn, load_migrations()) == []  # idempotent


@pytest.mark.req("gw:migrations")
def test_migrations_apply_in_order_and_a_failing_one_leaves_nothing_behind() -> None:
    conn = apsw.Connection(":memory:")
    good = parse_migrations({"0002_more.sql": "CREATE TABLE b (x);", "0001_first.sql": "CREATE TABLE a (x);"})
    assert [m.name for m in good] == ["first", "more"]
    assert migrate(conn, good) == [1, 2]
    bad = parse_migrations(
        {
            "0001_first.sql": "CREATE TABLE a (x);",
            "0002_more.sql": "CREATE TABLE b (x);",
            "0003_bad.sql": "CREATE TABLE c (x); nonsense;",
        }
    )
    with pytest.raises(apsw.SQLError):
        migrate(conn, bad)
    assert "c" not in _tables(conn)  # the statement before the error was rolled back too
    assert current_version(conn) == 2
    assert [r[0] for r in conn.execute("SELECT version FROM schema_migrations")] == [1, 2]


@pytest.mark.req("gw:migrations")
def test_gaps_bad_names_renames_and_newer_databases_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="missing 0002"):
        parse_migrations({"0001_a.sql": "", "0003_c.sql": ""})
    with pytest.raises(ConfigError, match="NNNN_name"):
        parse_migrations({"1_a.sql": ""})
    conn = apsw.Connection(":memory:")
    migrate(conn, parse_migrations({"0001_a.sql": "CREATE TABLE a (x);"}))
    with pytest.raises(ConfigError, match="never be renamed"):
        migrate(conn, parse_migrations({"0001_b.sql": "CREATE TABLE a (x);"}))
    conn.execute("PRAGMA user_version = 9")
    with pytest.raises(ConfigError, match="newer than this gateway"):
        migrate(conn, parse_migrations({"0001_a.sql": ""}))
    with pytest.raises(ConfigError, match="missing"):
        load_migrations(tmp_path / "nowhere")


@pytest.mark.req("gw:migrations")
def test_upgrading_an_existing_database_keeps_its_rows(tmp_path: Path) -> None:
    shipped = load_migrations()
    conn = apsw.Connection(str(tmp_path / "c.db"))
    migrate(conn, shipped)
    conn.execute("INSERT INTO owners (id, email, created_at) VALUES ('own_1', 'a@b.co', 'now')")
    later = parse_migrations(
        {
            **{f"{m.version:04d}_{m.name}.sql": m.sql for m in shipped},
            f"{len(shipped) + 1:04d}_extra.sql": "ALTER TABLE owners ADD COLUMN nickname TEXT;",
        }
    )
    assert migrate(conn, later) == [len(shipped) + 1]
    assert conn.execute("SELECT email, nickname FROM owners").fetchall() == [("a@b.co", None)]
