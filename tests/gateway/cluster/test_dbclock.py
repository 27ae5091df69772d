"""One clock for the cluster, the database's (``run:scale-out``): three real nodes on a real
PostgreSQL, one with a wall clock an hour fast and one an hour slow (``skewed_serve``: the same
``almanac serve``, its composition root given the wrong clock). A live node never looks dead, a dead
one never looks alive, and the signed calls between them pass, whatever their clocks say."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gateway.cluster.dbclock import DatabaseClock
from gateway.control.clock import epoch
from gateway.control.store import ControlPlane
from tests.gateway.cluster.nodes import Cluster, started_nodes
from tests.gateway.e2e import Gateway, connect, data, start_gateway, wait_for

pytestmark = [pytest.mark.anyio]

#: node name → how far its wall clock is off (seconds)
SKEW = {"node-a": 3600.0, "node-b": 0.0, "node-c": -3600.0}
NAMES = tuple(SKEW)
LEASE = Cluster("", Path(), {}).settings("node-b")["placement_lease"]


class SkewedCluster(Cluster):
    def start(self, name: str, data_dir: Path | None = None) -> Gateway:
        if not SKEW[name]:
            return super().start(name, data_dir)
        command = (sys.executable, "-m", "tests.gateway.cluster.skewed_serve", str(SKEW[name]))
        node = start_gateway(
            data_dir or self.root / name, self.root / f"{name}.log", command=command, **self.settings(name)
        )
        self.nodes[name] = node
        return node


cluster = started_nodes("cluster", "dbclock", NAMES, SkewedCluster)


def test_the_clock_counts_on_from_the_database_s_reading() -> None:
    """A reading is taken at the midpoint of its round trip, then counted on monotonically; it is
    read first when never synced, and the last reading is kept while the database cannot answer."""
    ticks = iter([10.0, 12.0, 15.0, 20.0, 21.0, 30.0])
    answers: list[float | Exception] = [1_000.0, RuntimeError("down")]

    def read() -> float:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    clock = DatabaseClock(read, monotonic=lambda: next(ticks))
    assert not clock.synced
    assert clock.now() == 1_000.0 + (15.0 - 11.0)  # synced at the first call: read at 10–12
    with pytest.raises(RuntimeError):
        clock.sync()  # ticks 20, (read fails)
    assert clock.now() == 1_000.0 + (21.0 - 11.0)


def _node_list(node: Gateway) -> dict[str, str]:
    """``almanac node list`` run on this host (its clock right), with the nodes' placement_lease:
    each node's state."""
    node.cli_env["ALMANAC_PLACEMENT_LEASE"] = LEASE
    return {line.split("\t")[0]: line.split("\t")[3] for line in node.cli("node", "list").splitlines()}


async def _place_three(cluster: Cluster) -> dict[str, str]:
    """Three owners whose workspaces are placed, by first calls through the slow node, on node-a
    (fast), node-b (right) and node-c (slow): the least-loaded live node each time, ties by name."""
    tokens = {}
    store = ControlPlane.connect(cluster.url, cluster.root / "unused.db")
    try:
        for email in ("ada@example.com", "bob@example.com", "cy@example.com"):
            owner, workspace = store.owners.create(email, None)
            tokens[email] = store.connections.create_pat(
                owner.id, workspace.id, f"{email.split('@')[0]}'s agent"
            )[1]
    finally:
        store.close()
    for email, token in tokens.items():
        async with connect(cluster.nodes["node-c"], token) as client:
            data(await client.call_tool("remember", {"statement": f"first words of {email}"}))
    return tokens


@pytest.mark.req("run:scale-out")
async def test_skewed_clocks_make_no_live_node_look_dead_nor_a_dead_one_alive(cluster: Cluster) -> None:
    tokens = await _place_three(cluster)
    owners = dict(zip(NAMES, tokens, strict=True))
    for name, email in owners.items():
        assert cluster.node_of(cluster.workspace_id(email)) == name
    # every node's beats are stamped with the database's clock: none in its future, none stale
    (db_now,) = cluster.rows("SELECT extract(epoch FROM clock_timestamp())::float8")[0]
    for node, beat in cluster.rows("SELECT name, heartbeat_at FROM nodes"):
        assert -1.0 < float(str(db_now)) - epoch(str(beat)) < 5.0, (node, beat)
    assert _node_list(cluster.nodes["node-b"]) == dict.fromkeys(NAMES, "live")
    # a live node never looks dead: each node serves every workspace (its own, and the others'
    # forwarded to their nodes, signed with the database's clock), whatever the two clocks say
    for edge in NAMES:
        for owner, email in owners.items():
            async with connect(cluster.nodes[edge], tokens[email]) as client:
                stored = data(await client.call_tool("remember", {"statement": f"via {edge} for {owner}"}))
                assert stored, (edge, owner)

    # a dead node never looks alive: the fast node killed (its last beats not in the future) is
    # down within placement_lease (2 s) for the command line and for the nodes, which place a new
    # workspace on a live node, not on it (it would win the tie by its name)
    cluster.kill("node-a")
    wait_for(lambda: _node_list(cluster.nodes["node-b"])["node-a"] == "down", timeout=20, what="node-a down")
    store = ControlPlane.connect(cluster.url, cluster.root / "unused.db")
    try:
        dee, workspace = store.owners.create("dee@example.com", None)
        token = store.connections.create_pat(dee.id, workspace.id, "dee's agent")[1]
    finally:
        store.close()
    async with connect(cluster.nodes["node-c"], token) as client:
        data(await client.call_tool("remember", {"statement": "placed after node-a died"}))
    assert cluster.node_of(workspace.id) == "node-b"
