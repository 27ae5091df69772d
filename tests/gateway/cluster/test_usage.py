"""``almanac workspace list`` / ``usage`` across nodes (``run:scale-out``): two real nodes on a real
PostgreSQL. Run on node B's data directory for a workspace placed on node A, the list names node A
(and says whether it is live) instead of B's empty folder, and the usage is A's own figures, asked
of A over the signed internal API; once A is down, the usage says "node 'node-a' unavailable" and
exits 1, and the list says it is down."""

from __future__ import annotations

import subprocess

import pytest

from gateway.control.store import ControlPlane
from gateway.control.usage import measure
from tests.gateway.cluster.nodes import SECRET, Cluster, started_nodes
from tests.gateway.e2e import connect, data, wait_for

pytestmark = [pytest.mark.anyio]

cluster = started_nodes("cluster", "usage", ("node-a", "node-b"), Cluster)


def _almanac_on_b(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    """An admin command run where node B runs (its data directory, its settings)."""
    return cluster.admin("node-b", *args)


@pytest.fixture(scope="module")
async def placed(cluster: Cluster) -> str:
    """Ada's workspace, placed on node-a by its first calls through node-b (ties by name), and a
    second workspace of hers never used; returns the first's id."""
    store = ControlPlane.connect(cluster.url, cluster.root / "unused.db")
    try:
        owner, workspace = store.owners.create("ada@example.com", None)
        token = store.connections.create_pat(owner.id, workspace.id, "ada's agent")[1]
        store.owners.create_workspace(owner.id, "later")  # never called: placed nowhere yet
    finally:
        store.close()
    async with connect(cluster.nodes["node-b"], token) as client:
        for i in range(3):
            data(await client.call_tool("remember", {"statement": f"the kiln holds {i} shelves"}))
    assert cluster.node_of(workspace.id) == "node-a"
    return workspace.id


@pytest.mark.req("run:scale-out")
async def test_list_and_usage_on_a_node_that_does_not_hold_the_workspace(
    cluster: Cluster, placed: str
) -> None:
    a_folder = cluster.nodes["node-a"].data_dir / "workspaces" / placed
    listed = _almanac_on_b(cluster, "workspace", "list", "--owner", "ada@example.com")
    assert listed.returncode == 0, listed.stderr
    rows = {line.split("\t")[1]: line.split("\t") for line in listed.stdout.splitlines()}
    assert rows["default"][3:] == ["-", "node-a", "live"]  # no folder of B's: its files are on A
    assert rows["later"][4:] == ["-", "-"]  # not placed yet

    used = _almanac_on_b(cluster, "workspace", "usage", "--owner", "ada@example.com")
    assert used.returncode == 0, used.stderr
    figures = dict(line.split("\t") for line in used.stdout.splitlines())
    assert figures["node"] == "node-a"
    assert figures["folder"] == str(a_folder)
    on_a = dict(measure(a_folder).rows())  # A's folder, measured here: the same figures
    del on_a["index bytes"]  # the index may still be settling
    assert {k: figures[k] for k in on_a} == on_a
    assert int(on_a["store bytes"]) > 0
    assert not (cluster.root / "node-b" / "workspaces" / placed).exists()

    cluster.kill("node-a")
    down = _almanac_on_b(cluster, "workspace", "usage", "--owner", "ada@example.com")
    assert down.returncode == 1
    assert "node 'node-a' unavailable" in down.stderr
    assert "store bytes" not in down.stdout  # no figures made up for it
    wait_for(
        lambda: (
            _almanac_on_b(cluster, "workspace", "list", "--owner", "ada@example.com").stdout.split("\t")[5]
        ).startswith("down"),
        timeout=30,
        what="node-a listed as down",
    )
    down = _almanac_on_b(cluster, "workspace", "usage", "--owner", "ada@example.com")
    assert down.returncode == 1
    assert "node 'node-a' unavailable: not heard from within 2 s" in down.stderr


@pytest.mark.req("run:scale-out")
async def test_usage_needs_the_secret_to_ask_another_node(cluster: Cluster, placed: str) -> None:
    """Run on an admin host (database_url only, no node, no cluster_secret) it says which node holds
    the workspace and what to set (exit 2)."""
    settings = {"database_url": cluster.url}
    assert SECRET not in settings.values()
    found = cluster.admin("node-b", "workspace", "usage", "--owner", "ada@example.com", settings=settings)
    assert found.returncode == 2
    assert "is on node 'node-a'" in found.stderr and "ALMANAC_CLUSTER_SECRET" in found.stderr
