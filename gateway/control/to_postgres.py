"""Copying a single-host control plane (SQLite, ``<data_dir>/control.db``) into an empty PostgreSQL
database (``run:scale-out``; ``almanac control migrate-to-postgres``, deploy/SCALING.md "From one
host to PostgreSQL").

One PostgreSQL transaction holds the whole copy: the schema from the same numbered migrations as
every gateway applies, every table's rows (parents before the tables that reference them), the
identity sequences moved past the copied ids, and the check — each table's row count and an
order-independent checksum of its rows (primary keys included), read back from PostgreSQL and
compared with SQLite's. Anything that differs, or that PostgreSQL refuses, rolls it all back.
Meanwhile the SQLite file is held under ``BEGIN IMMEDIATE`` (no admin command writes to it), and
the caller holds the data directory's ``serve.lock`` (no gateway serves it).

After the commit :func:`mark_moved` writes ``control.db.moved`` beside the file, and
:meth:`~gateway.control.store.ControlPlane.open` refuses a control plane so marked: nothing opens
the stale copy by mistake. The SQLite file itself is left exactly as it was.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from graphlib import CycleError, TopologicalSorter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import apsw

from gateway.control.clock import utcnow
from gateway.control.db import Database, Dialect, Rows, redact, to_pyformat
from gateway.control.migrate import _PG_LOCK_KEY, load_migrations, migrate
from gateway.errors import ConfigError, DataDirError

if TYPE_CHECKING:
    import psycopg

#: Beside ``control.db``: written once its control plane was copied to PostgreSQL.
MOVED_SUFFIX = ".moved"
_MODULUS = 1 << 256


class MigrationRefused(ConfigError):
    """The copy was refused or failed; nothing was changed in PostgreSQL (the CLI exits 2)."""


@dataclass(frozen=True)
class Summary:
    """What a table holds, as both sides compute it: its row count and the checksum of its rows."""

    rows: int
    checksum: int

    @property
    def short(self) -> str:
        return f"{self.checksum:064x}"[:16]


@dataclass(frozen=True)
class TableCopy:
    """One table's line of the report: its name and its summary in SQLite and in PostgreSQL."""

    table: str
    source: Summary
    target: Summary


# -- pure -------------------------------------------------------------------------------------


def row_hash(values: Sequence[object]) -> int:
    """A row's hash: its values as text (``None`` kept apart from any text), in column order."""
    text = json.dumps([None if v is None else str(v) for v in values], ensure_ascii=False)
    return int.from_bytes(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest(), "big")


def summarize(rows: Iterable[Sequence[object]]) -> Summary:
    """Count ``rows`` and add their hashes modulo 2**256: the same whatever order they come in."""
    count, total = 0, 0
    for row in rows:
        count += 1
        total = (total + row_hash(row)) % _MODULUS
    return Summary(count, total)


def copy_order(references: Mapping[str, Iterable[str]]) -> list[str]:
    """The tables in an order where every table comes after the tables it references (ties by
    name). ``references``: table → the tables its foreign keys point to."""
    graph = {t: sorted(set(refs) - {t}) for t, refs in sorted(references.items())}
    sorter: TopologicalSorter[str] = TopologicalSorter(graph)
    try:
        sorter.prepare()
    except CycleError as exc:
        cycle = " → ".join(exc.args[1])
        raise MigrationRefused(f"the control plane's tables reference each other: {cycle}") from None
    order: list[str] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready())
        order += ready
        sorter.done(*ready)
    return [t for t in order if t in references]


def mismatches(source: Mapping[str, Summary], target: Mapping[str, Summary]) -> list[str]:
    """Every table whose copy differs from its source, said in words (empty: they are equal)."""
    found: list[str] = []
    for table in sorted(set(source) | set(target)):
        mine, theirs = source.get(table), target.get(table)
        if mine is None or theirs is None:
            found.append(f"{table}: only in {'PostgreSQL' if mine is None else 'SQLite'}")
        elif mine.rows != theirs.rows:
            found.append(f"{table}: {mine.rows} rows in SQLite, {theirs.rows} in PostgreSQL")
        elif mine.checksum != theirs.checksum:
            found.append(f"{table}: {mine.rows} rows on both sides but their contents differ")
    return found


# -- the shell --------------------------------------------------------------------------------


