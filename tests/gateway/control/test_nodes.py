"""Nodes and placements in the control plane (``run:scale-out``), on SQLite and PostgreSQL:
nodes register and beat, a new workspace is placed once on the least-loaded live node even when
gateways race, and heartbeats renew the node's leases."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.cluster.placement import place
from gateway.control.nodes import PlacementError
from gateway.control.store import ControlPlane
from gateway.errors import BadRequest

NOW = 1_900_000_000.0
TIMEOUT, LEASE = 15.0, 30.0


def _workspace(store: ControlPlane, who: str) -> str:
    return store.owners.create(f"{who}@example.com", None)[1].id


@pytest.mark.req("run:scale-out")
def test_nodes_register_beat_and_drain(store: ControlPlane) -> None:
    a = store.nodes.register("node-a", "http://node-a.almanac:8080/", now=NOW)
    assert (a.name, a.advertise_url, a.heartbeat_at, a.draining, a.workspaces) == (
        "node-a",
        "http://node-a.almanac:8080",
        NOW,
        False,
        0,
    )
    store.nodes.register("node-b", "http://node-b.almanac:8080", now=NOW)
    assert store.nodes.heartbeat("node-a", now=NOW + 5, lease=LEASE) == 0  # no workspaces yet
    assert store.nodes.heartbeat("nobody", now=NOW + 5, lease=LEASE) == 0
    store.nodes.set_draining("node-b", True)
    assert [(n.name, n.heartbeat_at, n.draining) for n in store.nodes.all()] == [
        ("node-a", NOW + 5, False),
        ("node-b", NOW, True),
    ]
    # registering again (a restart) brings it back at its new address, still draining
    again = store.nodes.register("node-b", "https://b.example.com", now=NOW + 9)
    assert (again.advertise_url, again.draining, again.heartbeat_at) == (
        "https://b.example.com",
        True,
        NOW + 9,
    )
    store.nodes.set_draining("node-b", False)
    assert not store.nodes.register("node-b", "https://b.example.com", now=NOW + 10).draining
    with pytest.raises(BadRequest, match="node name"):
        store.nodes.register("Node A", "http://x", now=NOW)
    with pytest.raises(BadRequest, match="advertise URL"):
        store.nodes.register("node-c", "node-c:8080", now=NOW)
    with pytest.raises(BadRequest, match="no node named"):
        store.nodes.set_draining("node-z", True)
    assert [n.name for n in store.nodes.all()] == ["node-a", "node-b"]  # refusals changed nothing


@pytest.mark.req("run:scale-out")
def test_workspaces_are_placed_on_the_least_loaded_live_node_and_stay_there(store: ControlPlane) -> None:
    store.nodes.register("node-a", "http://a", now=NOW)
    store.nodes.register("node-b", "http://b", now=NOW)
    store.nodes.register("node-c", "http://c", now=NOW - 60)  # not heard from: dead
    placed = [
        place(store.nodes, _workspace(store, f"u{i}"), now=NOW, heartbeat_timeout=TIMEOUT, lease=LEASE).node
        for i in range(4)
    ]
    assert placed == ["node-a", "node-b", "node-a", "node-b"]
    assert {n.name: n.workspaces for n in store.nodes.all()} == {"node-a": 2, "node-b": 2, "node-c": 0}
    first = store.nodes.placement(store.owners.workspaces(store.owners.by_email("u0@example.com").id)[0].id)
    assert first is not None and first.node == "node-a" and first.lease_expires_at == NOW + LEASE
    # placing it again changes nothing, even once another node is emptier
    store.nodes.set_draining("node-a", True)
    assert (
        place(store.nodes, first.workspace_id, now=NOW + 1, heartbeat_timeout=TIMEOUT, lease=LEASE) == first
    )
    # a heartbeat renews the node's leases
    assert store.nodes.heartbeat("node-a", now=NOW + 10, lease=LEASE) == 2
    renewed = store.nodes.placement(first.workspace_id)
    assert renewed is not None and renewed.lease_expires_at == NOW + 10 + LEASE
    # nothing live to take a new one: a clear refusal, and no row
    store.nodes.set_draining("node-b", True)
    ws = _workspace(store, "late")
    with pytest.raises(PlacementError):
        place(store.nodes, ws, now=NOW, heartbeat_timeout=TIMEOUT, lease=LEASE)
    assert store.nodes.placement(ws) is None


@pytest.fixture
def gateways(tmp_path: Path, database_url: str | None) -> Iterator[list[ControlPlane]]:
    planes = [ControlPlane.connect(database_url, tmp_path / "control.db") for _ in range(4)]
    yield planes
    for plane in planes:
        plane.close()


@pytest.mark.req("run:scale-out")
def test_gateways_placing_one_workspace_at_once_agree_on_one_node(gateways: list[ControlPlane]) -> None:
    first = gateways[0]
    for i, name in enumerate(("node-a", "node-b", "node-c", "node-d")):
        first.nodes.register(name, f"http://{name}", now=NOW)
        for j in range(i):  # some workspaces placed already
            place(
                first.nodes, _workspace(first, f"{name}-{j}"), now=NOW, heartbeat_timeout=TIMEOUT, lease=LEASE
            )
    ws = _workspace(first, "contended")
    barrier = threading.Barrier(len(gateways))
    seen: list[str] = []

    def run(plane: ControlPlane) -> None:
        barrier.wait(timeout=30)
        seen.append(place(plane.nodes, ws, now=NOW, heartbeat_timeout=TIMEOUT, lease=LEASE).node)

    threads = [threading.Thread(target=run, args=(g,)) for g in gateways]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(seen) == len(gateways) and len(set(seen)) == 1
    count = first._db.execute("SELECT count(*) FROM placements WHERE workspace_id = ?", (ws,)).fetchone()
    assert count is not None and int(count[0]) == 1


@pytest.mark.req("run:scale-out")
def test_the_database_s_clock_is_the_server_s_or_the_host_s(store: ControlPlane) -> None:
    """PostgreSQL's ``clock_timestamp()`` (it moves within a transaction: the time of the call); the
    SQLite file's is its host's. On this one host both agree with the host's clock."""
    before = time.time()
    with store._db.transaction():
        first = store.database_time()
        second = store.database_time()
    after = time.time()
    assert before - 0.5 <= first <= second <= after + 0.5
    if store._db.dialect == "postgresql":
        assert second > first  # clock_timestamp(), not now(): not frozen at the transaction's start
