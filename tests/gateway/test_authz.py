"""``sec:authz`` (non-OAuth cases): attacks on the real gateway, each shown refused, nothing written.

Cross-workspace access through every tool; read-only and scope-pin bypass attempts; internal
identity headers forged from outside; a session opened by one token used with another; oversized
and smuggled requests (on a raw socket where the HTTP client would refuse to send them); path
traversal in scopes, ids and dates; the engine socket's mode and its directory's.
"""

from __future__ import annotations

import json
import socket
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.gateway.e2e import Gateway, connect, data, files_containing, refusal, start_gateway

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.req("sec:authz")]

ACCEPT = "application/json, text/event-stream"
WRITES: list[tuple[str, dict[str, Any]]] = [
    ("remember", {"statement": "forbidden-write note"}),
    ("remember", {"statement": "x", "subject": "forbidden-write", "predicate": "is", "object": "y"}),
    ("save_memory", {"subject": "forbidden-write", "predicate": "is", "object": "z"}),
    ("remember_note", {"text": "forbidden-write log"}),
]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    root = tmp_path_factory.mktemp("authz")
    gw = start_gateway(root / "data", root / "gateway.log", max_body_bytes="65536", engine_start_timeout="60")
    yield gw
    gw.stop()


@pytest.fixture(scope="module")
def victim(gateway: Gateway) -> dict[str, str]:
    """A workspace with one memory of each kind, one retired, and the token that owns it."""
    gateway.owner("victim@example.com")
    token = gateway.token("victim@example.com", "victim")
    return {"token": token, "dir": str(gateway.workspace_dir("victim@example.com"))}


async def _victim_ids(gateway: Gateway, victim: dict[str, str]) -> list[str]:
    async with connect(gateway, victim["token"]) as v:
        fact = data(await v.call_tool("remember", {"statement": "s", "subject": "Vault", "predicate": "code",
                                                    "object": "victim-secret-fact"}))  # fmt: skip
        note = data(await v.call_tool("remember", {"statement": "victim-secret-note"}))
        log = data(await v.call_tool("remember_note", {"text": "victim-secret-log"}))
        retired = data(await v.call_tool("remember", {"statement": "victim-secret-retired"}))
        data(await v.call_tool("retire_memory", {"id": retired["id"]}))
    return [fact["id"], note["id"], log["id"], retired["id"]]


