"""Settings, activity and connections over REST (``/api/v1/admin/settings``, ``…/activity``,
``…/connections``; part of ``gw:rest``): what the Settings, Activity and Connections pages do, for
programs.

Bearer auth exactly like ``/mcp``, on the token's own workspace. Reading is open to every
connection; a connection pinned to a scope sees only the activity of its scope. Changing settings
or revoking a connection is refused to a read-only connection (``read_only``) and to one pinned to
a scope (``forbidden``: both act on the whole workspace). A settings change is checked field by
field by the engine (a refusal carries ``fields``, name → what to fix, and saves nothing); after
one, the workspace's engine is restarted so that it runs with it, and the reply is what the new
engine runs with. Changes are audited (``settings.change``, ``token.revoke``).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway.api.contract import Endpoint, error_responses, unknown_fields
from gateway.api.guard import guarded
from gateway.control.records import Connection, Principal
from gateway.control.store import ControlPlane
from gateway.edge.proxy import Engines
from gateway.engines import admin
from gateway.engines.calls import ToolRefusal
from gateway.errors import Forbidden, PayloadTooLarge, TokenNotFound

SETTINGS, ACTIVITY, CONNECTIONS = "/admin/settings", "/admin/activity", "/admin/connections"
MAX_BODY = 64 * 1024
OPERATION_IDS = ("get_settings", "change_settings", "list_activity", "list_connections", "revoke_connection")

Audit = Callable[[str, Principal, "str | None", dict[str, object]], None]
Restart = Callable[[str], Awaitable[None]]
PrincipalOf = Callable[[Request], Awaitable[Principal]]

_TEXT_OR_NULL = {"anyOf": [{"type": "string"}, {"type": "null"}]}
SETTING = {
    "type": "object",
    "required": ["name", "group", "help", "kind", "value", "origin", "saved", "override", "inherited"],
    "properties": {
        "name": {"type": "string"},
        "group": {"type": "string"},
        "help": {"type": "string"},
        "kind": {"type": "string", "enum": ["bool", "int", "float", "str"]},
        "optional": {"type": "boolean"},
        "min": {"anyOf": [{"type": "number"}, {"type": "null"}]},
        "max": {"anyOf": [{"type": "number"}, {"type": "null"}]},
        "choices": {"type": "array", "items": {"type": "string"}},
        "default": {},
        "value": {"description": "what the engine runs with"},
        "origin": {"type": "string", "enum": ["default", "instance", "workspace", "command line"]},
        "saved": {"description": "what the settings files say now (differs only until a restart)"},
        "override": {"type": "boolean", "description": "the workspace sets it"},
        "inherited": {"description": "the instance default: what clearing the override goes back to"},
    },
}
SETTINGS_REPLY = {
    "type": "object",
    "required": ["fields", "problems", "restart_needed", "provider"],
    "properties": {
        "fields": {"type": "array", "items": SETTING},
        "problems": {"type": "array", "items": {"type": "string"}},
        "restart_needed": {"type": "boolean"},
        "provider": {
            "anyOf": [{"type": "null"}, {"type": "object", "required": ["provider", "state"]}],
            "description": "the embedding provider's state and notes (null while it is checked)",
        },
    },
}
SETTINGS_CHANGE = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "set": {
            "type": "object",
            "description": "setting name → value (JSON, or text read as the setting's kind)",
        },
        "clear": {"type": "array", "items": {"type": "string"}, "description": "overrides to remove"},
    },
}
ACTIVITY_REPLY = {
    "type": "object",
    "required": ["entries", "offset", "limit", "more"],
    "properties": {
        "entries": {
            "type": "array",
            "items": {
                "type": "object",
                "description": "one retrieval-log line: ts, query_sha256 (or query where logged), "
                "scope, destination, mode, loaded, trimmed, kept, scores, tokens, latency_ms, "
                "connection_id (the log keeps the connection's id, never its name), connection (its "
                "name now, added by the gateway), source (a stdio client's self-reported name)",
            },
        },
        "offset": {"type": "integer", "minimum": 0},
        "limit": {"type": "integer", "minimum": 1},
        "more": {"type": "boolean"},
    },
}
CONNECTION = {
    "type": "object",
    "required": ["id", "name", "kind", "client", "read_only", "scope", "created_at", "last_used_at"],
    "properties": {
        "id": {"type": "string"},
        "name": {"type": "string"},
        "kind": {"type": "string", "enum": ["pat", "oauth"]},
        "client": _TEXT_OR_NULL,
        "read_only": {"type": "boolean"},
        "scope": _TEXT_OR_NULL,
        "reads_unscoped": {
            "type": "boolean",
            "description": "Pinned (scope set): whether it also reads unscoped memories; false otherwise",
        },
        "created_at": {"type": "string"},
        "last_used_at": _TEXT_OR_NULL,
        "revoked_at": _TEXT_OR_NULL,
    },
}


def connection_json(c: Connection) -> dict[str, Any]:
    """A connection as the API shows it (never a token: only hashes are stored)."""
    return {
        "id": c.id,
        "name": c.name,
        "kind": c.kind,
        "client": c.client_name or c.client_id,
        "read_only": c.read_only,
        "scope": c.scope,
        "reads_unscoped": c.reads_unscoped,
        "created_at": c.created_at,
        "last_used_at": c.last_used_at,
        "revoked_at": c.revoked_at,
    }


def refusal(code: str, message: str, status: int, fields: dict[str, str] | None = None) -> JSONResponse:
    error: dict[str, Any] = {"code": code, "message": message}
    if fields:
        error["fields"] = fields
    return JSONResponse({"error": error}, status_code=status)


def _require_changes_allowed(who: Principal, what: str) -> None:
    if who.read_only:
        raise _ReadOnly(f"this connection is read-only: it can read {what} but not change them")
    if who.scope is not None:
        raise Forbidden(
            f"this connection is pinned to scope {who.scope!r}; {what} belong to the whole workspace, "
            "so only a connection without a pinned scope may change them"
        )


class _ReadOnly(Forbidden):
    code = "read_only"


class OwnerApi:
    def __init__(
        self,
        *,
        principal: PrincipalOf,
        engines: Engines,
        store: ControlPlane,
        audit: Audit | None,
        restart: Restart | None,
    ) -> None:
        self.principal = principal
        self.engines = engines
        self.store = store
        self.audit = audit
        self.restart = restart

    def handlers(self, prefix: str) -> list[tuple[str, str, Endpoint]]:
        """(method, path, endpoint) of each operation."""
        return [
            ("GET", prefix + SETTINGS, guarded(self.settings)),
            ("PATCH", prefix + SETTINGS, guarded(self.change)),
            ("GET", prefix + ACTIVITY, guarded(self.activity)),
            ("GET", prefix + CONNECTIONS, guarded(self.connections)),
            ("DELETE", prefix + CONNECTIONS + "/{id}", guarded(self.revoke)),
        ]

    async def _read_settings(self, workspace_id: str) -> dict[str, Any] | ToolRefusal:
        async with self.engines.lease(workspace_id) as lease:
            return await admin.settings(lease.client)

    async def settings(self, request: Request) -> Response:
        who = await self.principal(request)
        found = await self._read_settings(who.workspace_id)
        if isinstance(found, ToolRefusal):  # pragma: no cover - the engine refuses no read
            return refusal(found.code, found.message, 400)
        return JSONResponse(found)

    async def change(self, request: Request) -> Response:
        who = await self.principal(request)
        _require_changes_allowed(who, "settings")
        raw = await _body(request)
        try:
            body = json.loads(raw) if raw.strip() else None
        except ValueError:
            body = None
        shape = 'the body must be a JSON object {"set": {name: value}, "clear": [name]}'
        if not isinstance(body, dict):
            return refusal("invalid_input", shape, 400)
        unknown = unknown_fields(body, ("set", "clear"))
        if unknown is not None:
            return refusal("invalid_input", unknown, 400)
        changes, clear = body.get("set", {}), body.get("clear", [])
        if not isinstance(changes, dict) or not isinstance(clear, list):
            return refusal("invalid_input", shape, 400)
        async with self.engines.lease(who.workspace_id) as lease:
            result = await admin.save_settings(lease.client, changes, [str(c) for c in clear])
        if isinstance(result, ToolRefusal):
            return refusal(result.code, result.message, 400, dict(result.fields))
        if result.get("restart_needed"):
            self._audit("settings.change", who, request, {"set": sorted(changes), "clear": sorted(clear)})
            if self.restart is not None:
                await self.restart(who.workspace_id)
                result = await self._read_settings(who.workspace_id)
                if isinstance(result, ToolRefusal):  # pragma: no cover - the engine refuses no read
                    return refusal(result.code, result.message, 400)
        return JSONResponse(result)

    async def activity(self, request: Request) -> Response:
        who = await self.principal(request)
        params = dict(request.query_params)  # only those documented, each once (contract.path_route)
        if who.scope is not None:
            params["scope"] = who.scope
        async with self.engines.lease(who.workspace_id) as lease:
            found = await admin.activity(lease.client, params)
        if isinstance(found, ToolRefusal):
            return refusal(found.code, found.message, 400)
        names = {c.id: c.name for c in self.store.connections.of_owner(who.owner_id, include_revoked=True)}
        for entry in found["entries"]:
            connection_id = entry.get("connection_id")
            entry["connection"] = names.get(connection_id) if connection_id else entry.get("source")
        return JSONResponse(found)

    def _mine(self, who: Principal) -> list[Connection]:
        return [
            c for c in self.store.connections.of_owner(who.owner_id) if c.workspace_id == who.workspace_id
        ]

    async def connections(self, request: Request) -> Response:
        who = await self.principal(request)
        return JSONResponse({"connections": [connection_json(c) for c in self._mine(who)]})

    async def revoke(self, request: Request) -> Response:
        who = await self.principal(request)
        _require_changes_allowed(who, "connections")
        wanted = str(request.path_params["id"])
        target = next((c for c in self._mine(who) if c.id == wanted), None)
        if target is None:
            raise TokenNotFound(
                f"no live connection {wanted!r} in this workspace; GET {CONNECTIONS} lists them"
            )
        remote = request.client.host if request.client else None
        revoked = self.store.connections.revoke(who.owner_id, target.id, remote=remote, via="api")
        return JSONResponse({"connection": connection_json(revoked)})

    def _audit(self, kind: str, who: Principal, request: Request, detail: dict[str, object]) -> None:
        if self.audit is not None:
            self.audit(kind, who, request.client.host if request.client else None, detail)


async def _body(request: Request) -> bytes:
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise PayloadTooLarge(f"a settings change is at most {MAX_BODY} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _op(
    operation_id: str,
    summary: str,
    description: str,
    reply: dict[str, Any],
    statuses: tuple[int, ...],
    **extra: Any,
) -> dict[str, Any]:
    return {
        "operationId": operation_id,
        "summary": summary,
        "description": description,
        "security": [{"bearer": []}],
        "responses": {
            "200": {"description": "Done", "content": {"application/json": {"schema": reply}}},
            **error_responses(*statuses),
        },
        **extra,
    }


def openapi_paths(prefix: str) -> dict[str, Any]:
    """The OpenAPI entries of these operations."""
    activity_query = [
        {
            "name": "limit",
            "in": "query",
            "required": False,
            "schema": {"type": "integer", "minimum": 1, "maximum": 200},
        },
        {"name": "offset", "in": "query", "required": False, "schema": {"type": "integer", "minimum": 0}},
        {"name": "connection", "in": "query", "required": False, "schema": {"type": "string"}},
        {"name": "source", "in": "query", "required": False, "schema": {"type": "string"}},
    ]
    return {
        prefix + SETTINGS: {
            "get": _op(
                "get_settings",
                "Every memory setting of the workspace",
                "Each setting with what it does, its kind and limits, the value the engine runs with "
                "and where it came from, the instance default, whether the workspace overrides it; "
                "and the embedding provider's state and notes.",
                SETTINGS_REPLY,
                (410,),
            ),
            "patch": _op(
                "change_settings",
                "Set or clear workspace overrides",
                "Each value is checked on its own; any refusal names the fields and saves nothing. "
                "After a change the workspace's engine restarts and the reply is what it runs with.",
                SETTINGS_REPLY,
                (410, 413),
                requestBody={"required": True, "content": {"application/json": {"schema": SETTINGS_CHANGE}}},
            ),
        },
        prefix + ACTIVITY: {
            "get": _op(
                "list_activity",
                "The retrieval log, newest first",
                "What memory put in front of a model: when, through which connection, the query's "
                "SHA-256 (or the query where the workspace logs queries), the ids returned. Never a "
                "memory's words. A scope-pinned connection sees its scope's entries only.",
                ACTIVITY_REPLY,
                (410,),
                parameters=activity_query,
            ),
        },
        prefix + CONNECTIONS: {
            "get": _op(
                "list_connections",
                "The workspace's live connections",
                "Personal access tokens and OAuth grants of this workspace (never a token).",
                {
                    "type": "object",
                    "required": ["connections"],
                    "properties": {"connections": {"type": "array", "items": CONNECTION}},
                },
                (),
            ),
        },
        prefix + CONNECTIONS + "/{id}": {
            "delete": _op(
                "revoke_connection",
                "Revoke a connection",
                "Every token of the connection stops working at once.",
                {"type": "object", "required": ["connection"], "properties": {"connection": CONNECTION}},
                (404,),
                parameters=[
                    {
                        "name": "id",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string", "minLength": 1},
                    }
                ],
            ),
        },
    }
