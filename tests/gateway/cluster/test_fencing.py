"""What is fenced (``run:scale-out``; deploy/SCALING.md "What is fenced"), with a real PostgreSQL and
real ``almanac serve`` nodes: a node's name is held by one process, a data directory by one
``almanac serve``, and a node started on a volume that is not its own (an empty one) refuses its
workspaces as lost — never serves them empty — until it is started on its own volume again, which
serves every acknowledged write."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from gateway.cluster.volume import VOLUME_FILE
from tests.gateway.cluster.nodes import Cluster, started_nodes
from tests.gateway.cluster.test_three_nodes import _call
from tests.gateway.e2e import Gateway, connect, data, wait_for

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

cluster = started_nodes("cluster", "fencing", ("node-a", "node-b"), Cluster)


def _served_again(node: Gateway, token: str) -> None:
    wait_for(lambda: _call(node, token).status_code == 200, what="the workspace served again")


@pytest.mark.req("run:scale-out")
async def test_a_second_process_under_a_live_name_or_data_directory_is_refused(
    cluster: Cluster, tmp_path: Path
) -> None:
    a = cluster.nodes["node-a"]
    a.owner("dup@example.com")
    token = a.token("dup@example.com", "agent")
    async with connect(a, token) as client:
        data(await client.call_tool("remember", {"statement": "the only copy of the ledger"}))
    generation = cluster.rows("SELECT generation FROM nodes WHERE name = 'node-a'")[0][0]

    # another data directory, the same live name: refused by the name's lock
    other = cluster.serve_refused("node-a", tmp_path / "other")
    assert other.returncode == 2, other.stderr
    lines = other.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: node 'node-a' is already running"), other.stderr
    assert other.stdout == ""  # no banner: it never served
    assert not (tmp_path / "other" / "workspaces").exists()

    # the same data directory, another name: refused by the data directory's lock
    same = cluster.serve_refused("node-z", a.data_dir)
    assert same.returncode == 2, same.stderr
    lines = same.stderr.strip().splitlines()
    assert len(lines) == 1 and "already running on the data directory" in lines[0], same.stderr
    assert not cluster.rows("SELECT 1 FROM nodes WHERE name = 'node-z'")

    # the live node kept its name (its token unchanged) and serves as before
    assert cluster.rows("SELECT generation FROM nodes WHERE name = 'node-a'")[0][0] == generation
    for node in cluster.nodes.values():
        async with connect(node, token) as client:
            assert "ledger" in str((await client.call_tool("get_context", {"query": "ledger"})).content)


@pytest.mark.req("run:scale-out")
async def test_a_node_on_an_empty_volume_refuses_its_workspaces_as_lost_until_back_on_its_own(
    cluster: Cluster, tmp_path: Path
) -> None:
    a, b = cluster.nodes["node-a"], cluster.nodes["node-b"]
    b.owner("vol@example.com")
    token = b.token("vol@example.com", "agent")
    acknowledged = []
    async with connect(a, token) as client:
        for i in range(5):
            statement = f"volume fact number {i} is kept"
            data(await client.call_tool("remember", {"statement": statement}))
            acknowledged.append(statement)
    workspace = cluster.workspace_id("vol@example.com")
    home = cluster.node_of(workspace)
    edge = "node-b" if home == "node-a" else "node-a"
    own_dir = cluster.nodes[home].data_dir
    assert (own_dir / VOLUME_FILE).is_file()
    recorded = cluster.rows("SELECT volume_id FROM nodes WHERE name = %s", home)[0][0]
    assert (own_dir / VOLUME_FILE).read_text().strip() == recorded

    # the node's volume is gone: it starts again, same name, on an empty data directory
    cluster.kill(home)
    empty = tmp_path / "empty-volume"
    on_empty = cluster.start(home, data_dir=empty)
    for node in (cluster.nodes[edge], on_empty):
        r = _call(node, token)
        assert r.status_code == 503, r.text
        assert r.json()["error"]["code"] == "volume_mismatch"
        assert "not its own" in r.json()["error"]["message"]
        assert "retry-after" not in r.headers  # waiting does not mend it; the operator does
    assert not (empty / "workspaces" / workspace).exists()  # nothing opened empty
    assert not (empty / VOLUME_FILE).exists()  # nor the volume claimed
    assert on_empty.engines() == {}
    listed = cluster.nodes[edge].cli("node", "lost")
    assert f"{home}\t{workspace}\tvol@example.com\tdefault\tvolume not its own" in listed.splitlines()
    assert "volume-mismatch" in cluster.nodes[edge].cli("node", "list")

    # back on its own volume: served through either node, with every acknowledged write
    cluster.kill(home)
    cluster.start(home)
    assert cluster.nodes[edge].cli("node", "lost") == ""
    for node in (cluster.nodes[edge], cluster.nodes[home]):
        _served_again(node, token)
        async with connect(node, token) as client:
            for statement in acknowledged:
                found = await client.call_tool("get_context", {"query": statement})
                assert statement in str(found.content), statement


@pytest.mark.req("run:scale-out")
async def test_the_internal_endpoints_answer_only_at_the_advertise_address(cluster: Cluster) -> None:
    """Through any other name (an Ingress's public host) they answer 404, signed or not."""
    a = cluster.nodes["node-a"]
    port = a.url.rsplit(":", 1)[1]
    for path in ("/internal/v1/mcp", "/internal/v1/engine/mcp", "/internal/v1/workspaces/wsp_x/erase"):
        elsewhere = httpx.post(a.url + path, content=b"{}", headers={"Host": f"localhost:{port}"}, timeout=30)
        assert elsewhere.status_code == 404, (path, elsewhere.text)
        assert "advertise URL" in elsewhere.json()["error"]["message"]
        here = httpx.post(a.url + path, content=b"{}", timeout=30)  # its advertise address: checked
        assert here.status_code == 401 and here.json()["error"]["code"] == "cluster_signature_invalid", path
    public = httpx.get(a.url + "/healthz", headers={"Host": f"localhost:{port}"}, timeout=30)
    assert public.status_code == 200  # the public routes answer at any allowed name
