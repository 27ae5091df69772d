"""The Account page (``/account``) and erasing the account (``POST /account/erase``, SPEC §11).

Erasing is self-serve and removes everything (SPEC §5 ``life:delete``): after the owner types their
email to confirm (POST + CSRF), :func:`erase_account` locks the owner out (every token, connection
and session stops working at once), stops each workspace's engine for good, deletes each workspace
folder and engine log, then deletes the owner's rows; one ``account.erase`` audit event remains,
naming the erased owner only by id.
"""

from __future__ import annotations

from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from gateway.auth.csrf import check_csrf
from gateway.auth.sessions import Session, clear_session_cookie, context, current, login_redirect, remote_of
from gateway.cluster.copies import erase_copies, placed_on_lost_nodes
from gateway.cluster.remote import Engines
from gateway.control.records import Workspace
from gateway.control.store import ControlPlane
from gateway.erasure import Erased, finish, remove_files
from gateway.errors import MoveUnderWay
from gateway.web.render import render

_MAX_FIELD = 320


async def erase_account(
    store: ControlPlane, engines: Engines, owner_id: str, *, remote: str | None
) -> Erased:
    """Erase the owner and every workspace: lock out, stop engines, delete folders, forget rows.

    A workspace placed on another node (node mode) is erased there, by that node
    (:meth:`~gateway.cluster.remote.Engines.erase_elsewhere`), and every other copy the moves
    records know of by the node keeping it (:func:`~gateway.cluster.copies.erase_copies`). If a
    folder cannot be deleted (or its node cannot be reached) the owner stays locked out (nothing of
    theirs works) with their rows kept, the moves records included, an ``account.erase.failed``
    event names the workspace, and the operator finishes with ``almanac owner erase --finish
    EMAIL`` (:mod:`gateway.erasure`). Refused (:class:`MoveUnderWay`, nothing erased) while one of
    the workspaces is being moved. A copy on a node declared lost is not waited for (its disk is
    gone): it is audited as ``account.erase.lost_copy``."""
    workspaces = store.erasure.lock_out_owner(owner_id, remote=remote)
    here: list[Workspace] = []
    failed: list[str] = []
    lost: set[str] = set()
    if engines.link is not None:  # node mode: a workspace on a node declared lost has nothing left to erase
        ids = [w.id for w in workspaces]
        lost = await anyio.to_thread.run_sync(placed_on_lost_nodes, store, owner_id, ids)
    for workspace in workspaces:
        if workspace.id in lost:
            continue
        elsewhere = await engines.erase_elsewhere(workspace.id)
        if elsewhere is None:
            await engines.supervisor.retire(workspace.id)
            here.append(workspace)
            continue
        for what in elsewhere:
            failed.append(what)
            store.audit_log.record(
                "account.erase.failed",
                owner_id=owner_id,
                workspace_id=workspace.id,
                detail={"error": "not deleted on the workspace's node"},
            )
    if engines.link is not None:  # node mode: the copies moves left on other nodes
        ids, link = [w.id for w in workspaces], engines.link
        failed += await anyio.to_thread.run_sync(
            lambda: erase_copies(store, link.secret, owner_id, ids, clock=link.forwarder.clock)
        )
    if failed:  # the rows stay: what is left can still be found and finished
        failed += await anyio.to_thread.run_sync(
            remove_files, store, engines.supervisor.config.data_dir, owner_id, here
        )
        return Erased(len(workspaces), tuple(failed))
    done = await anyio.to_thread.run_sync(finish, store, engines.supervisor.config.data_dir, owner_id, here)
    return Erased(len(workspaces), done.failed)


def _page(request: Request, session: Session, status_code: int = 200, **values: Any) -> Response:
    store = context(request).store
    defaults: dict[str, Any] = {"error": None, "info": None, "confirm": ""}
    return render(
        request,
        "account.html",
        status_code=status_code,
        email=session.email,
        workspaces=store.owners.workspaces(session.owner_id),
        connections=len(store.connections.of_owner(session.owner_id)),
        **{**defaults, **values},
    )


async def account_page(request: Request) -> Response:
    session = current(request)
    if session is None:
        return login_redirect(request)
    return _page(request, session)


async def erase(request: Request) -> Response:
    form = await request.form()
    await check_csrf(request, form)
    session = current(request)
    if session is None:
        return login_redirect(request)
    typed = form.get("confirm")
    confirm = typed.strip()[:_MAX_FIELD] if isinstance(typed, str) else ""
    if confirm.casefold() != session.email.casefold():
        return _page(
            request,
            session,
            status_code=400,
            confirm=confirm,
            error=f"To erase the account, type its email, {session.email}, exactly. Nothing was erased.",
        )
    engines = request.app.state.components.engines
    try:
        done = await erase_account(
            context(request).store, engines, session.owner_id, remote=remote_of(request)
        )
    except MoveUnderWay as exc:
        return _page(request, session, status_code=409, confirm=confirm, error=exc.message)
    response = RedirectResponse("/login?erased=1" if not done.failed else "/login?erased=partly", 303)
    clear_session_cookie(response, request)
    return response


def routes() -> list[BaseRoute]:
    return [
        Route("/account", account_page, methods=["GET"]),
        Route("/account/erase", erase, methods=["POST"]),
    ]
