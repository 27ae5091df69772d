"""``/connections``: every client that can reach the owner's memory, and revoking one.

A connection is a personal access token (kind ``pat``) or an OAuth grant (kind ``oauth``, made
when a client signed in through the consent page). The page lists the live ones with their
client, workspace, access, pinned scope (and whether it reads unscoped memories), creation and last
use, and the recently revoked ones below with when and why each was revoked. Revoking is confirmed
on a page of its own (``GET /connections/revoke?connection=…``, where the owner may say why); its
form (POST + CSRF) takes effect at once: every token of the connection stops working on ``/mcp``
and the REST API with the next request. New tokens are made on ``/tokens/new``.

:func:`rows` and :func:`why` are pure (connections → what the tables show); the handlers are thin.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from gateway.auth.csrf import check_csrf
from gateway.auth.sessions import context, current, login_redirect, remote_of
from gateway.control.records import Connection, Revocation
from gateway.errors import TokenNotFound
from gateway.web.render import render

KINDS = {"pat": "Token", "oauth": "OAuth"}  # a personal access token; a client that signed in
#: What a pinned connection reads, as the Pinned scope column says it (by ``reads_unscoped``).
READS = {False: "this scope only", True: "this scope and unscoped memories"}
#: How many revoked connections the page shows (newest first).
REVOKED_SHOWN = 20
#: The longest reason an owner may give for revoking.
REASON_MAX = 500


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
    why: str | None = None  # for a revoked one: why, in words (see :func:`why`)


def why(revocation: Revocation | None) -> str:
    """Why a connection was revoked, as the Recently revoked table says it."""
    if revocation is None:
        return "No reason recorded."
    if revocation.kind == "oauth.refresh_reuse":
        return (
            "An old refresh token was used again, which can mean it was copied; "
            "the gateway revoked the whole sign-in."
        )
    where = {
        "page": "You revoked it on this page",
        "cli": "Revoked on the server with almanac token revoke",
        "api": "Revoked through the REST API",
    }.get(revocation.via or "")
    if where is None:  # revoked by the gateway or the client, which say why themselves
        said = revocation.reason or "no reason recorded"
        return said[:1].upper() + said[1:] + "."
    return f"{where}: “{revocation.reason}”" if revocation.reason else where + "."


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


def rows(
    connections: Iterable[Connection], revocations: Mapping[str, Revocation] | None = None
) -> tuple[list[Row], list[Row]]:
    """(live, revoked): live ones oldest first; the :data:`REVOKED_SHOWN` newest revoked ones,
    each with why it was revoked (from ``revocations``, by connection id)."""
    everything = list(connections)
    live = [row_of(c) for c in everything if c.revoked_at is None]
    gone = sorted((c for c in everything if c.revoked_at is not None), key=lambda c: c.revoked_at or "")
    found = revocations or {}
    shown = reversed(gone[-REVOKED_SHOWN:])
    return live, [replace(row_of(c), why=why(found.get(c.id))) for c in shown]


def revoked_ids(connections: Iterable[Connection]) -> list[str]:
    return [c.id for c in connections if c.revoked_at is not None]


def _page(request: Request, owner_id: str, *, status_code: int = 200, **notice: str | None) -> Response:
    store = context(request).store
    everything = store.connections.of_owner(owner_id, include_revoked=True)
    live, revoked = rows(everything, store.connections.revocations(owner_id, revoked_ids(everything)))
    return render(
        request,
        "connections.html",
        status_code=status_code,
        live=live,
        revoked=revoked,
        several_workspaces=len(store.owners.workspaces(owner_id)) > 1,
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
        found = context(request).store.connections.of_owner(session.owner_id, include_revoked=True)
        name = next((c.name for c in found if c.id == revoked_id and c.revoked_at), None)
        if name is not None:
            info = f"Revoked {name!r}: its tokens no longer work."
    return _page(request, session.owner_id, info=info)


def _live(request: Request, owner_id: str, chosen: object) -> Connection | None:
    live = {c.id: c for c in context(request).store.connections.of_owner(owner_id)}
    return live.get(chosen) if isinstance(chosen, str) else None


def _not_live(request: Request, owner_id: str) -> Response:
    error = TokenNotFound("that connection is not one of your live connections; reload the list")
    return _page(request, owner_id, status_code=error.status, error=error.message)


async def confirm(request: Request) -> Response:
    """The confirmation step: what will stop working, and a field for why."""
    session = current(request)
    if session is None:
        return login_redirect(request)
    target = _live(request, session.owner_id, request.query_params.get("connection"))
    if target is None:
        return _not_live(request, session.owner_id)
    return render(
        request,
        "connection_revoke.html",
        connection=row_of(target),
        reason_max=REASON_MAX,
        reason="",
        error=None,
    )


async def revoke(request: Request) -> Response:
    session = current(request)
    if session is None:
        return login_redirect(request)
    form = await request.form()
    await check_csrf(request, form)
    target = _live(request, session.owner_id, form.get("connection"))
    if target is None:
        return _not_live(request, session.owner_id)
    given = form.get("reason")
    reason = " ".join(given.split()) if isinstance(given, str) else ""
    if len(reason) > REASON_MAX:
        error = f"The reason is {len(reason)} characters long; shorten it to at most {REASON_MAX}."
        return render(
            request,
            "connection_revoke.html",
            status_code=400,
            connection=row_of(target),
            reason_max=REASON_MAX,
            reason=reason,
            error=error,
        )
    store = context(request).store
    store.connections.revoke(
        session.owner_id, target.id, remote=remote_of(request), via="page", reason=reason or None
    )
    return RedirectResponse(f"/connections?revoked={target.id}", status_code=303)


def routes() -> list[BaseRoute]:
    return [
        Route("/connections", connections, methods=["GET"]),
        Route("/connections/revoke", confirm, methods=["GET"]),
        Route("/connections/revoke", revoke, methods=["POST"]),
    ]
