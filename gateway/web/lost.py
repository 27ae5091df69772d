"""What an owner sees of a workspace whose node was declared lost (``run:scale-out``):
on the home page, a mark on the workspace ("Lost", "Being restored"); on its pages, instead of the
generic refusal, a page that says what happened and what to do — contact the operator, who
restores it from a backup or from the owner's export (deploy/SCALING.md, "A node lost for good")."""

from __future__ import annotations

import math

from starlette.requests import Request
from starlette.responses import Response

from gateway.cluster.placement import owner_condition
from gateway.control.records import Workspace
from gateway.control.store import ControlPlane
from gateway.errors import WorkspaceLost, WorkspaceRestoring
from gateway.web.render import render


def conditions(store: ControlPlane, workspaces: list[Workspace]) -> dict[str, str]:
    """``{workspace id: "lost" | "restoring"}`` for the owner's workspaces on a node declared lost
    (none asked for unless some node is); a restore's deadline judged by the database's clock."""
    nodes = store.nodes.all()
    if not any(n.lost for n in nodes):
        return {}
    now = store.database_time()
    found = {ws.id: owner_condition(store.nodes.placement(ws.id), nodes, now=now) for ws in workspaces}
    return {k: v for k, v in found.items() if v is not None}


def lost_page(request: Request, exc: WorkspaceLost | WorkspaceRestoring) -> Response:
    """410 (lost) or 503 + ``Retry-After`` (being restored), as a page for the owner."""
    restoring = isinstance(exc, WorkspaceRestoring)
    response = render(
        request,
        "workspace_lost.html",
        status_code=exc.status,
        title="This workspace is being restored" if restoring else "This workspace's server was lost",
        restoring=restoring,
        wait=f"try again in {max(1, math.ceil(exc.retry_after))} s",
    )
    response.headers.update(exc.headers())
    return response
