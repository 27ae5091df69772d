"""Every reach into the ``mcp`` SDK's and uvicorn's private parts, in one module.

The engine's fast paths (``engine.surface.direct``, ``lean``, ``protocol``) and its tool server
(``engine.tools``) need a few things neither library offers publicly. Each is here as a small typed
function or name, so that an upgrade that moves one breaks here, and
``tests/engine/surface/test_sdk.py`` says which assumption broke (that test also checks nothing else
in the project reaches for these names). ``mcp`` and uvicorn are pinned to the minor version these
were checked against (pyproject.toml).

From ``mcp`` (``MCPServer`` and the lowlevel ``Server``):

- :func:`lowlevel_server`: ``MCPServer._lowlevel_server``, the protocol server it wraps.
- :func:`drop_request_handler`: ``Server._request_handlers`` (there is no public way to unregister).
- :func:`find_tool`, :func:`listed_tools`: ``MCPServer._tool_manager``.
- :func:`subscription_bus`: ``MCPServer._subscriptions``, handed to a ``Context``.
- :func:`is_sdk_call_tool`: whether a handler is ``MCPServer._handle_call_tool``.
- :data:`TelemetryMiddleware`: ``mcp.server._otel.OpenTelemetryMiddleware``.
- :func:`single_exchange`: ``mcp.server._streamable_http_modern._SingleExchangeDispatchContext``.
- :func:`serialized_result`: ``ServerRunner._serialize``.
- :func:`output_adapter`: ``FuncMetadata._output_adapter``.
- :func:`lifespan_state`: ``StreamableHTTPSessionManager._lifespan_state``.

From uvicorn (its ``httptools`` protocol, in ``uvicorn.protocols`` and ``uvicorn._types``):

- :class:`HttpProtocol`: ``HttpToolsProtocol`` with its private hook ``_start_asgi_task`` renamed
  :meth:`HttpProtocol.start_app`; :data:`Cycle` (``RequestResponseCycle``), whose attributes
  ``engine.surface.protocol`` reads and sets as uvicorn's ``send`` does.
- :func:`status_line` (``STATUS_LINE``), :data:`HIGH_WATER_LIMIT`, :data:`ASGI3Application`.
"""

from __future__ import annotations

from typing import Any

from mcp.server import MCPServer
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server._streamable_http_modern import _SingleExchangeDispatchContext
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver.tools.base import Tool
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata
from mcp.server.runner import ServerRunner
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.subscriptions import SubscriptionBus
from mcp.shared.dispatcher import DispatchContext
from mcp.shared.message import MessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import ProgressToken, RequestId
from pydantic import TypeAdapter
from uvicorn._types import ASGI3Application
from uvicorn.protocols.http.flow_control import HIGH_WATER_LIMIT
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol, RequestResponseCycle

__all__ = [
    "HIGH_WATER_LIMIT",
    "ASGI3Application",
    "Cycle",
    "HttpProtocol",
    "TelemetryMiddleware",
    "drop_request_handler",
    "find_tool",
    "is_sdk_call_tool",
    "lifespan_state",
    "listed_tools",
    "lowlevel_server",
    "output_adapter",
    "serialized_result",
    "single_exchange",
    "status_line",
    "subscription_bus",
]

# -- mcp ---------------------------------------------------------------------------------------

#: The SDK's OpenTelemetry middleware, first in every ``MCPServer``'s chain.
TelemetryMiddleware = OpenTelemetryMiddleware


def lowlevel_server(mcp: MCPServer) -> Server[Any]:
    """The protocol server ``mcp`` wraps (its handlers, middleware and server info)."""
    return mcp._lowlevel_server


def drop_request_handler(server: Server[Any], method: str) -> None:
    """Stop ``server`` answering ``method`` (a method it does not answer is left alone)."""
    server._request_handlers.pop(method, None)


def find_tool(mcp: MCPServer, name: str) -> Tool | None:
    """``mcp``'s tool called ``name``, or None: one lookup, no tool list built."""
    return mcp._tool_manager.get_tool(name)


def listed_tools(mcp: MCPServer) -> list[Tool]:
    """``mcp``'s tools, in the order they were added."""
    return mcp._tool_manager.list_tools()


def subscription_bus(mcp: MCPServer) -> SubscriptionBus:
    """The subscription bus ``mcp`` hands every ``Context`` it builds."""
    return mcp._subscriptions


def is_sdk_call_tool(handler: object) -> bool:
    """Whether ``handler`` (a bound method) is ``MCPServer``'s own ``tools/call`` handler."""
    return getattr(handler, "__func__", None) is MCPServer._handle_call_tool


def single_exchange(
    transport: TransportContext,
    request_id: RequestId,
    message_metadata: MessageMetadata,
    progress_token: ProgressToken | None = None,
) -> DispatchContext[TransportContext]:
    """The dispatch context the SDK's JSON-mode HTTP entry builds for one request and its reply
    (no stream: a notification sent through it goes nowhere)."""
    return _SingleExchangeDispatchContext(
        transport=transport,
        request_id=request_id,
        message_metadata=message_metadata,
        progress_token=progress_token,
    )


def serialized_result(runner: ServerRunner, method: str, version: str, result: Any) -> dict[str, Any]:
    """A handler's result in its wire form, as the SDK's dispatch serialises it."""
    return runner._serialize(method, version, result)


def output_adapter(meta: FuncMetadata, model: Any) -> TypeAdapter[Any]:
    """The SDK's validator and serialiser of a tool's structured output (built once per model)."""
    return meta._output_adapter(model)


def lifespan_state(manager: StreamableHTTPSessionManager) -> Any:
    """What ``manager``'s lifespan yielded (entered once, in its ``run()``): what its HTTP entry
    hands the handlers."""
    return manager._lifespan_state


# -- uvicorn -----------------------------------------------------------------------------------

#: One HTTP request on a connection and its reply, as uvicorn's ``httptools`` protocol keeps them.
Cycle = RequestResponseCycle


def status_line(status: int) -> bytes:
    """The status line uvicorn writes for ``status`` (``HTTP/1.1 200 OK\\r\\n``)."""
    return STATUS_LINE[status]


class HttpProtocol(HttpToolsProtocol):
    """uvicorn's ``httptools`` protocol; a subclass decides what runs a request's ASGI app by
    overriding :meth:`start_app` (uvicorn's private ``_start_asgi_task``)."""

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: ASGI3Application) -> None:
        self.start_app(cycle, app)

    def start_app(self, cycle: RequestResponseCycle, app: ASGI3Application) -> None:
        """Run the app for ``cycle`` as uvicorn does: a task on the loop."""
        super()._start_asgi_task(cycle, app)
