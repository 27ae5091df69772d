"""The engine's own tools called directly for a plain ``tools/call``: the SDK's dispatch, unrolled.

A plain request (``engine.surface.lean``) for ``tools/call`` went through the SDK's ``serve_one``:
a pydantic model of the params built twice (the version's surface, then the handler's type), the
``_meta`` envelope validated into models three times, a middleware chain (an OpenTelemetry span
with no tracer behind it, the ``requestState`` boundary, the per-connection tool listing, which
passes calls through), the tool's reply converted into a ``CallToolResult`` model, dumped, then
validated and dumped again through the version's result surface. Here the same call does only what
changes the reply: the tool is looked up once, its arguments validated once by the SDK's own model
for them (``FuncMetadata.validate_arguments``: the same pre-parsing, coercion and defaults), the
tool's function run with a ``Context`` built as the SDK builds it, its failures mapped as
``Tool.run``, ``MCPServer._handle_call_tool`` and ``engine.tools.AlmanacServer`` map them, and the
result written in the wire shape the SDK's serialisation gives (key order included).

What this does not take (:meth:`Direct.call` returns None, and the caller hands the request to
``serve_one`` as before, which answers and words it): a tool that is not the server's own plain
tool, arguments that fail validation (the SDK re-validates and words the refusal), params or
``_meta`` keys beyond the name, the arguments and the request envelope (``requestState``, input
responses, a trace context, …), an envelope the SDK's surface would refuse, and any server whose
middleware, ``tools/call`` handler or tracer is not the one this mirrors.
``tests/engine/surface/test_lean_contract.py`` sends every tool, argument errors, tool errors and
unknown tools both ways to real engines and compares the replies byte for byte.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar, cast

import pydantic_core
from mcp.server import MCPServer
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import (
    ResourceError,
    ToolError,
    UnexpectedResourceError,
    UnexpectedToolError,
)
from mcp.server.mcpserver.resolve import returns_input_required
from mcp.server.mcpserver.tools.base import Tool
from mcp.server.request_state import RequestStateBoundary
from mcp.server.runner import ServerRunner
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY,
    CallToolResult,
    RequestParams,
    RequestParamsMeta,
    TextContent,
)
from mcp_types.methods import validate_client_request
from opentelemetry.trace import ProxyTracerProvider, get_tracer_provider
from pydantic import BaseModel, ValidationError

from engine.surface import sdk
from engine.surface.arguments import argument_message
from engine.surface.connection import per_connection_listing, worded_params
from engine.surface.notify import on_this_thread

T = TypeVar("T")

#: The SDK's own logger for tool failures (``mcp.server.mcpserver.server``): the same lines, same place.
SDK_LOG = logging.getLogger("mcp.server.mcpserver.server")
_PARAMS = frozenset({"name", "arguments", "_meta"})
_ENVELOPE = frozenset({PROTOCOL_VERSION_META_KEY, CLIENT_INFO_META_KEY, CLIENT_CAPABILITIES_META_KEY})
_ENVELOPES_KEPT = 64
_METHOD = "tools/call"
_TRACER_VARIABLE = "OTEL_PYTHON_TRACER_PROVIDER"


@dataclasses.dataclass(frozen=True)
class Envelope:
    """What one request envelope (``_meta``) becomes, worked out once per distinct envelope."""

    accepted: bool  #: the SDK's surface validation of ``tools/call`` params with this ``_meta`` passes
    meta: RequestParamsMeta | None  #: the request context's ``meta``, as the SDK extracts it
    connection: Connection  #: what ``Connection.from_envelope`` makes of it (a template: never served)

    def connect(self) -> Connection:
        """A fresh connection like the template: ``Connection.from_envelope`` without re-validating
        the client's info and capabilities (read-only models, shared by the calls that sent them)."""
        template = self.connection
        connection = Connection(
            template.outbound,
            protocol_version=template.protocol_version,
            client_params=template.client_params,
        )
        connection.client_capabilities = template.client_capabilities
        connection.initialized.set()
        return connection


