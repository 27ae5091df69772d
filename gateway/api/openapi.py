"""The REST operations and the OpenAPI document built from them (pure).

Each operation is one memory tool; its request and response schemas are the tool's own, from
``tools.json`` (a snapshot of what a real engine lists, kept current by a test). Nothing here
talks to an engine.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

from .admin import ADMIN_OPERATIONS, AdminOperation
from .owner import openapi_paths as owner_paths
from .transfer import openapi_paths

SNAPSHOT = Path(__file__).with_name("tools.json")
PREFIX = "/api/v1"


@dataclass(frozen=True)
class Operation:
    method: Literal["GET", "POST"]
    path: str  # under PREFIX, with {id} where the memory id goes
    tool: str
    summary: str
    arguments: Literal["body", "query", "none"]  # where the tool's other arguments come from

    @property
    def path_params(self) -> tuple[str, ...]:
        return ("id",) if "{id}" in self.path else ()

    @property
    def operation_id(self) -> str:
        return self.tool + ("_by_id" if self.path_params and self.tool == "retrieve_memory" else "")


OPERATIONS: tuple[Operation, ...] = (
    Operation("POST", "/memories", "remember", "Save a fact or a note", "body"),
    Operation("POST", "/facts", "save_memory", "Save a fact (subject, predicate, object)", "body"),
    Operation("POST", "/log", "remember_note", "Append an entry to a day's log", "body"),
    Operation("GET", "/memories", "retrieve_memory", "Look up facts by subject and predicate", "query"),
    Operation("GET", "/memories/{id}", "retrieve_memory", "One memory by id", "query"),
    Operation("POST", "/memories/{id}/retire", "retire_memory", "Take a memory out of recall", "body"),
    Operation("POST", "/memories/{id}/restore", "restore_memory", "Put a retired memory back", "none"),
    Operation("POST", "/context", "get_context", "Current facts and closest notes for a task", "body"),
    Operation("GET", "/status", "memory_status", "Counts, storage, index and settings", "none"),
)

# The status a tool refusal is answered with, by the tool's code (anything else is 400: a tool
# error is by definition something the caller can fix).
REFUSAL_STATUS = {
    "not_found": 404,
    "forbidden": 403,
    "read_only": 403,
    "workspace_locked": 503,
    "store_unavailable": 503,
    "not_retired": 409,
    "kept_as_is": 409,
}

ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
        }
    },
}


@cache
def tools() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    return loaded


def argument_schemas(op: Operation) -> dict[str, Any]:
    """The tool's properties that this operation takes from its body or query (not the path)."""
    props = tools()[op.tool]["inputSchema"].get("properties", {})
    if op.arguments == "none":
        return {}
    return {k: v for k, v in props.items() if k not in op.path_params}


def required_arguments(op: Operation) -> list[str]:
    required = tools()[op.tool]["inputSchema"].get("required", [])
    return [r for r in required if r in argument_schemas(op)]


def not_null(schema: dict[str, Any]) -> dict[str, Any]:
    """``anyOf: [X, null]`` → ``X`` (a query parameter is absent rather than null)."""
    options = [s for s in schema.get("anyOf", []) if s.get("type") != "null"]
    if len(options) == 1:
        rest = {k: v for k, v in schema.items() if k != "anyOf"}
        return {**rest, **options[0]}
    return schema


def _hoist(schema: Any, defs: dict[str, Any]) -> Any:
    """A schema with its ``$defs`` moved to components and its refs pointed there."""
    if isinstance(schema, list):
        return [_hoist(s, defs) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "$defs":
            for name, sub in value.items():
                hoisted = _hoist(sub, defs)
                if defs.setdefault(name, hoisted) != hoisted:
                    raise ValueError(f"two different schemas are both called {name}")
        elif key == "$ref" and isinstance(value, str) and value.startswith("#/$defs/"):
            out[key] = "#/components/schemas/" + value.removeprefix("#/$defs/")
        else:
            out[key] = _hoist(value, defs)
    return out


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": ERROR}}}


def _admin_spec(op: AdminOperation) -> dict[str, Any]:
    """An admin operation's OpenAPI entry (its schemas are written out in :mod:`.admin`)."""
    return {
        "operationId": op.operation_id,
        "summary": op.summary,
        "description": op.description,
        "security": [{"bearer": []}],
        "parameters": [
            {"name": p, "in": "path", "required": True, "schema": {"type": "string", "minLength": 1}}
            for p in op.path_params
        ]
        + [{"name": n, "in": "query", "required": False, "schema": dict(s)} for n, s in op.query.items()],
        "responses": {
            "200": {"description": "Done", "content": {"application/json": {"schema": dict(op.response)}}},
            "400": _error("Refused: the message says what to fix; nothing was changed"),
            "401": _error("No usable bearer token"),
            "403": _error("This connection may not do that (read-only)"),
            "404": _error("No memory has that id (or this connection may not see it)"),
            "409": _error("Not in a state that allows it (only a retired memory can be deleted)"),
            "429": _error("Too many requests on this connection; see Retry-After"),
            "503": _error("The workspace cannot be started right now; see Retry-After"),
        },
    }


def document(server_url: str = "/") -> dict[str, Any]:
    """The OpenAPI 3.1 document of the REST API."""
    defs: dict[str, Any] = {}
    paths: dict[str, Any] = {}
    for op in OPERATIONS:
        tool = tools()[op.tool]
        spec: dict[str, Any] = {
            "operationId": op.operation_id,
            "summary": op.summary,
            "description": tool["description"],
            "security": [{"bearer": []}],
            "parameters": [
                {"name": p, "in": "path", "required": True, "schema": {"type": "string", "minLength": 1}}
                for p in op.path_params
            ],
            "responses": {
                "200": {
                    "description": "The tool's result",
                    "content": {"application/json": {"schema": _hoist(tool["outputSchema"] or {}, defs)}},
                },
                "400": _error("Refused: the message says what to fix; nothing was written"),
                "401": _error("No usable bearer token"),
                "403": _error("This connection may not do that (read-only, pinned scope)"),
                "404": _error("No memory has that id"),
                "413": _error("The request body is too large"),
                "429": _error("Too many requests on this connection; see Retry-After"),
                "503": _error("The workspace cannot be started right now; see Retry-After"),
            },
        }
        arguments = argument_schemas(op)
        if op.arguments == "query":
            spec["parameters"] += [
                {"name": name, "in": "query", "required": False, "schema": _hoist(not_null(schema), defs)}
                for name, schema in arguments.items()
            ]
        elif op.arguments == "body":
            body = {
                "type": "object",
                "properties": _hoist(arguments, defs),
                "required": required_arguments(op),
                "additionalProperties": False,
            }
            spec["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
        paths.setdefault(PREFIX + op.path, {})[op.method.lower()] = spec
    for admin in ADMIN_OPERATIONS:
        paths.setdefault(PREFIX + admin.path, {})[admin.method.lower()] = _admin_spec(admin)
    paths.update(openapi_paths(PREFIX))
    paths.update(owner_paths(PREFIX))
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Almanac REST API",
            "version": "1",
            "description": "The memory tools and the owner's admin surface over plain HTTP: same "
            "tokens, rules and refusals as /mcp.",
        },
        "servers": [{"url": server_url}],
        "paths": paths,
        "components": {
            "schemas": defs,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
