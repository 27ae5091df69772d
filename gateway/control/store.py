"""The control plane: owners, workspaces, connections, tokens and audit events — in a SQLite file
(apsw, the default) or in PostgreSQL (``database_url``; see :mod:`gateway.control.db`).

A thin shell: every method is one short transaction. The schema comes from ``migrations/``
(applied on open). Workspaces are addressed on disk by their opaque id, never by their name.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import apsw

from gateway.control import tokens
from gateway.control.accounts import AccountQueries
from gateway.control.clock import utcnow
from gateway.control.db import (
    ConstraintViolation,
    Database,
    DatabaseUnavailable,
    PostgresDatabase,
    SqliteDatabase,
)
from gateway.control.erasure import ErasureQueries
from gateway.control.lost import LostQueries
from gateway.control.migrate import load_migrations, migrate
from gateway.control.moves import MoveQueries
from gateway.control.nodes import NodeQueries
from gateway.control.oauth import OAuthQueries
from gateway.control.passwords import PasswordQueries
from gateway.control.records import (
    AuditEvent,
    Connection,
    Owner,
    Principal,
    Revocation,
    RevokedVia,
    Workspace,
)
from gateway.control.to_postgres import refuse_if_moved
from gateway.errors import AlreadyExists, DataDirError, OwnerNotFound, TokenNotFound, WorkspaceNotFound

DEFAULT_WORKSPACE = "default"


_CONNECTION_SELECT = """
SELECT c.id, c.owner_id, c.workspace_id, w.name, c.name, c.kind, c.read_only, c.scope, c.created_at,
       c.last_used_at, c.revoked_at,
       (SELECT t.prefix FROM tokens t WHERE t.connection_id = c.id AND t.kind = 'pat' LIMIT 1),
       c.client_id,
       (SELECT k.metadata FROM oauth_clients k WHERE k.client_id = c.client_id),
       c.reads_unscoped
FROM connections c JOIN workspaces w ON w.id = c.workspace_id
"""


def _connection(row: tuple[object, ...]) -> Connection:
    return Connection(
        id=str(row[0]),
        owner_id=str(row[1]),
        workspace_id=str(row[2]),
        workspace_name=str(row[3]),
        name=str(row[4]),
        kind=str(row[5]),
        read_only=bool(row[6]),
        scope=None if row[7] is None else str(row[7]),
        created_at=str(row[8]),
        last_used_at=None if row[9] is None else str(row[9]),
        revoked_at=None if row[10] is None else str(row[10]),
        token_prefix=None if row[11] is None else str(row[11]),
        client_id=None if row[12] is None else str(row[12]),
        client_name=_client_name(row[13]),
        reads_unscoped=row[7] is not None and bool(row[14]),
    )


def _client_name(metadata: object) -> str | None:
    """The ``client_name`` of an OAuth client's JSON record (parsed here: the same on both databases)."""
    if metadata is None:
        return None
    name = json.loads(str(metadata)).get("client_name")
    return None if name is None else str(name)


