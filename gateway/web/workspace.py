"""``/workspace``: usage, import and export of one workspace (SPEC §11 Workspace; ``life:import``,
``life:export``), through the workspace's RUNNING engine (started on demand like for any call).

- Usage: the engine's ``memory_status`` as the owner (counts by kind and state, bytes, index).
- Import (``POST /workspace/import``, multipart + CSRF): a ``.zip``, or picked files (a folder
  picked whole keeps its sub-folders), under :attr:`Settings.import_max_bytes`; the engine copies
  Markdown under ``notes/Imported/<label>/`` (or restores an Almanac export into an empty
  workspace) and indexes it; the answer streams the engine's progress as it goes, then the
  summary: what was imported, what was skipped and why (:mod:`gateway.web.importing`). Audited
  as ``workspace.import`` (counts, never content), also when the browser left mid-way.
- Export (``GET /workspace/export``): the engine's zip of the store plus its manifest, streamed to
  the browser as it is read. Audited as ``workspace.export``.
"""

from __future__ import annotations

import re
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from typing import Any

from starlette.datastructures import FormData, UploadFile
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from gateway.auth.csrf import check_csrf
from gateway.auth.sessions import Session, context, current, login_redirect, remote_of
from gateway.control.records import Workspace
from gateway.engines.admin import open_export
from gateway.engines.calls import ToolRefusal, call_tool
from gateway.errors import PayloadTooLarge, WorkspaceNotFound
from gateway.web import importing, uploads
from gateway.web.memories import owner_principal
from gateway.web.render import render

MAX_FILES = 5000
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def pick(request: Request, session: Session, name: str | None) -> tuple[Workspace, list[Workspace]]:
    workspaces = context(request).store.owners.workspaces(session.owner_id)
    if not workspaces:
        raise WorkspaceNotFound("you have no workspace yet")
    chosen = next((w for w in workspaces if w.name == name), None) if name else workspaces[0]
    if chosen is None:
        raise WorkspaceNotFound(f"you have no workspace called {name!r}; pick one from the list")
    return chosen, workspaces


def _components(request: Request) -> Any:
    return request.app.state.components


def export_filename(workspace: str, now: datetime) -> str:
    return f"almanac-{_UNSAFE.sub('-', workspace).strip('-') or 'workspace'}-{now:%Y-%m-%d}.zip"


async def _page(
    request: Request, session: Session, workspace: Workspace, workspaces: list[Workspace], **values: Any
) -> Response:
    status_code = values.pop("status_code", 200)
    async with _components(request).engines.lease(workspace.id) as lease:
        status = await call_tool(lease.client, owner_principal(session, workspace), "memory_status", {})
    usage = None if isinstance(status, ToolRefusal) else status
    defaults: dict[str, Any] = {"error": None, "info": None, "label": ""}
    return render(
        request,
        "workspace.html",
        status_code=status_code,
        workspace=workspace,
        workspaces=workspaces,
        usage=usage,
        limit=uploads.size_text(_components(request).settings.import_max_bytes),
        **{**defaults, **values},
    )


async def page(request: Request) -> Response:
    session = current(request)
    if session is None:
        return login_redirect(request)
    workspace, workspaces = pick(request, session, request.query_params.get("workspace"))
    return await _page(request, session, workspace, workspaces)


async def export(request: Request) -> Response:
    session = current(request)
    if session is None:
        return login_redirect(request)
    workspace, _ = pick(request, session, request.query_params.get("workspace"))
    return await stream_export(request, workspace, session.owner_id, remote_of(request))


async def stream_export(
    request: Request, workspace: Workspace, owner_id: str, remote: str | None
) -> Response:
    """The workspace's export zip, streamed from its engine (the lease is held until the last byte)."""
    parts = _components(request)
    stack = AsyncExitStack()
    try:
        lease = await stack.enter_async_context(parts.engines.lease(workspace.id))
        upstream = await open_export(lease.client)
        stack.push_async_callback(upstream.aclose)
    except BaseException:
        await stack.aclose()
        raise
    parts.store.audit_log.record(
        "workspace.export", owner_id=owner_id, workspace_id=workspace.id, remote=remote
    )

    async def body() -> Any:
        try:
            async for chunk in upstream.aiter_raw():
                yield chunk
        finally:
            await stack.aclose()

    headers = {
        "Content-Disposition": f'attachment; filename="{export_filename(workspace.name, datetime.now(UTC))}"',
        "Cache-Control": "no-store",
        "X-Content-Type-Options": "nosniff",
    }
    if "content-length" in upstream.headers:
        headers["Content-Length"] = upstream.headers["content-length"]
    return StreamingResponse(body(), media_type="application/zip", headers=headers)


async def import_(request: Request) -> Response:
    session = current(request)
    if session is None:
        return login_redirect(request)
    parts = _components(request)
    limit = parts.settings.import_max_bytes
    try:
        form = await uploads.capped(request, limit).form(max_files=MAX_FILES, max_fields=50)
    except PayloadTooLarge as exc:
        workspace, workspaces = pick(request, session, request.query_params.get("workspace"))
        return await _page(request, session, workspace, workspaces, status_code=413, error=exc.message)
    try:
        return await _import(request, session, form)
    finally:
        await form.close()


async def _import(request: Request, session: Session, form: FormData) -> Response:
    parts = _components(request)
    await check_csrf(request, form)
    workspace, workspaces = pick(request, session, str(form.get("workspace") or "") or None)
    label = str(form.get("label") or "").strip()
    archive = form.get("archive")
    picked = [f for f in form.getlist("files") if isinstance(f, UploadFile) and f.filename]
    zipped = archive if isinstance(archive, UploadFile) and archive.filename else None

    async def refuse(message: str, status_code: int = 400) -> Response:
        return await _page(
            request, session, workspace, workspaces, status_code=status_code, error=message, label=label
        )

    if zipped is not None and picked:
        return await refuse("Choose a .zip or pick files, not both. Nothing was imported.")
    if zipped is None and not picked:
        return await refuse("Choose a .zip file or pick Markdown files to import. Nothing was imported.")
    if zipped is not None:
        content = uploads.chunks_from(zipped)
    else:
        files = [(str(f.filename), await f.read()) for f in picked]
        content = uploads.chunks_of(uploads.bundle(files))

    def finished(result: dict[str, Any]) -> None:
        parts.store.audit_log.record(
            "workspace.import",
            owner_id=session.owner_id,
            workspace_id=workspace.id,
            remote=remote_of(request),
            detail={
                "kind": result["kind"],
                "imported": len(result["imported"]),
                "skipped": len(result["skipped"]),
            },
        )

    first, rest = await importing.start(request, workspace, content, label or None, finished)
    if isinstance(first, importing.Failed):  # refused before anything was written: the form again
        rest.close()
        return await refuse(first.message, first.status)
    return importing.page(request, workspace, label, first, rest)


def routes() -> list[BaseRoute]:
    return [
        Route("/workspace", page, methods=["GET"]),
        Route("/workspace/export", export, methods=["GET"]),
        Route("/workspace/import", import_, methods=["POST"]),
    ]
