"""Ordered, transactional migrations of the control-plane database (``gw:migrations``).

``migrations/NNNN_name.sql`` files are applied in number order. Each runs inside one
``BEGIN IMMEDIATE`` transaction together with its row in ``schema_migrations`` and the new
``PRAGMA user_version``, so a failing migration leaves the database exactly as it was.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import apsw

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
    applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
)
"""


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


def load_migrations(directory: Path = MIGRATIONS_DIR) -> list[Migration]:
    if not directory.is_dir():
        raise ConfigError(f"migrations directory {directory} is missing")
    files = {p.name: p.read_text(encoding="utf-8") for p in directory.glob("*.sql")}
    return parse_migrations(files)


def current_version(conn: apsw.Connection) -> int:
    row = conn.execute("PRAGMA user_version").fetchone()
    return int(row[0]) if row else 0


def migrate(conn: apsw.Connection, migrations: list[Migration]) -> list[int]:
    """Apply every migration newer than the database; return the versions applied."""
    conn.execute(_BOOTSTRAP)
    applied = {int(v): str(n) for v, n in conn.execute("SELECT version, name FROM schema_migrations")}
    newest = migrations[-1].version if migrations else 0
    if current_version(conn) > newest:
        raise ConfigError(
            f"the control-plane database is at version {current_version(conn)}, newer than this "
            f"gateway ({newest}); upgrade the gateway"
        )
    done: list[int] = []
    for migration in migrations:
        if migration.version in applied:
            if applied[migration.version] != migration.name:
                raise ConfigError(
                    f"migration {migration.version:04d} was applied as {applied[migration.version]!r} "
                    f"but is now named {migration.name!r}; migrations must never be renamed"
                )
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(migration.sql)
            conn.execute(
                "INSERT INTO schema_migrations (version, name, sha256) VALUES (?, ?, ?)",
                (migration.version, migration.name, migration.sha256),
            )
            conn.execute(f"PRAGMA user_version = {migration.version:d}")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        done.append(migration.version)
    return done
