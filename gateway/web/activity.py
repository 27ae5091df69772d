"""``/activity``: the retrieval log — what memory put in front of a model, when, through which
connection.

It shows what the engine's log holds and nothing more (``/admin/activity`` on its socket): the
query's SHA-256 unless the workspace logs queries, the ids of the memories returned with their
scores (each a link to the memory's own page), the mode, scope, tokens and latency. The log
records the connection's id (``connection_id``), never its name: the page shows the connection's
current name and kind, and says so when it has been revoked; a line from a stdio client (or
written before the log kept ids) shows the name it recorded (``source``). The filter is by
connection id, so two connections that share a name stay apart.

:func:`row_of` is pure; the handler is thin.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.auth.sessions import context, current, login_redirect
from gateway.engines import admin
from gateway.engines.calls import ToolRefusal
from gateway.web.connections import KINDS
from gateway.web.render import render
from gateway.web.workspace_settings import chosen_workspace

PAGE_SIZE = 50


@dataclass(frozen=True)
class Kept:
    id: str
    score: float | None


@dataclass(frozen=True)
class Known:
    """A connection as the page names it: its current name, kind and whether it was revoked."""

    name: str
    kind: str
    revoked: bool = False


@dataclass(frozen=True)
class Row:
    """One log entry as the table shows it."""

    when: str  # "2026-12-01 10:16:05" (UTC)
    when_iso: str
    source: str | None  # the connection's current name (or the name a line recorded)
    kind: str | None  # the connection's kind, when the line names a known connection
    revoked: bool
    destination: str
    mode: str
    scope: str | None
    query: str | None  # the query itself, where the workspace logs queries
    query_hash: str | None  # else the first 12 hex digits of its SHA-256
    kept: tuple[Kept, ...]
    trimmed: int
    tokens: int | None
    latency_ms: float | None


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def row_of(entry: Mapping[str, Any], known: Mapping[str, Known]) -> Row:
    """A log line as a table row (unknown or missing keys are shown as absent, never invented);
    ``known`` maps the owner's connection ids to what they are called now."""
    ts = str(entry.get("ts", ""))
    ids = [str(i) for i in entry.get("kept", []) if isinstance(i, str)]
    scores = [_number(s) for s in entry.get("scores", [])]
    source = entry.get("source")
    connection_id = entry.get("connection_id")
    who = known.get(connection_id) if isinstance(connection_id, str) else None
    if who is None and isinstance(connection_id, str):
        who = Known(f"a removed connection ({connection_id})", "", revoked=False)
    if who is None and isinstance(source, str):
        who = Known(source, "")
    digest = entry.get("query_sha256")
    tokens = _number(entry.get("tokens"))
    trimmed = _number(entry.get("trimmed"))
    return Row(
        when=ts[:19].replace("T", " "),
        when_iso=ts,
        source=None if who is None else who.name,
        kind=(who.kind or None) if who is not None else None,
        revoked=who is not None and who.revoked,
        destination=str(entry.get("destination", "")),
        mode=str(entry.get("mode", "")),
        scope=str(entry["scope"]) if isinstance(entry.get("scope"), str) else None,
        query=str(entry["query"]) if isinstance(entry.get("query"), str) else None,
        query_hash=str(digest)[:12] if isinstance(digest, str) else None,
        kept=tuple(Kept(i, scores[n] if n < len(scores) else None) for n, i in enumerate(ids)),
        trimmed=int(trimmed or 0),
        tokens=None if tokens is None else int(tokens),
        latency_ms=_number(entry.get("latency_ms")),
    )


async def activity_page(request: Request) -> Response:
    session = current(request)
    if session is None:
        return login_redirect(request)
    workspace, workspaces = chosen_workspace(request, session, request.query_params.get("workspace"))
    chosen = request.query_params.get("connection", "").strip()
    raw_page = request.query_params.get("page", "1")
    number = int(raw_page) if raw_page.isdigit() and 1 <= int(raw_page) <= 10**6 else 1
    params = {"offset": str((number - 1) * PAGE_SIZE), "limit": str(PAGE_SIZE)}
    if chosen:
        params["connection"] = chosen
    async with request.app.state.components.engines.lease(workspace.id) as lease:
        found = await admin.activity(lease.client, params)
    error = found.message if isinstance(found, ToolRefusal) else None
    reply: Mapping[str, Any] = {"entries": [], "more": False} if isinstance(found, ToolRefusal) else found
    connections = context(request).store.connections.of_owner(session.owner_id, include_revoked=True)
    known = {c.id: Known(c.name, KINDS.get(c.kind, c.kind), c.revoked_at is not None) for c in connections}
    choices = sorted(
        (
            (c.id, c.name + (" (revoked)" if c.revoked_at else ""))
            for c in connections
            if c.workspace_id == workspace.id
        ),
        key=lambda choice: (choice[1].casefold(), choice[0]),
    )
    chosen_name = next((label for cid, label in choices if cid == chosen), chosen)
    keep = {"workspace": workspace.name} | ({"connection": chosen} if chosen else {})
    return render(
        request,
        "activity.html",
        workspace=workspace,
        workspaces=workspaces,
        rows=[row_of(e, known) for e in reply["entries"]],
        chosen=chosen,
        chosen_name=chosen_name,
        choices=choices,
        page=number,
        newer=urlencode(keep | {"page": str(number - 1)}) if number > 1 else None,
        older=urlencode(keep | {"page": str(number + 1)}) if reply.get("more") else None,
        error=error,
        info=None,
    )


def routes() -> list[BaseRoute]:
    return [Route("/activity", activity_page, methods=["GET"])]
