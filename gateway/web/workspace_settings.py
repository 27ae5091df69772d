"""``/settings``: a workspace's memory settings, each with a *Workspace override* or *Instance
default* badge, changed and cleared by its owner; and the embedding provider's state and notes.

The engine owns the workspace layer (``/admin/settings`` on its socket): the page reads it there
and sends only what the owner changed (a field whose text differs from what the page showed).
The engine checks each value on its own; a refusal comes back field by field and nothing is saved.
Settings are read when an engine starts, so after a change the gateway restarts the workspace's
engine (:meth:`~gateway.engines.supervisor.Supervisor.restart`) and the next call runs with it.

:func:`shown`, :func:`changes` and :func:`provider_label` are pure; the handlers are thin.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlencode

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from gateway.auth.csrf import check_csrf
from gateway.auth.sessions import Session, context, current, login_redirect, remote_of
from gateway.control.records import Workspace
from gateway.engines import admin
from gateway.engines.calls import ToolRefusal
from gateway.errors import EngineUnreachable, WorkspaceNotFound
from gateway.web.render import render

BADGES = {"workspace": "Workspace override", "command line": "Command line"}
INSTANCE_DEFAULT = "Instance default"
_MAX_FIELD = 2048


def shown(value: object) -> str:
    """A setting's value as the form shows it (and as a changed field is recognised)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def provider_label(provider: str) -> str:
    """The provider as the ``embedding_provider`` setting names it: the engine reports the local
    model computed by the host's shared embedder service as ``remote``, but it is the same local
    model the owner chose (the provider's notes say where it runs)."""
    return "local" if provider == "remote" else provider


def changes(fields: Sequence[Mapping[str, Any]], form: Mapping[str, str]) -> dict[str, str]:
    """The fields whose submitted text differs from what the page showed (their saved value)."""
    found: dict[str, str] = {}
    for f in fields:
        name = str(f["name"])
        if f.get("instance_only"):
            continue  # the operator's: the page offers no field for it
        if name in form and form[name].strip() != shown(f["saved"]):
            found[name] = form[name].strip()
    return found


def chosen_workspace(
    request: Request, session: Session, name: str | None
) -> tuple[Workspace, list[Workspace]]:
    """The owner's workspace called ``name`` (default: the first), and all of them."""
    workspaces = context(request).store.owners.workspaces(session.owner_id)
    if not workspaces:
        raise WorkspaceNotFound("you have no workspace yet")
    for ws in workspaces:
        if not name or ws.name == name:
            return ws, workspaces
    raise WorkspaceNotFound(f"you have no workspace called {name!r}; pick one from the list")


def _supervisor(request: Request) -> Any:
    """The workspace's engine, here or on its node (:class:`gateway.cluster.remote.Engines`)."""
    return request.app.state.components.engines


async def _read(request: Request, workspace: Workspace) -> dict[str, Any]:
    async with _supervisor(request).lease(workspace.id) as lease:
        found = await admin.settings(lease.client)
    if isinstance(found, ToolRefusal):  # pragma: no cover - the engine refuses no read
        raise EngineUnreachable(f"the engine could not list its settings: {found.message}", retry_after=1)
    return found


def _page(
    request: Request,
    workspace: Workspace,
    workspaces: list[Workspace],
    found: Mapping[str, Any],
    *,
    status_code: int = 200,
    typed: Mapping[str, str] | None = None,
    errors: Mapping[str, str] | None = None,
    **notice: str | None,
) -> Response:
    groups: dict[str, list[dict[str, Any]]] = {}
    for f in found["fields"]:
        text = (typed or {}).get(f["name"], shown(f["saved"]))
        badge = BADGES["workspace"] if f["override"] else BADGES.get(f["origin"], INSTANCE_DEFAULT)
        pending = f["saved"] != f["value"] or f["override"] != (f["origin"] == "workspace")
        limits = f"From {shown(f['min'])} to {shown(f['max'])}." if f.get("min") is not None else ""
        row = {
            **f,
            "text": text,
            "badge": badge,
            "inherited_text": shown(f["inherited"]),
            "pending": pending,
            "range": limits,
        }
        groups.setdefault(f["group"], []).append(row)
    return render(
        request,
        "settings.html",
        status_code=status_code,
        workspace=workspace,
        workspaces=workspaces,
        groups=groups,
        provider=found.get("provider"),
        provider_label=provider_label(str((found.get("provider") or {}).get("provider", ""))),
        problems=found.get("problems", []),
        field_errors=dict(errors or {}),
        error=notice.get("error"),
        info=notice.get("info"),
    )


def _form(form: FormData) -> dict[str, str]:
    return {k: v[:_MAX_FIELD] for k, v in form.items() if isinstance(v, str)}


async def settings_page(request: Request) -> Response:
    session = current(request)
    if session is None:
        return login_redirect(request)
    workspace, workspaces = chosen_workspace(request, session, request.query_params.get("workspace"))
    found = await _read(request, workspace)
    info = None
    if request.query_params.get("saved"):
        info = "Saved. The workspace's engine restarted and uses the new settings."
    elif cleared := request.query_params.get("cleared"):
        info = f"Cleared {cleared}: the workspace uses the instance default again."
    return _page(request, workspace, workspaces, found, info=info)


async def save(request: Request) -> Response:
    session = current(request)
    if session is None:
        return login_redirect(request)
    form = _form(await request.form())
    await check_csrf(request, form)
    workspace, workspaces = chosen_workspace(request, session, form.get("workspace"))
    found = await _read(request, workspace)
    clearing = form.get("clear")
    if clearing:
        changed: dict[str, str] = {}
        clear = [clearing]
    else:
        changed, clear = changes(found["fields"], form), []
    if not changed and not clear:
        return _page(request, workspace, workspaces, found, info="Nothing changed.")
    async with _supervisor(request).lease(workspace.id) as lease:
        result = await admin.save_settings(lease.client, dict(changed), clear)
    if isinstance(result, ToolRefusal):
        return _page(
            request,
            workspace,
            workspaces,
            found,
            status_code=400,
            typed=form,
            errors=result.fields,
            error="Nothing was saved. Fix the fields marked below, then save again."
            if result.fields
            else result.message,
        )
    context(request).store.audit_log.record(
        "settings.change",
        owner_id=session.owner_id,
        workspace_id=workspace.id,
        remote=remote_of(request),
        detail={"set": sorted(changed), "clear": clear},
    )
    await _supervisor(request).restart(workspace.id)
    query = {"workspace": workspace.name} | ({"cleared": clearing} if clearing else {"saved": "1"})
    return RedirectResponse("/settings?" + urlencode(query), status_code=303)


def routes() -> list[BaseRoute]:
    return [
        Route("/settings", settings_page, methods=["GET"]),
        Route("/settings", save, methods=["POST"]),
    ]
