"""Owners and their workspaces: the control plane's ``owners`` and ``workspaces`` rows (an owner's
password and browser sessions are :mod:`gateway.control.passwords` and
:mod:`gateway.control.accounts`; erasing an owner is :mod:`gateway.control.erasure`)."""

from __future__ import annotations

from gateway.control import tokens
from gateway.control.audit import Audit
from gateway.control.clock import utcnow
from gateway.control.db import ConstraintViolation, Database
from gateway.control.records import Owner, Workspace
from gateway.errors import AlreadyExists, OwnerNotFound, WorkspaceNotFound

#: The workspace every owner starts with.
DEFAULT_WORKSPACE = "default"


class Owners:
    def __init__(self, db: Database, audit: Audit) -> None:
        self._db, self._audit = db, audit

    def create(self, email: str, password_hash: str | None) -> tuple[Owner, Workspace]:
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

    def by_email(self, email: str) -> Owner:
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
