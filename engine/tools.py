"""The MCP tool surface: argument schemas, identity, and errors (thin: the work is in memory.py).

A refusal is raised as a tool error the model can read and act on; it is never returned as a
normal result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar
from urllib.parse import unquote

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from engine.errors import EngineError
from engine.memory import Memory
from engine.recall.context import Recall
from engine.recall.status import memory_status as status_of
from engine.results import Receipt, Retrieved
from engine.scope import Caller

INSTRUCTIONS = (
    "Almanac is durable memory shared by every client of one owner. Save facts "
    "(subject/predicate/object) and notes with remember; before you work, read what is known."
)

T = TypeVar("T")

HEADER_CONNECTION = "x-almanac-connection"
HEADER_READ_ONLY = "x-almanac-read-only"
HEADER_SCOPE = "x-almanac-scope"


def caller_of(ctx: Context[Any, Any]) -> Caller:
    """The identity the gateway put in its internal headers; self-reported client name otherwise."""
    headers = ctx.headers or {}
    connection = headers.get(HEADER_CONNECTION)
    client_name = None
    params = getattr(ctx.request_context.session, "client_params", None)
    if params is not None and params.client_info is not None:
        client_name = params.client_info.name
    return Caller(
        connection=unquote(connection) if connection else None,
        read_only=headers.get(HEADER_READ_ONLY) == "1",
        pinned_scope=headers.get(HEADER_SCOPE) or None,
        client_name=client_name,
    )


def run(action: Callable[[], T]) -> T:
    try:
        return action()
    except EngineError as exc:
        raise ToolError(f"{exc.message} [{exc.code}]") from exc


Scope = Annotated[
    str | None, Field(description="Optional label keeping the memory with a project, e.g. project:fjord")
]
Source = Annotated[
    str | None, Field(description="Who is writing, when the connection has no name of its own")
]
WRITE = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)


def build_server(memory: Memory, *, version: str = "", recall: Recall | None = None) -> MCPServer:
    mcp = MCPServer("almanac", instructions=INSTRUCTIONS, version=version)

    @mcp.tool(
        annotations=WRITE,
        description=(
            "Save a memory. With subject, predicate and object it is a fact (a new object replaces the "
            "old value, which is kept as history); without them, a note kept whole. At most 4,000 characters."
        ),
    )
    def remember(
        statement: Annotated[str, Field(description="The words to remember, whole (≤ 4,000 characters)")],
        ctx: Context[Any, Any],
        subject: Annotated[str | None, Field(description="What the fact is about, e.g. 'Fjord'")] = None,
        predicate: Annotated[str | None, Field(description="Which property, e.g. 'database'")] = None,
        object: Annotated[str | None, Field(description="The value, e.g. 'Postgres'")] = None,
        scope: Scope = None,
        tags: Annotated[list[str] | None, Field(description="Labels for a note")] = None,
        importance: Annotated[float | None, Field(description="0–1; how much a note matters")] = None,
        source: Source = None,
    ) -> Receipt:
        caller = caller_of(ctx)
        return run(
            lambda: memory.remember(
                caller, statement, subject, predicate, object, scope, tags, importance, source
            )
        )

    @mcp.tool(
        annotations=WRITE, description="Save a fact: subject, predicate, object (and the sentence, if any)."
    )
    def save_memory(
        subject: str,
        predicate: str,
        object: str,
        ctx: Context[Any, Any],
        statement: Annotated[str | None, Field(description="The sentence the fact was said with")] = None,
        scope: Scope = None,
        source: Source = None,
    ) -> Receipt:
        caller = caller_of(ctx)
        return run(lambda: memory.save_memory(caller, subject, predicate, object, statement, scope, source))

    @mcp.tool(
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False),
        description="Append a timestamped entry to a day's log (today by default).",
    )
    def remember_note(
        text: str,
        ctx: Context[Any, Any],
        date: Annotated[str | None, Field(description="The day's log to append to, YYYY-MM-DD")] = None,
        source: Source = None,
    ) -> Receipt:
        caller = caller_of(ctx)
        return run(lambda: memory.remember_note(caller, text, date, source))

    @mcp.tool(
        annotations=READ,
        description=(
            "Look up facts by subject and/or predicate (current values; include_history adds replaced ones; "
            "as_of gives what was current then), or any memory by id."
        ),
    )
    def retrieve_memory(
        ctx: Context[Any, Any],
        subject: str | None = None,
        predicate: str | None = None,
        id: Annotated[str | None, Field(description="A memory id: fct_…, nte_… or log_…")] = None,
        scope: Scope = None,
        include_history: bool = False,
        as_of: Annotated[
            str | None, Field(description="ISO date or datetime; a bare date means the end of that day, UTC")
        ] = None,
    ) -> Retrieved:
        caller = caller_of(ctx)
        return run(lambda: memory.retrieve(caller, subject, predicate, id, scope, include_history, as_of))

    @mcp.tool(
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True),
        description="Take a memory out of recall without deleting it (restore_memory puts it back).",
    )
    def retire_memory(id: str, ctx: Context[Any, Any], reason: str | None = None) -> Receipt:
        caller = caller_of(ctx)
        return run(lambda: memory.retire(caller, id, reason))

    @mcp.tool(
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True),
        description="Put a retired memory back exactly as it was.",
    )
    def restore_memory(id: str, ctx: Context[Any, Any]) -> Receipt:
        caller = caller_of(ctx)
        return run(lambda: memory.restore(caller, id))

    @mcp.tool(
        annotations=READ,
        description=(
            "Before you work: the current facts and the closest notes for a task, within a token budget. "
            "relevant=false means nothing closely matched."
        ),
    )
    def get_context(
        ctx: Context[Any, Any],
        query: Annotated[str | None, Field(description="What you are about to work on")] = None,
        scope: Scope = None,
        max_tokens: Annotated[int | None, Field(description="Reply budget, 100-4000 (default 800)")] = None,
        include_archived: Annotated[bool, Field(description="Also search cold storage")] = False,
    ) -> dict[str, Any]:
        if recall is None:
            raise ToolError("get_context is not available: this engine runs without an index [not_built]")
        caller = caller_of(ctx)
        return run(lambda: recall.get_context(caller, query, scope, max_tokens, include_archived))

    @mcp.tool(
        annotations=READ,
        description="Counts, storage, index backlog, embedding provider state and settings in force.",
    )
    def memory_status(ctx: Context[Any, Any]) -> dict[str, Any]:
        if recall is None:
            raise ToolError("memory_status is not available: this engine runs without an index [not_built]")
        caller = caller_of(ctx)
        return run(lambda: status_of(recall, caller))

    return mcp
