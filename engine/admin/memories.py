"""``GET /admin/memories``: the owner's listing of a workspace, every memory whatever its state.

Listing is pure over a snapshot of the store (:func:`rows`, :func:`select`, :func:`parse_query`);
the owner sees what agents cannot (retired and archived memories too).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import date, datetime

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from engine.admin.common import Parts, refusing
from engine.errors import InvalidInput, NotFound
from engine.scope import Caller, visible
from engine.store import ids
from engine.store.model import State
from engine.store.workspace import Workspace

KINDS = ("fact", "note", "log")
DELETED = "deleted"  # a tombstone: what the owner deleted for good (its id, when, by whom; no content)
STATES = (*(s.value for s in State), DELETED)
MAX_LIMIT = 200
PREVIEW = 300


@dataclass(frozen=True)
class Row:
    id: str
    kind: str
    text: str
    state: str
    scope: str | None
    source: str | None
    created: str
    current: bool | None = None  # facts: whether a value is current (a superseded-away fact is not)


@dataclass(frozen=True)
class Query:
    kind: str | None = None
    state: str | None = None
    scope: str | None = None
    source: str | None = None
    text: str | None = None
    since: date | None = None
    until: date | None = None
    offset: int = 0
    limit: int = 50


def _iso(moment: datetime | None) -> str:
    return moment.isoformat().replace("+00:00", "Z") if moment else ""


def rows(ws: Workspace) -> list[Row]:
    """Every memory in the store, one row each (a fact is one row, showing its latest value)."""
    found: list[Row] = []
    with ws.lock:
        for record in ws.facts.records.values():
            if not record.values:
                continue
            last = record.values[-1]
            found.append(
                Row(
                    id=record.fact_id,
                    kind="fact",
                    text=f"{last.subject} · {last.predicate}: {last.object}",
                    state="retired" if record.retired else "live",
                    scope=record.scope,
                    source=last.source.name if last.source else None,
                    created=_iso(record.values[0].valid_from),
                    current=record.current is not None,
                )
            )
        for note_record in ws.notes.values():
            note = note_record.note
            found.append(
                Row(
                    id=note.id,
                    kind="note",
                    text=note.body,
                    state=note_record.state.value,
                    scope=note.scope,
                    source=note.source.name if note.source else None,
                    created=_iso(note.created),
                )
            )
        for log_record in ws.logs.values():
            entry = log_record.entry
            found.append(
                Row(
                    id=entry.id,
                    kind="log",
                    text=entry.text,
                    state=log_record.state.value,
                    scope=entry.scope,
                    source=entry.source.name if entry.source else None,
                    created=_iso(entry.time),
                )
            )
        for memory_id, event in ws.deleted.items():
            found.append(
                Row(
                    id=memory_id,
                    kind=ids.kind_of(memory_id) or "note",
                    text="deleted",
                    state=DELETED,
                    scope=None,
                    source=event.source.name if event.source else None,
                    created=_iso(event.time),
                )
            )
    return found


def select(all_rows: list[Row], query: Query) -> tuple[list[Row], int]:
    """The rows matching ``query``, newest first, one page of them, and how many matched in all."""
    needle = query.text.casefold() if query.text else None
    source = query.source.casefold() if query.source else None

    def keep(row: Row) -> bool:
        day = date.fromisoformat(row.created[:10]) if row.created else None
        return (
            (query.kind is None or row.kind == query.kind)
            and (query.state is None or row.state == query.state)
            and (query.scope is None or row.scope == query.scope)
            and (source is None or (row.source or "").casefold() == source)
            and (needle is None or needle in row.text.casefold() or needle == row.id.casefold())
            and (query.since is None or (day is not None and day >= query.since))
            and (query.until is None or (day is not None and day <= query.until))
        )

    matched = sorted((r for r in all_rows if keep(r)), key=lambda r: (r.created, r.id), reverse=True)
    return matched[query.offset : query.offset + query.limit], len(matched)


_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_WHOLE = re.compile(r"[0-9]{1,12}")


def _choice(params: Mapping[str, str], name: str, allowed: tuple[str, ...]) -> str | None:
    value = params.get(name)
    if value is not None and value not in allowed:
        raise InvalidInput(f"{name} must be one of {', '.join(allowed)}, not {value!r}")
    return value


def _day(params: Mapping[str, str], name: str) -> date | None:
    value = params.get(name)
    if value is None:
        return None
    try:
        if not _DAY.fullmatch(value):
            raise ValueError(value)
        return date.fromisoformat(value)
    except ValueError:
        raise InvalidInput(f"{name} must be a date, YYYY-MM-DD, not {value!r}") from None


def _count(params: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    value = params.get(name)
    if value is None:
        return default
    if not _WHOLE.fullmatch(value) or not low <= int(value) <= high:
        raise InvalidInput(f"{name} must be a whole number from {low} to {high}, not {value!r}")
    return int(value)


def parse_query(params: Mapping[str, str]) -> Query:
    """A :class:`Query` from request parameters; a bad one raises ``InvalidInput`` saying what to fix."""
    return Query(
        kind=_choice(params, "kind", KINDS),
        state=_choice(params, "state", STATES),
        scope=params.get("scope") or None,
        source=params.get("source") or None,
        text=(params.get("q") or "").strip() or None,
        since=_day(params, "since"),
        until=_day(params, "until"),
        offset=_count(params, "offset", 0, 0, 10**9),
        limit=_count(params, "limit", 50, 1, MAX_LIMIT),
    )


def seen_by(all_rows: list[Row], pinned: str | None, unscoped: bool = False) -> list[Row]:
    """What a connection pinned to scope ``pinned`` may list: that scope — and unscoped memories
    when it reads them (``unscoped``) — and no tombstones (None: everything)."""
    if pinned is None:
        return all_rows
    caller = Caller(pinned_scope=pinned, reads_unscoped=unscoped)
    return [r for r in all_rows if r.state != DELETED and visible(caller, r.scope)]


def _pin(params: Mapping[str, str]) -> tuple[str | None, bool]:
    """``?pinned=<scope>`` (and ``&unscoped=1`` when that connection reads unscoped memories)."""
    return params.get("pinned") or None, params.get("unscoped") == "1"


def retirement(ws: Workspace, memory_id: str) -> dict[str, str | None] | None:
    """When a retired memory was retired, by whom and why (its retire event), or None if the
    ledger does not say (a note retired by moving its file by hand)."""
    with ws.lock:
        event = ws.retirements.get(memory_id)
    if event is None:
        return None
    by = event.source.name if event.source else None
    return {"at": _iso(event.time), "by": by, "reason": event.reason}


def routes(parts: Parts) -> list[BaseRoute]:
    """``GET /admin/memories`` and ``GET /admin/memories/{id}`` (``?pinned=<scope>`` for a connection
    pinned to a scope, ``&unscoped=1`` if it reads unscoped memories), ``POST
    /admin/memories/{id}/delete``."""

    @refusing
    async def list_memories(request: Request) -> Response:
        query = parse_query(request.query_params)
        everything = seen_by(rows(parts.workspace), *_pin(request.query_params))
        page, total = select(everything, query)
        items = [{**asdict(r), "text": r.text[:PREVIEW]} for r in page]
        facets = {
            "scopes": sorted({r.scope for r in everything if r.scope}),
            "sources": sorted({r.source for r in everything if r.source}),
        }
        return JSONResponse(
            {"items": items, "total": total, "offset": query.offset, "limit": query.limit, "facets": facets}
        )

    @refusing
    async def one(request: Request) -> Response:
        memory_id = request.path_params["memory_id"]
        found = [r for r in seen_by(rows(parts.workspace), *_pin(request.query_params)) if r.id == memory_id]
        if not found:
            raise NotFound(f"no memory has the id {memory_id!r}; ids look like fct_…, nte_… or log_…")
        item: dict[str, object] = asdict(found[0])
        if found[0].state == State.RETIRED.value:
            item["retired"] = retirement(parts.workspace, memory_id)
        return JSONResponse({"item": item})

    @refusing
    async def delete(request: Request) -> Response:
        """Delete a retired memory for good (``life:delete``); ``{"source": who}`` names the owner's
        connection for the ledger's ``delete`` event, ``"pinned"`` its scope if it is pinned to one."""
        try:
            body = await request.json()
        except ValueError:
            body = None
        source = body.get("source") if isinstance(body, dict) else None
        if not isinstance(source, str) or not source.strip():
            raise InvalidInput('send {"source": "<who deletes>"} as the JSON body')
        pinned = body.get("pinned") if isinstance(body, dict) else None
        if pinned is not None and not isinstance(pinned, str):
            raise InvalidInput("pinned must be a scope (text) or null")
        caller = Caller(connection=source.strip(), pinned_scope=pinned or None)
        receipt = await anyio.to_thread.run_sync(
            parts.memory.delete, caller, request.path_params["memory_id"]
        )
        return JSONResponse(
            {
                "action": receipt.action,
                "event_id": receipt.event_id,
                "id": receipt.id,
                "kind": receipt.kind,
                "source": receipt.source,
            }
        )

    return [
        Route("/admin/memories", list_memories, methods=["GET"]),
        Route("/admin/memories/{memory_id}", one, methods=["GET"]),
        Route("/admin/memories/{memory_id}/delete", delete, methods=["POST"]),
    ]
