"""What one connection may do and is told: read-only lists only the read tools, pinned is told so;
and a request whose params do not fit is told which (the server's middleware).

The identity comes from the gateway's internal headers (docs/wire.md); without them (stdio, a
direct local client) the connection may do everything.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS
from pydantic import ValidationError

from engine.surface.arguments import params_message
from engine.surface.manual import WRITE_TOOLS, pinned_note

HEADER_CONNECTION = "x-almanac-connection"
HEADER_CONNECTION_ID = "x-almanac-connection-id"
HEADER_READ_ONLY = "x-almanac-read-only"
HEADER_SCOPE = "x-almanac-scope"
HEADER_UNSCOPED = "x-almanac-scope-unscoped"


@dataclass(frozen=True)
class Identity:
    """The connection as the gateway vouches for it."""

    connection: str | None = None
    read_only: bool = False
    pinned_scope: str | None = None
    connection_id: str | None = None  # the gateway's stable id (a name may change or repeat)
    reads_unscoped: bool = False  # pinned: also reads unscoped memories (only when the gateway says 1)


def identity_of(headers: Mapping[str, str] | None) -> Identity:
    headers = headers or {}
    connection = headers.get(HEADER_CONNECTION)
    return Identity(
        connection=unquote(connection) if connection else None,
        read_only=headers.get(HEADER_READ_ONLY) == "1",
        pinned_scope=headers.get(HEADER_SCOPE) or None,
        connection_id=headers.get(HEADER_CONNECTION_ID) or None,
        reads_unscoped=headers.get(HEADER_UNSCOPED) == "1",
    )


def may_call(identity: Identity, tool: str) -> bool:
    return not (identity.read_only and tool in WRITE_TOOLS)


def listed(identity: Identity, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The wire ``tools`` a connection sees: only what it may call, descriptions saying its scope."""
    seen = [tool for tool in tools if may_call(identity, str(tool.get("name")))]
    if identity.pinned_scope is None:
        return seen
    note = pinned_note(identity.pinned_scope, unscoped=identity.reads_unscoped)
    return [{**tool, "description": f"{tool.get('description') or ''}{note}"} for tool in seen]


async def per_connection_listing(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Server middleware: narrows ``tools/list`` to the calling connection."""
    result = await call_next(ctx)
    if ctx.method != "tools/list" or not isinstance(result, dict) or "tools" not in result:
        return result
    identity = identity_of(getattr(ctx.request, "headers", None))
    return {**result, "tools": listed(identity, list(result["tools"]))}


async def worded_params(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Server middleware: params that do not fit their method answer invalid params (-32602)
    naming the fields, not the SDK's bare "Invalid request parameters"."""
    try:
        return await call_next(ctx)
    except ValidationError as exc:
        raise MCPError(INVALID_PARAMS, params_message(ctx.method, exc.errors())) from exc