def _rpc(name: str, arguments: dict[str, Any], rpc_id: int = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rpc_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


async def test_another_workspace_is_out_of_reach_through_every_tool(
    gateway: Gateway, victim: dict[str, str]
) -> None:
    ids = await _victim_ids(gateway, victim)
    gateway.owner("mallory@example.com")
    mallory = gateway.token("mallory@example.com", "mallory")
    async with connect(gateway, mallory) as m:
        for memory_id in ids:
            for tool, args in (
                ("retrieve_memory", {"id": memory_id}),
                ("retrieve_memory", {"id": memory_id, "include_history": True}),
                ("retire_memory", {"id": memory_id}),
                ("restore_memory", {"id": memory_id}),
            ):
                assert "victim-secret" not in refusal(await m.call_tool(tool, args))
        assert data(await m.call_tool("retrieve_memory", {"subject": "Vault"}))["facts"] == []
        context = await m.call_tool(
            "get_context", {"query": "victim secret vault code", "include_archived": True}
        )
        assert "victim-secret" not in json.dumps(context.structured_content)
        counts = data(await m.call_tool("memory_status", {}))
        assert "victim-secret" not in json.dumps(counts)
        assert json.dumps(counts).count('"live": 0') >= 3  # nothing of the victim's is counted
        for tool, args in WRITES:
            data(await m.call_tool(tool, args))  # lands in mallory's own workspace
    assert files_containing(Path(victim["dir"]), "forbidden-write") == []
    async with connect(gateway, victim["token"]) as v:  # and the victim's memories are untouched
        for memory_id, state in zip(ids, ["live", "live", "live", "retired"], strict=True):
            found = data(await v.call_tool("retrieve_memory", {"id": memory_id}))
            assert [x["state"] for x in found["facts"] + found["notes"]] == [state]


async def test_read_only_and_pinned_tokens_cannot_be_talked_out_of_their_limits(gateway: Gateway) -> None:
    gateway.owner("ro@example.com")
    full = gateway.token("ro@example.com", "full")
    reader = gateway.token("ro@example.com", "reader", "--read-only")
    pinned = gateway.token("ro@example.com", "pinned", "--scope", "project:a")
    async with connect(gateway, full) as f:
        other = data(await f.call_tool("remember", {"statement": "other-scope-note", "scope": "project:b"}))
        shared = data(await f.call_tool("remember", {"statement": "shared-note"}))
    forged = {"X-Almanac-Read-Only": "0", "X-Almanac-Scope": "project:b", "X-Almanac-Connection": "owner"}
    for headers in (None, forged):
        async with connect(gateway, reader, headers=headers) as r:
            for tool, args in [*WRITES, ("retire_memory", {"id": shared["id"]}),
                               ("restore_memory", {"id": shared["id"]})]:  # fmt: skip
                assert "read_only" in refusal(await r.call_tool(tool, args))
        async with connect(gateway, pinned, headers=headers) as p:
            for tool, args in (
                ("remember", {"statement": "forbidden-write pinned", "scope": "project:b"}),
                (
                    "save_memory",
                    {"subject": "a", "predicate": "b", "object": "forbidden-write", "scope": "project:b"},
                ),
                ("retire_memory", {"id": other["id"]}),
                ("restore_memory", {"id": other["id"]}),
                ("retrieve_memory", {"id": other["id"]}),
                ("retrieve_memory", {"subject": "a", "scope": "project:b"}),
                ("get_context", {"query": "other scope note", "scope": "project:b"}),
            ):
                assert "other-scope-note" not in refusal(await p.call_tool(tool, args))
            context = await p.call_tool("get_context", {"query": "other scope note"})
            assert "other-scope-note" not in json.dumps(context.structured_content)
            receipt = data(await p.call_tool("remember", {"statement": "pinned write"}))
            assert receipt["scope"] == "project:a" and receipt["source"] == "pinned"
    workspace = gateway.workspace_dir("ro@example.com")
    assert files_containing(workspace, "forbidden-write") == []
    async with connect(gateway, full) as f:
        found = data(await f.call_tool("retrieve_memory", {"id": other["id"]}))["notes"]
        assert [n["state"] for n in found] == ["live"]


async def test_forged_identity_headers_from_outside_are_ignored(gateway: Gateway) -> None:
    gateway.owner("forge@example.com")
    token = gateway.token("forge@example.com", "honest name")
    forged = {
        "X-Almanac-Connection": "the%20owner",
        "X-Almanac-Connection-Id": "con_admin",
        "X-Almanac-Scope": "project:secret",
        "X-Almanac-Read-Only": "0",
    }
    async with connect(gateway, token, headers=forged) as c:
        receipt = data(await c.call_tool("remember", {"statement": "who wrote this"}))
    assert (receipt["source"], receipt["source_verified"], receipt["scope"]) == ("honest name", True, None)
    # Without any token, forged identity gets nowhere at all.
    r = httpx.post(gateway.mcp_url, json=_rpc("remember", {"statement": "forbidden-write anon"}),
                   headers={**forged, "Accept": ACCEPT}, timeout=30)  # fmt: skip
    assert r.status_code == 401
    assert files_containing(gateway.workspace_dir("forge@example.com"), "forbidden-write") == []


async def test_a_session_opened_by_one_token_is_refused_to_another(gateway: Gateway) -> None:
    gateway.owner("sess@example.com")
    gateway.owner("thief@example.com")
    owner = gateway.token("sess@example.com", "owner")
    thief = gateway.token("thief@example.com", "thief")
    same_owner_other_token = gateway.token("sess@example.com", "second token")
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "raw", "version": "1"}}}  # fmt: skip
    owner_headers = {"Authorization": f"Bearer {owner}", "Accept": ACCEPT}
    opened = httpx.post(gateway.mcp_url, json=init, headers=owner_headers, timeout=30)
    assert opened.status_code == 200
    session = opened.headers["mcp-session-id"]
    for token in (thief, same_owner_other_token):
        headers = {"Authorization": f"Bearer {token}", "Accept": ACCEPT, "Mcp-Session-Id": session,
                   "Mcp-Protocol-Version": "2025-06-18"}  # fmt: skip
        r = httpx.post(gateway.mcp_url, json=_rpc("remember", {"statement": "forbidden-write hijack"}),
                       headers=headers, timeout=30)  # fmt: skip
        assert r.status_code == 404, r.text
        r = httpx.request("DELETE", gateway.mcp_url, headers=headers, timeout=30)
        assert r.status_code == 404
    for email in ("sess@example.com", "thief@example.com"):
        assert files_containing(gateway.workspace_dir(email), "forbidden-write") == []