class _Pinned(Database):
    """One psycopg connection inside the copy's transaction, so the migrations run in it too."""

    dialect: Dialect = "postgresql"

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[object] = ()) -> Rows:
        with self._conn.cursor() as cur:
            cur.execute(to_pyformat(sql), tuple(params))
            rows = [tuple(r) for r in cur.fetchall()] if cur.description is not None else []
            return Rows(rows, cur.rowcount)

    def script(self, sql: str) -> None:
        self._conn.execute(sql.encode("utf-8"))

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self._conn.transaction():
            yield

    def close(self) -> None:
        """The connection belongs to the caller."""


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _sqlite_tables(conn: apsw.Connection) -> dict[str, list[str]]:
    """Each of SQLite's tables (its own and the migrations' record left out) and its columns."""
    names = [
        str(r[0])
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "AND name != 'schema_migrations' ORDER BY name"
        )
    ]
    return {n: [str(c[1]) for c in conn.execute(f"PRAGMA table_info({_quote(n)})")] for n in names}


def _sqlite_references(conn: apsw.Connection, tables: Iterable[str]) -> dict[str, list[str]]:
    return {t: [str(fk[2]) for fk in conn.execute(f"PRAGMA foreign_key_list({_quote(t)})")] for t in tables}


def _sqlite_sequences(conn: apsw.Connection) -> dict[str, int]:
    """The highest id each AUTOINCREMENT table ever gave (deleted rows' ids included)."""
    found = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'sqlite_sequence'").fetchall()
    if not found:
        return {}
    return {str(n): int(s) for n, s in conn.execute("SELECT name, seq FROM sqlite_sequence")}


def _pg_tables(conn: psycopg.Connection[Any]) -> dict[str, list[str]]:
    rows = conn.execute(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position"
    ).fetchall()
    found: dict[str, list[str]] = {}
    for table, column in rows:
        found.setdefault(str(table), []).append(str(column))
    found.pop("schema_migrations", None)
    return found


def _refuse_a_non_empty_target(conn: psycopg.Connection[Any], url: str) -> None:
    # the catalogue, not information_schema: it lists tables this user has no rights on, too
    rows = conn.execute(
        "SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
        "ON n.oid = c.relnamespace WHERE n.nspname = current_schema() "
        "AND c.relkind IN ('r', 'p', 'v', 'm', 'f') ORDER BY c.relname"
    ).fetchall()
    if rows:
        names = [str(r[0]) for r in rows]
        shown = ", ".join(names[:8]) + (", …" if len(names) > 8 else "")
        raise MigrationRefused(
            f"the PostgreSQL database at {redact(url)} is not empty: it holds tables ({shown}); "
            "migrate into a new, empty database (nothing was changed)"
        )


def _copy_table(
    source: apsw.Connection, target: psycopg.Connection[Any], table: str, columns: list[str]
) -> Summary:
    """Stream the table's rows from SQLite into PostgreSQL; returns what was read from SQLite."""
    from psycopg import sql

    statement = sql.SQL("COPY {} ({}) FROM STDIN").format(
        sql.Identifier(table), sql.SQL(", ").join(map(sql.Identifier, columns))
    )
    select = f"SELECT {', '.join(map(_quote, columns))} FROM {_quote(table)}"

    def rows() -> Iterator[tuple[Any, ...]]:
        with target.cursor() as cur, cur.copy(statement) as copy:
            for row in source.execute(select):
                copy.write_row(row)
                yield tuple(row)

    return summarize(rows())


def _target_summary(target: psycopg.Connection[Any], table: str, columns: list[str]) -> Summary:
    from psycopg import sql

    query = sql.SQL("SELECT {} FROM {}").format(
        sql.SQL(", ").join(map(sql.Identifier, columns)), sql.Identifier(table)
    )
    with target.cursor() as cur:
        return summarize(cur.stream(query))


def _move_identities_past(
    target: psycopg.Connection[Any], sequences: Mapping[str, int], tables: Mapping[str, list[str]]
) -> None:
    """Each identity column's sequence moved past the ids copied into it (and past the ids SQLite
    gave to rows deleted since), so the next row PostgreSQL numbers is a new one."""
    from psycopg import sql

    identities = target.execute(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND is_identity = 'YES'"
    ).fetchall()
    for table, column in identities:
        if str(table) not in tables:
            continue
        highest = target.execute(
            sql.SQL("SELECT coalesce(max({}), 0) FROM {}").format(
                sql.Identifier(str(column)), sql.Identifier(str(table))
            )
        ).fetchone()
        top = max(int(highest[0]) if highest else 0, sequences.get(str(table), 0))
        if top > 0:
            target.execute(
                "SELECT setval(pg_get_serial_sequence(%s, %s), %s)",
                (_quote(str(table)), str(column), top),
            )


