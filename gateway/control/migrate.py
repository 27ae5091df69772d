"""Ordered, transactional migrations of the control-plane database (``gw:migrations``).

``migrations/NNNN_name.sql`` files are applied in number order, on SQLite or PostgreSQL. Where a
file's SQL differs between the two (identity columns, case-insensitive uniqueness), its PostgreSQL
twin ``migrations/postgresql/NNNN_name.sql`` is used there instead; every other file serves both.
Each migration runs inside one transaction together with its row in ``schema_migrations`` (and, on
SQLite, the new ``PRAGMA user_version``), so a failing migration leaves the database exactly as it
was. Gateways starting together do not race: SQLite takes ``BEGIN IMMEDIATE``, PostgreSQL a
transaction-scoped advisory lock, and each re-reads what is applied once it holds it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from gateway.control.clock import utcnow
from gateway.control.db import Database, Dialect, SqliteDatabase
from gateway.errors import ConfigError

# A wheel carries the top-level ``migrations/`` as ``gateway/control/migrations`` (setup.py copies it
# in at build time); a source checkout (and an editable install) reads the top-level folder itself.
_PACKAGED = Path(__file__).resolve().parent / "migrations"
MIGRATIONS_DIR = _PACKAGED if _PACKAGED.is_dir() else Path(__file__).resolve().parents[2] / "migrations"
_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")

_BOOTSTRAP = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    sha256     TEXT NOT NULL,
    applied_at TEXT NOT NULL
)
"""
# Any fixed number: the key of the PostgreSQL advisory lock that serialises migrations.
_PG_LOCK_KEY = 0x616C6D616E6163  # "almanac"


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.sql.encode("utf-8")).hexdigest()


def parse_migrations(files: dict[str, str]) -> list[Migration]:
    """Migrations from ``{file name: text}``, checked to be numbered 1, 2, 3 … with no gaps."""
    found: list[Migration] = []
    for filename, text in files.items():
        match = _NAME.match(filename)
        if match is None:
            raise ConfigError(f"migration file {filename!r} is not named NNNN_name.sql")
        found.append(Migration(int(match.group(1)), match.group(2), text))
    found.sort(key=lambda m: m.version)
    for expected, migration in enumerate(found, start=1):
        if migration.version != expected:
            raise ConfigError(f"migrations must be numbered 1, 2, 3 … without gaps; missing {expected:04d}")
    return found


def load_migrations(directory: Path = MIGRATIONS_DIR, dialect: Dialect = "sqlite") -> list[Migration]:
    """The migrations of ``directory`` for ``dialect`` (PostgreSQL twins replace their SQLite file)."""
    if not directory.is_dir():
        raise ConfigError(f"migrations directory {directory} is missing")
    files = {p.name: p.read_text(encoding="utf-8") for p in directory.glob("*.sql")}
    twins = directory / "postgresql"
    if twins.is_dir():
        for twin in twins.glob("*.sql"):
            if twin.name not in files:
                raise ConfigError(f"{twin} has no SQLite migration {twin.name} beside it")
            if dialect == "postgresql":
                files[twin.name] = twin.read_text(encoding="utf-8")
    return parse_migrations(files)


def current_version(db: Database) -> int:
    """The newest migration applied (0 for an empty database)."""
    row = db.execute("SELECT max(version) FROM schema_migrations").fetchone()
    return int(str(row[0])) if row and row[0] is not None else 0


@contextmanager
def _exclusive(db: Database) -> Iterator[None]:
    """A transaction no other gateway's migration runs beside."""
    if isinstance(db, SqliteDatabase):
        with db.immediate():
            yield
        return
    with db.transaction():
        db.execute("SELECT pg_advisory_xact_lock(?)", (_PG_LOCK_KEY,))
        yield


def _applied(db: Database) -> dict[int, str]:
    return {int(str(v)): str(n) for v, n in db.execute("SELECT version, name FROM schema_migrations")}


def _tables(db: Database) -> set[str]:
    if db.dialect == "sqlite":
        sql = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
    else:
        sql = "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
    return {str(r[0]) for r in db.execute(sql)}


def _refuse_a_foreign_schema(db: Database) -> None:
    """A database that holds tables but no record of Almanac's migrations is not an Almanac control
    plane (another program's, or a schema made by hand): refused, changing nothing, rather than
    failing half-way through the first migration."""
    tables = _tables(db)
    recorded = "schema_migrations" in tables and db.execute("SELECT 1 FROM schema_migrations").fetchone()
    others = sorted(tables - {"schema_migrations"})
    if others and not recorded:
        shown = ", ".join(others[:5]) + (", …" if len(others) > 5 else "")
        raise ConfigError(
            f"the control-plane database already holds tables ({shown}) but no record of Almanac's "
            "migrations (schema_migrations): it is not an Almanac control plane; point database_url at "
            "an empty database or at Almanac's own (nothing was changed)"
        )


def migrate(db: Database, migrations: list[Migration]) -> list[int]:
    """Apply every migration newer than the database; return the versions applied. A database
    holding other tables and no record of these migrations is refused (:class:`ConfigError`)."""
    with _exclusive(db):
        _refuse_a_foreign_schema(db)
        db.script(_BOOTSTRAP)
    applied = _applied(db)
    newest = migrations[-1].version if migrations else 0
    if applied and max(applied) > newest:
        raise ConfigError(
            f"the control-plane database is at version {max(applied)}, newer than this "
            f"gateway ({newest}); upgrade the gateway"
        )
    for migration in migrations:
        if migration.version in applied and applied[migration.version] != migration.name:
            raise ConfigError(
                f"migration {migration.version:04d} was applied as {applied[migration.version]!r} "
                f"but is now named {migration.name!r}; migrations must never be renamed"
            )
    done: list[int] = []
    for migration in migrations:
        if migration.version in applied:
            continue
        with _exclusive(db):
            if migration.version in _applied(db):  # another gateway got there first
                continue
            db.script(migration.sql)
            db.execute(
                "INSERT INTO schema_migrations (version, name, sha256, applied_at) VALUES (?, ?, ?, ?)",
                (migration.version, migration.name, migration.sha256, utcnow()),
            )
            if db.dialect == "sqlite":
                db.script(f"PRAGMA user_version = {migration.version:d}")
        done.append(migration.version)
    return done
