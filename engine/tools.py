"""The MCP tool surface: the tools, their schemas, identity, and errors (thin: the work is in memory.py).

A refusal is raised as a tool error the model can read and act on; it is never returned as a
normal result. What the agent reads (descriptions, instructions, argument errors, per-connection
listing, logs, progress) lives in ``engine.surface``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

import pydantic_core
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INVALID_PARAMS,
    CallToolResult,
    LoggingLevel,
    SetLevelRequestParams,
    TextContent,
    ToolAnnotations,
)
from pydantic import ValidationError

from engine.errors import EngineError
from engine.errors import without_paths as without_paths
from engine.memory import Memory
from engine.recall.context import Recall
from engine.recall.status import memory_status as status_of
from engine.results import ContextReply, Receipt, Retrieved, StatusReply
from engine.scope import Caller
from engine.surface import manual, sdk
from engine.surface.arguments import argument_message, unknown_tool_message
from engine.surface.connection import (
    HEADER_CONNECTION as HEADER_CONNECTION,
)
from engine.surface.connection import (
    HEADER_READ_ONLY as HEADER_READ_ONLY,
)
from engine.surface.connection import (
    HEADER_SCOPE as HEADER_SCOPE,
)
from engine.surface.connection import identity_of, may_call, per_connection_listing, worded_params
from engine.surface.notify import LogLevels, Request, log, with_progress

INSTRUCTIONS = manual.INSTRUCTIONS
PROGRESS_INTERVAL_S = 1.0

T = TypeVar("T")


def caller_of(request: Request) -> Caller:
    """The identity the gateway put in its internal headers; self-reported client name otherwise."""
    identity = identity_of(getattr(request.request, "headers", None))
    client_name = None
    params = getattr(request.session, "client_params", None)
    if params is not None and params.client_info is not None:
        client_name = params.client_info.name
    return Caller(
        connection=identity.connection,
        read_only=identity.read_only,
        pinned_scope=identity.pinned_scope,
        client_name=client_name,
        connection_id=identity.connection_id,
        reads_unscoped=identity.reads_unscoped,
    )


def run(action: Callable[[], T]) -> T:
    try:
        return action()
    except EngineError as exc:
        raise ToolError(f"{without_paths(exc.message)} [{exc.code}]") from exc


def _structured(reply: dict[str, Any]) -> CallToolResult:
    """A reply dict as it is (its size is what the token budget counted), checked by the caller's model."""
    text = pydantic_core.to_json(reply, indent=2).decode()
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=reply)


#: What the SDK's server would serve beside tools; Almanac serves tools only, so it neither lists
#: nor advertises them (a server's capabilities are derived from the methods it answers).
NOT_SERVED = ("prompts/list", "resources/list", "resources/templates/list")


