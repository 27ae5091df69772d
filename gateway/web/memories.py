"""``/memories``: the owner browses, searches, views, retires and restores what agents remember.

Pages call the workspace's engine through :mod:`gateway.engines.calls` as the owner: listing through
the engine's ``/admin`` route (every state, which agents never see), one memory and its history
through ``retrieve_memory``, retire and restore through the tools themselves — so the rules and
refusals are the ones agents meet.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from gateway.auth.csrf import check_csrf
from gateway.auth.sessions import Session, context, current, login_redirect
from gateway.control.store import Principal, Workspace
from gateway.engines.admin import list_memories
from gateway.engines.calls import ToolRefusal, call_tool
from gateway.errors import NotFound, WorkspaceNotFound
from gateway.web.render import render

FILTERS = ("q", "kind", "state", "scope", "source", "since", "until")
PAGE_SIZE = 50
DASHBOARD = "Dashboard"  # the source name of what the owner does here


def owner_principal(session: Session, workspace: Workspace) -> Principal:
    return Principal(
        owner_id=session.owner_id,
        workspace_id=workspace.id,
        connection_id=f"web:{session.owner_id}",
        connection_name=DASHBOARD,
        read_only=False,
        scope=None,
    )


def _workspace(request: Request, session: Session, name: str | None) -> tuple[Workspace, list[Workspace]]:
    workspaces = context(request).store.workspaces(session.owner_id)
    if not workspaces:
        raise WorkspaceNotFound("you have no workspace yet")
    if not name:
        return workspaces[0], workspaces
    for ws in workspaces:
        if ws.name == name:
            return ws, workspaces
    raise WorkspaceNotFound(f"you have no workspace called {name!r}; pick one from the list")


def _supervisor(request: Request) -> Any:
    return request.app.state.components.supervisor


async def browse(request: Request) -> Response:
    session = current(request)
    if session is None:
        return login_redirect(request)
    workspace, workspaces = _workspace(request, session, request.query_params.get("workspace"))
    filters = {k: request.query_params.get(k, "").strip() for k in FILTERS}
    page = request.query_params.get("page", "1")
    number = int(page) if page.isdigit() and int(page) >= 1 else 1
    params = {k: v for k, v in filters.items() if v}
    params |= {"offset": str((number - 1) * PAGE_SIZE), "limit": str(PAGE_SIZE)}
    async with _supervisor(request).lease(workspace.id) as lease:
        listing = await list_memories(lease.client, params)
    error = listing.message if isinstance(listing, ToolRefusal) else None
    found: dict[str, Any] = (
        {"items": [], "total": 0, "facets": {"scopes": [], "sources": []}}
        if isinstance(listing, ToolRefusal)
        else listing
    )
    keep = {k: v for k, v in filters.items() if v} | {"workspace": workspace.name}
    pages = (found["total"] + PAGE_SIZE - 1) // PAGE_SIZE
    return render(
        request,
        "memories.html",
        status_code=400 if error else 200,
        workspace=workspace,
        workspaces=workspaces,
        filters=filters,
        listing=found,
        error=error,
        info=None,
        page=number,
        pages=pages,
        prev_url=f"/memories?{urlencode(keep | {'page': number - 1})}" if number > 1 else None,
        next_url=f"/memories?{urlencode(keep | {'page': number + 1})}" if number < pages else None,
        workspace_query=urlencode({"workspace": workspace.name}),
    )


async def view(request: Request) -> Response:
    session = current(request)
    if session is None:
        return login_redirect(request)
    workspace, _ = _workspace(request, session, request.query_params.get("workspace"))
    memory_id = request.path_params["memory_id"]
    args = {"id": memory_id, "include_history": True}
    async with _supervisor(request).lease(workspace.id) as lease:
        found = await call_tool(lease.client, owner_principal(session, workspace), "retrieve_memory", args)
    done = request.query_params.get("done")
    if isinstance(found, ToolRefusal):
        status = 404 if found.code == "not_found" else 400
        return render(
            request,
            "memory.html",
            status_code=status,
            workspace=workspace,
            memory_id=memory_id,
            facts=[],
            note=None,
            error=found.message,
            info=None,
        )
    facts = sorted(found.get("facts", []), key=lambda f: str(f.get("valid_from", "")))
    notes = found.get("notes", [])
    info = {"retire": "Retired: agents no longer see it.", "restore": "Restored exactly as it was."}.get(
        done or ""
    )
    return render(
        request,
        "memory.html",
        workspace=workspace,
        memory_id=memory_id,
        facts=facts,
        note=notes[0] if notes else None,
        error=None,
        info=info,
    )


async def change(request: Request) -> Response:
    session = current(request)
    if session is None:
        return login_redirect(request)
    memory_id, action = request.path_params["memory_id"], request.path_params["action"]
    if action not in ("retire", "restore"):
        raise NotFound(f"nothing at {request.url.path}")
    form = await request.form()
    await check_csrf(request, form)
    workspace, _ = _workspace(request, session, str(form.get("workspace") or ""))
    args: dict[str, Any] = {"id": memory_id}
    reason = str(form.get("reason") or "").strip()
    if action == "retire" and reason:
        args["reason"] = reason
    async with _supervisor(request).lease(workspace.id) as lease:
        result = await call_tool(lease.client, owner_principal(session, workspace), f"{action}_memory", args)
    if isinstance(result, ToolRefusal):
        return render(
            request,
            "memory.html",
            status_code=400,
            workspace=workspace,
            memory_id=memory_id,
            facts=[],
            note=None,
            error=result.message,
            info=None,
        )
    query = urlencode({"workspace": workspace.name, "done": action})
    return RedirectResponse(f"/memories/{memory_id}?{query}", status_code=303)


def routes() -> list[BaseRoute]:
    return [
        Route("/memories", browse, methods=["GET"]),
        Route("/memories/{memory_id}", view, methods=["GET"]),
        Route("/memories/{memory_id}/{action:str}", change, methods=["POST"]),
    ]
