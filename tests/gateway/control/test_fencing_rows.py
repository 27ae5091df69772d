"""The control plane's side of fencing (``run:scale-out``), on SQLite and PostgreSQL: every start
under a node's name moves its fencing token on, a heartbeat with an older token renews nothing, a
clean stop ends the leases, the volume recorded at first start is kept, and a node found on another
volume is refused new workspaces and has its workspaces listed as lost."""

from __future__ import annotations

import pytest

from gateway.cluster.placement import place
from gateway.control.nodes import NameTaken, PlacementError
from gateway.control.store import ControlPlane

NOW = 1_900_000_000.0
LEASE = 30.0


@pytest.mark.req("run:scale-out")
def test_a_newer_start_fences_the_older_and_waits_for_its_leases(store: ControlPlane) -> None:
    first = store.nodes.join("node-a", "http://a:1", now=NOW, volume_seen="vol-a", adopt=True)
    _, workspace = store.owners.create("ada@example.com", None)
    store.nodes.place_on(workspace.id, "node-a", now=NOW, lease=LEASE)
    assert store.nodes.heartbeat("node-a", now=NOW + 1, lease=LEASE, generation=first.generation) == 1

    second = store.nodes.join("node-a", "http://a:2", now=NOW + 2, volume_seen="vol-a", adopt=True)
    assert second.generation == first.generation + 1
    assert second.previous_lease == NOW + 1 + LEASE  # the older process may serve until then
    with pytest.raises(NameTaken):
        store.nodes.heartbeat("node-a", now=NOW + 3, lease=LEASE, generation=first.generation)
    placement = store.nodes.placement(workspace.id)
    assert placement is not None and placement.lease_expires_at == NOW + 1 + LEASE  # nothing renewed
    assert store.nodes.release("node-a", first.generation, now=NOW + 4) == 0  # not its name any more

    assert store.nodes.heartbeat("node-a", now=NOW + 5, lease=LEASE, generation=second.generation) == 1
    assert store.nodes.release("node-a", second.generation, now=NOW + 6) == 1  # a clean stop
    third = store.nodes.join("node-a", "http://a:3", now=NOW + 7, volume_seen="vol-a", adopt=True)
    assert third.previous_lease == NOW + 6  # nothing left to wait for


@pytest.mark.req("run:scale-out")
def test_a_node_on_a_volume_not_its_own_serves_and_takes_nothing(store: ControlPlane) -> None:
    store.nodes.join("node-a", "http://a:1", now=NOW, volume_seen="vol-a", adopt=True)
    store.nodes.join("node-b", "http://b:1", now=NOW, volume_seen="vol-b", adopt=True)
    _, workspace = store.owners.create("ada@example.com", None)
    store.nodes.place_on(workspace.id, "node-a", now=NOW, lease=LEASE)
    assert store.nodes.volume("node-a").recorded == "vol-a"
    assert store.nodes.volume("node-a").placed == 1

    joined = store.nodes.join("node-a", "http://a:1", now=NOW + 1, volume_seen="", adopt=False)
    assert joined.node.misplaced
    assert store.nodes.volume("node-a").recorded == "vol-a"  # kept for its own volume's return
    [ws] = store.lost.workspaces()
    assert (ws.node, ws.workspace_id, ws.owner_email, ws.workspace, ws.why) == (
        "node-a",
        workspace.id,
        "ada@example.com",
        "default",
        "volume not its own",
    )
    _, other = store.owners.create("bob@example.com", None)
    with pytest.raises(PlacementError):
        store.nodes.place_on(other.id, "node-a", now=NOW + 1, lease=LEASE)
    placed = place(store.nodes, other.id, now=NOW + 1, heartbeat_timeout=LEASE, lease=LEASE)
    assert placed.node == "node-b"

    back = store.nodes.join("node-a", "http://a:1", now=NOW + 2, volume_seen="vol-a", adopt=True)
    assert not back.node.misplaced
    assert store.lost.workspaces() == []
