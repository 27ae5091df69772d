"""The adapter to the ``mcp`` SDK's and uvicorn's private parts (engine:mcp, engine:surface):
``engine.surface.sdk``.

Each test checks one thing the adapter assumes of the installed libraries and, when it no longer
holds, fails saying which: an upgrade that moves a private name breaks here, by name, not somewhere
deep in the fast path. Then: the versions are pinned to the minor these were checked against, and
no module of the project but the adapter reaches for those private names.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.metadata
import importlib.util
import inspect
import re
import tomllib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
import uvicorn
from mcp.server import MCPServer
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.tools.base import Tool
from mcp.server.runner import ServerRunner
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.subscriptions import SubscriptionBus
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from pydantic import TypeAdapter
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from engine.surface import sdk

ROOT = Path(__file__).resolve().parents[3]
ADAPTER = Path("engine", "surface", "sdk.py")
#: The project's packages that must not reach past the libraries' public surface.
PACKAGES = ("engine", "gateway", "almanac")
#: The libraries whose private parts only the adapter may touch.
LIBRARIES = ("mcp", "mcp_types", "uvicorn")
#: Library modules that are internal without a leading underscore.
INTERNAL_MODULES = ("uvicorn.protocols", "uvicorn.lifespan", "uvicorn.loops", "uvicorn.middleware")
#: The private names the adapter wraps: nothing else may use them, whatever our own code is called.
WRAPPED = frozenset(
    {
        "_lowlevel_server",
        "_request_handlers",
        "_tool_manager",
        "_subscriptions",
        "_handle_call_tool",
        "_serialize",
        "_output_adapter",
        "_lifespan_state",
        "_start_asgi_task",
    }
)


@dataclasses.dataclass
class Shape:
    """A structured tool reply (so the tool has an output model)."""

    n: int


def probe_server() -> MCPServer:
    mcp = MCPServer("probe")

    async def probe(n: int, ctx: Context[Any, Any]) -> Shape:
        return Shape(n)

    mcp.add_tool(probe)
    return mcp


def broken(assumption: str) -> str:
    return f"engine.surface.sdk assumes {assumption}; it no longer holds for the installed library"


# -- mcp ---------------------------------------------------------------------------------------


@pytest.mark.req("engine:mcp", "engine:surface")
def test_mcpserver_wraps_a_lowlevel_server_in_lowlevel_server() -> None:
    server = sdk.lowlevel_server(probe_server())
    assert isinstance(server, Server), broken("MCPServer._lowlevel_server is the lowlevel Server it wraps")
    assert server.get_request_handler("tools/call") is not None, broken("that Server answers tools/call")


@pytest.mark.req("engine:mcp", "engine:surface")
def test_a_request_handler_is_dropped_from_request_handlers() -> None:
    server = sdk.lowlevel_server(probe_server())
    assert isinstance(getattr(server, "_request_handlers", None), dict), broken(
        "Server._request_handlers is the dict of handlers by method"
    )
    assert server.get_request_handler("prompts/list") is not None
    sdk.drop_request_handler(server, "prompts/list")
    sdk.drop_request_handler(server, "no/such-method")
    assert server.get_request_handler("prompts/list") is None, broken(
        "removing a method from Server._request_handlers stops the server answering it"
    )
    assert server.get_request_handler("tools/call") is not None


@pytest.mark.req("engine:mcp", "engine:surface")
def test_tools_are_found_and_listed_through_the_tool_manager() -> None:
    mcp = probe_server()
    found = sdk.find_tool(mcp, "probe")
    assert isinstance(found, Tool) and found.name == "probe", broken(
        "MCPServer._tool_manager.get_tool(name) gives the Tool of that name"
    )
    assert sdk.find_tool(mcp, "absent") is None, broken("_tool_manager.get_tool gives None for no such tool")
    assert [t.name for t in sdk.listed_tools(mcp)] == ["probe"], broken(
        "MCPServer._tool_manager.list_tools() lists the server's tools"
    )


@pytest.mark.req("engine:mcp", "engine:surface")
def test_the_subscription_bus_is_the_one_contexts_are_given() -> None:
    bus = sdk.subscription_bus(probe_server())
    members = [name for name in ("publish", "subscribe") if callable(getattr(bus, name, None))]
    assert members == ["publish", "subscribe"] and hasattr(SubscriptionBus, "publish"), broken(
        "MCPServer._subscriptions is its SubscriptionBus (publish, subscribe)"
    )
    assert "subscriptions" in inspect.signature(Context).parameters, broken(
        "Context takes the bus as subscriptions="
    )


@pytest.mark.req("engine:mcp", "engine:surface")
def test_the_tools_call_handler_is_mcpservers_own_behind_its_telemetry() -> None:
    server = sdk.lowlevel_server(probe_server())
    entry = server.get_request_handler("tools/call")
    assert entry is not None and sdk.is_sdk_call_tool(entry.handler), broken(
        "the lowlevel server's tools/call handler is MCPServer._handle_call_tool"
    )
    assert not sdk.is_sdk_call_tool(server.get_request_handler)
    assert [type(m) for m in server.middleware[:1]] == [sdk.TelemetryMiddleware], broken(
        "mcp.server._otel.OpenTelemetryMiddleware is first in MCPServer's middleware"
    )


@pytest.mark.req("engine:mcp", "engine:surface")
def test_a_single_exchange_dispatch_context_is_built_from_its_parts() -> None:
    transport = TransportContext(kind="streamable-http", can_send_request=False)
    dctx = sdk.single_exchange(transport, 7, ServerMessageMetadata(request_context=None), "tok")
    assert (dctx.transport, dctx.request_id, dctx.can_send_request) == (transport, 7, False), broken(
        "_SingleExchangeDispatchContext(transport=, request_id=, message_metadata=, progress_token=) "
        "keeps them and cannot send requests"
    )
    assert getattr(dctx, "progress_token", None) == "tok", broken("it keeps the progress token")


@pytest.mark.req("engine:mcp", "engine:surface")
def test_the_runner_serialises_a_result_in_serialize() -> None:
    params = list(inspect.signature(ServerRunner._serialize).parameters)
    assert params == ["self", "method", "version", "result"], broken(
        f"ServerRunner._serialize(self, method, version, result) (it takes {params})"
    )


@pytest.mark.req("engine:mcp", "engine:surface")
def test_a_structured_tools_output_adapter_is_built_once() -> None:
    tool = sdk.find_tool(probe_server(), "probe")
    assert tool is not None
    meta = tool.fn_metadata
    model = meta.output_model
    adapter = sdk.output_adapter(meta, model)
    assert isinstance(adapter, TypeAdapter), broken("FuncMetadata._output_adapter(model) gives a TypeAdapter")
    assert sdk.output_adapter(meta, model) is adapter, broken("the adapter is kept for its model")
    assert adapter.dump_python(adapter.validate_python(Shape(3), by_alias=True), mode="json") == {"n": 3}


@pytest.mark.req("engine:mcp", "engine:surface")
def test_a_session_managers_lifespan_state_is_what_the_lifespan_yielded() -> None:
    state = {"probe": object()}

    @asynccontextmanager
    async def lifespan(_: Server[Any]) -> AsyncIterator[dict[str, Any]]:
        yield state

    manager = StreamableHTTPSessionManager(app=Server("probe", lifespan=lifespan))
    assert sdk.lifespan_state(manager) is None, broken("_lifespan_state is None before run()")

    async def run() -> None:
        async with manager.run():
            assert sdk.lifespan_state(manager) is state, broken(
                "StreamableHTTPSessionManager._lifespan_state is what the server's lifespan yielded"
            )

    anyio.run(run)


# -- uvicorn -----------------------------------------------------------------------------------

#: What ``engine.surface.protocol`` reads and sets on a request's cycle, as uvicorn's ``send`` does.
CYCLE_ATTRIBUTES = (
    "scope",
    "transport",
    "flow",
    "logger",
    "access_log",
    "default_headers",
    "message_event",
    "on_response",
    "disconnected",
    "keep_alive",
    "waiting_for_100_continue",
    "body",
    "more_body",
    "response_started",
    "response_complete",
)


@pytest.mark.req("engine:surface")
def test_uvicorn_starts_each_request_in_start_asgi_task() -> None:
    base = HttpToolsProtocol
    assert sdk.HttpProtocol.__mro__[1] is base
    params = list(inspect.signature(base._start_asgi_task).parameters)
    assert params == ["self", "cycle", "app"], broken(
        f"HttpToolsProtocol._start_asgi_task(self, cycle, app) (it takes {params})"
    )
    for hook in (base.on_headers_complete, base.on_response_complete):
        assert "self._start_asgi_task(" in inspect.getsource(hook), broken(
            f"HttpToolsProtocol.{hook.__name__} starts a request's app through _start_asgi_task"
        )


@pytest.mark.req("engine:surface")
def test_a_request_cycle_has_what_the_socket_protocol_uses() -> None:
    init = inspect.getsource(sdk.Cycle.__init__)
    assigned = set(re.findall(r"self\.(\w+) =", init))
    missing = [name for name in CYCLE_ATTRIBUTES if name not in assigned]
    assert not missing, broken(f"RequestResponseCycle sets {', '.join(missing)} in __init__")
    for method in ("run_asgi", "send_500_response"):
        assert inspect.iscoroutinefunction(getattr(sdk.Cycle, method, None)), broken(
            f"RequestResponseCycle.{method} is a coroutine method"
        )
    flow = inspect.getsource(sdk.Cycle.__init__.__globals__["FlowControl"])
    assert "self.write_paused" in flow and "async def drain" in flow, broken(
        "FlowControl has write_paused and an async drain()"
    )


@pytest.mark.req("engine:surface")
def test_status_lines_and_the_high_water_mark_are_uvicorns() -> None:
    assert sdk.status_line(200) == b"HTTP/1.1 200 OK\r\n", broken("STATUS_LINE[200] is uvicorn's status line")
    assert sdk.status_line(404) == b"HTTP/1.1 404 Not Found\r\n"
    assert isinstance(sdk.HIGH_WATER_LIMIT, int) and sdk.HIGH_WATER_LIMIT > 0, broken(
        "flow_control.HIGH_WATER_LIMIT is a size in bytes"
    )


@pytest.mark.req("engine:surface")
def test_uvicorns_server_captures_signals_where_the_engine_overrides_it() -> None:
    assert "capture_signals" in vars(uvicorn.Server), broken(
        "uvicorn.Server.capture_signals sets the signal handlers (engine.server overrides it to exit 0)"
    )


# -- pins and reach ----------------------------------------------------------------------------


def _pins() -> dict[str, list[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    found: dict[str, list[str]] = {}
    specs = [
        *project["dependencies"],
        *(s for extra in project["optional-dependencies"].values() for s in extra),
    ]
    for spec in specs:
        name = re.split(r"[<>=!~\[ ;]", spec, maxsplit=1)[0]
        found.setdefault(name, []).append(spec[len(name) :])
    return found


@pytest.mark.req("engine:mcp", "engine:surface")
@pytest.mark.parametrize("library", ["mcp", "uvicorn"])
def test_the_library_is_pinned_to_the_installed_minor(library: str) -> None:
    major, minor = (int(part) for part in importlib.metadata.version(library).split(".")[:2])
    wanted = f">={major}.{minor},<{major}.{minor + 1}"
    pins = _pins()[library]
    assert pins and all(pin == wanted for pin in pins), (
        f"pyproject.toml pins {library} as {pins}; engine.surface.sdk was checked against "
        f"{major}.{minor}: pin {library}{wanted} (re-run this file after an upgrade)"
    )


def _their_private_names() -> frozenset[str]:
    """Every ``_name`` (not dunder) the libraries define: functions, classes, attributes set."""
    names: set[str] = set()
    for library in LIBRARIES:
        spec = importlib.util.find_spec(library)
        assert spec is not None and spec.origin is not None
        for path in Path(spec.origin).parent.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                    names.add(node.attr)
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    names.add(node.name)
    return frozenset(n for n in names if n.startswith("_") and not n.startswith("__"))


def _ours() -> dict[Path, ast.Module]:
    return {
        path.relative_to(ROOT): ast.parse(path.read_text(encoding="utf-8"))
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
    }


def _library(module: str) -> bool:
    return module.split(".")[0] in LIBRARIES


def _private_module(module: str) -> bool:
    parts = module.split(".")
    return any(p.startswith("_") for p in parts) or module.startswith(INTERNAL_MODULES)


def reaches(tree: ast.Module, theirs: frozenset[str], ours: frozenset[str]) -> list[str]:
    """Where ``tree`` touches a library's private parts: an import of a private or internal
    module or name, an attribute only the library defines (or one the adapter wraps), or an
    override of a library base class's private method."""
    found: list[str] = []
    from_library: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _library(alias.name) and _private_module(alias.name):
                    found.append(f"{node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and _library(node.module):
            from_library |= {alias.asname or alias.name for alias in node.names}
            if _private_module(node.module):
                found.append(f"{node.lineno}: from {node.module} import …")
            found += [
                f"{node.lineno}: from {node.module} import {a.name}"
                for a in node.names
                if a.name.startswith("_")
            ]
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Load)
            and (node.attr in WRAPPED or (node.attr in theirs and node.attr not in ours))
        ):
            found.append(f"{node.lineno}: .{node.attr}")
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        bases = {b.id if isinstance(b, ast.Name) else ast.unparse(b).split(".")[0] for b in node.bases}
        if bases & from_library:
            found += [
                f"{item.lineno}: {node.name}.{item.name} overrides a library's private method"
                for item in node.body
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name in theirs
            ]
    return found


