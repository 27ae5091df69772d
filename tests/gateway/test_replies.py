"""Through the real gateway to a real engine: a call that asked for nothing streams no SSE, a call
that asked for progress or logs still gets its notifications (engine:surface, perf:gateway)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.gateway.e2e import connect, data, start_gateway

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

PROTOCOL = "2026-07-28"


def _post(url: str, token: str, statement: str, **meta: Any) -> httpx.Response:
    body = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {
            "name": "remember",
            "arguments": {"statement": statement},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": PROTOCOL,
                "io.modelcontextprotocol/clientCapabilities": {},
                **meta,
            },
        },
    }
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": PROTOCOL,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "remember",
    }
    return httpx.post(url, json=body, headers=headers, timeout=60)


@pytest.mark.req("engine:surface", "perf:gateway")
async def test_json_for_plain_calls_and_streams_for_progress_through_the_gateway(tmp_path: Path) -> None:
    gw = start_gateway(tmp_path / "data", tmp_path / "gateway.log")
    try:
        gw.owner("ivy@example.com")
        token = gw.token("ivy@example.com", "ivy")

        plain = _post(gw.mcp_url, token, "the fjord deploy is blue")
        assert plain.status_code == 200 and plain.headers["content-type"] == "application/json"
        assert plain.json()["result"]["structuredContent"]["action"] == "store"

        streamed = _post(gw.mcp_url, token, "the kelp deploy is green", progressToken="t1")
        assert streamed.headers["content-type"].startswith("text/event-stream")
        events = [json.loads(ln[5:]) for ln in streamed.text.splitlines() if ln.startswith("data:")]
        beats = [e["params"] for e in events if e.get("method") == "notifications/progress"]
        assert beats and beats[-1]["progressToken"] == "t1" and beats[-1]["message"] == "done"
        assert events[-1]["result"]["structuredContent"]["action"] == "store"

        seen: list[tuple[float, float | None, str | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append((progress, total, message))

        async with connect(gw, token, mode=PROTOCOL) as client:  # the real MCP client, both ways
            quiet = data(await client.call_tool("remember", {"statement": "the dune deploy is red"}))
            loud = data(
                await client.call_tool(
                    "remember", {"statement": "the reef deploy is gold"}, progress_callback=on_progress
                )
            )
        assert quiet["action"] == "store" and loud["action"] == "store"
        assert seen and seen[0][2] == "working" and seen[-1][2] == "done"
    finally:
        gw.stop()
