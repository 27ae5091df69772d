"""One JSON reply when nothing can stream; SSE if asked for progress or logs (engine:surface)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.surface.replies import NOT_JSON, answers_at_once, decoded, peekable, read_body, replay
from tests.engine.support import socket_engine

PROTOCOL = "2026-07-28"


def _call(tool: str, arguments: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {
            "name": tool,
            "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": PROTOCOL,
                "io.modelcontextprotocol/clientCapabilities": {},
                **meta,
            },
        },
    }


def _scope(method: str = "POST", **headers: str) -> dict[str, Any]:
    return {
        "type": "http",
        "method": method,
        "headers": [(k.replace("_", "-").encode(), v.encode()) for k, v in headers.items()],
    }


def test_only_a_request_that_can_get_no_notification_is_answered_at_once() -> None:
    def at_once(message: Any) -> bool:
        return answers_at_once(decoded(json.dumps(message).encode()))

    plain = _call("remember", {"statement": "x"})
    assert at_once(plain)
    assert at_once({**plain, "params": None})
    assert not at_once(_call("remember", {}, progressToken="p1"))
    assert not at_once(_call("remember", {}, progressToken=0))
    logged = _call("remember", {}, **{"io.modelcontextprotocol/logLevel": "debug"})
    assert not at_once(logged)
    listen = {"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": {}}
    assert not at_once(listen)
    # what the streaming manager must answer itself (with its own errors): not one request, not JSON
    assert decoded(b"{not json") is NOT_JSON and not answers_at_once(decoded(b"{not json"))
    assert not at_once([plain])
    assert not at_once({"jsonrpc": "2.0", "method": "notifications/x"})
    assert not at_once({**plain, "params": [1]})
    assert not at_once({**plain, "params": {"_meta": "odd"}})


def test_only_a_modern_post_with_a_declared_small_body_is_read_first() -> None:
    assert peekable(_scope(mcp_protocol_version=PROTOCOL, content_length="120"))
    assert not peekable(_scope(mcp_protocol_version=PROTOCOL))  # no length declared: not read first
    assert not peekable(_scope(mcp_protocol_version=PROTOCOL, content_length="120"), limit=100)
    assert not peekable(_scope(mcp_protocol_version="2025-11-25", content_length="120"))  # a session's
    assert not peekable(_scope(content_length="120"))  # an opening initialize carries no version header
    assert not peekable(_scope("GET", mcp_protocol_version=PROTOCOL, content_length="0"))


@pytest.mark.anyio
async def test_the_body_read_first_is_handed_over_again_then_the_rest() -> None:
    sent: list[dict[str, Any]] = [
        {"type": "http.request", "body": b"ab", "more_body": True},
        {"type": "http.request", "body": b"cd", "more_body": False},
        {"type": "http.disconnect"},
    ]

    async def receive() -> dict[str, Any]:
        return sent.pop(0)

    body, last = await read_body(receive)
    assert (body, last) == (b"abcd", None)
    again = replay(body, last, receive)
    assert await again() == {"type": "http.request", "body": b"abcd", "more_body": False}
    assert await again() == {"type": "http.disconnect"}


def _post(sock: Path, body: dict[str, Any]) -> httpx.Response:
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": PROTOCOL,
        "Mcp-Method": "tools/call",
        "Mcp-Name": body["params"]["name"],
    }
    with httpx.Client(transport=httpx.HTTPTransport(uds=str(sock)), timeout=30.0) as http:
        return http.post("http://localhost/mcp", json=body, headers=headers)


def _events(response: httpx.Response) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]


@pytest.mark.req("engine:surface", "perf:gateway")
def test_the_socket_answers_in_json_unless_progress_or_logs_were_asked_for(tmp_path: Path) -> None:
    sock = tmp_path / "e.sock"
    with socket_engine(tmp_path / "ws", sock):
        plain = _post(sock, _call("remember", {"statement": "the fjord deploy is blue"}))
        progress = _post(sock, _call("remember", {"statement": "the kelp deploy green"}, progressToken="p1"))
        opt_in = {"io.modelcontextprotocol/logLevel": "info"}
        logged = _post(sock, _call("remember", {"statement": "the dune deploy is red"}, **opt_in))
        refused = _post(sock, _call("retire_memory", {"id": "nte_01M8N16DE4023GQ7VE9X9A8VJT"}))

    assert plain.status_code == 200 and plain.headers["content-type"] == "application/json"
    reply = plain.json()
    assert reply["id"] == 7 and reply["result"]["structuredContent"]["action"] == "store"

    assert progress.headers["content-type"].startswith("text/event-stream")
    events = _events(progress)
    beats = [e["params"] for e in events if e.get("method") == "notifications/progress"]
    assert beats and all(b["progressToken"] == "p1" for b in beats) and beats[-1]["message"] == "done"
    assert events[-1]["id"] == 7 and events[-1]["result"]["structuredContent"]["action"] == "store"

    assert logged.headers["content-type"].startswith("text/event-stream")
    said = [e["params"] for e in _events(logged) if e.get("method") == "notifications/message"]
    assert said and said[0]["level"] == "info" and said[0]["data"].startswith("remember: store note")
    assert _events(logged)[-1]["result"]["structuredContent"]["action"] == "store"

    # a refusal in JSON mode is the same tool error it always was
    assert refused.headers["content-type"] == "application/json"
    result = refused.json()["result"]
    assert result["isError"] and result["content"][0]["text"].endswith("[not_found]")
