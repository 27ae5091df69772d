"""The control plane's account queries (``gw:signin``): browser sessions, login failures, invite
codes and upstream OpenID Connect identities. Every method is one short transaction and the only
SQL about accounts lives here.
"""

from __future__ import annotations

import secrets

from gateway.control.audit import Audit
from gateway.control.clock import utc_in, utcnow
from gateway.control.db import Database
from gateway.control.owners import Owners
from gateway.control.records import Owner, Session
from gateway.control.tokens import hash_token
from gateway.errors import InviteInvalid, OwnerNotFound


def hash_secret(secret: str) -> str:
    """How a one-time secret (a session, an invite, a reset link) is stored: as a token is (its
    SHA-256, in hex)."""
    return hash_token(secret)


def account_key(email: str) -> str:
    """The throttling key (``login_failures.key``) of failed sign-ins to one account."""
    return "account:" + email.strip().lower()


_SESSION_SELECT = """
SELECT s.id, s.owner_id, o.email, s.csrf, s.created_at, s.expires_at
FROM sessions s JOIN owners o ON o.id = s.owner_id
"""


def _session(row: tuple[object, ...]) -> Session:
    return Session(str(row[0]), str(row[1]), str(row[2]), str(row[3]), str(row[4]), str(row[5]))


class Accounts:
    def __init__(self, db: Database, audit: Audit, owners: Owners) -> None:
        self._db, self._audit, self._owners = db, audit, owners

    # -- sessions -----------------------------------------------------------------------------

    def create_session(
        self,
        owner_id: str,
        *,
        max_age: float,
        remote: str | None,
        user_agent: str | None,
        method: str,
    ) -> tuple[Session, str]:
        """A new session for ``owner_id`` (a sign-in: audited as ``signin.success``); returns it and
        the cookie secret, which is never stored."""
        secret = secrets.token_urlsafe(32)
        session_id, csrf, now = f"ses_{secrets.token_hex(8)}", secrets.token_urlsafe(32), utcnow()
        expires = utc_in(max_age)
        with self._db.transaction():
            self._db.execute(
                "INSERT INTO sessions (id, owner_id, token_hash, csrf, created_at, expires_at, "
                "last_seen_at, remote, user_agent) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (session_id, owner_id, hash_secret(secret), csrf, now, expires, now, remote, user_agent),
            )
            self._audit(
                "signin.success", owner_id, None, None, remote, {"session": session_id, "method": method}
            )
        row = self._db.execute(_SESSION_SELECT + " WHERE s.id = ?", (session_id,)).fetchone()
        assert row is not None
        return _session(row), secret

    def session_by_secret(self, secret: str) -> Session | None:
        """The live session a cookie names, or None (unknown, ended, expired, or owner disabled)."""
        row = self._db.execute(
            _SESSION_SELECT + " WHERE s.token_hash = ? AND s.ended_at IS NULL AND s.expires_at > ? "
            "AND o.disabled_at IS NULL",
            (hash_secret(secret), utcnow()),
        ).fetchone()
        return None if row is None else _session(row)

    def end_session(self, session: Session, *, remote: str | None) -> None:
        """Sign out: the session stops working at once (audited as ``signout``)."""
        with self._db.transaction():
            self._db.execute(
                "UPDATE sessions SET ended_at = ? WHERE id = ? AND ended_at IS NULL",
                (utcnow(), session.session_id),
            )
            self._audit("signout", session.owner_id, None, None, remote, {"session": session.session_id})

    # -- login throttling ---------------------------------------------------------------------

    def login_failures(self, key: str, *, window: float) -> int:
        """How many failed sign-ins ``key`` has had in the last ``window`` seconds."""
        row = self._db.execute(
            "SELECT count(*) FROM login_failures WHERE key = ? AND at > ?", (key, utc_in(-window))
        ).fetchone()
        return int(row[0]) if row else 0

    def record_login_failure(
        self,
        keys: tuple[str, ...],
        *,
        owner_id: str | None,
        remote: str | None,
        detail: dict[str, object],
    ) -> None:
        """A failed sign-in: one row per throttling key, and a ``signin.failure`` audit event."""
        now = utcnow()
        with self._db.transaction():
            for key in keys:
                self._db.execute("INSERT INTO login_failures (key, at) VALUES (?, ?)", (key, now))
            self._audit("signin.failure", owner_id, None, None, remote, detail)

    def signed_in_from(self, owner_id: str, remote: str | None, *, within: float) -> bool:
        """Whether the owner started a session from ``remote`` in the last ``within`` seconds."""
        if not remote:
            return False
        row = self._db.execute(
            "SELECT 1 FROM sessions WHERE owner_id = ? AND remote = ? AND created_at > ? LIMIT 1",
            (owner_id, remote, utc_in(-within)),
        ).fetchone()
        return row is not None

    def forget_login_failures(self, *, older_than: float) -> None:
        """Drop failures older than ``older_than`` seconds: they no longer count against anyone."""
        with self._db.transaction():
            self._db.execute("DELETE FROM login_failures WHERE at < ?", (utc_in(-older_than),))

    def clear_login_failures(self, key: str) -> None:
        with self._db.transaction():
            self._db.execute("DELETE FROM login_failures WHERE key = ?", (key,))

    # -- sign-up and invites ------------------------------------------------------------------

    def create_invite(self, note: str | None = None) -> str:
        """A single-use invite code (returned once; only its hash is stored)."""
        code = secrets.token_urlsafe(12)
        invite_id = f"inv_{secrets.token_hex(8)}"
        with self._db.transaction():
            self._db.execute(
                "INSERT INTO invites (id, code_hash, note, created_at) VALUES (?, ?, ?, ?)",
                (invite_id, hash_secret(code), note, utcnow()),
            )
            self._audit("invite.create", None, None, None, None, {"invite": invite_id, "note": note})
        return code

    def sign_up(
        self,
        email: str,
        password_hash: str | None,
        *,
        invite: str | None,
        remote: str | None,
        method: str,
    ) -> Owner:
        """A new owner (with the ``default`` workspace) in one transaction; with ``invite`` the code
        must be unused and is consumed. Audited as ``signup``."""
        with self._db.transaction():
            invite_id: str | None = None
            if invite is not None:
                row = self._db.execute(
                    "SELECT id FROM invites WHERE code_hash = ? AND used_at IS NULL", (hash_secret(invite),)
                ).fetchone()
                if row is None:
                    raise InviteInvalid("that invite code is unknown or already used; ask for a new one")
                invite_id = str(row[0])
            owner, workspace = self._owners.create(email, password_hash)
            if invite_id is not None:
                spent = self._db.execute(
                    "UPDATE invites SET used_at = ?, used_by = ? WHERE id = ? AND used_at IS NULL",
                    (utcnow(), owner.id, invite_id),
                )
                if spent.rowcount != 1:  # used by a concurrent sign-up: undo this one
                    raise InviteInvalid("that invite code is unknown or already used; ask for a new one")
            self._audit(
                "signup", owner.id, workspace.id, None, remote, {"method": method, "invite": invite_id}
            )
        return owner

    # -- upstream OpenID Connect identities ---------------------------------------------------

    def owner_by_identity(self, issuer: str, subject: str) -> Owner:
        row = self._db.execute(
            "SELECT o.email FROM owner_identities i JOIN owners o ON o.id = i.owner_id "
            "WHERE i.issuer = ? AND i.subject = ? AND o.disabled_at IS NULL",
            (issuer, subject),
        ).fetchone()
        if row is None:
            raise OwnerNotFound(f"no owner is linked to {subject!r} at {issuer}")
        return self._owners.by_email(str(row[0]))

    def link_identity(self, issuer: str, subject: str, owner_id: str, email: str | None) -> None:
        with self._db.transaction():
            self._db.execute(
                "INSERT INTO owner_identities (issuer, subject, owner_id, email, created_at) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (issuer, subject, owner_id, email, utcnow()),
            )
            self._audit("identity.link", owner_id, None, None, None, {"issuer": issuer, "subject": subject})