@dataclasses.dataclass(frozen=True)
class Prepared:
    """A call :class:`Direct` answers, ready to run: the tool, its validated arguments, the
    ``Context`` it is handed."""

    tool: Tool
    validated: dict[str, Any]
    context: Context[Any, Any]
    connection: Connection
    version: str
    lifespan_state: Any


class Waited(RuntimeError):
    """A coroutine driven off the event loop (:func:`driven`) waited for something."""


def driven(coroutine: Coroutine[Any, Any, T]) -> T:
    """What ``coroutine`` returns, run to its end here; it must not wait for anything (then it is
    closed and :class:`Waited` raised)."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return cast(T, done.value)
    coroutine.close()
    raise Waited("a tool call driven off the event loop waited for it")


def untraced() -> bool:
    """Whether OpenTelemetry is unconfigured, so the SDK's span around a call records nothing."""
    return _TRACER_VARIABLE not in os.environ and isinstance(get_tracer_provider(), ProxyTracerProvider)


def text_block(text: str) -> dict[str, Any]:
    """A ``TextContent`` as the SDK's result surface dumps it (its fields in the model's order)."""
    return {"text": text, "type": "text"}


class Direct:
    """Plain ``tools/call`` requests to ``mcp``'s own tools, answered without ``serve_one``."""

    def __init__(self, mcp: MCPServer) -> None:
        self.mcp = mcp
        self.server = sdk.lowlevel_server(mcp)
        self._envelopes: dict[str, Envelope] = {}
        self._tools: dict[str, tuple[Tool, bool]] = {}
        handler = self.server.get_request_handler(_METHOD)
        chain = self.server.middleware
        #: Only the server this mirrors: the SDK's own ``tools/call`` handler (no extension's
        #: interceptor), its two built-in middlewares then the engine's params wording and listing
        #: filter (both pass a call with valid params through), and no cache hint for calls.
        self.enabled = (
            handler is not None
            and sdk.is_sdk_call_tool(handler.handler)
            and [type(m) for m in chain[:2]] == [sdk.TelemetryMiddleware, RequestStateBoundary]
            and list(chain[2:]) == [worded_params, per_connection_listing]
            and _METHOD not in self.server.cache_hints
        )

    def envelope(self, version: str, meta: Mapping[str, Any]) -> Envelope:
        key = repr((version, meta))  # decoded JSON: its repr tells apart what the JSON does
        known = self._envelopes.get(key)
        if known is None:
            params = {"name": "-", "arguments": {}, "_meta": meta}
            try:
                validate_client_request(_METHOD, version, params)
                accepted = True
            except (ValidationError, KeyError, ValueError):
                accepted = False
            try:
                extracted = RequestParams.model_validate(params, by_name=False).meta
            except ValidationError:
                extracted = None
            template = Connection.from_envelope(
                version, meta.get(CLIENT_INFO_META_KEY), meta.get(CLIENT_CAPABILITIES_META_KEY)
            )
            if len(self._envelopes) >= _ENVELOPES_KEPT:
                self._envelopes.clear()
            known = self._envelopes[key] = Envelope(accepted, extracted, template)
        return known

    def plain_tool(self, tool: Tool) -> bool:
        """An async tool with a context parameter, no resolvers, no ``InputRequiredResult``: what
        :meth:`run` mirrors (worked out once per tool: reading its type hints is slow)."""
        known = self._tools.get(tool.name)
        if known is None or known[0] is not tool:
            plain = bool(
                not tool.resolved_params
                and tool.is_async
                and tool.context_kwarg is not None
                and not returns_input_required(tool.fn)
            )
            known = self._tools[tool.name] = (tool, plain)
        return known[1]

    def eligible(self, params: Mapping[str, Any] | None, version: str) -> tuple[Tool, Envelope] | None:
        if not self.enabled or params is None or not params.keys() <= _PARAMS:
            return None
        name, arguments, meta = params.get("name"), params.get("arguments"), params.get("_meta")
        if not isinstance(name, str) or not (arguments is None or type(arguments) is dict):
            return None
        if not isinstance(meta, dict) or not meta.keys() <= _ENVELOPE:
            return None
        tool = sdk.find_tool(self.mcp, name)
        if tool is None or not self.plain_tool(tool):
            return None
        envelope = self.envelope(version, meta)
        if not envelope.accepted or not untraced():
            return None
        return tool, envelope

    def prepare(
        self,
        request_id: int | str,
        params: Mapping[str, Any] | None,
        version: str,
        request: Any,
        lifespan_state: Any,
    ) -> Prepared | None:
        """The call, ready to run, or None if it is not one this answers (nothing has run then).
        ``version`` is the request's protocol version, as the SDK's entry classified it;
        ``request`` the Starlette request."""
        found = self.eligible(params, version)
        if found is None or params is None:
            return None
        tool, envelope = found
        try:
            validated = tool.fn_metadata.validate_arguments(params.get("arguments") or {})
        except Exception:
            return None  # the SDK validates again and words the refusal (or the crash)
        connection = envelope.connect()
        transport = TransportContext(kind="streamable-http", can_send_request=False, headers=request.headers)
        dctx = sdk.single_exchange(transport, request_id, ServerMessageMetadata(request_context=request))
        # the request's own copy of the envelope's meta (the SDK makes one per request)
        meta = None if envelope.meta is None else RequestParamsMeta(**envelope.meta)
        session = ServerSession(dctx, connection, request_meta=meta)
        ctx: ServerRequestContext[Any, Any] = ServerRequestContext(
            session=session,
            lifespan_context=lifespan_state,
            method=_METHOD,
            params=params,
            request_id=request_id,
            meta=meta,
            protocol_version=version,
            request=request,
        )
        context: Context[Any, Any] = Context(
            request_context=ctx, mcp_server=self.mcp, subscriptions=sdk.subscription_bus(self.mcp)
        )
        return Prepared(tool, validated, context, connection, version, lifespan_state)

    async def call(
        self,
        request_id: int | str,
        params: Mapping[str, Any] | None,
        version: str,
        request: Any,
        lifespan_state: Any,
    ) -> dict[str, Any] | None:
        """The JSON-RPC ``result`` of the call, or None if it is not one this answers (nothing has
        run then; see :meth:`prepare`). Raises :class:`MCPError` as the dispatch would."""
        prepared = self.prepare(request_id, params, version, request, lifespan_state)
        if prepared is None:
            return None
        try:
            result = await self.run(prepared.tool, prepared.validated, prepared.context)
        finally:
            await prepared.connection.exit_stack.aclose()
        return self.shaped(prepared, result)

    def call_here(self, prepared: Prepared) -> dict[str, Any]:
        """:meth:`call`'s result, the whole call run on this (tool) thread: the tool's coroutine
        driven here, its off-loop work run in place (``engine.surface.notify.on_this_thread``).
        Only for a request that asked for no progress and no logs (``engine.surface.replies``):
        then nothing in the engine's tools waits on the event loop."""
        with on_this_thread():
            try:
                result = driven(self.run(prepared.tool, prepared.validated, prepared.context))
            finally:
                driven(prepared.connection.exit_stack.aclose())
        return self.shaped(prepared, result)

    def shaped(self, prepared: Prepared, result: Any) -> dict[str, Any]:
        shaped = self.plain_shape(result)
        if shaped is None:  # an unusual result: the SDK's own serialisation
            runner = ServerRunner(self.server, prepared.connection, prepared.lifespan_state)
            return sdk.serialized_result(runner, _METHOD, prepared.version, result)
        shaped["_meta"] = {SERVER_INFO_META_KEY: self.server.server_info_stamp}
        return shaped

    async def run(self, tool: Tool, validated: dict[str, Any], context: Context[Any, Any]) -> Any:
        """The tool's reply, or its failure as a ``CallToolResult`` (``Tool.run`` past validation,
        then ``AlmanacServer.call_tool`` and ``MCPServer._handle_call_tool``)."""
        assert tool.context_kwarg is not None
        try:
            try:
                returned = await tool.fn(**validated, **{tool.context_kwarg: context})
                return self.converted(tool, returned)
            except MCPError:
                raise
            except (UnexpectedToolError, UnexpectedResourceError) as exc:
                raise UnexpectedToolError(f"Error executing tool {tool.name}: {exc}") from exc
            except (ToolError, ResourceError) as exc:
                raise ToolError(f"Error executing tool {tool.name}: {exc}") from exc
            except Exception as exc:
                raise UnexpectedToolError(f"Error executing tool {tool.name}") from exc
        except ToolError as exc:
            failure: ToolError = exc
            if isinstance(exc.__cause__, ValidationError):
                failure = ToolError(argument_message(tool.name, tool.parameters, exc.__cause__.errors()))
                failure.__cause__ = exc.__cause__
            return self.failed(tool.name, failure)

    def converted(self, tool: Tool, returned: Any) -> Any:
        """``FuncMetadata.convert_result`` for a structured reply: a dataclass or model becomes its
        JSON text (indented) and its structured dump; anything else goes through the SDK's own."""
        meta = tool.fn_metadata
        model = meta.output_model if meta.output_schema is not None else None
        if (
            model is None
            or meta.wrap_output
            or isinstance(returned, (CallToolResult, BaseModel, str, list, tuple))
            or not dataclasses.is_dataclass(returned)
        ):
            return meta.convert_result(returned)
        text = pydantic_core.to_json(returned, fallback=str, indent=2).decode()
        adapter = sdk.output_adapter(meta, model)
        validated = adapter.validate_python(returned, by_alias=True, by_name=True)
        if isinstance(validated, BaseModel):
            structured = validated.model_dump(mode="json", by_alias=True)
        else:
            structured = adapter.dump_python(validated, mode="json", by_alias=True)
        return {"content": [text_block(text)], "isError": False, "structuredContent": structured}

    @staticmethod
    def failed(name: str, exc: ToolError) -> CallToolResult:
        if not isinstance(exc, UnexpectedToolError):
            if isinstance(exc.__cause__, ValidationError):
                errors = exc.__cause__.errors()
                fields = sorted({".".join(str(part) for part in err["loc"]) for err in errors})
                SDK_LOG.info("Tool %r rejected arguments: %r", name, fields)
            else:
                SDK_LOG.info("Tool %r failed: %r", name, str(exc))
        else:
            SDK_LOG.error("Tool %r raised an unexpected exception", name, exc_info=exc)
        return CallToolResult(content=[TextContent(type="text", text=str(exc))], is_error=True)

    @staticmethod
    def plain_shape(result: Any) -> dict[str, Any] | None:
        """The result as the SDK's serialisation writes it (content, isError, resultType, then
        structuredContent when there is one; the ``_meta`` stamp goes last), if it is text blocks
        and a JSON object; None for anything else."""
        if isinstance(result, dict):
            content, error, structured = result["content"], result["isError"], result["structuredContent"]
        elif isinstance(result, CallToolResult):
            blocks = result.content
            if (
                result.meta is not None
                or result.model_extra
                or not all(
                    type(b) is TextContent and b.annotations is None and b.meta is None for b in blocks
                )
            ):
                return None
            content = [text_block(b.text) for b in blocks if isinstance(b, TextContent)]
            error, structured = result.is_error, result.structured_content
            if not isinstance(error, bool) or not (structured is None or isinstance(structured, dict)):
                return None
        else:
            return None
        shaped: dict[str, Any] = {"content": content, "isError": error, "resultType": "complete"}
        if structured is not None:
            shaped["structuredContent"] = structured
        return shaped
