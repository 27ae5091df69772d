"""The audit log (``audit_events``): the one writer every control-plane repository records its
changes with, inside the transaction that makes them, and the owner-facing reads of it."""

from __future__ import annotations

import json
from typing import Protocol

from gateway.control.clock import utcnow
from gateway.control.db import Database
from gateway.control.records import AuditEvent


class Audit(Protocol):
    """Record one audit event inside the caller's transaction (:meth:`AuditLog.write`)."""

    def __call__(
        self,
        kind: str,
        owner_id: str | None,
        workspace_id: str | None,
        connection_id: str | None,
        remote: str | None,
        detail: dict[str, object],
    ) -> None: ...


class AuditLog:
    def __init__(self, db: Database) -> None:
        self._db = db

    def write(
        self,
        kind: str,
        owner_id: str | None,
        workspace_id: str | None,
        connection_id: str | None,
        remote: str | None,
        detail: dict[str, object],
    ) -> None:
        """One event, in the caller's transaction (it commits or rolls back with the change)."""
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

    def record(
        self,
        kind: str,
        *,
        owner_id: str | None = None,
        workspace_id: str | None = None,
        connection_id: str | None = None,
        remote: str | None = None,
        detail: dict[str, object] | None = None,
    ) -> None:
        """One event on its own (its own transaction): something the gateway did outside the
        control plane (an export, an import, a refusal)."""
        with self._db.transaction():
            self.write(kind, owner_id, workspace_id, connection_id, remote, detail or {})

    def events(self, *, owner_id: str | None = None, limit: int = 100) -> list[AuditEvent]:
        """The newest ``limit`` events (of ``owner_id`` only, when given), newest first."""
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
