"""``/memories``: the owner browses, searches, views, retires, restores and deletes what agents remember.

Pages call the workspace's engine through :mod:`gateway.engines.calls` as the owner: listing through
the engine's ``/admin`` route (every state, which agents never see), one memory and its history
through ``retrieve_memory``, retire and restore through the tools themselves — so the rules and
refusals are the ones agents meet. Deleting a retired memory for good (``life:delete``) goes through
the engine's ``/admin`` delete, after a confirmation page where the owner types ``delete``; the
gateway then writes a ``memory.delete`` audit event naming who deleted what, by id.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from gateway.auth.csrf import check_csrf
from gateway.auth.sessions import Session, context, current, login_redirect, remote_of
from gateway.control.records import Principal, Workspace
from gateway.engines.admin import delete_memory, list_memories, memory_item
from gateway.engines.calls import ToolRefusal, call_tool
from gateway.errors import NotFound, WorkspaceNotFound
from gateway.web.render import render

FILTERS = ("q", "kind", "state", "scope", "source", "since", "until")
PAGE_SIZE = 50
DASHBOARD = "Dashboard"  # the source name of what the owner does here
CONFIRM_WORD = "delete"
REFUSAL_STATUS = {"not_found": 404, "not_retired": 409}
DONE = {
    "retire": "Retired: agents no longer see it.",
    "restore": "Restored exactly as it was.",
    "delete": "Deleted permanently.",
}


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
    workspaces = context(request).store.owners.workspaces(session.owner_id)
    if not workspaces:
        raise WorkspaceNotFound("you have no workspace yet")
    if not name:
        return workspaces[0], workspaces
    for ws in workspaces:
        if ws.name == name:
            return ws, workspaces
    raise WorkspaceNotFound(f"you have no workspace called {name!r}; pick one from the list")


def _supervisor(request: Request) -> Any:
    """The workspace's engine, here or on its node (:class:`gateway.cluster.remote.Engines`)."""
    return request.app.state.components.engines


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


def _is_retired(found: dict[str, Any]) -> bool:
    """Whether ``retrieve_memory``'s answer is a retired memory (its latest value, for a fact)."""
    shown = found.get("notes") or sorted(found.get("facts", []), key=lambda f: str(f.get("valid_from", "")))
    return bool(shown) and shown[-1].get("state") == "retired"


async def view(request: Request) -> Response:
    session = current(request)
    if session is None:
        return login_redirect(request)
    workspace, _ = _workspace(request, session, request.query_params.get("workspace"))
    memory_id = request.path_params["memory_id"]
    args = {"id": memory_id, "include_history": True}
    async with _supervisor(request).lease(workspace.id) as lease:
        found = await call_tool(lease.client, owner_principal(session, workspace), "retrieve_memory", args)
        gone = await memory_item(lease.client, memory_id) if isinstance(found, ToolRefusal) else None
        retired = None
        if not isinstance(found, ToolRefusal) and _is_retired(found):
            item = await memory_item(lease.client, memory_id)
            retired = item["item"].get("retired") if isinstance(item, dict) else None
    done = request.query_params.get("done")
    if isinstance(gone, dict) and gone["item"]["state"] == "deleted":
        return render(
            request,
            "memory.html",
            workspace=workspace,
            memory_id=memory_id,
            facts=[],
            note=None,
            deleted=gone["item"],
            error=None,
            info=DONE.get(done or ""),
        )
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
    info = DONE.get(done or "")
    return render(
        request,
        "memory.html",
        workspace=workspace,
        memory_id=memory_id,
        facts=facts,
        note=notes[0] if notes else None,
        retired=retired,
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


def _confirm_page(
    request: Request, workspace: Workspace, memory_id: str, item: dict[str, Any] | ToolRefusal, **extra: Any
) -> Response:
    """The confirmation page for deleting ``memory_id`` (``item``: its listing row, or why there is none)."""
    error = extra.pop("error", None)
    status = extra.pop("status_code", 200)
    row = None if isinstance(item, ToolRefusal) else item
    if isinstance(item, ToolRefusal):
        error, status = item.message, REFUSAL_STATUS.get(item.code, 400)
    elif item["state"] == "deleted":
        error, status = "This memory was already deleted permanently.", 404
    elif item["state"] != "retired":
        error = f"This memory is {item['state']}: only a retired memory can be deleted permanently."
        error += " Retire it first."
        status = 409
    return render(
        request,
        "memory_delete.html",
        status_code=status,
        workspace=workspace,
        memory_id=memory_id,
        item=row,
        error=error,
        info=None,
        confirm=extra.pop("confirm", ""),
        word=CONFIRM_WORD,
    )


async def confirm_delete(request: Request) -> Response:
    session = current(request)
    if session is None:
        return login_redirect(request)
    workspace, _ = _workspace(request, session, request.query_params.get("workspace"))
    memory_id = request.path_params["memory_id"]
    async with _supervisor(request).lease(workspace.id) as lease:
        item = await memory_item(lease.client, memory_id)
    return _confirm_page(request, workspace, memory_id, item["item"] if isinstance(item, dict) else item)


async def delete(request: Request) -> Response:
    session = current(request)
    if session is None:
        return login_redirect(request)
    form = await request.form()
    await check_csrf(request, form)
    workspace, _ = _workspace(request, session, str(form.get("workspace") or ""))
    memory_id = request.path_params["memory_id"]
    typed = str(form.get("confirm") or "").strip()
    async with _supervisor(request).lease(workspace.id) as lease:
        if typed.casefold() == CONFIRM_WORD:
            result = await delete_memory(lease.client, memory_id, DASHBOARD)
            if isinstance(result, dict):
                kind = str(result["kind"])
                error, status = None, 200
            else:
                error, status = result.message, REFUSAL_STATUS.get(result.code, 400)
        else:
            error, status = f"Type {CONFIRM_WORD} in the box to confirm; nothing was deleted.", 400
        if error is not None:
            item = await memory_item(lease.client, memory_id)
            row = item["item"] if isinstance(item, dict) else item
            return _confirm_page(
                request, workspace, memory_id, row, error=error, status_code=status, confirm=typed
            )
    context(request).store.audit_log.record(
        "memory.delete",
        owner_id=session.owner_id,
        workspace_id=workspace.id,
        remote=remote_of(request),
        detail={"id": memory_id, "kind": kind, "by": DASHBOARD},
    )
    query = urlencode({"workspace": workspace.name, "done": "delete"})
    return RedirectResponse(f"/memories/{memory_id}?{query}", status_code=303)


def routes() -> list[BaseRoute]:
    return [
        Route("/memories", browse, methods=["GET"]),
        Route("/memories/{memory_id}", view, methods=["GET"]),
        Route("/memories/{memory_id}/delete", confirm_delete, methods=["GET"]),
        Route("/memories/{memory_id}/delete", delete, methods=["POST"]),
        Route("/memories/{memory_id}/{action:str}", change, methods=["POST"]),
    ]
