"""The control plane's password queries: setting an owner's password, and one-time reset links
(``gw:signin``). Every method is one short transaction, and the only SQL about passwords lives
here.

A reset link's secret is random (256 bits) and stored only as its sha256, so a copy of the database
cannot be turned into a working link. A link works once, until it expires, and only for an owner who
is not locked out; using it sets the password, voids the owner's other unused links and ends every
session the owner had (whoever signed in with the old password is signed out).
"""

from __future__ import annotations

import secrets

from gateway.control.accounts import hash_secret
from gateway.control.audit import Audit
from gateway.control.clock import utc_in, utcnow
from gateway.control.db import Database
from gateway.control.records import ResetLink
from gateway.errors import OwnerNotFound, ResetLinkInvalid

#: Refusal of a link that is unknown, spent or expired (the page says no more than this).
LINK_INVALID = (
    "this password-reset link is not valid: it was used already, it expired, or it was mistyped; "
    "ask the operator for a new one (`almanac owner reset-link EMAIL`)"
)


class Passwords:
    def __init__(self, db: Database, audit: Audit) -> None:
        self._db, self._audit = db, audit

    def set_password(self, owner_id: str, password_hash: str, *, via: str, remote: str | None = None) -> None:
        """Set an owner's password hash (audited as ``password.set``, with ``via`` saying how)."""
        with self._db.transaction():
            changed = self._db.execute(
                "UPDATE owners SET password_hash = ? WHERE id = ? AND disabled_at IS NULL",
                (password_hash, owner_id),
            ).rowcount
            if changed != 1:
                raise OwnerNotFound(f"no owner {owner_id!r} who can sign in")
            self._audit("password.set", owner_id, None, None, remote, {"via": via})

    def create_reset_link(self, owner_id: str, *, ttl: float) -> tuple[str, str]:
        """A new one-time reset link for ``owner_id``, valid ``ttl`` seconds: (secret, expires_at).
        The secret is returned once, here, and never stored (audited as ``password.reset_link``)."""
        secret, link_id, now, expires = (
            secrets.token_urlsafe(32),
            f"rst_{secrets.token_hex(8)}",
            utcnow(),
            utc_in(ttl),
        )
        with self._db.transaction():
            self._db.execute(
                "INSERT INTO password_resets (id, owner_id, token_hash, created_at, expires_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (link_id, owner_id, hash_secret(secret), now, expires),
            )
            self._audit(
                "password.reset_link", owner_id, None, None, None, {"link": link_id, "expires_at": expires}
            )
        return secret, expires

    def reset_link(self, secret: str) -> ResetLink | None:
        """The live link ``secret`` names, or None (unknown, used, expired, owner locked out)."""
        row = self._db.execute(
            "SELECT r.owner_id, o.email, r.expires_at "
            "FROM password_resets r JOIN owners o ON o.id = r.owner_id "
            "WHERE r.token_hash = ? AND r.used_at IS NULL AND r.expires_at > ? AND o.disabled_at IS NULL",
            (hash_secret(secret), utcnow()),
        ).fetchone()
        return None if row is None else ResetLink(str(row[0]), str(row[1]), str(row[2]))

    def refuse_reset_link(self, secret: str, *, remote: str | None) -> None:
        """Record a password sent with a link that is unknown, used or expired (``password.reset_refused``,
        naming the owner when the link was theirs)."""
        row = self._db.execute(
            "SELECT owner_id FROM password_resets WHERE token_hash = ?", (hash_secret(secret),)
        ).fetchone()
        with self._db.transaction():
            self._audit(
                "password.reset_refused", None if row is None else str(row[0]), None, None, remote, {}
            )

    def use_reset_link(self, secret: str, password_hash: str, *, remote: str | None) -> str:
        """Spend the link ``secret`` to set its owner's password; returns the owner's id. Refused
        (:class:`ResetLinkInvalid`, nothing changed) when the link is unknown, used or expired."""
        now = utcnow()
        with self._db.transaction():
            row = self._db.execute(
                "SELECT r.id, r.owner_id FROM password_resets r JOIN owners o ON o.id = r.owner_id "
                "WHERE r.token_hash = ? AND o.disabled_at IS NULL",
                (hash_secret(secret),),
            ).fetchone()
            # spend it first and only if still live: two uses at once cannot both succeed
            spent = 0
            if row is not None:
                spent = self._db.execute(
                    "UPDATE password_resets SET used_at = ? "
                    "WHERE id = ? AND used_at IS NULL AND expires_at > ?",
                    (now, str(row[0]), now),
                ).rowcount
            if row is None or spent != 1:
                owner_id = None if row is None else str(row[1])
                self._audit("password.reset_refused", owner_id, None, None, remote, {})
                refused = True
            else:
                refused = False
                link_id, owner_id = str(row[0]), str(row[1])
                self._db.execute(
                    "UPDATE owners SET password_hash = ? WHERE id = ?", (password_hash, owner_id)
                )
                self._db.execute(
                    "UPDATE password_resets SET used_at = ? WHERE owner_id = ? AND used_at IS NULL",
                    (now, owner_id),
                )
                self._db.execute(
                    "UPDATE sessions SET ended_at = ? WHERE owner_id = ? AND ended_at IS NULL",
                    (now, owner_id),
                )
                self._audit("password.reset", owner_id, None, None, remote, {"link": link_id})
        if refused:  # raised after the commit, so the refusal stays in the audit log
            raise ResetLinkInvalid(LINK_INVALID)
        assert owner_id is not None
        return owner_id
