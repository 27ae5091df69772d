"""``/consent``: the page where a signed-in owner approves (or denies) a client's request.

It shows who is asking (the client's name and where the answer goes) and lets the owner choose
the connection's name — the authenticated source of everything written through it — which
workspace it opens, read-only, and an optional pinned scope with what a pinned connection reads
(this scope only — the default — or this scope and unscoped memories). Approving sends the browser back to
the client's redirect URI with a code and RFC 9207 ``iss``; denying, with ``access_denied``. The
form carries a CSRF token; the workspace must be the owner's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp.server.auth.provider import construct_redirect_uri
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from gateway.auth import tokens
from gateway.auth.csrf import check_csrf
from gateway.auth.oauth.clients import csp_source, display_name, redirect_host
from gateway.auth.oauth.config import OAuthServer, remote_of
from gateway.auth.oauth.provider import Provider
from gateway.auth.sessions import login_redirect, signed_in
from gateway.control.records import ConsentChoice
from gateway.control.tokens import validate_name, validate_scope
from gateway.errors import BadRequest
from gateway.web.render import render


@dataclass(frozen=True)
class Pending:
    request_id: str
    client_id: str
    params: dict[str, Any]


def _pending(server: OAuthServer, request_id: str) -> Pending | None:
    found = server.store.oauth.pending_request(request_id, now=server.clock()) if request_id else None
    return None if found is None else Pending(request_id, found[0], found[1])


def _expired(request: Request) -> Response:
    return render(
        request,
        "error.html",
        status_code=400,
        title="This sign-in request has expired",
        message="Go back to your AI client and connect again.",
        back="/",
    )


def default_name(server: OAuthServer, owner_id: str, client_name: str) -> str:
    live = {c.name for c in server.store.connections.of_owner(owner_id)}
    candidate, n = client_name, 2
    while candidate in live:
        candidate, n = f"{client_name} ({n})", n + 1
    return candidate


async def _page(
    server: OAuthServer,
    request: Request,
    pending: Pending,
    owner_id: str,
    *,
    status: int = 200,
    **values: Any,
) -> Response:
    provider = Provider(server, server.issuer(request))
    client = await provider.get_client(pending.client_id)
    if client is None:
        return _expired(request)
    name = display_name(client)
    context: dict[str, Any] = {
        "client_name": name,
        "client_id": pending.client_id,
        "redirect_host": redirect_host(pending.params["redirect_uri"]),
        "request_id": pending.request_id,
        "workspaces": server.store.owners.workspaces(owner_id),
        "connection_name": default_name(server, owner_id, name),
        "workspace_id": None,
        "read_only": False,
        "scope": "",
        "reads_unscoped": False,
        "error": None,
        "info": None,
    }
    context.update(values)
    # approving or denying ends at the client's redirect URI: the page's form-action must allow it
    source = csp_source(pending.params["redirect_uri"])
    return render(request, "consent.html", status_code=status, form_action=(source,), **context)


async def consent_page(server: OAuthServer, request: Request) -> Response:
    session = await signed_in(request)
    if session is None:
        return login_redirect(request)
    pending = _pending(server, request.query_params.get("request", ""))
    if pending is None:
        return _expired(request)
    return await _page(server, request, pending, session.owner_id)


def _answer(server: OAuthServer, request: Request, pending: Pending, **params: str | None) -> Response:
    server.store.oauth.drop_request(pending.request_id)
    location = construct_redirect_uri(
        pending.params["redirect_uri"],
        state=pending.params.get("state"),
        iss=server.issuer(request),
        **params,
    )
    return RedirectResponse(location, status_code=303, headers={"Cache-Control": "no-store"})


async def consent_submit(server: OAuthServer, request: Request) -> Response:
    form = await request.form()
    await check_csrf(request, form)
    session = await signed_in(request)
    if session is None:
        return login_redirect(request)
    pending = _pending(server, str(form.get("request", "")))
    if pending is None:
        return _expired(request)
    if form.get("decision") != "approve":
        return _answer(server, request, pending, error="access_denied", error_description="the owner said no")
    name, workspace_id = str(form.get("name", "")), str(form.get("workspace", ""))
    read_only, scope = form.get("read_only") is not None, str(form.get("scope", "")).strip() or None
    reads = form.get("reads")
    keep = {
        "connection_name": name,
        "workspace_id": workspace_id,
        "read_only": read_only,
        "scope": scope or "",
        "reads_unscoped": reads == tokens.READS_UNSCOPED_TOO,
    }
    owned = {w.id for w in server.store.owners.workspaces(session.owner_id)}
    try:
        name = validate_name(name, what="connection")
        unscoped = tokens.reads_unscoped(reads if isinstance(reads, str) else None)
        if scope is not None:
            scope = validate_scope(scope)
        if workspace_id not in owned:
            raise BadRequest("choose one of your own workspaces")
    except BadRequest as exc:
        return await _page(server, request, pending, session.owner_id, status=400, error=exc.message, **keep)
    choice = ConsentChoice(
        session.owner_id, workspace_id, name, read_only, scope, unscoped and scope is not None
    )
    params = pending.params
    code = server.store.oauth.save_code(
        client_id=pending.client_id,
        choice=choice,
        redirect_uri=params["redirect_uri"],
        redirect_explicit=bool(params["redirect_explicit"]),
        code_challenge=params["code_challenge"],
        resource=params["resource"],
        scopes=tuple(params["scopes"]),
        now=server.clock(),
        ttl=server.config.code_ttl,
        remote=remote_of(request),
    )
    return _answer(server, request, pending, code=code)


def routes(server: OAuthServer) -> list[Route]:
    """``/consent``: the page (GET) and the owner's answer (POST)."""

    async def page(request: Request) -> Response:
        return await consent_page(server, request)

    async def submit(request: Request) -> Response:
        return await consent_submit(server, request)

    return [Route("/consent", page, methods=["GET"]), Route("/consent", submit, methods=["POST"])]
