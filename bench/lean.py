"""A lean MCP client for the benchmarks: plain httpx posting the bytes the ``mcp`` client posts.

The ``mcp`` client does work of its own on every call (pydantic models for the envelope and the
result, and a ``jsonschema`` validation of each structured result against the tool's output
schema); timed through it, a transport's overhead includes the client's. This client sends the
same ``tools/call`` request — the same JSON-RPC body, byte for byte (``tests/bench/test_lean.py``
compares them), and the same MCP headers, stateless 2026-07-28 protocol as
``gateway/engines/calls.py`` speaks — and only reads the reply's ``isError``.

:func:`wire_client` sends the same bytes straight to an engine's socket the way the engine's only
production caller does: through the gateway's own engine client (``gateway/engines/wire.py``, the
transport the ``/mcp`` proxy hands each request to), with no ``httpx.AsyncClient`` around it.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx

from gateway import headers as hdr
from gateway.edge.proxy import engine_call, read_whole
from gateway.engines.calls import PROTOCOL, reply_of
from gateway.engines.wire import EngineTransport

#: The ``_meta`` the ``mcp`` client (2.3, default client info) puts on every request.
META = {
    "io.modelcontextprotocol/protocolVersion": PROTOCOL,
    "io.modelcontextprotocol/clientInfo": {"name": "mcp", "version": "0.1.0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}

#: One way of calling a tool: ``(tool, arguments) → error text or None``.
Call = Callable[[str, dict[str, Any]], Awaitable[str | None]]


def tools_call_body(request_id: int, tool: str, arguments: dict[str, Any]) -> bytes:
    """The JSON-RPC ``tools/call`` body, serialised as the ``mcp`` client serialises it."""
    message = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, "_meta": META},
    }
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()


def tools_call_headers(tool: str, token: str | None) -> dict[str, str]:
    """The MCP headers the ``mcp`` client sends with a ``tools/call`` (plus the bearer token)."""
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": PROTOCOL,
        "mcp-method": "tools/call",
        "mcp-name": tool,
    }
    if token:
        headers["authorization"] = f"Bearer {token}"
    return headers


def error_of(response: httpx.Response) -> str | None:
    """None for a successful tool result; else a short description of what went wrong."""
    if response.status_code != 200:
        return f"HTTP {response.status_code}: {response.text[:80]}"
    try:
        reply = reply_of(response)
    except ValueError:
        return "the stream ended without a reply"
    if "error" in reply:
        return str(reply["error"])[:80]
    result = reply.get("result") or {}
    if result.get("isError"):
        return " ".join(str(c.get("text", "")) for c in result.get("content", []))[:80]
    return None


@asynccontextmanager
async def lean_client(url: str, *, token: str | None = None, uds: str | None = None) -> AsyncIterator[Call]:
    """Calls to the MCP endpoint at ``url`` (over the Unix socket ``uds`` if given), one keep-alive
    connection, no session, one POST per call."""
    transport = httpx.AsyncHTTPTransport(uds=uds) if uds else None
    ids = itertools.count(1)
    async with httpx.AsyncClient(transport=transport, timeout=60) as http:

        async def call(tool: str, arguments: dict[str, Any]) -> str | None:
            body = tools_call_body(next(ids), tool, arguments)
            return error_of(await http.post(url, content=body, headers=tools_call_headers(tool, token)))

        yield call


@asynccontextmanager
async def wire_client(uds: str) -> AsyncIterator[Call]:
    """Calls to the engine on the Unix socket ``uds`` through the gateway's engine transport, one
    keep-alive connection, as the gateway's proxy sends them and reads them (``engine_call`` handed
    to ``EngineTransport.send_call``, the reply's body read whole, as ``McpProxy`` passes on a reply
    of known length); only the check of ``isError`` is the bench's."""
    transport = EngineTransport(uds, max_connections=1, keepalive_expiry=30.0)
    ids = itertools.count(1)
    try:

        async def call(tool: str, arguments: dict[str, Any]) -> str | None:
            body = tools_call_body(next(ids), tool, arguments)
            headers = [(k.encode(), v.encode()) for k, v in tools_call_headers(tool, None).items()]
            # as the gateway's proxy builds it: the client's headers, the engine's Host
            response = await transport.send_call(
                engine_call("POST", [*headers, (b"host", b"localhost")], body)
            )
            try:
                content = await read_whole(response)
            finally:
                await response.aclose()
            return error_of_reply(response, content)

        yield call
    finally:
        await transport.aclose()


def error_of_reply(response: httpx.Response, content: bytes) -> str | None:
    """:func:`error_of` for a reply whose body was read from its stream: a JSON reply is decoded
    straight from its bytes (what ``Response.json`` does after its encoding checks)."""
    if response.status_code == 200 and hdr.get(response.headers.raw, b"content-type") == "application/json":
        result = json.loads(content).get("result")
        if isinstance(result, dict) and result.get("isError") is False:
            return None
    return error_of(httpx.Response(response.status_code, headers=response.headers, content=content))
