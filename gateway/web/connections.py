"""``/connections``: every client that can reach the owner's memory, and revoking one.

A connection is a personal access token (kind ``pat``) or an OAuth grant (kind ``oauth``, made
when a client signed in through the consent page). The page lists the live ones with their
client, workspace, access, pinned scope (and whether it reads unscoped memories), creation and last
use, and the recently revoked ones below. Revoking (POST + CSRF) takes effect at once: every
token of the connection stops working on ``/mcp`` and the REST API with the next request. New
tokens are made on ``/tokens/new``.

:func:`rows` is pure (connections → what the table shows); the handlers are thin.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from gateway.auth.csrf import check_csrf
from gateway.auth.sessions import context, current, login_redirect, remote_of
from gateway.control.store import Connection
from gateway.errors import TokenNotFound
from gateway.web.render import render

KINDS = {"pat": "Token", "oauth": "OAuth"}  # a personal access token; a client that signed in
#: What a pinned connection reads, as the Pinned scope column says it (by ``reads_unscoped``).
READS = {False: "this scope only", True: "this scope and unscoped memories"}
#: How many revoked connections the page shows (newest first).
REVOKED_SHOWN = 20


@dataclass(frozen=True)
class Row:
    """One connection as the table shows it."""

    id: str
    name: str
    kind: str  # "Token" | "OAuth"
    client: str  # the OAuth client's name (or id); for a token its prefix
    workspace: str
    access: str  # "read-only" | "read-write"
    scope: str | None
    reads: str | None  # pinned: "this scope only" | "this scope and unscoped memories"
    created: str  # "2026-12-01 10:16" (UTC)
    created_iso: str
    last_used: str | None
    last_used_iso: str | None
    revoked: str | None


def minute(stamp: str | None) -> str | None:
    """``2026-12-01T10:16:05.123456Z`` → ``2026-12-01 10:16`` (the page's precision)."""
    return None if stamp is None else stamp[:16].replace("T", " ")


def row_of(c: Connection) -> Row:
    if c.kind == "oauth":
        client = c.client_name or c.client_id or "unknown client"
    else:
        client = f"{c.token_prefix}…" if c.token_prefix else "—"
    return Row(
        id=c.id,
        name=c.name,
        kind=KINDS.get(c.kind, c.kind),
        client=client,
        workspace=c.workspace_name,
        access="read-only" if c.read_only else "read-write",
        scope=c.scope,
        reads=None if c.scope is None else READS[c.reads_unscoped],
        created=minute(c.created_at) or "",
        created_iso=c.created_at,
        last_used=minute(c.last_used_at),
        last_used_iso=c.last_used_at,
        revoked=minute(c.revoked_at),
    )


def rows(connections: Iterable[Connection]) -> tuple[list[Row], list[Row]]:
    """(live, revoked): live ones oldest first; the :data:`REVOKED_SHOWN` newest revoked ones."""
    everything = list(connections)
    live = [row_of(c) for c in everything if c.revoked_at is None]
    gone = sorted((c for c in everything if c.revoked_at is not None), key=lambda c: c.revoked_at or "")
    return live, [row_of(c) for c in reversed(gone[-REVOKED_SHOWN:])]


def _page(request: Request, owner_id: str, *, status_code: int = 200, **notice: str | None) -> Response:
    store = context(request).store
    live, revoked = rows(store.connections(owner_id, include_revoked=True))
    return render(
        request,
        "connections.html",
        status_code=status_code,
        live=live,
        revoked=revoked,
        several_workspaces=len(store.workspaces(owner_id)) > 1,
        error=notice.get("error"),
        info=notice.get("info"),
    )


async def connections(request: Request) -> Response:
    session = current(request)
    if session is None:
        return login_redirect(request)
    info = None
    revoked_id = request.query_params.get("revoked")
    if revoked_id:
        found = context(request).store.connections(session.owner_id, include_revoked=True)
        name = next((c.name for c in found if c.id == revoked_id and c.revoked_at), None)
        if name is not None:
            info = f"Revoked {name!r}: its tokens no longer work."
    return _page(request, session.owner_id, info=info)


async def revoke(request: Request) -> Response:
    session = current(request)
    if session is None:
        return login_redirect(request)
    form = await request.form()
    await check_csrf(request, form)
    chosen = form.get("connection")
    store = context(request).store
    live = {c.id: c for c in store.connections(session.owner_id)}
    target = live.get(chosen) if isinstance(chosen, str) else None
    if target is None:
        error = TokenNotFound("that connection is not one of your live connections; reload the list")
        return _page(request, session.owner_id, status_code=error.status, error=error.message)
    store.revoke(session.owner_id, target.id, remote=remote_of(request))
    return RedirectResponse(f"/connections?revoked={target.id}", status_code=303)


def routes() -> list[BaseRoute]:
    return [
        Route("/connections", connections, methods=["GET"]),
        Route("/connections/revoke", revoke, methods=["POST"]),
    ]
