"""The owner's admin surface over REST (``/api/v1/admin/…``, part of ``gw:rest``).

Each :class:`AdminOperation` mirrors one call of the engine's ``/admin`` surface (through
:mod:`gateway.engines.admin`), with bearer auth exactly like ``/mcp``: a read-only connection may
read but not change (``read_only``), a connection pinned to a scope sees only that scope (and
unscoped memories if the owner chose so for it). Add one with one entry in
:data:`ADMIN_OPERATIONS`; the OpenAPI document and the routes pick it up.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

from gateway.control.records import Principal
from gateway.engines import admin as engine_admin
from gateway.engines.calls import ToolRefusal

from .contract import unknown_query

Call = Callable[
    [httpx.AsyncClient, Principal, Mapping[str, str], Mapping[str, str]],
    Awaitable[dict[str, Any] | ToolRefusal],
]

NULLABLE_TEXT = {"anyOf": [{"type": "string"}, {"type": "null"}]}
ROW = {
    "type": "object",
    "required": ["id", "kind", "text", "state", "scope", "source", "created"],
    "properties": {
        "id": {"type": "string"},
        "kind": {"type": "string", "enum": ["fact", "note", "log"]},
        "text": {"type": "string", "description": "a preview; 'deleted' for a deleted memory"},
        "state": {"type": "string", "enum": ["live", "archived", "retired", "deleted"]},
        "scope": NULLABLE_TEXT,
        "source": NULLABLE_TEXT,
        "created": {"type": "string", "description": "saved (deleted, for a deleted memory), ISO 8601"},
        "current": {"anyOf": [{"type": "boolean"}, {"type": "null"}]},
    },
}
LISTING = {
    "type": "object",
    "required": ["items", "total", "offset", "limit", "facets"],
    "properties": {
        "items": {"type": "array", "items": ROW},
        "total": {"type": "integer", "minimum": 0},
        "offset": {"type": "integer", "minimum": 0},
        "limit": {"type": "integer", "minimum": 1},
        "facets": {
            "type": "object",
            "required": ["scopes", "sources"],
            "properties": {
                "scopes": {"type": "array", "items": {"type": "string"}},
                "sources": {"type": "array", "items": {"type": "string"}},
            },
        },
    },
}
LIST_QUERY: dict[str, Any] = {
    "q": {"type": "string", "description": "words in the memory, or its id"},
    "kind": {"type": "string", "enum": ["fact", "note", "log"]},
    "state": {"type": "string", "enum": ["live", "archived", "retired", "deleted"]},
    "scope": {"type": "string"},
    "source": {"type": "string", "description": "who wrote it (a connection name)"},
    "since": {"type": "string", "format": "date", "description": "saved on or after (YYYY-MM-DD)"},
    "until": {"type": "string", "format": "date", "description": "saved on or before (YYYY-MM-DD)"},
    "offset": {"type": "integer", "minimum": 0, "maximum": 1_000_000_000},
    "limit": {"type": "integer", "minimum": 1, "maximum": 200},
}
DELETED = {
    "type": "object",
    "required": ["action", "event_id", "id", "kind", "source"],
    "properties": {
        "action": {"const": "delete"},
        "event_id": {"type": "string"},
        "id": {"type": "string"},
        "kind": {"type": "string", "enum": ["fact", "note", "log"]},
        "source": {"type": "string"},
    },
}


@dataclass(frozen=True)
class AdminOperation:
    method: Literal["GET", "DELETE"]
    path: str  # under /api/v1, with {id} where a memory id goes
    operation_id: str
    summary: str
    description: str
    writes: bool  # refused for a read-only connection
    query: Mapping[str, Any]  # query parameter -> JSON schema
    response: Mapping[str, Any]  # the 200 reply's schema
    call: Call
    audit: str | None = None  # the audit event written after it succeeds
    statuses: tuple[int, ...] = (410,)  # its error statuses besides contract.ALWAYS (410: node lost)
    links: Mapping[str, Any] = field(default_factory=dict)  # OpenAPI links of its 200 reply

    @property
    def path_params(self) -> tuple[str, ...]:
        return ("id",) if "{id}" in self.path else ()


def pin_params(who: Principal) -> dict[str, str]:
    """The query that narrows a listing to what a pinned connection reads (empty when not pinned)."""
    if who.scope is None:
        return {}
    return {"pinned": who.scope, "unscoped": "1" if who.reads_unscoped else "0"}


async def _list(
    client: httpx.AsyncClient, who: Principal, path: Mapping[str, str], query: Mapping[str, str]
) -> dict[str, Any] | ToolRefusal:
    return await engine_admin.list_memories(client, dict(query) | pin_params(who))


async def _one(
    client: httpx.AsyncClient, who: Principal, path: Mapping[str, str], query: Mapping[str, str]
) -> dict[str, Any] | ToolRefusal:
    return await engine_admin.memory_item(client, path["id"], pin_params(who))


OWNER_ONLY = (
    "permanent deletion is the owner's alone (life:delete: agents cannot delete): sign in to the "
    "dashboard, open the retired memory under Memories and choose Delete permanently. A "
    "connection's token may list memories and retire them, never delete them"
)


async def _delete(
    client: httpx.AsyncClient, who: Principal, path: Mapping[str, str], query: Mapping[str, str]
) -> dict[str, Any] | ToolRefusal:
    """Refused to every bearer token, before the engine is asked: the token of a connection is
    an agent's, and agents cannot delete (``life:delete``)."""
    return ToolRefusal("forbidden", OWNER_ONLY)


ADMIN_OPERATIONS: tuple[AdminOperation, ...] = (
    AdminOperation(
        "GET",
        "/admin/memories",
        "list_memories",
        "List memories in every state",
        "Every fact, note and log entry of the workspace — live, archived, retired, and what was "
        "deleted (id, when, by whom) — newest first, filtered and paged.",
        False,
        LIST_QUERY,
        LISTING,
        _list,
        links={
            "first": {"operationId": "list_memory_by_id", "parameters": {"id": "$response.body#/items/0/id"}}
        },
    ),
    AdminOperation(
        "GET",
        "/admin/memories/{id}",
        "list_memory_by_id",
        "One memory's listing row",
        "The memory's row as the listing shows it (a deleted memory: its tombstone).",
        False,
        {},
        {"type": "object", "required": ["item"], "properties": {"item": ROW}},
        _one,
        statuses=(404, 410),
    ),
    AdminOperation(
        "DELETE",
        "/admin/memories/{id}",
        "delete_memory",
        "Delete a retired memory permanently (owner only: refused to tokens)",
        "Permanent deletion is the owner's alone, on the dashboard (life:delete: agents cannot "
        "delete). Every bearer token gets 403 forbidden (403 read_only for a read-only one) and "
        "nothing changes; retire the memory instead, and the owner deletes it from the dashboard.",
        True,
        {},
        DELETED,
        _delete,
    ),
)


def query_of(op: AdminOperation, pairs: list[tuple[str, str]]) -> dict[str, str]:
    """The operation's query parameters (raw text; the engine checks their values), or ValueError."""
    problem = unknown_query(pairs, op.query)
    if problem is not None:
        raise ValueError(problem)
    return dict(pairs)