class ControlPlane(
    AccountQueries, PasswordQueries, OAuthQueries, ErasureQueries, NodeQueries, MoveQueries, LostQueries
):
    def __init__(self, db: Database) -> None:
        self._db = db

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

    def _write(self, sql: str, params: tuple[object, ...] = ()) -> None:
        with self._db.transaction():
            self._db.execute(sql, params)

    # -- owners and workspaces ---------------------------------------------------------------

    def create_owner(self, email: str, password_hash: str | None) -> tuple[Owner, Workspace]:
        """A new owner with their ``default`` workspace."""
        email = tokens.validate_email(email)
        now = utcnow()
        owner = Owner(tokens.new_id("own"), email, now)
        workspace = Workspace(tokens.new_id("ws"), owner.id, DEFAULT_WORKSPACE, now)
        try:
            with self._db.transaction():
                self._db.execute(
                    "INSERT INTO owners (id, email, password_hash, created_at) VALUES (?, ?, ?, ?)",
                    (owner.id, email, password_hash, now),
                )
                self._db.execute(
                    "INSERT INTO workspaces (id, owner_id, name, created_at) VALUES (?, ?, ?, ?)",
                    (workspace.id, owner.id, workspace.name, now),
                )
                self._audit("owner.create", owner.id, workspace.id, None, None, {"email": email})
        except ConstraintViolation as exc:
            raise AlreadyExists(f"an owner with email {email!r} already exists") from exc
        return owner, workspace

    def owner_by_email(self, email: str) -> Owner:
        row = self._db.execute(
            "SELECT id, email, created_at FROM owners WHERE lower(email) = lower(?) AND disabled_at IS NULL",
            (email.strip(),),
        ).fetchone()
        if row is None:
            raise OwnerNotFound(f"no owner with email {email!r}; create one with `almanac owner create`")
        return Owner(str(row[0]), str(row[1]), str(row[2]))

    def password_hash(self, owner_id: str) -> str | None:
        row = self._db.execute("SELECT password_hash FROM owners WHERE id = ?", (owner_id,)).fetchone()
        return None if row is None or row[0] is None else str(row[0])

    def create_workspace(self, owner_id: str, name: str) -> Workspace:
        name = tokens.validate_name(name, what="workspace")
        workspace = Workspace(tokens.new_id("ws"), owner_id, name, utcnow())
        try:
            with self._db.transaction():
                self._db.execute(
                    "INSERT INTO workspaces (id, owner_id, name, created_at) VALUES (?, ?, ?, ?)",
                    (workspace.id, owner_id, name, workspace.created_at),
                )
                self._audit("workspace.create", owner_id, workspace.id, None, None, {"name": name})
        except ConstraintViolation as exc:
            raise AlreadyExists(f"a workspace named {name!r} already exists for this owner") from exc
        return workspace

    def workspaces(self, owner_id: str) -> list[Workspace]:
        rows = self._db.execute(
            "SELECT id, owner_id, name, created_at FROM workspaces WHERE owner_id = ? ORDER BY created_at",
            (owner_id,),
        )
        return [Workspace(str(r[0]), str(r[1]), str(r[2]), str(r[3])) for r in rows]

    def workspace_by_name(self, owner_id: str, name: str) -> Workspace:
        for workspace in self.workspaces(owner_id):
            if workspace.name == name:
                return workspace
        raise WorkspaceNotFound(
            f"no workspace named {name!r}; create it with `almanac workspace create --owner EMAIL {name}`"
        )

    # -- connections and tokens --------------------------------------------------------------

    def create_pat(
        self,
        owner_id: str,
        workspace_id: str,
        name: str,
        *,
        read_only: bool = False,
        scope: str | None = None,
        reads_unscoped: bool = False,
        remote: str | None = None,
    ) -> tuple[Connection, str]:
        """A personal access token: a ``pat`` connection plus its one token. The secret is returned
        once, here, and never stored. ``reads_unscoped``: a pinned token also reads unscoped memories
        (ignored without ``scope``)."""
        name = tokens.validate_name(name, what="token")
        if scope is not None:
            scope = tokens.validate_scope(scope)
        reads_unscoped = reads_unscoped and scope is not None
        minted = tokens.mint("pat")
        connection_id, now = tokens.new_id("con"), utcnow()
        try:
            with self._db.transaction():
                self._db.execute(
                    "INSERT INTO connections (id, owner_id, workspace_id, name, kind, read_only, scope, "
                    "reads_unscoped, created_at) VALUES (?, ?, ?, ?, 'pat', ?, ?, ?, ?)",
                    (
                        connection_id,
                        owner_id,
                        workspace_id,
                        name,
                        int(read_only),
                        scope,
                        int(reads_unscoped),
                        now,
                    ),
                )
                self._db.execute(
                    "INSERT INTO tokens (id, connection_id, kind, token_hash, prefix, created_at) "
                    "VALUES (?, ?, 'pat', ?, ?, ?)",
                    (tokens.new_id("tok"), connection_id, minted.token_hash, minted.prefix, now),
                )
                detail = {"name": name, "read_only": read_only, "scope": scope, "prefix": minted.prefix}
                if scope is not None:
                    detail["reads_unscoped"] = reads_unscoped
                self._audit("token.create", owner_id, workspace_id, connection_id, remote, detail)
        except ConstraintViolation as exc:
            raise AlreadyExists(
                f"a live token named {name!r} already exists; revoke it or pick another name"
            ) from exc
        return self.connection(connection_id), minted.secret

    def connection(self, connection_id: str) -> Connection:
        row = self._db.execute(_CONNECTION_SELECT + " WHERE c.id = ?", (connection_id,)).fetchone()
        if row is None:
            raise TokenNotFound(f"no connection {connection_id!r}")
        return _connection(row)

    def connections(self, owner_id: str, *, include_revoked: bool = False) -> list[Connection]:
        where = " WHERE c.owner_id = ?" + ("" if include_revoked else " AND c.revoked_at IS NULL")
        rows = self._db.execute(_CONNECTION_SELECT + where + " ORDER BY c.created_at", (owner_id,))
        return [_connection(r) for r in rows]

    def revoke(
        self,
        owner_id: str,
        id_or_name: str,
        *,
        remote: str | None = None,
        via: RevokedVia | None = None,
        reason: str | None = None,
    ) -> Connection:
        """Revoke a live connection (by id, else by name) and every token it holds. ``via`` (where
        the owner did it) and ``reason`` (their words, if any) go into the audit event, which is
        where :meth:`revocations` finds why a connection was revoked."""
        live = self.connections(owner_id)
        match = [c for c in live if c.id == id_or_name] or [c for c in live if c.name == id_or_name]
        if not match:
            raise TokenNotFound(f"no live token {id_or_name!r}; `almanac token list` shows them")
        target, now = match[0], utcnow()
        with self._db.transaction():
            self._db.execute("UPDATE connections SET revoked_at = ? WHERE id = ?", (now, target.id))
            self._db.execute(
                "UPDATE tokens SET revoked_at = ? WHERE connection_id = ? AND revoked_at IS NULL",
                (now, target.id),
            )
            detail: dict[str, object] = {"name": target.name}
            if via is not None:
                detail["via"] = via
            if reason:
                detail["reason"] = reason
            self._audit("token.revoke", owner_id, target.workspace_id, target.id, remote, detail)
        return self.connection(target.id)

    def revocations(self, owner_id: str, connection_ids: Iterable[str]) -> dict[str, Revocation]:
        """Why each of these revoked connections was revoked, from its audit event (the newest)."""
        wanted = list(dict.fromkeys(connection_ids))
        if not wanted:
            return {}
        marks = ", ".join("?" for _ in wanted)
        rows = self._db.execute(
            "SELECT connection_id, kind, detail FROM audit_events WHERE owner_id = ? "
            f"AND kind IN ('token.revoke', 'oauth.refresh_reuse') AND connection_id IN ({marks}) ORDER BY id",
            (owner_id, *wanted),
        )
        found: dict[str, Revocation] = {}
        for connection_id, kind, detail in rows:
            parsed = json.loads(str(detail))
            via, reason = parsed.get("via"), parsed.get("reason")
            found[str(connection_id)] = Revocation(
                kind=str(kind),
                via=None if via is None else str(via),
                reason=None if reason is None else str(reason),
            )
        return found

    def authenticate(self, secret: str, *, now: str | None = None) -> Principal | None:
        """The principal a bearer token speaks for, or None if it is unknown, expired (at ``now``,
        default the current time) or revoked."""
        if not tokens.looks_like_token(secret):
            return None
        row = self._db.execute(
            """
            SELECT c.owner_id, c.workspace_id, c.id, c.name, c.read_only, c.scope, c.resource,
                   c.reads_unscoped
            FROM tokens t
            JOIN connections c ON c.id = t.connection_id
            JOIN owners o ON o.id = c.owner_id
            WHERE t.token_hash = ? AND t.kind IN ('pat', 'access')
              AND t.revoked_at IS NULL AND c.revoked_at IS NULL AND o.disabled_at IS NULL
              AND (t.expires_at IS NULL OR t.expires_at > ?)
            """,
            (tokens.hash_token(secret), now or utcnow()),
        ).fetchone()
        if row is None:
            return None
        return Principal(
            owner_id=str(row[0]),
            workspace_id=str(row[1]),
            connection_id=str(row[2]),
            connection_name=str(row[3]),
            read_only=bool(row[4]),
            scope=None if row[5] is None else str(row[5]),
            resource=None if row[6] is None else str(row[6]),
            reads_unscoped=row[5] is not None and bool(row[7]),
        )

    def touch(self, connection_id: str) -> None:
        self._write("UPDATE connections SET last_used_at = ? WHERE id = ?", (utcnow(), connection_id))

    # -- audit --------------------------------------------------------------------------------

    def _audit(
        self,
        kind: str,
        owner_id: str | None,
        workspace_id: str | None,
        connection_id: str | None,
        remote: str | None,
        detail: dict[str, object],
    ) -> None:
        self._db.execute(
            "INSERT INTO audit_events (at, kind, owner_id, workspace_id, connection_id, remote, detail) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                utcnow(),
                kind,
                owner_id,
                workspace_id,
                connection_id,
                remote,
                json.dumps(detail, sort_keys=True),
            ),
        )

    def audit(
        self,
        kind: str,
        *,
        owner_id: str | None = None,
        workspace_id: str | None = None,
        connection_id: str | None = None,
        remote: str | None = None,
        detail: dict[str, object] | None = None,
    ) -> None:
        with self._db.transaction():
            self._audit(kind, owner_id, workspace_id, connection_id, remote, detail or {})

    def audit_events(self, *, owner_id: str | None = None, limit: int = 100) -> list[AuditEvent]:
        sql = "SELECT id, at, kind, owner_id, workspace_id, connection_id, remote, detail FROM audit_events"
        params: tuple[object, ...] = ()
        if owner_id is not None:
            sql, params = sql + " WHERE owner_id = ?", (owner_id,)
        rows = self._db.execute(sql + " ORDER BY id DESC LIMIT ?", (*params, limit))
        return [
            AuditEvent(
                id=int(r[0]),
                at=str(r[1]),
                kind=str(r[2]),
                owner_id=None if r[3] is None else str(r[3]),
                workspace_id=None if r[4] is None else str(r[4]),
                connection_id=None if r[5] is None else str(r[5]),
                remote=None if r[6] is None else str(r[6]),
                detail=json.loads(str(r[7])),
            )
            for r in rows
        ]
