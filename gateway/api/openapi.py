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
from .contract import error_responses
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
    Operation("POST", "/memories/{id}/restore", "restore_memory", "Put a retired memory back", "body"),
    Operation("POST", "/context", "get_context", "Current facts and closest notes for a task", "body"),
    Operation("GET", "/status", "memory_status", "Counts, storage, index and settings", "none"),
)

#: Tools that look a memory up by its id (404 when there is none), and those that change its state
#: (409 when it is not in one that allows it).
FINDS_BY_ID = frozenset({"retrieve_memory", "retire_memory", "restore_memory"})
CHANGES_STATE = frozenset({"retire_memory", "restore_memory"})

#: Where a memory's id leads after a write returned it (OpenAPI links: clients and the stateful
#: contract test follow them).
_BY_ID = {"id": "$response.body#/id"}
WRITE_LINKS = {
    "retrieve": {"operationId": "retrieve_memory_by_id", "parameters": _BY_ID},
    "retire": {"operationId": "retire_memory", "parameters": _BY_ID},
    "restore": {"operationId": "restore_memory", "parameters": _BY_ID},
    "listing": {"operationId": "list_memory_by_id", "parameters": _BY_ID},
}

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


def tool_statuses(op: Operation) -> tuple[int, ...]:
    """The error statuses a tool's operation may answer with, besides :data:`.contract.ALWAYS`."""
    found = [410]  # its workspace's node declared lost
    if op.arguments == "body":
        found.append(413)
    if op.tool in FINDS_BY_ID:
        found.append(404)
    if op.tool in CHANGES_STATE:
        found.append(409)
    return tuple(found)


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
            "200": {
                "description": "Done",
                "content": {"application/json": {"schema": dict(op.response)}},
                **({"links": dict(op.links)} if op.links else {}),
            },
            **error_responses(*op.statuses),
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
                **error_responses(*tool_statuses(op)),
            },
        }
        if tool["outputSchema"] and "id" in tool["outputSchema"].get("properties", {}):
            spec["responses"]["200"]["links"] = {
                name: link for name, link in WRITE_LINKS.items() if link["operationId"] != op.operation_id
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
            spec["requestBody"] = {
                "required": bool(body["required"]),  # no field required: the body may be left out
                "content": {"application/json": {"schema": body}},
            }
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
