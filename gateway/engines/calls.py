"""One engine tool called by the gateway itself (REST, pages): an MCP ``tools/call`` on its socket.

It speaks the stateless 2026-07-28 protocol (no session, one POST, JSON or — for a call that runs
long — an SSE stream ending in the reply) with the caller's identity in the internal headers, so
the engine applies exactly the rules it applies to ``/mcp``: read-only, pinned scope, source name.
A tool error comes back as a :class:`ToolRefusal` carrying the tool's own ``[code]`` and message.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from gateway import headers as hdr
from gateway.control.records import Principal
from gateway.errors import EngineUnreachable

PROTOCOL = "2026-07-28"
_CODE = re.compile(r"\s*\[([a-z_]+)\]\s*$")
_PREFIX = re.compile(r"^Error executing tool \w+: ")


@dataclass(frozen=True)
class ToolRefusal:
    """The engine refused the call; ``code`` is the tool's stable code, ``message`` says what to fix."""

    code: str
    message: str
    fields: Mapping[str, str] = field(default_factory=dict)  # an admin call's refusals, field by field


def refusal_of(text: str) -> ToolRefusal:
    """A tool error's text (``… what to fix [code]``) as a code and a clean message."""
    text = _PREFIX.sub("", text.strip())
    found = _CODE.search(text)
    if found is None:
        return ToolRefusal("invalid_input", text or "the engine refused the call")
    return ToolRefusal(found.group(1), text[: found.start()].strip())


def reply_of(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC reply in a JSON body or at the end of an SSE stream."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [ln[5:].strip() for ln in response.text.splitlines() if ln.startswith("data:")]
        replies = [json.loads(d) for d in data if d]
        found = [r for r in replies if isinstance(r, dict) and ("result" in r or "error" in r)]
        if not found:
            raise ValueError("the stream ended without a reply")
        return dict(found[-1])
    return dict(response.json())


async def call_tool(
    client: httpx.AsyncClient, principal: Principal, tool: str, arguments: dict[str, Any]
) -> dict[str, Any] | ToolRefusal:
    """Call ``tool`` on the engine behind ``client`` as ``principal``; its structured result or refusal."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": tool,
            "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": PROTOCOL,
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    headers = [
        (b"content-type", b"application/json"),
        (b"accept", b"application/json, text/event-stream"),
        (b"mcp-protocol-version", PROTOCOL.encode()),
        (b"mcp-method", b"tools/call"),
        (b"mcp-name", tool.encode()),
        (b"host", b"localhost"),
        *hdr.identity(principal),
    ]
    try:
        response = await client.post("/mcp", content=json.dumps(body).encode(), headers=headers)
        reply = reply_of(response)
    except (httpx.TransportError, ValueError) as exc:
        raise EngineUnreachable("the workspace's engine did not answer; try again", retry_after=1) from exc
    if "error" in reply:
        error = reply["error"] if isinstance(reply["error"], dict) else {}
        return refusal_of(str(error.get("message", "the engine refused the call")))
    result = reply.get("result") or {}
    if result.get("isError"):
        text = " ".join(str(c.get("text", "")) for c in result.get("content", []) if isinstance(c, dict))
        return refusal_of(text)
    structured = result.get("structuredContent")
    if isinstance(structured, dict):
        return structured
    raise EngineUnreachable("the engine answered without a structured result; try again", retry_after=1)