def copy_control_plane(sqlite_path: Path, url: str) -> list[TableCopy]:
    """Copy the SQLite control plane at ``sqlite_path`` (already migrated to the newest schema) into
    the empty PostgreSQL database at ``url``, checked, in one transaction. Raises
    :class:`MigrationRefused` (one line; nothing changed in PostgreSQL) on any refusal or failure."""
    import psycopg

    source = apsw.Connection(str(sqlite_path), flags=apsw.SQLITE_OPEN_READWRITE)
    try:
        source.set_busy_timeout(5000)
        source.execute("BEGIN IMMEDIATE")  # no admin command writes to it while it is copied
        try:
            return _copy(source, url)
        finally:
            source.execute("ROLLBACK")
    except apsw.BusyError:
        raise MigrationRefused(
            f"{sqlite_path} is being written by another command; let it finish and try again "
            "(nothing was changed)"
        ) from None
    except apsw.Error as exc:
        raise MigrationRefused(f"cannot read {sqlite_path}: {exc} (nothing was changed)") from None
    except psycopg.Error as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise MigrationRefused(
            f"PostgreSQL at {redact(url)} refused the copy: {reason} (nothing was changed there)"
        ) from None
    finally:
        source.close()


def _copy(source: apsw.Connection, url: str) -> list[TableCopy]:
    import psycopg

    tables = _sqlite_tables(source)
    order = copy_order(_sqlite_references(source, tables))
    sequences = _sqlite_sequences(source)
    try:
        target = psycopg.connect(url, autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:
        reason = " ".join(str(exc).split())
        raise MigrationRefused(f"cannot connect to PostgreSQL at {redact(url)}: {reason}") from None
    with target, target.transaction():
        # a gateway starting on this database meanwhile waits here, and then finds it migrated
        target.execute("SELECT pg_advisory_xact_lock(%s)", (_PG_LOCK_KEY,))
        _refuse_a_non_empty_target(target, url)
        migrate(_Pinned(target), load_migrations(dialect="postgresql"))
        built = _pg_tables(target)
        if {t: sorted(c) for t, c in built.items()} != {t: sorted(c) for t, c in tables.items()}:
            raise MigrationRefused(
                "the SQLite control plane's tables and columns are not those the migrations build "
                f"in PostgreSQL (SQLite: {sorted(tables)}; PostgreSQL: {sorted(built)}); nothing "
                "was changed"
            )
        report: list[TableCopy] = []
        for table in order:
            columns = tables[table]
            try:
                mine = _copy_table(source, target, table, columns)
            except psycopg.Error as exc:
                reason = " ".join(str(exc).split()) or type(exc).__name__
                raise MigrationRefused(
                    f"PostgreSQL refused a row of table {table}: {reason} (nothing was changed "
                    f"in {redact(url)})"
                ) from None
            report.append(TableCopy(table, mine, _target_summary(target, table, columns)))
        _move_identities_past(target, sequences, tables)
        wrong = mismatches({r.table: r.source for r in report}, {r.table: r.target for r in report})
        if wrong:
            raise MigrationRefused(
                "the copy in PostgreSQL differs from the SQLite control plane ("
                + "; ".join(wrong)
                + f"); it was rolled back: nothing was changed in {redact(url)}"
            )
    return report


def moved_marker(sqlite_path: Path) -> Path:
    return sqlite_path.with_name(sqlite_path.name + MOVED_SUFFIX)


def mark_moved(sqlite_path: Path, url: str) -> Path:
    """Record beside the SQLite file that its control plane now lives in PostgreSQL (fsynced)."""
    marker = moved_marker(sqlite_path)
    body = json.dumps({"database_url": redact(url), "moved_at": utcnow()}) + "\n"
    tmp = marker.with_name(marker.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as out:
        out.write(body)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, marker)
    fd = os.open(marker.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return marker


def refuse_if_moved(sqlite_path: Path) -> None:
    """Refuse (:class:`~gateway.errors.DataDirError`) a SQLite control plane copied to PostgreSQL."""
    marker = moved_marker(sqlite_path)
    if not marker.exists():
        return
    try:
        record = json.loads(marker.read_text(encoding="utf-8")[:4096])
        where, when = str(record["database_url"]), str(record["moved_at"])
    except (OSError, ValueError, KeyError, TypeError):
        where, when = "PostgreSQL", "an earlier run"
    raise DataDirError(
        f"the control plane of {sqlite_path.parent} was moved to PostgreSQL ({where}) at {when} by "
        "`almanac control migrate-to-postgres`: set database_url (ALMANAC_DATABASE_URL or "
        f"--database-url) to use it; {sqlite_path.name} is kept as it was then, unused ({marker})"
    )
