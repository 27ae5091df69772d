"""The scale-out acceptance test (``run:scale-out``): a real PostgreSQL control plane and THREE real
``almanac serve`` nodes on loopback, each with its own data directory, real engines and the real
MCP client. Any node serves any workspace: calls for a workspace placed elsewhere are forwarded,
streaming, to its node, signed with the cluster secret (never the client's token); a workspace whose
node is down answers 503 + Retry-After everywhere and is opened nowhere else; back, it has every
acknowledged write. The nodes are started once for the module."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import anyio
import httpx
import pytest

from gateway.cluster import signing
from gateway.cluster.forward import INTERNAL_MCP_PATH
from gateway.control.clock import epoch
from gateway.control.records import Principal
from gateway.control.store import ControlPlane
from gateway.errors import BadRequest
from tests.gateway.cluster.nodes import SECRET, Cluster, started_nodes
from tests.gateway.e2e import Gateway, connect, data, files_containing, wait_for

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

NAMES = ("node-a", "node-b", "node-c")
ACCEPT = "application/json, text/event-stream"


cluster = started_nodes("cluster", "cluster", NAMES, Cluster)


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "cluster-test", "version": "1"},
    },
}


def _call(node: Gateway, token: str) -> httpx.Response:
    """An MCP ``initialize`` over plain HTTP (to read the status and headers of a refusal)."""
    return httpx.post(
        node.mcp_url,
        json=INITIALIZE,
        headers={"Authorization": f"Bearer {token}", "Accept": ACCEPT},
        timeout=30,
    )


async def _place_three(cluster: Cluster) -> dict[str, str]:
    """Three owners whose workspaces are placed, by their first calls, on node-a, node-b, node-c
    (the least-loaded live node each time, ties by name). Cy's token is issued by node A's own
    command line; the other two straight in the control plane (quicker than two more CLI runs)."""
    a = cluster.nodes["node-a"]
    tokens = {}
    store = ControlPlane.connect(cluster.url, cluster.root / "unused.db")
    try:
        for email in ("ada@example.com", "bob@example.com"):
            owner, workspace = store.owners.create(email, None)
            tokens[email] = store.connections.create_pat(
                owner.id, workspace.id, f"{email.split('@')[0]}'s agent"
            )[1]
    finally:
        store.close()
    a.owner("cy@example.com")
    tokens["cy@example.com"] = a.token("cy@example.com", "cy's agent")  # issued on node A
    for email, token in tokens.items():
        async with connect(a, token) as client:
            data(await client.call_tool("remember", {"statement": f"first words of {email}"}))
    return tokens


@pytest.fixture(scope="module")
async def tokens(cluster: Cluster) -> dict[str, str]:
    return await _place_three(cluster)


@pytest.mark.req("run:scale-out")
async def test_new_workspaces_are_placed_on_the_least_loaded_node_and_served_only_there(
    cluster: Cluster, tokens: dict[str, str]
) -> None:
    placed = {email: cluster.node_of(cluster.workspace_id(email)) for email in tokens}
    assert placed == {"ada@example.com": "node-a", "bob@example.com": "node-b", "cy@example.com": "node-c"}
    for email, name in placed.items():
        workspace = cluster.workspace_id(email)
        for other, node in cluster.nodes.items():
            holds = files_containing(node.data_dir / "workspaces" / workspace, f"first words of {email}")
            assert bool(holds) == (other == name), (email, other)


@pytest.mark.req("run:scale-out")
async def test_a_token_issued_on_a_reaches_a_workspace_on_c_through_b(
    cluster: Cluster, tokens: dict[str, str]
) -> None:
    b, c = cluster.nodes["node-b"], cluster.nodes["node-c"]
    workspace = cluster.workspace_id("cy@example.com")
    async with connect(b, tokens["cy@example.com"]) as client:
        stored = data(await client.call_tool("remember", {"statement": "the kiln fires at dawn"}))
        assert stored["source"] == "cy's agent"  # the principal resolved on B, carried to C
        context = await client.call_tool("get_context", {"query": "kiln"})
        assert "dawn" in str(context.content)
    assert files_containing(c.data_dir / "workspaces" / workspace, "kiln fires at dawn")
    for name in ("node-a", "node-b"):
        assert not (cluster.nodes[name].data_dir / "workspaces" / workspace).exists()
    assert any(p.name == workspace for p in c.engines())
    assert not any(p.name == workspace for p in b.engines())


@pytest.mark.req("run:scale-out")
async def test_a_forwarded_stream_is_not_buffered(cluster: Cluster, tokens: dict[str, str]) -> None:
    """A GET stream forwarded B → C opens at once and stays open (nothing waits for its end)."""
    b = cluster.nodes["node-b"]
    headers = {"Authorization": f"Bearer {tokens['cy@example.com']}", "Accept": ACCEPT}
    async with httpx.AsyncClient(timeout=httpx.Timeout(30.0)) as http:
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "stream-test", "version": "1"},
            },
        }
        opened = await http.post(b.mcp_url, json=init, headers=headers)
        assert opened.status_code == 200, opened.text
        session = opened.headers["mcp-session-id"]
        session_headers = {**headers, "mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}
        await http.post(
            b.mcp_url,
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
            headers=session_headers,
        )
        async with http.stream(
            "GET", b.mcp_url, headers={**session_headers, "Accept": "text/event-stream"}
        ) as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
            assert stream.headers.get("x-accel-buffering") == "no"


@pytest.mark.req("run:scale-out")
async def test_the_internal_endpoint_refuses_anything_unsigned_or_stale(
    cluster: Cluster, tokens: dict[str, str]
) -> None:
    c = cluster.nodes["node-c"]
    workspace = cluster.workspace_id("cy@example.com")
    body = json.dumps(INITIALIZE).encode()
    url = c.url + INTERNAL_MCP_PATH
    base = {"Accept": ACCEPT, "Content-Type": "application/json"}
    who = Principal("o", workspace, "con_forged", "forger", read_only=False, scope=None)

    def signed(secret: str, now: float, target: str = "node-c") -> dict[str, str]:
        s = signing.sign(
            secret, method="POST", path=INTERNAL_MCP_PATH, principal=who, target=target, body=body, now=now
        )
        return {"x-almanac-cluster-principal": s.principal, "x-almanac-cluster-signature": s.signature}

    attempts = {
        "a client's bearer token": {"Authorization": f"Bearer {tokens['cy@example.com']}"},
        "nothing": {},
        "a stale signature": signed(SECRET, time.time() - 120),
        "another secret": signed("not-the-cluster-secret-" + "y" * 40, time.time()),
        "a signature for another node": signed(SECRET, time.time(), target="node-b"),
    }
    for what, extra in attempts.items():
        r = httpx.post(url, content=body, headers={**base, **extra}, timeout=30)
        assert r.status_code == 401, what
        assert r.json()["error"]["code"] == "cluster_signature_invalid", what
    # the move endpoints too: nobody but the cluster may release, read or delete a workspace's folder
    folder = f"/internal/v1/workspaces/{workspace}"
    as_client = signing.sign(
        SECRET, method="DELETE", path=folder, principal=who, target="node-c", body=b"", now=time.time()
    )
    for method, path, extra in (
        ("DELETE", folder, {"Authorization": f"Bearer {tokens['cy@example.com']}"}),
        ("DELETE", folder, {}),
        ("POST", folder + "/release", {}),
        ("GET", folder + "/files/log.md", {"Authorization": f"Bearer {tokens['cy@example.com']}"}),
        (
            "DELETE",
            folder,
            {
                "x-almanac-cluster-principal": as_client.principal,
                "x-almanac-cluster-signature": as_client.signature,
            },
        ),
    ):
        r = httpx.request(method, c.url + path, headers=extra, timeout=30)
        assert r.status_code == 401, (method, path, extra.keys())
        assert r.json()["error"]["code"] == "cluster_signature_invalid"
    assert files_containing(c.data_dir / "workspaces" / workspace, "kiln fires at dawn")
    # the same request, signed right, is served: the refusals above were the signature's doing
    r = httpx.post(url, content=body, headers={**base, **signed(SECRET, time.time())}, timeout=30)
    assert r.status_code == 200, r.text
    assert r.headers["mcp-session-id"]


@pytest.mark.req("run:scale-out")
async def test_the_rest_api_is_forwarded_to_the_owner_node_too(
    cluster: Cluster, tokens: dict[str, str]
) -> None:
    """/api/v1 through node B for a workspace on node C: authenticated on B, served on C (its query,
    body and an export's download headers intact); B starts no engine and keeps no copy."""
    b, c = cluster.nodes["node-b"], cluster.nodes["node-c"]
    workspace = cluster.workspace_id("cy@example.com")
    auth = {"Authorization": f"Bearer {tokens['cy@example.com']}"}
    stored = httpx.post(
        b.url + "/api/v1/memories",
        json={
            "statement": "the glaze is fired at 1240 C",
            "subject": "Glaze",
            "predicate": "fired at",
            "object": "1240 C",
        },
        headers=auth,
        timeout=30,
    )
    assert stored.is_success, stored.text
    assert stored.json()["source"] == "cy's agent"
    assert files_containing(c.data_dir / "workspaces" / workspace, "1240 C")
    found = httpx.get(b.url + "/api/v1/memories", params={"subject": "Glaze"}, headers=auth, timeout=30)
    assert found.is_success, found.text
    assert [f["object"] for f in found.json()["facts"]] == ["1240 C"]
    export = httpx.get(b.url + "/api/v1/admin/export", headers=auth, timeout=60)
    assert export.status_code == 200, export.text
    assert "attachment" in export.headers["content-disposition"]
    assert export.content.startswith(b"PK")
    bad = httpx.post(
        b.url + "/api/v1/memories", json={"statement": "x"}, headers={"Authorization": "Bearer nope"}
    )
    assert bad.status_code == 401
    assert not (b.data_dir / "workspaces" / workspace).exists()
    assert not any(p.name == workspace for p in b.engines())


@pytest.mark.req("run:scale-out")
async def test_a_dead_node_s_workspace_is_503_everywhere_then_serves_again_with_every_write(
    cluster: Cluster, tokens: dict[str, str]
) -> None:
    a, b, c = (cluster.nodes[n] for n in NAMES)
    token = tokens["cy@example.com"]
    workspace = cluster.workspace_id("cy@example.com")
    acknowledged = []
    async with connect(a, token) as client:
        for i in range(5):
            data(
                await client.call_tool("remember", {"statement": f"acknowledged write {i} before the crash"})
            )
            acknowledged.append(f"acknowledged write {i} before the crash")

    cluster.kill("node-c")
    for edge in (a, b):  # at once (C unreachable) and after its heartbeat went stale
        r = _call(edge, token)
        assert r.status_code == 503 and int(r.headers["retry-after"]) >= 1, r.text
        assert r.json()["error"]["code"] == "node_unavailable"
    last_beat = epoch(str(cluster.rows("SELECT heartbeat_at FROM nodes WHERE name = 'node-c'")[0][0]))
    wait_for(lambda: time.time() > last_beat + 2.5, timeout=20, what="node-c's heartbeat to go stale")
    for edge in (a, b):
        r = _call(edge, token)
        assert r.status_code == 503 and int(r.headers["retry-after"]) >= 1, r.text
        assert (
            "not been heard from" in r.json()["error"]["message"] or "lease" in r.json()["error"]["message"]
        )
    # nothing was opened or written anywhere else
    for edge in (a, b):
        assert not (edge.data_dir / "workspaces" / workspace).exists()
        assert not files_containing(edge.data_dir, "written during the outage")
        assert not any(p.name == workspace for p in edge.engines())
    assert cluster.node_of(workspace) == "node-c"

    c = cluster.start("node-c")  # same name, same data directory, a new port
    wait_for(
        lambda: _call(b, token).status_code == 200,
        timeout=30,
        what="node-c's workspace to serve again through node-b",
    )
    async with connect(b, token) as client:
        for needle in acknowledged:
            found = await client.call_tool("get_context", {"query": needle})
            assert needle in str(found.content), needle
    for needle in acknowledged:
        assert files_containing(c.data_dir / "workspaces" / workspace, needle), needle
    assert not files_containing(c.data_dir, "written during the outage")


async def _until(condition: Callable[[], bool], *, timeout: float, what: str) -> None:
    with anyio.fail_after(timeout):
        while not condition():
            await anyio.sleep(0.05)
    assert condition(), what


@pytest.mark.req("run:scale-out")
async def test_a_workspace_moved_from_c_to_a_under_a_stream_of_writes_loses_none(
    cluster: Cluster, tokens: dict[str, str]
) -> None:
    a, b, c = (cluster.nodes[n] for n in NAMES)
    token = tokens["cy@example.com"]
    workspace = cluster.workspace_id("cy@example.com")
    assert cluster.node_of(workspace) == "node-c"
    acknowledged: list[str] = []
    refused = 0
    moved = anyio.Event()

    async def write_through_b() -> None:
        nonlocal refused
        i = 0
        while not (moved.is_set() and len(acknowledged) >= before_move + 3):
            try:
                async with connect(b, token) as client:
                    while not (moved.is_set() and len(acknowledged) >= before_move + 3):
                        statement = f"streamed write {i} around the move"
                        i += 1
                        data(await client.call_tool("remember", {"statement": statement}))
                        acknowledged.append(statement)
            except Exception:  # refused while it moves (503), or its session ended: a new client
                refused += 1
                await anyio.sleep(0.05)

    before_move = 0
    async with anyio.create_task_group() as tg:
        tg.start_soon(write_through_b)
        await _until(lambda: len(acknowledged) >= 3, timeout=60, what="writes before the move")
        before_move = len(acknowledged)
        a.cli_env["ALMANAC_CLUSTER_SECRET"] = SECRET
        out = await anyio.to_thread.run_sync(
            lambda: a.cli("workspace", "move", "default", "--owner", "cy@example.com", "--to", "node-a")
        )
        moved.set()
    assert len(acknowledged) >= before_move + 3
    assert cluster.node_of(workspace) == "node-a"
    # every acknowledged write is on node A; node C's copy is gone, and B never had one
    missing = [s for s in acknowledged if not files_containing(a.data_dir / "workspaces" / workspace, s)]
    assert missing == [], (missing, out)
    assert not (c.data_dir / "workspaces" / workspace).exists()
    assert not (b.data_dir / "workspaces" / workspace).exists()
    assert not any(p.name == workspace for p in c.engines())
    # and served from there, through every node, with what was written before (the kiln, the crash)
    for edge in (b, c):
        async with connect(edge, token) as client:
            found = await client.call_tool("get_context", {"query": "kiln fires at dawn"})
            assert "dawn" in str(found.content)


@pytest.mark.req("run:scale-out")
async def test_a_move_stopped_half_way_is_called_off_by_its_source_at_its_deadline(
    cluster: Cluster, tokens: dict[str, str]
) -> None:
    """A move marked in the control plane whose command then died (nothing advances it): refused
    everywhere until its deadline, then node A (which holds it) calls it off and serves it again; the
    move cannot be flipped afterwards, and the next move of it goes through."""
    a, b, c = (cluster.nodes[n] for n in NAMES)
    token = tokens["ada@example.com"]
    workspace = cluster.workspace_id("ada@example.com")
    assert cluster.node_of(workspace) == "node-a"
    store = ControlPlane.connect(cluster.url, cluster.root / "unused.db")
    try:
        stopped = store.moves.begin(workspace, "node-a", "node-b", now=time.time(), timeout=3.0)

        def all_refused() -> bool:
            return all(_call(edge, token).status_code == 503 for edge in (a, b, c))

        wait_for(all_refused, timeout=10, what="every node to refuse the workspace being moved")
        refused = _call(c, token)
        assert refused.json()["error"]["code"] == "workspace_moving"
        assert refused.headers["retry-after"] == "1"
        wait_for(
            lambda: all(_call(edge, token).status_code == 200 for edge in (a, b, c)),
            timeout=20,
            what="node-a to call the lapsed move off and serve the workspace again",
        )
        assert cluster.node_of(workspace) == "node-a"
        called_off = store.moves.by_id(stopped.id)
        assert called_off is not None and called_off.state in ("called_off", "discarded")
        assert "stopped advancing" in called_off.note
        with pytest.raises(BadRequest, match="no longer under way"):  # a late flip changes nothing
            store.moves.finish(stopped, now=time.time(), lease=2.0)
        assert cluster.node_of(workspace) == "node-a"
        kinds = [e.kind for e in store.audit_log.events(limit=20) if e.workspace_id == workspace]
        assert {"workspace.move.begin", "workspace.move.call_off"} <= set(kinds)
    finally:
        store.close()
    b.cli_env["ALMANAC_CLUSTER_SECRET"] = SECRET
    await anyio.to_thread.run_sync(
        lambda: b.cli("workspace", "move", "default", "--owner", "ada@example.com", "--to", "node-b")
    )
    assert cluster.node_of(workspace) == "node-b"
    assert not (a.data_dir / "workspaces" / workspace).exists()
    async with connect(c, token) as client:
        found = await client.call_tool("get_context", {"query": "first words of ada"})
        assert "first words of ada@example.com" in str(found.content)
