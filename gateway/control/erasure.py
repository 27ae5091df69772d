"""Erasing an owner's account (SPEC §5 ``life:delete``: "account erasure is self-serve and removes
everything"), the control plane's half.

It runs in two steps around the work only the gateway can do (stopping the owner's engines and
deleting their workspace folders):

1. :meth:`Erasure.lock_out_owner` — in one transaction the owner is disabled, every
   connection and token revoked and every session ended, so nothing they held works any more and
   no new call can start one of their engines. Refused (nothing changes) while one of their
   workspaces is being moved; and no move of a workspace of a locked-out owner begins
   (:meth:`~gateway.control.moves.Moves.begin`): both take the owner's row first, so
   one of the two always sees the other;
2. :meth:`Erasure.forget_owner` — every row about the owner is deleted (workspaces,
   connections, tokens, sessions, identities, pending OAuth codes), the owner's earlier audit
   events keep their kind and time but lose their details and address, and one ``account.erase``
   event remains, naming the erased owner only by its opaque id.
"""

from __future__ import annotations

from gateway.control.accounts import account_key
from gateway.control.audit import Audit
from gateway.control.clock import utcnow
from gateway.control.db import Database
from gateway.control.owners import Owners
from gateway.control.records import Workspace
from gateway.errors import MoveUnderWay, OwnerNotFound

_OWNED_TOKENS = "connection_id IN (SELECT id FROM connections WHERE owner_id = ?)"


class Erasure:
    def __init__(self, db: Database, audit: Audit, owners: Owners) -> None:
        self._db, self._audit, self._owners = db, audit, owners

    def lock_out_owner(self, owner_id: str, *, remote: str | None) -> list[Workspace]:
        """Disable the owner, revoke every connection and token, end every session (one transaction);
        returns the workspaces to erase. Audited as ``account.erase.begin``. Raises
        :class:`MoveUnderWay` (nothing changed) while one of the owner's workspaces is being moved."""
        now = utcnow()
        with self._db.transaction():
            row = self._db.execute("SELECT id FROM owners WHERE id = ?", (owner_id,)).fetchone()
            if row is None:
                raise OwnerNotFound(f"no owner {owner_id!r}")
            self._db.execute(
                "UPDATE owners SET disabled_at = ? WHERE id = ? AND disabled_at IS NULL", (now, owner_id)
            )
            moving = self._db.execute(
                "SELECT p.workspace_id, p.moving_to FROM placements p JOIN workspaces w "
                "ON w.id = p.workspace_id WHERE w.owner_id = ? AND p.moving_to IS NOT NULL",
                (owner_id,),
            ).fetchall()
            if moving:  # raising rolls the lock-out back: nothing changed
                workspace_id, target = moving[0]
                raise MoveUnderWay(
                    f"a move of workspace {workspace_id} to node {target!r} is under way; wait for it to "
                    "end (a move whose command stopped is called off within move_timeout) and erase the "
                    "account again; nothing was erased"
                )
            self._db.execute(
                "UPDATE connections SET revoked_at = ? WHERE owner_id = ? AND revoked_at IS NULL",
                (now, owner_id),
            )
            self._db.execute(
                f"UPDATE tokens SET revoked_at = ? WHERE {_OWNED_TOKENS} AND revoked_at IS NULL",
                (now, owner_id),
            )
            self._db.execute(
                "UPDATE sessions SET ended_at = ? WHERE owner_id = ? AND ended_at IS NULL", (now, owner_id)
            )
            workspaces = self._owners.workspaces(owner_id)
            self._audit("account.erase.begin", owner_id, None, None, remote, {"workspaces": len(workspaces)})
        return workspaces

    def owner_being_erased(self, email: str) -> tuple[str, list[Workspace]]:
        """The id and workspaces of the locked-out owner with ``email`` (an erase that began and did
        not finish), or :class:`OwnerNotFound` saying so."""
        row = self._db.execute(
            "SELECT id FROM owners WHERE lower(email) = lower(?) AND disabled_at IS NOT NULL",
            (email.strip(),),
        ).fetchone()
        if row is None:
            raise OwnerNotFound(
                f"no account being erased has email {email!r}: only an erase that began on the Account "
                "page and could not delete every file is finished here; nothing was changed"
            )
        return str(row[0]), self._owners.workspaces(str(row[0]))

    def being_erased(self, workspace_id: str) -> bool:
        """Whether the workspace's owner is locked out by an erase that has not finished."""
        row = self._db.execute(
            "SELECT 1 FROM workspaces w JOIN owners o ON o.id = w.owner_id "
            "WHERE w.id = ? AND o.disabled_at IS NOT NULL",
            (workspace_id,),
        ).fetchone()
        return row is not None

    def forget_owner(self, owner_id: str) -> dict[str, int]:
        """Delete every row about a locked-out owner; returns how many of each kind went. Audited as
        ``account.erase`` (the owner's id and the counts, nothing personal)."""
        with self._db.transaction():
            row = self._db.execute(
                "SELECT email FROM owners WHERE id = ? AND disabled_at IS NOT NULL", (owner_id,)
            ).fetchone()
            if row is None:
                raise OwnerNotFound(f"no locked-out owner {owner_id!r} (lock the owner out first)")
            email = str(row[0])
            gone: dict[str, int] = {}

            def delete(what: str, sql: str, params: tuple[object, ...]) -> None:
                gone[what] = self._db.execute(sql, params).rowcount

            delete("tokens", f"DELETE FROM tokens WHERE {_OWNED_TOKENS}", (owner_id,))
            delete("oauth_codes", "DELETE FROM oauth_codes WHERE owner_id = ?", (owner_id,))
            delete("connections", "DELETE FROM connections WHERE owner_id = ?", (owner_id,))
            delete("sessions", "DELETE FROM sessions WHERE owner_id = ?", (owner_id,))
            delete("identities", "DELETE FROM owner_identities WHERE owner_id = ?", (owner_id,))
            self._db.execute("DELETE FROM password_resets WHERE owner_id = ?", (owner_id,))
            delete(
                "placements",
                "DELETE FROM placements WHERE workspace_id IN (SELECT id FROM workspaces WHERE owner_id = ?)",
                (owner_id,),
            )
            self._db.execute(
                "DELETE FROM moves WHERE workspace_id IN (SELECT id FROM workspaces WHERE owner_id = ?)",
                (owner_id,),
            )
            delete("workspaces", "DELETE FROM workspaces WHERE owner_id = ?", (owner_id,))
            self._db.execute("UPDATE invites SET used_by = NULL WHERE used_by = ?", (owner_id,))
            mine = account_key(email)  # and the same email tried from each address ("<key>|address:…")
            self._db.execute(
                "DELETE FROM login_failures WHERE key = ? OR substr(key, 1, ?) = ?",
                (mine, len(mine) + 1, mine + "|"),
            )
            self._db.execute(
                "UPDATE audit_events SET detail = '{}', remote = NULL WHERE owner_id = ?", (owner_id,)
            )
            self._db.execute("DELETE FROM owners WHERE id = ?", (owner_id,))
            self._audit("account.erase", owner_id, None, None, None, dict(gone))
        return gone
