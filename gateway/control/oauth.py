"""The control plane's OAuth tables (``gw:oauth``): clients, pending consents, authorization codes,
and the access/refresh tokens of OAuth connections. The only SQL of the authorization server.

Every method takes ``now`` (epoch seconds) from the caller, so the server's clock can be injected.
Codes and tokens are stored as sha256 hashes only. An OAuth grant is a *connection* of kind
``oauth`` — the same model as a personal access token — so listing and revoking treat both alike.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from gateway.control import tokens
from gateway.control.audit import Audit
from gateway.control.clock import epoch, iso
from gateway.control.connections import Connections
from gateway.control.db import Database
from gateway.control.records import (
    AccessRecord,
    ClientRecord,
    CodeRecord,
    ConsentChoice,
    IssuedTokens,
    RefreshRecord,
    TokenLifetimes,
)
from gateway.errors import InvalidGrant


class OAuth:
    def __init__(self, db: Database, audit: Audit, connections: Connections) -> None:
        self._db, self._audit, self._connections = db, audit, connections

    # -- clients ------------------------------------------------------------------------------

    def save_client(
        self, client_id: str, kind: str, metadata: dict[str, Any], *, now: float, expires_at: float | None
    ) -> None:
        with self._db.transaction():
            self._db.execute(
                "INSERT INTO oauth_clients (client_id, kind, metadata, created_at, expires_at) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (client_id) DO UPDATE SET metadata = excluded.metadata, "
                "expires_at = excluded.expires_at",
                (
                    client_id,
                    kind,
                    json.dumps(metadata),
                    iso(now),
                    None if expires_at is None else iso(expires_at),
                ),
            )
            if kind == "dcr":
                self._audit("oauth.register", None, None, None, None, {"client_id": client_id})

    def client(self, client_id: str) -> ClientRecord | None:
        row = self._db.execute(
            "SELECT client_id, kind, metadata, expires_at FROM oauth_clients WHERE client_id = ?",
            (client_id,),
        ).fetchone()
        if row is None:
            return None
        expires = None if row[3] is None else epoch(str(row[3]))
        return ClientRecord(str(row[0]), str(row[1]), json.loads(str(row[2])), expires)

    def collect_garbage(
        self, *, now: float, unused_client_age: float, max_unused_clients: int | None = None
    ) -> int:
        """Forget registered clients never used for ``unused_client_age`` seconds (and, past
        ``max_unused_clients`` unused ones, the oldest of those), expired consent requests, and
        expired codes never exchanged. Returns how many clients went."""
        with self._db.transaction():
            gone = self._db.execute(
                "DELETE FROM oauth_clients WHERE kind = 'dcr' AND last_used_at IS NULL AND created_at < ?",
                (iso(now - unused_client_age),),
            ).rowcount
            if max_unused_clients is not None:
                gone += self._db.execute(
                    "DELETE FROM oauth_clients WHERE client_id IN (SELECT client_id FROM oauth_clients "
                    "WHERE kind = 'dcr' AND last_used_at IS NULL "
                    "ORDER BY created_at DESC, client_id DESC LIMIT 1000000000 OFFSET ?)",
                    (max(0, max_unused_clients),),
                ).rowcount
            self._db.execute(
                "DELETE FROM oauth_clients WHERE kind = 'cimd' AND expires_at < ?",
                (iso(now - unused_client_age),),
            )
            self._db.execute("DELETE FROM oauth_requests WHERE expires_at < ?", (iso(now),))
            self._db.execute(
                "DELETE FROM oauth_codes WHERE used_at IS NULL AND expires_at < ?", (iso(now - 3600),)
            )
        return gone

    # -- consent requests ---------------------------------------------------------------------

    def save_request(self, client_id: str, params: dict[str, Any], *, now: float, ttl: float) -> str:
        request_id = secrets.token_urlsafe(24)
        self._db.execute(
            "INSERT INTO oauth_requests (id, client_id, params, created_at, expires_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (request_id, client_id, json.dumps(params), iso(now), iso(now + ttl)),
        )
        return request_id

    def pending_request(self, request_id: str, *, now: float) -> tuple[str, dict[str, Any]] | None:
        row = self._db.execute(
            "SELECT client_id, params FROM oauth_requests WHERE id = ? AND expires_at > ?",
            (request_id, iso(now)),
        ).fetchone()
        return None if row is None else (str(row[0]), json.loads(str(row[1])))

    def drop_request(self, request_id: str) -> None:
        self._db.execute("DELETE FROM oauth_requests WHERE id = ?", (request_id,))

    # -- codes ---------------------------------------------------------------------------------

    def save_code(
        self,
        *,
        client_id: str,
        choice: ConsentChoice,
        redirect_uri: str,
        redirect_explicit: bool,
        code_challenge: str,
        resource: str,
        scopes: tuple[str, ...],
        now: float,
        ttl: float,
        remote: str | None,
    ) -> str:
        """Record the owner's grant and return a fresh authorization code (shown once)."""
        code = secrets.token_urlsafe(32)
        with self._db.transaction():
            self._db.execute(
                "INSERT INTO oauth_codes (code_hash, client_id, owner_id, workspace_id, name, read_only, "
                "scope, redirect_uri, redirect_explicit, code_challenge, resource, scopes, created_at, "
                "expires_at, reads_unscoped) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    tokens.hash_token(code),
                    client_id,
                    choice.owner_id,
                    choice.workspace_id,
                    choice.name,
                    int(choice.read_only),
                    choice.scope,
                    redirect_uri,
                    int(redirect_explicit),
                    code_challenge,
                    resource,
                    " ".join(scopes),
                    iso(now),
                    iso(now + ttl),
                    int(choice.reads_unscoped and choice.scope is not None),
                ),
            )
            self._db.execute(
                "UPDATE oauth_clients SET last_used_at = ? WHERE client_id = ?", (iso(now), client_id)
            )
            detail: dict[str, object] = {
                "client_id": client_id,
                "name": choice.name,
                "read_only": choice.read_only,
                "scope": choice.scope,
                "redirect_uri": redirect_uri,
            }
            if choice.scope is not None:
                detail["reads_unscoped"] = choice.reads_unscoped
            self._audit("oauth.grant", choice.owner_id, choice.workspace_id, None, remote, detail)
        return code

    def code(self, code: str) -> CodeRecord | None:
        row = self._db.execute(
            "SELECT client_id, owner_id, workspace_id, name, read_only, scope, redirect_uri, "
            "redirect_explicit, code_challenge, resource, scopes, expires_at, used_at, reads_unscoped "
            "FROM oauth_codes WHERE code_hash = ?",
            (tokens.hash_token(code),),
        ).fetchone()
        if row is None:
            return None
        choice = ConsentChoice(
            str(row[1]), str(row[2]), str(row[3]), bool(row[4]), _opt(row[5]), bool(row[13])
        )
        return CodeRecord(
            client_id=str(row[0]),
            choice=choice,
            redirect_uri=str(row[6]),
            redirect_explicit=bool(row[7]),
            code_challenge=str(row[8]),
            resource=str(row[9]),
            scopes=tuple(str(row[10]).split()),
            expires_at=epoch(str(row[11])),
            used=row[12] is not None,
        )

    def spend_code(self, code: str, *, now: float, reason: str, remote: str | None = None) -> bool:
        """Use ``code`` up without issuing anything (a wrong ``code_verifier`` was sent with it:
        RFC 6749 §10.5, a code is tried once). Whether it was still unused."""
        with self._db.transaction():
            row = self._db.execute(
                "SELECT client_id, owner_id, workspace_id FROM oauth_codes "
                "WHERE code_hash = ? AND used_at IS NULL",
                (tokens.hash_token(code),),
            ).fetchone()
            if row is None:
                return False
            self._db.execute(
                "UPDATE oauth_codes SET used_at = ? WHERE code_hash = ? AND used_at IS NULL",
                (iso(now), tokens.hash_token(code)),
            )
            detail: dict[str, object] = {"client_id": str(row[0]), "reason": reason}
            self._audit("oauth.code_spent", str(row[1]), str(row[2]), None, remote, detail)
        return True

    def exchange_code(
        self, code: str, *, now: float, lifetimes: TokenLifetimes, remote: str | None = None
    ) -> IssuedTokens:
        """Spend ``code``: create its named connection and issue the first access and refresh tokens.
        A code already spent is refused, and the connection it created is revoked (RFC 6749 §4.1.2)."""
        code_hash = tokens.hash_token(code)
        with self._db.transaction():
            row = self._db.execute(
                "SELECT client_id, owner_id, workspace_id, name, read_only, scope, resource, used_at, "
                "connection_id, reads_unscoped FROM oauth_codes WHERE code_hash = ?",
                (code_hash,),
            ).fetchone()
            if row is None:
                raise InvalidGrant("authorization code does not exist")
            if row[7] is not None:
                if row[8] is not None:  # committed before refusing (the raise below is outside)
                    self._revoke_connection(str(row[8]), now, "authorization code reused", remote)
                reused = True
            else:
                reused = False
                issued = self._exchange(code_hash, row, now, lifetimes, remote)
        if reused:
            if row[8] is None:
                raise InvalidGrant("authorization code was already used up; start the sign-in again")
            raise InvalidGrant(
                "authorization code was already used; the connection it created has been revoked"
            )
        return issued

    def _exchange(
        self, code_hash: str, row: tuple[Any, ...], now: float, lifetimes: TokenLifetimes, remote: str | None
    ) -> IssuedTokens:
        client_id, owner_id, workspace_id = str(row[0]), str(row[1]), str(row[2])
        # Spend the code first: its row stays locked until commit, so a gateway exchanging the same
        # code at the same moment waits here and then finds it spent.
        spent = self._db.execute(
            "UPDATE oauth_codes SET used_at = ? WHERE code_hash = ? AND used_at IS NULL",
            (iso(now), code_hash),
        )
        if spent.rowcount != 1:
            raise InvalidGrant("authorization code was already used")
        name = self._free_name(owner_id, str(row[3]))
        connection_id = tokens.new_id("con")
        self._db.execute(
            "INSERT INTO connections (id, owner_id, workspace_id, name, kind, client_id, read_only, scope, "
            "created_at, resource, reads_unscoped) VALUES (?, ?, ?, ?, 'oauth', ?, ?, ?, ?, ?, ?)",
            (
                connection_id,
                owner_id,
                workspace_id,
                name,
                client_id,
                row[4],
                row[5],
                iso(now),
                row[6],
                row[9],
            ),
        )
        self._db.execute(
            "UPDATE oauth_codes SET connection_id = ? WHERE code_hash = ?", (connection_id, code_hash)
        )
        issued = self._issue(connection_id, tokens.new_id("fam"), now, lifetimes)
        detail: dict[str, object] = {"client_id": client_id, "name": name, "grant": "authorization_code"}
        self._audit("oauth.token_issue", owner_id, workspace_id, connection_id, remote, detail)
        return issued

    def _free_name(self, owner_id: str, name: str) -> str:
        live = {
            str(r[0])
            for r in self._db.execute(
                "SELECT name FROM connections WHERE owner_id = ? AND revoked_at IS NULL", (owner_id,)
            )
        }
        candidate, n = name, 2
        while candidate in live:
            candidate, n = f"{name} ({n})", n + 1
        return candidate

    def _issue(
        self, connection_id: str, family_id: str, now: float, lifetimes: TokenLifetimes
    ) -> IssuedTokens:
        access, refresh = tokens.mint("access"), tokens.mint("refresh")
        insert = (
            "INSERT INTO tokens (id, connection_id, kind, token_hash, prefix, family_id, created_at, "
            "expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
        )
        for kind, minted, ttl in (
            ("access", access, lifetimes.access),
            ("refresh", refresh, lifetimes.refresh),
        ):
            token_id, expires = tokens.new_id("tok"), iso(now + ttl)
            row = (
                token_id,
                connection_id,
                kind,
                minted.token_hash,
                minted.prefix,
                family_id,
                iso(now),
                expires,
            )
            self._db.execute(insert, row)
        return IssuedTokens(access.secret, refresh.secret, int(lifetimes.access), connection_id)

    # -- refresh and access tokens -------------------------------------------------------------

    def refresh_token(self, secret: str) -> RefreshRecord | None:
        row = self._db.execute(
            "SELECT t.connection_id, c.client_id, c.resource, t.expires_at, t.rotated_at, "
            "t.revoked_at IS NULL AND c.revoked_at IS NULL "
            "FROM tokens t JOIN connections c ON c.id = t.connection_id "
            "WHERE t.token_hash = ? AND t.kind = 'refresh'",
            (tokens.hash_token(secret),),
        ).fetchone()
        if row is None:
            return None
        expires = None if row[3] is None else epoch(str(row[3]))
        return RefreshRecord(str(row[0]), str(row[1]), str(row[2]), expires, row[4] is not None, bool(row[5]))

    def rotate_refresh(
        self, secret: str, *, now: float, lifetimes: TokenLifetimes, remote: str | None = None
    ) -> IssuedTokens:
        """Spend a refresh token for a new pair. Presenting one that was already rotated is a sign it
        leaked: the whole family (the connection and every token it holds) is revoked and audited."""
        token_hash = tokens.hash_token(secret)
        with self._db.transaction():
            row = self._db.execute(
                "SELECT t.id, t.connection_id, t.family_id, t.rotated_at, t.revoked_at, t.expires_at, "
                "c.revoked_at FROM tokens t JOIN connections c ON c.id = t.connection_id "
                "WHERE t.token_hash = ? AND t.kind = 'refresh'",
                (token_hash,),
            ).fetchone()
            if row is None:
                raise InvalidGrant("refresh token does not exist")
            token_id, connection_id, family_id = str(row[0]), str(row[1]), str(row[2])
            reused = row[3] is not None
            if reused:  # committed: the refusal is raised after this transaction
                self._revoke_connection(connection_id, now, "refresh token reused", remote, reuse=True)
            elif row[4] is not None or row[6] is not None:
                raise InvalidGrant("refresh token was revoked")
            elif row[5] is not None and epoch(str(row[5])) <= now:
                raise InvalidGrant("refresh token has expired; sign in again")
            else:
                spent = self._db.execute(
                    "UPDATE tokens SET rotated_at = ? WHERE id = ? AND rotated_at IS NULL",
                    (iso(now), token_id),
                )
                if spent.rowcount != 1:  # another gateway rotated it between our read and this write
                    raise InvalidGrant("refresh token was already used")
                issued = self._issue(connection_id, family_id, now, lifetimes)
                con = self._connections.connection(connection_id)
                detail: dict[str, object] = {"grant": "refresh_token", "name": con.name}
                self._audit(
                    "oauth.token_issue", con.owner_id, con.workspace_id, connection_id, remote, detail
                )
        if reused:
            raise InvalidGrant(
                "refresh token was already used; every token of this connection has been revoked — "
                "sign in again"
            )
        return issued

    def access_token(self, secret: str, *, now: float) -> AccessRecord | None:
        row = self._db.execute(
            "SELECT t.connection_id, c.client_id, c.resource, t.expires_at "
            "FROM tokens t JOIN connections c ON c.id = t.connection_id "
            "WHERE t.token_hash = ? AND t.kind = 'access' AND t.revoked_at IS NULL AND c.revoked_at IS NULL "
            "AND t.expires_at > ?",
            (tokens.hash_token(secret), iso(now)),
        ).fetchone()
        if row is None:
            return None
        return AccessRecord(str(row[0]), str(row[1]), str(row[2]), epoch(str(row[3])))

    def revoke_token(self, secret: str, *, now: float, remote: str | None = None) -> None:
        """RFC 7009: a refresh token ends its whole grant (the connection); an access token only
        itself."""
        row = self._db.execute(
            "SELECT id, connection_id, kind FROM tokens "
            "WHERE token_hash = ? AND kind IN ('access', 'refresh')",
            (tokens.hash_token(secret),),
        ).fetchone()
        if row is None:
            return
        with self._db.transaction():
            if str(row[2]) == "refresh":
                self._revoke_connection(str(row[1]), now, "revoked by the client", remote)
            else:
                self._db.execute(
                    "UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", (iso(now), row[0])
                )

    def _revoke_connection(
        self, connection_id: str, now: float, reason: str, remote: str | None, *, reuse: bool = False
    ) -> None:
        con = self._connections.connection(connection_id)
        self._db.execute(
            "UPDATE connections SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
            (iso(now), connection_id),
        )
        self._db.execute(
            "UPDATE tokens SET revoked_at = ? WHERE connection_id = ? AND revoked_at IS NULL",
            (iso(now), connection_id),
        )
        kind = "oauth.refresh_reuse" if reuse else "token.revoke"
        detail: dict[str, object] = {"name": con.name, "reason": reason}
        self._audit(kind, con.owner_id, con.workspace_id, connection_id, remote, detail)


def _opt(value: object) -> str | None:
    return None if value is None else str(value)