def _raw(gateway: Gateway, request: bytes) -> tuple[int, bytes]:
    """Send bytes on a fresh TCP connection; the status of the first response, and all it said."""
    host, port = gateway.url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(request)
        s.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := s.recv(65536):
            received += chunk
    status = int(received.split(b" ", 2)[1]) if received.startswith(b"HTTP/1.1 ") else 0
    return status, received


async def test_oversized_and_smuggled_requests_are_refused(gateway: Gateway) -> None:
    gateway.owner("smuggle@example.com")
    token = gateway.token("smuggle@example.com", "smuggler")
    auth = f"Authorization: Bearer {token}\r\nAccept: {ACCEPT}\r\nContent-Type: application/json\r\n"
    head = f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}"
    body = json.dumps(_rpc("remember", {"statement": "forbidden-write smuggled"})).encode()
    big = json.dumps(_rpc("remember", {"statement": "forbidden-write " + "x" * 70_000})).encode()

    declared_too_big = f"{head}Content-Length: {len(big)}\r\n\r\n".encode() + big
    assert _raw(gateway, declared_too_big)[0] == 413
    chunked_too_big = (
        (f"{head}Transfer-Encoding: chunked\r\n\r\n{len(big):x}\r\n").encode() + big + b"\r\n0\r\n\r\n"
    )
    assert _raw(gateway, chunked_too_big)[0] == 413
    both = f"{head}Content-Length: {len(body)}\r\nTransfer-Encoding: chunked\r\n\r\n".encode() + body
    assert _raw(gateway, both)[0] == 400
    twice = f"{head}Content-Length: {len(body)}\r\nContent-Length: 5\r\n\r\n".encode() + body
    assert _raw(gateway, twice)[0] == 400
    # A second request hidden in the first one's body is never run as its own request.
    hidden = f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body
    outer = (
        f"POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(hidden)}\r\n\r\n".encode()
        + hidden
    )
    status, said = _raw(gateway, outer)
    assert status == 405 and said.count(b"HTTP/1.1 ") == 1
    assert files_containing(gateway.workspace_dir("smuggle@example.com"), "forbidden-write") == []


async def test_path_traversal_in_scopes_ids_and_dates_is_refused(gateway: Gateway) -> None:
    gateway.owner("trav@example.com")
    token = gateway.token("trav@example.com", "traveller")
    workspace = gateway.workspace_dir("trav@example.com")
    async with connect(gateway, token) as c:
        for scope in ("../../control", "project/../../x", "..", "/etc/passwd", "a\\..\\b"):
            refusal(await c.call_tool("remember", {"statement": "traversal-write scope", "scope": scope}))
            refusal(await c.call_tool("retrieve_memory", {"subject": "x", "scope": scope}))
            refusal(await c.call_tool("get_context", {"query": "x", "scope": scope}))
        for memory_id in (
            "../../control.db",
            "nte_../../../control",
            "log_/../../x",
            "fct_%2e%2e%2f",
            "nte_",
        ):
            for tool in ("retrieve_memory", "retire_memory", "restore_memory"):
                refusal(await c.call_tool(tool, {"id": memory_id}))
        for day in ("../../../escape", "2026-11-30/../../x", "2026-13-45"):
            refusal(await c.call_tool("remember_note", {"text": "traversal-write date", "date": day}))
    data_dir = gateway.data_dir
    assert files_containing(data_dir, "traversal-write") == []
    assert not any(p.name in ("escape", "x") for p in data_dir.rglob("*"))
    assert not (workspace / ".." / "escape.md").exists()


async def test_the_engine_socket_is_private(gateway: Gateway) -> None:
    gateway.owner("sock@example.com")
    token = gateway.token("sock@example.com", "sock")
    async with connect(gateway, token) as c:
        data(await c.call_tool("remember", {"statement": "wake the engine"}))
    workspace = gateway.workspace_dir("sock@example.com")
    assert workspace in gateway.engines()
    bound = [line.split()[-1] for line in Path("/proc/net/unix").read_text().splitlines()[1:]]
    (sock,) = {Path(p) for p in bound if p.endswith(f"/{workspace.name}.sock")}
    assert stat.S_ISSOCK(sock.stat().st_mode)
    assert stat.S_IMODE(sock.stat().st_mode) == 0o600
    assert stat.S_IMODE(sock.parent.stat().st_mode) == 0o700
