"""Connections and their tokens (``gw:pat``): personal access tokens, listing and revoking any
connection (a PAT or an OAuth grant alike), and authenticating a bearer token. The OAuth side of
connections (codes, access and refresh tokens) is :mod:`gateway.control.oauth`."""

from __future__ import annotations

import json
from collections.abc import Iterable

from gateway.control import tokens
from gateway.control.audit import Audit
from gateway.control.clock import utcnow
from gateway.control.db import ConstraintViolation, Database
from gateway.control.records import Connection, Principal, Revocation, RevokedVia
from gateway.errors import AlreadyExists, TokenNotFound

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


class Connections:
    def __init__(self, db: Database, audit: Audit) -> None:
        self._db, self._audit = db, audit

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

    def of_owner(self, owner_id: str, *, include_revoked: bool = False) -> list[Connection]:
        """The owner's connections (live ones only unless ``include_revoked``), oldest first."""
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
        live = self.of_owner(owner_id)
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
        with self._db.transaction():
            self._db.execute(
                "UPDATE connections SET last_used_at = ? WHERE id = ?", (utcnow(), connection_id)
            )
