"""A hung owner node does not hang the calls forwarded to it (``run:scale-out``; setting
``forward_timeout``): a real PostgreSQL and two real ``almanac serve`` nodes. Node C, which holds
the workspace, is stopped with SIGSTOP — its socket still accepts connections, nothing answers — and
a call forwarded to it through node A is answered 503 ``node_unavailable`` with ``Retry-After`` once
``forward_timeout`` has passed, long before C's heartbeat is missed. A quiet MCP stream forwarded to
C stays open past ``forward_timeout`` (the engine's keep-alives arrive within it)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import anyio
import httpx
import pytest

from gateway.control.store import ControlPlane
from tests.gateway.cluster.nodes import Cluster, running
from tests.gateway.cluster.test_three_nodes import ACCEPT, INITIALIZE
from tests.gateway.cluster.test_three_nodes import _call as initialize
from tests.gateway.e2e import connect, data, wait_for
from tests.pg import PostgresServer

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

#: Just above the engines' SSE keep-alive interval (15 s): the shortest a deployment should use.
TIMEOUT = 16.0


class _Patient(Cluster):
    """Heartbeats that a stop of a few dozen seconds does not make anyone miss: what times out is the
    forwarded call, not the node's lease."""

    def settings(self, name: str) -> dict[str, str]:
        return {
            **super().settings(name),
            "node_heartbeat_interval": "1",
            "placement_lease": "300",
            "forward_timeout": str(TIMEOUT),
        }


@pytest.fixture(scope="module")
def cluster(postgres: PostgresServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Patient]:
    with running(
        _Patient(postgres.create_database(), tmp_path_factory.mktemp("hung"), {}), ["node-a", "node-c"]
    ) as found:
        yield found


@pytest.fixture(scope="module")
async def token(cluster: _Patient) -> str:
    """An owner whose workspace is on node C, its engine started there by a first write through A."""
    store = ControlPlane.connect(cluster.url, cluster.root / "unused.db")
    try:
        owner, workspace = store.owners.create("cy@example.com", None)
        store.nodes.place_on(workspace.id, "node-c", now=time.time(), lease=300.0)
        secret = store.connections.create_pat(owner.id, workspace.id, "cy's agent")[1]
    finally:
        store.close()
    async with connect(cluster.nodes["node-a"], secret) as client:
        data(await client.call_tool("remember", {"statement": "the ferry leaves at noon"}))
    return secret


@pytest.mark.req("run:scale-out")
async def test_a_quiet_stream_forwarded_to_another_node_outlives_forward_timeout(
    cluster: _Patient, token: str
) -> None:
    a = cluster.nodes["node-a"]
    headers = {"Authorization": f"Bearer {token}", "Accept": ACCEPT}
    async with httpx.AsyncClient(timeout=httpx.Timeout(TIMEOUT * 4)) as http:
        opened = await http.post(a.mcp_url, json=INITIALIZE, headers=headers)
        assert opened.status_code == 200, opened.text
        session = {
            **headers,
            "mcp-session-id": opened.headers["mcp-session-id"],
            "mcp-protocol-version": "2025-11-25",
        }
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await http.post(a.mcp_url, json=note, headers=session)).status_code == 202
        began = time.monotonic()
        received: list[bytes] = []
        listen = {**session, "Accept": "text/event-stream"}
        async with http.stream("GET", a.mcp_url, headers=listen) as stream:
            assert stream.status_code == 200
            with anyio.move_on_after(TIMEOUT + 3):  # past forward_timeout, the stream still open
                async for chunk in stream.aiter_raw():
                    received.append(chunk)
                pytest.fail(f"the stream ended after {time.monotonic() - began:.1f} s: {received!r}")
        assert time.monotonic() - began >= TIMEOUT + 3
        assert any(b"ping" in chunk for chunk in received), received  # the keep-alive that kept it


@pytest.mark.req("run:scale-out")
async def test_a_call_forwarded_to_a_hung_node_is_answered_503_after_forward_timeout(
    cluster: _Patient, token: str
) -> None:
    a, c = cluster.nodes["node-a"], cluster.nodes["node-c"]
    assert initialize(a, token).status_code == 200
    os.kill(c.proc.pid, signal.SIGSTOP)  # its listening socket still accepts; nothing answers
    try:
        began = time.monotonic()
        refused = await anyio.to_thread.run_sync(lambda: initialize(a, token))
        took = time.monotonic() - began
        assert refused.status_code == 503, refused.text
        error = refused.json()["error"]
        assert error["code"] == "node_unavailable"
        assert f"did not answer within {TIMEOUT:g} s" in error["message"]
        assert int(refused.headers["retry-after"]) >= 1
        print(f"a call forwarded to a stopped node was answered 503 after {took:.1f} s")
        assert TIMEOUT - 0.5 <= took < TIMEOUT + 10, took  # the timeout, not C's heartbeat (300 s)
    finally:
        os.kill(c.proc.pid, signal.SIGCONT)
    wait_for(lambda: initialize(a, token).status_code == 200, timeout=60, what="node C to answer again")
    async with connect(a, token) as client:
        found = await client.call_tool("get_context", {"query": "ferry"})
        assert "noon" in str(found.content)
