"""Export and import over REST (``/api/v1/admin/export``, ``/api/v1/admin/import``; part of
``gw:rest``, ``life:export``, ``life:import``): what the Workspace page does, for programs.

Bearer auth exactly like ``/mcp``. An export holds the whole workspace, so a connection pinned to a
scope may not take one (``forbidden``); a read-only connection may (it only reads). An import
changes the workspace: refused to a read-only (``read_only``) or scope-pinned (``forbidden``)
connection. The body of an import is the zip itself (``application/zip``), at most
``import_max_bytes``; ``?label=`` names the folder under ``Imported/`` for Markdown. Both are
audited (``workspace.export``, ``workspace.import``: counts, never content).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from gateway.api.contract import Endpoint, error_responses
from gateway.api.guard import guarded
from gateway.control.records import Principal
from gateway.edge.proxy import Engines
from gateway.engines.admin import import_zip, open_export
from gateway.engines.calls import ToolRefusal
from gateway.errors import Forbidden
from gateway.web.uploads import capped

EXPORT, IMPORT = "/admin/export", "/admin/import"
MEDIA_TYPE = "application/zip"

Audit = Callable[[str, Principal, "str | None", dict[str, object]], None]
Restart = Callable[[str], Awaitable[None]]

OUTCOME = {
    "type": "object",
    "required": ["kind", "folder", "imported", "skipped", "counts", "progress"],
    "properties": {
        "kind": {"type": "string", "enum": ["markdown", "restore"]},
        "folder": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "imported": {"type": "array", "items": {"type": "string"}},
        "skipped": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["path", "reason"],
                "properties": {"path": {"type": "string"}, "reason": {"type": "string"}},
            },
        },
        "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
        "progress": {"type": "array", "items": {"type": "string"}},
    },
}


def openapi_paths(prefix: str) -> dict[str, Any]:
    """The two operations' entries for the OpenAPI document."""
    return {
        prefix + EXPORT: {
            "get": {
                "operationId": "export_workspace",
                "summary": "Export the workspace as a zip",
                "description": "The store exactly as it is on disk (facts ledger, notes, day logs, in "
                "every state) plus almanac-export.json, a manifest with each file's size and SHA-256. "
                "Importing it into a new, empty workspace reproduces every memory.",
                "security": [{"bearer": []}],
                "responses": {
                    "200": {
                        "description": "The export (streamed)",
                        "content": {MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}}},
                    },
                    **error_responses(410),
                },
            }
        },
        prefix + IMPORT: {
            "post": {
                "operationId": "import_workspace",
                "summary": "Import a zip of Markdown, or restore an export",
                "description": "An Almanac export is restored into an empty workspace, byte for byte. "
                "Anything else is Markdown: each .md file becomes a note under Imported/<label>/<its "
                "path>, frontmatter and wikilinks kept; files that are not Markdown, hidden, symbolic "
                "links, binary, over 1,000,000 bytes, or whose path would leave the folder are skipped "
                "and listed with the reason. The notes can be recalled as soon as this answers.",
                "security": [{"bearer": []}],
                "parameters": [
                    {
                        "name": "label",
                        "in": "query",
                        "required": False,
                        "description": "the folder under Imported/ (needed for Markdown)",
                        "schema": {"type": "string"},
                    }
                ],
                "requestBody": {
                    "required": True,
                    "content": {MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}}},
                },
                "responses": {
                    "200": {
                        "description": "What was imported and skipped",
                        "content": {"application/json": {"schema": OUTCOME}},
                    },
                    **error_responses(410, 413),
                },
            }
        },
    }


class TransferApi:
    def __init__(
        self,
        *,
        principal: Callable[[Request], Awaitable[Principal]],
        engines: Engines,
        max_import_bytes: int,
        audit: Audit | None = None,
        restart: Restart | None = None,
    ) -> None:
        self.principal = principal
        self.engines = engines
        self.max_import_bytes = max_import_bytes
        self.audit = audit
        self.restart = restart  # after a restore: the engine reads everything afresh

    def handlers(self, prefix: str) -> list[tuple[str, str, Endpoint]]:
        """(method, path, endpoint) of each operation."""
        return [
            ("GET", prefix + EXPORT, guarded(self.export)),
            ("POST", prefix + IMPORT, guarded(self.import_)),
        ]

    def _record(self, kind: str, who: Principal, request: Request, detail: dict[str, object]) -> None:
        if self.audit is not None:
            self.audit(kind, who, request.client.host if request.client else None, detail)

    async def export(self, request: Request) -> Response:
        who = await self.principal(request)
        if who.scope is not None:
            raise Forbidden(
                f"this connection is pinned to scope {who.scope!r}; an export holds the whole "
                "workspace, so it needs a connection without a pinned scope"
            )
        stack = AsyncExitStack()
        try:
            lease = await stack.enter_async_context(self.engines.lease(who.workspace_id))
            upstream = await open_export(lease.client)
            stack.push_async_callback(upstream.aclose)
        except BaseException:
            await stack.aclose()
            raise
        self._record("workspace.export", who, request, {"by": who.connection_name})

        async def body() -> AsyncIterator[bytes]:
            try:
                async for chunk in upstream.aiter_raw():
                    yield chunk
            finally:
                await stack.aclose()

        headers = {"Content-Disposition": 'attachment; filename="almanac-export.zip"'}
        if "content-length" in upstream.headers:
            headers["Content-Length"] = upstream.headers["content-length"]
        return StreamingResponse(body(), media_type=MEDIA_TYPE, headers=headers)

    async def import_(self, request: Request) -> Response:
        who = await self.principal(request)
        if who.read_only:
            return _refusal(
                "read_only",
                "this connection is read-only: it can export but not import "
                "(ask the owner for a connection with write access)",
                403,
            )
        if who.scope is not None:
            raise Forbidden(
                f"this connection is pinned to scope {who.scope!r}; an import writes outside any scope, "
                "so it needs a connection without a pinned scope"
            )
        label = request.query_params.get("label") or None
        body = capped(request, self.max_import_bytes)
        async with self.engines.lease(who.workspace_id) as lease:
            result = await import_zip(lease.client, body.stream(), label)
        if isinstance(result, ToolRefusal):
            return _refusal(result.code, result.message, 400)
        if result["kind"] == "restore" and self.restart is not None:
            await self.restart(who.workspace_id)
        detail: dict[str, object] = {
            "kind": result["kind"],
            "imported": len(result["imported"]),
            "skipped": len(result["skipped"]),
            "by": who.connection_name,
        }
        self._record("workspace.import", who, request, detail)
        return JSONResponse(result)


def _refusal(code: str, message: str, status: int) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)