class AlmanacServer(MCPServer):
    """``MCPServer`` whose argument failures and unknown tools read like every other refusal, and
    that advertises what it serves: tools and logging, no prompts, no resources. Asked for a prompt
    or a resource anyway, it answers invalid params (-32602) saying there are none."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        server = sdk.lowlevel_server(self)
        for method in NOT_SERVED:
            sdk.drop_request_handler(server, method)

    async def get_prompt(
        self, name: str, arguments: dict[str, Any] | None = None, context: Context[Any, Any] | None = None
    ) -> Any:
        raise MCPError(INVALID_PARAMS, f"no prompt named {name!r}: Almanac serves no prompts, only tools")

    async def read_resource(self, uri: Any, context: Context[Any, Any] | None = None) -> Any:
        raise MCPError(
            INVALID_PARAMS,
            f"no resource at {str(uri)!r}: Almanac serves no resources, only tools",
            {"uri": str(uri)},
        )

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> Any:
        tool = sdk.find_tool(self, name)  # one lookup: no tool list built per call
        if tool is None:
            identity = identity_of(context.headers if context is not None else None)
            visible = [t.name for t in sdk.listed_tools(self) if may_call(identity, t.name)]
            raise ToolError(unknown_tool_message(name, visible))
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                message = argument_message(name, tool.parameters, cause.errors())
                raise ToolError(message) from cause
            raise


WRITE = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
APPEND = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)


@dataclass
class Served:
    """What the tools work on. A warm spare builds its server before it is assigned a workspace (the
    tools' schemas are most of an engine's start once imports are done) and fills this in after."""

    memory: Memory | None = None
    recall: Recall | None = None

    def the_memory(self) -> Memory:
        if self.memory is None:
            raise ToolError("this engine has not been given its workspace yet; try again [not_built]")
        return self.memory


def build_server(
    memory: Memory | Served,
    *,
    version: str = "",
    recall: Recall | None = None,
    progress_interval: float = PROGRESS_INTERVAL_S,
) -> MCPServer:
    """The MCP server of one workspace: ``memory`` (and ``recall``), or a :class:`Served` to fill in
    before the first call."""
    served = memory if isinstance(memory, Served) else Served(memory, recall)
    levels = LogLevels()
    mcp = AlmanacServer(
        "almanac",
        instructions=manual.INSTRUCTIONS,
        version=version,
        middleware=[worded_params, per_connection_listing],
    )
    # logging/setLevel is a 2025-era method the SDK leaves to the lowlevel server (see mcp.server.extension).
    lowlevel = sdk.lowlevel_server(mcp)
    lowlevel.add_request_handler("logging/setLevel", SetLevelRequestParams, levels.on_set_level)

    async def work(ctx: Context[Any, Any], action: Callable[[Caller], T]) -> tuple[Request, T]:
        """Run ``action`` for the calling connection on a tool thread: the request (read once, see
        engine.surface.notify.Request) for the logs, and what the action returned."""
        request = ctx.request_context
        caller = caller_of(request)
        try:
            return request, await with_progress(
                ctx, request, lambda: run(lambda: action(caller)), progress_interval
            )
        except ToolError as exc:
            tool = (request.params or {}).get("name", "tool")
            await log(levels, request, "info", f"{tool}: refused: {exc}")
            raise

    async def read(ctx: Context[Any, Any], action: Callable[[Caller], T]) -> T:
        return (await work(ctx, action))[1]

    async def written(ctx: Context[Any, Any], tool: str, action: Callable[[Caller], Receipt]) -> Receipt:
        """A write tool's receipt, logged to the client (a warning when it may repeat a memory)."""
        request, receipt = await work(ctx, action)
        level: LoggingLevel = "warning" if receipt.possible_duplicates else "info"
        said = f"{tool}: {receipt.action} {receipt.kind} {receipt.id}"
        if receipt.possible_duplicates:
            said += f" (possible duplicates: {', '.join(d.id for d in receipt.possible_duplicates)})"
        await log(levels, request, level, said)
        return receipt

    @mcp.tool(annotations=WRITE, description=manual.REMEMBER)
    async def remember(
        statement: manual.Statement,
        ctx: Context[Any, Any],
        subject: manual.SubjectOptional = None,
        predicate: manual.PredicateOptional = None,
        object: manual.ObjectOptional = None,
        scope: manual.Scope = None,
        tags: manual.Tags = None,
        importance: manual.Importance = None,
        source: manual.Source = None,
    ) -> Receipt:
        return await written(
            ctx,
            "remember",
            lambda caller: served.the_memory().remember(
                caller, statement, subject, predicate, object, scope, tags, importance, source
            ),
        )

    @mcp.tool(annotations=WRITE, description=manual.SAVE_MEMORY)
    async def save_memory(
        subject: manual.Subject,
        predicate: manual.Predicate,
        object: manual.Object,
        ctx: Context[Any, Any],
        statement: manual.StatementOptional = None,
        scope: manual.Scope = None,
        source: manual.Source = None,
    ) -> Receipt:
        return await written(
            ctx,
            "save_memory",
            lambda caller: served.the_memory().save_memory(
                caller, subject, predicate, object, statement, scope, source
            ),
        )

    @mcp.tool(annotations=APPEND, description=manual.REMEMBER_NOTE)
    async def remember_note(
        text: manual.LogText, ctx: Context[Any, Any], date: manual.Day = None, source: manual.Source = None
    ) -> Receipt:
        return await written(
            ctx, "remember_note", lambda caller: served.the_memory().remember_note(caller, text, date, source)
        )

    @mcp.tool(annotations=READ, description=manual.RETRIEVE_MEMORY)
    async def retrieve_memory(
        ctx: Context[Any, Any],
        subject: manual.SubjectOptional = None,
        predicate: manual.PredicateOptional = None,
        id: manual.IdOptional = None,
        scope: manual.Scope = None,
        include_history: manual.IncludeHistory = False,
        as_of: manual.AsOf = None,
    ) -> Retrieved:
        return await read(
            ctx,
            lambda caller: served.the_memory().retrieve(
                caller, subject, predicate, id, scope, include_history, as_of
            ),
        )

    @mcp.tool(annotations=WRITE, description=manual.RETIRE_MEMORY)
    async def retire_memory(
        id: manual.MemoryId, ctx: Context[Any, Any], reason: manual.Reason = None
    ) -> Receipt:
        return await written(
            ctx, "retire_memory", lambda caller: served.the_memory().retire(caller, id, reason)
        )

    @mcp.tool(annotations=WRITE, description=manual.RESTORE_MEMORY)
    async def restore_memory(id: manual.MemoryId, ctx: Context[Any, Any]) -> Receipt:
        return await written(ctx, "restore_memory", lambda caller: served.the_memory().restore(caller, id))

    @mcp.tool(annotations=READ, description=manual.GET_CONTEXT)
    async def get_context(
        ctx: Context[Any, Any],
        query: manual.Query = None,
        scope: manual.Scope = None,
        max_tokens: manual.MaxTokens = None,
        include_archived: manual.IncludeArchived = None,
    ) -> Annotated[CallToolResult, ContextReply]:
        recall = served.recall
        if recall is None:
            raise ToolError("get_context is not available: this engine runs without an index [not_built]")
        request, reply = await work(
            ctx, lambda caller: recall.get_context(caller, query, scope, max_tokens, include_archived)
        )
        await log(
            levels,
            request,
            "debug",
            f"get_context: {reply['retrieval']} retrieval, {len(reply['facts'])} facts, "
            f"{len(reply['notes'])} notes, {reply['tokens']} tokens, {reply['dropped']['count']} dropped",
        )
        if query and reply["retrieval"] == "keyword":
            await log(
                levels,
                request,
                "notice",
                "get_context: matched by words only (meaning search is off or building)",
            )
        return _structured(reply)

    @mcp.tool(annotations=READ, description=manual.MEMORY_STATUS)
    async def memory_status(ctx: Context[Any, Any]) -> Annotated[CallToolResult, StatusReply]:
        recall = served.recall
        if recall is None:
            raise ToolError("memory_status is not available: this engine runs without an index [not_built]")
        status = await read(ctx, lambda caller: status_of(recall, caller))
        return _structured(client_status(status))

    return mcp


def client_status(status: dict[str, Any]) -> dict[str, Any]:
    """``memory_status`` as a client may see it: sizes and states, never a server path."""
    embedding = dict(status["embedding"])
    if embedding.get("detail"):
        embedding["detail"] = without_paths(str(embedding["detail"]))
    if embedding.get("notes"):
        embedding["notes"] = [without_paths(str(note)) for note in embedding["notes"]]
    problems = [without_paths(str(p)) for p in status.get("settings_problems", ())]
    return {**status, "embedding": embedding, "settings_problems": problems}
