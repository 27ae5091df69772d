"""``/tokens/new``: create a personal access token on the web (``gw:pat``), for owners who signed up
here and have no shell on the gateway's host. The token is shown once, on the page that answers the
form, and never again (only its hash is stored)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.auth.csrf import check_csrf
from gateway.auth.sessions import Session, context, current, login_redirect, remote_of
from gateway.auth.tokens import reads_unscoped
from gateway.errors import GatewayError, WorkspaceNotFound
from gateway.web.account import mcp_url
from gateway.web.render import render

_MAX_FIELD = 200


def _page(request: Request, session: Session, status_code: int = 200, **values: Any) -> Response:
    workspaces = context(request).store.owners.workspaces(session.owner_id)
    defaults: dict[str, Any] = {
        "name": "",
        "workspace": workspaces[0].name if workspaces else "",
        "scope": "",
        "read_only": False,
        "reads_unscoped": False,
        "error": None,
        "info": None,
        "token": None,
    }
    return render(
        request,
        "token_new.html",
        status_code=status_code,
        workspaces=workspaces,
        mcp_url=mcp_url(request),
        **{**defaults, **values},
    )


async def new_token(request: Request) -> Response:
    session = current(request)
    if session is None:
        return login_redirect(request)
    if request.method == "GET":
        return _page(request, session)
    form = await request.form()
    await check_csrf(request, form)

    def field(name: str) -> str:
        value = form.get(name)
        return value.strip()[:_MAX_FIELD] if isinstance(value, str) else ""

    name, workspace, scope = field("name"), field("workspace"), field("scope")
    read_only = bool(form.get("read_only"))
    typed: dict[str, Any] = {"name": name, "workspace": workspace, "scope": scope, "read_only": read_only}
    store = context(request).store
    try:
        typed["reads_unscoped"] = reads_unscoped(field("reads") or None)
        chosen = next((w for w in store.owners.workspaces(session.owner_id) if w.name == workspace), None)
        if chosen is None:
            raise WorkspaceNotFound(f"no workspace named {workspace!r}; pick one from the list")
        connection, secret = store.connections.create_pat(
            session.owner_id,
            chosen.id,
            name,
            read_only=read_only,
            scope=scope or None,
            reads_unscoped=typed["reads_unscoped"],
            remote=remote_of(request),
        )
    except GatewayError as exc:
        return _page(request, session, status_code=exc.status, error=exc.message, **typed)
    info = f"Token {connection.name!r} created. Copy it now: it is shown only once."
    return _page(request, session, status_code=201, token=secret, info=info, **typed)


def routes() -> list[BaseRoute]:
    return [Route("/tokens/new", new_token, methods=["GET", "POST"])]