def _defined(trees: dict[Path, ast.Module]) -> frozenset[str]:
    """Every name our own code defines (functions, classes, attributes it sets)."""
    names: set[str] = set()
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
    return frozenset(names - WRAPPED)


@pytest.mark.req("engine:mcp", "engine:surface")
def test_only_the_adapter_touches_the_libraries_private_parts() -> None:
    theirs = _their_private_names()
    assert theirs >= WRAPPED, f"the libraries no longer define {sorted(WRAPPED - theirs)}"
    trees = _ours()
    outside = {path: tree for path, tree in trees.items() if path != ADAPTER}
    ours = _defined(outside)
    offenders = {str(path): found for path, tree in outside.items() if (found := reaches(tree, theirs, ours))}
    assert offenders == {}, f"only {ADAPTER} may touch mcp's and uvicorn's private parts: {offenders}"
    assert reaches(trees[ADAPTER], theirs, ours), "the check finds nothing even in the adapter"


@pytest.mark.req("engine:surface")
def test_the_reach_check_catches_each_kind_of_reach() -> None:
    theirs = frozenset({"_lowlevel_server", "_only_theirs", "_shared", "_start_asgi_task"})
    samples = {
        "from mcp.server._otel import OpenTelemetryMiddleware": True,
        "import uvicorn.protocols.http.httptools_impl": True,
        "from mcp.server import _private_helper": True,
        "x = mcp._lowlevel_server": True,
        "x = thing._only_theirs": True,
        "x = thing._shared": False,
        "from uvicorn import Server\nclass P(Server):\n    def _start_asgi_task(self): ...": True,
        "from mcp.server import MCPServer\nx = MCPServer('a').name": False,
    }
    for source, caught in samples.items():
        assert bool(reaches(ast.parse(source), theirs, frozenset({"_shared"}))) is caught, source
