"""The lean benchmark client posts what the ``mcp`` client posts (perf:gateway): a real engine on a
socket, the real ``mcp`` client's request captured on the wire, the lean client's compared to it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from bench.lean import lean_client, tools_call_body, tools_call_headers, wire_client
from bench.processes import stop, wait_engine

#: The headers that make a request MCP (the transport's own, such as user-agent, may differ).
MCP_HEADERS = ("accept", "content-type", "mcp-protocol-version", "mcp-method", "mcp-name")


@pytest.fixture
def engine_socket(tmp_path: Path) -> Iterator[str]:
    sock, workspace = tmp_path / "engine.sock", tmp_path / "ws"
    workspace.mkdir()
    argv = [sys.executable, "-m", "engine", "--socket", str(sock), "--dir", str(workspace)]
    proc = subprocess.Popen([*argv, "--embedding-provider", "off"], stderr=subprocess.DEVNULL)
    try:
        wait_engine(sock)
        yield str(sock)
    finally:
        stop(proc)


@pytest.mark.req("perf:gateway")
def test_the_lean_client_posts_the_bytes_the_mcp_client_posts(engine_socket: str) -> None:
    sent: list[tuple[dict[str, str], bytes]] = []

    async def record(request: httpx2.Request) -> None:
        if request.headers.get("mcp-method") == "tools/call":
            sent.append((dict(request.headers), await request.aread()))

    calls: list[tuple[str, dict[str, Any]]] = [
        ("remember", {"statement": "the fjord deploy is blue"}),
        ("get_context", {"query": "fjord deploy"}),
    ]

    async def main() -> None:
        transport = httpx2.AsyncHTTPTransport(uds=engine_socket)
        http = httpx2.AsyncClient(transport=transport, event_hooks={"request": [record]})
        async with http, Client(streamable_http_client("http://localhost/mcp", http_client=http)) as client:
            for tool, arguments in calls:
                assert not (await client.call_tool(tool, arguments)).is_error

    anyio.run(main)
    assert len(sent) == len(calls)
    for (headers, body), (tool, arguments) in zip(sent, calls, strict=True):
        request_id = int(body.split(b'"id":', 1)[1].split(b",", 1)[0])
        assert tools_call_body(request_id, tool, arguments) == body
        lean = tools_call_headers(tool, None)
        assert {k: headers[k] for k in MCP_HEADERS} == {k: lean[k] for k in MCP_HEADERS}


@pytest.mark.req("perf:gateway")
def test_the_lean_client_tells_a_result_from_a_refusal(engine_socket: str) -> None:
    async def main() -> tuple[str | None, str | None, str | None]:
        async with lean_client("http://localhost/mcp", uds=engine_socket) as call:
            stored = await call("remember", {"statement": "the fjord deploy is blue"})
            unknown = await call("no_such_tool", {})
            refused = await call("remember", {})
            return stored, unknown, refused

    stored, unknown, refused = anyio.run(main)
    assert stored is None
    assert unknown is not None and "no_such_tool" in unknown
    assert refused is not None


@pytest.mark.req("perf:gateway")
def test_the_wire_client_calls_the_engine_through_the_gateways_engine_transport(engine_socket: str) -> None:
    async def main() -> tuple[str | None, str | None, str | None, str | None]:
        async with wire_client(engine_socket) as call:
            stored = await call("remember", {"statement": "the fjord deploy is blue"})
            found = await call("get_context", {"query": "fjord deploy"})
            unknown = await call("no_such_tool", {})
            refused = await call("remember", {})
            return stored, found, unknown, refused

    stored, found, unknown, refused = anyio.run(main)
    assert stored is None and found is None
    assert unknown is not None and "no_such_tool" in unknown
    assert refused is not None
