"""Which plain ``tools/call`` requests the engine answers without the SDK's dispatch (perf:gateway).

``tests/engine/surface/test_lean_contract.py`` compares the replies with the SDK's byte for byte
over real engines; this checks that the direct path is really taken for the engine's own server
(so that comparison is not vacuous), and that everything it does not mirror is left to the SDK.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from starlette.requests import Request

from engine.memory import Memory
from engine.store.workspace import Workspace
from engine.surface.direct import Direct, Waited, driven, untraced
from engine.tools import Served, build_server

VERSION = "2026-07-28"
CAPS = "io.modelcontextprotocol/clientCapabilities"
META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientInfo": {"name": "direct", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def params(name: Any = "remember", arguments: Any = None, **more: Any) -> dict[str, Any]:
    sent: dict[str, Any] = {"name": name, "_meta": META, **more}
    if arguments is not None:
        sent["arguments"] = arguments
    return sent


def request() -> Request:
    headers = [(b"host", b"localhost"), (b"content-type", b"application/json")]
    return Request({"type": "http", "method": "POST", "path": "/mcp", "headers": headers})


@pytest.mark.req("engine:surface", "perf:gateway")
def test_the_engines_server_is_the_one_it_mirrors() -> None:
    direct = Direct(build_server(Served()))
    assert direct.enabled
    for tool in ("remember", "save_memory", "remember_note", "retrieve_memory"):
        assert direct.eligible(params(tool, {}), VERSION) is not None, tool
    for tool in ("retire_memory", "restore_memory", "get_context", "memory_status"):
        assert direct.eligible(params(tool, {}), VERSION) is not None, tool


@pytest.mark.parametrize(
    ("what", "sent"),
    [
        ("an unknown tool", params("forget_everything", {})),
        ("a name that is not a string", params(5, {})),
        ("arguments that are not an object", params("remember", ["x"])),
        ("a parameter beyond name and arguments", params("remember", {}, requestState="x")),
        ("a trace context in _meta", {**params("remember", {}), "_meta": {**META, "traceparent": "00"}}),
        ("no _meta", {"name": "remember", "arguments": {}}),
        ("an envelope the SDK's surface refuses", {**params(), "_meta": {**META, CAPS: "none"}}),
    ],
)
def test_what_it_leaves_to_the_sdk(what: str, sent: dict[str, Any]) -> None:
    assert Direct(build_server(Served())).eligible(sent, VERSION) is None, what


@pytest.mark.anyio
async def test_arguments_that_fail_validation_go_to_the_sdk_unrun() -> None:
    """None: the SDK validates them again and words the refusal; nothing ran."""
    direct = Direct(build_server(Served()))
    assert await direct.call(1, params("remember", {"statement": 5}), VERSION, request(), {}) is None
    assert await direct.call(1, params("remember", {}), VERSION, request(), {}) is None


@pytest.mark.anyio
async def test_a_tool_error_is_answered_as_the_sdk_words_it() -> None:
    """An engine not yet given its workspace refuses every call: the SDK's prefix and wire shape."""
    mcp = build_server(Served())
    result = await Direct(mcp).call(7, params("remember", {"statement": "x"}), VERSION, request(), {})
    assert result == {
        "content": [
            {
                "text": "Error executing tool remember: this engine has not been given its workspace yet; "
                "try again [not_built]",
                "type": "text",
            }
        ],
        "isError": True,
        "resultType": "complete",
        "_meta": {"io.modelcontextprotocol/serverInfo": mcp._lowlevel_server.server_info_stamp},
    }


def test_a_whole_call_runs_on_a_thread_without_the_loop(tmp_path: Path) -> None:
    """``call_here``: the tool's coroutine driven to its end on a plain thread (no event loop
    there), its off-loop work run in place; the same result as ``call`` awaited on a loop."""
    workspace = Workspace(tmp_path)
    workspace.open()
    try:
        direct = Direct(build_server(Memory(workspace)))
        sent = params("remember", {"statement": "Ada owns the fjord deploy"})
        prepared = direct.prepare(3, sent, VERSION, request(), {})
        assert prepared is not None
        outcome: dict[str, Any] = {}
        thread = threading.Thread(target=lambda: outcome.update(result=direct.call_here(prepared)))
        thread.start()
        thread.join(30)
        first = outcome["result"]
        assert first["isError"] is False and first["structuredContent"]["action"] == "store", first
        again = asyncio.run(direct.call(4, sent, VERSION, request(), {}))
        assert again is not None and again["structuredContent"]["id"] == first["structuredContent"]["id"]
        assert list(again) == list(first)  # the same wire shape, key order included
    finally:
        workspace.close()


def test_a_coroutine_that_waits_is_not_driven_off_the_loop() -> None:
    async def waits() -> None:
        await asyncio.sleep(0)

    async def returns() -> int:
        return 5

    with pytest.raises(Waited):
        driven(waits())
    assert driven(returns()) == 5


async def extra_middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    return await call_next(ctx)


def test_a_server_it_does_not_mirror_is_left_to_the_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    mcp = build_server(Served())
    mcp._lowlevel_server.middleware.append(extra_middleware)
    assert not Direct(mcp).enabled
    assert Direct(mcp).eligible(params("remember", {}), VERSION) is None

    monkeypatch.setenv("OTEL_PYTHON_TRACER_PROVIDER", "sdk_tracer_provider")
    assert not untraced()  # a tracer would record the SDK's span: the SDK answers
    assert Direct(build_server(Served())).eligible(params("remember", {}), VERSION) is None
