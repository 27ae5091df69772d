"""Ordered, transactional migrations of the control plane (gw:migrations), on SQLite and on
PostgreSQL, and the PostgreSQL twins kept in step with the SQLite files."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import apsw
import psycopg
import pytest

from gateway.control.db import Database, PostgresDatabase, SqliteDatabase
from gateway.control.migrate import (
    MIGRATIONS_DIR,
    current_version,
    load_migrations,
    migrate,
    parse_migrations,
)
from gateway.errors import ConfigError
from tests.pg import PostgresServer


def _open(database_url: str | None, path: Path) -> Database:
    return (
        PostgresDatabase.connect(database_url) if database_url else SqliteDatabase(apsw.Connection(str(path)))
    )


@pytest.fixture
def db(database_url: str | None, tmp_path: Path) -> Iterator[Database]:
    opened = _open(database_url, tmp_path / "c.db")
    yield opened
    opened.close()


def _tables(db: Database) -> set[str]:
    if db.dialect == "sqlite":
        sql = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
    else:
        sql = "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
    return {str(r[0]) for r in db.execute(sql)}


def _columns(db: Database) -> dict[str, list[tuple[str, bool]]]:
    """{table: [(column, nullable)]} in declaration order."""
    out: dict[str, list[tuple[str, bool]]] = {}
    for table in sorted(_tables(db)):
        if db.dialect == "sqlite":
            rows = db.execute(f"SELECT name, \"notnull\", pk FROM pragma_table_info('{table}') ORDER BY cid")
            out[table] = [(str(r[0]), not (r[1] or r[2])) for r in rows]
        else:
            rows = db.execute(
                "SELECT column_name, is_nullable FROM information_schema.columns "
                "WHERE table_schema = current_schema() AND table_name = ? ORDER BY ordinal_position",
                (table,),
            )
            out[table] = [(str(r[0]), r[1] == "YES") for r in rows]
    return out


def _indexes(db: Database) -> set[str]:
    if db.dialect == "sqlite":
        sql = "SELECT name FROM sqlite_master WHERE type = 'index' AND name NOT LIKE 'sqlite_autoindex%'"
    else:
        sql = (
            "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() "
            "AND indexname NOT IN (SELECT conname FROM pg_constraint)"
        )
    return {str(r[0]) for r in db.execute(sql)}


def _uniques(db: Database) -> set[tuple[str, tuple[str, ...]]]:
    """UNIQUE constraints declared on tables: {(table, columns)}."""
    found: set[tuple[str, tuple[str, ...]]] = set()
    if db.dialect == "sqlite":
        for table in _tables(db):
            for index in db.execute(f"SELECT name FROM pragma_index_list('{table}') WHERE origin = 'u'"):
                cols = db.execute(f"SELECT name FROM pragma_index_info('{index[0]}') ORDER BY seqno")
                found.add((table, tuple(str(c[0]) for c in cols)))
        return found
    rows = db.execute(
        "SELECT c.conrelid::regclass::text, array_agg(a.attname::text ORDER BY k.n) "
        "FROM pg_constraint c CROSS JOIN LATERAL unnest(c.conkey) WITH ORDINALITY AS k(attnum, n) "
        "JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum "
        "WHERE c.contype = 'u' AND c.connamespace = current_schema()::regnamespace GROUP BY c.oid, c.conrelid"
    )
    return {(str(r[0]), tuple(r[1])) for r in rows}


@pytest.mark.req("gw:migrations")
def test_the_shipped_migrations_create_the_control_plane(db: Database) -> None:
    applied = migrate(db, load_migrations(dialect=db.dialect))
    assert applied == list(range(1, len(applied) + 1))
    assert {"owners", "workspaces", "connections", "tokens", "audit_events", "schema_migrations"} <= _tables(
        db
    )
    assert current_version(db) == applied[-1]
    assert migrate(db, load_migrations(dialect=db.dialect)) == []  # idempotent


@pytest.mark.req("gw:migrations")
def test_migrations_apply_in_order_and_a_failing_one_leaves_nothing_behind(db: Database) -> None:
    good = parse_migrations(
        {"0002_more.sql": "CREATE TABLE b (x INTEGER);", "0001_first.sql": "CREATE TABLE a (x INTEGER);"}
    )
    assert [m.name for m in good] == ["first", "more"]
    assert migrate(db, good) == [1, 2]
    bad = parse_migrations(
        {
            "0001_first.sql": "CREATE TABLE a (x INTEGER);",
            "0002_more.sql": "CREATE TABLE b (x INTEGER);",
            "0003_bad.sql": "CREATE TABLE c (x INTEGER); nonsense;",
        }
    )
    with pytest.raises((apsw.SQLError, psycopg.errors.SyntaxError)):
        migrate(db, bad)
    assert "c" not in _tables(db)  # the statement before the error was rolled back too
    assert current_version(db) == 2
    assert [r[0] for r in db.execute("SELECT version FROM schema_migrations ORDER BY version")] == [1, 2]


@pytest.mark.req("gw:migrations")
def test_gaps_bad_names_renames_and_newer_databases_are_refused(db: Database, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="missing 0002"):
        parse_migrations({"0001_a.sql": "", "0003_c.sql": ""})
    with pytest.raises(ConfigError, match="NNNN_name"):
        parse_migrations({"1_a.sql": ""})
    migrate(db, parse_migrations({"0001_a.sql": "CREATE TABLE a (x INTEGER);"}))
    with pytest.raises(ConfigError, match="never be renamed"):
        migrate(db, parse_migrations({"0001_b.sql": "CREATE TABLE a (x INTEGER);"}))
    db.execute(
        "INSERT INTO schema_migrations (version, name, sha256, applied_at) VALUES (9, 'later', '', 'x')"
    )
    with pytest.raises(ConfigError, match="newer than this gateway"):
        migrate(db, parse_migrations({"0001_a.sql": ""}))
    with pytest.raises(ConfigError, match="missing"):
        load_migrations(tmp_path / "nowhere")


@pytest.mark.req("gw:migrations")
def test_a_database_holding_another_schema_is_refused_changing_nothing(db: Database) -> None:
    db.execute("CREATE TABLE owners (id TEXT)")
    db.execute("INSERT INTO owners (id) VALUES ('theirs')")
    with pytest.raises(ConfigError, match=r"already holds tables \(owners\).*not an Almanac control plane"):
        migrate(db, load_migrations(dialect=db.dialect))
    assert _tables(db) == {"owners"}  # no schema_migrations, nothing else
    assert db.execute("SELECT id FROM owners").fetchall() == [("theirs",)]


@pytest.mark.req("gw:migrations")
def test_upgrading_an_existing_database_keeps_its_rows(db: Database) -> None:
    shipped = load_migrations(dialect=db.dialect)
    migrate(db, shipped)
    db.execute("INSERT INTO owners (id, email, created_at) VALUES ('own_1', 'a@b.co', 'now')")
    later = parse_migrations(
        {
            **{f"{m.version:04d}_{m.name}.sql": m.sql for m in shipped},
            f"{len(shipped) + 1:04d}_extra.sql": "ALTER TABLE owners ADD COLUMN nickname TEXT;",
        }
    )
    assert migrate(db, later) == [len(shipped) + 1]
    assert db.execute("SELECT email, nickname FROM owners").fetchall() == [("a@b.co", None)]


@pytest.mark.req("gw:migrations")
def test_the_postgresql_twins_build_the_same_schema_as_the_sqlite_files(
    postgres: PostgresServer, tmp_path: Path
) -> None:
    """A twin may differ in how (types, identity, a case-insensitive index), never in what: the same
    tables, columns, nullability and index names, from the same numbered files."""
    twins = sorted(p.name for p in (MIGRATIONS_DIR / "postgresql").glob("*.sql"))
    assert twins and set(twins) <= {p.name for p in MIGRATIONS_DIR.glob("*.sql")}
    lite = SqliteDatabase(apsw.Connection(str(tmp_path / "c.db")))
    pg = PostgresDatabase.connect(postgres.create_database())
    try:
        migrate(lite, load_migrations(dialect="sqlite"))
        migrate(pg, load_migrations(dialect="postgresql"))
        assert _columns(pg) == _columns(lite)
        # the one extra: SQLite's inline UNIQUE COLLATE NOCASE is a named index on lower(email) there
        assert _indexes(pg) - {"owners_email"} == _indexes(lite)
        assert _uniques(pg) == _uniques(lite) - {("owners", ("email",))}
        assert _uniques(pg)  # the comparison saw the constraints it compares
        assert [r[0] for r in pg.execute("SELECT name FROM schema_migrations ORDER BY version")] == [
            r[0] for r in lite.execute("SELECT name FROM schema_migrations ORDER BY version")
        ]
    finally:
        lite.close()
        pg.close()


@pytest.mark.req("gw:migrations")
def test_a_twin_without_its_sqlite_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "postgresql").mkdir()
    (tmp_path / "0001_a.sql").write_text("CREATE TABLE a (x INTEGER);")
    (tmp_path / "postgresql" / "0002_b.sql").write_text("CREATE TABLE b (x INTEGER);")
    with pytest.raises(ConfigError, match=r"no SQLite migration 0002_b\.sql"):
        load_migrations(tmp_path, dialect="postgresql")


@pytest.mark.req("gw:migrations")
def test_gateways_starting_together_on_postgresql_apply_each_migration_once(postgres: PostgresServer) -> None:
    url = postgres.create_database()
    dbs = [PostgresDatabase.connect(url) for _ in range(4)]
    start = threading.Barrier(len(dbs))
    results: list[list[int]] = []
    errors: list[BaseException] = []

    def run(db: Database) -> None:
        start.wait(timeout=30)
        try:
            results.append(migrate(db, load_migrations(dialect="postgresql")))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(db,)) for db in dbs]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert errors == []
        applied = sorted(v for r in results for v in r)
        assert applied == list(range(1, len(load_migrations()) + 1))  # each exactly once, by someone
        assert current_version(dbs[0]) == len(load_migrations())
    finally:
        for db in dbs:
            db.close()


@pytest.mark.req("gw:migrations", "gw:isolation")
def test_connections_pinned_before_0008_read_their_scope_only(db: Database) -> None:
    """The safe default: a pin made when the pages promised "only memories in this scope" keeps it."""
    shipped = load_migrations(dialect=db.dialect)
    migrate(db, [m for m in shipped if m.version < 8])
    db.execute("INSERT INTO owners (id, email, created_at) VALUES ('own_1', 'a@b.co', 'now')")
    db.execute(
        "INSERT INTO workspaces (id, owner_id, name, created_at) VALUES ('ws_1', 'own_1', 'default', 'now')"
    )
    for cid, scope in (("con_pinned", "project:a"), ("con_free", None)):
        db.execute(
            "INSERT INTO connections (id, owner_id, workspace_id, name, kind, read_only, scope, created_at) "
            "VALUES (?, 'own_1', 'ws_1', ?, 'pat', 0, ?, 'now')",
            (cid, cid, scope),
        )
    assert 8 in migrate(db, shipped)
    rows = db.execute("SELECT id, scope, reads_unscoped FROM connections ORDER BY id").fetchall()
    assert [tuple(r) for r in rows] == [("con_free", None, 0), ("con_pinned", "project:a", 0)]
    assert db.execute("SELECT count(*) FROM password_resets").fetchone() == (0,)
