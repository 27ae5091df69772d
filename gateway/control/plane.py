"""What a group of control-plane queries needs from the :class:`~gateway.control.store.ControlPlane`
it is mixed into: the database and the audit writer; and what a caller that audits needs of it
(typing only)."""

from __future__ import annotations

from typing import Protocol

from gateway.control.db import Database


class AuditedPlane(Protocol):
    _db: Database

    def _audit(
        self,
        kind: str,
        owner_id: str | None,
        workspace_id: str | None,
        connection_id: str | None,
        remote: str | None,
        detail: dict[str, object],
    ) -> None: ...


class Audits(Protocol):
    """A control plane that writes audit events (``ControlPlane.audit``)."""

    def audit(
        self,
        kind: str,
        *,
        owner_id: str | None = None,
        workspace_id: str | None = None,
        connection_id: str | None = None,
        remote: str | None = None,
        detail: dict[str, object] | None = None,
    ) -> None: ...
