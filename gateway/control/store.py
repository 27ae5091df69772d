"""The control plane: owners, workspaces, connections, tokens, nodes and audit events — in a SQLite
file (apsw, the default) or in PostgreSQL (``database_url``; see :mod:`gateway.control.db`).

:class:`ControlPlane` opens the database (the schema comes from ``migrations/``, applied on open) and
holds one repository per concept, all over that one database and one audit log:

- ``owners`` (owners, workspaces), ``connections`` (PATs, revoking, authenticating),
  ``accounts`` (browser sessions, sign-in throttling, invites, sign-up, OIDC identities),
  ``passwords`` (passwords and reset links), ``oauth`` (the authorization server's tables),
  ``erasure`` (erasing an account);
- ``nodes`` (nodes and placements), ``moves`` (moving a workspace), ``lost`` (nodes lost for good);
- ``audit_log`` (the one audit writer they share, and its reads).

Every repository method is one short transaction. Workspaces are addressed on disk by their opaque
id, never by their name.
"""

from __future__ import annotations

from pathlib import Path

import apsw

from gateway.control.accounts import Accounts
from gateway.control.audit import AuditLog
from gateway.control.connections import Connections
from gateway.control.db import Database, DatabaseUnavailable, PostgresDatabase, SqliteDatabase
from gateway.control.erasure import Erasure
from gateway.control.lost import LostNodes
from gateway.control.migrate import load_migrations, migrate
from gateway.control.moves import Moves
from gateway.control.nodes import Nodes
from gateway.control.oauth import OAuth
from gateway.control.owners import Owners
from gateway.control.passwords import Passwords
from gateway.control.to_postgres import refuse_if_moved
from gateway.errors import DataDirError


class ControlPlane:
    def __init__(self, db: Database) -> None:
        self._db = db
        self.audit_log = AuditLog(db)
        audit = self.audit_log.write
        self.owners = Owners(db, audit)
        self.connections = Connections(db, audit)
        self.accounts = Accounts(db, audit, self.owners)
        self.passwords = Passwords(db, audit)
        self.oauth = OAuth(db, audit, self.connections)
        self.erasure = Erasure(db, audit, self.owners)
        self.nodes = Nodes(db)
        self.moves = Moves(db, audit)
        self.lost = LostNodes(db, audit, self.moves)

    @classmethod
    def connect(cls, database_url: str | None, path: Path, *, create: bool = True) -> ControlPlane:
        """The configured control plane: PostgreSQL at ``database_url`` when it is set, else the
        SQLite file at ``path`` (see :meth:`open`)."""
        if database_url:
            return cls.open_url(database_url)
        return cls.open(path, create=create)

    @classmethod
    def open_url(cls, url: str) -> ControlPlane:
        """Connect to PostgreSQL at ``url`` (``postgresql://…``) and migrate it as needed.

        Raises :class:`DataDirError` (one line, password hidden) when the server cannot be reached or
        refuses the connection."""
        try:
            db = PostgresDatabase.connect(url)
        except DatabaseUnavailable as exc:
            raise DataDirError(f"{exc}; check database_url (ALMANAC_DATABASE_URL)") from None
        try:
            migrate(db, load_migrations(dialect="postgresql"))
        except BaseException:
            db.close()
            raise
        return cls(db)

    @classmethod
    def open(cls, path: Path, *, create: bool = True) -> ControlPlane:
        """Open (migrating as needed) the database at ``path``; create it only when ``create``.

        Raises :class:`DataDirError` (one line that says what to do) when the file is missing and
        may not be created, cannot be written, is not an Almanac control database, or was moved to
        PostgreSQL (``almanac control migrate-to-postgres``)."""
        refuse_if_moved(path)
        if not create and not path.is_file():
            raise DataDirError(
                f"no Almanac data in {path.parent} (it has no {path.name}); start the service once "
                f"with `almanac serve --data-dir {path.parent}`, or point --data-dir / ALMANAC_DATA_DIR "
                "at the right folder"
            )
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DataDirError(f"cannot create the data directory {path.parent}: {exc.strerror}") from None
        try:
            conn = apsw.Connection(str(path))
        except apsw.CantOpenError:
            raise DataDirError(
                f"cannot open {path}: this user cannot read and write it and its folder {path.parent}; "
                "fix their permissions or choose another data directory with --data-dir"
            ) from None
        if conn.readonly("main"):  # SQLite opens a file it may not write read-only, and says so late
            conn.close()
            raise DataDirError(
                f"cannot write {path}: this user may only read it; fix its permissions (the user running "
                "almanac must own it or be allowed to write it) or choose another data directory with "
                "--data-dir"
            )
        try:
            conn.set_busy_timeout(5000)
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            migrate(SqliteDatabase(conn), load_migrations())
        except (apsw.NotADBError, apsw.CorruptError) as exc:
            conn.close()
            raise DataDirError(
                f"{path} is not a usable Almanac control database ({exc}); restore it from a backup, "
                "or move it aside to start with an empty one"
            ) from None
        except (apsw.ReadOnlyError, apsw.CantOpenError, apsw.IOError) as exc:
            conn.close()
            raise DataDirError(
                f"cannot write {path} ({exc}); fix the permissions of {path.parent} "
                "or choose another data directory with --data-dir"
            ) from None
        except BaseException:
            conn.close()
            raise
        return cls(SqliteDatabase(conn))

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self._db.dialect

    def close(self) -> None:
        self._db.close()

    def ping(self) -> None:
        self._db.execute("SELECT count(*) FROM schema_migrations").fetchone()

    def database_time(self) -> float:
        """The control plane's clock now (epoch seconds): PostgreSQL's ``clock_timestamp()``; with
        SQLite, this host's clock (the database is a file on it)."""
        return self._db.clock()
